"""Fused minibatch projected SGD over one chunk of rows (docs/internals.md "One SGD update").

Layout and order of work per batch of m rows (why it is fast):
1. margins u_i: blocks of 32 rows held in four vector registers while the loop runs over all the
   features (``_lowlevel.margin_blocks``, LLVM IR), each sum from +0.0 in feature order;
2. per-row scalars (a_i, c_i) in a loop without branches on the data, so the hand-written
   ``fast_exp`` vectorizes (the logistic series too: ``_logistic_rows`` runs its loops over k and
   the Eulerian coefficients outside the rows);
3. sums over rows with ``_dot_lanes``: row i goes to lane i % 16 (two 8-wide vector
   accumulators written in LLVM IR, ``_lowlevel.lane_blocks``), then a fixed tree over the
   lanes.  That vectorizes without ``fastmath`` and its order depends on m only, not on the
   column dtype, so a batch straddling two chunks (computed from the carry buffer) equals the
   same rows computed in place.  The gradient takes 4 columns per pass over the row
   weights (``_lowlevel.lane_blocks_group``), with the same bits as one column at a time.
The per-batch step ``_batch`` is compiled once per argument types (``jit_forceinline``) and
inlined by LLVM where it is called: a call would increment and decrement the reference count of
each array argument (atomic operations, ~40 per batch, as much as the arithmetic of a small
batch), inlined Numba's reference-count pruning removes them.  Its helpers are inlined into it at
the Numba IR level (``jit_inline``).  In ``sgd_chunk`` every batch, the carried one and the
stream's last one included, goes through one call site: a first fit types and lowers ``_batch``
once (each copy costs seconds of compile time), and LLVM inlines it once.
Views taken inside the loops (a head's row of margins, a feature's row of the transposed state, a
batch's labels) would each still increment and decrement a reference count, which the pruning
cannot remove in a loop: the chunk functions borrow every array before their loops
(``_lowlevel.borrowed``, a null owner; before, ``perf`` found 35-57 % of their samples in
those updates).
With many columns (p >= STAGE_MIN_FEATURES) complete batches run from a copy of the next 32 KiB
of each column (``sgd_chunk``): p short runs per batch are more streams than the hardware
prefetcher follows, long runs are not.  With fewer, each batch read in place first asks the cache
for the rows PREFETCH_AHEAD batches on (``_lowlevel.prefetch_bytes``): an update waits on the one
before it, so its reads would not overlap the arithmetic otherwise.

Columns (and the labels) come in as addresses (see ``_lowlevel.column_view``); ``like`` is an
empty array of the column dtype (float32 or float64).  So one compiled kernel per (feature dtype,
label dtype) serves every p, (p, n) arrays and lists of 1-D arrays, writable or read-only.  A
weighted head (``iparams[I_WEIGHTED]``) reads its sample weights as one more column after the p
features, in the same dtype (carried and staged with them): each row's scalars are multiplied by
its weight right after they are computed (docs/math.md "Sample weights").  Every
argument has been validated by the wrapper ``iwpfast.sgd.engine``: the kernels check nothing and
never raise.

Parameter packing (so the signature stays stable): ``fparams`` (float64) and ``iparams``
(int64) hold one head's configuration at the positions ``F_*`` / ``I_*`` of ``abi.py``, which
also defines the codes, the ``counters`` and ``telemetry`` positions and ``NO_DIVERGENCE``: the
ABI shared with ``iwpfast.sgd``.  The label weights of (F(z), F(-z)) are a 2 x 2 table:
(match_z, match_minus_z) where the row's label is the head's class, (other_z, other_minus_z)
where it is not; binary heads have two equal rows (S~, 1 - S~), public labels (1, 0).
``eulerian[d, k]`` = (-1)^k A(d, k), the Eulerian-number coefficients of the sigmoid derivatives
(logistic only; None for the other losses, so that a fit of another loss does not compile the
logistic code: a None argument is a type of its own, and Numba prunes ``is not None`` branches).
"""
from __future__ import annotations

import math

import numpy as np

from ._lowlevel import (
    GRADIENT_GROUP,
    HEAD_GROUP,
    LANES,
    MARGIN_BLOCK,
    borrowed,
    column_view,
    gradient_blocks_heads,
    keep_alive,
    lane_blocks,
    lane_blocks_group,
    margin_blocks,
    margin_blocks_heads,
    prefetch_bytes,
)
from ._options import jit, jit_forceinline, jit_inline
from .abi import (  # codes and positions: the ABI shared with iwpfast.sgd (abi.py)
    C_CARRY,
    C_NAVG,
    C_STEP,
    C_TRACE,
    F_ALPHA,
    F_LEARNING_RATE,
    F_MATCH_MINUS_Z,
    F_MATCH_Z,
    F_MU,
    F_OTHER_MINUS_Z,
    F_OTHER_Z,
    F_RADIUS,
    F_VARIANCE_CAP,
    I_AVERAGE_START,
    I_BATCH_SIZE,
    I_FIT_INTERCEPT,
    I_LOSS,
    I_MODE,
    I_NOISE_LAW,
    I_SCHEDULE,
    I_TRACE_EVERY,
    I_TRUNCATION,
    I_WEIGHTED,
    LAW_LAPLACE,
    LOSS_EXPONENTIAL,
    LOSS_LOGISTIC,
    LOSS_QUADRATIC,
    MODE_IWP,
    NO_DIVERGENCE,
    NOISE_CURVATURE_BLOCK,
    NOISE_GRID_BLOCK,
    SCHEDULE_CONSTANT,
    T_BATCHES,
    T_CAP,
    T_ENERGY,
    T_GM2,
    T_GMEAN,
    T_PROJ,
    T_ROWS,
)
from .fastexp import fast_exp

# With many columns a batch reads p short runs side by side, more streams than the hardware
# prefetcher follows; the chunk loop then copies STAGE_COLUMN_BYTES of each column at a time
# (measured at p = 100, 2M rows: float32 +25-50% with 32 KiB runs, float64 about even)
STAGE_MIN_FEATURES = 24
STAGE_COLUMN_BYTES = 32768
# batches read in place ask the cache for the rows of the batch PREFETCH_AHEAD batches on: 4
# batches of 128 rows compute for ~2 us, longer than a read from memory takes (1 to 8 ahead
# measured alike, p = 10 float32: 1.30-1.33x)
PREFETCH_AHEAD = 4


@jit_inline
def _lane_total(lanes, base):
    """The fixed combine tree of the LANES lanes at lanes[base:base + LANES]."""
    return ((((lanes[base + 0] + lanes[base + 8]) + (lanes[base + 4] + lanes[base + 12]))
             + ((lanes[base + 2] + lanes[base + 10]) + (lanes[base + 6] + lanes[base + 14])))
            + (((lanes[base + 1] + lanes[base + 9]) + (lanes[base + 5] + lanes[base + 13]))
               + ((lanes[base + 3] + lanes[base + 11]) + (lanes[base + 7] + lanes[base + 15]))))


@jit_inline
def _dot_lanes(weight, column, m, lanes):
    """sum_i weight[i] * column[i] for i < m, products in float64, in a fixed order set by m.

    Row i goes to lane i % LANES (``lane_blocks`` for the full blocks of LANES rows, then the
    tail here), each lane sums its rows in order from +0.0, and the lanes combine as a fixed
    tree.  The order depends on m only, not on the column dtype or on where the rows came from,
    so a batch computed from the float64 carry buffer gives the bits of the same rows in place.
    """
    n_blocks = m // LANES
    lane_blocks(weight, column, n_blocks, lanes)
    first = n_blocks * LANES
    for k in range(m - first):
        lanes[k] += weight[first + k] * np.float64(column[first + k])
    return _lane_total(lanes, 0)


@jit_inline
def _sum_lanes(values, m, lanes, ones):
    """sum_i values[i] for i < m, in the order of ``_dot_lanes`` (products with 1.0 are exact)."""
    return _dot_lanes(values, ones, m, lanes)


@jit_inline
def _margins(addresses, like, offset, m, theta, intercept, fit_intercept, margin):
    """margin[i] = theta^T x_i (+ b), each sum from +0.0 over the features in order.

    Blocks of MARGIN_BLOCK rows stay in registers over all the features (``margin_blocks``);
    the rows after the last full block take one pass per feature, in the same order.
    """
    n_blocks = m // MARGIN_BLOCK
    margin_blocks(addresses, offset, like, theta, n_blocks, margin)
    _margin_rest(addresses, like, offset, n_blocks * MARGIN_BLOCK, m, theta, intercept,
                 fit_intercept, margin)


@jit_inline
def _margin_rest(addresses, like, offset, first, m, theta, intercept, fit_intercept, margin):
    """``_margins`` after the blocks: rows [first, m) one pass per feature, then the intercept."""
    n_features = theta.shape[0]
    rest = m - first
    if rest > 0:
        for i in range(rest):
            margin[first + i] = 0.0
        # views start at the first row of the rest: indices are then plain loop counters, which
        # LLVM knows are non-negative (an "offset + i" index keeps Numba's negative-index
        # wraparound select in the loop and stops vectorization)
        tail = margin[first:m]
        for j in range(n_features):
            column = column_view(addresses[j] + (offset + first) * like.itemsize, rest, like)
            t = theta[j]
            for i in range(rest):
                tail[i] += t * np.float64(column[i])
    if fit_intercept:
        b = intercept[0]
        for i in range(m):
            margin[i] += b


@jit
def _logistic_scalars(z, w, tau, truncation, weight_z, weight_minus_z, private, eulerian):
    """(a, c) of the K-truncated logistic IWP loss at margin z, with w = exp(-|z|), label weights
    (weight_z, weight_minus_z) of (F(z), F(-z)) (binary: S~ and 1 - S~).

    f'(v) = -S(-v); f^(n)(v) = S^(n-1)(v) for n >= 2, and for r = |z| >= 0 the sigmoid
    derivatives are S^(d)(r) = (-1)^(d+1) w (sum_k (-1)^k A(d,k) w^k) / (1+w)^(d+1) (Eulerian form,
    no cancellation).  S^(d) is even for odd d and odd for even d, which gives the values at z and -z.
    F_1(v) = f'(v) + sum_{k=1..K} (-tau)^k/k! S^(2k)(v), F_2(v) = sum_{k=0..K-1} (-tau)^k/k! S^(2k+1)(v).
    """
    q = 1.0 / (1.0 + w)
    odd_part = 0.0      # sum_{k=1..K} coef_k S^(2k)(r)   (odd in v)
    even_part = 0.0     # sum_{k=0..K-1} coef_k S^(2k+1)(r) (even in v)
    coefficient = 1.0   # (-tau)^k / k!
    q_power = q * q     # q^(d+1) for d = 1
    for k in range(truncation):
        # d = 2k + 1 (even function) enters F_2 with coefficient_k
        d = 2 * k + 1
        poly = 0.0
        for e in range(d - 1, -1, -1):
            poly = poly * w + eulerian[d, e]
        even_part += coefficient * (poly * w * q_power)
        q_power *= q
        # d = 2k + 2 (odd function) enters F_1 with coefficient_{k+1}
        coefficient = coefficient * (-tau) / (k + 1)
        d = 2 * k + 2
        poly = 0.0
        for e in range(d - 1, -1, -1):
            poly = poly * w + eulerian[d, e]
        # S^(d)(r) for r >= 0 with d even: (-1)^(d+1) times the v <= 0 form
        odd_part += coefficient * (-(poly * w * q_power))
        q_power *= q
    sign = 1.0 if z >= 0.0 else -1.0
    # f'(z) = -S(-z): for z >= 0 it is -w q, for z < 0 it is -q
    if z >= 0.0:
        first_at_z = -w * q
        first_at_minus_z = -q
    else:
        first_at_z = -q
        first_at_minus_z = -w * q
    f1_z = first_at_z + sign * odd_part
    if not private:
        return f1_z, even_part
    f1_minus_z = first_at_minus_z - sign * odd_part
    a = weight_z * f1_z - weight_minus_z * f1_minus_z
    c = weight_z * even_part + weight_minus_z * even_part
    return a, c


#: the row-weight buffer of the chunk loops holds this many rows of batch_size: the row weights,
#: then the scratch rows of ``_logistic_rows``
LOGISTIC_ROWS = 6


@jit_inline
def _eulerian_rows(eulerian, d, w, m, poly):
    """poly[i] = sum_e eulerian[d, e] w[i]^e by Horner from +0.0, e from d - 1 down (the order of
    ``_logistic_scalars``), rows innermost."""
    for i in range(m):
        poly[i] = 0.0
    for e in range(d - 1, -1, -1):
        c = eulerian[d, e]
        for i in range(m):
            poly[i] = poly[i] * w[i] + c


@jit_inline
def _logistic_rows(y, m, margin, tau, truncation, label_tilde, private, eulerian, weight,
                   curvature):
    """``_logistic_scalars`` for rows [0, m) of a binary head, with w_i in curvature[i]: the same
    operations in the same order per row (so the same bits), but rows innermost, the series'
    loops over k and the Eulerian coefficients outside, so that LLVM vectorizes every loop (the
    row-by-row form runs the series in scalar code: 2.2x the exponential loss's kernel time).
    Scratch: rows 1..5 of ``weight`` seen as LOGISTIC_ROWS rows of len(weight) / LOGISTIC_ROWS."""
    stride = weight.shape[0] // LOGISTIC_ROWS
    q = weight[stride:stride + m]
    q_power = weight[2 * stride:2 * stride + m]
    odd_part = weight[3 * stride:3 * stride + m]
    even_part = weight[4 * stride:4 * stride + m]
    poly = weight[5 * stride:5 * stride + m]
    for i in range(m):
        q[i] = 1.0 / (1.0 + curvature[i])
        q_power[i] = q[i] * q[i]
        odd_part[i] = 0.0
        even_part[i] = 0.0
    coefficient = 1.0
    for k in range(truncation):
        _eulerian_rows(eulerian, 2 * k + 1, curvature, m, poly)
        for i in range(m):
            even_part[i] += coefficient * (poly[i] * curvature[i] * q_power[i])
            q_power[i] *= q[i]
        coefficient = coefficient * (-tau) / (k + 1)
        _eulerian_rows(eulerian, 2 * k + 2, curvature, m, poly)
        for i in range(m):
            odd_part[i] += coefficient * (-(poly[i] * curvature[i] * q_power[i]))
            q_power[i] *= q[i]
    label_other = 1.0 - label_tilde
    for i in range(m):
        yi = np.float64(y[i])
        z = yi * margin[i]
        w = curvature[i]
        positive = z >= 0.0
        sign = 1.0 if positive else -1.0
        first_at_z = -w * q[i] if positive else -q[i]
        first_at_minus_z = -q[i] if positive else -w * q[i]
        f1_z = first_at_z + sign * odd_part[i]
        f1_minus_z = first_at_minus_z - sign * odd_part[i]
        private_a = label_tilde * f1_z - label_other * f1_minus_z
        private_c = label_tilde * even_part[i] + label_other * even_part[i]
        a = private_a if private else f1_z
        weight[i] = a * yi
        curvature[i] = private_c if private else even_part[i]


@jit
def _row_scalars(loss, table_form, iwp, y, m, margin, tau, fparams, truncation, eulerian,
                 weight, curvature, boost):
    """weight[i] = coefficient of x_i in the row gradient (a_i y_i, or u_i - y_i), curvature[i] = c_i.

    Label weights: the 2 x 2 table (fparams[F_MATCH_Z], [F_MATCH_MINUS_Z]; [F_OTHER_Z],
    [F_OTHER_MINUS_Z]) = weights of
    (F(z), F(-z)) for a row whose label is the head's class (y = +1) and for one whose label is
    not (y = -1).  A binary head has two equal rows (S~, 1 - S~) and takes the loops below that
    read one weight; a k-class one-vs-rest head has two different rows (``_table_row_scalars``).
    ``table_form`` None (a compile-time type) says that the rows are equal: the table form is then
    not compiled at all (a binary fit does not pay its compile time); True checks at run time.
    ``boost``: None (a compile-time type), or per row an addition to the weight of F(z) (class
    weights of k-class heads, docs/math.md "Class weights"); it takes the table form.
    Loops have no data-dependent branches so that LLVM vectorizes them (fast_exp included).
    """
    label_tilde = fparams[F_MATCH_Z]
    if table_form is not None and (boost is not None or not (
            fparams[F_OTHER_Z] == label_tilde
            and fparams[F_OTHER_MINUS_Z] == fparams[F_MATCH_MINUS_Z])):
        _table_row_scalars(loss, y, m, margin, tau, fparams[F_MATCH_Z], fparams[F_MATCH_MINUS_Z],
                           fparams[F_OTHER_Z], fparams[F_OTHER_MINUS_Z], truncation, eulerian,
                           weight, curvature, boost)
        return
    private = label_tilde != 1.0
    if loss == LOSS_EXPONENTIAL:
        if private:
            other = 1.0 - label_tilde
            e_minus_tau = fast_exp(-tau)
            for i in range(m):
                yi = np.float64(y[i])
                z = yi * margin[i]
                e_z = fast_exp(-tau - z)            # -F_1(z) = F_2(z) = exp(-tau - z)
                # exp(-tau + z) by one division instead of a second exp, as _table_row_scalars
                e_minus_z = (e_minus_tau / e_z) * e_minus_tau
                a = label_tilde * (-e_z) - other * (-e_minus_z)
                weight[i] = a * yi
                curvature[i] = label_tilde * e_z + other * e_minus_z
        else:
            for i in range(m):
                yi = np.float64(y[i])
                e_z = fast_exp(-tau - yi * margin[i])
                weight[i] = -e_z * yi
                curvature[i] = e_z
    elif loss == LOSS_QUADRATIC:
        # F_1(v) = v - 1, F_2 = 1 (tau does not enter the gradient)
        if private:
            other = 1.0 - label_tilde
            for i in range(m):
                yi = np.float64(y[i])
                z = yi * margin[i]
                a = label_tilde * (z - 1.0) - other * (-z - 1.0)
                weight[i] = a * yi
                curvature[i] = label_tilde + other
        else:
            for i in range(m):
                yi = np.float64(y[i])
                weight[i] = (yi * margin[i] - 1.0) * yi
                curvature[i] = 1.0
    elif eulerian is not None and loss == LOSS_LOGISTIC:    # (None: not compiled, see top)
        for i in range(m):                          # vectorized exp pass: curvature holds w_i
            curvature[i] = fast_exp(-abs(np.float64(y[i]) * margin[i]))
        if weight.shape[0] >= LOGISTIC_ROWS * m:
            _logistic_rows(y, m, margin, tau, truncation, label_tilde, private, eulerian, weight,
                           curvature)
            return
        for i in range(m):
            yi = np.float64(y[i])
            a, c = _logistic_scalars(yi * margin[i], curvature[i], tau, truncation, label_tilde,
                                     1.0 - label_tilde, private, eulerian)
            weight[i] = a * yi
            curvature[i] = c
    else:                                           # squared error: gradient (u - y) x - s*theta
        for i in range(m):
            weight[i] = margin[i] - np.float64(y[i])
            curvature[i] = 1.0 if iwp else 0.0


@jit
def _table_row_scalars(loss, y, m, margin, tau, match_z, match_minus_z, other_z, other_minus_z,
                       truncation, eulerian, weight, curvature, boost):
    """``_row_scalars`` for a one-vs-rest head of a k-class label (docs/math.md): the weights of
    (F(z), F(-z)) are (match_z, match_minus_z) where y_i = +1 (the released class is the head's)
    and (other_z, other_minus_z) where y_i = -1; chosen by a select, so the loops vectorize.
    Exponential loss: exp(-tau + z) = (exp(-tau) / exp(-tau - z)) exp(-tau), one division instead
    of a second exp (~15% of a k-head scan; within a few ulps of exp, the twin's np.exp to 1e-12).
    ``boost`` (None, or (m,)): added to row i's weight of F(z) (class weights of k classes)."""
    e_minus_tau = fast_exp(-tau)
    if loss == LOSS_EXPONENTIAL:
        for i in range(m):
            yi = np.float64(y[i])
            match = yi > 0.0
            w_z = match_z if match else other_z
            if boost is not None:
                w_z += boost[i]
            w_minus_z = match_minus_z if match else other_minus_z
            z = yi * margin[i]
            e_z = fast_exp(-tau - z)                # -F_1(z) = F_2(z) = exp(-tau - z)
            e_minus_z = (e_minus_tau / e_z) * e_minus_tau    # exp(-tau + z): 1 division, not 2 exps
            a = w_z * (-e_z) - w_minus_z * (-e_minus_z)
            weight[i] = a * yi
            curvature[i] = w_z * e_z + w_minus_z * e_minus_z
    elif loss == LOSS_QUADRATIC:
        for i in range(m):
            yi = np.float64(y[i])
            match = yi > 0.0
            w_z = match_z if match else other_z
            if boost is not None:
                w_z += boost[i]
            w_minus_z = match_minus_z if match else other_minus_z
            z = yi * margin[i]
            a = w_z * (z - 1.0) - w_minus_z * (-z - 1.0)
            weight[i] = a * yi
            curvature[i] = w_z + w_minus_z
    elif eulerian is not None:                      # logistic (None: not compiled, see top)
        for i in range(m):
            curvature[i] = fast_exp(-abs(np.float64(y[i]) * margin[i]))
        for i in range(m):
            yi = np.float64(y[i])
            match = yi > 0.0
            w_z = match_z if match else other_z
            if boost is not None:
                w_z += boost[i]
            w_minus_z = match_minus_z if match else other_minus_z
            a, c = _logistic_scalars(yi * margin[i], curvature[i], tau, truncation, w_z, w_minus_z,
                                     True, eulerian)
            weight[i] = a * yi
            curvature[i] = c


@jit_inline
def _laplace_tau(noise, theta, direction):
    """tau = -sum_j log kappa_j of a discrete Laplace head, and direction[j] = d_j = -kappa_j' /
    kappa_j (docs/math.md "Exponential loss: a product"): kappa_j = 1 - 4 c_j sinh^2(h/2),
    d_j = 2 c_j L_j sinh(h) / kappa_j, h = L_j theta_j, c_j and L_j in blocks 1 and 2 of ``noise``.

    One log per batch (of the product of the kappa_j, which the variance cap keeps in (0.19, 1]),
    and sinh(h/2) by its series x + x^3/6 where |x| < 1e-4 (the next term is below 1e-17
    relative; release grids give |x| ~ 1e-6), so a Laplace batch costs about a Gaussian one.
    """
    p = theta.shape[0]
    product = 1.0
    log_sum = 0.0
    for j in range(p):
        c = noise[NOISE_CURVATURE_BLOCK * p + j]
        grid = noise[NOISE_GRID_BLOCK * p + j]
        x = 0.5 * grid * theta[j]
        if abs(x) < 1e-4:
            half_sinh = x + x * x * x * (1.0 / 6.0)
        else:
            half_sinh = math.sinh(x)
        kappa = 1.0 - 4.0 * c * half_sinh * half_sinh
        # sinh(h) = 2 sinh(h/2) cosh(h/2), cosh = sqrt(1 + sinh^2)
        direction[j] = 4.0 * c * grid * half_sinh * math.sqrt(1.0 + half_sinh * half_sinh) / kappa
        product *= kappa
        if product < 1e-150:                    # many coordinates: no underflow
            log_sum += math.log(product)
            product = 1.0
    return -(log_sum + math.log(product))


@jit_inline
def _weigh_rows(addresses, n_features, like, offset, m, weight, curvature):
    """Sample weights s_i (the column after the p features): row i's gradient, curvature term
    included, is s_i times its unweighted one; s_i = 1.0 multiplies exactly."""
    sample_weight = column_view(addresses[n_features] + offset * like.itemsize, m, like)
    for i in range(m):
        s_i = np.float64(sample_weight[i])
        weight[i] = weight[i] * s_i
        curvature[i] = curvature[i] * s_i


@jit_inline
def _column_means(weight, addresses, like, offset, m, n_features, lanes, group_lanes, means):
    """means[j] = sum_i weight[i] * x_ij / m for the p feature columns, each sum in the lane order
    of ``_dot_lanes`` (GRADIENT_GROUP columns per pass over the row weights: the same bits)."""
    n_blocks = m // LANES
    first = n_blocks * LANES
    j = 0
    while j < n_features:
        if j + GRADIENT_GROUP <= n_features:
            lane_blocks_group(weight, addresses, j, offset, like, n_blocks, group_lanes)
            group = GRADIENT_GROUP
        else:
            group = 1
        for g in range(group):
            column = column_view(addresses[j] + offset * like.itemsize, m, like)
            if group == 1:
                total = _dot_lanes(weight, column, m, lanes)
            else:
                base = LANES * g
                for k in range(m - first):
                    group_lanes[base + k] += weight[first + k] * np.float64(column[first + k])
                total = _lane_total(group_lanes, base)
            means[j] = total / m
            j += 1


@jit_forceinline
def _batch(table_form, addresses, like, y, offset, m, fparams, iparams, noise_var, eulerian,
           theta, theta_avg, intercept, intercept_avg, counters, telemetry, trace, trace_steps,
           margin, weight, curvature, gradient, lanes, group_lanes, ones, margin_given, means,
           labels):
    """One SGD update on rows [offset, offset + m) of the columns, whose labels are y[0:m].
    ``margin_given``: None (a compile-time type: the margins are computed here) or True (``margin``
    already holds them, from ``_head_margins``); ``labels``: scratch for the m labels in float64.
    Returns False on divergence."""
    alpha = fparams[F_ALPHA]
    learning_rate = fparams[F_LEARNING_RATE]
    mu = fparams[F_MU]
    radius = fparams[F_RADIUS]
    variance_cap = fparams[F_VARIANCE_CAP]
    loss = iparams[I_LOSS]
    iwp = iparams[I_MODE] == MODE_IWP
    schedule = iparams[I_SCHEDULE]
    truncation = iparams[I_TRUNCATION]
    fit_intercept = iparams[I_FIT_INTERCEPT] != 0
    average_start = iparams[I_AVERAGE_START]
    trace_every = iparams[I_TRACE_EVERY]
    n_features = theta.shape[0]

    # 1. tau (IWP only); a Laplace head keeps its per-coordinate direction d_j in gradient[j]
    tau = 0.0
    laplace = iwp and iparams[I_NOISE_LAW] == LAW_LAPLACE
    if laplace:
        tau = _laplace_tau(noise_var, theta, gradient)
    elif iwp:
        for j in range(n_features):
            tau += noise_var[j] * theta[j] * theta[j]
        tau = 0.5 * tau
    # 2. margins and per-row scalars
    if margin_given is None:
        _margins(addresses, like, offset, m, theta, intercept, fit_intercept, margin)
    # the labels widened to float64 once, in a loop of their own: the row loop then reads one
    # dtype whatever the labels' (an int8 label column made the kernel's speed depend on the
    # process, 205-294 M rows/s, float64 280-302; bench/README.md "Sixth round")
    for i in range(m):
        labels[i] = np.float64(y[i])
    _row_scalars(loss, table_form, iwp, labels, m, margin, tau, fparams, truncation, eulerian, weight,
                 curvature, None)
    if iparams[I_WEIGHTED] != 0:
        _weigh_rows(addresses, n_features, like, offset, m, weight, curvature)
    # 3. mean gradient
    mean_curvature = _sum_lanes(curvature, m, lanes, ones) / m if iwp else 0.0
    norm_sq = 0.0
    _column_means(weight, addresses, like, offset, m, n_features, lanes, group_lanes, means)
    for j in range(n_features):
        grad = means[j]
        if laplace:
            grad = grad - mean_curvature * gradient[j]
        elif iwp:
            grad = grad - mean_curvature * (noise_var[j] * theta[j])
        grad = grad + alpha * theta[j]
        gradient[j] = grad
        norm_sq += grad * grad
    gradient_b = _sum_lanes(weight, m, lanes, ones) / m if fit_intercept else 0.0
    norm_sq += gradient_b * gradient_b
    # 4-5. step
    step = counters[C_STEP]
    if schedule == SCHEDULE_CONSTANT:
        gamma = learning_rate
    else:
        gamma = learning_rate / (1.0 + mu * learning_rate * step)
    for j in range(n_features):
        theta[j] = theta[j] - gamma * gradient[j]
    if fit_intercept:
        intercept[0] = intercept[0] - gamma * gradient_b
    # 6. projection on the L2 ball, then the variance cap
    theta_sq = 0.0
    for j in range(n_features):
        theta_sq += theta[j] * theta[j]
    theta_norm = math.sqrt(theta_sq)
    if theta_norm > radius:
        factor = radius / theta_norm
        for j in range(n_features):
            theta[j] = theta[j] * factor
        telemetry[T_PROJ] += 1.0
    energy = 0.0
    for j in range(n_features):
        energy += noise_var[j] * theta[j] * theta[j]
    if energy > variance_cap:
        # only the noised coordinates carry the energy: a public column's (s_j = 0) stays
        factor = math.sqrt(variance_cap / energy)
        for j in range(n_features):
            if noise_var[j] > 0.0:
                theta[j] = theta[j] * factor
        telemetry[T_CAP] += 1.0
        energy = 0.0
        for j in range(n_features):
            energy += noise_var[j] * theta[j] * theta[j]
    # 7. step counter and Polyak average
    step += 1
    counters[C_STEP] = step
    if average_start >= 0 and step > average_start:
        n_avg = counters[C_NAVG] + 1
        counters[C_NAVG] = n_avg
        for j in range(n_features):
            theta_avg[j] = theta_avg[j] + (theta[j] - theta_avg[j]) / n_avg
        intercept_avg[0] = intercept_avg[0] + (intercept[0] - intercept_avg[0]) / n_avg
    # 8. telemetry (Welford on the gradient norm)
    telemetry[T_ROWS] += m
    batches = telemetry[T_BATCHES] + 1.0
    telemetry[T_BATCHES] = batches
    grad_norm = math.sqrt(norm_sq)
    delta = grad_norm - telemetry[T_GMEAN]
    telemetry[T_GMEAN] += delta / batches
    telemetry[T_GM2] += delta * (grad_norm - telemetry[T_GMEAN])
    if energy > telemetry[T_ENERGY]:
        telemetry[T_ENERGY] = energy
    # 9. trace
    if trace_every > 0 and step % trace_every == 0:
        row = counters[C_TRACE]
        for j in range(n_features):
            trace[row, j] = theta[j]
        trace[row, n_features] = intercept[0]
        trace_steps[row] = step
        counters[C_TRACE] = row + 1
    # 10. divergence, after steps 1-9 like the twin: the state holds the non-finite iterate
    finite = math.isfinite(intercept[0])
    for j in range(n_features):
        finite = finite and math.isfinite(theta[j])
    return finite


@jit_inline
def _to_carry(addresses, like, y, n_rows, first, count, carry_X, carry_y, at):
    """Rows [first, first + count) of the columns and labels into the float64 carry buffer from
    its row ``at`` on (the start of a chunk completing the carried batch, or the rest at its end)."""
    for j in range(addresses.shape[0]):
        column = column_view(addresses[j], n_rows, like)
        for i in range(count):
            carry_X[j, at + i] = np.float64(column[first + i])
    for i in range(count):
        carry_y[at + i] = np.float64(y[first + i])


@jit_inline
def _narrow_carried(carry_X, carry_y, carried, carry_stage, carry_labels):
    """The carried rows (float64) into the stage of the column dtype and the labels' dtype (the
    wrapper has checked that they are exact there): the carried batch then runs through the same
    compiled batch step as the batches in place."""
    for j in range(carry_stage.shape[0]):
        source = carry_X[j]
        target = carry_stage[j]
        for i in range(carried):
            target[i] = source[i]
    for i in range(carried):
        carry_labels[i] = carry_y[i]


@jit_inline
def _stage_buffer(n_columns, n_features, batch_size, like):
    """(staging?, batches per stage, the stage, its row addresses): with many columns (p >=
    STAGE_MIN_FEATURES) complete batches run from a copy of the next STAGE_COLUMN_BYTES of each
    column (see the module docstring); else an empty stage."""
    staging = n_features >= STAGE_MIN_FEATURES
    stage_batches = max(1, STAGE_COLUMN_BYTES // (batch_size * like.itemsize))
    stage_rows = stage_batches * batch_size if staging else 0
    stage = np.empty((n_columns, stage_rows), like.dtype)
    return staging, stage_batches, stage, _row_addresses(stage)


@jit_inline
def _prefetch_batch(addresses, like, y_address, y_like, row, m):
    """Ask the cache for rows [row, row + m) of the columns and of the labels (no value changes)."""
    for j in range(addresses.shape[0]):
        prefetch_bytes(addresses[j] + row * like.itemsize, m * like.itemsize)
    prefetch_bytes(y_address + row * y_like.itemsize, m * y_like.itemsize)


@jit_inline
def _row_addresses(block):
    """The address of each row of a C-contiguous 2-D array (a stage the batches read from)."""
    addresses = np.empty(block.shape[0], np.int64)
    for j in range(block.shape[0]):
        addresses[j] = block.ctypes.data + j * block.strides[0]
    return addresses


@jit_inline
def _stage_rows(addresses, like, position, rows, stage):
    """Copy rows [position, position + rows) of every column into the stage (many columns: long
    sequential reads, which the hardware prefetcher follows; same dtype, same values, so the
    batches run from it give the bits they give in place)."""
    for j in range(addresses.shape[0]):
        source = column_view(addresses[j] + position * like.itemsize, rows, like)
        target = stage[j]
        for i in range(rows):
            target[i] = source[i]


@jit
def sgd_chunk(addresses, like, y_address, y_like, n_rows, fparams, iparams, noise_var, eulerian,
              theta, theta_avg, intercept, intercept_avg, carry_X, carry_y, counters, telemetry,
              trace, trace_steps, table_form, final):
    """Run every complete batch of this chunk (completing the carried one first) and carry the rest;
    with ``final``, then run the carried partial batch (if any) as the stream's last update (the
    end of a stream is a call on no rows with final: no kernel of its own to compile).

    Every batch, the carried one included, runs through the one inlined ``_batch`` below: the
    carried rows (held in float64 in carry_X / carry_y between chunks) are narrowed into a buffer
    of the column and label dtypes first, which the wrapper (``iwpfast.sgd.engine``) has checked to
    be exact.  One copy of ``_batch`` is compiled per (column dtype, label dtype), not two.
    ``table_form``: None for a head whose label-weight table has two equal rows (``_row_scalars``).

    Returns -1, or the global index of the last row of the batch after which theta diverged.
    """
    batch_size = iparams[I_BATCH_SIZE]
    n_features = theta.shape[0]
    n_columns = addresses.shape[0]      # the columns a batch reads (the features, then any other)
    y = column_view(y_address, n_rows, y_like)
    margin = np.empty(batch_size)
    weight = np.empty(LOGISTIC_ROWS * batch_size)    # row weights + _logistic_rows' scratch
    curvature = np.empty(batch_size)
    gradient = np.empty(n_features)
    means = np.empty(n_features)
    labels = np.empty(batch_size)
    lanes = np.empty(LANES)
    group_lanes = np.empty(GRADIENT_GROUP * LANES)
    ones = np.ones(batch_size)
    position = 0
    carried = counters[C_CARRY]
    if carried > 0:
        take = min(batch_size - carried, n_rows)
        _to_carry(addresses, like, y, n_rows, 0, take, carry_X, carry_y, carried)
        carried += take
        position = take
        counters[C_CARRY] = carried
    # the carried batch in the column and label dtypes: carry_stage (its column addresses in
    # carry_addresses) and carry_labels
    carry_stage = np.empty((n_columns, batch_size), like.dtype)
    carry_labels = np.empty(batch_size, y_like.dtype)
    carry_addresses = _row_addresses(carry_stage)
    staging, stage_batches, stage, stage_addresses = _stage_buffer(n_columns, n_features,
                                                                   batch_size, like)
    # every array the batches use, borrowed (_lowlevel.borrowed: no atomic reference counting in
    # the loop); the arrays allocated here stay alive until keep_alive(owned) at the returns
    owned = (margin, weight, curvature, gradient, means, lanes, group_lanes, ones, carry_stage,
             carry_labels, carry_addresses, stage, stage_addresses, labels)
    margin, weight, curvature = borrowed(margin), borrowed(weight), borrowed(curvature)
    gradient, means, lanes = borrowed(gradient), borrowed(means), borrowed(lanes)
    group_lanes, ones, labels = borrowed(group_lanes), borrowed(ones), borrowed(labels)
    carry_stage, carry_labels = borrowed(carry_stage), borrowed(carry_labels)
    carry_addresses, stage, stage_addresses = (borrowed(carry_addresses), borrowed(stage),
                                               borrowed(stage_addresses))
    addresses, fparams, iparams = borrowed(addresses), borrowed(fparams), borrowed(iparams)
    like, y_like = borrowed(like), borrowed(y_like)
    noise_var, eulerian, theta = borrowed(noise_var), borrowed(eulerian), borrowed(theta)
    theta_avg, intercept = borrowed(theta_avg), borrowed(intercept)
    intercept_avg, carry_X, carry_y = borrowed(intercept_avg), borrowed(carry_X), borrowed(carry_y)
    counters, telemetry = borrowed(counters), borrowed(telemetry)
    trace, trace_steps = borrowed(trace), borrowed(trace_steps)
    while True:
        # the next block of batches: the carried batch once complete (or, with final, once the
        # chunk has ended), else the complete batches in place; the rest goes to the carry buffer
        carried = counters[C_CARRY]
        from_carry = carried == batch_size or (final and carried > 0 and position == n_rows)
        if from_carry:
            _narrow_carried(carry_X, carry_y, carried, carry_stage, carry_labels)
            sources = carry_addresses
            first_row = 0
            block_labels = carry_labels
            m = carried
            n_batches = 1
        elif position + batch_size <= n_rows:
            m = batch_size
            n_batches = (n_rows - position) // batch_size
            if staging:
                # many columns: the next stage_batches batches run from the stage
                n_batches = min(n_batches, stage_batches)
                _stage_rows(addresses, like, position, n_batches * batch_size, stage)
                sources = stage_addresses
                first_row = 0
            else:
                sources = addresses
                first_row = position
            block_labels = y[position:position + n_batches * batch_size]
            position += n_batches * batch_size
        elif position < n_rows:
            rest = n_rows - position
            _to_carry(addresses, like, y, n_rows, position, rest, carry_X, carry_y, 0)
            counters[C_CARRY] = rest
            position = n_rows
            continue
        else:
            break
        # _batch reads rows [offset, offset + m) of the columns and the m labels it is given
        in_place = not from_carry and not staging
        for b in range(n_batches):
            if in_place and b + PREFETCH_AHEAD < n_batches:
                _prefetch_batch(addresses, like, y_address, y_like,
                                first_row + (b + PREFETCH_AHEAD) * m, m)
            rows_before = telemetry[T_ROWS]
            if not _batch(table_form, sources, like, block_labels[b * m:(b + 1) * m],
                          first_row + b * m, m, fparams, iparams, noise_var, eulerian, theta,
                          theta_avg, intercept, intercept_avg, counters, telemetry, trace,
                          trace_steps, margin, weight, curvature, gradient, lanes, group_lanes,
                          ones, None, means, labels):
                keep_alive(owned)
                return np.int64(rows_before) + m - 1
        if from_carry:
            counters[C_CARRY] = 0
    keep_alive(owned)
    return NO_DIVERGENCE


@jit
def first_invalid_label(y):
    """Index of the first label not in {-1, +1}, or -1 (the wrapper's check).

    Counts bad labels per block with a branch-free (vectorized) loop and searches a block only
    when its count is non-zero: about 0.1 ns per label instead of ~8 for an early-exit loop.
    """
    n = y.shape[0]
    block = 4096
    for start in range(0, n, block):
        # a view from the block's start: the loop index is then a plain counter, which LLVM knows
        # is non-negative (``y[start + i]`` keeps Numba's negative-index select in the loop and
        # stops vectorization: 10x slower)
        part = y[start:min(start + block, n)]
        bad = 0
        for i in range(part.shape[0]):
            bad += np.float64(abs(part[i])) != 1.0          # NaN counts as bad
        if bad:
            for i in range(part.shape[0]):
                if np.float64(abs(part[i])) != 1.0:
                    return start + i
    return -1


@jit
def first_invalid_class(y, n_classes):
    """Index of the first label that is not a class index 0..n_classes-1, or -1 (the wrapper's
    check of a class-index label column; branch-free count per block like first_invalid_label)."""
    n = y.shape[0]
    block = 4096
    limit = np.float64(n_classes)
    for start in range(0, n, block):
        part = y[start:min(start + block, n)]      # plain loop counters (see first_invalid_label)
        bad = 0
        for i in range(part.shape[0]):
            v = np.float64(part[i])
            bad += not (v >= 0.0 and v < limit and math.floor(v) == v)     # NaN counts as bad
        if bad:
            for i in range(part.shape[0]):
                v = np.float64(part[i])
                if not (v >= 0.0 and v < limit and math.floor(v) == v):
                    return start + i
    return -1


@jit
def reduction_blocks(weight, column, addresses, like, theta, lanes, group_lanes, margin):
    """The IR reduction blocks of one batch, compiled (for tests/test_kernels.py, which checks
    them bit for bit against their plain-Python definitions in ``_lowlevel``)."""
    m = weight.shape[0]
    lane_blocks(weight, column, m // LANES, lanes)
    lane_blocks_group(weight, addresses, 1, 16, like, (m - 16) // LANES, group_lanes)
    margin_blocks(addresses, 8, like, theta, (m - 8) // MARGIN_BLOCK, margin)


@jit_inline
def _class_signs(codes, cls, m, signs):
    """signs[i] = +1 where the class index codes[i] is the head's class ``cls``, else -1."""
    for i in range(m):
        signs[i] = 1.0 if np.float64(codes[i]) == cls else -1.0


@jit_inline
def _head_margins(addresses, like, offset, m, theta_t, intercept, fit_intercept, theta_column,
                  margins):
    """``_margins`` of every head (column h of ``theta_t`` (p, heads), row h of ``margins``): the
    batch's rows of a feature are loaded once for HEAD_GROUP heads (``margin_blocks_heads``, a
    small matrix product in registers); each sum has the order, and so the bits, of the head's own
    ``_margins``.  ``theta_column``: scratch of p values."""
    n_features, n_heads = theta_t.shape
    n_blocks = m // MARGIN_BLOCK
    c = 0
    while c + HEAD_GROUP <= n_heads:
        margin_blocks_heads(addresses, offset, like, theta_t, c, n_blocks, margins)
        c += HEAD_GROUP
    for h in range(n_heads):
        for j in range(n_features):
            theta_column[j] = theta_t[j, h]
        if h >= c:
            margin_blocks(addresses, offset, like, theta_column, n_blocks, margins[h])
        _margin_rest(addresses, like, offset, n_blocks * MARGIN_BLOCK, m, theta_column,
                     intercept[h:h + 1], fit_intercept[h], margins[h])


@jit_forceinline
def _heads_batch(table_form, classes, laplace_law, weighted, addresses, like, codes, offset, m,
                 fparams, iparams, noise_var, noise_t, direction_t, direction, laplace, eulerian,
                 theta_t,
                 theta_avg_t, intercept, intercept_avg, step, n_avg,
                 counters, telemetry, traces, trace_steps, margins, signs, group_weights, curvature,
                 gradient_t, lanes, group_lanes, ones, theta_column, per_head, fit_intercept,
                 head_iwp, head_alpha, class_boost, boost_rows):
    """One SGD update of every head on rows [offset, offset + m) of the columns (labels
    codes[0:m]), with the bits of each head's own ``_batch`` (docs/internals.md "One SGD update").

    The steps that are per row (margins, row scalars, sums over rows) run head by head as in
    ``_batch``; the O(p) steps per batch (tau, gradient, step, projection, variance cap, average,
    telemetry) run for all heads together, features outer and heads inner, on the transposed
    state (``theta_t`` (p, heads)): the same operations in the same order per head, but the heads'
    independent chains overlap instead of each head's waiting on its own (a per-head batch step
    costs ~250 ns of mostly latency at any p).  Conditional steps (projection, cap, average)
    become selects: a factor 1.0 or an unchanged value gives the same bits.  Returns True when
    every head's theta and intercept are finite.
    """
    n_features, n_heads = theta_t.shape
    loss = iparams[0, I_LOSS]
    truncation = iparams[0, I_TRUNCATION]
    tau = per_head[0]
    mean_curvature = per_head[1]
    norm_sq = per_head[2]
    gradient_b = per_head[3]
    gamma = per_head[4]
    scratch = per_head[5]
    averaged = per_head[6]
    # 1. tau (IWP heads only); an IWP head of the discrete Laplace law (laplace[h] = 1.0) takes
    # its tau and direction d_j (direction_t[:, h]) from _laplace_tau, as _batch does
    for h in range(n_heads):
        tau[h] = 0.0
    for j in range(n_features):
        noise_row = noise_t[j]
        theta_row = theta_t[j]
        for h in range(n_heads):
            tau[h] += noise_row[h] * theta_row[h] * theta_row[h]
    for h in range(n_heads):
        tau[h] = 0.5 * tau[h] if iparams[h, I_MODE] == MODE_IWP else 0.0
        if laplace_law is not None and laplace[h] != 0.0:
            for j in range(n_features):
                theta_column[j] = theta_t[j, h]
            tau[h] = _laplace_tau(noise_var[h], theta_column, direction)
            for j in range(n_features):
                direction_t[j, h] = direction[j]
    # 2. margins of all heads, then per head: row scalars and the sums over rows
    _head_margins(addresses, like, offset, m, theta_t, intercept, fit_intercept, theta_column,
                  margins)
    if classes is None:
        for i in range(m):
            signs[i] = np.float64(codes[i])
    elif class_boost is not None:
        # class weights of k classes: every head adds the row's released class's boost to its
        # weight of F(z) (docs/math.md "Class weights")
        for i in range(m):
            boost_rows[i] = class_boost[np.int64(codes[i])]
    # the gradient sums of each complete group of HEAD_GROUP heads in one pass over the columns
    # (gradient_blocks_heads, the bits of _column_means) when the batch is whole blocks of LANES
    # rows; the other heads (and a batch with a tail) one head at a time
    n_blocks = m // LANES
    grouped = n_heads - n_heads % HEAD_GROUP if n_blocks * LANES == m else 0
    for h in range(n_heads):
        if classes is not None:
            _class_signs(codes, classes[h], m, signs)
        iwp = iparams[h, I_MODE] == MODE_IWP
        weight = group_weights[h % HEAD_GROUP]
        if classes is not None and class_boost is not None:
            _row_scalars(loss, table_form, iwp, signs, m, margins[h], tau[h], fparams[h],
                         truncation, eulerian, weight, curvature, boost_rows)
        else:
            _row_scalars(loss, table_form, iwp, signs, m, margins[h], tau[h], fparams[h],
                         truncation, eulerian, weight, curvature, None)
        if weighted is not None and iparams[h, I_WEIGHTED] != 0:
            _weigh_rows(addresses, n_features, like, offset, m, weight, curvature)
        mean_curvature[h] = _sum_lanes(curvature, m, lanes, ones) / m if iwp else 0.0
        if h >= grouped:
            _column_means(weight, addresses, like, offset, m, n_features, lanes, group_lanes,
                          theta_column)
            for j in range(n_features):
                gradient_t[j, h] = theta_column[j]
        elif h % HEAD_GROUP == HEAD_GROUP - 1:
            gradient_blocks_heads(group_weights, addresses, offset, like, n_blocks, gradient_t,
                                  h - (HEAD_GROUP - 1))
        gradient_b[h] = (_sum_lanes(weight, m, lanes, ones) / m
                         if iparams[h, I_FIT_INTERCEPT] != 0 else 0.0)
    # 3. the gradients (all heads: features outer, heads inner, the order of _batch per head)
    for h in range(n_heads):
        norm_sq[h] = 0.0
    for j in range(n_features):
        noise_row = noise_t[j]
        theta_row = theta_t[j]
        gradient_row = gradient_t[j]
        direction_row = direction_t[j]
        for h in range(n_heads):
            # every operand loaded before the selects, and the heads' settings from contiguous
            # rows (head_iwp, head_alpha): the loop then vectorizes over the heads (a select
            # between loads, or on iparams[h, I_MODE], stayed a branch per head and feature)
            grad = gradient_row[h]
            correction = noise_row[h] * theta_row[h]
            if laplace_law is not None:
                laplace_direction = direction_row[h]
                correction = laplace_direction if laplace[h] != 0.0 else correction
            with_curvature = grad - mean_curvature[h] * correction
            grad = with_curvature if head_iwp[h] != 0.0 else grad
            grad = grad + head_alpha[h] * theta_row[h]
            gradient_row[h] = grad
            norm_sq[h] += grad * grad
    # 4-5. step
    for h in range(n_heads):
        norm_sq[h] += gradient_b[h] * gradient_b[h]
        learning_rate = fparams[h, F_LEARNING_RATE]
        decayed = learning_rate / (1.0 + fparams[h, F_MU] * learning_rate * step[h])
        gamma[h] = learning_rate if iparams[h, I_SCHEDULE] == SCHEDULE_CONSTANT else decayed
    for j in range(n_features):
        theta_row = theta_t[j]
        gradient_row = gradient_t[j]
        for h in range(n_heads):
            theta_row[h] = theta_row[h] - gamma[h] * gradient_row[h]
    for h in range(n_heads):
        moved = intercept[h] - gamma[h] * gradient_b[h]
        intercept[h] = moved if iparams[h, I_FIT_INTERCEPT] != 0 else intercept[h]
    # 6. projection on the L2 ball, then the variance cap (a factor 1.0 where inactive)
    for h in range(n_heads):
        scratch[h] = 0.0
    for j in range(n_features):
        theta_row = theta_t[j]
        for h in range(n_heads):
            scratch[h] += theta_row[h] * theta_row[h]
    for h in range(n_heads):
        theta_norm = math.sqrt(scratch[h])
        radius = fparams[h, F_RADIUS]
        active = theta_norm > radius
        scratch[h] = radius / theta_norm if active else 1.0
        telemetry[h, T_PROJ] += 1.0 if active else 0.0
    _scale_columns(theta_t, scratch)
    _noise_energy(noise_t, theta_t, tau)          # tau's buffer now holds the energies
    any_capped = False
    for h in range(n_heads):
        variance_cap = fparams[h, F_VARIANCE_CAP]
        active = tau[h] > variance_cap
        scratch[h] = math.sqrt(variance_cap / tau[h]) if active else 1.0
        telemetry[h, T_CAP] += 1.0 if active else 0.0
        any_capped = any_capped or active
    if any_capped:
        # only the noised coordinates carry the energy: a public column's (s_j = 0) stays
        for j in range(n_features):
            noise_row = noise_t[j]
            theta_row = theta_t[j]
            for h in range(n_heads):
                scaled = theta_row[h] * scratch[h]
                theta_row[h] = scaled if noise_row[h] > 0.0 else theta_row[h]
        _noise_energy(noise_t, theta_t, tau)
    # 7. step counter and Polyak average
    for h in range(n_heads):
        step[h] += 1
        averaging = iparams[h, I_AVERAGE_START] >= 0 and step[h] > iparams[h, I_AVERAGE_START]
        n_avg[h] += 1 if averaging else 0
        # the divisor n_avg (as float64, like _batch's division) where averaging; elsewhere the
        # result is discarded and 1.0 only keeps it finite
        scratch[h] = np.float64(n_avg[h]) if averaging else 1.0
        averaged[h] = 1.0 if averaging else 0.0
        moved = intercept_avg[h] + (intercept[h] - intercept_avg[h]) / scratch[h]
        intercept_avg[h] = moved if averaging else intercept_avg[h]
    for j in range(n_features):
        theta_row = theta_t[j]
        average_row = theta_avg_t[j]
        for h in range(n_heads):
            moved = average_row[h] + (theta_row[h] - average_row[h]) / scratch[h]
            average_row[h] = moved if averaged[h] != 0.0 else average_row[h]
    # 8. telemetry (Welford on the gradient norm), 9. trace
    for h in range(n_heads):
        telemetry[h, T_ROWS] += m
        batches = telemetry[h, T_BATCHES] + 1.0
        telemetry[h, T_BATCHES] = batches
        grad_norm = math.sqrt(norm_sq[h])
        delta = grad_norm - telemetry[h, T_GMEAN]
        telemetry[h, T_GMEAN] += delta / batches
        telemetry[h, T_GM2] += delta * (grad_norm - telemetry[h, T_GMEAN])
        if tau[h] > telemetry[h, T_ENERGY]:
            telemetry[h, T_ENERGY] = tau[h]
        trace_every = iparams[h, I_TRACE_EVERY]
        if trace_every > 0 and step[h] % trace_every == 0:
            row = counters[h, C_TRACE]
            for j in range(n_features):
                traces[h, row, j] = theta_t[j, h]
            traces[h, row, n_features] = intercept[h]
            trace_steps[h, row] = step[h]
            counters[h, C_TRACE] = row + 1
    # 10. divergence, after steps 1-9 like _batch (x - x is NaN exactly when x is not finite)
    bad = 0.0
    for h in range(n_heads):
        bad += intercept[h] - intercept[h]
    for j in range(n_features):
        theta_row = theta_t[j]
        for h in range(n_heads):
            bad += theta_row[h] - theta_row[h]
    return bad == 0.0


@jit_inline
def _scale_columns(theta_t, factor):
    """theta_t[j, h] *= factor[h] (a factor 1.0 leaves the bits unchanged)."""
    for j in range(theta_t.shape[0]):
        theta_row = theta_t[j]
        for h in range(theta_t.shape[1]):
            theta_row[h] = theta_row[h] * factor[h]


@jit_inline
def _noise_energy(noise_t, theta_t, energy):
    """energy[h] = sum_j noise_t[j, h] * theta_t[j, h] * theta_t[j, h], j in order from +0.0."""
    for h in range(theta_t.shape[1]):
        energy[h] = 0.0
    for j in range(theta_t.shape[0]):
        noise_row = noise_t[j]
        theta_row = theta_t[j]
        for h in range(theta_t.shape[1]):
            energy[h] += noise_row[h] * theta_row[h] * theta_row[h]


@jit_inline
def _transpose_into(source, target):
    """target[j, h] = source[h, j]."""
    for h in range(source.shape[0]):
        for j in range(source.shape[1]):
            target[j, h] = source[h, j]


@jit_inline
def _store_heads(theta_t, theta_avg_t, intercept, intercept_avg, step, n_avg, thetas, theta_avgs,
                 intercepts, intercept_avgs, counters):
    """The working copies of the heads' state back into the caller's arrays."""
    _transpose_into(theta_t, thetas)
    _transpose_into(theta_avg_t, theta_avgs)
    for h in range(thetas.shape[0]):
        intercepts[h, 0] = intercept[h]
        intercept_avgs[h, 0] = intercept_avg[h]
        counters[h, C_STEP] = step[h]
        counters[h, C_NAVG] = n_avg[h]


@jit
def sgd_chunk_heads(addresses, like, y_address, y_like, n_rows, fparams, iparams, noise_var,
                    eulerian, classes, thetas, theta_avgs, intercepts, intercept_avgs, carry_X,
                    carry_y, counters, telemetry, traces, trace_steps, table_form, final,
                    laplace_law, weighted, class_boost):
    """Several heads over the same rows in one scan: each batch is read once and used by every
    head while it is in cache (docs/internals.md "Several heads in one scan").

    Row c of each 2-D argument (``fparams``, ``iparams``, ``noise_var``, ``thetas``, ...,
    ``counters``, ``telemetry``; ``traces[c]`` and ``trace_steps[c]``) is head c.  ``classes``:
    None for heads that read the labels as they are (+-1, or targets for squared error: the
    grid of ``'auto'``, clean/naive/IWP heads of an experiment), or one class index per head for
    one-vs-rest heads of a class-index label (``classes[c]``; docs/math.md "k classes"), each with
    its own +-1 signs.  The carried rows (carry_X, carry_y) are shared, counters[c, C_CARRY] equal
    for every head.  Per batch ``_heads_batch``: the margins of all heads as one small matrix
    product, each head's row scalars and sums over rows (the gradient's column sums of 4 heads at
    once, ``gradient_blocks_heads``), then the O(p) steps of all heads together; head c has the
    bits of a single-head run (``sgd_chunk``).  Every batch, the carried
    one included (narrowed into the column and label dtypes, which the wrapper has checked to be
    exact), goes through one call site.  With ``final``, the carried partial batch (if any) then
    runs as every head's last update (the end of a stream is a call on no rows with final).
    ``table_form``: None when every head's label-weight table has two equal rows (see
    ``_row_scalars``); ``laplace_law``: None when no head is an IWP head of the discrete Laplace
    law, ``weighted``: None when the heads are unweighted (else True; then the per-head codes
    decide); ``class_boost``: None, or per class index the addition to every head's weight of
    F(z) of a row released as that class (class weights of k classes, docs/math.md "Class
    weights"; the heads' tables then take the table form).  Like ``table_form``, a None is a
    compile-time type whose ``is not None`` branches
    Numba prunes before typing: a first fit does not compile code it cannot run (the Laplace
    tau and sample weights cost ~0.4 s of a first fit's compile, ``bench/compile_cost.py``).
    Returns -1, or the global index of the last row of the batch after which
    a head's theta or intercept became non-finite (every head has made that batch's update; the
    scan stops there).
    """
    n_heads = thetas.shape[0]
    batch_size = iparams[0, I_BATCH_SIZE]
    n_features = thetas.shape[1]
    n_columns = addresses.shape[0]      # the p features, then the sample weights when weighted
    y = column_view(y_address, n_rows, y_like)
    # working copies of the state, transposed: features outer, heads inner (see _heads_batch)
    theta_t = np.empty((n_features, n_heads))
    theta_avg_t = np.empty((n_features, n_heads))
    noise_t = np.empty((n_features, n_heads))
    _transpose_into(thetas, theta_t)
    _transpose_into(theta_avgs, theta_avg_t)
    # the variances s_j (a Laplace head's noise row holds them as its first of 3 blocks)
    for h in range(n_heads):
        for j in range(n_features):
            noise_t[j, h] = noise_var[h, j]
    # the IWP heads of the discrete Laplace law (1.0) and their directions d_j (_heads_batch); a
    # Laplace head's noise row holds 3 blocks (variances, c_j, L_j), the others' one (padded)
    laplace = np.zeros(n_heads)
    for h in range(n_heads):
        if iparams[h, I_MODE] == MODE_IWP and iparams[h, I_NOISE_LAW] == LAW_LAPLACE:
            laplace[h] = 1.0
    direction_t = np.zeros((n_features, n_heads))
    direction = np.empty(n_features)
    intercept = np.empty(n_heads)
    intercept_avg = np.empty(n_heads)
    step = np.empty(n_heads, np.int64)
    n_avg = np.empty(n_heads, np.int64)
    for h in range(n_heads):
        intercept[h] = intercepts[h, 0]
        intercept_avg[h] = intercept_avgs[h, 0]
        step[h] = counters[h, C_STEP]
        n_avg[h] = counters[h, C_NAVG]
    gradient_t = np.empty((n_features, n_heads))
    per_head = np.empty((7, n_heads))
    margins = np.empty((n_heads, batch_size))
    # row weights + _logistic_rows' scratch, one row per head of a group (gradient_blocks_heads)
    group_weights = np.empty((HEAD_GROUP, LOGISTIC_ROWS * batch_size))
    curvature = np.empty(batch_size)
    lanes = np.empty(LANES)
    group_lanes = np.empty(GRADIENT_GROUP * LANES)
    ones = np.ones(batch_size)
    signs = np.empty(batch_size)        # a head's labels for the batch, in float64
    boost_rows = np.empty(batch_size)   # the rows' class boosts (class_boost)
    theta_column = np.empty(n_features)
    fit_intercept = np.empty(n_heads, np.bool_)
    head_iwp = np.empty(n_heads)            # 1.0 for an IWP head (its gradient's curvature term)
    head_alpha = np.empty(n_heads)
    for h in range(n_heads):
        fit_intercept[h] = iparams[h, I_FIT_INTERCEPT] != 0
        head_iwp[h] = 1.0 if iparams[h, I_MODE] == MODE_IWP else 0.0
        head_alpha[h] = fparams[h, F_ALPHA]
    position = 0
    carried = counters[0, C_CARRY]
    if carried > 0:
        take = min(batch_size - carried, n_rows)
        _to_carry(addresses, like, y, n_rows, 0, take, carry_X, carry_y, carried)
        carried += take
        position = take
        for c in range(n_heads):
            counters[c, C_CARRY] = carried
    carry_stage = np.empty((n_columns, batch_size), like.dtype)
    carry_labels = np.empty(batch_size, y_like.dtype)
    carry_addresses = _row_addresses(carry_stage)
    staging, stage_batches, stage, stage_addresses = _stage_buffer(n_columns, n_features,
                                                                   batch_size, like)
    # every array the batches use, borrowed (_lowlevel.borrowed: no atomic reference counting in
    # the loop); the arrays allocated here stay alive until keep_alive(owned) at the returns
    owned = (theta_t, theta_avg_t, noise_t, laplace, direction_t, direction, intercept,
             intercept_avg, step, n_avg, gradient_t, per_head, margins, group_weights, curvature,
             lanes, group_lanes, ones, signs, theta_column, fit_intercept, head_iwp, head_alpha,
             carry_stage, carry_labels, carry_addresses, stage, stage_addresses, boost_rows)
    theta_t, theta_avg_t, noise_t = borrowed(theta_t), borrowed(theta_avg_t), borrowed(noise_t)
    laplace, direction_t, direction = borrowed(laplace), borrowed(direction_t), borrowed(direction)
    intercept, intercept_avg = borrowed(intercept), borrowed(intercept_avg)
    step, n_avg, gradient_t = borrowed(step), borrowed(n_avg), borrowed(gradient_t)
    per_head, margins, group_weights = borrowed(per_head), borrowed(margins), borrowed(group_weights)
    curvature, lanes, group_lanes = borrowed(curvature), borrowed(lanes), borrowed(group_lanes)
    ones, signs, theta_column = borrowed(ones), borrowed(signs), borrowed(theta_column)
    boost_rows = borrowed(boost_rows)
    fit_intercept, head_iwp, head_alpha = (borrowed(fit_intercept), borrowed(head_iwp),
                                           borrowed(head_alpha))
    carry_stage, carry_labels = borrowed(carry_stage), borrowed(carry_labels)
    carry_addresses, stage, stage_addresses = (borrowed(carry_addresses), borrowed(stage),
                                               borrowed(stage_addresses))
    addresses, fparams, iparams = borrowed(addresses), borrowed(fparams), borrowed(iparams)
    like, y_like = borrowed(like), borrowed(y_like)
    noise_var, eulerian, classes = borrowed(noise_var), borrowed(eulerian), borrowed(classes)
    class_boost = borrowed(class_boost)
    carry_X, carry_y, counters = borrowed(carry_X), borrowed(carry_y), borrowed(counters)
    telemetry, traces, trace_steps = borrowed(telemetry), borrowed(traces), borrowed(trace_steps)
    while True:
        # the next block of batches, chosen as in sgd_chunk
        carried = counters[0, C_CARRY]
        from_carry = carried == batch_size or (final and carried > 0 and position == n_rows)
        if from_carry:
            _narrow_carried(carry_X, carry_y, carried, carry_stage, carry_labels)
            sources = carry_addresses
            first_row = 0
            block_labels = carry_labels
            m = carried
            n_batches = 1
        elif position + batch_size <= n_rows:
            m = batch_size
            n_batches = (n_rows - position) // batch_size
            if staging:
                n_batches = min(n_batches, stage_batches)
                _stage_rows(addresses, like, position, n_batches * batch_size, stage)
                sources = stage_addresses
                first_row = 0
            else:
                sources = addresses
                first_row = position
            block_labels = y[position:position + n_batches * batch_size]
            position += n_batches * batch_size
        elif position < n_rows:
            rest = n_rows - position
            _to_carry(addresses, like, y, n_rows, position, rest, carry_X, carry_y, 0)
            for c in range(n_heads):
                counters[c, C_CARRY] = rest
            position = n_rows
            continue
        else:
            break
        in_place = not from_carry and not staging
        for b in range(n_batches):
            if in_place and b + PREFETCH_AHEAD < n_batches:
                _prefetch_batch(addresses, like, y_address, y_like,
                                first_row + (b + PREFETCH_AHEAD) * m, m)
            rows_before = telemetry[0, T_ROWS]
            if not _heads_batch(table_form, classes, laplace_law, weighted, sources, like,
                                block_labels[b * m:(b + 1) * m], first_row + b * m, m, fparams,
                                iparams, noise_var, noise_t, direction_t, direction, laplace,
                                eulerian, theta_t,
                                theta_avg_t, intercept, intercept_avg, step, n_avg, counters,
                                telemetry, traces, trace_steps, margins, signs, group_weights,
                                curvature,
                                gradient_t, lanes, group_lanes, ones, theta_column, per_head,
                                fit_intercept, head_iwp, head_alpha, class_boost, boost_rows):
                # the carried batch is spent, as after any batch: a caller that drops the
                # diverged heads continues the others on the rows after this batch
                if from_carry:
                    for c in range(n_heads):
                        counters[c, C_CARRY] = 0
                _store_heads(theta_t, theta_avg_t, intercept, intercept_avg, step, n_avg, thetas,
                             theta_avgs, intercepts, intercept_avgs, counters)
                keep_alive(owned)
                return np.int64(rows_before) + m - 1
        if from_carry:
            for c in range(n_heads):
                counters[c, C_CARRY] = 0
    _store_heads(theta_t, theta_avg_t, intercept, intercept_avg, step, n_avg, thetas, theta_avgs,
                 intercepts, intercept_avgs, counters)
    keep_alive(owned)
    return NO_DIVERGENCE


@jit
def head_margin_blocks(addresses, like, theta_t, row, n_blocks, margins):
    """The margin product of ``_head_margins`` over every group of HEAD_GROUP heads, compiled
    (for tests/test_fused_heads.py, which checks it bit for bit against its Python definition)."""
    for first_head in range(0, theta_t.shape[1] - HEAD_GROUP + 1, HEAD_GROUP):
        margin_blocks_heads(addresses, row, like, theta_t, first_head, n_blocks, margins)


@jit
def head_gradient_blocks(weights, addresses, row, like, n_blocks, gradient_t):
    """The gradient sums of ``_heads_batch`` for every group of HEAD_GROUP heads (row h of
    ``weights`` is head h's row weights), compiled (for tests/test_fused_heads.py, which checks it
    bit for bit against its Python definition)."""
    for first_head in range(0, weights.shape[0] - HEAD_GROUP + 1, HEAD_GROUP):
        gradient_blocks_heads(weights[first_head:first_head + HEAD_GROUP], addresses, row, like,
                              n_blocks, gradient_t, first_head)
