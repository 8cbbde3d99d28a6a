"""NumPy twin of the fused SGD kernel: the executable spec of docs/internals.md "One SGD update".

``reference_run_chunk(cfg, state, X, y)`` and ``reference_finish(cfg, state)`` have the signatures
and semantics of ``iwpfast.sgd.engine.run_chunk`` / ``finish``: rows arrive in order, every
``cfg.batch_size`` consecutive rows make one update, the incomplete batch at a chunk's end is carried
(as float64) in ``state.carry_X`` / ``state.carry_y`` and completed by the next chunk, and ``finish``
runs the last partial batch.  The per-row scalars come from ``iwpfast.estimates.glm_scalars`` (the
formulas of docs/design.md section 2), so this file only adds the minibatch loop.

It loops over batches in Python (one update depends on the previous one) but is vectorized within
a batch, so it doubles as the "vectorized NumPy" speed baseline of the kernels.  All arithmetic is
float64 whatever the input dtype.

Example::

    >>> import numpy as np
    >>> from iwpfast.sgd.state import HeadConfig, HeadState
    >>> from iwpfast.sgd.reference import reference_run_chunk, reference_finish
    >>> cfg = HeadConfig(loss="logistic", mode="clean", n_features=2, noise_var=np.zeros(2),
    ...                  batch_size=4, learning_rate=0.1)
    >>> state = HeadState.new(cfg)
    >>> X = np.array([[1.0, -1.0, 0.5, 0.0, 2.0], [0.0, 1.0, 1.0, -1.0, 1.0]])   # (p, n)
    >>> reference_run_chunk(cfg, state, X, np.array([1, -1, 1, -1, 1]))
    >>> state.step, state.carry_n          # one full batch done, one row carried
    (1, 1)
    >>> reference_finish(cfg, state); state.step
    2
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .._kernels.abi import C_CARRY, C_NAVG, C_STEP, C_TRACE, TELEMETRY_INDEX
from ..estimates import glm_scalars_table
from ..exceptions import DivergenceError, InvalidInputError
from ..losses import CLASSIFICATION_LOSSES, REGRESSION_LOSSES
from .state import CheckedConfig, HeadConfig, HeadState, check_config, check_sample_weight

__all__ = ["reference_run_chunk", "reference_finish", "reference_run_chunk_heads",
           "reference_finish_heads"]

_ROWS = TELEMETRY_INDEX["rows_seen"]
_BATCHES = TELEMETRY_INDEX["batches"]
_PROJ = TELEMETRY_INDEX["projection_hits"]
_GMEAN = TELEMETRY_INDEX["grad_norm_mean"]
_GM2 = TELEMETRY_INDEX["grad_norm_m2"]
_ENERGY = TELEMETRY_INDEX["max_noise_energy"]
_CAP = TELEMETRY_INDEX["cap_hits"]
_STEP, _NAVG, _CARRY, _TRACE = C_STEP, C_NAVG, C_CARRY, C_TRACE


# --------------------------------------------------------------------------------------------
# Input checks (the wrapper's job: nothing is validated per batch)
# --------------------------------------------------------------------------------------------

def _feature_major(cfg: HeadConfig, X) -> np.ndarray:
    """(p, n) float64 view/copy of a (p, n) array or a sequence of p 1-D arrays."""
    p = cfg.n_features
    if isinstance(X, np.ndarray):
        if X.ndim != 2 or X.shape[0] != p:
            raise InvalidInputError(
                f"X has shape {X.shape}: features-major (p, n) with p={p} expected; "
                "transpose a (n, p) matrix with X.T")
        dtypes = {X.dtype}
        columns = None
    elif isinstance(X, Sequence) and not isinstance(X, (str, bytes)):
        columns = [np.asarray(c) for c in X]
        if len(columns) != p or any(c.ndim != 1 for c in columns):
            raise InvalidInputError(
                f"X must be {p} 1-D feature columns (or a ({p}, n) array); got "
                f"{len(columns)} column(s) with shapes {[c.shape for c in columns][:3]}")
        if len({c.shape[0] for c in columns}) > 1:
            raise InvalidInputError("the feature columns of X have different lengths "
                                    f"{sorted({c.shape[0] for c in columns})}; pass equal-length columns")
        dtypes = {c.dtype for c in columns}
    else:
        raise InvalidInputError(f"X must be a (p, n) array or a sequence of p 1-D arrays, "
                                f"got {type(X).__name__}")
    bad = [d for d in dtypes if d not in (np.float32, np.float64)]
    if bad:
        raise InvalidInputError(f"X has dtype {bad[0]}; features must be float32 or float64 "
                                "(convert with .astype(np.float64))")
    if columns is None:
        return X.astype(np.float64, copy=False)
    if p == 0:
        return np.zeros((0, 0))
    return np.stack([c.astype(np.float64, copy=False) for c in columns])


def _labels(cfg: HeadConfig, y, n: int) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise InvalidInputError(f"y has shape {y.shape}; expected ({n},), one label per row of X")
    if y.dtype.kind not in "biuf":
        raise InvalidInputError(f"y has dtype {y.dtype}; pass real numbers")
    y = y.astype(np.float64, copy=False)
    if cfg.label_class is not None:
        bad = np.flatnonzero((y < 0) | (y != np.floor(y)) | ~np.isfinite(y))
        if bad.size:
            raise InvalidInputError(f"y[{bad[0]}] = {float(y[bad[0]])!r} (row {bad[0]} of this chunk) is "
                                    "not a class index: one-vs-rest heads read integers 0..k-1")
    elif cfg.loss in CLASSIFICATION_LOSSES:
        bad = np.flatnonzero((y != 1.0) & (y != -1.0))
        if bad.size:
            raise InvalidInputError(f"y[{bad[0]}] = {float(y[bad[0]])!r} (row {bad[0]} of this chunk): "
                                    "classification labels must be -1 or +1")
    return y


def _check_trace_capacity(cfg: HeadConfig, state: HeadState, n_updates: int) -> None:
    k = int(cfg.trace_every)
    if k <= 0:
        return
    step = int(state.counters[_STEP])
    needed = (step + n_updates) // k - step // k
    free = state.trace.shape[0] - int(state.counters[_TRACE])
    if needed > free:
        raise InvalidInputError(
            f"the trace buffer has room for {free} more rows but this call records {needed} "
            f"(trace_every={k}); drain it (reset counters[3]) or allocate a larger trace_capacity")


# --------------------------------------------------------------------------------------------
# One SGD update (docs/internals.md, steps 1-10)
# --------------------------------------------------------------------------------------------

class _Head:
    """Config-derived constants of one head, computed once per call."""

    def __init__(self, cfg: CheckedConfig):
        iwp = cfg.mode == "iwp"
        # Outside mode iwp nothing is corrected: s = 0 everywhere (gradient, cap, telemetry).
        self.s = cfg.noise_var          # zeros outside mode iwp (check_config)
        self.iwp = iwp
        self.loss = cfg.loss
        self.regression = cfg.loss in REGRESSION_LOSSES
        self.label_table = cfg.label_table
        self.label_class = None if cfg.label_class is None else float(cfg.label_class)
        self.class_boost = None if cfg.class_boost is None else np.asarray(cfg.class_boost)
        self.truncation = cfg.truncation
        self.alpha = cfg.alpha
        self.gamma0 = cfg.learning_rate
        self.inverse = cfg.schedule == "inverse"
        self.mu = cfg.mu
        self.radius = cfg.radius
        self.cap = cfg.variance_cap
        self.fit_intercept = cfg.fit_intercept
        self.average_start = cfg.average_start
        self.trace_every = cfg.trace_every
        self.weighted = cfg.weighted    # the rows' last column holds their sample weights
        self.laplace = cfg.laplace      # the law of a Laplace head with the exponential loss
        self.cfg = cfg


def _update(h: _Head, state: HeadState, Xb: np.ndarray, yb: np.ndarray,
            sb: np.ndarray | None = None) -> None:
    """One update on the rows Xb (p, m), labels yb, sample weights sb (None: unweighted)."""
    m = yb.shape[0]
    theta = state.theta
    b = state.intercept[0]
    s = h.s
    # 1. tau (0 outside mode iwp since s = 0 there), and the direction of the curvature term
    if h.laplace is not None:          # discrete Laplace, exponential loss (docs/math.md)
        log_kappa, direction = h.laplace.exponential_factor(theta)
        tau = -float(np.sum(log_kappa))
    else:
        tau = 0.5 * float(np.dot(s, theta * theta))
        direction = s * theta
    # 2. per-row scores and scalars
    u = theta @ Xb
    if h.fit_intercept:
        u = u + b
    if h.regression:
        w = u - yb                      # per-row weight of x_i; c_i = 1 (times s = 0 unless iwp)
        c_mean = 1.0
    else:
        boost = None
        if h.label_class is not None:   # class indices -> +1 for the head's class, -1 elsewhere
            if h.class_boost is not None:   # class weights: the released class's boost
                boost = h.class_boost[yb.astype(np.int64)]
            yb = np.where(yb == h.label_class, 1.0, -1.0)
        a, c = glm_scalars_table(h.loss, yb * u, yb, tau, h.label_table, h.truncation, boost)
        w = a * yb
        if sb is not None:
            c = c * sb
        c_mean = float(c.sum()) / m
    if sb is not None:
        # weighted risk (1/n) sum s_i l_i: row i's gradient w_i x_i - c_i s*theta times s_i
        # (normalised by m, not by sum s_i: docs/math.md "Sample weights")
        w = w * sb
        if h.regression:
            c_mean = float(sb.sum()) / m
    # 3. mean gradient
    g_theta = (Xb @ w) / m - c_mean * direction + h.alpha * theta
    g_b = float(w.sum()) / m if h.fit_intercept else 0.0
    # 4. step size, t = updates done before this one
    t = int(state.counters[_STEP])
    gamma = h.gamma0 / (1.0 + h.mu * h.gamma0 * t) if h.inverse else h.gamma0
    # 5. step
    theta = theta - gamma * g_theta
    b = b - gamma * g_b
    # 6. projection on the L2 ball, then the variance cap
    tel = state.telemetry
    if h.radius < math.inf:
        norm = math.sqrt(float(np.dot(theta, theta)))
        if norm > h.radius:
            theta = theta * (h.radius / norm)
            tel[_PROJ] += 1.0
    energy = float(np.dot(s, theta * theta))
    if energy > h.cap:
        # the noised coordinates only (a public column, s_j = 0, carries no energy)
        theta = np.where(s > 0.0, theta * math.sqrt(h.cap / energy), theta)
        tel[_CAP] += 1.0
        energy = float(np.dot(s, theta * theta))
    state.theta[:] = theta
    state.intercept[0] = b
    # 7. Polyak average
    step = t + 1
    state.counters[_STEP] = step
    if h.average_start >= 0 and step > h.average_start:
        n_avg = int(state.counters[_NAVG]) + 1
        state.counters[_NAVG] = n_avg
        state.theta_avg += (theta - state.theta_avg) / n_avg
        state.intercept_avg[0] += (b - state.intercept_avg[0]) / n_avg
    # 8. telemetry
    rows_before = tel[_ROWS]
    tel[_ROWS] = rows_before + m
    tel[_BATCHES] += 1.0
    gnorm = math.sqrt(float(np.dot(g_theta, g_theta)) + g_b * g_b)
    delta = gnorm - tel[_GMEAN]
    tel[_GMEAN] += delta / tel[_BATCHES]
    tel[_GM2] += delta * (gnorm - tel[_GMEAN])
    if energy > tel[_ENERGY]:
        tel[_ENERGY] = energy
    # 9. trace
    if h.trace_every > 0 and step % h.trace_every == 0:
        row = int(state.counters[_TRACE])
        state.trace[row, :-1] = theta
        state.trace[row, -1] = b
        state.trace_steps[row] = step
        state.counters[_TRACE] = row + 1
    # 10. divergence
    if not (np.isfinite(theta).all() and math.isfinite(b)):
        from .state import divergence_advice
        where = (f"theta or the intercept became non-finite at row {int(rows_before) + m - 1} "
                 f"(update {step}, learning rate {gamma:.3g}).")
        err = DivergenceError(f"{where} {divergence_advice(h.cfg)}")
        err.config, err.where = h.cfg, where
        raise err


def _update_rows(h: _Head, state: HeadState, rows: np.ndarray, yb: np.ndarray) -> None:
    """``_update`` on a block of rows: the p features, then the weights when the head is weighted."""
    if h.weighted:
        _update(h, state, rows[:-1], yb, rows[-1])
    else:
        _update(h, state, rows, yb)


def _feature_dtype(X) -> np.dtype:
    """The dtype the kernel reads X's columns (and so the sample weights) in."""
    if isinstance(X, np.ndarray):
        return X.dtype
    dtypes = {np.asarray(c).dtype for c in X}
    return np.dtype(np.float32) if dtypes == {np.dtype(np.float32)} else np.dtype(np.float64)


def reference_run_chunk(cfg: HeadConfig, state: HeadState, X, y, sample_weight=None) -> None:
    """Run every complete batch of this chunk (carry included) and carry the incomplete rest.

    X: (p, n) features-major array or a sequence of p 1-D arrays (float32/float64, read-only ok);
    y: (n,) labels in {-1, +1} (classification) or targets (regression); sample_weight: (n,)
    weights >= 0 for a ``cfg.weighted`` head, in X's dtype as the kernel reads them (kept as the
    last row of ``state.carry_X`` while carried).  Updates ``state`` in place.
    Raises ``InvalidInputError`` on bad input (before any update) and ``DivergenceError`` when an
    iterate becomes non-finite (``state`` then holds the non-finite iterate).
    """
    checked = check_config(cfg)
    columns = _feature_major(cfg, X)
    n = columns.shape[1] if columns.ndim == 2 else 0
    y = _labels(cfg, y, n)
    weights = check_sample_weight(cfg, sample_weight, n, _feature_dtype(X))
    if weights is not None:             # the weights travel as one more row, like the kernel's
        columns = np.vstack([columns, weights.astype(np.float64)[None, :]])
    B = int(cfg.batch_size)
    if state.carry_X.shape != (cfg.n_columns, B) or state.carry_y.shape != (B,):
        raise InvalidInputError(f"state.carry_X has shape {state.carry_X.shape}; this state was made "
                                "for another batch_size or n_features: use HeadState.new(cfg)")
    carry_n = int(state.counters[_CARRY])
    _check_trace_capacity(cfg, state, (carry_n + n) // B)
    h = _Head(checked)
    # overflow on the way to a divergence is reported by step 10, not by NumPy warnings
    with np.errstate(over="ignore", invalid="ignore"):
        _run_batches(h, state, columns, y, carry_n, B, n)


def _run_batches(h: _Head, state: HeadState, columns: np.ndarray, y: np.ndarray, carry_n: int,
                 B: int, n: int) -> None:
    start = 0
    if carry_n > 0:
        take = min(B - carry_n, n)
        state.carry_X[:, carry_n:carry_n + take] = columns[:, :take]
        state.carry_y[carry_n:carry_n + take] = y[:take]
        carry_n += take
        start = take
        if carry_n == B:
            state.counters[_CARRY] = 0
            _update_rows(h, state, state.carry_X, state.carry_y)
        else:
            state.counters[_CARRY] = carry_n
            return
    while start + B <= n:
        _update_rows(h, state, columns[:, start:start + B], y[start:start + B])
        start += B
    rest = n - start
    if rest:
        state.carry_X[:, :rest] = columns[:, start:]
        state.carry_y[:rest] = y[start:]
        state.counters[_CARRY] = rest


def reference_finish(cfg: HeadConfig, state: HeadState) -> None:
    """Run the carried partial batch (m < batch_size rows), if any, as the last update."""
    checked = check_config(cfg)
    m = int(state.counters[_CARRY])
    if m == 0:
        return
    _check_trace_capacity(cfg, state, 1)
    state.counters[_CARRY] = 0
    h = _Head(checked)
    with np.errstate(over="ignore", invalid="ignore"):
        _update_rows(h, state, state.carry_X[:, :m], state.carry_y[:m])


def reference_run_chunk_heads(cfgs, states, X, y, sample_weight=None,
                              drop_diverged: bool = False) -> list:
    """Twin of ``engine.run_chunk_heads``: the heads are independent, so one after the other
    (with ``drop_diverged`` a head that diverges stops there, the others go on)."""
    return _heads_one_by_one(cfgs, states, drop_diverged,
                             lambda cfg, state: reference_run_chunk(cfg, state, X, y, sample_weight))


def reference_finish_heads(cfgs, states, drop_diverged: bool = False) -> list:
    """Twin of ``engine.finish_heads``."""
    return _heads_one_by_one(cfgs, states, drop_diverged, reference_finish)


def _heads_one_by_one(cfgs, states, drop_diverged, run) -> list:
    from ..exceptions import DivergenceError
    bad = []
    for c, (cfg, state) in enumerate(zip(cfgs, states, strict=True)):
        try:
            run(cfg, state)
        except DivergenceError:
            if not drop_diverged:
                raise
            bad.append(c)
    return bad
