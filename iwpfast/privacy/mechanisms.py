"""The local-DP mechanisms of a release (docs/design.md section 1), validated at construction.

Arrays are feature-major: features are a ``(p, n)`` array (one contiguous row per feature), the
layout the release writes and the kernels read.  All methods work in place on preallocated
buffers and never loop over rows in Python.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..exceptions import InvalidInputError
from ..label_noise import kary_probabilities  # noqa: F401 (re-exported; defined there)
from ..noise_registry import law_record, noise_choices, resolve

if TYPE_CHECKING:                    # discrete.py is imported lazily (only the discrete law needs it)
    from .discrete import DiscreteLaw
from .calibration import (
    CALIBRATIONS,
    check_bound,
    check_delta,
    check_epsilon,
    classic_refusal,
    gaussian_noise_scale,
    keep_threshold,
    label_keep_probability,
)


def check_noise(noise: str) -> str:
    """``noise`` if a registered law has it (``iwpfast.noise_registry``).  The built-in ones, of
    the Gaussian mechanism: "discrete" (default) = exact discrete Gaussian on a power-of-two grid
    from an AES-CTR keystream, a guarantee for the bits written; "float" = floating-point Gaussian
    from SFC64 (fast, reproduces the paper; its guarantee holds for real-valued noise only)."""
    if noise not in noise_choices():
        raise InvalidInputError(
            f"noise must be one of {noise_choices()}, got {noise!r}; use 'discrete' (default: exact "
            "discrete Gaussian on a grid, a guarantee for the bits written) or 'float' (speed "
            "comparisons)")
    return noise


def calibrate_float_gaussian(mech, dims: int, coord_bound: float, dtype: str) -> None:
    """The float law's calibration (``noise_registry``): sigma of the continuous Gaussian."""
    mech.sigma = gaussian_noise_scale(mech.epsilon, mech.delta, mech.calibration_bound,
                                      mech.calibration)
    mech.discrete = None


def calibrate_discrete_gaussian(mech, dims: int, coord_bound: float, dtype: str) -> None:
    """The discrete law's calibration (``noise_registry``): ``discrete.calibrate_discrete``."""
    from .discrete import calibrate_discrete

    fixed = None
    if mech.calibration == "classic":
        # the paper's sigma (refused when the exact condition shows it misses delta even for
        # real-valued noise); the discrete accounting of that sigma is checked below
        fixed = gaussian_noise_scale(mech.epsilon, mech.delta, mech.calibration_bound, "classic")
        sigma0 = fixed
    else:
        sigma0 = gaussian_noise_scale(mech.epsilon, mech.delta, mech.calibration_bound, "analytic")
    if mech.onehot_blocks:
        coord_bound = 1.0                     # a one-hot coordinate is 0 or 1
    law = calibrate_discrete(mech.epsilon, mech.delta, mech.bound, dims, coord_bound, dtype,
                             sigma0, fixed_sigma=fixed,
                             onehot=(mech.onehot_blocks, mech.onehot_coords))
    if law.terms.total > mech.delta:
        raise InvalidInputError(classic_refusal(mech.epsilon, mech.delta, law.terms.total))
    mech.discrete = law
    mech.sigma = law.sigma


class _NoiseLaw:
    """Sigma and law of a Gaussian-type mechanism on vectors of ``dims`` coordinates.

    float: sigma from the analytic/classic calibration of the continuous Gaussian.
    discrete: ``iwpfast.privacy.discrete.calibrate_discrete`` (grid, sigma, every delta term).
    """

    # set by the subclasses' __init__ (declared here for the type checker)
    noise: str
    epsilon: float
    delta: float
    bound: float
    calibration: str
    sigma: float
    discrete: DiscreteLaw | None

    #: one-hot blocks (m) and their coordinates (K) among the ``dims``: set by the feature mechanism
    onehot_blocks: int = 0
    onehot_coords: int = 0
    dims: int = 1

    @property
    def calibration_bound(self) -> float:
        """Half the L2 sensitivity: ``bound`` for a vector clipped to the ball of radius bound;
        sqrt(B^2 + m/2) for [numeric part clipped to B; m one-hot blocks] (sensitivity
        sqrt(4 B^2 + 2 m): two one-hot blocks differ by sqrt(2); docs/release.md "Categorical
        columns"); sqrt(m/2) without a numeric part."""
        if not self.onehot_blocks:
            return self.bound
        numeric = self.bound if self.dims > self.onehot_coords else 0.0
        return math.sqrt(numeric * numeric + 0.5 * self.onehot_blocks)

    def _calibrate(self, dims: int, coord_bound: float, dtype: str) -> None:
        resolve(law_record("gaussian", self.noise).calibrate)(self, dims, coord_bound, dtype)

    @property
    def law(self) -> str:
        return law_record("gaussian", self.noise).law

    @property
    def grid(self) -> float | None:
        return None if self.discrete is None else self.discrete.grid

    @property
    def variance(self) -> float:
        """The exact per-coordinate variance of the noise added (scaled units squared)."""
        return self.sigma**2 if self.discrete is None else self.discrete.variance

    def noise_metadata(self) -> dict:
        if self.discrete is not None:
            return self.discrete.metadata()
        return {"law": self.law, "grid": None, "sigma": self.sigma, "variance": self.sigma**2}

# Clipping multiplies by bound/||x|| in floating point; aim a little inside the ball so that the
# rounding of that product and of the norm (a few float32 ulps) never lands outside it.
_CLIP_SAFETY = 1.0 - 2.0**-20


def _check_calibration(calibration: str) -> str:
    if calibration not in CALIBRATIONS:
        raise InvalidInputError(
            f"calibration must be one of {CALIBRATIONS}, got {calibration!r}; "
            "use 'analytic' (default, tighter) or 'classic' (the paper's formula)"
        )
    return calibration


def _discrete_noise_(law, rows: np.ndarray, source) -> None:
    from .discrete import DiscreteNoise, WordBuffer
    from .randomness import NoiseKey

    if isinstance(source, NoiseKey):
        source = WordBuffer(source.stream(0))
    if not isinstance(source, WordBuffer):
        raise InvalidInputError(
            "the discrete law draws from a keystream: pass a discrete.WordBuffer or a "
            "randomness.NoiseKey (e.g. NoiseKey.from_os_entropy()), not "
            f"{type(source).__name__}; noise='float' takes a numpy Generator")
    noiser = DiscreteNoise(law)
    for row in rows:
        noiser.snap_add_numpy(row, source)


class GaussianFeatureMechanism(_NoiseLaw):
    """Clip each feature vector to the L2 ball of radius ``bound``, then add Gaussian noise.

    noise="discrete" (default): snap each coordinate to the grid 2^-k and add grid * Z, Z exact
    discrete Gaussian (``iwpfast.privacy.discrete``); ``(epsilon, delta)``-LDP for the bits
    written, every approximation in delta.  ``dims`` (the number of features) enters through the
    snapping; ``dtype`` is the output dtype (the grid keeps every output exact in it).
    noise="float": N(0, sigma^2 I) in floating point, sigma from :func:`gaussian_noise_scale`
    (sensitivity 2*bound); a guarantee for real-valued noise only.
    """

    def __init__(self, epsilon, delta, bound, calibration: str = "analytic", noise: str = "discrete",
                 dims: int | None = None, dtype: str = "float32", onehot_blocks: int = 0,
                 onehot_coords: int = 0):
        self.epsilon = check_epsilon(epsilon, "epsilon_x")
        self.delta = check_delta(delta, "delta")
        self.bound = check_bound(bound, "bound")
        self.calibration = _check_calibration(calibration)
        self.noise = check_noise(noise)
        self.dims = int(dims) if dims else 1
        # m one-hot blocks of K coordinates in all (the last K of nothing in particular: only
        # their counts enter the accounting); the numeric part (dims - K coordinates) is what
        # ``bound`` clips, each block has norm exactly 1
        self.onehot_blocks = int(onehot_blocks)
        self.onehot_coords = int(onehot_coords)
        if self.onehot_coords > self.dims or (self.onehot_blocks > 0) != (self.onehot_coords > 0) \
                or self.onehot_blocks > self.onehot_coords:
            raise InvalidInputError(f"onehot_blocks={onehot_blocks}, onehot_coords={onehot_coords} "
                                    f"do not fit dims={self.dims}")
        self._calibrate(self.dims, min(1.0, self.bound), dtype)

    @property
    def sensitivity(self) -> float:
        """The L2 sensitivity the noise is calibrated for: 2 bound, or sqrt(4 B^2 + 2 m) with m
        one-hot blocks."""
        return 2.0 * self.calibration_bound

    def __repr__(self):
        return (
            f"GaussianFeatureMechanism(epsilon={self.epsilon:g}, delta={self.delta:g}, "
            f"bound={self.bound:g}, calibration={self.calibration!r}, noise={self.noise!r}, "
            f"sigma={self.sigma:.6g})"
        )

    def clip_(self, X: np.ndarray, scratch: np.ndarray | None = None, *, coords_in_unit: bool = False) -> int:
        """Scale rows of feature-major ``X`` (p, n) in place to norm <= bound; return how many.

        ``coords_in_unit=True`` promises |X| <= 1 elementwise, so that nothing needs clipping
        when bound >= sqrt(p) (then the norm is skipped entirely).
        """
        return clip_l2_(X, self.bound, scratch, coords_in_unit=coords_in_unit)

    def add_noise_(self, X: np.ndarray, rng, noise: np.ndarray | None = None) -> None:
        """Add the noise in place to feature-major ``X`` (p, n).

        discrete law: ``rng`` is a ``discrete.WordBuffer`` (or a ``NoiseKey``: its stream 0);
        each row is snapped to the grid and ``grid * Z`` added (NumPy twin of the kernel).
        float law: ``rng`` is a ``numpy.random.Generator``; ``X += sigma * N(0, I)``, ``noise`` a
        C-contiguous scratch of X's shape/dtype.
        """
        if self.discrete is not None:
            if X.ndim == 2 and X.shape[0] > self.dims:
                # the snapping term of the sensitivity grows with the number of coordinates
                raise InvalidInputError(
                    f"this mechanism was calibrated for dims={self.dims} coordinates, X has "
                    f"{X.shape[0]}; build it with dims={X.shape[0]}")
            _discrete_noise_(self.discrete, X.reshape(-1, X.shape[-1]), rng)
            return
        if not isinstance(rng, np.random.Generator):
            raise InvalidInputError("the float law draws from a numpy.random.Generator")
        if noise is None:
            noise = np.empty_like(X)
        rng.standard_normal(dtype=X.dtype, out=noise)
        np.multiply(noise, X.dtype.type(self.sigma), out=noise)
        np.add(X, noise, out=X)

    def privatize(self, X: np.ndarray, rng) -> np.ndarray:
        """Convenience (allocating) version: a clipped, noised copy of feature-major ``X``.

        ``rng`` as in :meth:`add_noise_`: a ``NoiseKey`` / ``discrete.WordBuffer`` for the discrete
        law (e.g. ``NoiseKey.from_os_entropy()``), a ``numpy.random.Generator`` for the float law.
        """
        out = np.array(X, dtype=np.result_type(X.dtype, np.float32), copy=True)
        self.clip_(out)
        self.add_noise_(out, rng, np.empty_like(out))
        return out


def clip_l2_(X: np.ndarray, bound: float, scratch: np.ndarray | None = None, *,
             coords_in_unit: bool = False) -> int:
    """Scale rows of feature-major ``X`` (p, n) in place to L2 norm <= bound (aiming
    ``_CLIP_SAFETY`` inside); return how many were scaled."""
    p, n = X.shape
    if n == 0:
        return 0
    if coords_in_unit and bound * bound >= p:
        return 0
    if scratch is None or scratch.shape[0] < n:
        scratch = np.empty(n, dtype=X.dtype)
    norm2 = np.empty(n, dtype=np.float64)
    np.multiply(X[0], X[0], out=norm2)
    row = scratch[:n]
    for j in range(1, p):
        np.multiply(X[j], X[j], out=row)
        norm2 += row
    limit = bound * _CLIP_SAFETY
    over = norm2 > limit * limit
    count = int(np.count_nonzero(over))
    if count == 0:
        return 0
    if count * 8 < n:  # few rows clip: touch only those
        idx = np.flatnonzero(over)
        factor = (limit / np.sqrt(norm2[idx])).astype(X.dtype)
        for j in range(p):
            X[j, idx] *= factor
    else:  # many: one dense multiply per feature beats gather/scatter
        np.sqrt(norm2, out=norm2)
        # a row inside the ball gets limit / limit = 1 exactly; and a zero row (all features at
        # the centre of their ranges) no division by zero
        np.maximum(norm2, limit, out=norm2)
        np.divide(limit, norm2, out=norm2)
        factor = row
        np.copyto(factor, norm2, casting="unsafe")
        for j in range(p):
            np.multiply(X[j], factor, out=X[j])
    return count


#: the smallest budget of randomized response.  The unbiased inverse divides by q - r (keep
#: probability minus that of each other value, about epsilon / k), and q and r are each rounded to
#: 2^-53: below this the gap has fewer than 6 correct digits, and at 1e-300 q == r (the fit then
#: diverges).  Such a budget keeps no usable signal anyway.
MIN_RR_EPSILON = 1e-9


def check_rr_epsilon(epsilon: float, parameter: str) -> float:
    """``epsilon`` of a randomized response, refused below ``MIN_RR_EPSILON``."""
    if epsilon < MIN_RR_EPSILON:
        flag = "--epsilon-cat" if parameter.startswith("epsilon_categorical") else "--epsilon-y"
        raise InvalidInputError(
            f"{parameter}={epsilon:g} is too small for randomized response in double precision: "
            f"the gap between the keep probability and each other value's (about epsilon / k), "
            f"which the unbiased inverse divides by, is lost to rounding (all of it below 1e-16); "
            f"use {parameter} >= {MIN_RR_EPSILON:g} (CLI: {flag})")
    return epsilon


class RandomizedResponse:
    """Keep a {-1, +1} label with probability ``S(eps) = 1/(1+e^{-eps})``, flip it otherwise (eps-LDP)."""

    def __init__(self, epsilon):
        self.epsilon = check_rr_epsilon(check_epsilon(epsilon, "epsilon_y"), "epsilon_y")
        keep = label_keep_probability(self.epsilon)
        assert keep is not None                         # a number epsilon: a number S(epsilon)
        self.keep_probability: float = keep
        #: keep when a 53-bit uniform integer is below it (the discrete law's keystream path)
        self.keep_threshold = keep_threshold(self.keep_probability, self.epsilon)

    def __repr__(self):
        return f"RandomizedResponse(epsilon={self.epsilon:g}, keep_probability={self.keep_probability:.6g})"

    def apply(self, y: np.ndarray, rng: np.random.Generator, out: np.ndarray | None = None) -> np.ndarray:
        """Randomized response on int8 labels in {-1, +1}.

        Uniforms are float64 (53-bit grid), so P[keep] equals the keep probability up to 2^-53,
        far below the float error in e^eps itself; float32 uniforms would be off by ~6e-8.
        """
        keep = rng.random(y.shape[0]) < self.keep_probability
        flipped = np.where(keep, y, -y)  # np.where is ~30% faster than negative(where=...)
        if out is None:
            return flipped.astype(np.int8, copy=False)
        np.copyto(out, flipped, casting="unsafe")
        return out

    def apply_words(self, y: np.ndarray, words: np.ndarray) -> np.ndarray:
        """Randomized response in place on int8 {-1, +1} labels from keystream words (one each):
        keep where ``words >> 11 < keep_threshold`` (kernel twin: ``randomized_response_words``)."""
        keep = (words[: y.shape[0]] >> np.uint64(11)) < np.uint64(self.keep_threshold)
        np.negative(y, out=y, where=~keep)
        return y


class KaryRandomizedResponse:
    """k-ary randomized response on class indices 0..k-1 (eps-LDP): keep the class with
    probability q, else report one of the k - 1 others uniformly (each with probability r)."""

    def __init__(self, epsilon, n_classes: int, parameter: str = "epsilon_y"):
        self.epsilon = check_rr_epsilon(check_epsilon(epsilon, parameter), parameter)
        self.n_classes = int(n_classes)
        self.keep_probability, self.other_probability = kary_probabilities(self.epsilon, self.n_classes)
        self.implemented_epsilon = _check_kary_grid(self.epsilon, self.n_classes,
                                                    self.keep_probability, self.other_probability,
                                                    parameter)

    def __repr__(self):
        return (f"KaryRandomizedResponse(epsilon={self.epsilon:g}, n_classes={self.n_classes}, "
                f"q={self.keep_probability:.6g}, r={self.other_probability:.6g})")

    def apply(self, codes: np.ndarray, rng: np.random.Generator, out: np.ndarray | None = None) -> np.ndarray:
        """Randomized class indices for ``codes`` (integers in [0, k)), one float64 uniform a row.

        u < q keeps the class; otherwise j = floor((u - q) / r) in [0, k - 2] (each with
        probability r, up to the 2^-53 grid) reports class (code + 1 + j) mod k, i.e. one of the
        k - 1 other classes uniformly.
        """
        k = self.n_classes
        q, r = self.keep_probability, self.other_probability
        u = rng.random(codes.shape[0])
        keep = u < q
        if r > 0.0:
            shift = np.minimum(np.floor(np.maximum(u - q, 0.0) / r), k - 2).astype(np.int64) + 1
            shift[keep] = 0
        else:                          # e^-eps underflowed: q = 1, every class is kept
            shift = np.zeros(codes.shape[0], np.int64)
        result = (codes.astype(np.int64) + shift) % k
        if out is None:
            return result.astype(np.int8 if k <= 127 else np.int16)
        np.copyto(out, result, casting="unsafe")
        return out




#: the most the 2^-53 grid of the uniforms may move k-ary randomized response's epsilon (absolute)
KARY_EPSILON_TOLERANCE = 1e-6


def kary_grid_counts(q: float, r: float, k: int) -> np.ndarray:
    """How many of the 2^53 uniforms u = U 2^-53 (U = 0 .. 2^53 - 1, the grid of
    ``Generator.random`` and of the keystream uniforms) :meth:`KaryRandomizedResponse.apply`
    maps to each outcome: [kept, shift 1, ..., shift k - 1].  Exact: the outcome of u is
    monotone in u, so each boundary is found by bisection with the same float operations."""
    grid = 2**53
    keep = math.ceil(q * grid)                      # u < q: U < q 2^53 (exact: a power-of-two scale)
    if r <= 0.0:
        return np.array([min(keep, grid)] + [0] * (k - 1), dtype=np.int64)
    targets = np.arange(1, k - 1, dtype=np.float64)  # first U whose shift index reaches j
    lo = np.full(targets.shape, keep, dtype=np.int64)
    hi = np.full(targets.shape, grid, dtype=np.int64)
    for _ in range(55):
        mid = (lo + hi) // 2
        u = mid.astype(np.float64) * 2.0**-53
        j = np.minimum(np.floor(np.maximum(u - q, 0.0) / r), k - 2)
        reached = j >= targets
        active = lo < hi
        hi = np.where(active & reached, mid, hi)
        lo = np.where(active & ~reached, mid + 1, lo)
    edges = np.concatenate([[keep], lo, [grid]]).astype(np.int64)
    return np.concatenate([[keep], np.diff(edges)]).astype(np.int64)


def _check_kary_grid(epsilon: float, k: int, q: float, r: float,
                     parameter: str = "epsilon_y") -> float:
    """The epsilon of k-ary randomized response as implemented (on the 2^-53 grid), or an error
    when an outcome is impossible (q rounds to 1) or the grid moves epsilon by more than
    ``KARY_EPSILON_TOLERANCE``."""
    counts = kary_grid_counts(q, r, k)
    largest = math.floor(math.log(KARY_EPSILON_TOLERANCE * 2.0**53))
    if counts.min() == 0:
        raise InvalidInputError(
            f"{parameter}={epsilon:g} with {k} classes keeps every label as implemented (the keep "
            f"probability rounds to 1 on the 2^-53 grid of the uniforms): no noise would be added "
            f"while {parameter} is printed; use {parameter} <= {largest}, or public labels "
            f"(epsilon_y=None; CLI: --public-labels)")
    implemented = math.log(int(counts.max()) / int(counts.min()))
    if abs(implemented - epsilon) > KARY_EPSILON_TOLERANCE:
        raise InvalidInputError(
            f"{parameter}={epsilon:g} with {k} classes: on the 2^-53 grid of the uniforms the "
            f"mechanism as implemented gives epsilon {implemented:.9g}, more than "
            f"{KARY_EPSILON_TOLERANCE:g} away from the printed one; use {parameter} <= {largest}")
    return implemented


class GaussianTargetMechanism(_NoiseLaw):
    """Regression target: clip to [-bound, bound], add Gaussian noise (discrete by default, as
    :class:`GaussianFeatureMechanism` with one coordinate); sensitivity 2*bound."""

    def __init__(self, epsilon, delta, bound=1.0, calibration: str = "analytic", noise: str = "discrete",
                 dtype: str = "float32"):
        self.epsilon = check_epsilon(epsilon, "epsilon_y")
        self.delta = check_delta(delta, "delta_y")
        self.bound = check_bound(bound, "target_bound")
        self.calibration = _check_calibration(calibration)
        self.noise = check_noise(noise)
        self._calibrate(1, min(1.0, self.bound), dtype)

    def __repr__(self):
        return (
            f"GaussianTargetMechanism(epsilon={self.epsilon:g}, delta={self.delta:g}, "
            f"bound={self.bound:g}, calibration={self.calibration!r}, sigma={self.sigma:.6g})"
        )

    def apply_(self, t: np.ndarray, rng, noise: np.ndarray | None = None) -> int:
        """Clip ``t`` to [-bound, bound] and add noise, in place; return the number clipped.

        ``rng``: a ``numpy.random.Generator`` (float law) or a ``discrete.WordBuffer`` (discrete).
        """
        clipped = int(np.count_nonzero(np.abs(t) > self.bound))
        np.clip(t, -self.bound, self.bound, out=t)
        if self.discrete is not None:
            _discrete_noise_(self.discrete, t.reshape(1, -1), rng)
            return clipped
        if noise is None or noise.shape != t.shape:
            noise = np.empty_like(t)
        rng.standard_normal(dtype=t.dtype, out=noise)
        np.multiply(noise, t.dtype.type(self.sigma), out=noise)
        np.add(t, noise, out=t)
        return clipped

