"""Chunked training reader: fixed-size chunks of feature-major NumPy buffers, decoded ahead.

``ChunkReader(source, feature_groups, label_columns, chunk_rows)`` reads the union of the columns
the heads need and yields ``Chunk`` objects of exactly ``chunk_rows`` rows (the last one may be
shorter).  For each feature group (one per head, or shared) a chunk holds a tuple of p 1-D arrays
of one dtype (float32 when every column of the group is float32, else float64) -- never a
(rows, p) matrix, which measured 3.3x slower to build per batch.

Zero-copy: when a chunk lies inside one Arrow record batch and a column is a clean numeric array
(no nulls, the group's dtype) the buffer is a read-only view of Arrow memory (for memory-mapped IPC
files: of the page cache).  Otherwise exactly one copy is made into a new buffer, and counted in
``ReaderStats`` (``copied_chunks``, ``copied_bytes``).  The reader asks the source for batches of
batches of one chunk when every row group / record batch / file boundary is a chunk
boundary (the usual case: default chunk sizes are powers of two, pyarrow's row groups are 2^20
rows), so every chunk is a view; otherwise batches of 4 chunks, and a chunk is copied only when it
straddles a Parquet row group / IPC record batch / file boundary.

One background thread reads, decodes, validates and assembles the next chunk while the caller
(the SGD kernel, which releases the GIL) works on the current one: prefetch depth 1, a bounded
queue, so at most three chunks are alive.  Exceptions in the thread are re-raised in the caller;
closing the iterator (end of loop, exception, KeyboardInterrupt) stops and joins the thread.

Validation, in the thread: a null or a non-finite value (NaN, +-inf) in a feature or label column
raises ``InvalidInputError`` naming the file, row group, column and row.  ``unchecked_columns``
are not checked for NaN/inf (nulls still are): the training driver passes its feature columns,
where a non-finite value makes the kernel's update non-finite and the scan then names the column
and row with the same error (``iwpfast.sgd.scan``), so a pass does not sum every column for it.
"""
from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ..exceptions import BadDataError, InvalidInputError
from .chunks import Chunk, ReaderStats, non_finite_value_error
from .handoff import join_draining, put_unless_stopped
from .source_base import BatchOrigin, Source
from .sources import open_source

#: default target size of one chunk in bytes (all needed columns); see default_chunk_rows
CHUNK_TARGET_BYTES = 16 << 20
MAX_DEFAULT_CHUNK_ROWS = 1 << 18
MIN_DEFAULT_CHUNK_ROWS = 1 << 13
#: the source is read in batches of this many chunks
SOURCE_BATCH_CHUNKS = 4
#: with storage groups aligned to chunks, batches hold at least this many rows (whole chunks)
MIN_SOURCE_BATCH_ROWS = 1 << 17


def default_chunk_rows(row_bytes: int) -> int:
    """Rows per chunk: about 16 MiB of needed columns, between 8192 and 262144 rows.

    Large enough that the per-chunk Python work (queue hand-off, one kernel call per head) is
    negligible at 150 M rows/s (~600 chunks/s), small enough that three chunks in flight stay far
    below the 1 GiB memory goal at any p."""
    rows = CHUNK_TARGET_BYTES // max(1, int(row_bytes))
    # a power of two divides pyarrow's default Parquet row group (1 Mi rows): chunks stay views
    rows = 1 << max(0, int(rows).bit_length() - 1)
    return int(min(MAX_DEFAULT_CHUNK_ROWS, max(MIN_DEFAULT_CHUNK_ROWS, rows)))


def numeric_kind(arrow_type: pa.DataType) -> str | None:
    """"bool", "int", "float" or "decimal" for the Arrow types read as numbers; None for others."""
    if pa.types.is_boolean(arrow_type):
        return "bool"
    if pa.types.is_integer(arrow_type):
        return "int"
    if pa.types.is_floating(arrow_type):
        return "float"
    if pa.types.is_decimal(arrow_type):
        return "decimal"
    return None


@dataclass
class _Plan:
    """Which columns are read, and each column's NumPy dtype in the chunk."""

    columns: list[str]
    dtypes: dict[str, np.dtype]
    groups: list[list[str]]
    labels: list[str]
    group_dtypes: list[np.dtype] = field(default_factory=list)


def _plan(schema: pa.Schema, feature_groups, label_columns, where) -> _Plan:
    columns: list[str] = []
    for name in [c for g in feature_groups for c in g] + list(label_columns):
        if name not in columns:
            columns.append(name)
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise InvalidInputError(
            f"{where}: column(s) {missing} not found; the columns found are {list(schema.names)}. "
            f"Pass feature/label names that exist in the data.")
    dtypes: dict[str, np.dtype] = {}
    for c in columns:
        t = schema.field(c).type
        if numeric_kind(t) is None:
            raise InvalidInputError(
                f"{where}: column {c!r} has type {t}; features and labels must be numeric. "
                f"Encode it as numbers (e.g. labels as -1/+1) before training.")
    group_dtypes = []
    for g in feature_groups:
        all32 = all(schema.field(c).type == pa.float32() for c in g)
        group_dtypes.append(np.dtype(np.float32 if all32 else np.float64))
    for c in columns:
        t = schema.field(c).type
        if c in label_columns and c not in {x for g in feature_groups for x in g}:
            # labels keep their own numeric type when NumPy can view it (int8 labels stay int8)
            dtypes[c] = (np.dtype(t.to_pandas_dtype()) if (pa.types.is_integer(t)
                         or pa.types.is_floating(t)) and t != pa.float16() else np.dtype(np.float64))
        else:
            dtypes[c] = np.dtype(np.float32 if t == pa.float32() else np.float64)
    return _Plan(columns, dtypes, [list(g) for g in feature_groups], list(label_columns),
                 group_dtypes)


def _locate_bad(arr: pa.Array, values: np.ndarray | None) -> int:
    if arr.null_count:
        return int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
    assert values is not None                   # no null: the values hold the non-finite one
    return int(np.flatnonzero(~np.isfinite(values))[0])


def _validate(origin: BatchOrigin, name: str, arr: pa.Array, values: np.ndarray | None):
    """Raise InvalidInputError at the first null or non-finite value of one column of a batch."""
    if arr.null_count:
        i = _locate_bad(arr, None)
        raise BadDataError(
            f"null value in column {name!r} at {origin.describe(i)}. Training needs complete rows: "
            f"drop or impute missing values before the release (nulls cannot be debiased).")
    if values is None or values.dtype.kind != "f":
        return
    # One vectorized sum: a single pass, no temporary array; NaN and +-inf propagate into it.  A
    # sum of finite values that overflows falls back to the exact test.  Not np.dot(x, x),
    # although 1.5x cheaper for float32: OpenBLAS runs float64 dot products in worker threads
    # that then spin, which doubled the CPU time of a CSV pass and steals the kernel's core.
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.add.reduce(values)
    if np.isfinite(total) or np.isfinite(values).all():
        return
    i = _locate_bad(arr, values)
    raise non_finite_value_error(values[i], name, origin.describe(i))


def _column_view(arr: pa.Array, dtype: np.dtype) -> tuple[np.ndarray, bool]:
    """(NumPy array of ``dtype``, zero_copy?) for a null-free column."""
    t = arr.type
    if (pa.types.is_integer(t) or pa.types.is_floating(t)) and t != pa.float16():
        view = arr.to_numpy(zero_copy_only=True)
        if view.dtype == dtype:
            return view, True
        return view.astype(dtype), False
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=dtype), False


class ChunkReader:
    """Iterate over ``Chunk`` objects of ``chunk_rows`` rows from ``source`` (see module doc).

    source: anything ``open_source`` accepts, or a Source.  feature_groups: list of lists of column
    names.  label_columns: label/target column names.  start_row: first global row (resume).
    prefetch: decode in a background thread (False: in the caller, for debugging).
    unchecked_columns: columns not checked for NaN/inf while read (nulls are): their consumer
    finds a non-finite value itself (see the module doc).
    """

    def __init__(self, source, feature_groups: Sequence[Sequence[str]],
                 label_columns: Sequence[str] = (), chunk_rows: int | None = None, *,
                 start_row: int = 0, prefetch: bool = True,
                 unchecked_columns: Collection[str] = ()):
        self.source: Source = source if isinstance(source, Source) else open_source(source)
        self.plan = _plan(self.source.full_schema, feature_groups, list(label_columns),
                          self.source.description)
        if chunk_rows is None:
            chunk_rows = default_chunk_rows(sum(d.itemsize for d in self.plan.dtypes.values()))
            from .arrays import COPY_CHUNK_ROWS, ArraySource
            if isinstance(self.source, ArraySource) and self.source.copies:
                # arrays copied chunk by chunk (row-major X): small chunks, so the three alive
                # (prefetch) hold less than one default chunk and stay in cache for the kernel
                chunk_rows = min(chunk_rows, COPY_CHUNK_ROWS)
        if int(chunk_rows) < 1:
            raise InvalidInputError(f"chunk_rows={chunk_rows} must be a positive number of rows")
        self.chunk_rows = int(chunk_rows)
        self.start_row = int(start_row)
        self.prefetch = prefetch
        unchecked = set(unchecked_columns)
        self._checked = [c not in unchecked for c in self.plan.columns]
        self.stats = ReaderStats()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._queue: queue.Queue | None = None

    def source_batch_rows(self) -> int:
        """Rows per batch asked of the source: one chunk (for small chunks, as many whole chunks
        as make MIN_SOURCE_BATCH_ROWS) when every storage-group boundary after ``start_row`` is a
        chunk boundary (all chunks are then views), else 4 chunks (a chunk straddling a boundary
        is copied, the others stay views).

        Why not always 4 chunks: a 4-chunk batch keeps up to ~2 batches (8 chunks) of decoded
        memory alive and hands the consumer 4 chunks in a burst after one long decode; one-chunk
        batches keep the allocator recycling the same few buffers (4x fewer page faults measured)
        and overlap decode with the kernel chunk by chunk."""
        ends = self.source.group_ends()
        if ends is not None and self.start_row % self.chunk_rows == 0:
            inner = [e for e in ends[:-1] if e > self.start_row]
            if all((e - self.start_row) % self.chunk_rows == 0 for e in inner):
                # small chunks (wide rows): several per batch, so the per-batch, per-column work
                # (pyarrow's batch assembly, the conversion and validation calls) is paid for at
                # least MIN_SOURCE_BATCH_ROWS rows; batches restart at every storage group, so
                # the chunks stay views
                return self.chunk_rows * max(1, MIN_SOURCE_BATCH_ROWS // self.chunk_rows)
        return SOURCE_BATCH_CHUNKS * self.chunk_rows

    # ---------------------------------------------------------------- producing (thread side)
    def _convert(self, origin: BatchOrigin, batch: pa.RecordBatch) -> tuple[dict, dict]:
        """Validated NumPy views of one batch's columns: ({name: array}, {name: zero_copy})."""
        out: dict[str, np.ndarray] = {}
        zc: dict[str, bool] = {}
        dtypes = self.plan.dtypes
        with np.errstate(over="ignore", invalid="ignore"):  # once per batch, not per column
            self._convert_columns(origin, batch, dtypes, out, zc)
        return out, zc

    def _convert_columns(self, origin, batch, dtypes, out, zc):
        for i, (name, checked) in enumerate(zip(self.plan.columns, self._checked, strict=True)):
            arr = batch.column(i)
            if arr.null_count:
                _validate(origin, name, arr, None)
            values, is_view = _column_view(arr, dtypes[name])
            # fast path inlined (this runs for every column of every batch: ~10 us of Python per
            # call mattered at p = 100): one sum, NaN/inf propagate into it (see _validate, which
            # finds the row, or clears an overflowing sum of finite values)
            if checked and values.dtype.kind == "f" and not math.isfinite(np.add.reduce(values)):
                _validate(origin, name, arr, values)
            out[name] = values
            zc[name] = is_view

    def _assemble(self, pieces: list, n: int) -> Chunk:
        """Build one chunk of n rows from pieces [(origin, {name: array}, {name: zero_copy})]."""
        origin = pieces[0][0]
        cols: dict[str, np.ndarray] = {}
        later_origins: list[tuple[int, BatchOrigin]] = []
        copied = False
        if pieces[0][1][self.plan.columns[0]].shape[0] >= n:
            for name in self.plan.columns:
                cols[name] = pieces[0][1][name][:n]
                if pieces[0][2][name]:
                    self.stats.zero_copy_columns += 1
                else:
                    self.stats.copied_columns += 1
                    self.stats.copied_bytes += cols[name].nbytes
                    copied = True
        else:
            for name in self.plan.columns:
                buf = np.empty(n, dtype=self.plan.dtypes[name])
                pos = 0
                for _, arrays, _ in pieces:
                    a = arrays[name]
                    k = min(a.shape[0], n - pos)
                    buf[pos:pos + k] = a[:k]
                    pos += k
                    if pos == n:
                        break
                cols[name] = buf
                self.stats.copied_columns += 1
                self.stats.copied_bytes += buf.nbytes
            pos = 0
            for piece_origin, arrays, _ in pieces:
                if pos:
                    later_origins.append((pos, piece_origin))
                pos += next(iter(arrays.values())).shape[0]
                if pos >= n:
                    break
            copied = True
        if copied:
            self.stats.copied_chunks += 1
        features = []
        for g, dtype in zip(self.plan.groups, self.plan.group_dtypes, strict=True):
            arrays = []
            for name in g:
                a = cols[name]
                if a.dtype != dtype:  # float32 column in a group that also has float64 ones
                    a = a.astype(dtype)
                    self.stats.copied_columns += 1
                    self.stats.copied_bytes += a.nbytes
                arrays.append(a)
            features.append(tuple(arrays))
        labels = {name: cols[name] for name in self.plan.labels}
        return Chunk(features, labels, origin, n, tuple(later_origins))

    def _chunks(self) -> Iterator[Chunk]:
        from .arrays import ArraySource
        if isinstance(self.source, ArraySource):   # in-memory arrays: views, no Arrow batches
            for chunk in self.source.chunks(self.plan, self.start_row, self.chunk_rows, self.stats):
                yield chunk
                if self._stop.is_set():
                    return
            return
        pending: list = []   # pieces not yet handed out: (origin, arrays, zero_copy)
        have = 0
        batches = self.source.located_batches(self.plan.columns, start_row=self.start_row,
                                              batch_rows=self.source_batch_rows())
        try:
            for origin, batch in batches:
                if batch.num_rows == 0:
                    continue
                arrays, zc = self._convert(origin, batch)
                pending.append((origin, arrays, zc))
                have += batch.num_rows
                while have >= self.chunk_rows:
                    chunk = self._assemble(pending, self.chunk_rows)
                    yield chunk
                    pending = self._consume(pending, self.chunk_rows)
                    have -= self.chunk_rows
                if self._stop.is_set():
                    return
            if have:
                yield self._assemble(pending, have)
        finally:
            # now, not when the generator is collected: an error raised here keeps this frame
            # (and the source's generator, with its decoding threads) alive in its traceback
            close = getattr(batches, "close", None)
            if close is not None:
                close()

    @staticmethod
    def _consume(pending, n):
        """Drop the first n rows of the pending pieces (views, no copy)."""
        out = []
        for origin, arrays, zc in pending:
            k = next(iter(arrays.values())).shape[0]
            if n >= k:
                n -= k
                continue
            if n:
                origin = BatchOrigin(origin.file_index, origin.file, origin.row_group,
                                     origin.group_row + n, origin.global_row + n)
                arrays = {c: a[n:] for c, a in arrays.items()}
                n = 0
            out.append((origin, arrays, zc))
        return out

    def _produce(self):
        q = self._queue
        assert q is not None                            # started by __iter__ with its queue
        item: tuple[str, BaseException | None]
        try:
            for chunk in self._chunks():
                if not put_unless_stopped(q, ("chunk", chunk), self._stop):
                    return
            item = ("done", None)
        except BaseException as exc:  # re-raised in the caller's thread
            item = ("error", exc)
        put_unless_stopped(q, item, self._stop)

    # ---------------------------------------------------------------- consuming (caller side)
    def __iter__(self) -> Iterator[Chunk]:
        if not self.prefetch:
            for chunk in self._chunks():
                self.stats.chunks += 1
                self.stats.rows += chunk.n_rows
                yield chunk
            return
        if self._thread is not None:
            raise InvalidInputError("a ChunkReader can be iterated once; create a new one")
        self._queue = queue.Queue(maxsize=1)
        self._thread = threading.Thread(target=self._produce, name="iwpfast-reader", daemon=True)
        self._thread.start()
        try:
            while True:
                t0 = time.perf_counter()
                kind, payload = self._queue.get()
                self.stats.wait_s += time.perf_counter() - t0
                if kind == "done":
                    return
                if kind == "error":
                    raise payload
                self.stats.chunks += 1
                self.stats.rows += payload.n_rows
                yield payload
        finally:
            self.close()

    def close(self) -> None:
        """Stop the decoding thread and wait for it (idempotent)."""
        self._stop.set()
        join_draining(self._thread, self._queue)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
