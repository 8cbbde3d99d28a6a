"""SGD and scoring for categorical columns released by k-ary randomized response (exponential loss).

The compiled form of ``iwpfast.categorical_rr.rr_sgd_reference`` (its NumPy twin; the formulas and
their proof in that module's docstring and docs/math.md "Categorical columns by randomized
response").  Only arrays, scalars and integer codes cross: X (P, n) float columns, codes (m, n)
category indices, y (n,) int8 labels +-1, the row order, the layout's arrays, the state arrays.

Per update, theta is fixed, so each attribute's e^{-t theta_{a,c}} (t = +-1) and their sums are
computed once per batch (tables ``vt``, ``sums``); a row then costs O(P + m): its factors
phi_a(t), the products of the other factors by prefix/suffix products (no division: a factor
may be 0), and the gradient of its block split into the observed category's term (one entry
per row) and the -r_a sum term, which is the same vector for every row of the batch and sign
(accumulated as one scalar per attribute and sign, ``acc``, added once per batch).
"""
from __future__ import annotations

import math

import numpy as np

from ._options import jit


@jit
def _block_tables(theta, offsets, sizes, vt, sums):
    """vt[0, j] = e^{-theta_j}, vt[1, j] = e^{theta_j} over the attributes' coordinates (indexed
    by coordinate), sums[s, a] = sum_c vt[s, offsets[a] + c]."""
    for a in range(offsets.shape[0]):
        s0 = 0.0
        s1 = 0.0
        for c in range(sizes[a]):
            j = offsets[a] + c
            e0 = math.exp(-theta[j])
            e1 = math.exp(theta[j])
            vt[0, j] = e0
            vt[1, j] = e1
            s0 += e0
            s1 += e1
        sums[0, a] = s0
        sums[1, a] = s1


@jit
def block_log_factor(theta, off, k, q, r, mean, scale):
    """log max_{t, c} E[phi(t)^2] / v_c(t)^2 of one attribute whose coefficients are
    mean + scale (theta - mean) (twin: ``iwpfast.categorical_rr.block_log_factor``)."""
    worst = 0.0
    for sgn in range(2):
        t = 1.0 - 2.0 * sgn
        top = -1e308
        for c in range(k):
            z = -t * (mean + scale * (theta[off + c] - mean))
            if z > top:
                top = z
        total = 0.0
        for c in range(k):
            total += math.exp(-t * (mean + scale * (theta[off + c] - mean)) - top)
        dev_sum = 0.0
        for c in range(k):
            v = math.exp(-t * (mean + scale * (theta[off + c] - mean)) - top)
            d = (v - r * total) / (q - r)
            dev_sum += d * d
        for c in range(k):
            v = math.exp(-t * (mean + scale * (theta[off + c] - mean)) - top)
            d = (v - r * total) / (q - r)
            second = r * dev_sum + (q - r) * d * d
            if v <= 0.0:
                return math.inf
            ratio = math.log(second / (v * v)) if second > 0.0 else 0.0
            if ratio > worst:
                worst = ratio
    return worst


@jit
def cap_blocks(theta, offsets, sizes, keep, other, block_cap):
    """Shrink each attribute's coefficients towards their mean until its log inverse-variance
    factor is at most ``block_cap`` (bisection on the shrink factor; a constant block has factor
    1, log 0).  Returns the number of blocks shrunk."""
    hits = 0
    for a in range(offsets.shape[0]):
        off, k, q, r = offsets[a], sizes[a], keep[a], other[a]
        if block_log_factor(theta, off, k, q, r, 0.0, 1.0) <= block_cap:
            continue
        mean = 0.0
        for c in range(k):
            mean += theta[off + c]
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


@jit
def _row_value(X, codes, row, t, sgn, theta, intercept, float_index, offsets, keep, other, tau,
               vt, sums, phi, prefix, suffix):
    """G(t) of ``row`` (t = +-1, ``sgn`` 0 for t = +1, 1 for t = -1): E(t) prod_a phi_a(t); fills
    phi, and prefix[a] = E prod_{a' < a} phi_a', suffix[a] = prod_{a' > a} phi_a'."""
    u = intercept
    for j in range(float_index.shape[0]):
        u += theta[float_index[j]] * X[j, row]
    E = math.exp(-tau - t * u)
    m = offsets.shape[0]
    for a in range(m):
        v_sel = vt[sgn, offsets[a] + codes[a, row]]
        phi[a] = (v_sel - other[a] * sums[sgn, a]) / (keep[a] - other[a])
    running = E
    for a in range(m):
        prefix[a] = running
        running *= phi[a]
    tail = 1.0
    for a in range(m - 1, -1, -1):
        suffix[a] = tail
        tail *= phi[a]
    return running


@jit
def rr_sgd_pass(X, codes, y, order, float_index, noise_var, offsets, sizes, keep, other, theta,
                intercept, theta_avg, intercept_avg, counters, label_weight, batch_size,
                learning_rate, mu, alpha, radius, variance_cap, block_cap, fit_intercept,
                average_start, inverse):
    """Minibatch SGD over rows ``order`` (twin: ``rr_sgd_reference``), in place on the state."""
    n = order.shape[0]
    p = theta.shape[0]
    m = offsets.shape[0]
    P = float_index.shape[0]
    vt = np.zeros((2, p))
    sums = np.zeros((2, m))
    phi = np.zeros(m)
    prefix = np.zeros(m)
    suffix = np.zeros(m)
    grad = np.zeros(p)
    acc = np.zeros((2, m))
    weights = (label_weight, 1.0 - label_weight)
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        rows = stop - start
        tau = 0.0
        for j in range(P):
            th = theta[float_index[j]]
            tau += noise_var[j] * th * th
        tau *= 0.5
        _block_tables(theta, offsets, sizes, vt, sums)
        grad[:] = 0.0
        acc[:, :] = 0.0
        g_b = 0.0
        curvature = 0.0
        b = intercept[0] if fit_intercept else 0.0
        for i in range(start, stop):
            row = order[i]
            for sgn in range(2):
                w = weights[sgn]
                if w == 0.0:
                    continue
                t = float(y[row]) * (1.0 - 2.0 * sgn)
                ts = 0 if t > 0 else 1            # which table: e^{-t theta}
                G = _row_value(X, codes, row, t, ts, theta, b, float_index, offsets, keep, other,
                               tau, vt, sums, phi, prefix, suffix)
                wG = w * G
                for j in range(P):
                    grad[float_index[j]] -= wG * t * X[j, row]
                curvature += wG
                g_b -= wG * t
                for a in range(m):
                    rest = w * prefix[a] * suffix[a] / (keep[a] - other[a])
                    j = offsets[a] + codes[a, row]
                    grad[j] -= rest * t * vt[ts, j]
                    # the -r_a term of every category: -t v_c(t) (-r_a) rest, summed per sign
                    acc[ts, a] += rest * t * other[a]
        for a in range(m):
            for c in range(sizes[a]):
                j = offsets[a] + c
                grad[j] += acc[0, a] * vt[0, j] + acc[1, a] * vt[1, j]
        for j in range(P):
            k = float_index[j]
            grad[k] -= curvature * noise_var[j] * theta[k]
        inv = 1.0 / rows
        step = counters[0]
        gamma = learning_rate / (1.0 + mu * learning_rate * step) if inverse else learning_rate
        norm2 = 0.0
        for j in range(p):
            theta[j] -= gamma * (grad[j] * inv + alpha * theta[j])
            norm2 += theta[j] * theta[j]
        if fit_intercept:
            intercept[0] -= gamma * g_b * inv
        if radius < math.inf:
            norm = math.sqrt(norm2)
            if norm > radius:
                scale = radius / norm
                for j in range(p):
                    theta[j] *= scale
        energy = 0.0
        for j in range(P):
            th = theta[float_index[j]]
            energy += noise_var[j] * th * th
        if energy > variance_cap:
            # the noised float columns only (as the other learners' cap: sigma^2|theta|^2 <= cap)
            scale = math.sqrt(variance_cap / energy)
            for j in range(P):
                if noise_var[j] > 0.0:
                    theta[float_index[j]] *= scale
        if block_cap < math.inf:
            cap_blocks(theta, offsets, sizes, keep, other, block_cap)
        counters[0] = step + 1
        if average_start >= 0 and step + 1 > average_start:
            counters[1] += 1
            n_avg = counters[1]
            for j in range(p):
                theta_avg[j] += (theta[j] - theta_avg[j]) / n_avg
            intercept_avg[0] += (intercept[0] - intercept_avg[0]) / n_avg


@jit
def rr_loss_values(X, codes, y, float_index, noise_var, offsets, sizes, keep, other, theta,
                   intercept, label_weight, out):
    """Per-row ``rr_loss`` into ``out`` (n,) (twin: ``iwpfast.categorical_rr.rr_loss``)."""
    p = theta.shape[0]
    m = offsets.shape[0]
    P = float_index.shape[0]
    vt = np.zeros((2, p))
    sums = np.zeros((2, m))
    phi = np.zeros(m)
    prefix = np.zeros(m)
    suffix = np.zeros(m)
    tau = 0.0
    for j in range(P):
        th = theta[float_index[j]]
        tau += noise_var[j] * th * th
    tau *= 0.5
    _block_tables(theta, offsets, sizes, vt, sums)
    weights = (label_weight, 1.0 - label_weight)
    for row in range(y.shape[0]):
        value = 0.0
        for sgn in range(2):
            w = weights[sgn]
            if w == 0.0:
                continue
            t = float(y[row]) * (1.0 - 2.0 * sgn)
            ts = 0 if t > 0 else 1
            value += w * _row_value(X, codes, row, t, ts, theta, intercept, float_index, offsets,
                                    keep, other, tau, vt, sums, phi, prefix, suffix)
        out[row] = value
