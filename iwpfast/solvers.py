"""Deterministic full-batch solvers (NumPy, float64): the reference optima the experiments compare to.

* :func:`solve` -- the clean regularized optimum
  ``theta* = argmin (1/n) sum_i f(y_i (theta^T x_i + b)) + lambda |theta|^2 / 2`` for the exponential,
  logistic and quadratic losses, and ``(1/n) sum_i (theta^T x_i + b - y_i)^2 / 2 + lambda |theta|^2 / 2``
  for ``squared_error`` regression; Newton's method with a backtracking (Armijo) line search, the
  intercept ``b`` optional and unregularized.
* :func:`solve_noisy_exponential` -- the minimizer of the *expected* regularized risk that naive SGD on
  a release optimizes for the exponential loss: with feature noise N(0, diag(s)) and labels kept with
  probability S, ``E exp(-y~ theta^T x~) = exp(theta^T diag(s) theta / 2) (S R(theta) + (1-S) R(-theta))``
  where ``R(theta) = (1/n) sum_i exp(-y_i theta^T x_i)``. Naive SGD converges near this point.
* :func:`risk`, :func:`accuracy`, :func:`objective`, :func:`gradient` -- unregularized mean loss,
  sign accuracy, regularized objective and its gradient.

``X`` is (n, p) (any layout: a transposed feature-major array works without a copy).

Example::

    >>> import numpy as np
    >>> from iwpfast.solvers import solve, risk
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, (500, 2)); y = np.sign(X[:, 0] + 0.3 * rng.standard_normal(500))
    >>> sol = solve(X, y, loss="exponential", alpha=5.0)
    >>> bool(sol.grad_norm < 1e-10)
    True
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .exceptions import InvalidInputError
from .losses import LOSS_RECORDS, LOSSES, loss_record

__all__ = ["Solution", "solve", "solve_noisy_exponential", "risk", "accuracy", "objective",
           "gradient", "loss_derivatives", "SOLVER_LOSSES"]

SOLVER_LOSSES = LOSSES


def loss_derivatives(loss: str, z: np.ndarray, y: np.ndarray | None = None):
    """(f, f', f'') of the scalar loss at ``z``.

    Classification losses take the margin ``z = y u``; ``squared_error`` takes the score ``u`` and
    the target ``y`` and differentiates with respect to ``u``.
    """
    record = loss_record(loss)
    return record.value_and_slopes(z - y if record.task == "regression" else z)


def _check(X, y, loss):
    if loss not in SOLVER_LOSSES:
        raise InvalidInputError(f"loss={loss!r} is not supported; use one of {SOLVER_LOSSES}")
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2:
        raise InvalidInputError(f"X has shape {X.shape}; pass a 2-D (n_rows, n_features) array")
    if y.shape != (X.shape[0],):
        raise InvalidInputError(
            f"y has shape {y.shape} but X has {X.shape[0]} rows; pass one label per row")
    if LOSS_RECORDS[loss].task == "classification":
        bad = np.flatnonzero(np.abs(y) != 1.0)
        if bad.size:
            raise InvalidInputError(
                f"label y[{bad[0]}] = {y[bad[0]]} is not -1 or +1; classification losses need "
                "labels in {-1, +1} (map 0/1 labels with 2*y-1)")
    return X, y


def _pieces(theta, b, X, y, loss):
    """Per-row (f, df/du, d2f/du2) with u = theta^T x + b (chain rule through z = y u)."""
    u = X @ theta + b
    if LOSS_RECORDS[loss].task == "regression":
        return loss_derivatives(loss, u, y)
    f, d1, d2 = loss_derivatives(loss, y * u)
    return f, d1 * y, d2           # y^2 = 1


def risk(theta, X, y, loss: str, b: float = 0.0) -> float:
    """Unregularized mean loss ``(1/n) sum_i f(y_i (theta^T x_i + b))`` (or the halved squared error)."""
    X, y = _check(X, y, loss)
    f, _, _ = _pieces(np.asarray(theta, dtype=np.float64), float(b), X, y, loss)
    return float(np.mean(f))


def accuracy(theta, X, y, b: float = 0.0) -> float:
    """Fraction of rows with ``y_i (theta^T x_i + b) > 0`` (the paper's App. E definition)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    return float(np.mean(y * (X @ np.asarray(theta, dtype=np.float64) + b) > 0))


def objective(theta, X, y, loss: str, alpha: float, b: float = 0.0) -> float:
    """Regularized objective ``risk + alpha |theta|^2 / 2`` (the intercept is not penalized)."""
    theta = np.asarray(theta, dtype=np.float64)
    return risk(theta, X, y, loss, b) + 0.5 * alpha * float(theta @ theta)


def gradient(theta, X, y, loss: str, alpha: float, b: float = 0.0):
    """(gradient in theta, derivative in b) of :func:`objective`."""
    X, y = _check(X, y, loss)
    theta = np.asarray(theta, dtype=np.float64)
    _, d1, _ = _pieces(theta, float(b), X, y, loss)
    n = X.shape[0]
    return X.T @ d1 / n + alpha * theta, float(np.mean(d1))


@dataclass(frozen=True)
class Solution:
    """Result of a full-batch solve: ``theta``, ``intercept`` (0 without one), the regularized
    ``objective`` there, the gradient norm reached, the Newton iterations used and ``converged``."""

    theta: np.ndarray
    intercept: float
    objective: float
    grad_norm: float
    n_iter: int
    converged: bool


def _newton(value_grad_hess, w0, tol, max_iter, what):
    """Damped Newton: direction H^{-1} g, Armijo backtracking on the value."""
    w = np.array(w0, dtype=np.float64)
    value, grad, hess = value_grad_hess(w)
    gnorm = float(np.linalg.norm(grad))
    for it in range(1, max_iter + 1):
        if gnorm <= tol:
            return w, value, gnorm, it - 1, True
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(hess, grad, rcond=None)[0]
        slope = float(grad @ step)
        if not slope > 0:                           # not a descent direction: fall back to gradient
            step, slope = grad, gnorm * gnorm
        t = 1.0
        while True:
            w_new = w - t * step
            v_new, g_new, h_new = value_grad_hess(w_new)
            if np.isfinite(v_new) and v_new <= value - 1e-4 * t * slope:
                break
            # Near the optimum the decrease is below float64 resolution of the value: accept a step
            # that keeps the value within rounding and shrinks the gradient.
            if (np.isfinite(v_new) and v_new <= value + 8 * np.finfo(float).eps * max(1.0, abs(value))
                    and np.linalg.norm(g_new) < gnorm):
                break
            t *= 0.5
            if t < 1e-20:
                # No decrease representable in float64: we are at the optimum to machine precision.
                return w, value, gnorm, it, gnorm <= max(tol, 1e-7)
        w, value, grad, hess = w_new, v_new, g_new, h_new
        gnorm = float(np.linalg.norm(grad))
    if gnorm <= tol:
        return w, value, gnorm, max_iter, True
    raise InvalidInputError(
        f"{what}: Newton's method did not converge in max_iter={max_iter} iterations (gradient norm "
        f"{gnorm:.3g} > tol={tol:g}); raise max_iter or alpha")


def solve(X, y, *, loss: str, alpha: float, fit_intercept: bool = False, tol: float = 1e-10,
          max_iter: int = 100) -> Solution:
    """The regularized empirical risk minimizer by Newton's method (deterministic, float64).

    ``alpha`` is lambda in ``lambda |theta|^2 / 2``; it must be > 0 unless the problem is strongly
    convex anyway (``squared_error``/``quadratic`` with full-rank X). ``tol`` bounds the Euclidean norm
    of the gradient of the objective (in theta and b) at the returned point.
    """
    X, y = _check(X, y, loss)
    if alpha < 0:
        raise InvalidInputError(f"alpha={alpha} must be >= 0")
    n, p = X.shape

    def vgh(w):
        theta, b = w[:p], (w[p] if fit_intercept else 0.0)
        f, d1, d2 = _pieces(theta, b, X, y, loss)
        value = float(np.mean(f)) + 0.5 * alpha * float(theta @ theta)
        g = X.T @ d1 / n + alpha * theta
        H = (X.T * d2) @ X / n + alpha * np.eye(p)
        if not fit_intercept:
            return value, g, H
        gb = float(np.mean(d1))
        xb = X.T @ d2 / n
        Hf = np.empty((p + 1, p + 1))
        Hf[:p, :p] = H
        Hf[:p, p] = Hf[p, :p] = xb
        Hf[p, p] = float(np.mean(d2))
        return value, np.append(g, gb), Hf

    w0 = np.zeros(p + (1 if fit_intercept else 0))
    w, value, gnorm, it, ok = _newton(vgh, w0, tol, max_iter, f"solve(loss={loss!r})")
    return Solution(theta=w[:p].copy(), intercept=float(w[p]) if fit_intercept else 0.0,
                    objective=value, grad_norm=gnorm, n_iter=it, converged=ok)


def noisy_exponential_objective(theta, X, y, *, noise_var, keep_prob: float | None, alpha: float):
    """Expected regularized exponential risk under the release (no intercept), its gradient, Hessian.

    ``J(theta) = exp(theta^T diag(s) theta / 2) (S R(theta) + (1-S) R(-theta)) + alpha |theta|^2 / 2``
    with ``R(theta) = mean exp(-y theta^T x)``; ``keep_prob=None`` means public labels (S = 1).
    The first term is a product of log-convex functions, so J is convex.
    """
    X, y = _check(X, y, "exponential")
    theta = np.asarray(theta, dtype=np.float64)
    n, p = X.shape
    s = np.broadcast_to(np.asarray(noise_var, dtype=np.float64), (p,))
    S = 1.0 if keep_prob is None else float(keep_prob)
    m = y * (X @ theta)
    e_pos, e_neg = np.exp(-m), np.exp(m)               # R(theta) and R(-theta) terms per row
    G = S * e_pos.mean() + (1 - S) * e_neg.mean()
    w = S * e_pos - (1 - S) * e_neg                     # dG = -X^T (y w) / n
    dG = -(X.T @ (y * w)) / n
    hw = S * e_pos + (1 - S) * e_neg
    d2G = (X.T * hw) @ X / n
    st = s * theta
    E = np.exp(0.5 * float(theta @ st))
    value = E * G + 0.5 * alpha * float(theta @ theta)
    grad = E * (st * G + dG) + alpha * theta
    hess = E * (np.outer(st, st) * G + np.diag(s) * G + np.outer(st, dG) + np.outer(dG, st) + d2G) \
        + alpha * np.eye(p)
    return value, grad, hess


def solve_noisy_exponential(X, y, *, noise_var, keep_prob: float | None, alpha: float,
                            tol: float = 1e-10, max_iter: int = 200) -> Solution:
    """Minimizer of :func:`noisy_exponential_objective` (where naive SGD on the release converges)."""
    X, y = _check(X, y, "exponential")

    def vgh(w):
        return noisy_exponential_objective(w, X, y, noise_var=noise_var, keep_prob=keep_prob,
                                           alpha=alpha)

    w, value, gnorm, it, ok = _newton(vgh, np.zeros(X.shape[1]), tol, max_iter,
                                      "solve_noisy_exponential")
    return Solution(theta=w, intercept=0.0, objective=value, grad_norm=gnorm, n_iter=it,
                    converged=ok)
