"""Public wrapper of the fused SGD kernels: validation here, arithmetic in ``iwpfast._kernels``.

    run_chunk(cfg, state, X, y, sample_weight=None)
                                  one chunk of rows (X feature-major), state updated in place
    finish(cfg, state)            the carried partial batch as the stream's last update
    run_chunk_heads(cfgs, states, X, y, sample_weight=None), finish_heads(cfgs, states)
                                  several heads over the same rows in one scan (each head's
                                  model has the bits of its own run_chunk)
    warmup(dtypes=...)            compile (or load from the on-disk cache) ahead of time

``X`` is a (p, n) array or a sequence of p 1-D arrays (e.g. Arrow columns), float32 or float64,
read-only allowed; no copy is made when each column is contiguous.  Labels: {-1, +1} in any real
dtype for classification losses, float targets for ``squared_error``; float32, float64 and int8
labels are read in place (a release's labels and ``fit(X, y)``'s are int8), others converted to
float64 once per chunk.  The semantics are those of
docs/internals.md "One SGD update", the same as ``iwpfast.sgd.reference`` (NumPy twin).

Numba is imported on first use only (``import iwpfast`` compiles nothing).

Example::

    >>> import numpy as np
    >>> from iwpfast.sgd.state import HeadConfig, HeadState
    >>> from iwpfast.sgd.engine import run_chunk, finish
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((2, 1000)); y = np.where(X[0] > 0, 1.0, -1.0)
    >>> cfg = HeadConfig(loss="exponential", mode="clean", n_features=2, noise_var=np.zeros(2),
    ...                  learning_rate=0.1, batch_size=32)
    >>> state = HeadState.new(cfg)
    >>> run_chunk(cfg, state, X, y); finish(cfg, state)
    >>> bool(state.theta[0] > 0.5), state.step
    (True, 32)
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._kernels.abi import (
    C_CARRY,
    COUNTER_FIELDS,
    F_MATCH_MINUS_Z,
    F_MATCH_Z,
    F_OTHER_MINUS_Z,
    F_OTHER_Z,
    I_MODE,
    I_NOISE_LAW,
    LAW_LAPLACE,
    LOSS_CODES,
    MODE_CODES,
    MODE_IWP,
    SCHEDULE_CODES,
    SGD_KERNEL_LOSS_CODES,
    T_ROWS,
    TELEMETRY_FIELDS,
    pack_fparams,
    pack_iparams,
)
from ..exceptions import DivergenceError, InvalidInputError
from ..losses import CLASSIFICATION_LOSSES, LOSS_RECORDS
from .state import MAX_TRUNCATION, HeadConfig, HeadState, check_config, check_sample_weight

__all__ = ["run_chunk", "finish", "run_chunk_heads", "finish_heads", "warmup", "MAX_TRUNCATION"]
_FEATURE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
#: labels read in place: a release's labels and the facade's classification labels are int8 +-1
#: (1 byte a row; widened to float64 per batch in the kernel, so the same bits as float64 labels),
#: where a float64 copy cost a pass writing 8 bytes a row and the kernel reading them
_LABEL_DTYPES = (*_FEATURE_DTYPES, np.dtype(np.int8))


def _kernels():
    """The kernel module, imported (not compiled) on first use; says so when they will compile."""
    from .._kernels import _options, sgd
    _options.announce_first_compile()
    return sgd


# ------------------------------------------------------------------------------------------
# configuration
# ------------------------------------------------------------------------------------------

# _kernel_config results by id(cfg): the driver calls run_chunk once per head per chunk, and
# validating and packing a config costs ~10 us, as much as ~3000 rows of the kernel at p = 2.
# An entry holds its cfg (so the id cannot be reused while it is cached) and a copy of the
# noise variances, the one field of a frozen HeadConfig that can change in place.
_CONFIG_CACHE: dict[int, tuple] = {}
#: more than the heads of one scan: a k-class 'auto' grid runs k x 28 (140 at k = 5), and with
#: 64 entries every chunk's call packed each of them again (0.05-0.1 CPU s a fit)
_CONFIG_CACHE_SIZE = 1024
_CONFIG_CACHE_LOCK = threading.Lock()


def _kernel_config(cfg: HeadConfig):
    """Validate ``cfg`` and pack it for the kernel: (fparams, iparams, noise_var, eulerian).

    Cached per config object; the kernels only read the packed arrays."""
    entry = _CONFIG_CACHE.get(id(cfg))
    if entry is not None and entry[0] is cfg and _noise_snapshot(cfg) == entry[1]:
        return entry[2]
    packed = _pack_config(cfg)
    with _CONFIG_CACHE_LOCK:                    # the driver runs heads on worker threads
        while len(_CONFIG_CACHE) >= _CONFIG_CACHE_SIZE:
            del _CONFIG_CACHE[next(iter(_CONFIG_CACHE))]      # the oldest entry
        _CONFIG_CACHE[id(cfg)] = (cfg, _noise_snapshot(cfg), packed)
    return packed


def _noise_snapshot(cfg: HeadConfig) -> bytes:
    return np.asarray(cfg.noise_var, dtype=np.float64).tobytes()


def _pack_config(cfg: HeadConfig):
    """(fparams, iparams, noise_var, eulerian) at the positions of ``_kernels/abi.py``."""
    c = check_config(cfg)
    match_z, match_minus_z, other_z, other_minus_z = c.label_table
    fparams = pack_fparams(match_z=match_z, alpha=c.alpha, learning_rate=c.learning_rate, mu=c.mu,
                           radius=c.radius, variance_cap=c.variance_cap, match_minus_z=match_minus_z,
                           other_z=other_z, other_minus_z=other_minus_z)
    record = LOSS_RECORDS[c.loss]
    if LOSS_CODES.get(c.loss) not in SGD_KERNEL_LOSS_CODES:
        # no code, or a code without its branches (the kernel would run it as the squared error)
        raise InvalidInputError(
            f"loss {c.loss!r} has no kernel: add its code to LOSS_CODES and SGD_KERNEL_LOSS_CODES "
            "in iwpfast/_kernels/abi.py and its branches to _row_scalars and _table_row_scalars in "
            "iwpfast/_kernels/sgd.py (docs/extending.md \"A loss\"), or fit with the NumPy twin "
            "(engine='numpy')")
    iparams = pack_iparams(loss=LOSS_CODES[c.loss], mode=MODE_CODES[c.mode],
                           schedule=SCHEDULE_CODES[c.schedule], truncation=c.truncation,
                           fit_intercept=int(c.fit_intercept), average_start=c.average_start,
                           trace_every=c.trace_every, batch_size=c.batch_size,
                           weighted=int(c.weighted), noise_law=c.noise_law)
    # the other losses pass None: the kernel is then compiled without the logistic code
    table = record.truncation_table if record.truncated else None
    eulerian = None if table is None else table(c.truncation)
    return fparams, iparams, c.noise_packed, eulerian


def _check_state(cfg: HeadConfig, state: HeadState) -> None:
    """Shapes and dtypes of the carried arrays: the kernel writes into them without checks."""
    if not isinstance(state, HeadState):
        raise InvalidInputError(f"state must be an iwpfast.sgd.state.HeadState (HeadState.new(cfg)), "
                                f"got {type(state).__name__}")
    p, batch = cfg.n_features, cfg.batch_size
    expected = {
        "theta": ((p,), np.float64), "theta_avg": ((p,), np.float64),
        "intercept": ((1,), np.float64), "intercept_avg": ((1,), np.float64),
        # a weighted head carries its rows' sample weights as one more row
        "carry_X": ((cfg.n_columns, batch), np.float64), "carry_y": ((batch,), np.float64),
        "telemetry": ((len(TELEMETRY_FIELDS),), np.float64),
        "counters": ((len(COUNTER_FIELDS),), np.int64),
    }
    for name, (shape, dtype) in expected.items():
        array = getattr(state, name)
        if not isinstance(array, np.ndarray) or array.shape != shape or array.dtype != dtype \
                or not array.flags.c_contiguous or not array.flags.writeable:
            got = (f"{array.dtype}{array.shape}" if isinstance(array, np.ndarray)
                   else type(array).__name__)
            raise InvalidInputError(
                f"state.{name} is {got}; expected a writable C-contiguous {np.dtype(dtype)} array of "
                f"shape {shape} for this config (n_features={p}, batch_size={batch}, "
                f"weighted={cfg.weighted}): create the "
                "state with HeadState.new(cfg)")
    trace, steps = state.trace, state.trace_steps
    if (not isinstance(trace, np.ndarray) or trace.ndim != 2 or trace.shape[1] != p + 1
            or trace.dtype != np.float64 or not trace.flags.c_contiguous or not trace.flags.writeable
            or not isinstance(steps, np.ndarray) or steps.shape != (trace.shape[0],)
            or steps.dtype != np.int64 or not steps.flags.writeable):
        raise InvalidInputError(f"state.trace must be a writable float64 (capacity, {p + 1}) array "
                                "with an int64 trace_steps of length capacity: use "
                                "HeadState.new(cfg, trace_capacity=...)")
    carried = int(state.counters[C_CARRY])
    if not 0 <= carried < batch:
        raise InvalidInputError(f"state.carry_n (carried rows) = {carried} is outside "
                                f"[0, batch_size={batch}): the state does not belong to this config")


def _check_trace_room(cfg: HeadConfig, state: HeadState, updates: int) -> None:
    if cfg.trace_every <= 0 or updates <= 0:
        return
    step = state.step
    needed = (step + updates) // cfg.trace_every - step // cfg.trace_every
    room = state.trace.shape[0] - state.trace_n
    if needed > room:
        raise InvalidInputError(
            f"state.trace has room for {room} more rows but this chunk records {needed} "
            f"(trace_every={cfg.trace_every}): drain the trace (set state.counters[C_TRACE] = 0, "
            "C_TRACE from iwpfast._kernels.abi) or create the state with a larger trace_capacity")


# ------------------------------------------------------------------------------------------
# data
# ------------------------------------------------------------------------------------------

def _columns(X, p: int) -> tuple[object, np.ndarray, np.dtype, int]:
    """(keep_alive, addresses, dtype, n): the address of each feature column (contiguous, one
    float dtype); ``keep_alive`` holds the memory they point into until the kernel returns.

    A (p, n) array whose rows are contiguous (C order, or a column slice of it) costs one
    address computation for all the columns; other inputs are checked column by column and a
    strided column is copied."""
    if isinstance(X, np.ndarray):
        if X.ndim != 2 or X.shape[0] != p:
            hint = (" (it looks row-major: pass X.T, or better a (p, n) array / list of columns)"
                    if X.ndim == 2 and X.shape[1] == p else "")
            raise InvalidInputError(f"X has shape {X.shape}; expected feature-major (p={p}, n) or a "
                                    f"sequence of {p} 1-D arrays{hint}")
        if X.dtype not in _FEATURE_DTYPES:
            raise InvalidInputError(f"feature column 0 has dtype {X.dtype}; features must be "
                                    "float32 or float64 (cast with .astype(np.float32))")
        if p and (X.strides[1] == X.itemsize or X.shape[1] <= 1):
            addresses = X.ctypes.data + np.arange(p, dtype=np.int64) * X.strides[0]
            return X, addresses, X.dtype, X.shape[1]
        columns = [X[j] for j in range(p)]
    elif isinstance(X, Sequence) or hasattr(X, "__iter__"):
        columns = [np.asarray(column) for column in X]
        if len(columns) != p:
            raise InvalidInputError(f"X holds {len(columns)} columns; the head has n_features={p}")
    else:
        raise InvalidInputError(f"X must be a (p, n) array or a sequence of p 1-D arrays, got "
                                f"{type(X).__name__}")
    if p == 0:
        return columns, np.zeros(0, np.int64), np.dtype(np.float64), 0
    n, dtype = -1, columns[0].dtype
    for j, column in enumerate(columns):
        if column.ndim != 1:
            raise InvalidInputError(f"feature column {j} has shape {column.shape}; each column must "
                                    "be 1-D")
        if column.dtype not in _FEATURE_DTYPES:
            raise InvalidInputError(f"feature column {j} has dtype {column.dtype}; features must be "
                                    "float32 or float64 (cast with .astype(np.float32))")
        if j == 0:
            n = column.shape[0]
        elif column.shape[0] != n:
            raise InvalidInputError(f"feature column {j} has {column.shape[0]} rows, column 0 has {n}: "
                                    "all columns of a chunk must have the same length")
        elif column.dtype != dtype:
            raise InvalidInputError(f"feature column {j} is {column.dtype} but column 0 is {dtype}: "
                                    "pass all features in one dtype (float32 or float64)")
    # a strided column (e.g. a row of a Fortran-ordered array) is copied: the kernel reads
    # contiguous memory through raw addresses
    columns = [c if c.flags.c_contiguous else np.ascontiguousarray(c) for c in columns]
    return columns, _addresses(columns), dtype, n


def _labels(cfg: HeadConfig, y, n: int) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise InvalidInputError(f"y has shape {y.shape}; expected ({n},), one label per row of X")
    if y.dtype.kind not in "fiub":
        raise InvalidInputError(f"y has dtype {y.dtype}; labels must be real numbers "
                                "(+-1 for classification, float targets for squared_error)")
    if y.dtype not in _LABEL_DTYPES:
        y = y.astype(np.float64)                 # other ints/bools: a copy, one kernel dtype less
    y = np.ascontiguousarray(y)
    if n and cfg.loss in CLASSIFICATION_LOSSES:
        bad = int(_kernels().first_invalid_label(y))
        if bad >= 0:
            raise InvalidInputError(f"y[{bad}] = {y[bad].item()!r} (row {bad} of this chunk): labels must be "
                                    "-1 or +1 for the classification losses; encode them as "
                                    "np.where(label, 1.0, -1.0)")
    return y


def _addresses(columns: list[np.ndarray]) -> np.ndarray:
    return np.array([c.ctypes.data for c in columns], dtype=np.int64)


def _carry_addresses(state: HeadState) -> np.ndarray:
    carry = state.carry_X
    return carry.ctypes.data + np.arange(carry.shape[0], dtype=np.int64) * carry.strides[0]


_LIKE = {np.dtype(t): np.empty(0, t) for t in (np.float32, np.float64, np.int8, np.int16)}


def _table_form(fparams: np.ndarray):
    """None when the head's label-weight table has two equal rows (every binary head, unless
    HeadConfig.label_weights says otherwise): the kernel is then compiled without the k-class
    table form (its compile time is not paid); True lets the kernel check at run time."""
    equal = (fparams[F_OTHER_Z] == fparams[F_MATCH_Z]
             and fparams[F_OTHER_MINUS_Z] == fparams[F_MATCH_MINUS_Z])
    return None if equal else True


def _carry_is_exact(state: HeadState, dtype: np.dtype, y_dtype: np.dtype) -> bool:
    """True when the carried rows (float64 in the state) are values of the column dtype ``dtype``
    and the label dtype ``y_dtype``: the kernel narrows them into those dtypes to run the carried
    batch through the same compiled code as the batches in place.  They are whenever the stream's
    earlier chunks had these dtypes; a float64 chunk before a float32 one may leave rows that are
    not, and the float32 chunk then runs in float64 (``_in_float64``)."""
    carried = state.carry_n
    if carried == 0:
        return True
    for values, target in ((state.carry_X[:, :carried], dtype), (state.carry_y[:carried], y_dtype)):
        if target != np.float64:
            with np.errstate(over="ignore", invalid="ignore"):
                narrowed = values.astype(target).astype(np.float64)
            if not np.array_equal(narrowed, values, equal_nan=True):
                return False
    return True


def _in_float64(columns, y):
    """(columns, addresses, dtype, y) of a chunk converted to float64 (exact)."""
    columns = [np.ascontiguousarray(column, dtype=np.float64) for column in columns]
    return (columns, _addresses(columns), np.dtype(np.float64),
            np.ascontiguousarray(y, dtype=np.float64))


def _compiled_dtypes(kernel, given: dict | None = None) -> tuple[np.dtype, np.dtype]:
    """(column dtype, label dtype) of a specialization of ``kernel`` compiled (or loaded) in this
    process, float64 if none: a call on no rows reads neither, so any compiled one serves.
    ``given``: {argument position: value} that the specialization must have been compiled for
    (None or not None: the arguments whose None-ness is a type of its own)."""
    for signature in reversed(getattr(kernel, "signatures", ())):
        if all((str(signature[i]) == "none") == (value is None)
               for i, value in (given or {}).items()):
            return np.dtype(str(signature[1].dtype)), np.dtype(str(signature[3].dtype))
    return np.dtype(np.float64), np.dtype(np.float64)


def _raise_divergence(cfg: HeadConfig, row: int) -> None:
    from .state import divergence_advice
    where = (f"SGD diverged: theta became non-finite in the update ending at row {row} (global "
             "row index of the stream).")
    err = DivergenceError(f"{where} {divergence_advice(cfg)}")
    err.config, err.where = cfg, where
    raise err


# ------------------------------------------------------------------------------------------
# public API
# ------------------------------------------------------------------------------------------

def run_chunk(cfg: HeadConfig, state: HeadState, X, y, sample_weight=None) -> None:
    """Run minibatch projected SGD over one chunk of rows, updating ``state`` in place.

    Complete batches run in place; the rows of an incomplete batch at the end are copied into the
    state's float64 carry buffer and completed by the next chunk (or by ``finish``), so the
    result does not depend on how the stream is chunked.  ``sample_weight``: one weight >= 0 per
    row, for a head with ``cfg.weighted`` (read in the features' dtype; the gradient of row i is
    multiplied by it).  Raises ``InvalidInputError`` for bad input (nothing is changed then) and
    ``DivergenceError`` when theta becomes non-finite.
    """
    if cfg.label_class is not None:       # class-index labels: the k-head kernel with k = 1
        run_chunk_heads([cfg], [state], X, y, sample_weight)
        return
    fparams, iparams, noise_var, eulerian = _kernel_config(cfg)
    _check_state(cfg, state)
    columns, addresses, dtype, n = _columns(X, cfg.n_features)
    y = _labels(cfg, y, n)
    if not _carry_is_exact(state, dtype, y.dtype):
        columns, addresses, dtype, y = _in_float64(columns, y)
    weights = check_sample_weight(cfg, sample_weight, n, dtype)
    if weights is not None:
        addresses = np.append(addresses, np.int64(weights.ctypes.data))
    if n == 0:
        return
    _check_trace_room(cfg, state, (state.carry_n + n) // cfg.batch_size)
    kernels = _kernels()
    row = kernels.sgd_chunk(
        addresses, _LIKE[dtype], np.int64(y.ctypes.data), _LIKE[y.dtype], np.int64(n), fparams,
        iparams, noise_var, eulerian, state.theta, state.theta_avg, state.intercept,
        state.intercept_avg, state.carry_X, state.carry_y, state.counters, state.telemetry,
        state.trace, state.trace_steps, _table_form(fparams), False)
    del columns, y, weights                     # kept alive until here: the kernel read raw memory
    if row >= 0:
        _raise_divergence(cfg, int(row))


def finish(cfg: HeadConfig, state: HeadState) -> None:
    """Run the carried partial batch (fewer than batch_size rows) as the last update, if any."""
    if cfg.label_class is not None:
        finish_heads([cfg], [state])
        return
    fparams, iparams, noise_var, eulerian = _kernel_config(cfg)
    _check_state(cfg, state)
    if state.carry_n == 0:
        return
    _check_trace_room(cfg, state, 1)
    kernels = _kernels()
    like, y_like = _compiled_dtypes(kernels.sgd_chunk)
    if not _carry_is_exact(state, like, y_like):
        like = y_like = np.dtype(np.float64)
    # the end of the stream is sgd_chunk on no rows with final=True, in column and label dtypes
    # it already runs with (so nothing more compiles; with no rows only the carried ones are read)
    row = kernels.sgd_chunk(
        _carry_addresses(state), _LIKE[like], np.int64(state.carry_y.ctypes.data), _LIKE[y_like],
        np.int64(0), fparams, iparams, noise_var, eulerian, state.theta, state.theta_avg,
        state.intercept, state.intercept_avg, state.carry_X, state.carry_y, state.counters,
        state.telemetry, state.trace, state.trace_steps, _table_form(fparams), True)
    if row >= 0:
        _raise_divergence(cfg, int(row))


# ------------------------------------------------------------------------------------------
# k one-vs-rest heads of a class-index label, in one scan
# ------------------------------------------------------------------------------------------

_STACKED = ("theta", "theta_avg", "intercept", "intercept_avg", "counters", "telemetry")


#: label dtypes the k-head kernel reads as they are (a release writes int8 class indices)
_CLASS_DTYPES = tuple(np.dtype(t) for t in (np.int8, np.int16, np.float32, np.float64))
#: class indices are < MAX_CLASSES (a release writes them as int8 or int16)
MAX_CLASSES = 32767


def _class_labels(y, n: int) -> np.ndarray:
    """Class indices, checked (integers in [0, MAX_CLASSES)); int8/int16/float32/float64 are read
    in place, other integer types converted once (int16 when the values fit, else float64)."""
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise InvalidInputError(f"y has shape {y.shape}; expected ({n},), one class index per row of X")
    if y.dtype.kind not in "iuf":
        raise InvalidInputError(f"y has dtype {y.dtype}; one-vs-rest heads (label_class) read class "
                                "indices 0..k-1 (integers)")
    if y.dtype not in _CLASS_DTYPES:
        fits = y.dtype.kind in "iu" and n and int(y.min()) >= -32768 and int(y.max()) <= 32767
        y = y.astype(np.int16 if (fits or not n) else np.float64)
    y = np.ascontiguousarray(y)
    if n:
        row = int(_kernels().first_invalid_class(y, MAX_CLASSES))
        if row >= 0:
            raise InvalidInputError(f"y[{row}] = {y[row].item()!r} (row {row} of this chunk) is not a "
                                    "class index: one-vs-rest heads read integers 0..k-1 (the index of "
                                    "the label in the declared classes)")
    return y


def _pack_heads(cfgs, states):
    """Validate heads that share one scan; return the kernel's per-head arrays."""
    cfgs, states = list(cfgs), list(states)
    if not cfgs or len(cfgs) != len(states):
        raise InvalidInputError(f"run_chunk_heads needs one state per config, got {len(cfgs)} configs "
                                f"and {len(states)} states")
    first = cfgs[0]
    packed = []
    for c, (cfg, state) in enumerate(zip(cfgs, states, strict=True)):
        if (cfg.label_class is None) != (first.label_class is None):
            raise InvalidInputError(
                f"head {c}: label_class={cfg.label_class!r} but head 0 has "
                f"label_class={first.label_class!r}; the heads of one scan read one label column: "
                "all one-vs-rest heads of class indices (label_class set) or all heads of the "
                "labels as they are (label_class=None)")
        for name in ("n_features", "batch_size", "loss", "truncation", "weighted", "class_boost"):
            if getattr(cfg, name) != getattr(first, name):
                raise InvalidInputError(f"head {c}: {name}={getattr(cfg, name)!r} differs from head 0's "
                                        f"{getattr(first, name)!r}; heads of one scan share it")
        packed.append(_kernel_config(cfg))
        _check_state(cfg, state)
        if state.carry_n != states[0].carry_n:
            raise InvalidInputError(f"head {c} carries {state.carry_n} rows but head 0 carries "
                                    f"{states[0].carry_n}: the states were not trained together")
    fparams = np.stack([p[0] for p in packed])
    iparams = np.stack([p[1] for p in packed])
    # each head's noise row: the variances (Gaussian), or 3 blocks of p (an IWP head of the
    # discrete Laplace law, _kernels/abi.py): padded to the longest
    noise_var = np.zeros((len(packed), max(p[2].shape[0] for p in packed)))
    for c, p in enumerate(packed):
        noise_var[c, :p[2].shape[0]] = p[2]
    classes = (None if first.label_class is None
               else np.array([float(cfg.label_class) for cfg in cfgs]))
    # the class weights of k-class heads: per class index, the addition to the weight of F(z)
    class_boost = (None if first.class_boost is None
                   else np.ascontiguousarray(first.class_boost, dtype=np.float64))
    # None: every head's label-weight table has two equal rows (the table form is not compiled)
    table_form = None if class_boost is None and all(_table_form(p[0]) is None for p in packed) \
        else True
    # None: no IWP head of the discrete Laplace law / unweighted heads (that code is not compiled)
    laplace_law = (True if np.any((iparams[:, I_MODE] == MODE_IWP)
                                  & (iparams[:, I_NOISE_LAW] == LAW_LAPLACE)) else None)
    weighted = True if first.weighted else None
    stacked = {name: np.stack([getattr(st, name) for st in states]) for name in _STACKED}
    capacity = max(st.trace.shape[0] for st in states)
    traces = np.zeros((len(states), capacity, first.n_features + 1))
    trace_steps = np.zeros((len(states), capacity), np.int64)
    for c, st in enumerate(states):
        traces[c, :st.trace.shape[0]] = st.trace
        trace_steps[c, :st.trace.shape[0]] = st.trace_steps
    return fparams, iparams, noise_var, packed[0][3], classes, \
        (table_form, laplace_law, weighted, class_boost), stacked, traces, trace_steps


def _unpack_heads(states, stacked, traces, trace_steps):
    for c, st in enumerate(states):
        for name in _STACKED:
            getattr(st, name)[...] = stacked[name][c]
        st.trace[...] = traces[c, :st.trace.shape[0]]
        st.trace_steps[...] = trace_steps[c, :st.trace.shape[0]]
        if c:
            st.carry_X[...] = states[0].carry_X
            st.carry_y[...] = states[0].carry_y


def _raise_heads_divergence(cfgs, states, row: int) -> None:
    bad = [c for c, st in enumerate(states)
           if not (np.all(np.isfinite(st.theta)) and np.isfinite(st.intercept[0]))]
    _raise_divergence(cfgs[bad[0] if bad else 0], row)


def _finite(state: HeadState) -> bool:
    return bool(np.all(np.isfinite(state.theta)) and np.isfinite(state.intercept[0]))


def run_chunk_heads(cfgs, states, X, y, sample_weight=None, drop_diverged: bool = False) -> list:
    """Several heads over one chunk in one scan: every batch of rows is read once and used by every
    head while it is in cache (their margins as one small matrix product).

    Either one-vs-rest heads (``HeadConfig.label_class`` set) of one class-index label: ``y``
    holds class indices (integers 0..k-1, any real dtype) and head c's model has the bits of a
    single-head run (``run_chunk``) on the labels +1 where y == label_class, -1 elsewhere, with
    its own label weights; or heads with ``label_class=None`` (a tuning grid, clean/naive/IWP
    heads): ``y`` as for ``run_chunk`` and head c's model has the bits of ``run_chunk`` on it.
    The heads must share n_features, batch_size, loss and truncation, and have been trained
    together (same carried rows), and be all weighted (then ``sample_weight``: one weight >= 0 per
    row, shared by the heads) or all not.  States are updated in place.

    A head whose theta or intercept becomes non-finite stops the kernel after that batch (every
    head has made it) and raises ``DivergenceError``; with ``drop_diverged`` the others go on over
    the rest of the chunk instead (their bits are those of a run without the diverged heads:
    the heads are independent), and the indices of the heads that diverged are returned (their
    states hold the non-finite update: the caller drops them).
    """
    cfgs, states = list(cfgs), list(states)
    fparams, iparams, noise_var, eulerian, classes, forms, stacked, traces, trace_steps = \
        _pack_heads(cfgs, states)
    columns, addresses, dtype, n = _columns(X, cfgs[0].n_features)
    codes = _labels(cfgs[0], y, n) if classes is None else _class_labels(y, n)
    if forms[3] is not None and n and np.max(codes) >= forms[3].shape[0]:
        row = int(np.argmax(codes >= forms[3].shape[0]))
        raise InvalidInputError(f"y[{row}] = {codes[row]!r} (row {row} of this chunk) is not a class "
                                f"index 0..{forms[3].shape[0] - 1} of the heads' class_boost")
    if not _carry_is_exact(states[0], dtype, codes.dtype):
        columns, addresses, dtype, codes = _in_float64(columns, codes)
    weights = check_sample_weight(cfgs[0], sample_weight, n, dtype)
    if weights is not None:
        addresses = np.append(addresses, np.int64(weights.ctypes.data))
    if n == 0:
        return []
    for cfg, state in zip(cfgs, states, strict=True):
        _check_trace_room(cfg, state, (state.carry_n + n) // cfg.batch_size)
    rows_before = int(states[0].telemetry[T_ROWS])
    carried = states[0].carry_n
    row = _kernels().sgd_chunk_heads(
        addresses, _LIKE[dtype], np.int64(codes.ctypes.data), _LIKE[codes.dtype], np.int64(n),
        fparams, iparams, noise_var, eulerian, classes, stacked["theta"], stacked["theta_avg"],
        stacked["intercept"], stacked["intercept_avg"], states[0].carry_X, states[0].carry_y,
        stacked["counters"], stacked["telemetry"], traces, trace_steps, forms[0], False, *forms[1:])
    del codes, weights
    _unpack_heads(states, stacked, traces, trace_steps)
    if row < 0:
        return []
    if not drop_diverged:
        _raise_heads_divergence(cfgs, states, int(row))
    bad = [c for c, st in enumerate(states) if not _finite(st)]
    keep = [c for c in range(len(states)) if c not in bad]
    if not bad or not keep:
        return bad or list(range(len(states)))
    # the rows of this chunk the kernel used: up to the end of the batch that diverged
    used = int(row) + 1 - rows_before - carried
    if used >= n:
        return bad
    whole: Any = columns            # the (p, n) array or the p columns the kernel read
    rest = [np.asarray(whole[j])[used:] for j in range(cfgs[0].n_features)]
    later = run_chunk_heads([cfgs[c] for c in keep], [states[c] for c in keep], rest,
                            np.asarray(y)[used:],
                            None if sample_weight is None else np.asarray(sample_weight)[used:],
                            drop_diverged=True)
    return sorted(bad + [keep[c] for c in later])


def finish_heads(cfgs, states, drop_diverged: bool = False) -> list:
    """Run the shared carried partial batch as the last update of every head, if any; a head
    that diverges there raises, or with ``drop_diverged`` is returned (its index)."""
    cfgs, states = list(cfgs), list(states)
    fparams, iparams, noise_var, eulerian, classes, forms, stacked, traces, trace_steps = \
        _pack_heads(cfgs, states)
    if states[0].carry_n == 0:
        return []
    for cfg, state in zip(cfgs, states, strict=True):
        _check_trace_room(cfg, state, 1)
    kernels = _kernels()
    # sgd_chunk_heads on no rows with final=True, in column and label dtypes it already runs with
    # (so nothing more compiles; with no rows only the carried ones are read)
    like, y_like = _compiled_dtypes(kernels.sgd_chunk_heads,
                                    {9: classes, 20: forms[0], 22: forms[1], 23: forms[2],
                                     24: forms[3]})
    if not _carry_is_exact(states[0], like, y_like):
        like = y_like = np.dtype(np.float64)
    row = kernels.sgd_chunk_heads(
        _carry_addresses(states[0]), _LIKE[like], np.int64(states[0].carry_y.ctypes.data),
        _LIKE[y_like], np.int64(0), fparams, iparams, noise_var, eulerian, classes,
        stacked["theta"], stacked["theta_avg"], stacked["intercept"], stacked["intercept_avg"],
        states[0].carry_X, states[0].carry_y, stacked["counters"], stacked["telemetry"], traces,
        trace_steps, forms[0], True, *forms[1:])
    _unpack_heads(states, stacked, traces, trace_steps)
    if row < 0:
        return []
    if not drop_diverged:
        _raise_heads_divergence(cfgs, states, int(row))
    return [c for c, st in enumerate(states) if not _finite(st)]


def warmup(dtypes=("float32", "float64"), label_dtypes=None,
           losses=("exponential", "logistic"), heads: bool = False) -> None:
    """Compile the kernels (or load them from Numba's on-disk cache) for these feature dtypes.

    Benchmarks call this first so that compile time is excluded; it is never needed for
    correctness.  ``label_dtypes`` defaults to the feature dtype (float32 labels with float32
    features).  Mode, p and the step schedule are runtime values; the losses other than logistic
    share one compilation, the logistic loss (its derivative code) has its own, and so has a head
    whose label-weight table has two different rows (``HeadConfig.label_weights``).  With
    ``heads``, also the kernel of several heads in one scan (``run_chunk_heads``: a tuning grid,
    clean / naive / IWP heads), unweighted, of labels as given (not one-vs-rest).
    """
    for dtype in dtypes:
        for label_dtype in (label_dtypes or (dtype,)):
            for loss in losses:
                cfg = HeadConfig(loss=loss, mode="iwp", n_features=1, noise_var=np.zeros(1),
                                 batch_size=2)
                X = np.zeros((1, 3), dtype=dtype)
                y = np.ones(3, dtype=label_dtype)
                state = HeadState.new(cfg)
                run_chunk(cfg, state, X, y)
                finish(cfg, state)
                # a file's labels are read-only (Arrow memory): the label check's specialization
                # for them, which the demo's scan otherwise compiled inside its clock
                y.setflags(write=False)
                _kernels().first_invalid_label(y)
                if heads:
                    cfgs = [cfg, HeadConfig(loss=loss, mode="naive", n_features=1,
                                            noise_var=np.zeros(1), batch_size=2)]
                    states = [HeadState.new(c) for c in cfgs]
                    run_chunk_heads(cfgs, states, X, y)
                    finish_heads(cfgs, states)
