"""Analysis tools (NumPy, not hot): the transforms behind IWP and what they imply (docs/design.md section 3).

Notation: a Gaussian release adds ``N(0, variance)`` to the argument of a scalar function; the
*Weierstrass transform* is ``W_var[f](v) = E f(v + sqrt(var) Z)``; its inverse is the series
``W_var^{-1}[f] = sum_k (-t)^k / k! f^(2k)`` with ``t = var / 2``.  Randomized response keeps a
label with probability ``S(eps) = 1/(1+e^{-eps})``: the *Bernoulli transform* is
``B_eps[g](y) = S g(y) + (1-S) g(-y)``, inverted in closed form with ``S~ = 1/(1-e^{-eps})``.
For a GLM loss the noise on the margin ``theta^T x`` has variance ``sum_j s_j theta_j^2 = 2 tau``,
so ``t = tau``.

Example::

    >>> import numpy as np
    >>> from iwpfast import transforms as T
    >>> f = lambda v: np.exp(-v)
    >>> round(float(T.weierstrass(f, 0.0, 2.0)), 12)            # E e^{-sqrt(2) Z} = e^{1}
    2.718281828459
    >>> float(T.inverse_weierstrass("exponential", 0.0, 2.0))   # e^{-1}
    0.36787944117144233
    >>> [round(r["sd"], 1) for r in T.truncation_tradeoff(5.0, 128)]   # logistic, K = 0..5, t = 5
    [1.8, 2.0, 2.3, 3.5, 12.3, 78.1]
    >>> T.choose_truncation(5.0, batch_size=128), T.choose_truncation(5.0, batch_size=1)
    (2, 0)
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from .exceptions import InvalidInputError
from .label_noise import keep_probability, label_tilde
from .losses import (
    CLASSIFICATION_LOSSES,
    LOSS_RECORDS,
    check_loss,
    check_order,
    derivative,
    loss_record,
    series_F,
)

__all__ = [
    "weierstrass", "inverse_weierstrass", "inverse_weierstrass_series", "keep_probability",
    "bernoulli", "inverse_bernoulli", "NoisyRiskBias", "noisy_risk_bias", "exponential_noisy_risk",
    "truncated_series_moments", "logistic_truncation_bias", "logistic_estimator_variance",
    "logistic_gradient_truncation_bias", "truncation_tradeoff", "choose_truncation",
]

DEFAULT_NODES = 121


@lru_cache(maxsize=16)
def _hermite_rule(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights with sum_i w_i g(z_i) ~= E g(Z), Z ~ N(0, 1) (probabilists' Hermite)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(n_nodes)
    return nodes, weights / math.sqrt(2.0 * math.pi)


def _check_variance(variance, name: str = "variance") -> float:
    variance = float(variance)
    if not math.isfinite(variance) or variance < 0:
        raise InvalidInputError(f"{name}={variance!r} must be a finite number >= 0")
    return variance


def _gaussian_expectation(g: Callable[[np.ndarray], np.ndarray], v, variance: float,
                          n_nodes: int) -> np.ndarray:
    """E g(v + sqrt(variance) Z) for every entry of v, by Gauss-Hermite quadrature."""
    nodes, weights = _hermite_rule(int(n_nodes))
    v = np.asarray(v, dtype=np.float64)
    points = v[..., None] + math.sqrt(variance) * nodes
    return np.asarray(g(points)) @ weights


def _grid_expectation(g: Callable[[np.ndarray], np.ndarray], v, variance: float,
                      step: float = 0.02, width: float = 12.0) -> np.ndarray:
    """E g(v + sqrt(variance) Z) by the trapezoid rule on a fine grid of +-``width`` sd.

    Used for the truncated logistic series: its high-order sigmoid derivatives vary on a scale of
    ~1 around the origin while the noise sd is sqrt(2t); Gauss-Hermite nodes are spaced ~sd/sqrt(n)
    and miss them (121 nodes at t = 5, K = 5: sd 103 instead of 78).  For a smooth integrand with
    Gaussian tails the trapezoid rule converges geometrically in the step.
    """
    v = np.asarray(v, dtype=np.float64)
    if variance == 0.0:
        return np.asarray(g(v), dtype=np.float64)
    sd = math.sqrt(variance)
    h = min(step, sd / 50.0)
    offsets = np.arange(-width * sd, width * sd + h / 2, h)
    density = np.exp(-0.5 * (offsets / sd) ** 2) * (h / (sd * math.sqrt(2.0 * math.pi)))
    density[0] *= 0.5
    density[-1] *= 0.5
    points = v[..., None] + offsets
    return np.asarray(g(points)) @ density


# --------------------------------------------------------------------------------------------
# Weierstrass transform and its inverse
# --------------------------------------------------------------------------------------------

def weierstrass(f: Callable, v, variance: float, *, n_nodes: int = DEFAULT_NODES) -> np.ndarray:
    """Forward Weierstrass transform ``W_var[f](v) = E f(v + sqrt(variance) Z)`` (Gauss-Hermite).

    ``f`` must accept NumPy arrays.  Exact for polynomials of degree < 2 n_nodes; accurate for smooth
    ``f`` that grows slower than ``exp(v^2 / (4 variance))``.
    """
    return _gaussian_expectation(f, v, _check_variance(variance), n_nodes)


def inverse_weierstrass_series(derivatives: Callable[[int, np.ndarray], np.ndarray], v,
                               variance: float, truncation: int) -> np.ndarray:
    """Truncated inverse: ``sum_{k=0}^{K} (-t)^k / k! f^(2k)(v)`` with ``t = variance / 2``.

    ``derivatives(n, v)`` returns ``f^(n)(v)``.  The full series is the inverse when it converges
    (f in the class of Theorem 2.1); for the logistic loss it diverges and K must be chosen
    (``choose_truncation``).
    """
    t = _check_variance(variance) / 2.0
    truncation = check_order(truncation, "truncation")
    v = np.asarray(v, dtype=np.float64)
    total = np.zeros_like(v)
    coefficient = 1.0
    for k in range(truncation + 1):
        if k:
            coefficient *= -t / k
        total = total + coefficient * np.asarray(derivatives(2 * k, v), dtype=np.float64)
    return total


def inverse_weierstrass(loss: str, v, variance: float, *, truncation: int = 2) -> np.ndarray:
    """``W_var^{-1}[f](v)`` for a named loss: closed forms for exponential (``e^{-t} e^{-v}``),
    quadratic / squared_error (``f(v) - t``); the K-truncated series for logistic."""
    return series_F(loss, 0, v, _check_variance(variance) / 2.0, truncation)


# --------------------------------------------------------------------------------------------
# Bernoulli transform and its inverse
# --------------------------------------------------------------------------------------------

def bernoulli(g: Callable, y, epsilon: float | None):
    """``B_eps[g](y) = S g(y) + (1 - S) g(-y)``: the expectation of g over randomized response."""
    s = keep_probability(epsilon)
    y = np.asarray(y, dtype=np.float64)
    return s * np.asarray(g(y)) + (1.0 - s) * np.asarray(g(-y))


def inverse_bernoulli(g: Callable, y, epsilon: float | None):
    """``B_eps^{-1}[g](y) = S~ g(y) + (1 - S~) g(-y)`` with ``S~ = 1/(1 - e^{-eps}) = S/(2S-1)``."""
    if epsilon is not None and not epsilon > 0:
        raise InvalidInputError(f"epsilon={epsilon!r} must be > 0 (or None for public labels)")
    w = label_tilde(epsilon)
    y = np.asarray(y, dtype=np.float64)
    return w * np.asarray(g(y)) + (1.0 - w) * np.asarray(g(-y))


# --------------------------------------------------------------------------------------------
# Bias of the noisy risk (Theorem 3.1) and the exact noisy risk of the exponential loss
# --------------------------------------------------------------------------------------------

class NoisyRiskBias(NamedTuple):
    """``noisy_risk - risk = label_noise + feature_noise + interaction`` (Theorem 3.1)."""

    risk: float            # R(theta), clean empirical risk
    noisy_risk: float      # R~(theta), expected risk on the release
    label_noise: float     # (1 - S) (E l(theta, x, -y) - R(theta))
    feature_noise: float   # S E[W_{2 tau}[f](z) - f(z)]
    interaction: float     # (1 - S) E[W_{2 tau}[f](-z) - f(-z)]

    @property
    def total(self) -> float:
        return self.noisy_risk - self.risk


def _margins(theta, X, y, noise_var):
    theta = np.asarray(theta, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != theta.shape[0] or y.shape != (X.shape[0],):
        raise InvalidInputError(f"shapes theta {theta.shape}, X {X.shape}, y {y.shape}: expected "
                                "(p,), (n, p), (n,)")
    s = np.broadcast_to(np.asarray(noise_var, dtype=np.float64), theta.shape)
    if np.any(s < 0) or not np.all(np.isfinite(s)):
        raise InvalidInputError("noise_var must hold finite variances >= 0 (sigma_j^2)")
    return y * (X @ theta), 0.5 * float(np.dot(s, theta * theta))


def _smoothed(loss: str, v: np.ndarray, tau: float, n_nodes: int) -> np.ndarray:
    """W_{2 tau}[f](v): the loss's closed form (``Loss.smoothed``), else Gauss-Hermite quadrature."""
    closed_form = LOSS_RECORDS[loss].smoothed
    if closed_form is not None:
        return closed_form(v, tau)
    return _gaussian_expectation(lambda w: derivative(loss, 0, w), v, 2.0 * tau, n_nodes)


def noisy_risk_bias(loss: str, theta, X, y, noise_var, epsilon_y: float | None = None, *,
                    n_nodes: int = DEFAULT_NODES) -> NoisyRiskBias:
    """Theorem 3.1 for a GLM loss on a dataset: how the release shifts the empirical risk at theta.

    The series ``sum_{k>=1} (sigma^2/2)^k / k! E Delta^k l`` of the theorem is summed in closed form:
    for ``l = f(y theta^T x)`` it equals ``W_{2 tau}[f](z) - f(z)`` with ``tau = sum_j s_j theta_j^2 / 2``
    (exact for exponential and quadratic, Gauss-Hermite for logistic, whose Taylor series diverges).
    """
    check_loss(loss, allowed=CLASSIFICATION_LOSSES)
    z, tau = _margins(theta, X, y, noise_var)
    s = keep_probability(epsilon_y)
    f_pos, f_neg = derivative(loss, 0, z), derivative(loss, 0, -z)
    risk = float(np.mean(f_pos))
    label = (1.0 - s) * (float(np.mean(f_neg)) - risk)
    feature = s * float(np.mean(_smoothed(loss, z, tau, n_nodes) - f_pos))
    inter = (1.0 - s) * float(np.mean(_smoothed(loss, -z, tau, n_nodes) - f_neg))
    return NoisyRiskBias(risk, risk + label + feature + inter, label, feature, inter)


def exponential_noisy_risk(theta, X, y, noise_var, epsilon_y: float | None = None) -> float:
    """``R~(theta) = e^{tau} (S R(theta) + (1 - S) R(-theta))`` for ``l = e^{-y theta^T x}`` (Sec. 3).

    With equal variances ``tau = sigma^2 |theta|^2 / 2``, the paper's example.
    """
    z, tau = _margins(theta, X, y, noise_var)
    s = keep_probability(epsilon_y)
    return math.exp(tau) * (s * float(np.mean(np.exp(-z))) + (1.0 - s) * float(np.mean(np.exp(z))))


# --------------------------------------------------------------------------------------------
# Logistic loss: truncation bias and variance, choice of K
# --------------------------------------------------------------------------------------------

def truncated_series_moments(t: float, truncation: int, v=0.0, *, j: int = 0,
                             loss: str = "logistic"):
    """Mean and variance of ``F_j^K(v + sqrt(2t) Z; tau = t)`` over the margin noise (public labels).

    ``F_0^K`` is the per-example IWP loss, ``F_1^K`` the scalar ``a`` of the gradient.  Returns
    ``(mean, variance)`` arrays shaped like ``v``.
    """
    t = _check_variance(t, "t")
    truncation = check_order(truncation, "truncation")

    def F(w):
        return series_F(loss, j, w, t, truncation)

    mean = _grid_expectation(F, v, 2.0 * t)
    centre = np.asarray(mean)[..., None]        # second pass: no E[F^2] - E[F]^2 cancellation
    variance = _grid_expectation(lambda w: (F(w) - centre) ** 2, v, 2.0 * t)
    return mean, variance


def logistic_truncation_bias(t: float, truncation: int, v=0.0, *, j: int = 0) -> np.ndarray:
    """``E[F_j^K(v + noise)] - f^(j)(v)``: what the K-truncated IWP estimate misses at margin v."""
    mean, _ = truncated_series_moments(t, truncation, v, j=j)
    return mean - derivative("logistic", j, v)


def logistic_estimator_variance(t: float, truncation: int, v=0.0, *, j: int = 0) -> np.ndarray:
    """``Var[F_j^K(v + noise)]`` of one example's truncated IWP estimate (loss for j=0, ``a`` for j=1)."""
    return truncated_series_moments(t, truncation, v, j=j)[1]


def logistic_gradient_truncation_bias(theta, x, y: float, noise_var, truncation: int, *,
                                      intercept: float | None = None) -> np.ndarray:
    """Bias ``E[IWP gradient] - clean gradient`` of the K-truncated logistic gradient at one example.

    By Stein's lemma (the margin noise ``m = theta^T xi`` has ``Cov(xi, m) = s * theta``):
    ``E[a(z~) y x~] = y x W[F_1^K](z) + W[F_2^K](z) (s * theta)``, so with ``c = F_2^{K-1}``

        E[grad] = y x W[F_1^K](z) + W[(-t)^K / K! f^(2K+2)](z) (s * theta)

    (W over ``N(0, 2t)``, ``t = tau``).  Randomized response adds no bias (the Bernoulli inverse is
    exact), so labels are public here.  Returns shape (p,), or (p+1,) with an intercept.
    """
    theta = np.asarray(theta, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    s = np.broadcast_to(np.asarray(noise_var, dtype=np.float64), theta.shape)
    truncation = check_order(truncation, "truncation")
    t = 0.5 * float(np.dot(s, theta * theta))
    u = float(theta @ x) + (0.0 if intercept is None else float(intercept))
    z = y * u
    a_mean = _grid_expectation(lambda w: series_F("logistic", 1, w, t, truncation), z, 2.0 * t)
    last = (-t) ** truncation / math.factorial(truncation)
    c_excess = _grid_expectation(lambda w: last * derivative("logistic", 2 * truncation + 2, w),
                                 z, 2.0 * t)
    a_bias = float(a_mean - derivative("logistic", 1, z))
    bias = a_bias * y * x + float(c_excess) * (s * theta)
    if intercept is not None:
        bias = np.append(bias, a_bias * y)
    return bias


def truncation_tradeoff(t: float, batch_size: int, *, truncations=range(0, 6), v=0.0,
                        j: int = 0, loss: str = "logistic") -> list[dict]:
    """For each K: bias, sd and ``mse = bias^2 + variance / batch_size`` of the K-truncated
    estimate of ``loss`` (a loss whose record says ``truncated=True``; averaged over the margins
    ``v`` if an array is given)."""
    if int(batch_size) < 1:
        raise InvalidInputError(f"batch_size={batch_size!r} must be an integer >= 1")
    if not loss_record(loss).truncated:
        raise InvalidInputError(f"loss {loss!r} has an exact series (truncated=False in its "
                                "record): there is no truncation K to choose")
    rows = []
    for K in truncations:
        mean, var = truncated_series_moments(t, K, v, j=j, loss=loss)
        bias = mean - derivative(loss, j, v)
        rows.append({"truncation": int(K), "bias": float(np.sqrt(np.mean(bias ** 2))),
                     "sd": float(np.sqrt(np.mean(var))),
                     "mse": float(np.mean(bias ** 2 + var / int(batch_size)))})
    return rows


def choose_truncation(t: float, batch_size: int, *, truncations=range(0, 6), v=0.0,
                      j: int = 0, loss: str = "logistic") -> int:
    """The K with the smallest ``bias^2 + variance / batch_size`` at ``t = tau`` (docs/design.md section 6:
    the bias alone falls with K, so picking by bias, as App. D.4 does, always picks the largest K)."""
    if (isinstance(t, numbers.Real) and isinstance(batch_size, numbers.Integral)
            and not isinstance(batch_size, bool) and np.ndim(v) == 0):
        # the estimators ask this per head config, often at the same tau; one answer costs seconds
        # (the logistic series on a fine grid at large tau)
        return _choose_truncation_memo(float(t), int(batch_size), tuple(truncations), float(v), j,
                                       loss)
    return _choose_truncation(t, batch_size, truncations, v, j, loss)


def _choose_truncation(t, batch_size, truncations, v, j, loss="logistic") -> int:
    rows = truncation_tradeoff(t, batch_size, truncations=truncations, v=v, j=j, loss=loss)
    return min(rows, key=lambda r: r["mse"])["truncation"]


_choose_truncation_memo = lru_cache(maxsize=256)(_choose_truncation)
