"""Discrete Gaussian noise on a power-of-two grid: the law, its exact sampler tables, its accounting.

The release snaps each scaled, clipped value ``v`` to the grid ``L = 2^-k`` (nearest, ties to
even), adds ``L * Z`` with ``Z`` discrete Gaussian of scale ``s = sigma / L``
(``P(Z = z) ~ exp(-z^2 / (2 s^2))`` on the integers) and writes ``L * (round(v / L) + Z)``; the
integer sum is formed exactly and every output inside the sampler's support is exact in the
output dtype (``L`` is chosen for that).  The theorem behind the printed guarantee, with every
term of delta, is in docs/release.md ("The guarantee of the discrete law"); in short, for a
feature vector of ``p`` coordinates with L2 bound ``B``:

- sensitivity in grid units after snapping: ``D = 2 B / L + sqrt(p)``;
- smoothing: ``q + Z`` is ``round(q + Z + U)`` with ``U`` uniform on the unit cell, and the density
  of ``Z + U`` is within ``exp(+-eta)`` of ``N(0, s^2 I)`` on the box ``|z_j| <= T``,
  ``eta = p [(T + 1/4) / (2 s^2) + log(Theta(s) / (sqrt(2 pi) s)) + zeta + 2 beta_1]``;
- so the exact mechanism is ``(eps, e^eta delta_G(eps - 2 eta) + beta + e^(eps - eta) beta_G)``-DP,
  ``delta_G`` the exact (Balle & Wang) delta of the Gaussian mechanism with noise ``s`` and
  sensitivity ``D``, ``beta`` the sampler's mass outside the box, ``beta_G`` the continuous
  Gaussian's mass beyond ``T + 1/2``;
- the sampler is exact up to a relative error: on its support each probability is within
  ``exp(+-zeta)`` of the truncated discrete Gaussian's (the alias weights are integers rounded up
  and corrected in the acceptance test; the acceptance test uses 64-bit uniforms and float64 exp),
  which is the ``zeta`` in ``eta``; ``beta_1`` bounds the exact law's mass beyond ``T`` (the
  truncation's renormalization).  The support is ``[-T - 1, T]`` (``T`` about ``TAIL_SD`` s): the
  box ``|z_j| <= T`` holds all of it but the one edge point ``-T - 1``, so the tail cut costs only
  the sampler's mass there (``beta``, bounded by ``p e^zeta`` times the two-sided tail beyond
  ``T``), never multiplied by ``e^eps``.  docs/release.md ("The guarantee of the discrete law")
  states the same theorem with its proof.

Everything here runs once per release (pure Python/NumPy); the per-value work is the Numba kernel
``iwpfast._kernels.release.discrete_gaussian_*`` and its NumPy twin :func:`sample_numpy`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..exceptions import InvalidInputError
from .calibration import CALIBRATION_CACHE_SIZE, analytic_gaussian_delta

#: the sampler's support: |Z| <= about TAIL_SD standard deviations (mass beyond ~1e-17); the
#: support is also the smoothing box of the accounting, so the continuous Gaussian's mass outside
#: it (~1e-17 per coordinate, times e^eps) is a term of delta
TAIL_SD = 8.5
#: bins per standard deviation of the coarse (alias) level: a bin is s/64 < w <= s/32 wide
_BINS_PER_SD = 32.0
#: bits of the alias coin (thresholds are integers in [0, 2^53]); 11 bits pick one of <= 2048 bins
_COIN_BITS = 53
_MAX_BINS_LOG2 = 64 - _COIN_BITS
#: bound on the float64 error of exp(-x) and of the table weights (a generous 2^-46; libm's exp
#: is within an ulp, 2^-53)
_FLOAT_ERR = 2.0**-46
#: snapping moves no value by more than SNAP_FRACTION of the bound (grid = 2 * that, or coarser
#: where float32 cannot hold the noise's support exactly on that grid)
SNAP_FRACTION = 1e-6
_MANTISSA_BITS = {"float32": 24, "float64": 53}
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


# ------------------------------------------------------------------------------ sampler shape
@dataclass(frozen=True)
class SamplerShape:
    """The geometry of the two-level sampler for scale ``s`` (no tables yet).

    Bins of width ``w = 2^bin_log2`` cover ``[-half_bins * w, half_bins * w)``; ``n_bins`` (a power
    of two, padded with empty bins) is what the alias level indexes.  ``accept_bits`` uniform bits
    decide acceptance; ``f_min`` is the smallest acceptance probability in the table.
    """

    s: float
    bin_log2: int
    half_bins: int
    n_bins_log2: int
    accept_bits: int
    f_min: float

    @property
    def width(self) -> int:
        return 1 << self.bin_log2

    @property
    def support(self) -> int:
        """Largest |Z| the sampler can return."""
        return self.half_bins * self.width

    def relative_error(self) -> float:
        """zeta: on the support, sampler pmf / exact (truncated) pmf lies in [e^-zeta, e^zeta].

        The acceptance probability rho_i exp(-x) (rho_i >= 1/2) is computed with relative error
        <= _FLOAT_ERR and compared with a uniform on a 2^-accept_bits grid (absolute error below
        2^-accept_bits, relative 2^-accept_bits / (f_min / 2)); numerator and normalizer each move by
        that much, hence the factor 2 (and log(1 + x) <= x, -log(1 - x) <= 2x for x < 1/2).
        """
        return 4.0 * (_FLOAT_ERR + 2.0**-self.accept_bits / (0.5 * self.f_min))


def sampler_shape(s: float) -> SamplerShape:
    if not (math.isfinite(s) and s >= 0.25):
        raise InvalidInputError(f"discrete Gaussian scale s = sigma/grid must be >= 0.25, got {s!r}")
    bin_log2 = max(0, math.floor(math.log2(s / _BINS_PER_SD))) if s >= _BINS_PER_SD else 0
    w = 1 << bin_log2
    half_bins = max(1, math.floor(TAIL_SD * s / w))
    n_bins_log2 = max(1, math.ceil(math.log2(2 * half_bins + 1)))  # >= 1 empty bin: rejection
    if n_bins_log2 > _MAX_BINS_LOG2:  # pragma: no cover - excluded by the choice of w
        raise AssertionError("too many bins")
    accept_bits = min(53, 64 - bin_log2)
    # largest x = (z^2 - z*^2) / (2 s^2) in a bin: (w - 1)(2 * support + w) / (2 s^2) bounds it
    x_max = (w - 1) * (2.0 * half_bins * w + w) / (2.0 * s * s)
    return SamplerShape(float(s), bin_log2, half_bins, n_bins_log2, accept_bits, math.exp(-x_max))


def tail_mass(s: float, k: int) -> float:
    """An upper bound on P(|Z| >= k) for the exact discrete Gaussian of scale s (k >= 1).

    ``sum_{z >= k} exp(-z^2/(2s^2)) <= exp(-k^2/(2s^2)) / (1 - exp(-k/s^2))`` (ratio of successive
    terms <= exp(-k/s^2)), and the normalizer is >= sqrt(2 pi) s (Poisson summation).
    """
    x = k / (s * s)
    return 2.0 * math.exp(-0.5 * k * x - _LOG_SQRT_2PI - math.log(s) - math.log(-math.expm1(-x)))


def log_theta_excess(s: float) -> float:
    """``log(Theta(s) / (sqrt(2 pi) s))`` >= 0, ``Theta(s) = sum_z exp(-z^2/(2 s^2))``.

    Poisson summation: ``Theta(s) = sqrt(2 pi) s (1 + 2 sum_{m>=1} exp(-2 pi^2 s^2 m^2))``.
    """
    a = 2.0 * math.pi**2 * s * s
    if a > 745.0:
        return 0.0
    total = sum(math.exp(-a * m * m) for m in range(1, 40))
    return math.log1p(2.0 * total)


# ------------------------------------------------------------------------------ tables
@dataclass(frozen=True)
class SamplerTables:
    """Alias tables of the coarse level (integers) and the bins' geometry, ready for the kernel."""

    shape: SamplerShape
    thresholds: np.ndarray   # uint64 [n_bins]: keep bin i when the 53-bit coin < thresholds[i]
    aliases: np.ndarray      # int32 [n_bins]: otherwise take bin aliases[i]
    bin_lo: np.ndarray       # int64 [n_bins]: smallest z of each bin
    near_abs: np.ndarray     # int64 [n_bins]: |z*|, the bin's |z| closest to 0 (envelope point)
    correction: np.ndarray   # float64 [n_bins]: rho_i = exact weight / integer weight (0: empty bin)
    inv_two_s2: float        # 1 / (2 s^2)


@lru_cache(maxsize=16)
def sampler_tables(s: float) -> SamplerTables:
    """The exact integer alias tables for scale ``s`` (Vose's method in integer arithmetic)."""
    shape = sampler_shape(s)
    n_bins = 1 << shape.n_bins_log2
    w, half = shape.width, shape.half_bins
    bin_lo = np.zeros(n_bins, dtype=np.int64)
    near_abs = np.zeros(n_bins, dtype=np.int64)
    weight = [0.0] * n_bins
    for i in range(2 * half):
        lo = (i - half) * w
        hi = lo + w - 1
        near = lo if lo >= 0 else (hi if hi <= 0 else 0)
        bin_lo[i] = lo
        near_abs[i] = abs(near)
        weight[i] = math.exp(-(near * near) / (2.0 * s * s))
    # Integer weights c_i = ceil(K e_i) >= K e_i, K chosen so that they sum to at most
    # n_bins * 2^53; the remainder goes to an empty bin (whose pick is a rejection), and the
    # acceptance test multiplies by rho_i = K e_i / c_i in [1/2, 1]: the law is exact up to the
    # float error of rho_i exp(-x).
    total = math.fsum(weight)
    unit = 1 << _COIN_BITS
    mass = n_bins * unit
    used = 2 * half
    # (the float products wt * scale carry relative errors ~2^-52: keep a margin of 2^-40 of the
    # mass so that the rounded-up integers never exceed it)
    scale = (mass * (1.0 - 2.0**-40) - 2 * used) / total
    counts = [math.ceil(wt * scale) if wt > 0 else 0 for wt in weight]
    counts[used] += mass - sum(counts)  # the first empty bin
    correction = np.zeros(n_bins, dtype=np.float64)
    for i in range(used):
        if counts[i] < 2:  # pragma: no cover - excluded by TAIL_SD and the bin count
            raise AssertionError(f"alias weight {counts[i]} of bin {i} too small for relative accuracy")
        correction[i] = weight[i] * scale / counts[i]
    thresholds = [0] * n_bins
    aliases = list(range(n_bins))
    small = [i for i, c in enumerate(counts) if c < unit]
    large = [i for i, c in enumerate(counts) if c >= unit]
    while small and large:
        i = small.pop()
        j = large[-1]
        thresholds[i] = counts[i]
        aliases[i] = j
        counts[j] -= unit - counts[i]
        if counts[j] < unit:
            large.pop()
            small.append(j)
    for i in large + small:  # exactly full (integer arithmetic: no leftovers but these)
        thresholds[i] = unit
    return SamplerTables(
        shape,
        np.array(thresholds, dtype=np.uint64),
        np.array(aliases, dtype=np.int32),
        bin_lo,
        near_abs,
        correction,
        1.0 / (2.0 * s * s),
    )


# ------------------------------------------------------------------------------ NumPy twin
def sample_numpy(words: np.ndarray, tables: SamplerTables, n: int) -> tuple[np.ndarray, int]:
    """The first ``n`` samples the keystream ``words`` gives, and how many words they used.

    Straight from the definition, vectorized over attempts: attempt ``a`` reads words ``2a`` and
    ``2a + 1``: bin = top ``n_bins_log2`` bits of the first, coin = its low 53 bits (keep the bin if
    coin < threshold, else its alias); offset r = low ``bin_log2`` bits of the second, u = its top
    ``accept_bits`` bits; z = bin_lo + r is accepted when u * 2^-accept_bits < rho * exp(-x),
    x = (|z| - |z*|)(|z| + |z*|) / (2 s^2).  Returns fewer than ``n`` samples (and all the words
    used) when the words run out.  The kernel does the same attempt by attempt: same bits.
    """
    shape = tables.shape
    m = words.size // 2
    w1 = words[0:2 * m:2]
    w2 = words[1:2 * m:2]
    bin_ = (w1 >> np.uint64(64 - shape.n_bins_log2)).astype(np.int64)
    coin = w1 & np.uint64((1 << _COIN_BITS) - 1)
    bin_ = np.where(coin < tables.thresholds[bin_], bin_, tables.aliases[bin_])
    r = (w2 & np.uint64(shape.width - 1)).astype(np.int64)
    u = (w2 >> np.uint64(64 - shape.accept_bits)).astype(np.float64) * 2.0**-shape.accept_bits
    z = tables.bin_lo[bin_] + r
    near = tables.near_abs[bin_]
    d = np.abs(z) - near
    x = (d * (np.abs(z) + near)).astype(np.float64) * tables.inv_two_s2
    rho = tables.correction[bin_]
    # the kernels decide by the squeeze 1 - x <= exp(-x) <= 1 - x + x^2/2 first; the same here so
    # that float rounding at the bounds cannot make the two disagree
    low = rho * (1.0 - x)
    accept = u < low
    between = ~accept & ~(u >= low + rho * (0.5 * x * x))
    accept[between] = u[between] < rho[between] * np.exp(-x[between])
    accepted = np.flatnonzero(accept)
    if accepted.size >= n:
        return z[accepted[:n]], 2 * (int(accepted[n - 1]) + 1) if n else 0
    return z[accepted], 2 * m


def discrete_gaussian_variance(s: float) -> float:
    """Var(Z) of the exact discrete Gaussian of scale ``s`` (in grid units squared).

    By Poisson summation ``Var = s^2 - 4 pi^2 s^4 * sum_m m^2 e^{-2 pi^2 s^2 m^2} * 2 / (1 + 2 sum_m
    e^{-2 pi^2 s^2 m^2})`` (the second term is below 1e-300 s^2 from s >= 6); the sampler's tail
    cut changes it by less than ``support^2 * tail_mass``.
    """
    a = 2.0 * math.pi**2 * s * s
    if a > 745.0:
        return s * s
    num = sum(m * m * math.exp(-a * m * m) for m in range(1, 40))
    den = 1.0 + 2.0 * sum(math.exp(-a * m * m) for m in range(1, 40))
    return s * s - 8.0 * math.pi**2 * s**4 * num / den


# ------------------------------------------------------------------------------ accounting
@dataclass(frozen=True)
class DeltaTerms:
    """Every term of the delta of the discrete mechanism at one (sigma, grid, epsilon)."""

    gaussian: float        # e^eta * delta_G(eps - 2 eta; s, D)
    sampler_edge: float    # beta: the sampler's mass outside the box (its support's edge point)
    gaussian_tail: float   # e^(eps - eta) beta_G: the continuous Gaussian's mass outside the box
    eta: float             # smoothed discrete vs continuous noise density, log-ratio on the box
    sensitivity: float     # D, in grid units, after snapping
    box: int               # T: the box is |z_j| <= T (grid units), the sampler's symmetric support

    @property
    def total(self) -> float:
        return self.gaussian + self.sampler_edge + self.gaussian_tail

    def as_dict(self) -> dict:
        return {"gaussian": self.gaussian, "sampler_edge": self.sampler_edge,
                "gaussian_tail": self.gaussian_tail, "eta": self.eta,
                "sensitivity_grid_units": self.sensitivity, "box_grid_units": self.box,
                "total": self.total}


def discrete_delta_grid(s: float, sensitivity: float, epsilon: float, p: int) -> DeltaTerms:
    """The delta at ``epsilon`` of the mechanism as implemented, in grid units.

    ``s``: noise scale; ``sensitivity``: L2 sensitivity D of the snapped integer vector;
    ``p``: coordinates.  The theorem (docs/release.md): with the box ``|z_j| <= T`` (T = the
    sampler's symmetric support), eta = p ((T + 1/4) / (2 s^2) + log(Theta/(sqrt(2 pi) s)) + zeta
    + 2 beta_1), the mechanism is (epsilon, e^eta delta_G(epsilon - 2 eta) + beta + e^(epsilon -
    eta) beta_G)-DP.
    """
    shape = sampler_shape(s)
    box = shape.support - 1  # the sampler returns z in [-support, support - 1]
    zeta = shape.relative_error()
    edge_one = tail_mass(s, box + 1) * math.exp(zeta)  # one coordinate, both sides, upper bound
    eta = p * ((box + 0.25) / (2.0 * s * s) + log_theta_excess(s) + zeta + 2.0 * tail_mass(s, box + 1))
    eps0 = epsilon - 2.0 * eta
    if eps0 <= 0.0:
        gaussian = 1.0  # the smoothing argument gives nothing at this scale
    else:
        gaussian = min(1.0, math.exp(eta) * max(0.0, analytic_gaussian_delta(s, eps0, sensitivity)))
    beta_g = p * math.erfc((box + 0.5) / (s * math.sqrt(2.0)))
    tail = math.exp(min(eps0 + eta, 700.0)) * beta_g
    return DeltaTerms(gaussian, min(1.0, p * edge_one), min(1.0, tail), eta, sensitivity, box)


def grid_sensitivity(bound: float, grid: float, p: int, onehot_blocks: int = 0,
                     onehot_coords: int = 0) -> float:
    """L2 sensitivity in grid units after snapping each of ``p`` coordinates (nearest point).

    With ``onehot_blocks`` = m one-hot blocks (``onehot_coords`` = K of the p coordinates, each 0
    or 1: grid points, so snapping leaves them; two blocks differ by sqrt(2) / grid) and the
    other p - K coordinates clipped to the L2 ball of ``bound`` (each moved at most 1/2 grid
    unit by snapping): sqrt((2 bound / grid + sqrt(p - K))^2 + 2 m / grid^2); without a numeric
    part (p = K) the first term is 0."""
    if not onehot_blocks:
        return 2.0 * bound / grid + math.sqrt(p)
    numeric = p - onehot_coords
    d_num = (2.0 * bound / grid + math.sqrt(numeric)) if numeric > 0 else 0.0
    return math.sqrt(d_num * d_num + 2.0 * onehot_blocks / (grid * grid))


@dataclass(frozen=True)
class DiscreteLaw:
    """The calibrated discrete Gaussian of one mechanism: grid, scale and accounting."""

    grid: float             # Lambda = 2^-k
    sigma: float            # scale in scaled units (= s * grid)
    s: float                # scale in grid units
    variance: float         # exact per-coordinate variance of the added noise (scaled units^2)
    terms: DeltaTerms
    dims: int               # p
    coord_bound: float      # |v_j| <= coord_bound before snapping
    dtype: str

    @property
    def grid_log2(self) -> int:
        return int(round(math.log2(self.grid)))

    def tables(self) -> SamplerTables:
        return sampler_tables(self.s)

    def metadata(self) -> dict:
        return {"law": "discrete_gaussian", "grid": self.grid, "sigma": self.sigma,
                "variance": self.variance, "scale_grid_units": self.s,
                "delta_terms": self.terms.as_dict()}


def choose_grid(sigma0: float, bound: float, coord_bound: float, dtype: str) -> float:
    """The grid 2^-k: fine enough that snapping moves a value by at most SNAP_FRACTION * bound,
    coarse enough that every output within the sampler's support is exact in ``dtype``."""
    fine = 2.0 ** math.floor(math.log2(2.0 * SNAP_FRACTION * bound))
    # outputs are grid * m with |m| <= coord_bound/grid + support, support <= (TAIL_SD + 1/16) s
    # (+ a bin); 2% headroom for the calibrated sigma exceeding sigma0
    reach = coord_bound + (TAIL_SD + 0.1) * 1.02 * sigma0
    exact = 2.0 ** math.ceil(math.log2(reach / 2.0 ** _MANTISSA_BITS[dtype]))
    return max(fine, exact)


def outputs_exact(law_grid: float, s: float, coord_bound: float, dtype: str) -> bool:
    shape = sampler_shape(s)
    return coord_bound / law_grid + 1 + shape.support <= 2.0 ** _MANTISSA_BITS[dtype]


# a pure function of public parameters (its law is frozen): computed once per process and
# parameter set, not per spec built or read
@lru_cache(maxsize=CALIBRATION_CACHE_SIZE)
def calibrate_discrete(epsilon: float, delta: float, bound: float, p: int, coord_bound: float,
                       dtype: str, sigma0: float, fixed_sigma: float | None = None,
                       onehot: tuple[int, int] = (0, 0)) -> DiscreteLaw:
    """The smallest sigma (rounded toward more noise) whose total delta is <= ``delta``.

    ``sigma0`` is the continuous Gaussian's sigma (it picks the grid).  ``fixed_sigma`` (classic
    calibration) evaluates that sigma instead; the caller refuses it when its delta is too big.
    ``onehot`` = (m, K): m one-hot blocks of K coordinates in all among the ``p`` (their 0/1
    values are grid points: they snap exactly; ``grid_sensitivity``).
    """
    grid = choose_grid(fixed_sigma or sigma0, bound, coord_bound, dtype)
    for _ in range(8):
        if onehot[0] and grid > 1.0:
            raise InvalidInputError(
                f"the noise (sigma {sigma0:.3g}) needs a grid coarser than 1 for exact float "
                "outputs, so one-hot values would not be grid points; use feature_dtype='float64' "
                "or a larger epsilon_x")
        law = _calibrate_on_grid(epsilon, delta, bound, p, coord_bound, dtype, grid, fixed_sigma,
                                 onehot)
        if outputs_exact(grid, law.s, coord_bound, dtype):
            return law
        grid *= 2.0
    raise AssertionError("no exact grid found")  # pragma: no cover


def _calibrate_on_grid(epsilon, delta, bound, p, coord_bound, dtype, grid, fixed_sigma,
                       onehot=(0, 0)) -> DiscreteLaw:
    sens = grid_sensitivity(bound, grid, p, *onehot)

    def terms(s):
        return discrete_delta_grid(s, sens, epsilon, p)

    if fixed_sigma is not None:
        s = fixed_sigma / grid
    else:
        hi = max(sens, 1.0)
        while terms(hi).total > delta:
            hi *= 2.0
            if hi > 1e6 * sens:
                floor = terms(hi)
                raise InvalidInputError(
                    f"no noise scale reaches delta={delta:g} at epsilon={epsilon:g} with the discrete "
                    f"sampler: the continuous Gaussian's mass beyond its {TAIL_SD:g}-sd support, "
                    f"multiplied by e^epsilon, alone is {floor.gaussian_tail:.3g}; use a smaller "
                    "epsilon or a larger delta")
        lo = hi
        while lo > 0.5 and terms(lo).total <= delta:
            lo *= 0.5
        if terms(lo).total <= delta:  # pragma: no cover - absurdly large delta
            hi = lo
        for _ in range(100):  # bisection; hi always satisfies: returning it rounds toward more noise
            mid = 0.5 * (lo + hi)
            if mid <= lo or mid >= hi:
                break
            if terms(mid).total <= delta:
                hi = mid
            else:
                lo = mid
        s = hi
    t = terms(s)
    sigma = s * grid
    return DiscreteLaw(grid, sigma, s, discrete_gaussian_variance(s) * grid * grid, t, p,
                       coord_bound, dtype)


# ------------------------------------------------------------------------------ applying the law
class WordBuffer:
    """Buffered 64-bit words of one keystream, consumed in order (attempts never straddle a refill:
    the buffer holds an even number of words and every consumer reads pairs or single words)."""

    def __init__(self, stream, size: int = 1 << 15, storage: np.ndarray | None = None):
        self.stream = stream
        self.words = storage if storage is not None else np.empty(max(2, size + (size & 1)), dtype=np.uint64)
        if self.words.size & 1 or self.words.dtype != np.uint64:
            raise ValueError("WordBuffer storage must be an even number of uint64 words")
        self.pos = self.words.size  # empty: the first use fills

    def refill(self) -> None:
        self.stream.fill(self.words)
        self.pos = 0

    def take(self, n: int) -> np.ndarray:
        """The next ``n`` words (a copy when they span a refill)."""
        if self.pos + n <= self.words.size:
            out = self.words[self.pos:self.pos + n]
            self.pos += n
            return out
        parts, need = [], n
        while need:
            if self.pos >= self.words.size:
                self.refill()
            k = min(need, self.words.size - self.pos)
            parts.append(self.words[self.pos:self.pos + k].copy())
            self.pos += k
            need -= k
        return np.concatenate(parts)

    def align(self) -> None:
        """Skip a word if the position is odd (after single-word consumers)."""
        self.pos += self.pos & 1


class DiscreteNoise:
    """Applies a :class:`DiscreteLaw`: snap to the grid, add grid * Z (kernel or NumPy twin)."""

    def __init__(self, law: DiscreteLaw):
        self.law = law
        t = law.tables()
        sh = t.shape
        self.tables = t
        self.inv_grid = 1.0 / law.grid
        self.grid = law.grid
        self.kernel_args = (
            t.thresholds, t.aliases, t.correction, np.int64(sh.half_bins), np.int64(sh.bin_log2),
            t.inv_two_s2,
            np.uint64(64 - sh.n_bins_log2), np.uint64((1 << _COIN_BITS) - 1),
            np.uint64(sh.width - 1), np.uint64(64 - sh.accept_bits), 2.0**-sh.accept_bits,
        )

    def sample(self, buf: WordBuffer, n: int) -> np.ndarray:
        """``n`` integer samples Z (int64), NumPy twin of the kernels' draws."""
        buf.align()
        out, got = [], 0
        while got < n:
            if buf.pos >= buf.words.size:
                buf.refill()
            z, used = sample_numpy(buf.words[buf.pos:], self.tables, n - got)
            buf.pos += used
            out.append(z)
            got += z.size
        return np.concatenate(out) if len(out) != 1 else out[0]

    def snap_add_numpy(self, values: np.ndarray, buf: WordBuffer) -> None:
        """In place, NumPy: ``values = (rint(values / grid) + Z) * grid`` (ties to even)."""
        m = np.rint(values.astype(np.float64) * self.inv_grid).astype(np.int64)
        m += self.sample(buf, values.shape[0])
        np.multiply(m.astype(np.float64), self.grid, out=values, casting="unsafe")

    def snap_add_kernel(self, kernels, values: np.ndarray, buf: WordBuffer) -> None:
        buf.align()
        i, n = 0, values.shape[0]
        while True:
            if buf.pos >= buf.words.size:
                buf.refill()
            i, buf.pos = kernels.discrete_snap_add(values, self.inv_grid, self.grid, i, buf.words,
                                                   buf.pos, *self.kernel_args)
            if i >= n:
                return
            buf.pos = buf.words.size
