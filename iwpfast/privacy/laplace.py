"""The discrete Laplace mechanism on a grid: pure epsilon-LDP features (docs/math.md "Pure epsilon").

Per record: scale into [-1, 1] (the caller), clip to the L1 ball of radius ``bound`` (B), snap to the
grid ``L = 2^-k`` (``rint``), clip again **in integers** to ``|k|_1 <= N = floor(B / L)`` (float
rounding and nearest snapping can exceed it by up to p/2), and add ``Z`` discrete Laplace with
``P(Z = z) ~ exp(-lambda |z|)``, ``lambda = rate / 2^62 <= epsilon / (2 N)``: the L1 sensitivity of
the snapped integer vector is 2 N, so the ratio of output probabilities of any two records is at
most ``exp(2 N lambda) <= exp(epsilon)``: pure epsilon, delta = 0, nothing approximated.

The sampler is exact integer arithmetic on the release's AES-CTR keystream words; the per-value
work is the Numba kernel ``iwpfast._kernels.release.laplace_add`` and its twin
:func:`sample_python` (plain Python integers, the same integers from the same words).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..exceptions import InvalidInputError
from ..laplace import DiscreteLaplace

#: lambda = rate / 2^RATE_LOG2 (an exact rational; rate < 2^62 so every Bernoulli numerator fits)
RATE_LOG2 = 62
#: the grid keeps outputs exact in the output dtype unless |Z| L > TAIL_SCALES * b (prob. < e^-40)
TAIL_SCALES = 40.0
#: snapping moves a value by at most SNAP_FRACTION of the bound where the dtype allows (as the
#: discrete Gaussian)
SNAP_FRACTION = 1e-6
_MANTISSA_BITS = {"float32": 24, "float64": 53}
#: the epsilon_x the mechanism calibrates exactly for every bound from 1e-6 to 1e6 and both
#: dtypes (below about 1e-5 the float32 grid that keeps the outputs exact is coarser than the
#: bound; above about 2.5e5 the rate reaches 2^62)
LAPLACE_EPSILON_MIN = 1e-5
LAPLACE_EPSILON_MAX = 1e5
_TWO62 = 1 << 62


@dataclass(frozen=True)
class LaplaceLaw:
    """The calibrated discrete Laplace law of one release: grid, rate, and what follows from them."""

    grid: float         # L = 2^-k
    rate: int           # lambda = rate / 2^62 per grid unit
    n_max: int          # N = floor(bound / grid): the integer L1 clip
    epsilon: float      # the budget asked for; the guarantee is epsilon_effective <= epsilon
    dims: int           # p
    dtype: str

    @property
    def lam(self) -> float:
        return self.rate / float(_TWO62)

    @property
    def m_log2(self) -> int:
        """M = 2^m_log2 with lambda M in [1/2, 1) (the geometric's split G = U + M V)."""
        return RATE_LOG2 - self.rate.bit_length()

    @property
    def epsilon_effective(self) -> float:
        """2 N lambda, the exact guarantee, as the smallest double >= it: never below the true
        value and never above ``epsilon`` (2 N lambda <= epsilon exactly, and epsilon is a
        double; rounding up by one more ulp, as before, stored 1 ulp above epsilon when
        2 N lambda = epsilon)."""
        exact = Fraction(2 * self.n_max * self.rate, _TWO62)
        value = float(exact)
        if Fraction(value) < exact:
            value = math.nextafter(value, math.inf)
        return value

    @property
    def scale(self) -> float:
        """b = L / lambda, the scale in scaled feature units (alpha = exp(-L / b))."""
        return self.grid / self.lam

    @property
    def alpha(self) -> float:
        return math.exp(-self.lam)

    @property
    def variance(self) -> float:
        """Var(L Z) = 2 alpha L^2 / (1 - alpha)^2, exactly (scaled units squared)."""
        one_minus = -math.expm1(-self.lam)
        return 2.0 * self.alpha * self.grid * self.grid / (one_minus * one_minus)

    def noise_law(self) -> DiscreteLaplace:
        """The learner's view (iwpfast.laplace): the same alpha and grid."""
        return DiscreteLaplace(self.scale, self.grid)

    def metadata(self) -> dict:
        return {"law": "discrete_laplace", "grid": self.grid, "scale": self.scale,
                "variance": self.variance, "rate_numerator": self.rate,
                "rate_log2_denominator": RATE_LOG2, "l1_bound_grid_units": self.n_max,
                "epsilon_effective": self.epsilon_effective}


def choose_grid(epsilon: float, bound: float, dtype: str) -> float:
    """The power-of-two grid: outputs exact in ``dtype`` unless |Z| L > 40 b, and no coarser than
    2 * SNAP_FRACTION * bound where that allows."""
    fine = 2.0 ** math.floor(math.log2(2.0 * SNAP_FRACTION * bound))
    scale = 2.0 * bound / epsilon           # b, up to the rounding of N
    reach = bound + TAIL_SCALES * scale
    exact = 2.0 ** math.ceil(math.log2(reach / 2.0 ** _MANTISSA_BITS[dtype]))
    return max(fine, exact)


def calibrate_laplace(epsilon: float, bound: float, p: int, dtype: str = "float32") -> LaplaceLaw:
    """The law for an L1 ``bound`` and budget ``epsilon``: lambda = the largest rate / 2^62 with
    2 N lambda <= epsilon (exact rational arithmetic)."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon) \
            or epsilon <= 0:
        raise InvalidInputError(f"epsilon_x={epsilon!r} must be a finite number > 0")
    if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not math.isfinite(bound) \
            or bound <= 0:
        raise InvalidInputError(f"bound={bound!r} must be a finite number > 0 (the L1 bound of the "
                                "scaled features)")
    if dtype not in _MANTISSA_BITS:
        raise InvalidInputError(f"dtype={dtype!r}; choose float32 or float64")
    if not LAPLACE_EPSILON_MIN <= epsilon <= LAPLACE_EPSILON_MAX:
        raise InvalidInputError(
            f"epsilon_x={epsilon!r} is outside what the discrete Laplace mechanism calibrates "
            f"exactly ({LAPLACE_EPSILON_MIN:g} to {LAPLACE_EPSILON_MAX:g}: below, the noise's "
            f"grid would be coarser than any bound; above, its rate leaves the sampler's range); "
            f"use an epsilon_x between {LAPLACE_EPSILON_MIN:g} and {LAPLACE_EPSILON_MAX:g}")
    grid = choose_grid(float(epsilon), float(bound), dtype)
    n_max = math.floor(Fraction(bound) / Fraction(grid))
    if n_max < 1:
        raise InvalidInputError(f"bound={bound!r} is below the grid {grid:g}; use a larger bound")
    rate = math.floor(Fraction(epsilon) * _TWO62 / (2 * n_max))
    if not 2**20 <= rate < _TWO62:      # never inside the accepted range (checked for every
        raise InvalidInputError(        # bound from 1e-6 to 1e6 and both dtypes)
            f"epsilon_x={epsilon!r} with bound={bound!r} gives a noise rate {rate / _TWO62:.3g} per "
            f"grid unit outside what the sampler represents exactly; use an epsilon_x between "
            f"{LAPLACE_EPSILON_MIN:g} and {LAPLACE_EPSILON_MAX:g} and a bound between 1e-6 and 1e6")
    return LaplaceLaw(grid, rate, n_max, float(epsilon), int(p), dtype)


def clip_l1_(X: np.ndarray, bound: float, *, coords_in_unit: bool = False) -> int:
    """Scale rows of feature-major ``X`` (p, n) in place to L1 norm <= bound; return how many
    were scaled.  ``coords_in_unit=True`` promises |X| <= 1 elementwise (nothing to clip when
    bound >= p)."""
    p, n = X.shape
    if n == 0 or (coords_in_unit and bound >= p):
        return 0
    norm1 = np.abs(X[0]).astype(np.float64)
    for j in range(1, p):
        norm1 += np.abs(X[j])
    over = norm1 > bound
    count = int(np.count_nonzero(over))
    if count:
        idx = np.flatnonzero(over)
        factor = (bound / norm1[idx]).astype(X.dtype)
        for j in range(p):
            X[j, idx] *= factor
    return count


def snap_clip(v: np.ndarray, law: LaplaceLaw) -> np.ndarray:
    """Integer grid points k (n, p) int64 with |k|_1 <= N: rint(v / L), then, in rows above N, one
    step toward 0 at a time for the coordinate that rounding pushed out the most (largest
    |k_j| - |v_j| / L, the first on ties) until |k|_1 = N.  Deterministic; for a row inside the float
    L1 ball every coordinate ends within one grid unit of v_j / L (the rounded-up coordinates carry
    at least the excess, and each goes down once, to its floor toward 0)."""
    scaled = np.asarray(v, dtype=np.float64) / law.grid
    k = np.rint(scaled).astype(np.int64)
    excess = np.abs(k).sum(axis=1) - law.n_max
    rows = np.flatnonzero(excess > 0)
    # at most p/2 + a few rounding units per row: a loop over steps, vectorized over rows
    while rows.size:
        sub = k[rows]
        pushed = np.where(sub != 0, np.abs(sub) - np.abs(scaled[rows]), -np.inf)
        j = np.argmax(pushed, axis=1)
        at = (np.arange(rows.size), j)
        sub[at] -= np.sign(sub[at])
        k[rows] = sub
        excess[rows] -= 1
        rows = rows[excess[rows] > 0]
    return k


# ------------------------------------------------------------------------------ the twin
def _bernoulli_exp_python(words, pos, numerator):
    k = 1
    n = len(words)
    while True:
        if pos >= n:
            return False, -1
        v = int(words[pos]) >> 2
        pos += 1
        if v >= numerator:                    # Bernoulli(gamma) failed
            break
        if k >= 2:                            # Bernoulli(1/k): uniform on [0, k) is 0
            limit = _TWO62 - _TWO62 % k
            while True:
                if pos >= n:
                    return False, -1
                v = int(words[pos]) >> 2
                pos += 1
                if v < limit:
                    break
            if v % k:
                break
        k += 1
    return k % 2 == 1, pos


def sample_python(words: np.ndarray, pos: int, rate: int, m_log2: int, count: int
                  ) -> tuple[list[int], int]:
    """Up to ``count`` discrete Laplace integers from ``words[pos:]`` and the position after the last
    complete draw (fewer than ``count`` when the words run out).  Plain Python, from the
    definitions of docs/math.md "The exact sampler"; the kernel ``laplace_add`` gives the same."""
    out: list[int] = []
    n = len(words)
    gamma_m = rate << m_log2
    while len(out) < count:
        start, z = pos, None
        while z is None:
            while True:                        # U, accepted with probability exp(-lambda U)
                if pos >= n:
                    return out, start
                u = int(words[pos]) >> (64 - m_log2) if m_log2 > 0 else 0
                pos += 1
                accept, pos = _bernoulli_exp_python(words, pos, rate * u)
                if pos < 0:
                    return out, start
                if accept:
                    break
            v = 0
            while True:                        # V: successes of Bernoulli(exp(-lambda M))
                success, pos = _bernoulli_exp_python(words, pos, gamma_m)
                if pos < 0:
                    return out, start
                if not success:
                    break
                v += 1
            g = u + (v << m_log2)
            if pos >= n:
                return out, start
            negative = int(words[pos]) >> 63
            pos += 1
            if not (negative and g == 0):
                z = -g if negative else g
        out.append(z)
    return out, pos


class LaplaceNoise:
    """Applies a :class:`LaplaceLaw` to integer grid points, drawing from a
    ``discrete.WordBuffer`` (the release's keystream words, shared with the labels in order).

    When a draw runs out of words, the unread words move to the front of the buffer and the rest
    is filled from the stream, so the values depend on the stream only, not on the buffer size."""

    def __init__(self, law: LaplaceLaw):
        self.law = law
        self.rate = np.int64(law.rate)
        self.m_log2 = np.int64(law.m_log2)

    @staticmethod
    def _refill(buf) -> None:
        rest = buf.words.size - buf.pos
        if rest == buf.words.size:      # one draw needs more words than the buffer holds
            grown = np.empty(2 * buf.words.size, dtype=np.uint64)
            grown[:rest] = buf.words
            buf.words = grown
        else:
            buf.words[:rest] = buf.words[buf.pos:]
        buf.stream.fill(buf.words[rest:])
        buf.pos = 0

    def add(self, k: np.ndarray, buf, kernels=None) -> None:
        """In place: ``k += Z`` (a C-contiguous int64 array, any shape), with the kernel
        ``kernels.laplace_add`` or, when ``kernels`` is None, the Python twin."""
        if k.dtype != np.int64 or not k.flags.c_contiguous:
            raise ValueError("LaplaceNoise.add needs a C-contiguous int64 array")
        flat = k.reshape(-1)
        done, n = 0, flat.size
        while done < n:
            if buf.pos >= buf.words.size:
                self._refill(buf)
            if kernels is not None:
                done_now, pos = kernels.laplace_add(flat, done, buf.words, buf.pos, self.rate,
                                                    self.m_log2)
                done_now, pos = int(done_now), int(pos)
            else:
                z, pos = sample_python(buf.words, buf.pos, self.law.rate, self.law.m_log2, n - done)
                flat[done:done + len(z)] += np.array(z, dtype=np.int64)
                done_now = done + len(z)
            buf.pos = pos
            if done_now < n:
                self._refill(buf)
            done = done_now


class LaplaceFeatureMechanism:
    """Clip each feature vector to the L1 ball of radius ``bound``, snap it to the grid (an integer
    L1 clip included) and add discrete Laplace noise: pure ``epsilon``-LDP (delta = 0).

    The interface of ``mechanisms.GaussianFeatureMechanism`` that a release uses: ``clip_``,
    ``add_noise_``, ``sigma`` (the noise's standard deviation), ``variance``, ``noise_metadata``.
    """

    delta = 0.0
    discrete = None             # (the discrete *Gaussian* law of the other mechanism)

    def __init__(self, epsilon, bound, dims: int | None = None, dtype: str = "float32"):
        from .calibration import check_bound, check_epsilon

        self.epsilon = check_epsilon(epsilon, "epsilon_x")
        self.bound = check_bound(bound, "bound")
        self.dims = int(dims) if dims else 1
        self.law = calibrate_laplace(self.epsilon, self.bound, self.dims, dtype)
        self.noiser = LaplaceNoise(self.law)

    @property
    def sensitivity(self) -> float:
        """L1 sensitivity of the snapped vector in feature units, 2 N L (<= 2 bound)."""
        return 2.0 * self.law.n_max * self.law.grid

    @property
    def sigma(self) -> float:
        return math.sqrt(self.law.variance)

    @property
    def variance(self) -> float:
        return self.law.variance

    @property
    def grid(self) -> float:
        return self.law.grid

    def noise_metadata(self) -> dict:
        return {**self.law.metadata(), "sigma": self.sigma}

    def __repr__(self):
        return (f"LaplaceFeatureMechanism(epsilon={self.epsilon:g}, bound={self.bound:g} (L1), "
                f"grid=2^{int(round(math.log2(self.grid)))}, scale={self.law.scale:.6g})")

    def clip_(self, X: np.ndarray, scratch: np.ndarray | None = None, *,
              coords_in_unit: bool = False) -> int:
        """Scale rows of feature-major ``X`` (p, n) in place to L1 norm <= bound; return how many.
        (The snapped integer vector is clipped exactly again in ``add_noise_``.)"""
        return clip_l1_(X, self.bound, coords_in_unit=coords_in_unit)

    def add_noise_(self, X: np.ndarray, buf, kernels=None) -> None:
        """In place on feature-major ``X`` (p, n): snap and clip in integers, add Z, write L (k + Z)
        (the integers k + Z feature by feature, in the stream's order)."""
        if X.shape[0] > self.dims:
            raise InvalidInputError(f"this mechanism was calibrated for dims={self.dims} coordinates, "
                                    f"X has {X.shape[0]}; build it with dims={X.shape[0]}")
        k = np.ascontiguousarray(snap_clip(X.T, self.law).T)
        self.noiser.add(k, buf, kernels)
        np.multiply(k, self.law.grid, out=X, casting="unsafe")
