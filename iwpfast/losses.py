"""GLM losses: the names, and their scalar derivatives f^(n) in NumPy (the spec).

A classification loss is ``l(theta, x, y) = f(y * theta^T x)`` for a scalar function ``f`` of the
margin ``v``; the regression loss ``squared_error`` is ``f(r) = r^2 / 2`` of the residual
``r = theta^T x - y``.  Everything the IWP estimator needs is the scalar derivatives ``f^(n)`` and the
inverse-Weierstrass series built from them (docs/design.md section 2):

    F_j(v) = sum_k (-tau)^k / k! * f^(2k+j)(v),     j = 0, 1, 2

=============  ====================  ====================================================
name           f(v)                  F_j
=============  ====================  ====================================================
exponential    exp(-v)               (-1)^j exp(-tau - v)               (exact, all k)
quadratic      (v - 1)^2 / 2         F_0 = (v-1)^2/2 - tau, F_1 = v-1, F_2 = 1  (exact)
logistic       log(1 + exp(-v))      truncated: F_0, F_1 to k = K, F_2 to k = K-1
squared_error  r^2 / 2               F_0 = r^2/2 - tau, F_1 = r, F_2 = 1  (exact)
=============  ====================  ====================================================

The logistic series diverges, so it is truncated so that ``(F_1, F_2)`` is the *exact* gradient of
the truncated loss ``F_0`` (docs/design.md section 2).  Its derivatives are ``f' = -S(-v)`` and
``f^(n) = S^(n-1)`` for ``n >= 2`` with the sigmoid ``S``; sigmoid derivatives of any order are
computed in the Eulerian-number form in ``u = exp(-|v|)`` (no ``1 - S`` cancellation at large |v|)::

    S^(n)(v) = sum_{k=0}^{n-1} (-1)^k A(n, k) u^(k+1) / (1 + u)^(n+1)          for v <= 0
    S^(n)(v) = (-1)^(n+1) S^(n)(-v)                                           for v > 0

with A(n, k) the Eulerian numbers (permutations of n with k ascents).

Example::

    >>> from iwpfast.losses import derivative, series_F
    >>> float(derivative("logistic", 1, 0.0))
    -0.5
    >>> float(series_F("exponential", 1, 0.0, tau=0.5))   # -exp(-0.5)
    -0.6065306597126334
"""
from __future__ import annotations

from functools import cache

import numpy as np

from .exceptions import InvalidInputError

CLASSIFICATION_LOSSES = ("exponential", "quadratic", "logistic")
REGRESSION_LOSSES = ("squared_error",)
#: every loss name; the kernels' integer code of each is in iwpfast._kernels.abi.LOSS_CODES
LOSSES = CLASSIFICATION_LOSSES + REGRESSION_LOSSES


def check_loss(loss: str, *, allowed: tuple[str, ...] | None = None, parameter: str = "loss") -> str:
    """Return ``loss`` if it is a known loss name (among ``allowed`` if given), else raise.

    The error lists the valid choices so the caller can fix the call.
    """
    choices = LOSSES if allowed is None else tuple(allowed)
    if not isinstance(loss, str) or loss not in choices:
        raise InvalidInputError(
            f"{parameter}={loss!r} is not a known loss here; choose one of {', '.join(choices)}")
    return loss


def check_order(n, parameter: str = "n") -> int:
    """A derivative order / truncation must be a non-negative integer."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
        raise InvalidInputError(f"{parameter}={n!r} must be a non-negative integer")
    return int(n)


@cache
def eulerian_numbers(n: int) -> tuple[int, ...]:
    """A(n, k) for k = 0..n-1 (exact integers); A(n,k) = (k+1) A(n-1,k) + (n-k) A(n-1,k-1)."""
    if n < 1:
        raise InvalidInputError(f"eulerian_numbers needs n >= 1, got n={n}")
    row = [1]
    for m in range(2, n + 1):
        prev = row + [0]
        row = [(k + 1) * prev[k] + (m - k) * (prev[k - 1] if k > 0 else 0) for k in range(m)]
    return tuple(row)


@cache
def _eulerian_coefficients(n: int) -> np.ndarray:
    """Float coefficients (-1)^k A(n,k) of u^(k+1); exact in float64 for every order used here."""
    return np.array([(-1) ** k * a for k, a in enumerate(eulerian_numbers(n))], dtype=np.float64)


def _sigmoid_derivative_from_u(n: int, u: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """S^(n)(v) for n >= 1 given u = exp(-|v|) and the mask v > 0 (Eulerian form, Horner in u)."""
    coefficients = _eulerian_coefficients(n)
    poly = np.zeros_like(u)
    for coefficient in coefficients[::-1]:       # sum_k c_k u^(k+1) = u * (c_0 + u (c_1 + ...))
        poly = poly * u + coefficient
    value = poly * u / (1.0 + u) ** (n + 1)
    if n % 2 == 0:                               # (-1)^(n+1) = -1: odd function for even n
        value = np.where(positive, -value, value)
    return value


def sigmoid_derivative(n: int, v) -> np.ndarray:
    """The n-th derivative of the sigmoid S(v) = 1/(1+exp(-v)), any order, without cancellation."""
    n = check_order(n)
    v = np.asarray(v, dtype=np.float64)
    u = np.exp(-np.abs(v))
    positive = v > 0
    if n == 0:
        return np.where(positive, 1.0 / (1.0 + u), u / (1.0 + u))
    return _sigmoid_derivative_from_u(n, u, positive)


def _logistic_derivative_from_u(n: int, v: np.ndarray, u: np.ndarray, positive: np.ndarray):
    if n == 0:
        return np.log1p(u) + np.maximum(-v, 0.0)          # log(1+e^{-v}) without overflow
    if n == 1:
        return np.where(positive, -u / (1.0 + u), -1.0 / (1.0 + u))   # -S(-v)
    return _sigmoid_derivative_from_u(n - 1, u, positive)


def derivative(loss: str, n: int, v) -> np.ndarray:
    """f^(n)(v) of the named loss, elementwise over ``v`` (float64 array).

    ``v`` is the margin ``y * theta^T x`` for classification losses and the residual
    ``theta^T x - y`` for ``squared_error``.
    """
    check_loss(loss)
    n = check_order(n)
    v = np.asarray(v, dtype=np.float64)
    if loss == "exponential":
        e = np.exp(-v)
        return -e if n % 2 else e
    if loss in ("quadratic", "squared_error"):
        shift = 1.0 if loss == "quadratic" else 0.0
        if n == 0:
            return 0.5 * (v - shift) ** 2
        if n == 1:
            return v - shift
        return np.full_like(v, 1.0 if n == 2 else 0.0)
    u = np.exp(-np.abs(v))
    return _logistic_derivative_from_u(n, v, u, v > 0)


def series_terms(loss: str, j: int, truncation: int) -> int:
    """Highest k summed in F_j for the truncated (logistic) series: K for j = 0, 1 and K-1 for j = 2.

    A negative value means F_j is the empty sum (F_2 with K = 0).
    """
    if j not in (0, 1, 2):
        raise InvalidInputError(f"j={j!r}: only F_0, F_1, F_2 are used; pass j in (0, 1, 2)")
    return truncation - 1 if j == 2 else truncation


def series_F(loss: str, j: int, v, tau: float, truncation: int = 2) -> np.ndarray:
    """F_j(v) = sum_k (-tau)^k / k! f^(2k+j)(v), the inverse-Weierstrass series of f^(j).

    Exact closed forms for ``exponential``, ``quadratic`` and ``squared_error`` (``truncation`` is
    ignored there); the ``logistic`` series is summed for k = 0..K (j = 0, 1) and k = 0..K-1 (j = 2),
    so that (F_1, F_2) is the exact gradient of the truncated loss F_0.  ``tau = sigma^2 |theta|^2 / 2``
    is the variance of the Gaussian noise on the margin divided by 2.
    """
    check_loss(loss)
    truncation = check_order(truncation, "truncation")
    series_terms(loss, j, truncation)
    return series_F_unchecked(loss, j, np.asarray(v, dtype=np.float64), float(tau), truncation)


def series_F_unchecked(loss: str, j: int, v: np.ndarray, tau: float, truncation: int) -> np.ndarray:
    """``series_F`` without argument checks (v a float64 array): for per-batch loops."""
    top = truncation - 1 if j == 2 else truncation
    if loss == "exponential":
        e = np.exp(-tau - v)
        return -e if j == 1 else e
    if loss in ("quadratic", "squared_error"):
        shift = 1.0 if loss == "quadratic" else 0.0
        if j == 0:
            return 0.5 * (v - shift) ** 2 - tau
        if j == 1:
            return v - shift
        return np.ones_like(v)
    # logistic: u and the sign mask are shared by every order of the series
    u = np.exp(-np.abs(v))
    positive = v > 0
    total = np.zeros_like(v)
    coefficient = 1.0
    for k in range(top + 1):
        if k > 0:
            coefficient *= -tau / k                 # (-tau)^k / k!, built up term by term
        total = total + coefficient * _logistic_derivative_from_u(2 * k + j, v, u, positive)
    return total
