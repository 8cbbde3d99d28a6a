"""Noise calibration: Gaussian noise scale and randomized-response keep probability.

Pure Python (``math`` only): these run once per release, never per row.

Under local DP any two records are neighbours, so the L2 sensitivity of the clipped feature vector
is the diameter of the ball it lives in, ``Delta = 2 * bound`` (docs/design.md section 1).
"""
from __future__ import annotations

import math
import warnings
from functools import lru_cache
from typing import overload

from ..exceptions import InvalidInputError, PrivacyCalibrationWarning
from ..label_noise import keep_probability

CALIBRATIONS = ("analytic", "classic")

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def log_ndtr(x: float) -> float:
    """``log(Phi(x))`` for the standard normal CDF, accurate in both tails.

    For ``x > -30`` ``erfc`` does not underflow and ``0.5 * erfc(-x / sqrt 2)`` has full relative
    precision (also for ``x`` large positive, where ``log1p`` keeps the tiny ``1 - Phi``).
    Below that the asymptotic series ``Phi(x) ~ phi(x)/|x| * (1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8)``
    is used; at ``|x| >= 30`` its truncation error is below 1e-13 relative.
    """
    if x > 5.0:
        return math.log1p(-0.5 * math.erfc(x / math.sqrt(2.0)))
    if x > -30.0:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2.0)))
    inv_x2 = 1.0 / (x * x)
    series = 1.0 - inv_x2 * (1.0 - 3.0 * inv_x2 * (1.0 - 5.0 * inv_x2 * (1.0 - 7.0 * inv_x2)))
    return -0.5 * x * x - math.log(-x) - _LOG_SQRT_2PI + math.log(series)


def _ndtr(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def analytic_gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """The exact delta of the Gaussian mechanism with noise ``sigma`` at ``epsilon`` (Balle & Wang 2018).

    ``delta(sigma) = Phi(D/(2 sigma) - eps sigma/D) - e^eps Phi(-D/(2 sigma) - eps sigma/D)``.
    The second term is computed as ``exp(eps + log Phi(.))`` so that ``e^eps`` never overflows
    and the tiny Phi in the far tail keeps its relative precision.
    """
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    first = _ndtr(a - b)
    log_second = epsilon + log_ndtr(-a - b)
    second = math.exp(log_second) if log_second < 700.0 else math.inf
    return first - second


def _check_positive(name: str, value, fix: str) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a number, got {value!r}; {fix}") from None
    if not math.isfinite(value) or value <= 0.0:
        raise InvalidInputError(f"{name} must be a finite number > 0, got {value!r}; {fix}")
    return value


def check_epsilon(epsilon, name: str = "epsilon") -> float:
    fix = "choose a privacy budget such as 1.0 (smaller = more private, noisier)"
    if name == "epsilon_y":
        fix += ", or None for public labels (released without noise)"
    return _check_positive(name, epsilon, fix)


def check_delta(delta, name: str = "delta") -> float:
    try:
        value = float(delta)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a number in (0, 1), got {delta!r}; use e.g. 1e-5") from None
    if not (0.0 < value < 1.0):
        raise InvalidInputError(
            f"{name} must lie strictly between 0 and 1, got {delta!r}; use e.g. 1e-5 "
            "(much smaller than 1/number of records)"
        )
    return value


def check_bound(bound, name: str = "bound") -> float:
    return _check_positive(
        name, bound, "give the public L2 norm bound of the scaled feature vector, e.g. sqrt(p) or 1.0"
    )


def gaussian_noise_scale(epsilon, delta, bound, calibration: str = "analytic") -> float:
    """Standard deviation sigma of the Gaussian mechanism on vectors of L2 norm <= ``bound``.

    The L2 sensitivity is ``2 * bound`` (local DP: the whole ball is one neighbourhood).

    calibration="analytic" (default): the smallest sigma satisfying the exact condition of Balle &
    Wang (2018), found by bisection and rounded toward more noise; valid for every epsilon > 0.
    calibration="classic": ``sigma = sqrt(8 ln(1.25/delta)) * bound / epsilon`` (Dwork & Roth,
    the paper's formula); its proof needs epsilon < 1, so a ``PrivacyCalibrationWarning`` is issued
    above 1, and where the exact condition shows that this sigma gives a delta above the requested
    one (epsilon above ~8.4 at delta = 1e-5), it is refused (InvalidInputError naming the true delta).

    >>> round(gaussian_noise_scale(1.0, 1e-5, 0.5), 4)   # sensitivity 1
    3.7306
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    bound = check_bound(bound)
    if calibration not in CALIBRATIONS:
        raise InvalidInputError(
            f"calibration must be one of {CALIBRATIONS}, got {calibration!r}; "
            "use 'analytic' (default, tighter) or 'classic' (the paper's formula)"
        )
    sensitivity = 2.0 * bound
    if calibration == "classic":
        sigma = classic_sigma(epsilon, delta, bound)
        true_delta = analytic_gaussian_delta(sigma, epsilon, sensitivity)
        if true_delta > delta:
            raise InvalidInputError(classic_refusal(epsilon, delta, true_delta))
        if epsilon > 1.0:
            warnings.warn(
                f"the classic Gaussian calibration is proven only for epsilon < 1 by its own formula "
                f"(got {epsilon:g}); "
                "use calibration='analytic', which is exact for every epsilon and adds less noise",
                PrivacyCalibrationWarning,
                stacklevel=2,
            )
        return sigma
    return _analytic_sigma(epsilon, delta, sensitivity)


def classic_sigma(epsilon: float, delta: float, bound: float) -> float:
    """The paper's (Dwork & Roth) sigma = sqrt(2 ln(1.25/delta)) * 2 bound / epsilon."""
    return math.sqrt(2.0 * math.log(1.25 / delta)) * 2.0 * bound / epsilon


def classic_refusal(epsilon: float, delta: float, true_delta: float) -> str:
    return (f"the classic calibration's sigma at epsilon={epsilon:g} gives delta={true_delta:.3g} "
            f"(exact), more than the requested delta={delta:g}: refusing to print a guarantee it "
            "does not give; use calibration='analytic' (CLI: --calibration analytic)")


#: a calibration is a pure function of public parameters: each set is computed once per process
#: (a release builds its spec, reads it back and writes it; a fit reads the spec its release
#: wrote), the ~116 evaluations of the condition are not repeated
CALIBRATION_CACHE_SIZE = 256


@lru_cache(maxsize=CALIBRATION_CACHE_SIZE)
def _analytic_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    def satisfies(sigma: float) -> bool:
        return analytic_gaussian_delta(sigma, epsilon, sensitivity) <= delta

    # delta(sigma) decreases in sigma.  Bracket: hi satisfies the condition, lo does not.
    hi = sensitivity
    while not satisfies(hi):
        hi *= 2.0
    lo = hi
    while satisfies(lo):
        lo *= 0.5
        if lo < 1e-300:  # delta >= the largest delta any sigma gives: no noise needed at all
            return lo
    # Invariant kept by bisection: hi satisfies; returning hi rounds toward more noise.
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if satisfies(mid):
            hi = mid
        else:
            lo = mid
    return hi


@overload
def label_keep_probability(epsilon_y: None) -> None: ...
@overload
def label_keep_probability(epsilon_y: float) -> float: ...
def label_keep_probability(epsilon_y: float | None) -> float | None:
    """Probability ``S(eps_y) = 1 / (1 + e^{-eps_y})`` that randomized response keeps a label.

    ``None`` means public labels (no label noise) and returns ``None``.

    >>> round(label_keep_probability(1.0), 6)
    0.731059
    """
    if epsilon_y is None:
        return None
    epsilon_y = _check_positive(
        "epsilon_y", epsilon_y, "choose a label budget such as 1.0, or None for public labels"
    )
    keep = keep_probability(epsilon_y)
    if keep >= 1.0:
        raise InvalidInputError(
            f"epsilon_y={epsilon_y:g} keeps every label (the keep probability rounds to 1 in "
            "double precision): no noise would be added while epsilon_y is printed; use "
            "epsilon_y <= 30, or public labels (epsilon_y=None; CLI: --public-labels)")
    return keep


def keep_threshold(keep: float, epsilon: float | None = None) -> int:
    """The randomized response as implemented keeps a label when a 53-bit uniform integer is below
    this threshold: floor(keep * 2^53) - 1, and, given ``epsilon``, at most floor(S(eps) * 2^53)
    with S computed to 60 significant digits.  So the implemented keep probability
    threshold / 2^53 never exceeds the exact S(eps_y), and the label's epsilon as implemented is at
    most the printed one.  (The float S can lie more than an ulp above the exact value: the first
    rule alone overshot by up to 0.46 units of 2^-53, e.g. at eps_y = 16.75.)"""
    threshold = max(0, math.floor(keep * 2.0**53) - 1)
    if epsilon is not None:
        threshold = min(threshold, exact_keep_floor(epsilon))
    return threshold


def exact_keep_floor(epsilon: float) -> int:
    """floor(S(eps) * 2^53) for the exact S(eps) = 1 / (1 + e^-eps) of the float ``epsilon``
    (decimal arithmetic with 60 digits: exact unless S * 2^53 lies within 1e-40 of an integer)."""
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 60
        exact = 1 / (1 + (-Decimal(float(epsilon))).exp())
        return int((exact * Decimal(2**53)).to_integral_value(rounding="ROUND_FLOOR"))
