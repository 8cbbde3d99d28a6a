"""The private hold-out risk of several heads in one read (docs/tuning.md "What it costs").

``score_block_heads`` scores G heads (the ``'auto'`` grid, or one class's heads of a k-class
grid) on rows [0, n_rows) of a chunk and merges the per-row IWP loss values into the streaming
sums of ``iwpfast.estimates.RiskAccumulator`` (mean, squared deviations, the G x G comoment of the
paired estimates, sum |v|, sum v^2, max |v|), SCORE_BLOCK rows at a time, with the merge of that
class (Chan et al.).  It is the compiled form of ``HeadScorer``'s NumPy batch step (its twin,
``iwpfast.sgd.scoring.HeadScorer.add_source``), which made every (rows x G) intermediate a
temporary array: scoring a tenth of the rows cost as much as training 25 heads on the other nine
tenths.

Per block: the margins of all heads, the loss values, then the block's sums and the merge.
Every loop has the heads innermost over row-major (rows, G) buffers: the per-head sums are then
element-wise vector updates, not reductions, so they vectorize without reassociating any sum
(``fastmath`` stays off, _options.py), and the comoment is a rank-4 update per 4 rows.  The
exponential uses ``fast_exp`` (within 1 ulp of libm; Numba's ``math.exp`` is a scalar call).  A
row's value is w_z F_0(z) + w_-z F_0(-z) with z = s u, s = +1 where the row's label is the
head's class (``cls`` >= 0: class indices) or the label itself (``cls`` < 0: +-1 labels), and
(w_z, w_-z) = table[0:2] where s > 0, table[2:4] elsewhere; a zero weight skips its term (an
exponential F_0(-z) may overflow where its weight is 0).  F_0 of the exponential loss is
exp(-tau - v), of the quadratic (v - 1)^2 / 2 - tau; squared error (regression) gives
(u - y)^2 / 2 - tau - target_var / 2.  Other losses (``abi.SCORE_KERNEL_LOSSES`` lists these
three) are scored by the twin: the logistic's F_0 is a truncated series.
"""
from __future__ import annotations

import numpy as np

from ._lowlevel import borrowed, column_view, keep_alive
from ._options import jit, jit_inline
from .abi import LOSS_EXPONENTIAL, LOSS_SQUARED_ERROR
from .fastexp import fast_exp

#: rows per block: the (SCORE_BLOCK, G) buffers of 25 heads stay in the L2 cache
SCORE_BLOCK = 512
#: heads per vector of the loops over the heads (8 float64 with AVX-512), and the smallest
#: remainder of heads worth padding to a whole vector (measured: G = 15 scored in 1.9x the time
#: of G = 16, G = 25 in 1.17x that of 24: one leftover head costs less than 7 padded ones)
HEAD_VECTOR = 8
PAD_MIN_TAIL = 3
#: up to this many heads (not padded), a block's margins and values are computed a head at a
#: time across the rows (vectors of rows; above it, vectors of heads): 400,000 rows of 10
#: float32 columns took 20 ms for 2 heads and 22 ms for 3 or 4 (padded to 8) across the heads,
#: 7.5 ms and about 15 ms across the rows (docs/tuning.md "What it costs")
FEW_HEADS = 4


@jit
def score_block_heads(addresses, like, n_rows, y, row_weight, theta_t, intercept, tau, loss,
                      table, cls, target_var, mean, m2, comoment, sum_abs, sum_sq, max_abs,
                      n_before):
    """Score rows [0, n_rows) of the columns at ``addresses`` (dtype of ``like``; labels ``y``
    float64; ``row_weight`` float64 per row, or empty for none) with the G heads of ``theta_t``
    (p, G), ``intercept`` (G,), ``tau`` (G,), and merge them into the sums (arrays of G, and
    ``comoment`` (G, G)) of ``n_before`` rows.  Returns the rows now summed.

    The heads are padded to ``padded_heads(G)`` (zero heads, their sums discarded): the loops
    over the heads then run in whole vectors, each head with the same operations, and so the
    same bits, as unpadded."""
    n_features, n_heads = theta_t.shape
    # copies of the heads and their sums, padded (one call site of _score_rows whatever G: it
    # is compiled once)
    width = padded_heads(n_heads)
    theta_p = np.zeros((n_features, width))
    theta_p[:, :n_heads] = theta_t
    sums = np.zeros((7, width))       # intercept, tau, mean, m2, sum_abs, sum_sq, max_abs
    for h in range(n_heads):
        sums[0, h] = intercept[h]
        sums[1, h] = tau[h]
        sums[2, h] = mean[h]
        sums[3, h] = m2[h]
        sums[4, h] = sum_abs[h]
        sums[5, h] = sum_sq[h]
        sums[6, h] = max_abs[h]
    comoment_p = np.zeros((width, width))
    comoment_p[:n_heads, :n_heads] = comoment
    owned = (theta_p, sums, comoment_p)
    theta_p, sums, comoment_p = borrowed(theta_p), borrowed(sums), borrowed(comoment_p)
    n = _score_rows(addresses, like, n_rows, y, row_weight, theta_p, sums[0], sums[1], loss,
                    table, cls, target_var, sums[2], sums[3], comoment_p, sums[4], sums[5],
                    sums[6], n_before)
    for h in range(n_heads):
        mean[h] = sums[2, h]
        m2[h] = sums[3, h]
        sum_abs[h] = sums[4, h]
        sum_sq[h] = sums[5, h]
        max_abs[h] = sums[6, h]
    comoment[:, :] = comoment_p[:n_heads, :n_heads]
    keep_alive(owned)
    return n


@jit_inline
def padded_heads(n_heads):
    """The heads a block is scored for: G, or G rounded up to a multiple of HEAD_VECTOR where the
    vector loops' scalar tail (G % HEAD_VECTOR heads, each ~3x a head in a vector: 15 heads
    took 1.9x the time of 16, bench/README.md "Sixth round") costs more than the padding; never
    for FEW_HEADS heads or fewer (scored a head at a time, in vectors of rows)."""
    tail = n_heads % HEAD_VECTOR
    if n_heads <= FEW_HEADS or tail < PAD_MIN_TAIL:
        return n_heads
    return n_heads + HEAD_VECTOR - tail


@jit_inline
def _score_rows(addresses, like, n_rows, y, row_weight, theta_t, intercept, tau, loss,
                table, cls, target_var, mean, m2, comoment, sum_abs, sum_sq, max_abs,
                n_before):
    """``score_block_heads`` on heads as given."""
    n_features, n_heads = theta_t.shape
    values = np.empty((SCORE_BLOCK, n_heads))
    signs = np.empty(SCORE_BLOCK)
    block_sum = np.empty(n_heads)
    deviation = np.empty(n_heads)
    delta = np.empty(n_heads)
    # borrowed (_lowlevel.borrowed): the row views below update no reference counts
    owned = (values, signs, block_sum, deviation, delta)
    values, signs, block_sum = borrowed(values), borrowed(signs), borrowed(block_sum)
    deviation, delta, addresses = borrowed(deviation), borrowed(delta), borrowed(addresses)
    like = borrowed(like)
    y, row_weight, theta_t = borrowed(y), borrowed(row_weight), borrowed(theta_t)
    intercept, tau, table = borrowed(intercept), borrowed(tau), borrowed(table)
    mean, m2, comoment = borrowed(mean), borrowed(m2), borrowed(comoment)
    sum_abs, sum_sq, max_abs = borrowed(sum_abs), borrowed(sum_sq), borrowed(max_abs)
    weighted = row_weight.shape[0] > 0
    # one or two heads (the final scoring of a race's survivors: a whole hold-out): their
    # margins and values a head at a time over the rows, so that the loops run across rows in
    # vectors; every value has the same operations, and so the bits, as in the rows' layout
    few = n_heads <= FEW_HEADS
    by_head = np.empty((n_heads if few else 0, SCORE_BLOCK))
    owned_few = by_head
    by_head = borrowed(by_head)
    n = n_before
    for start in range(0, n_rows, SCORE_BLOCK):
        m = min(SCORE_BLOCK, n_rows - start)
        labels = y[start:start + m]
        for i in range(m):
            label = labels[i]
            if cls >= 0.0:
                signs[i] = 1.0 if label == cls else -1.0
            else:
                signs[i] = label
        if few:
            _values_by_head(addresses, like, start, m, labels, signs, row_weight, weighted,
                            theta_t, intercept, tau, loss, table, target_var, by_head, values)
            _merge_block(values, m, mean, m2, comoment, sum_abs, sum_sq, max_abs, n, block_sum,
                         deviation, delta)
            n += m
            continue
        # margins u = theta^T x + b (each sum from +0.0 over the features in order)
        for i in range(m):
            row = values[i]
            for h in range(n_heads):
                row[h] = 0.0
        for j in range(n_features):
            column = column_view(addresses[j] + start * like.itemsize, m, like)
            weights_j = theta_t[j]
            for i in range(m):
                x = np.float64(column[i])
                row = values[i]
                for h in range(n_heads):
                    row[h] += weights_j[h] * x
        # the per-row loss values, in place of the margins
        for i in range(m):
            row = values[i]
            s = signs[i]
            if loss == LOSS_SQUARED_ERROR:
                for h in range(n_heads):
                    r = (row[h] + intercept[h]) - labels[i]
                    row[h] = 0.5 * r * r - tau[h] - 0.5 * target_var
            else:
                w_z = table[0] if s > 0.0 else table[2]
                w_minus_z = table[1] if s > 0.0 else table[3]
                if loss == LOSS_EXPONENTIAL:
                    for h in range(n_heads):
                        z = s * (row[h] + intercept[h])
                        first = w_z * fast_exp(-tau[h] - z)
                        # a zero weight drops its term by a select (exp(-tau + z) may overflow)
                        second = w_minus_z * fast_exp(-tau[h] + z)
                        row[h] = first + second if w_minus_z != 0.0 else first
                else:                           # LOSS_QUADRATIC
                    for h in range(n_heads):
                        z = s * (row[h] + intercept[h])
                        first = w_z * (0.5 * (z - 1.0) * (z - 1.0) - tau[h])
                        second = w_minus_z * (0.5 * (z + 1.0) * (z + 1.0) - tau[h])
                        row[h] = first + second if w_minus_z != 0.0 else first
            if weighted:
                weight_i = row_weight[start + i]
                for h in range(n_heads):
                    row[h] = row[h] * weight_i
        _merge_block(values, m, mean, m2, comoment, sum_abs, sum_sq, max_abs, n, block_sum,
                     deviation, delta)
        n += m
    keep_alive(owned)
    keep_alive(owned_few)
    return n


@jit_inline
def _values_by_head(addresses, like, start, m, labels, signs, row_weight, weighted, theta_t,
                    intercept, tau, loss, table, target_var, by_head, values):
    """The loss values of rows [start, start + m) for each head in turn (``by_head``: one row of
    the block per head), then laid out as ``_score_rows``' (rows, G) ``values``: each value by
    the operations, in the order, of ``_score_rows``' own loops."""
    n_features, n_heads = theta_t.shape
    for h in range(n_heads):
        u = by_head[h]
        for i in range(m):
            u[i] = 0.0
        for j in range(n_features):
            column = column_view(addresses[j] + start * like.itemsize, m, like)
            w = theta_t[j, h]
            for i in range(m):
                u[i] += w * np.float64(column[i])
        b = intercept[h]
        t = tau[h]
        if loss == LOSS_SQUARED_ERROR:
            for i in range(m):
                r = (u[i] + b) - labels[i]
                u[i] = 0.5 * r * r - t - 0.5 * target_var
        elif loss == LOSS_EXPONENTIAL:
            for i in range(m):
                s = signs[i]
                w_z = table[0] if s > 0.0 else table[2]
                w_minus_z = table[1] if s > 0.0 else table[3]
                z = s * (u[i] + b)
                first = w_z * fast_exp(-t - z)
                second = w_minus_z * fast_exp(-t + z)
                u[i] = first + second if w_minus_z != 0.0 else first
        else:                                   # LOSS_QUADRATIC
            for i in range(m):
                s = signs[i]
                w_z = table[0] if s > 0.0 else table[2]
                w_minus_z = table[1] if s > 0.0 else table[3]
                z = s * (u[i] + b)
                first = w_z * (0.5 * (z - 1.0) * (z - 1.0) - t)
                second = w_minus_z * (0.5 * (z + 1.0) * (z + 1.0) - t)
                u[i] = first + second if w_minus_z != 0.0 else first
        if weighted:
            for i in range(m):
                u[i] = u[i] * row_weight[start + i]
        for i in range(m):
            values[i, h] = u[i]


@jit_inline
def _merge_block(values, m, mean, m2, comoment, sum_abs, sum_sq, max_abs, n, block_sum,
                 deviation, delta):
    """Merge the values of a block of m rows (rows of ``values``) into the sums of n rows (the
    update of ``RiskAccumulator.add``); ``values`` is left holding the centred values."""
    n_heads = values.shape[1]
    for h in range(n_heads):
        block_sum[h] = 0.0
        deviation[h] = 0.0
    for i in range(m):
        row = values[i]
        for h in range(n_heads):
            v = row[h]
            a = abs(v)
            block_sum[h] += v
            sum_abs[h] += a
            sum_sq[h] += a * a
            max_abs[h] = max(max_abs[h], a)
    total = n + m
    cross = n * m / total
    for h in range(n_heads):
        block_sum[h] = block_sum[h] / m           # now the block's mean
        delta[h] = block_sum[h] - mean[h]
    for i in range(m):
        row = values[i]
        for h in range(n_heads):
            d = row[h] - block_sum[h]
            row[h] = d
            deviation[h] += d * d
    if n_heads > 1:
        # the comoment of centred values: a rank-4 update per 4 rows, heads innermost (each
        # comoment row is loaded and stored once per 4 rows, not once per row)
        i = 0
        while i + 4 <= m:
            r0 = values[i]
            r1 = values[i + 1]
            r2 = values[i + 2]
            r3 = values[i + 3]
            for g in range(n_heads):
                a0 = r0[g]
                a1 = r1[g]
                a2 = r2[g]
                a3 = r3[g]
                target = comoment[g]
                for h in range(n_heads):
                    target[h] += (a0 * r0[h] + a1 * r1[h]) + (a2 * r2[h] + a3 * r3[h])
            i += 4
        while i < m:
            row = values[i]
            for g in range(n_heads):
                row_g = row[g]
                target = comoment[g]
                for h in range(n_heads):
                    target[h] += row_g * row[h]
            i += 1
        for g in range(n_heads):
            target = comoment[g]
            for h in range(n_heads):
                target[h] += delta[g] * delta[h] * cross
    for h in range(n_heads):
        mean[h] = mean[h] + delta[h] * (m / total)
        m2[h] = m2[h] + deviation[h] + delta[h] * delta[h] * cross
