"""The release's debiased second moments, one chunk per call (``iwpfast.moments``).

The compiled form of ``iwpfast.moments.accumulate_numpy`` (its NumPy twin, written from the
formulas of docs/math.md "The release's debiased second moments").  Only arrays and scalars
cross: X (P, n) released float columns, their coordinate ``float_index`` and noise ``variance``,
codes (m, n) randomized-response category indices with the attributes' ``offsets``, ``sizes``,
``keep`` (q) and ``other`` (r), y (n,) float64 label values, and the accumulators G (d, d) and
B (d, K) updated in place (d = coordinates + 1, the last one the intercept's constant 1).

z = (float columns as released, each attribute's e-hat = (e_c - r 1)/(q - r), then 1).  Column
by column, never row by row across the (P, n) block (a row's P values lie n apart: measured 30x
slower at p = 100): each float column's sum, its sums against y-hat and its sums over the rows
where an attribute shows category c give every product with the 1, the labels and the e-hats
(sum_i x_i e-hat_c(i) = base * sum x + inv * sum_{i: c~_i = c} x, base = -r/(q - r),
inv = 1/(q - r)); the attributes among themselves need only the counts of the codes and of
pairs of codes.  Inside an attribute's own block e_c e_c^T = diag(e_c) is estimated by
diag(e-hat) (e-hat e-hat^T would be biased: E[e-hat_c^2] != E[e_c]).  The noise variances are
subtracted once per chunk (n v_j: the correction is the same for every row).
"""
from __future__ import annotations

import numpy as np

from ._options import jit


@jit
def _add(acc, u, w, value):
    """Add to the upper triangle (the lower one is written from it at the end)."""
    if u <= w:
        acc[u, w] += value
    else:
        acc[w, u] += value


@jit
def _dot(a, b, product):
    """sum_i a_i b_i (product=1) or sum_i a_i (product=0), in four interleaved partial sums: one
    chain of dependent additions runs at a quarter of the adder's rate (no fastmath here, so the
    compiler may not reorder the sum itself)."""
    n = a.shape[0]
    s0 = s1 = s2 = s3 = 0.0
    q = n - n % 4
    for i in range(0, q, 4):
        if product == 1:
            s0 += a[i] * b[i]
            s1 += a[i + 1] * b[i + 1]
            s2 += a[i + 2] * b[i + 2]
            s3 += a[i + 3] * b[i + 3]
        else:
            s0 += a[i]
            s1 += a[i + 1]
            s2 += a[i + 2]
            s3 += a[i + 3]
    for i in range(q, n):
        s0 += a[i] * b[i] if product == 1 else a[i]
    return (s0 + s1) + (s2 + s3)


@jit
def _label_values(y, label_kind, label_scale, label_q, label_r, K):
    """y-hat per row, (K, n)."""
    n = y.shape[0]
    Y = np.zeros((K, n))
    if label_kind == 1:
        for i in range(n):
            Y[0, i] = label_scale * y[i]
    elif label_kind == 2:
        kinv = 1.0 / (label_q - label_r)
        for k in range(K):
            for i in range(n):
                Y[k, i] = -label_r * kinv
        for i in range(n):
            Y[int(y[i]), i] += kinv
    return Y


@jit
def moments_chunk(X, float_index, variance, codes, offsets, sizes, keep, other, y, label_kind,
                  label_scale, label_q, label_r, G, B, float_gram=1):
    """Add one chunk's debiased sums of z z^T to G and of z y-hat to B (both in place).

    label_kind: 0 no label (B has 0 columns); 1 a scalar y-hat = label_scale * y; 2 a class index,
    y-hat_k = (1[y == k] - label_r) / (label_q - label_r) for k < B.shape[1].
    float_gram: 1 the products of two float columns too; 0 the caller adds them (X X^T by BLAS,
    faster: docs/performance-kernels.md) and the kernel does the rest (the variance correction
    included)."""
    P, n = X.shape
    m = codes.shape[0]
    d = G.shape[0]
    K = B.shape[1]
    Y = _label_values(y, label_kind, label_scale, label_q, label_r, K)
    local = np.zeros(m + 1, np.int64)           # each attribute's first slot among the R codes
    for a in range(m):
        local[a + 1] = local[a] + sizes[a]
    R = local[m]
    inv = np.empty(m)
    base = np.empty(m)
    for a in range(m):
        inv[a] = 1.0 / (keep[a] - other[a])
        base[a] = -other[a] * inv[a]
    one = d - 1
    acc = np.zeros((d, d))
    bacc = np.zeros((d, K))
    bucket = np.zeros(R)
    sxy = np.zeros(K)
    for j in range(P):                          # a float column against everything
        u = float_index[j]
        sx = _dot(X[j], X[j], 0)
        for k in range(K):
            sxy[k] = _dot(X[j], Y[k], 1)
        bucket[:] = 0.0
        for a in range(m):
            for i in range(n):
                bucket[local[a] + codes[a, i]] += X[j, i]
        if float_gram == 1:
            for t in range(j, P):
                _add(acc, u, float_index[t], _dot(X[j], X[t], 1))
        _add(acc, u, one, sx)
        for k in range(K):
            bacc[u, k] += sxy[k]
        for a in range(m):
            for c in range(sizes[a]):
                _add(acc, u, offsets[a] + c, base[a] * sx + inv[a] * bucket[local[a] + c])
        acc[u, u] -= n * variance[j]
    # the attributes and the 1: counts of codes and of pairs of codes, label sums by code
    count = np.zeros(R)
    pairs = np.zeros((R, R))
    ybucket = np.zeros((R, K))
    sy = np.zeros(K)
    for i in range(n):
        for k in range(K):
            sy[k] += Y[k, i]
        for a in range(m):
            ca = local[a] + codes[a, i]
            count[ca] += 1.0
            for k in range(K):
                ybucket[ca, k] += Y[k, i]
            for a2 in range(a + 1, m):
                pairs[ca, local[a2] + codes[a2, i]] += 1.0
    acc[one, one] += n
    for k in range(K):
        bacc[one, k] += sy[k]
    for a in range(m):
        for c in range(sizes[a]):
            v = offsets[a] + c
            lv = local[a] + c
            se = base[a] * n + inv[a] * count[lv]        # sum of e-hat_v
            acc[v, v] += se                               # diag(e-hat): the block's own estimate
            _add(acc, v, one, se)
            for k in range(K):
                bacc[v, k] += base[a] * sy[k] + inv[a] * ybucket[lv, k]
            for a2 in range(a + 1, m):
                for c2 in range(sizes[a2]):
                    lw = local[a2] + c2
                    _add(acc, v, offsets[a2] + c2,
                         base[a] * base[a2] * n + base[a] * inv[a2] * count[lw]
                         + inv[a] * base[a2] * count[lv] + inv[a] * inv[a2] * pairs[lv, lw])
    for u in range(d):
        G[u, u] += acc[u, u]
        for w in range(u + 1, d):
            G[u, w] += acc[u, w]
            G[w, u] += acc[u, w]
        for k in range(K):
            B[u, k] += bacc[u, k]
