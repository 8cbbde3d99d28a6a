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

``moments_runs`` is what a pass runs: one call per chunk, its float columns read in place as
addresses (float32 or float64: widened exactly in registers, so both give the same bits), tile by
tile; every run of the chunk's rows inside one fold block sums as ``moments_chunk`` on those rows
and lands in its fold.  Each dot product of two columns (and of a column with the 1 and the
labels) sums row i in lane i % 16 (``_lowlevel.lane_blocks_group``: four columns per pass over
the weights, vector registers) and combines the lanes by a fixed tree: about 2x the rate of
BLAS's X X^T on a float64 copy at p = 10, the copy gone (moment_stats.KERNEL_GRAM_COLUMNS).
"""
from __future__ import annotations

import numpy as np

from ._lowlevel import GRADIENT_GROUP, LANES, column_view, lane_blocks, lane_blocks_group
from ._options import jit
from .sgd import _lane_total  # the fixed combine tree of the lanes, shared with the SGD kernels


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
    """y-hat per row, (K, n): ``_label_tile`` of every row."""
    n = y.shape[0]
    Y = np.zeros((K, n))
    _label_tile(y, 0, n, label_kind, label_scale, label_q, label_r, Y)
    return Y


@jit
def _attribute_inverses(sizes, keep, other):
    """Each attribute's first slot among the codes (local, m + 1), and the randomized-response
    inverse of its one-hot e-hat = base + inv * e: inv = 1/(q - r), base = -r/(q - r)."""
    m = sizes.shape[0]
    local = np.zeros(m + 1, np.int64)
    for a in range(m):
        local[a + 1] = local[a] + sizes[a]
    inv = np.empty(m)
    base = np.empty(m)
    for a in range(m):
        inv[a] = 1.0 / (keep[a] - other[a])
        base[a] = -other[a] * inv[a]
    return local, inv, base


@jit
def _finish_attributes(n, offsets, sizes, local, inv, base, count, pairs, ybucket, sy, acc, bacc,
                       G, B):
    """The attribute and constant terms of n rows (their code counts, pairs of codes and label
    sums by code), then acc and bacc into G and B (the lower triangle from the upper): the end of
    ``moments_chunk`` and of each run of ``moments_runs``."""
    m = sizes.shape[0]
    d = acc.shape[0]
    K = bacc.shape[1]
    one = d - 1
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
    local, inv, base = _attribute_inverses(sizes, keep, other)
    R = local[m]
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
    _finish_attributes(n, offsets, sizes, local, inv, base, count, pairs, ybucket, sy, acc,
                       bacc, G, B)


@jit
def _label_tile(y, first, m, label_kind, label_scale, label_q, label_r, Y):
    """y-hat of rows first..first+m into Y[:, :m], no allocation (label_kind 0: zeros)."""
    K = Y.shape[0]
    if label_kind == 1:
        for i in range(m):
            Y[0, i] = label_scale * y[first + i]
    elif label_kind == 2:
        kinv = 1.0 / (label_q - label_r)
        for k in range(K):
            for i in range(m):
                Y[k, i] = -label_r * kinv
        for i in range(m):
            Y[int(y[first + i]), i] += kinv
    else:
        for k in range(K):
            for i in range(m):
                Y[k, i] = 0.0


@jit
def _column_dots(weight, addresses, like, first, m, t_from, lanes, out):
    """out[t] = sum_i weight[i] * float64(column_t[first + i]) over i < m, for every float column
    t >= t_from: row i in lane i % LANES (each lane from +0.0, in order), the lanes' fixed tree,
    then the rows after the last full block of LANES in order.  GRADIENT_GROUP columns per pass
    over the weights (``lane_blocks_group``: vector registers, float32 widened in them); with at
    least that many columns the last pass ends at column P - 1 (it may redo columns before the
    previous pass's end, and before t_from: the same bits, so no column is left to a slower pass
    alone).  Fewer columns: one ``lane_blocks`` each (a float64 ``weight`` then)."""
    P = addresses.shape[0]
    n_blocks = m // LANES
    q = n_blocks * LANES
    t = t_from
    while t < P:
        if P >= GRADIENT_GROUP:
            t = min(t, P - GRADIENT_GROUP)
            lane_blocks_group(weight, addresses, t, first, like, n_blocks, lanes)
            for g in range(GRADIENT_GROUP):
                out[t + g] = _lane_total(lanes, LANES * g)
            t += GRADIENT_GROUP
        else:
            lane_blocks(weight, column_view(addresses[t] + first * like.itemsize, q, like),
                        n_blocks, lanes)
            out[t] = _lane_total(lanes, 0)
            t += 1
    if q < m:
        for t in range(t_from, P):
            column = column_view(addresses[t] + first * like.itemsize, m, like)
            s = out[t]
            for i in range(q, m):
                s += np.float64(weight[i]) * np.float64(column[i])
            out[t] = s


@jit
def _tile_sums(X, addresses, like, first, m, codes, float_index, local, offsets, sizes, inv,
               base, ones, Y, acc, bacc, bucket, lanes, dots, float_gram):
    """One tile's float columns (rows first..first+m of the chunk; X[:, :m] their float64 copy)
    against the 1, the labels, the codes (and each other when float_gram is 1), into acc and
    bacc."""
    P = addresses.shape[0]
    n_attr = codes.shape[0]
    K = Y.shape[0]
    one = acc.shape[0] - 1
    _column_dots(ones, addresses, like, first, m, 0, lanes, dots)
    for j in range(P):
        _add(acc, float_index[j], one, dots[j])
        if n_attr:
            bucket[:] = 0.0
            xj = X[j]
            for a in range(n_attr):
                for i in range(m):
                    bucket[local[a] + codes[a, first + i]] += xj[i]
            for a in range(n_attr):
                for c in range(sizes[a]):
                    _add(acc, float_index[j], offsets[a] + c,
                         base[a] * dots[j] + inv[a] * bucket[local[a] + c])
    for k in range(K):
        _column_dots(Y[k], addresses, like, first, m, 0, lanes, dots)
        for j in range(P):
            bacc[float_index[j], k] += dots[j]
    if float_gram == 1:
        for j in range(P):
            if P >= GRADIENT_GROUP:         # the column itself as the weights, in place
                _column_dots(column_view(addresses[j] + first * like.itemsize, m, like),
                             addresses, like, first, m, j, lanes, dots)
            else:
                _column_dots(X[j], addresses, like, first, m, j, lanes, dots)
            for t in range(j, P):
                _add(acc, float_index[j], float_index[t], dots[t])


@jit
def _code_counts(codes, first, m, local, Y, count, pairs, ybucket, sy):
    """Counts of codes and of pairs of codes, label sums by code, over rows first..first+m."""
    n_attr = codes.shape[0]
    K = Y.shape[0]
    for i in range(m):
        for k in range(K):
            sy[k] += Y[k, i]
        for a in range(n_attr):
            ca = local[a] + codes[a, first + i]
            count[ca] += 1.0
            for k in range(K):
                ybucket[ca, k] += Y[k, i]
            for a2 in range(a + 1, n_attr):
                pairs[ca, local[a2] + codes[a2, first + i]] += 1.0


@jit
def _finish_run(rows, float_index, variance, offsets, sizes, local, inv, base, count, pairs,
                ybucket, sy, acc, bacc, G, B):
    """The run's attribute and constant terms and the variance correction (as ``moments_chunk``
    after its row loops), then acc and bacc into G and B (the lower triangle from the upper)."""
    for j in range(float_index.shape[0]):
        acc[float_index[j], float_index[j]] -= rows * variance[j]
    _finish_attributes(rows, offsets, sizes, local, inv, base, count, pairs, ybucket, sy, acc,
                       bacc, G, B)


@jit
def moments_runs(addresses, like, n, float_index, variance, codes, offsets, sizes, keep, other, y,
                 label_kind, label_scale, label_q, label_r, start, block_rows, folds, G, B, rows,
                 float_gram=1, tile=1024):
    """One chunk of n rows, its P float columns at ``addresses`` (1-D arrays of ``like``'s dtype,
    float32 or float64, read in place and widened to float64 tile by tile), into the fold sums:
    every run of its rows inside one block of ``block_rows`` (row i of the chunk is row start + i
    of the source, in fold ((start + i) // block_rows) % folds) adds its debiased sums (as one
    ``moments_chunk`` call on the run) to G[f] (folds, d, d), B[f] (folds, d, K), rows[f].
    float_gram: 0 the caller adds each run's float products (X X^T by BLAS for many columns)."""
    P = addresses.shape[0]
    m_attr = codes.shape[0]
    d = G.shape[1]
    K = B.shape[2]
    local, inv, base = _attribute_inverses(sizes, keep, other)
    R = local[m_attr]
    X = np.empty((P, tile))
    Y = np.empty((K, tile))
    ones = np.ones(tile)
    lanes = np.empty(LANES * GRADIENT_GROUP)
    dots = np.empty(P)
    acc = np.empty((d, d))
    bacc = np.empty((d, K))
    bucket = np.empty(R)
    count = np.empty(R)
    pairs = np.empty((R, R))
    ybucket = np.empty((R, K))
    sy = np.empty(K)
    a = 0
    while a < n:
        b = min(n, (start + a) // block_rows * block_rows + block_rows - start)
        f = ((start + a) // block_rows) % folds
        acc[:] = 0.0
        bacc[:] = 0.0
        count[:] = 0.0
        pairs[:] = 0.0
        ybucket[:] = 0.0
        sy[:] = 0.0
        for first in range(a, b, tile):
            m = min(tile, b - first)
            if m_attr or (float_gram == 1 and P < GRADIENT_GROUP):
                for j in range(P):
                    column = column_view(addresses[j], n, like)
                    xj = X[j]
                    for i in range(m):
                        xj[i] = np.float64(column[first + i])
            _label_tile(y, first, m, label_kind, label_scale, label_q, label_r, Y)
            _tile_sums(X, addresses, like, first, m, codes, float_index, local, offsets, sizes,
                       inv, base, ones, Y, acc, bacc, bucket, lanes, dots, float_gram)
            _code_counts(codes, first, m, local, Y, count, pairs, ybucket, sy)
        _finish_run(b - a, float_index, variance, offsets, sizes, local, inv, base, count, pairs,
                    ybucket, sy, acc, bacc, G[f], B[f])
        rows[f] += b - a
        a = b
