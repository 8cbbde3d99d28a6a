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

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from .exceptions import InvalidInputError
from .noise_registry import record_of_law, unsupport


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


# --------------------------------------------------------------------------------------------
# One record per loss: everything the Python side needs to know about a loss.  The kernels'
# integer code of each name is in iwpfast._kernels.abi.LOSS_CODES and its Numba derivative code
# in iwpfast._kernels.sgd (the kernels may not import this layer); docs/extending.md says how to
# add a loss.
# --------------------------------------------------------------------------------------------

#: (v, tau, truncation) -> F_j(v) as a float64 array
Series = Callable[[np.ndarray, float, int], np.ndarray]


@dataclass(frozen=True)
class Loss:
    """A GLM loss ``f`` and the facts about it that the estimators, tuning and tools read.

    name:        the public name (``loss=`` of the estimators and the CLI).
    task:        "classification" (``f`` of the margin ``v = y theta^T x``, labels +-1) or
                 "regression" (``f`` of the residual ``v = theta^T x - y``).
    derivative:  ``(n, v) -> f^(n)(v)``, elementwise over a float64 array ``v``.
    series:      ``(j, v, tau, truncation) -> F_j(v)``, the inverse-Weierstrass series of
                 ``f^(j)`` for j = 0, 1, 2 (module docstring); unchecked, for per-batch loops.
    f2_at_0:     ``f''(0)``: the curvature scale of the "auto" alpha grid.
    slope_at_0:  ``|f'(0)|``: the default projection radius is ``B |f'(0)| / alpha``; None for a
                 regression loss, where ``|f'(0)| = |y|`` is the target bound.
    derivative_bounds: ``(zmax, target_bound) -> (max |f'|, max f'')`` over ``|v| <= zmax``
                 (the constants of the paper's Theorem 4.4: the derived step, the 'paper' schedule).
    truncated:   the series is truncated at ``K = truncation`` (logistic): K matters, "auto" chooses
                 it, and the kernel gets the Eulerian table of order K.
    heavy_tailed: a row's IWP value is log-normal in the feature noise (exponential): its variance
                 grows like ``exp(sigma^2 |theta|^2)`` instead of polynomially.
    series_12:   ``(v, tau, truncation) -> (F_1, F_2)`` at once; a faster form where both share the
                 work (same bits as two ``series`` calls).
    smoothed:    ``(v, tau) -> W_{2 tau}[f](v) = E f(v + sqrt(2 tau) Z)`` in closed form, or None
                 (then ``iwpfast.transforms`` integrates it by Gauss-Hermite quadrature).
    newton:      ``v -> (f, f', f'')`` for the deterministic solvers (``iwpfast.solvers``).
    log_odds_scale: c such that the population minimizer of the risk is u* = log-odds / c, so
                 ``predict_proba`` is sigma(c u) (logistic 1, exponential 2: docs/math.md
                 "Probabilities"); None where the minimizer is no function of the log-odds alone
                 that a linear score can carry (quadratic: 2p - 1), or for regression.
    truncation_table: ``truncation K -> table`` that the kernel receives with a truncated series
                 (the logistic's: ``sigmoid_eulerian_table``, the Eulerian numbers of the sigmoid's
                 derivatives); required with ``truncated=True`` (a truncated loss never borrows
                 another's table).
    constant_link: ``share -> b``, the minimizer of ``share f(b) + (1 - share) f(-b)`` (the best
                 constant model) in closed form where ``log_odds_scale`` does not give it
                 (quadratic: 2 share - 1); None: from ``log_odds_scale``, else solved from
                 ``derivative`` (``best_constant``).

    How a loss is debiased under a noise law is no field of its record: it is the law's
    (``noise_registry.NoiseLawRecord.supports``, extended by ``noise_registry.support``), so
    that a law is added without touching a loss.  ``laplace`` reads the discrete Laplace law's.
    """

    name: str
    task: str
    derivative: Callable[[int, np.ndarray], np.ndarray]
    series: Callable[[int, np.ndarray, float | np.ndarray, int], np.ndarray]
    f2_at_0: float
    slope_at_0: float | None
    derivative_bounds: Callable[[float, float], tuple[float, float]]
    truncated: bool = False
    heavy_tailed: bool = False
    series_12: Callable[[np.ndarray, float, int], tuple[np.ndarray, np.ndarray]] | None = None
    smoothed: Callable[[np.ndarray, float], np.ndarray] | None = None
    newton: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
    log_odds_scale: float | None = None
    truncation_table: Callable[[int], np.ndarray] | None = None
    constant_link: Callable[[float], float] | None = None

    @property
    def laplace(self) -> str | None:
        """How a discrete Laplace release debiases this loss ("product", "variance" or None):
        the law's support table (``noise_registry``), read here for the former field's readers."""
        return record_of_law("discrete_laplace").inverse_for(self.name)

    def __post_init__(self):
        if self.truncated and self.truncation_table is None:
            raise InvalidInputError(
                f"loss {self.name!r}: truncated=True needs its truncation_table (K -> the table the "
                "kernel receives with the K-truncated series; the logistic's is "
                "sigmoid_eulerian_table, which holds for the sigmoid only)")

    def both_series(self, v: np.ndarray, tau: float, truncation: int) -> tuple[np.ndarray, np.ndarray]:
        """(F_1(v), F_2(v)): the scalars a row's gradient is made of."""
        if self.series_12 is not None:
            return self.series_12(v, tau, truncation)
        return self.series(1, v, tau, truncation), self.series(2, v, tau, truncation)

    def value_and_slopes(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(f, f', f'') at ``v`` (the solvers' Newton pieces)."""
        if self.newton is not None:
            return self.newton(v)
        return self.derivative(0, v), self.derivative(1, v), self.derivative(2, v)

    def best_constant(self, share: float) -> float:
        """The b minimizing ``share f(b) + (1 - share) f(-b)`` (a classification loss): by
        ``constant_link``, else the log-odds over ``log_odds_scale``, else the root of
        ``share f'(b) = (1 - share) f'(-b)`` by bisection (increasing in b for a convex f)."""
        if self.constant_link is not None:
            return float(self.constant_link(share))
        if self.log_odds_scale is not None:
            return math.log(share / (1.0 - share)) / self.log_odds_scale

        def g(b: float) -> float:
            slopes = self.derivative(1, np.array([b, -b]))
            return share * float(slopes[0]) - (1.0 - share) * float(slopes[1])

        low, high = -1.0, 1.0
        while g(low) > 0.0 and low > -1e6:
            low *= 2.0
        while g(high) < 0.0 and high < 1e6:
            high *= 2.0
        for _ in range(200):
            middle = 0.5 * (low + high)
            if middle in (low, high):
                break
            low, high = (middle, high) if g(middle) < 0.0 else (low, middle)
        return 0.5 * (low + high)

    def variance_factor(self, noise_energy: float) -> float:
        """The leading-order factor by which feature noise of energy sigma^2 |theta|^2 multiplies
        a row's second moment: ``exp(.)`` for a heavy-tailed loss, ``1 + .`` otherwise."""
        v = max(float(noise_energy), 0.0)
        return math.exp(min(v, 700.0)) if self.heavy_tailed else 1.0 + v

    def score_factor(self, noise_energy: float) -> float:
        """The part of ``variance_factor`` beyond the features' own: ``exp(sigma^2 |theta|^2)`` for
        a heavy-tailed loss, 1 otherwise (docs/tuning.md)."""
        return math.exp(min(float(noise_energy), 700.0)) if self.heavy_tailed else 1.0


# --- exponential: f(v) = exp(-v); every series is exact
def _exponential_derivative(n: int, v: np.ndarray) -> np.ndarray:
    e = np.exp(-v)
    return -e if n % 2 else e


def _exponential_series(j: int, v: np.ndarray, tau: float | np.ndarray, truncation: int) -> np.ndarray:
    e = np.exp(-tau - v)
    return -e if j == 1 else e


def _exponential_series_12(v: np.ndarray, tau: float, truncation: int):
    e = np.exp(-tau - v)                 # F_1 = -F_2 = -exp(-tau - v): one exp serves both
    return -e, e


def _exponential_bounds(zmax: float, target_bound: float) -> tuple[float, float]:
    e = math.exp(min(zmax, 700.0))
    return e, e


def _exponential_newton(v: np.ndarray):
    e = np.exp(-v)
    return e, -e, e


# --- quadratic (v - 1)^2 / 2 and squared error r^2 / 2: one parabola, shifted; series exact
def _parabola(shift: float):
    def derivative(n: int, v: np.ndarray) -> np.ndarray:
        if n == 0:
            return 0.5 * (v - shift) ** 2
        if n == 1:
            return v - shift
        return np.full_like(v, 1.0 if n == 2 else 0.0)

    def series(j: int, v: np.ndarray, tau: float | np.ndarray, truncation: int) -> np.ndarray:
        if j == 0:
            return 0.5 * (v - shift) ** 2 - tau
        if j == 1:
            return v - shift
        return np.ones_like(v)

    def smoothed(v: np.ndarray, tau: float) -> np.ndarray:
        return 0.5 * (v - shift) ** 2 + tau

    def newton(v: np.ndarray):
        r = v - shift
        return 0.5 * r * r, r, np.ones_like(v)

    return derivative, series, smoothed, newton


_quadratic_derivative, _quadratic_series, _quadratic_smoothed, _quadratic_newton = _parabola(1.0)
_squared_derivative, _squared_series, _squared_smoothed, _squared_newton = _parabola(0.0)


# --- logistic: f(v) = log(1 + exp(-v)); the series diverges and is truncated at K
def _logistic_derivative(n: int, v: np.ndarray) -> np.ndarray:
    u = np.exp(-np.abs(v))
    return _logistic_derivative_from_u(n, v, u, v > 0)


def _logistic_series(j: int, v: np.ndarray, tau: float | np.ndarray, truncation: int) -> np.ndarray:
    top = truncation - 1 if j == 2 else truncation
    u = np.exp(-np.abs(v))               # u and the sign mask serve every order of the series
    positive = v > 0
    total = np.zeros_like(v)
    coefficient: float | np.ndarray = 1.0
    for k in range(top + 1):
        if k > 0:
            coefficient *= -tau / k                 # (-tau)^k / k!, built up term by term
        total = total + coefficient * _logistic_derivative_from_u(2 * k + j, v, u, positive)
    return total


def _sigmoid(v: np.ndarray) -> np.ndarray:
    """1/(1+e^{-v}) without overflow."""
    out = np.empty_like(v)
    pos = v >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-v[pos]))
    e = np.exp(v[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def _logistic_newton(v: np.ndarray):
    s_neg = _sigmoid(-v)                 # S(-v) = -f'(v)
    return np.logaddexp(0.0, -v), -s_neg, s_neg * (1.0 - s_neg)


@cache
def sigmoid_eulerian_table(truncation: int) -> np.ndarray:
    """table[d, k] = (-1)^k A(d, k) for d <= 2K: the coefficients of the sigmoid's derivatives
    (exact in float64), the logistic loss's ``truncation_table``."""
    order = max(2 * truncation, 1)
    table = np.zeros((order + 1, order))
    for d in range(1, order + 1):
        for k, value in enumerate(eulerian_numbers(d)):
            table[d, k] = (-1) ** k * float(value)
    table.setflags(write=False)
    return table


LOSS_RECORDS: dict[str, Loss] = {loss.name: loss for loss in (
    Loss("exponential", "classification", _exponential_derivative, _exponential_series,
         f2_at_0=1.0, slope_at_0=1.0, derivative_bounds=_exponential_bounds, heavy_tailed=True,
         series_12=_exponential_series_12, smoothed=lambda v, tau: np.exp(tau - v),
         newton=_exponential_newton, log_odds_scale=2.0),
    Loss("quadratic", "classification", _quadratic_derivative, _quadratic_series,
         f2_at_0=1.0, slope_at_0=1.0, derivative_bounds=lambda zmax, target_bound: (zmax + 1.0, 1.0),
         smoothed=_quadratic_smoothed, newton=_quadratic_newton,
         constant_link=lambda share: 2.0 * share - 1.0),
    Loss("logistic", "classification", _logistic_derivative, _logistic_series,
         f2_at_0=0.25, slope_at_0=0.5, derivative_bounds=lambda zmax, target_bound: (1.0, 0.25),
         truncated=True, newton=_logistic_newton, log_odds_scale=1.0,
         truncation_table=sigmoid_eulerian_table),
    Loss("squared_error", "regression", _squared_derivative, _squared_series,
         f2_at_0=1.0, slope_at_0=None,
         derivative_bounds=lambda zmax, target_bound: (zmax + target_bound, 1.0),
         smoothed=_squared_smoothed, newton=_squared_newton),
)}



class LossNames(Sequence):
    """The names of the registered losses of a task (None: all, classification first), read from
    ``LOSS_RECORDS`` when used: a loss added by ``register_loss`` is a legal ``loss=`` everywhere
    these are checked.  Compares equal to the tuple of the names."""

    def __init__(self, task: str | None = None):
        self.task = task

    def _names(self) -> tuple[str, ...]:
        tasks = ("classification", "regression") if self.task is None else (self.task,)
        return tuple(n for t in tasks for n, r in LOSS_RECORDS.items() if r.task == t)

    def __getitem__(self, i):
        return self._names()[i]

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, name) -> bool:
        return name in self._names()

    def __eq__(self, other) -> bool:
        return self._names() == (tuple(other) if isinstance(other, Sequence) else other)

    __hash__ = None  # type: ignore[assignment]   # (it changes with the registry)

    def __add__(self, other) -> tuple[str, ...]:
        return self._names() + tuple(other)

    def __repr__(self) -> str:
        return repr(self._names())


CLASSIFICATION_LOSSES = LossNames("classification")
REGRESSION_LOSSES = LossNames("regression")
#: every loss name; the kernels' integer code of each is in iwpfast._kernels.abi.LOSS_CODES
LOSSES = LossNames()


def register_loss(record: Loss) -> Loss:
    """Add a loss record (docs/extending.md "A loss"); its name must be new."""
    if record.name in LOSS_RECORDS:
        raise InvalidInputError(f"a loss named {record.name!r} is already registered")
    if record.task not in ("classification", "regression"):
        raise InvalidInputError(f"loss {record.name!r}: task must be 'classification' or "
                                f"'regression', got {record.task!r}")
    LOSS_RECORDS[record.name] = record
    return record


def unregister_loss(name: str) -> None:
    """Remove a loss (a test's toy loss; the built-in ones are a contract), and its place in the
    noise laws' support tables."""
    LOSS_RECORDS.pop(name, None)
    unsupport(name)


def check_loss(loss: str, *, allowed: Sequence[str] | None = None, parameter: str = "loss") -> str:
    """Return ``loss`` if it is a known loss name (among ``allowed`` if given), else raise.

    The error lists the valid choices so the caller can fix the call.
    """
    choices = LOSSES if allowed is None else tuple(allowed)
    if not isinstance(loss, str) or loss not in choices:
        raise InvalidInputError(
            f"{parameter}={loss!r} is not a known loss here; choose one of {', '.join(choices)}")
    return loss


def loss_record(loss: str, *, allowed: Sequence[str] | None = None, parameter: str = "loss") -> Loss:
    """The :class:`Loss` record of a loss name (checked as by :func:`check_loss`)."""
    return LOSS_RECORDS[check_loss(loss, allowed=allowed, parameter=parameter)]


def derivative(loss: str, n: int, v) -> np.ndarray:
    """f^(n)(v) of the named loss, elementwise over ``v`` (float64 array).

    ``v`` is the margin ``y * theta^T x`` for classification losses and the residual
    ``theta^T x - y`` for ``squared_error``.
    """
    record = loss_record(loss)
    return record.derivative(check_order(n), np.asarray(v, dtype=np.float64))


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


def series_F_unchecked(loss: str, j: int, v: np.ndarray, tau: float | np.ndarray,
                       truncation: int) -> np.ndarray:
    """``series_F`` without argument checks (v a float64 array; tau a float, or an array that
    broadcasts against v: one tau per head): for per-batch loops."""
    return LOSS_RECORDS[loss].series(j, v, tau, truncation)
