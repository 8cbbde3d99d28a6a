"""The exponential loss's exact inverse for categorical columns released by k-ary randomized response.

A release with ``categorical_mechanism="rr"`` writes each private categorical column (attribute a,
k_a categories) as one randomized category index c~_a: kept with probability q_a, each of the
other k_a - 1 categories reported with probability r_a (``iwpfast.label_noise.kary_probabilities``).
The model keeps one coefficient per category (the one-hot coordinates theta_{a,c}); its clean
score is u = theta_F^T x + b + sum_a theta_{a,c_a} with x the released float columns (private
numeric, Gaussian noise of variance s_j; public columns, s_j = 0).

For the exponential loss f(z) = e^{-z}, with t = +-1 a label sign and v_{a,c}(t) = e^{-t theta_{a,c}}:

    E[v_{a,c~}(t)] = (q_a - r_a) v_{a,c}(t) + r_a sum_c' v_{a,c'}(t),    so
    phi_a(t) = (v_{a,c~_a}(t) - r_a sum_c' v_{a,c'}(t)) / (q_a - r_a)

is unbiased for v_{a,c_a}(t); the numeric part's inverse-Weierstrass factor
E(t) = exp(-tau - t (theta_F^T x~ + b)), tau = sum_j s_j theta_j^2 / 2, is unbiased for
exp(-t (theta_F^T x + b)); the factors are independent (separate mechanisms), so

    G(t) = E(t) prod_a phi_a(t)         has   E[G(t)] = exp(-t u) = f(t u)     for every theta,

and the label's randomized response is inverted as for every loss (``iwpfast.estimates``):

    L~ = w_+ G(y~) + w_- G(-y~),   (w_+, w_-) = (S~, 1 - S~)  (public labels: (1, 0))

is unbiased for the clean loss f(y u), and so is its theta-gradient for the clean gradient
(docs/math.md "Categorical columns by randomized response": the derivation and the gradient).

This module is the NumPy spec: the per-row loss and gradient (``rr_loss``, ``rr_gradient``) and
the twin of the SGD kernel (``rr_sgd_reference``; kernel ``iwpfast._kernels.categorical``).
Only the exponential loss has this exact inverse here (``check_rr_loss`` refuses the others).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .exceptions import InvalidInputError

__all__ = ["RRLayout", "rr_loss", "rr_gradient", "rr_sgd_reference", "check_rr_loss",
           "RR_LOSS_REFUSAL"]

#: why only the exponential loss learns from randomized-response categorical columns
RR_LOSS_REFUSAL = (
    "categorical columns released by randomized response (categorical_mechanism='rr') are learned "
    "with loss='exponential' only: its loss is a product over the attributes, each factor with an "
    "exact unbiased inverse (docs/math.md \"Categorical columns by randomized response\"); use "
    "loss='exponential', or release the categorical columns with categorical_mechanism='gaussian'")


def check_rr_loss(loss: str) -> None:
    if loss != "exponential":
        raise InvalidInputError(f"loss={loss!r}: " + RR_LOSS_REFUSAL)


@dataclass(frozen=True)
class RRLayout:
    """Where things are in the model's coordinates (the feature map's order).

    float_index: (P,) int64, the coordinate of each released float column (numeric, public one-hot
        or Gaussian one-hot coordinate), in the release's order.
    noise_var:   (P,) float64, their Gaussian noise variances s_j (0: public).
    offsets:     (m,) int64, the first coordinate of each randomized attribute's block.
    sizes:       (m,) int64, k_a.
    keep, other: (m,) float64, q_a and r_a.
    n_coords:    the model's coordinates (len(theta)).
    """

    float_index: np.ndarray
    noise_var: np.ndarray
    offsets: np.ndarray
    sizes: np.ndarray
    keep: np.ndarray
    other: np.ndarray
    n_coords: int

    @classmethod
    def from_spec(cls, spec) -> RRLayout:
        """The layout of a release's spec (``ReleaseSpec`` with ``categorical_mechanism='rr'``)."""
        fm = spec.feature_map
        variances = spec.feature_noise_variances()
        float_index, noise_var, offsets, sizes, keep, other = [], [], [], [], [], []
        rr = spec.rr_mechanisms
        for c in fm.inputs:
            a, b = fm.slices[c.name]
            ra, _ = fm.released_slices[c.name]
            if c.name in rr:
                mech = rr[c.name]
                offsets.append(a)
                sizes.append(b - a)
                keep.append(mech.keep_probability)
                other.append(mech.other_probability)
            else:
                for j in range(b - a):
                    float_index.append(a + j)
                    noise_var.append(variances[ra + j])
        return cls(np.asarray(float_index, np.int64), np.asarray(noise_var, np.float64),
                   np.asarray(offsets, np.int64), np.asarray(sizes, np.int64),
                   np.asarray(keep, np.float64), np.asarray(other, np.float64),
                   len(fm.coordinates))

    def inverse_variance_factor(self, theta: np.ndarray) -> float:
        """prod_a max_{t, c} E[phi_a(t)^2] / v_{a,c}(t)^2: how much the attributes' inverses
        multiply a row's second moment at ``theta`` (1 where a block is constant: phi_a is then
        exactly v_{a,c}); the 'auto' grid's noise scale for these coordinates (docs/tuning.md)."""
        factor = 1.0
        for off, k, q, r in zip(self.offsets, self.sizes, self.keep, self.other, strict=True):
            block = np.asarray(theta[off:off + k], np.float64)
            worst = 1.0
            for t in (1.0, -1.0):
                z = -t * block
                v = np.exp(z - z.max())                     # a common scale cancels in the ratio
                dev2 = (v - r * v.sum()) ** 2 / (q - r) ** 2
                # category c true: E[phi^2] = q dev2_c + r sum_{c' != c} dev2_c'
                second = r * dev2.sum() + (q - r) * dev2
                with np.errstate(divide="ignore", over="ignore"):
                    # a category whose v underflowed: an unbounded factor (energy inf: unreliable)
                    worst = max(worst, float(np.max(second / (v * v))))
            factor *= worst
        return factor


def _check(theta, intercept, X, codes, y, layout: RRLayout):
    theta = np.asarray(theta, np.float64)
    X = np.asarray(X, np.float64)
    codes = np.asarray(codes)
    y = np.asarray(y, np.float64)
    if theta.shape != (layout.n_coords,):
        raise InvalidInputError(f"theta has shape {theta.shape}; the layout has {layout.n_coords} "
                                "coordinates")
    if X.ndim != 2 or X.shape[0] != layout.float_index.shape[0]:
        raise InvalidInputError(f"X has shape {X.shape}; expected ({layout.float_index.shape[0]}, n) "
                                "(feature-major: one row per released float column)")
    n = X.shape[1]
    if codes.shape != (layout.offsets.shape[0], n):
        raise InvalidInputError(f"codes has shape {codes.shape}; expected "
                                f"({layout.offsets.shape[0]}, {n}): one row per attribute")
    if codes.size and (codes.min() < 0 or np.any(codes.max(axis=1) >= layout.sizes)):
        raise InvalidInputError("codes hold a category index outside 0..k-1 of its attribute")
    if y.shape != (n,) or np.any((y != 1.0) & (y != -1.0)):
        raise InvalidInputError("y must hold one label -1 or +1 per row")
    return theta, (0.0 if intercept is None else float(intercept)), X, codes.astype(np.int64), y


def _label_weights(label_weight: float) -> tuple[float, float]:
    return float(label_weight), 1.0 - float(label_weight)


def _factors(theta, intercept, X, codes, t, layout: RRLayout):
    """Per row for label signs t (n,): E(t) (n,), phi (m, n), v_sel (m, n)."""
    idx, s = layout.float_index, layout.noise_var
    theta_f = theta[idx]
    tau = 0.5 * float(np.dot(s, theta_f * theta_f))
    u = theta_f @ X + intercept
    E = np.exp(-tau - t * u)
    m = layout.offsets.shape[0]
    phi = np.empty((m, X.shape[1]))
    v_sel = np.empty((m, X.shape[1]))
    for a in range(m):
        off, k, q, r = (int(layout.offsets[a]), int(layout.sizes[a]), layout.keep[a],
                        layout.other[a])
        block = theta[off:off + k]
        v = np.exp(-t[None, :] * block[:, None])                # (k, n)
        v_sel[a] = v[codes[a], np.arange(X.shape[1])]
        phi[a] = (v_sel[a] - r * v.sum(axis=0)) / (q - r)
    return E, phi, v_sel, tau


def rr_loss(theta, X, codes, y, layout: RRLayout, *, label_weight: float = 1.0,
            intercept: float | None = None) -> np.ndarray:
    """Per-row unbiased estimates (n,) of the clean exponential loss exp(-y u) (module docstring).

    X: (P, n) released float columns; codes: (m, n) randomized category indices; y: (n,) released
    labels +-1; label_weight: S~ of the label's randomized response (1.0: public labels)."""
    theta, b, X, codes, y = _check(theta, intercept, X, codes, y, layout)
    w_plus, w_minus = _label_weights(label_weight)
    out = np.zeros(X.shape[1])
    for w, t in ((w_plus, y), (w_minus, -y)):
        if w == 0.0:
            continue
        E, phi, _, _ = _factors(theta, b, X, codes, t, layout)
        out += w * E * np.prod(phi, axis=0)
    return out


def rr_gradient(theta, X, codes, y, layout: RRLayout, *, label_weight: float = 1.0,
                intercept: float | None = None) -> np.ndarray:
    """Per-row gradients (n, p) of ``rr_loss`` in theta, or (n, p + 1) with an intercept (last
    column: d/db); unbiased for the clean gradient."""
    theta, b, X, codes, y = _check(theta, intercept, X, codes, y, layout)
    w_plus, w_minus = _label_weights(label_weight)
    n = X.shape[1]
    grad = np.zeros((n, layout.n_coords))
    grad_b = np.zeros(n)
    idx, s = layout.float_index, layout.noise_var
    for w, t in ((w_plus, y), (w_minus, -y)):
        if w == 0.0:
            continue
        E, phi, _, _ = _factors(theta, b, X, codes, t, layout)
        G = E * np.prod(phi, axis=0)
        grad[:, idx] += w * (G[:, None] * (-t[:, None] * X.T) - G[:, None] * (s * theta[idx]))
        grad_b += w * (-t * G)
        for a in range(layout.offsets.shape[0]):
            off, k, q, r = (int(layout.offsets[a]), int(layout.sizes[a]), layout.keep[a],
                            layout.other[a])
            rest = E * np.prod(np.delete(phi, a, axis=0), axis=0)     # prod of the other factors
            v = np.exp(-t[:, None] * theta[off:off + k][None, :])      # (n, k)
            hit = (codes[a][:, None] == np.arange(k)[None, :]).astype(np.float64)
            grad[:, off:off + k] += w * rest[:, None] * (-t[:, None] * v) * (hit - r) / (q - r)
    if intercept is not None:
        return np.concatenate([grad, grad_b[:, None]], axis=1)
    return grad


def rr_sgd_reference(X, codes, y, order, layout: RRLayout, theta, intercept, theta_avg,
                     intercept_avg, counters, *, label_weight, batch_size, learning_rate, mu,
                     alpha, radius, fit_intercept, average_start, inverse=True,
                     variance_cap=math.inf, block_cap=math.inf):
    """The NumPy twin of ``iwpfast._kernels.categorical.rr_sgd_pass``: minibatch SGD on the rows
    ``order`` (in that order; the last batch may be short), in place on theta (p,), intercept
    (1,), theta_avg, intercept_avg, counters [updates, averaged].  One update: the mean of the
    rows' ``rr_gradient`` plus alpha theta, step gamma0 / (1 + mu gamma0 t) (``inverse``) or
    gamma0, projection on the L2 ball of ``radius``, then the noised float columns scaled so that
    sum_j s_j theta_j^2 <= ``variance_cap`` and each attribute's block shrunk towards its mean
    until ``block_log_factor`` <= ``block_cap``, Polyak average after ``average_start``."""
    n = order.shape[0]
    for start in range(0, n, batch_size):
        rows = order[start:start + batch_size]
        g = rr_gradient(theta, X[:, rows], codes[:, rows], y[rows], layout,
                        label_weight=label_weight,
                        intercept=float(intercept[0]) if fit_intercept else None).mean(axis=0)
        g_theta = g[:layout.n_coords] + alpha * theta
        g_b = float(g[-1]) if fit_intercept else 0.0
        t = int(counters[0])
        gamma = learning_rate / (1.0 + mu * learning_rate * t) if inverse else learning_rate
        theta -= gamma * g_theta
        intercept[0] -= gamma * g_b
        if radius < math.inf:
            norm = math.sqrt(float(np.dot(theta, theta)))
            if norm > radius:
                theta *= radius / norm
        theta_f = theta[layout.float_index]
        energy = float(np.dot(layout.noise_var, theta_f * theta_f))
        if energy > variance_cap:
            noised = layout.float_index[layout.noise_var > 0.0]
            theta[noised] *= math.sqrt(variance_cap / energy)
        if block_cap < math.inf:
            cap_blocks(theta, layout, block_cap)
        counters[0] = t + 1
        if average_start >= 0 and t + 1 > average_start:
            counters[1] += 1
            theta_avg += (theta - theta_avg) / counters[1]
            intercept_avg[0] += (intercept[0] - intercept_avg[0]) / counters[1]


def block_log_factor(theta, off, k, q, r, mean, scale) -> float:
    """log max_{t, c} E[phi(t)^2] / v_c(t)^2 of one attribute whose coefficients are
    mean + scale (theta - mean): the log of how much its inverse multiplies a row's second moment
    (0 for a constant block).  Scalar loops in the kernel's order (same bits as its twin)."""
    worst = 0.0
    for t in (1.0, -1.0):
        z = [-t * (mean + scale * (float(theta[off + c]) - mean)) for c in range(k)]
        top = max(z)
        total = 0.0
        for c in range(k):
            total += math.exp(z[c] - top)
        dev_sum = 0.0
        for c in range(k):
            d = (math.exp(z[c] - top) - r * total) / (q - r)
            dev_sum += d * d
        for c in range(k):
            v = math.exp(z[c] - top)
            d = (v - r * total) / (q - r)
            second = r * dev_sum + (q - r) * d * d
            if v <= 0.0:
                return math.inf
            ratio = math.log(second / (v * v)) if second > 0.0 else 0.0
            worst = max(worst, ratio)
    return worst


def cap_blocks(theta, layout: RRLayout, block_cap: float) -> int:
    """Twin of the kernel's ``cap_blocks``: each block shrunk towards its mean (bisection on the
    factor, 40 halvings) until ``block_log_factor <= block_cap``; returns the blocks shrunk."""
    hits = 0
    for off, k, q, r in zip(layout.offsets, layout.sizes, layout.keep, layout.other, strict=True):
        off, k = int(off), int(k)
        if block_log_factor(theta, off, k, q, r, 0.0, 1.0) <= block_cap:
            continue
        mean = 0.0
        for c in range(k):
            mean += float(theta[off + c])
        mean /= k
        lo, hi = 0.0, 1.0
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            if block_log_factor(theta, off, k, q, r, mean, mid) <= block_cap:
                lo = mid
            else:
                hi = mid
        for c in range(k):
            theta[off + c] = mean + lo * (theta[off + c] - mean)
        hits += 1
    return hits
