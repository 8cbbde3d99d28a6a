"""Sources: every input the library accepts, seen as one ordered stream of Arrow record batches.

``open_source(source, columns=None, *, record_batch_rows=...)`` accepts

- a path to a Parquet (``.parquet``, ``.pq``), Arrow IPC / Feather (``.arrow``, ``.feather``,
  ``.ipc``, file or stream format) or CSV (``.csv``, ``.csv.gz``...) file,
- a directory or a glob of such files (read in sorted name order),
- a ``pyarrow.dataset.Dataset``, a ``pyarrow.RecordBatchReader``, a ``pyarrow.Table``,
- a pandas or polars DataFrame (those libraries are imported only when such an object is given),
- NumPy arrays: a dict ``{name: 1-D array}`` or a tuple ``(X, y)`` with X of shape (n, p), whose
  columns are named ``x0 .. x{p-1}`` and ``y``,

and returns a ``Source`` with ``schema``, ``release_metadata``, ``num_rows`` and ``batches()``.

Memory stays bounded whatever the input size: Parquet is read one file at a time with
``ParquetFile(path, pre_buffer=False).iter_batches(...)`` (pyarrow's default ``pre_buffer=True``
held a whole 4.4 GB file in memory and ``Dataset.to_batches`` grew memory by 4 GiB,
apache/arrow#39808) with buffered reads, and Arrow IPC files batch by batch, so resident memory
stays at a chunk (``IWPFAST_MEMORY_MAP=1``, the CLI's ``--memory-map``, reads local files
through a memory map instead: less CPU, but the mapped pages count in VmRSS up to the file's
size; ``iwpfast.settings``); CSV is parsed block by block.

Every batch can be located (``Source.located_batches``): file index and path, Parquet row group
(or IPC record batch), row offset inside it and global row.  The training reader uses that to name
the exact place of bad values and to seek when a run resumes.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ..deprecation import renamed_keyword
from ..exceptions import InvalidInputError, MissingInputError, ReleaseSpecError
from .filesystem import Location, map_ahead, map_bounded, resolve
from .format_readers import _file_format, _is_known
from .formats import CSV_SUFFIXES, IPC_SUFFIXES, PARQUET_SUFFIXES, has_data_suffix, open_reader
from .formats import RELEASE_METADATA_KEY_BYTES as RELEASE_METADATA_KEY
from .source_base import (
    DEFAULT_BATCH_ROWS,
    BatchOrigin,
    Source,
    _check_columns,
    _skip,
    parse_release_metadata,
)

__all__ = ["open_source", "Source", "BatchOrigin", "RELEASE_METADATA_KEY", "PARQUET_SUFFIXES",
           "IPC_SUFFIXES", "CSV_SUFFIXES", "DEFAULT_BATCH_ROWS", "parse_release_metadata"]


class TableSource(Source):
    """A ``pyarrow.Table`` (also what DataFrames and NumPy arrays become); zero-copy slices."""

    cheap_decode = True

    def __init__(self, table: pa.Table, columns, batch_rows, description="<pyarrow.Table>"):
        self.description = description
        self.table = table
        super().__init__(table.schema, columns, batch_rows, table.num_rows)

    def group_ends(self) -> list[int] | None:
        ends, row = [], 0
        for batch in self.table.to_batches():
            row += batch.num_rows
            if batch.num_rows:
                ends.append(row)
        return ends

    def _located(self, columns, start_row, batch_rows):
        table = self.table.select(columns).slice(start_row)
        row = start_row
        # batches of exactly batch_rows rows whatever the table's chunks (a frame converted by
        # pandas/polars, a list of small batches): the release of a table is the release of the
        # same rows from a file
        for batch in rebatched(table.to_batches(max_chunksize=batch_rows), batch_rows):
            yield BatchOrigin(0, self.description, -1, row, row), batch
            row += batch.num_rows


class HeldSource(Source):
    """The ``columns`` of another source read once and kept in memory, each batch with its
    origin, replayed in order: several passes (cross-validation's folds, ``iwpfast.sgd.crossval``)
    read the data once, and an error still names the file, row group and row of the value."""

    cheap_decode = True

    def __init__(self, inner: Source, columns: Sequence[str]):
        self.description = inner.description
        self.held = list(inner.located_batches(columns))
        schema = pa.schema([inner.full_schema.field(c) for c in columns],
                           metadata=inner.full_schema.metadata)
        super().__init__(schema, None, inner.batch_rows,
                         sum(b.num_rows for _, b in self.held),
                         release_metadata=inner.release_metadata)

    def group_ends(self) -> list[int]:
        return [o.global_row + b.num_rows for o, b in self.held if b.num_rows]

    def _located(self, columns, start_row, batch_rows):
        idx = [self.full_schema.get_field_index(c) for c in columns]
        return _skip(self._gen(idx, batch_rows), start_row)

    def _gen(self, idx, batch_rows):
        for origin, batch in self.held:
            batch = batch.select(idx) if idx != list(range(batch.num_columns)) else batch
            for cut in range(0, batch.num_rows, batch_rows):
                yield BatchOrigin(origin.file_index, origin.file, origin.row_group,
                                  origin.group_row + cut, origin.global_row + cut), \
                    batch.slice(cut, batch_rows)


class ReaderSource(Source):
    """A stream of record batches read once, row count unknown: a ``pyarrow.RecordBatchReader``,
    anything exporting the Arrow PyCapsule stream (``__arrow_c_stream__``: DuckDB relations,
    polars ``collect_batches()``, pandas >= 2.2...) or an iterable of RecordBatches / Tables.

    Batches are re-cut to exactly ``batch_rows`` rows (the last one shorter; small batches are
    concatenated, one copy): the stream's own batch sizes (DuckDB's vectors, polars' morsels)
    then change nothing, and a seeded release of a stream is the release of the same rows read
    from a Parquet file (same seed, same ``record_batch_rows``)."""

    rereadable = False

    def __init__(self, reader, columns, batch_rows, description="<pyarrow.RecordBatchReader>",
                 schema: pa.Schema | None = None, read_ahead: bool = True):
        self.description = description
        self.reader = reader
        #: read the stream in a thread of its own (``STREAM_READ_AHEAD``); False for producers
        #: that already run in threads of their own (DuckDB, polars' streaming engine)
        self.read_ahead = read_ahead
        self._used = False
        super().__init__(reader.schema if schema is None else schema, columns, batch_rows, None)

    def _located(self, columns, start_row, batch_rows):
        if self._used:
            raise InvalidInputError(
                f"{self.description} was already read: a stream can be read only once. "
                f"Pass a file path, a Table or a Dataset to read the data again (resume, epochs>1).")
        self._used = True
        return _skip(self._gen(columns, batch_rows), start_row)

    def _gen(self, columns, batch_rows):
        idx = [self.full_schema.get_field_index(c) for c in columns]
        row = 0
        batches = rebatched(self.reader, batch_rows)
        if self.read_ahead and STREAM_READ_AHEAD > 0:
            batches = read_ahead(batches, STREAM_READ_AHEAD)
        for batch in batches:
            batch = batch.select(idx) if idx != list(range(batch.num_columns)) else batch
            yield BatchOrigin(0, self.description, -1, row, row), batch
            row += batch.num_rows


#: record batches of a stream source read ahead by a thread of their own while the caller works
#: on the one before (the producer -- DuckDB, polars, a generator decoding files -- then runs
#: while the release noises); 0 reads them in the caller's thread
STREAM_READ_AHEAD = 2


def read_ahead(items, depth: int):
    """The items of the iterator ``items``, produced by a thread of their own at most ``depth``
    items ahead of the caller; its errors are raised in the caller, in order; closing the
    generator stops the thread (``iwpfast.io.handoff``)."""
    import queue
    import threading

    from .handoff import join_draining, put_unless_stopped

    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce():
        try:
            for item in items:
                if not put_unless_stopped(q, ("item", item), stop):
                    return
            put_unless_stopped(q, ("done", None), stop)
        except BaseException as exc:       # re-raised in the caller's thread
            put_unless_stopped(q, ("error", exc), stop)

    thread = threading.Thread(target=produce, name="iwpfast-stream", daemon=True)
    thread.start()
    try:
        while True:
            kind, payload = q.get()
            if kind == "done":
                return
            if kind == "error":
                raise payload
            yield payload
    finally:
        stop.set()
        join_draining(thread, q)


def rebatched(batches, batch_rows: int):
    """Record batches of exactly ``batch_rows`` rows (the last one shorter) from ``batches`` of
    any sizes: larger ones are sliced (views), smaller ones gathered and concatenated (a copy)."""
    held: list = []
    have = 0
    for batch in batches:
        while batch.num_rows:
            if not held and batch.num_rows >= batch_rows:
                yield batch.slice(0, batch_rows)
                batch = batch.slice(batch_rows)
                continue
            take = min(batch.num_rows, batch_rows - have)
            held.append(batch.slice(0, take))
            have += take
            batch = batch.slice(take)
            if have == batch_rows:
                yield _concatenated(held)
                held, have = [], 0
    if have:
        yield _concatenated(held)


def _concatenated(batches: list) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


class _IterableBatches:
    """An iterable of RecordBatches or Tables as a reader: the schema is the first item's (read
    ahead when the source is opened); a later item with another schema is an error naming it."""

    def __init__(self, items, description: str):
        self.description = description
        self._items = iter(items)
        self._index = 0
        self._first = self._next_item()
        if self._first is None:
            raise InvalidInputError(
                f"{description} yielded no RecordBatch or Table: nothing to read (an empty "
                f"iterable has no schema; pass a RecordBatchReader with its schema instead)")
        self.schema = self._first.schema

    def _next_item(self):
        try:
            item = next(self._items)
        except StopIteration:
            return None
        if not isinstance(item, (pa.RecordBatch, pa.Table)):
            raise InvalidInputError(
                f"{self.description}: item {self._index} is a {type(item).__module__}."
                f"{type(item).__name__}; an iterable source yields pyarrow RecordBatches or "
                f"Tables (convert DataFrames with pa.Table.from_pandas / .to_arrow())")
        if self._index and not item.schema.equals(self.schema, check_metadata=False):
            raise InvalidInputError(
                f"{self.description}: item {self._index} has the schema {_schema_text(item.schema)} "
                f"but item 0 has {_schema_text(self.schema)}; every item of a stream must have the "
                f"same columns and types (cast them before yielding)")
        self._index += 1
        return item

    def __iter__(self):
        item, self._first = self._first, None
        while item is not None:
            yield from (item.to_batches() if isinstance(item, pa.Table) else [item])
            item = self._next_item()


def _schema_text(schema: pa.Schema) -> str:
    return "(" + ", ".join(f"{f.name}: {f.type}" for f in schema) + ")"


def _stream_reader(source) -> tuple[object, str] | None:
    """(reader, description) for streaming inputs that are not pyarrow objects: a polars
    LazyFrame (executed by polars' streaming engine, never collected), a DuckDB relation, any
    object exporting ``__arrow_c_stream__``, or an iterator/iterable of RecordBatches/Tables.
    None for anything else."""
    kind = f"{type(source).__module__}.{type(source).__name__}"
    mod = type(source).__module__ or ""
    if mod.startswith("polars") and hasattr(source, "collect_batches"):
        return _from_capsule(source.collect_batches(), kind), NATIVE + "<polars.LazyFrame>"
    if mod.startswith("duckdb") and hasattr(source, "to_arrow_reader"):
        return source.to_arrow_reader(DEFAULT_BATCH_ROWS), NATIVE + "<duckdb relation>"
    if hasattr(source, "__arrow_c_stream__"):
        return _from_capsule(source, kind), f"<{kind} (Arrow stream)>"
    if isinstance(source, (str, bytes, dict)) or not hasattr(source, "__iter__"):
        return None
    if hasattr(source, "__next__") or isinstance(source, (list, tuple)):
        return _IterableBatches(source, f"<iterable of {type(source).__name__}>"), \
            f"<{type(source).__name__} of record batches>"
    return None


#: the description prefix _stream_reader gives the streams whose producer has its own threads
NATIVE = "native:"


def _from_capsule(obj, kind: str):
    from_stream = getattr(pa.RecordBatchReader, "from_stream", None)
    if from_stream is None:  # pragma: no cover - pyarrow < 14
        raise InvalidInputError(f"reading a {kind} through the Arrow PyCapsule stream needs "
                                f"pyarrow >= 14; upgrade pyarrow")
    return from_stream(obj)


class ScannerSource(Source):
    """A generic ``pyarrow.dataset.Dataset`` (not file-backed by a format we read ourselves)."""

    def __init__(self, dataset, columns, batch_rows, description="<pyarrow.dataset.Dataset>"):
        self.description = description
        self.dataset = dataset
        super().__init__(dataset.schema, columns, batch_rows, None)

    def _located(self, columns, start_row, batch_rows):
        return _skip(self._gen(columns, batch_rows), start_row)

    def _gen(self, columns, batch_rows):
        # readahead 0: memory stays at one batch (the scanner's default prefetches whole fragments)
        batches = self.dataset.to_batches(columns=list(columns), batch_size=batch_rows,
                                          batch_readahead=0, fragment_readahead=0,
                                          use_threads=False)
        row = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            yield BatchOrigin(0, self.description, -1, row, row), batch
            row += batch.num_rows


class FileSource(Source):
    """One or more files of the same format, read one after the other in the given order.

    ``paths``: OS paths, or ``Location`` objects (files on any pyarrow filesystem).  The files of
    a multi-part release (see ``iwpfast.io.parts``) read as one release: their metadata must agree
    but for the part fields, and the source's metadata is the release's, with the summed row
    count."""

    def __init__(self, paths: list, columns, batch_rows, description=None):
        if not paths:
            raise InvalidInputError(f"{description}: no data files found")
        locations = [p if isinstance(p, Location) else Location(None, os.fspath(p), os.fspath(p))
                     for p in paths]
        formats = {_file_format(loc.path) for loc in locations}
        if len(formats) > 1:
            raise InvalidInputError(
                f"{description}: mixes file formats {sorted(formats)}; put one format per directory")
        self.format = formats.pop()
        self.locations = locations
        self.remote = any(not loc.local for loc in locations)
        self.cheap_decode = self.format == "ipc" and not self.remote
        self.paths = [loc.display for loc in locations]
        self.description = description or (self.paths[0] if len(paths) == 1 else
                                           f"{len(paths)} {self.format} files from {self.paths[0]!r}")
        batch_rows = int(batch_rows)
        from .parts import ManifestParts, combine_part_metadata
        if isinstance(paths, ManifestParts) and len(paths) > 1:
            # a published release: its manifest holds every part's rows and the release's
            # metadata, so one footer is read now and each other part's when it is read
            self._open_lazily(paths, columns, batch_rows)
            return
        # the footers (one request each on an object store) read concurrently
        self.files: list | _LazyFiles = map_bounded(lambda loc: self._open(loc, batch_rows),
                                                    locations)
        first = self.files[0]
        schema = first.schema
        metas = [parse_release_metadata(f.schema, f.path) for f in self.files]
        combined = combine_part_metadata(metas, self.paths, [f.num_rows for f in self.files])
        release = metas[0]
        if combined is not None and metas[0] is not None:
            release = combined
            schema = schema.with_metadata({**(schema.metadata or {}), RELEASE_METADATA_KEY:
                                           json.dumps(combined, sort_keys=True).encode()})
        cols = _check_columns(schema, columns, self.paths[0])
        for f in self.files[1:]:
            _check_like_first(f, cols, schema, self.paths[0])
        counts = [f.num_rows for f in self.files]
        num_rows = None if any(c is None for c in counts) else int(sum(counts))
        self.file_rows = counts
        super().__init__(schema, cols, batch_rows, num_rows, release_metadata=release)

    def _open_lazily(self, parts, columns, batch_rows: int) -> None:
        from .parts import PART_KEY, combine_part_metadata
        first = self._open(self.locations[0], batch_rows)
        meta0 = parse_release_metadata(first.schema, first.path)
        if (meta0 is None or (meta0.get(PART_KEY) or {}).get("release_id") != parts.release_id
                or first.num_rows != parts.rows[0]):
            raise ReleaseSpecError(
                f"{self.paths[0]!r} is not part 0 of the release its manifest describes (another "
                f"release, or other rows); release the data again")
        release = dict(parts.release, row_count=int(sum(parts.rows)))
        schema = first.schema.with_metadata({**(first.schema.metadata or {}), RELEASE_METADATA_KEY:
                                             json.dumps(release, sort_keys=True).encode()})
        cols = _check_columns(schema, columns, self.paths[0])

        def check(i, f):
            """Part i, opened when it is read: of the same release, its rows as listed."""
            meta = parse_release_metadata(f.schema, f.path)
            combine_part_metadata([meta0, meta], [self.paths[0], f.path],
                                  [first.num_rows, f.num_rows])
            if f.num_rows != parts.rows[i]:
                raise ReleaseSpecError(f"{f.path!r} holds {f.num_rows} rows but the manifest "
                                       f"lists {parts.rows[i]}; the part was changed: release the "
                                       f"data again")
            _check_like_first(f, cols, schema, self.paths[0])

        self.files = _LazyFiles(self.locations,
                                lambda loc, whole: self._open(loc, batch_rows, whole), first, check)
        self.file_rows = list(parts.rows)
        super().__init__(schema, cols, batch_rows, int(sum(parts.rows)), release_metadata=release)

    def group_ends(self) -> list[int] | None:
        if self.remote and isinstance(self.files, _LazyFiles):
            # the parts of a published release on a store are opened when read (ahead, several
            # at a time): opening every footer here, one after the other, cost a round trip per
            # part before the first row (2 s for 200 parts on a local moto server)
            return None
        if any(f.group_rows is None for f in self.files):
            return None
        ends, row = [], 0
        for f in self.files:
            for n in f.group_rows:
                row += n
                if n:
                    ends.append(row)
        return ends

    def _open(self, loc, batch_rows, whole: bool = False):
        # every file has the source's format (checked once, in __init__)
        return open_reader(self.format, loc, batch_rows, whole=whole)

    def _located(self, columns, start_row, batch_rows):
        if any(c is None for c in self.file_rows):
            # unknown file lengths (CSV, IPC stream): read and drop the rows before start_row
            return _skip(self._gen(columns, 0, batch_rows), start_row)
        return self._gen(columns, start_row, batch_rows)

    def _gen(self, columns, start_row, batch_rows):
        if (self.remote and REMOTE_PREFETCH_PARTS > 0 and len(self.locations) > 1
                and all(n is not None for n in self.file_rows)):
            yield from self._gen_ahead(columns, start_row, batch_rows)
            return
        row = 0
        for i in range(len(self.files)):
            n = self.file_rows[i]
            if n is not None and row + n <= start_row:
                row += n
                continue
            f = self.files[i]            # (a part of a published release is opened here)
            start_in_file = max(0, start_row - row)
            last = row
            for origin, batch in f.located(i, columns, batch_rows, row, start_in_file):
                yield origin, batch
                last = origin.global_row + batch.num_rows
            row = last if n is None else row + n


    def _gen_ahead(self, columns, start_row, batch_rows):
        """``_gen`` for files on an object store: up to REMOTE_PREFETCH_PARTS files are opened
        (footer, checks) and, when small, read whole and decoded by a pool of threads while the
        caller consumes the file before them.  Each request to a store waits a round trip, which
        a file read after the other pays in full (23 ms per part of 1,000 rows on a local moto
        server).  The batches are those of ``_gen``, in the same order; memory stays at
        REMOTE_PREFETCH_PARTS files of at most REMOTE_PREFETCH_BYTES each (a larger file is only
        opened ahead, then read in its windows of row groups as before)."""
        from contextlib import closing

        todo, row = [], 0
        for i, n in enumerate(self.file_rows):
            if row + n > start_row:
                todo.append((i, row, max(0, start_row - row)))
            row += n

        def load(item):
            i, first_row, start_in_file = item
            # opened (a published part: checked) in this thread; a part opened for this read
            # is fetched whole at once when small
            files = self.files
            f = files.get(i, whole=True) if isinstance(files, _LazyFiles) else files[i]
            whole = getattr(f, "read_whole", None)
            if whole is not None and f.nbytes <= REMOTE_PREFETCH_BYTES:
                return whole(i, columns, batch_rows, first_row, start_in_file)
            return f

        with closing(map_ahead(load, todo, REMOTE_PREFETCH_PARTS)) as ahead:
            for (i, first_row, start_in_file), loaded in zip(todo, ahead, strict=True):
                if isinstance(loaded, list):
                    while loaded:
                        yield loaded.pop(0)
                else:
                    yield from loaded.located(i, columns, batch_rows, first_row, start_in_file)


#: files of a remote multi-file source (object-store parts) read ahead while the one before them
#: is consumed (``FileSource._gen_ahead``); 0 reads them one after the other
REMOTE_PREFETCH_PARTS = 4
#: a file read ahead is read whole (one request) and decoded when its data is at most this many
#: bytes; a larger one is only opened ahead.  Memory read ahead: at most
#: REMOTE_PREFETCH_PARTS x REMOTE_PREFETCH_BYTES
REMOTE_PREFETCH_BYTES = 16 << 20


def _check_like_first(f, cols, schema: pa.Schema, first_path: str) -> None:
    """Another file of a multi-file source: it has the columns, each of the first file's type."""
    _check_columns(f.schema, cols, f.path)
    for c in cols:
        if not f.schema.field(c).type.equals(schema.field(c).type):
            raise InvalidInputError(
                f"{f.path!r}: column {c!r} has type {f.schema.field(c).type}, but "
                f"{schema.field(c).type} in {first_path!r}; write all files with one schema")


class RowRangeSource(Source):
    """Rows ``[start, stop)`` of a seekable source with a known row count: one shard of a
    distributed pass.  Batches come from the base source (which seeks to ``start``: Parquet and
    IPC files skip whole row groups); rows are numbered from 0 inside the range."""

    def __init__(self, base: Source, start: int, stop: int):
        if base.num_rows is None or not base.rereadable:
            raise InvalidInputError(
                f"{base.description}: a row range needs a source that knows its row count and can "
                f"be re-read (Parquet/IPC files, tables); convert CSV data to Parquet first")
        if not 0 <= int(start) <= int(stop) <= base.num_rows:
            raise InvalidInputError(f"rows {start}:{stop} are not a range of the "
                                    f"{base.num_rows} rows of {base.description}")
        self.base = base
        self.start, self.stop = int(start), int(stop)
        self.description = f"{base.description} (rows {self.start}:{self.stop})"
        self.cheap_decode = base.cheap_decode
        # the release metadata stays the whole release's (its row count is the release's)
        super().__init__(base.full_schema, base.columns, base.batch_rows, self.stop - self.start,
                         release_metadata=base.release_metadata)

    def group_ends(self) -> list[int] | None:
        ends = self.base.group_ends()
        if ends is None:
            return None
        inside = [e - self.start for e in ends if self.start < e < self.stop]
        return inside + [self.stop - self.start] if self.stop > self.start else []

    def _located(self, columns, start_row, batch_rows):
        first = self.start + start_row
        if first >= self.stop:
            return
        for origin, batch in self.base.located_batches(columns, first, batch_rows):
            if origin.global_row >= self.stop:
                break
            n = min(batch.num_rows, self.stop - origin.global_row)
            if n < batch.num_rows:
                batch = batch.slice(0, n)
            yield BatchOrigin(origin.file_index, origin.file, origin.row_group, origin.group_row,
                              origin.global_row - self.start), batch
            if origin.global_row + n >= self.stop:
                break


class _LazyFiles:
    """The files of a ``FileSource``, each opened (and checked) the first time it is used."""

    def __init__(self, locations, opener, first, check):
        import threading
        self._locations = locations
        self._opener = opener
        self._check = check
        self._files = [first] + [None] * (len(locations) - 1)
        # one lock per file: files read ahead by several threads are opened concurrently
        self._locks = [threading.Lock() for _ in locations]

    def __len__(self) -> int:
        return len(self._files)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self.get(i)

    def get(self, i: int, whole: bool = False):
        """File i, opened now if it was not; ``whole``: a small remote file is fetched whole when
        opened (it is about to be read)."""
        f = self._files[i]
        if f is None:
            with self._locks[i]:        # the reader's prefetch threads may ask at the same time
                f = self._files[i]
                if f is None:
                    f = self._opener(self._locations[i], whole)
                    self._check(i, f)
                    self._files[i] = f
        return f


# --------------------------------------------------------------------------- entry point
def _expand_path(loc: Location) -> tuple[list[Location], str]:
    """The data files ``loc`` names: a glob, a folder / prefix (a multi-part release's manifest
    lists its parts), or one file."""
    from .parts import read_manifest_parts
    path = loc.display
    if loc.is_glob:
        found = loc.glob()
        if not found:
            raise MissingInputError(f"glob {path!r} matches no file; check the pattern")
        return found, path
    kind = loc.kind()
    if kind == "dir":
        entries = loc.listdir()          # once, for the manifest's parts and for the data files
        parts = read_manifest_parts(loc, entries)
        if parts is not None:
            return parts, path
        found = [e for e in entries if not e.name.startswith((".", "_"))
                 and has_data_suffix(e.name)]
        if not found:
            raise InvalidInputError(
                f"directory {path!r} holds no Parquet/IPC/CSV file (by extension); found "
                f"{[e.name for e in entries][:20]}")
        return found, path
    if kind == "missing":
        raise MissingInputError(f"{path!r} does not exist; check the path")
    return [loc], path


def expand_source(source, filesystem=None) -> tuple[list[Location], str] | None:
    """(files, description) of a path / folder / glob / URI source (``open_source``'s listing),
    for a caller that needs the files before it opens them (a release checks that it does not
    write onto them) and then opens them with ``open_files``: the folder is listed once.  None
    for anything else, or a path that names nothing readable (``open_source`` then says why)."""
    if not isinstance(source, (str, os.PathLike, Location)):
        return None
    try:
        loc = source if isinstance(source, Location) else resolve(source, filesystem)
        return _expand_path(loc)
    except InvalidInputError:
        return None


def open_files(expanded: tuple[list[Location], str], columns: Sequence[str] | None = None, *,
               record_batch_rows: int = DEFAULT_BATCH_ROWS) -> Source:
    """The source of ``expand_source``'s files: what ``open_source`` opens for that path."""
    paths, description = expanded
    return FileSource(paths, columns, record_batch_rows, description=description)


def _numpy_table(arrays: dict) -> pa.Table:
    cols = {}
    n = None
    for name, arr in arrays.items():
        a = np.asarray(arr)
        if a.ndim != 1:
            raise InvalidInputError(f"array {name!r} has shape {a.shape}; pass 1-D arrays per column")
        if n is not None and a.shape[0] != n:
            raise InvalidInputError(
                f"array {name!r} has {a.shape[0]} rows but the previous arrays have {n}; all "
                f"columns must have the same length")
        n = a.shape[0]
        cols[str(name)] = pa.array(np.ascontiguousarray(a))
    return pa.table(cols)


def open_source(source, columns: Sequence[str] | None = None, *,
                record_batch_rows: int = DEFAULT_BATCH_ROWS, filesystem=None,
                batch_rows: int | None = None) -> Source:
    """Open ``source`` as a ``Source`` (see the module docstring for the accepted inputs).

    columns: project to these columns (missing ones -> InvalidInputError listing those found).
    record_batch_rows: upper bound on the rows of each yielded Arrow record batch (the unit the
        file stores or decodes; unrelated to the learner's minibatches).  ``batch_rows=`` is its
        deprecated name.
    filesystem: a ``pyarrow.fs.FileSystem`` or fsspec filesystem on which the path(s) lie
        (default: the local disk, or the filesystem named by a URI such as ``s3://...``).
    """
    batch_rows = renamed_keyword(record_batch_rows, batch_rows, new_name="record_batch_rows",
                                 old_name="batch_rows", default=DEFAULT_BATCH_ROWS)
    if isinstance(source, Source):
        if columns is None:
            return source
        _check_columns(source.full_schema, columns, source.description)
        source.columns = list(columns)
        return source
    if isinstance(source, (str, os.PathLike, Location)):
        loc = source if isinstance(source, Location) else resolve(source, filesystem)
        return open_files(_expand_path(loc), columns, record_batch_rows=batch_rows)
    if isinstance(source, (list, tuple)) and source and all(
            isinstance(s, (str, os.PathLike)) for s in source):
        paths = [resolve(s, filesystem) for s in source]
        for p in paths:
            if p.kind() != "file":
                raise MissingInputError(f"{p.display!r} does not exist or is not a file")
        return FileSource(paths, columns, batch_rows,
                          description=f"{len(paths)} files from {paths[0].display!r}")
    if isinstance(source, pa.Table):
        return TableSource(source, columns, batch_rows)
    if isinstance(source, pa.RecordBatch):
        return TableSource(pa.Table.from_batches([source]), columns, batch_rows,
                           description="<pyarrow.RecordBatch>")
    if isinstance(source, pa.RecordBatchReader):
        return ReaderSource(source, columns, batch_rows)
    if isinstance(source, dict):
        return TableSource(_numpy_table(source), columns, batch_rows,
                           description="<dict of arrays>")
    if isinstance(source, tuple) and len(source) == 2 and not isinstance(
            source[0], (pa.RecordBatch, pa.Table)):
        X, y = np.asarray(source[0]), np.asarray(source[1])
        if X.ndim != 2:
            raise InvalidInputError(f"(X, y): X has shape {X.shape}; expected (n_rows, n_features)")
        if y.shape != (X.shape[0],):
            raise InvalidInputError(
                f"(X, y): y has shape {y.shape}; expected ({X.shape[0]},) to match X's rows")
        arrays = {f"x{j}": X[:, j] for j in range(X.shape[1])}
        arrays["y"] = y
        return TableSource(_numpy_table(arrays), columns, batch_rows,
                           description="<(X, y) arrays>")
    if isinstance(source, list) and source and all(
            isinstance(s, (pa.RecordBatch, pa.Table)) for s in source):
        # a list is in memory already: one table (re-readable, its row count known), after the
        # same per-item schema check as a stream's
        items = list(_IterableBatches(source, "<list of record batches>"))
        return TableSource(pa.Table.from_batches(items, schema=source[0].schema), columns,
                           batch_rows, description="<list of record batches>")
    mod = type(source).__module__ or ""
    if mod.startswith("pyarrow") and hasattr(source, "to_batches") and hasattr(source, "schema"):
        try:
            import pyarrow.dataset as ds
        except ImportError:  # pragma: no cover
            ds = None
        if ds is not None and isinstance(source, ds.FileSystemDataset):
            fmt = source.format
            if isinstance(fmt, (ds.ParquetFileFormat, ds.IpcFileFormat, ds.CsvFileFormat)) and \
                    all(_is_known(f) for f in source.files):
                # file-backed on any filesystem: read the files ourselves (row counts from the
                # footers: progress totals, and a resume seeks instead of re-reading)
                fs = getattr(source, "filesystem", None)
                files = [f if fs is None or _local_fs(source) else resolve(f, fs)
                         for f in source.files]
                return FileSource(files, columns, batch_rows,
                                  description=f"<Dataset of {len(source.files)} files>")
        if ds is not None and isinstance(source, ds.Dataset):
            return ScannerSource(source, columns, batch_rows)
    if mod.startswith("pandas"):
        import pandas as pd  # noqa: F401  (only when a pandas object is given)
        if hasattr(source, "columns"):
            table = pa.Table.from_pandas(source, preserve_index=False)
            return TableSource(table, columns, batch_rows, description="<pandas.DataFrame>")
    if mod.startswith("polars"):
        if hasattr(source, "to_arrow"):
            return TableSource(source.to_arrow(), columns, batch_rows,
                               description="<polars.DataFrame>")
    stream = _stream_reader(source)
    if stream is not None:
        reader, desc = stream
        native = desc.startswith(NATIVE)
        return ReaderSource(reader, columns, batch_rows, description=desc.removeprefix(NATIVE),
                            read_ahead=not native)
    raise InvalidInputError(
        f"cannot read a {type(source).__module__}.{type(source).__name__}: pass a Parquet/IPC/CSV "
        f"path, a directory or glob, a pyarrow Table/Dataset/RecordBatchReader, a pandas or polars "
        f"DataFrame or LazyFrame, a DuckDB relation, an object exporting __arrow_c_stream__, an "
        f"iterable of RecordBatches/Tables, a dict of 1-D arrays or an (X, y) tuple")


def _local_fs(dataset) -> bool:
    fs = getattr(dataset, "filesystem", None)
    return fs is None or type(fs).__name__ == "LocalFileSystem"
