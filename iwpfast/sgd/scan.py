"""One scan of a source for the driver: the chunk loop around the heads' kernels.

``Scan`` runs the chunks of a ``ChunkReader`` through every unit of heads (one kernel call per
unit and chunk, in the calling thread or in ``_HeadPool``'s worker threads), sizes and drains the
trace buffers, writes the periodic checkpoints and the one a signal asks for
(``_SignalGuard``: SIGINT/SIGTERM wait for the end of the chunk, so every head has seen the same
rows), and finishes the heads' last partial batches.  ``iwpfast.sgd.driver.fit_stream`` sets the
pass up and calls it; the errors it raises name the column and row of a bad value, and a
divergence names its head.
"""
from __future__ import annotations

import math
import signal
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .._kernels.abi import C_TRACE
from ..exceptions import BadDataError, DivergenceError, SampleWeightError
from ..io.chunks import non_finite_value_error
from ..io.reader import ChunkReader
from .checkpoint import write_checkpoint
from .state import HeadConfig, HeadState


class Checkpoints:
    """Where and when a pass writes its checkpoint (``path`` None: never)."""

    def __init__(self, path, every, states, config_hash, dataset_hash):
        self.path, self.every = path, every
        self.states, self.config_hash, self.dataset_hash = states, config_hash, dataset_hash

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def save(self, epoch, row, origin, finished=False) -> None:
        position = {"epoch": epoch, "row": int(row)}
        if origin is not None:
            position.update(file_index=origin.file_index, file=origin.file,
                            row_group=origin.row_group, group_row=origin.group_row)
        write_checkpoint(self.path, self.states, {"config_hash": self.config_hash,
                                                  "dataset_hash": self.dataset_hash,
                                                  "position": position, "finished": finished})


class Scan:
    """The chunk loop of one pass: ``epoch`` reads the source once from a row, ``finish`` runs
    the heads' last partial batches, ``close`` stops the head threads."""

    def __init__(self, heads, units, states, group_of, engine, threads: int,
                 trace_callback: Callable | None, checkpoints: Checkpoints, bar,
                 drop_diverged: bool = False, race=None,
                 regroup: Callable[[list], list] | None = None):
        self.heads, self.units, self.states, self.group_of = heads, units, states, group_of
        self.run_unit, self.finish_unit = engine
        self.tracing = any(h.config.trace_every > 0 for h in heads)
        self.trace_callback = trace_callback
        self.checkpoints, self.bar = checkpoints, bar
        # drop_diverged: {head name: end row of the chunk in which it diverged}; those heads are
        # left out of the later kernel calls and the others go on (None: a divergence raises)
        self.dropped: dict[str, int] | None = {} if drop_diverged else None
        # race (needs drop_diverged): at its ``rows`` it names heads to stop training (pruned:
        # {head name: row}); they are left out like diverged heads, their states kept as they were
        self.race, self.race_next, self.regroup = race, 0, regroup
        self.pruned: dict[str, int] = {}
        self.dropped_seen = 0
        self.threads = threads
        self.pool = (_HeadPool(units, states, group_of, self.run_unit, threads, self.dropped)
                     if threads > 1 else None)

    def _wait(self) -> None:
        if self.pool is not None:
            self.pool.wait()

    def _run_chunk(self, chunk) -> None:
        """Every unit of heads on one chunk (sequentially, or handed to the head threads)."""
        for h in self.heads:
            _ensure_trace(h.config, self.states[h.name], chunk.n_rows)
        if self.pool is None:
            for unit in self.units:
                try:
                    _run_unit_chunk(self.run_unit, unit, [h.config for h in unit],
                                    [self.states[h.name] for h in unit], chunk,
                                    self.group_of[unit[0].name], self.dropped)
                except DivergenceError as exc:
                    if len(unit) == 1:
                        _tag_head(exc, unit[0].name)
                    raise
        else:
            self.pool.submit(chunk)
            if self.tracing:            # trace buffers are sized and drained per chunk
                self.pool.wait()
        if self.tracing:
            _drain_traces(self.heads, self.states, self.trace_callback)

    def epoch(self, reader: ChunkReader, epoch: int, first_row: int, guard) -> tuple[int, int]:
        """Read ``reader`` (the source from ``first_row``) through the heads; checkpoint every
        ``checkpoints.every`` rows and when a signal is pending.  Returns (the row after the
        last one read, the rows read)."""
        row, rows_read, last_checkpoint = first_row, 0, first_row
        try:
            for chunk in reader:
                self._run_chunk(chunk)
                row = chunk.end_row
                rows_read += chunk.n_rows
                if self.dropped is not None and len(self.dropped) != self.dropped_seen:
                    self._drop_siblings(row)
                if self.race is not None and self.race_next < len(self.race.rows) \
                        and row >= self.race.rows[self.race_next]:
                    self._prune(row)
                if self.bar is not None:
                    self.bar.update(chunk.n_rows)
                if self.checkpoints.enabled and (
                        row - last_checkpoint >= self.checkpoints.every or guard.pending):
                    self._wait()
                    self.checkpoints.save(epoch, row, chunk.origin)
                    last_checkpoint = row
                if guard.pending is not None:
                    self._wait()
                    reader.close()
                    guard.deliver_pending()
            self._wait()
        finally:
            reader.close()
        return row, rows_read

    def _drop_siblings(self, row: int) -> None:
        """The race's ``siblings`` of a head that diverged (a k-class grid drops the grid point
        for every class) are left out from here on, not trained to the end and dropped then
        (they held places of the rungs; the other heads keep their bits)."""
        assert self.dropped is not None
        siblings = getattr(self.race, "siblings", None)
        if siblings is not None:
            # list(): one step for the GIL, while the head threads may add to it
            for name in list(self.dropped):
                if name not in self.pruned:
                    for other in siblings(name):
                        self.dropped.setdefault(other, int(row))
        self.dropped_seen = len(self.dropped)

    def _prune(self, row: int) -> None:
        """The race's rung at ``row``: every head has seen the same rows (the head threads are
        waited for); the heads it names stop here, and the others are regrouped into units (so
        the threads share what is left of the work)."""
        self._wait()
        while self.race_next < len(self.race.rows) and self.race.rows[self.race_next] <= row:
            self.race_next += 1
        assert self.dropped is not None
        # every head has now run to ``row``: the siblings of all that diverged by then are out
        # of the rung (the same heads every run, whatever the threads' timing)
        self._drop_siblings(row)
        alive = [h.name for h in self.heads if h.name not in self.dropped]
        names = [n for n in self.race.prune(row, alive, self.states) if n in alive]
        if not names or len(names) >= len(alive):
            return
        for n in names:
            self.pruned[n] = int(row)
            self.dropped[n] = int(row)
        if self.regroup is not None:
            self.units = self.regroup([h for h in self.heads if h.name not in self.dropped])
            if self.pool is not None:
                # the same threads take the new units (starting threads at every rung cost
                # milliseconds of wall time on a busy machine: a new thread waits for a core)
                self.pool.regroup(self.units, self.states, self.group_of)

    def finish(self, end_row) -> None:
        """Each unit's last partial batch (a divergence there names a non-finite carried value)."""
        for h in self.heads:
            _ensure_trace(h.config, self.states[h.name], 0)
        for unit in self.units:
            dropped = self.dropped
            if dropped is not None:
                unit = [h for h in unit if h.name not in dropped]
                if not unit:
                    continue
            cfgs, states = [h.config for h in unit], [self.states[h.name] for h in unit]
            try:
                bad = (self.finish_unit(cfgs, states) if dropped is None
                       else self.finish_unit(cfgs, states, drop=True)) or []
            except DivergenceError as exc:
                _locate_non_finite_carry(unit, self.states[unit[0].name], end_row)
                if len(unit) == 1:
                    _tag_head(exc, unit[0].name)
                if dropped is None:
                    raise
                dropped[unit[0].name] = int(end_row)    # one head, its carried rows checked
                continue
            if bad:
                _locate_non_finite_carry(unit, self.states[unit[0].name], end_row)
                assert dropped is not None
                dropped.update({unit[i].name: int(end_row) for i in bad})

    def drain(self) -> None:
        _drain_traces(self.heads, self.states, self.trace_callback)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


def _run_unit_chunk(run_unit, unit, configs, states, chunk, group, dropped=None) -> None:
    """One kernel call of a unit of heads (one head, or one-vs-rest heads sharing their columns)
    on one chunk; ``group``: (feature group, sample-weight group or None) of the chunk.

    The feature columns are not checked for NaN/inf while read (in-memory arrays, and files:
    the driver's ``ChunkReader(unchecked_columns=...)``): a non-finite feature value makes the
    update of its batch non-finite whatever the loss, mode and step (it enters the gradient sum
    sum_i a_i x_ij, a NaN or inf however a_i came out; the projection and the variance cap scale
    by factors, which keep it non-finite), and the kernel stops there.  That divergence becomes
    the input error naming the column and row: the values are looked at only then, so a pass
    pays nothing for the check.  The rows of an incomplete batch that the call leaves in the
    carry are updated with only by the next call (or ``finish``), so they are checked now, while
    their chunk names them (a few hundred values).

    ``dropped`` (the scan's, when it drops diverged heads): the unit's heads named there are
    left out; a head that diverges on finite values is added (with the chunk's end row) instead
    of raising, and the others go on."""
    if dropped is not None:
        live = [i for i, h in enumerate(unit) if h.name not in dropped]
        if not live:
            return
        if len(live) < len(unit):
            unit = [unit[i] for i in live]
            configs = [configs[i] for i in live]
            states = [states[i] for i in live]
    head = unit[0]
    group, weight_group = group
    weights = None if weight_group is None else chunk.features[weight_group][0]
    try:
        columns, labels = chunk.features[group], chunk.labels[head.label]
        bad = (run_unit(configs, states, columns, labels, weights) if dropped is None
               else run_unit(configs, states, columns, labels, weights, drop=True)) or []
    except SampleWeightError as exc:
        # the engine checks the weights (finite, >= 0, within the features' dtype) before any
        # update; here the error gets the column and the row of the source
        if weights is None:
            raise
        raise BadDataError(
            f"sample weight {float(weights[exc.row])!r} in column {head.sample_weight!r} at "
            f"{chunk.origin.describe(exc.row)}: {exc.reason}; fix or drop that row") from None
    except DivergenceError as exc:
        _raise_non_finite(head.features, chunk.features[group], chunk, 0)
        if len(unit) > 1:
            # a unit of several heads (a tuning grid, one-vs-rest heads): every head has made the
            # update of the batch that stopped the scan; name the first whose theta became
            # non-finite (``exc.head``) and all of them (``exc.heads``), so that a grid drops
            # just those, all at once
            bad_heads = [h.name for h, st in zip(unit, states, strict=True)
                         if not (np.all(np.isfinite(st.theta)) and np.all(np.isfinite(st.intercept)))]
            if bad_heads:
                _tag_head(exc, bad_heads[0])
                if getattr(exc, "heads", None) is None:
                    exc.heads = bad_heads
        if dropped is None:
            raise
        dropped[head.name] = int(chunk.end_row)     # one head (its kernel raises), data checked
        return
    if bad:
        # a divergence in drop mode: data first (the same input error), else the heads' steps
        _raise_non_finite(head.features, chunk.features[group], chunk, 0)
        assert dropped is not None
        dropped.update({unit[i].name: int(chunk.end_row) for i in bad})
        if len(bad) == len(unit):
            return
        head = unit[next(i for i in range(len(unit)) if i not in bad)]
        states = [st for i, st in enumerate(states) if i not in bad]
    _check_carried(head, states[0], chunk, chunk.features[group])


def _raise_non_finite(names, columns, chunk, first: int) -> None:
    """The input error naming the first NaN/inf among rows [first, end) of the chunk's feature
    ``columns`` (column by column, as the reader checks them), if there is one."""
    for name, values in zip(names, columns, strict=True):
        bad = np.flatnonzero(~np.isfinite(values[first:]))
        if bad.size:
            i = first + int(bad[0])
            raise non_finite_value_error(values[i], name, chunk.describe(i)) from None


def _check_carried(head, state, chunk, columns) -> None:
    """A NaN/inf among the rows the kernel call carried to the next call: named with its chunk
    (see ``_run_unit_chunk``)."""
    n = state.carry_n
    if n == 0:
        return
    p = len(head.features)              # a weighted head carries its weights as row p
    carried = state.carry_X[:p, :n]
    with np.errstate(invalid="ignore", over="ignore"):
        if math.isfinite(np.add.reduce(carried, axis=None)):
            return
    # the carried rows are the chunk's last ones (and, after a chunk shorter than a batch, rows of
    # earlier chunks, checked when they were carried)
    _raise_non_finite(head.features, columns, chunk, max(0, chunk.n_rows - n))


def _locate_non_finite_carry(unit, state, end_row) -> None:
    """After a divergence of the last partial batch: the input error naming a non-finite value
    in it (the carried rows end the stream at ``end_row``), if there is one."""
    n = state.carry_n
    p = len(unit[0].features)            # a weighted head carries its weights as row p
    for name, values in zip(unit[0].features, state.carry_X[:p, :n], strict=True):
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            i = int(bad[0])
            row = "" if end_row is None else f" (row {int(end_row) - n + i} of the stream)"
            raise BadDataError(
                f"non-finite value {float(values[i])!r} in column {name!r} in the last, partial "
                f"batch{row}. Remove or fix the rows with NaN/inf before training.") from None


# ------------------------------------------------------------------------------ signals
class _SignalGuard:
    """Defer SIGINT/SIGTERM to the end of the current chunk (so every head has seen the same
    rows), then checkpoint and re-deliver.  Only in the main thread (signals go there)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.pending: int | None = None
        self.previous: dict[int, Any] = {}

    def _handler(self, signum, frame):
        if self.pending is not None:  # second signal: the user insists, stop now
            self.restore()
            self._deliver(signum)
        self.pending = signum

    def __enter__(self):
        if self.enabled:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.getsignal(sig)
                signal.signal(sig, self._handler)
        return self

    def restore(self):
        for sig, h in self.previous.items():
            signal.signal(sig, h)
        self.previous = {}

    def __exit__(self, *exc):
        self.restore()

    def _deliver(self, signum):
        prev = self.previous.get(signum, signal.getsignal(signum))
        if callable(prev) and prev not in (signal.default_int_handler,):
            prev(signum, None)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    def deliver_pending(self):
        signum, self.pending = self.pending, None
        if signum is None:
            return
        prev = self.previous.get(signum)
        self.restore()
        if callable(prev) and prev is not signal.default_int_handler:
            prev(signum, None)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)


# ------------------------------------------------------------------------------ traces
def _trace_capacity(cfg: HeadConfig, state: HeadState, rows: int) -> int:
    k = int(cfg.trace_every)
    if k <= 0:
        return 0
    n_updates = (state.carry_n + rows) // int(cfg.batch_size) + 1  # +1: finish()
    return n_updates // k + 2


def _ensure_trace(cfg, state, rows):
    need = _trace_capacity(cfg, state, rows)
    if need and state.trace.shape[0] - state.trace_n < need:
        cap = max(need, 2 * state.trace.shape[0])
        trace = np.zeros((cap, cfg.n_features + 1))
        steps = np.zeros(cap, dtype=np.int64)
        k = state.trace_n
        trace[:k] = state.trace[:k]
        steps[:k] = state.trace_steps[:k]
        state.trace, state.trace_steps = trace, steps


def _drain_traces(heads, states, callback):
    steps, params = {}, {}
    for h in heads:
        st = states[h.name]
        k = st.trace_n
        if k:
            steps[h.name] = st.trace_steps[:k].copy()
            params[h.name] = st.trace[:k].copy()
            st.counters[C_TRACE] = 0
    if steps and callback is not None:
        callback(steps, params)


def _tag_head(exc: BaseException, name: str) -> BaseException:
    """Record on a DivergenceError which head diverged (``exc.head``): the other heads of the scan
    were fine, and a caller training a grid (``sgd.tuning``) drops that one and goes on."""
    if isinstance(exc, DivergenceError) and getattr(exc, "head", None) is None:
        exc.head = name
    return exc


class _HeadPool:
    """Runs the heads' kernels in ``threads`` worker threads, each owning a fixed group of heads
    and working through the chunks in stream order; the kernels release the GIL.

    ``submit(chunk)`` hands a chunk to every worker and returns at once (blocking only when a
    worker is ``LAG`` chunks behind), so the workers are not synchronised chunk by chunk: with 3
    heads on 2 cores each head's thread runs whenever a core is free, instead of the 2 cores
    waiting for the slowest group at every chunk.  ``wait()`` returns when every submitted chunk
    is done (before a checkpoint, a trace drain, the end of the pass).  Each head's state is
    touched only by its worker, in stream order, so the models are bit-identical to sequential
    runs.  A worker that fails stops; ``wait``/``submit`` re-raise the first error in head order
    once every worker is idle, so no kernel is still writing to a state when the caller sees it.
    """

    #: chunks a worker may be behind the reader: bounds the decoded chunks kept alive
    LAG = 2

    def __init__(self, units, states, group_of, run_chunk, threads, dropped=None):
        import queue
        self.run_chunk = run_chunk
        self.dropped = dropped
        self._assign(units, states, group_of, threads)
        self.queues: list[queue.Queue] = [queue.Queue(maxsize=self.LAG) for _ in self.groups]
        self.errors: list[tuple[int, BaseException]] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._work, args=(k, q), daemon=True,
                                         name=f"iwpfast-head-{k}")
                        for k, q in enumerate(self.queues)]
        for t in self.threads:
            t.start()

    def _assign(self, units, states, group_of, threads) -> None:
        """Cut the units into ``threads`` consecutive groups, one per worker."""
        jobs = [(i, unit, [h.config for h in unit], [states[h.name] for h in unit],
                 group_of[unit[0].name]) for i, unit in enumerate(units)]
        # the head a DivergenceError is tagged with (a one-head unit; k-class units are one model)
        self.names = [unit[0].name if len(unit) == 1 else None for unit in units]
        bounds = [round(i * len(jobs) / threads) for i in range(threads + 1)]
        self.groups = [jobs[bounds[i]:bounds[i + 1]] for i in range(threads)]

    def regroup(self, units, states, group_of) -> None:
        """The workers take ``units`` instead (after every submitted chunk is done); workers
        beyond the units' count stop."""
        self.wait()
        threads = min(len(self.threads), len(units))
        for q, t in zip(self.queues[threads:], self.threads[threads:], strict=True):
            q.put(None)
            t.join()
        self.queues, self.threads = self.queues[:threads], self.threads[:threads]
        self._assign(units, states, group_of, threads)

    def _work(self, k, q):
        failed = False
        while True:
            chunk = q.get()
            try:
                if chunk is None:
                    return
                if not failed:
                    for index, unit, cfgs, sts, g in self.groups[k]:
                        try:
                            _run_unit_chunk(self.run_chunk, unit, cfgs, sts, chunk, g,
                                            self.dropped)
                        except BaseException as exc:
                            if self.names[index] is not None:
                                _tag_head(exc, self.names[index])
                            with self.lock:
                                self.errors.append((index, exc))
                            failed = True
                            break
            finally:
                q.task_done()

    def _raise(self):
        if self.errors:
            self.wait(check=False)
            raise min(self.errors, key=lambda e: e[0])[1]

    def submit(self, chunk):
        self._raise()
        for q in self.queues:
            q.put(chunk)

    def wait(self, check=True):
        for q in self.queues:
            q.join()
        if check:
            self._raise()

    def close(self):
        """Finish the submitted chunks and stop the workers (idempotent)."""
        for q, t in zip(self.queues, self.threads, strict=True):
            if t.is_alive():
                q.put(None)
        for t in self.threads:
            t.join()
