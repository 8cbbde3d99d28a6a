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
apache/arrow#39808); Arrow IPC files are memory-mapped, so their batches are views of the page
cache; CSV is parsed block by block.

Every batch can be located (``Source.located_batches``): file index and path, Parquet row group
(or IPC record batch), row offset inside it and global row.  The training reader uses that to name
the exact place of bad values and to seek when a run resumes.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..deprecation import renamed_keyword
from ..exceptions import InvalidInputError, ReleaseSpecError
from .filesystem import Location, resolve
from .formats import CSV_SUFFIXES, IPC_SUFFIXES, PARQUET_SUFFIXES, has_data_suffix, input_format
from .formats import RELEASE_METADATA_KEY_BYTES as RELEASE_METADATA_KEY

DEFAULT_BATCH_ROWS = 1 << 16
__all__ = ["open_source", "Source", "BatchOrigin", "RELEASE_METADATA_KEY", "PARQUET_SUFFIXES",
           "IPC_SUFFIXES", "CSV_SUFFIXES"]


@dataclass(frozen=True)
class BatchOrigin:
    """Where a record batch comes from.

    file_index: position of the file in the source's file list (0 for in-memory sources).
    file: path of the file, or a description such as "<pyarrow.Table>".
    row_group: Parquet row group / IPC record batch index (-1 when the format has none, e.g. CSV).
    group_row: row offset of the batch's first row inside that row group (inside the file for CSV).
    global_row: row index of the batch's first row in the whole stream.
    """

    file_index: int
    file: str
    row_group: int
    group_row: int
    global_row: int

    def describe(self, offset: int = 0) -> str:
        """Human-readable place of row ``offset`` of this batch."""
        where = f"file {self.file!r}"
        if self.row_group >= 0:
            where += f", row group {self.row_group}, row {self.group_row + offset} of that row group"
        else:
            where += f", row {self.group_row + offset} of that file"
        return where + f" (row {self.global_row + offset} of the stream)"


def parse_release_metadata(schema: pa.Schema, where: str) -> dict | None:
    """The JSON dict stored under ``iwpfast.release`` in the schema metadata, or None."""
    meta = schema.metadata or {}
    raw = meta.get(RELEASE_METADATA_KEY)
    if raw is None:
        return None
    try:
        parsed = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReleaseSpecError(
            f"{where}: the release metadata under schema key 'iwpfast.release' is not valid JSON "
            f"({exc}); the file was damaged or written by another tool. Re-create the release with "
            f"iwpfast.release(...)") from exc
    if not isinstance(parsed, dict):
        raise ReleaseSpecError(
            f"{where}: the release metadata under schema key 'iwpfast.release' is a "
            f"{type(parsed).__name__}, expected a JSON object; re-create the release with "
            f"iwpfast.release(...)")
    return parsed


def _check_columns(schema: pa.Schema, columns: Sequence[str] | None, where: str) -> list[str]:
    names = list(schema.names)
    wanted = names if columns is None else list(columns)
    duplicated = sorted({c for c in wanted if names.count(c) > 1})
    if duplicated:
        raise InvalidInputError(
            f"{where}: column name(s) {duplicated} appear more than once in the file; a column "
            f"cannot be told apart from its namesake: rename the duplicates before the release")
    if columns is None:
        return names
    columns = list(columns)
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise InvalidInputError(
            f"{where}: column(s) {missing} not found; the columns found are {list(schema.names)}. "
            f"Pass feature/label names that exist in the data.")
    return columns


class Source:
    """An ordered stream of record batches with its schema and release metadata.

    Subclasses implement ``_located(columns, start_row)``.  ``batches()`` is the plain view.
    """

    description: str = "<source>"
    #: whether batches() can be called more than once (False for a RecordBatchReader)
    rereadable: bool = True
    #: whether producing batches costs next to nothing (in-memory tables, memory-mapped IPC
    #: files): the driver then gives every core to the heads' kernels instead of keeping one for
    #: decoding
    cheap_decode: bool = False

    def __init__(self, schema: pa.Schema, columns: Sequence[str] | None, batch_rows: int,
                 num_rows: int | None):
        if int(batch_rows) < 1:
            raise InvalidInputError(f"batch_rows={batch_rows} must be a positive number of rows")
        self.full_schema = schema
        self.columns = _check_columns(schema, columns, self.description)
        self.batch_rows = int(batch_rows)
        self.num_rows = num_rows
        self.release_metadata = parse_release_metadata(schema, self.description)

    @property
    def schema(self) -> pa.Schema:
        """Schema of the projected columns, with the original schema metadata."""
        fields = [self.full_schema.field(c) for c in self.columns]
        return pa.schema(fields, metadata=self.full_schema.metadata)

    def batches(self, columns: Sequence[str] | None = None,
                start_row: int = 0) -> Iterator[pa.RecordBatch]:
        """Record batches in stream order (at most ``batch_rows`` rows each), from ``start_row``."""
        for _, batch in self.located_batches(columns, start_row):
            yield batch

    def located_batches(self, columns: Sequence[str] | None = None, start_row: int = 0,
                        batch_rows: int | None = None
                        ) -> Iterator[tuple[BatchOrigin, pa.RecordBatch]]:
        """(origin, batch) pairs in stream order, starting at global row ``start_row``.

        ``batch_rows`` overrides the source's batch size for this pass (the training reader asks
        for batches of its chunk size, so that most chunks are zero-copy slices of one batch)."""
        cols = self.columns if columns is None else _check_columns(
            self.full_schema, columns, self.description)
        if start_row < 0:
            raise InvalidInputError(f"start_row={start_row} must be >= 0")
        rows = self.batch_rows if batch_rows is None else int(batch_rows)
        if rows < 1:
            raise InvalidInputError(f"batch_rows={batch_rows} must be a positive number of rows")
        return self._located(cols, int(start_row), rows)

    def _located(self, columns, start_row, batch_rows):  # pragma: no cover - abstract
        raise NotImplementedError

    def group_ends(self) -> list[int] | None:
        """Global row after each storage group (Parquet row group / IPC record batch / table
        chunk) in stream order, or None when unknown before reading (CSV, streams, datasets).

        The training reader uses it to pick its batch size: when every boundary falls on a chunk
        boundary, batches of exactly one chunk are all views and keep the least memory alive."""
        return None

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.description}, columns={self.columns}, "
                f"num_rows={self.num_rows})")


def _skip(origin_batches, start_row):
    """Drop the first ``start_row`` rows of a located-batch iterator (for unseekable inputs)."""
    for origin, batch in origin_batches:
        end = origin.global_row + batch.num_rows
        if end <= start_row:
            continue
        if origin.global_row < start_row:
            cut = start_row - origin.global_row
            batch = batch.slice(cut)
            origin = BatchOrigin(origin.file_index, origin.file, origin.row_group,
                                 origin.group_row + cut, start_row)
        yield origin, batch


# --------------------------------------------------------------------------- in-memory
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
        for batch in table.to_batches(max_chunksize=batch_rows):
            if batch.num_rows == 0:
                continue
            yield BatchOrigin(0, self.description, -1, row, row), batch
            row += batch.num_rows


class ReaderSource(Source):
    """A ``pyarrow.RecordBatchReader``: read once, row count unknown."""

    rereadable = False

    def __init__(self, reader: pa.RecordBatchReader, columns, batch_rows,
                 description="<pyarrow.RecordBatchReader>"):
        self.description = description
        self.reader = reader
        self._used = False
        super().__init__(reader.schema, columns, batch_rows, None)

    def _located(self, columns, start_row, batch_rows):
        if self._used:
            raise InvalidInputError(
                f"{self.description} was already read: a RecordBatchReader can be read only once. "
                f"Pass a file path, a Table or a Dataset to read the data again (resume, epochs>1).")
        self._used = True
        return _skip(self._gen(columns, batch_rows), start_row)

    def _gen(self, columns, batch_rows):
        idx = [self.full_schema.get_field_index(c) for c in columns]
        row = 0
        for batch in self.reader:
            batch = batch.select(idx) if idx != list(range(batch.num_columns)) else batch
            for off in range(0, batch.num_rows, batch_rows):
                part = batch.slice(off, batch_rows)
                yield BatchOrigin(0, self.description, -1, row, row), part
                row += part.num_rows


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


# --------------------------------------------------------------------------- files
def _file_format(path: str) -> str:
    return input_format(path)


def _corrupt(path: str, fmt: str, exc: Exception, where: str = "") -> InvalidInputError:
    return InvalidInputError(
        f"{path!r}{where}: cannot be read as {fmt} ({type(exc).__name__}: "
        f"{' '.join(str(exc).split())}); the file is "
        f"truncated or corrupt (e.g. an interrupted copy or write). Re-create or re-copy it.")


#: read Parquet files through a memory map (see _ParquetFile); False: pyarrow's buffered reads
PARQUET_MEMORY_MAP = True
#: remote Parquet files are read in windows of consecutive row groups of about this many bytes
REMOTE_WINDOW_BYTES = 64 << 20
#: windows fetched ahead (concurrently) of the one being read: memory is about
#: (1 + REMOTE_LOOKAHEAD) windows
REMOTE_LOOKAHEAD = 2


class _ParquetFile:
    def __init__(self, loc: Location):
        import pyarrow.parquet as pq
        self.path = loc.display
        try:
            if loc.local:
                # pre_buffer=False: pyarrow's default pre-buffers whole row groups/files (4 GiB
                # seen).  memory_map=True: pages are decoded straight from the page cache instead
                # of first being copied into a read buffer (one memcpy of the file less; measured
                # 20-35% less CPU for uncompressed files, bench/README.md); the mapped pages are
                # page cache, not memory of the process (RssAnon), and are dropped by the kernel
                # under pressure.
                self.pf = pq.ParquetFile(loc.path, pre_buffer=False, memory_map=PARQUET_MEMORY_MAP,
                                         page_checksum_verification=True)
            else:
                # Remote files cannot be mapped, and each small read is a request: pre_buffer=True
                # fetches the column chunks of the row group being read in a few large coalesced
                # (and concurrent) range requests.  Row groups are read one at a time (located()),
                # so at most one row group is buffered.
                self.pf = pq.ParquetFile(loc.open_input_file(), pre_buffer=True,
                                         page_checksum_verification=True)
            self.schema = self.pf.schema_arrow
        except (pa.ArrowException, OSError) as exc:
            raise _corrupt(self.path, "Parquet", exc) from exc
        md = self.pf.metadata
        self.group_rows = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
        self.group_bytes = [md.row_group(i).total_byte_size for i in range(md.num_row_groups)]
        self.num_rows = int(sum(self.group_rows))
        self.remote = not loc.local
        self.loc = loc

    def located(self, file_index, columns, batch_rows, global_row, start_in_file):
        if self.remote:
            return self._located_windows(file_index, columns, batch_rows, global_row,
                                         start_in_file)
        return self._located_groups(file_index, columns, batch_rows, global_row, start_in_file)

    def _windows(self, first: int) -> list[list[int]]:
        """Consecutive row groups from ``first`` in windows of about REMOTE_WINDOW_BYTES."""
        windows, current, size = [], [], 0
        for rg in range(first, len(self.group_rows)):
            current.append(rg)
            size += self.group_bytes[rg]
            if size >= REMOTE_WINDOW_BYTES:
                windows.append(current)
                current, size = [], 0
        if current:
            windows.append(current)
        return windows

    def _located_windows(self, file_index, columns, batch_rows, global_row, start_in_file):
        """Remote files: one pre-buffered read per window of row groups.  Each request to an
        object store costs a round trip, and pyarrow's pre-buffering coalesces the column chunks
        of the window into a few large ranges fetched concurrently: windows of ~64 MiB measured
        as fast as pyarrow pre-buffering the whole file (bench/s3_read.py), one row group at a
        time 2x slower, and memory stays at one window instead of the whole object."""
        starts = [0]
        for n in self.group_rows:
            starts.append(starts[-1] + n)
        first = next((rg for rg in range(len(self.group_rows))
                      if starts[rg + 1] > start_in_file), len(self.group_rows))
        windows = self._windows(first)
        if not windows:
            return
        import threading
        from concurrent.futures import ThreadPoolExecutor

        handles = threading.local()
        cols = list(columns)

        def load(window):
            # each loading thread has its own file handle (pyarrow readers are not shared
            # between threads); the footer is not read again
            if not hasattr(handles, "pf"):
                import pyarrow.parquet as pq
                handles.pf = pq.ParquetFile(self.loc.open_input_file(), pre_buffer=True,
                                            metadata=self.pf.metadata,
                                            page_checksum_verification=True)
            return list(handles.pf.iter_batches(batch_size=batch_rows, row_groups=window,
                                                columns=cols, use_threads=True))

        # REMOTE_LOOKAHEAD windows are fetched (concurrently) ahead of the one being handed out
        pool = ThreadPoolExecutor(REMOTE_LOOKAHEAD)
        try:
            futures = [pool.submit(load, w) for w in windows[:REMOTE_LOOKAHEAD]]
            for k, window in enumerate(windows):
                file_row = starts[window[0]]
                rg = window[0]
                pieces: list = []
                try:
                    batches = futures[k].result()
                    futures[k] = None
                    if k + REMOTE_LOOKAHEAD < len(windows):
                        futures.append(pool.submit(load, windows[k + REMOTE_LOOKAHEAD]))
                    for batch in batches:
                        # batches may span row groups: collect each group's rows, then hand
                        # them out as the local path does (batches of batch_rows from the
                        # group's start)
                        while batch.num_rows:
                            take = min(batch.num_rows, starts[rg + 1] - file_row)
                            pieces.append(batch.slice(0, take))
                            batch = batch.slice(take)
                            file_row += take
                            if file_row == starts[rg + 1]:
                                yield from self._group_batches(pieces, rg, starts, file_index,
                                                               batch_rows, global_row,
                                                               start_in_file)
                                pieces = []
                                while rg + 1 < len(self.group_rows) and file_row >= starts[rg + 1]:
                                    rg += 1
                except (pa.ArrowException, OSError) as exc:
                    raise _corrupt(self.path, "Parquet", exc, f", row group {rg}") from exc
                if file_row != starts[window[-1] + 1]:
                    raise InvalidInputError(
                        f"{self.path!r}, row groups {window[0]}-{window[-1]}: read "
                        f"{file_row - starts[window[0]]} rows but the footer says "
                        f"{starts[window[-1] + 1] - starts[window[0]]}; the file is corrupt. "
                        f"Re-create or re-copy it.")
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _group_batches(self, pieces, rg, starts, file_index, batch_rows, global_row,
                       start_in_file):
        """Row group ``rg`` (its rows in ``pieces``) as batches of ``batch_rows`` rows from the
        group's start, the first cut at ``start_in_file``: the batches the local path yields, so
        that a seeded release reads the same chunks from a copy of the file anywhere (a batch
        assembled from two pieces is one copy)."""
        group = pa.Table.from_batches(pieces)
        first_row = starts[rg]
        for off in range(0, group.num_rows, batch_rows):
            if first_row + off + batch_rows <= start_in_file:
                continue
            part = group.slice(off, batch_rows)
            chunks = part.to_batches()
            batch = chunks[0] if len(chunks) == 1 else part.combine_chunks().to_batches()[0]
            cut = max(0, start_in_file - (first_row + off))
            if cut:
                batch = batch.slice(cut)
            yield (BatchOrigin(file_index, self.path, rg, off + cut,
                               global_row + first_row + off + cut), batch)

    def _located_groups(self, file_index, columns, batch_rows, global_row, start_in_file):
        row = global_row
        offset_rows = 0
        for rg, nrg in enumerate(self.group_rows):
            if offset_rows + nrg <= start_in_file:
                offset_rows += nrg
                row += nrg
                continue
            skip = max(0, start_in_file - offset_rows)
            offset_rows += nrg
            group_row = 0
            try:
                it = self.pf.iter_batches(batch_size=batch_rows, row_groups=[rg],
                                          columns=list(columns), use_threads=True)
                for batch in it:
                    n = batch.num_rows
                    if group_row + n <= skip:
                        group_row += n
                        row += n
                        continue
                    if group_row < skip:
                        cut = skip - group_row
                        batch = batch.slice(cut)
                        group_row += cut
                        row += cut
                        n = batch.num_rows
                    yield BatchOrigin(file_index, self.path, rg, group_row, row), batch
                    group_row += n
                    row += n
            except (pa.ArrowException, OSError) as exc:
                raise _corrupt(self.path, "Parquet", exc, f", row group {rg}") from exc
            if group_row != nrg:
                raise InvalidInputError(
                    f"{self.path!r}, row group {rg}: read {group_row} rows but the footer says "
                    f"{nrg}; the file is corrupt. Re-create or re-copy it.")


class _IpcFile:
    def __init__(self, loc: Location):
        self.path = path = loc.display
        try:
            # local: memory-mapped (batches are views of the page cache); remote: a buffered
            # random-access file (record batches are fetched by range requests)
            self.mm = pa.memory_map(loc.path, "r") if loc.local else loc.open_input_file()
        except (pa.ArrowException, OSError) as exc:
            raise _corrupt(path, "Arrow IPC", exc) from exc
        # row counts per record batch and in all: known from the footer of the file format,
        # unknown (None) for the stream format
        self.group_rows: list[int] | None
        self.num_rows: int | None
        try:
            self.reader = pa.ipc.open_file(self.mm)
            self.stream = False
            self.schema = self.reader.schema
            self.group_rows = [self.reader.get_record_batch(i).num_rows
                               for i in range(self.reader.num_record_batches)]
            self.num_rows = int(sum(self.group_rows))
        except (pa.ArrowException, OSError):
            try:
                self.mm.seek(0)
                self.reader = pa.ipc.open_stream(self.mm)
            except (pa.ArrowException, OSError) as exc:
                raise _corrupt(path, "Arrow IPC (file or stream format)", exc) from exc
            self.stream = True
            self.schema = self.reader.schema
            self.group_rows = None
            self.num_rows = None
            _check_end_of_stream(self.mm, path, loc.local)

    def _groups(self):
        if not self.stream:
            for i in range(len(self.group_rows)):
                yield i, self.reader.get_record_batch(i)
        else:
            self.mm.seek(0)  # every pass re-opens the stream from its first message
            for i, b in enumerate(pa.ipc.open_stream(self.mm)):
                yield i, b

    def located(self, file_index, columns, batch_rows, global_row, start_in_file):
        idx = [self.schema.get_field_index(c) for c in columns]
        row = global_row
        file_row = 0
        groups = self._groups()
        rg = -1
        try:
            for rg, batch in groups:
                n = batch.num_rows
                if file_row + n <= start_in_file:
                    file_row += n
                    row += n
                    continue
                batch = batch.select(idx)
                first = max(0, start_in_file - file_row)
                row += first
                for off in range(first, n, batch_rows):
                    part = batch.slice(off, batch_rows)
                    yield BatchOrigin(file_index, self.path, rg, off, row), part
                    row += part.num_rows
                file_row += n
        except (pa.ArrowException, OSError) as exc:
            raise _corrupt(self.path, "Arrow IPC", exc, f", record batch {rg + 1}") from exc


#: the end-of-stream marker of the Arrow IPC stream format (continuation token, then length 0;
#: streams from before Arrow 0.15 ended with 4 zero bytes and are refused as unverifiable)
_IPC_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"


def _check_end_of_stream(handle, path: str, local: bool) -> None:
    """Refuse an IPC stream file that does not end with the end-of-stream marker.

    A stream cut at a record-batch boundary reads as a valid, shorter stream: only the missing
    marker tells.  Local (memory-mapped) files are walked message by message (bodies are not
    read): the marker must be exactly the 8 bytes after the last message.  Remote files: the last
    8 bytes are checked.  (A stream read from a pipe or a RecordBatchReader cannot be checked.)
    """
    size = handle.size()
    tail = handle.read_at(min(8, size), max(0, size - 8)) if size else b""
    complete = tail == _IPC_EOS
    if complete and local:
        # message by message (bodies are skipped, not decoded or decompressed): the marker must
        # be exactly the 8 bytes after the last message
        handle.seek(0)
        messages = pa.ipc.MessageReader.open_stream(handle)
        end = 0
        while True:
            try:
                messages.read_next_message()
            except StopIteration:
                break
            end = handle.tell()
        complete = size - end == len(_IPC_EOS)
    if not complete:
        raise InvalidInputError(
            f"{path!r}: the Arrow IPC stream does not end with its end-of-stream marker: it is "
            "truncated (e.g. an interrupted write or copy cut at a record batch) and would be read "
            "as if complete. Re-create or re-copy it (or write the Arrow IPC file format, which "
            "has a footer)")
    handle.seek(0)


class _CsvFile:
    def __init__(self, loc: Location, batch_rows: int):
        from pyarrow import csv
        self.loc = loc
        self.path = path = loc.display
        self.batch_rows = batch_rows
        try:
            with csv.open_csv(self._input()) as reader:
                self.schema = reader.schema
        except (pa.ArrowException, OSError) as exc:
            raise _corrupt(path, "CSV", exc) from exc
        self.num_rows = None
        self.group_rows = None

    def _input(self):
        if self.loc.local:
            return self.loc.path
        # compression from the extension (.csv.gz ...), as pyarrow does for local paths
        return self.loc.fs.open_input_stream(self.loc.path, compression="detect")

    def located(self, file_index, columns, batch_rows, global_row, start_in_file):
        from pyarrow import csv
        convert = csv.ConvertOptions(include_columns=list(columns))
        # column types are fixed from the first block; later blocks must agree
        file_row = 0
        row = global_row
        try:
            reader = csv.open_csv(self._input(), convert_options=convert,
                                  read_options=csv.ReadOptions(block_size=1 << 22))
            with reader:
                for batch in reader:
                    n = batch.num_rows
                    if file_row + n <= start_in_file:
                        file_row += n
                        row += n
                        continue
                    first = max(0, start_in_file - file_row)
                    row += first
                    for off in range(first, n, batch_rows):
                        part = batch.slice(off, batch_rows)
                        yield BatchOrigin(file_index, self.path, -1, file_row + off, row), part
                        row += part.num_rows
                    file_row += n
        except (pa.ArrowException, OSError) as exc:
            raise InvalidInputError(
                f"{self.path!r}, near row {file_row} of that file: CSV parse error ({exc}). Fix the "
                f"file (e.g. a non-numeric value in a numeric column, or a truncated last line) or "
                f"convert it to Parquet.") from exc


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
        self.files = [self._open(loc, batch_rows) for loc in locations]
        first = self.files[0]
        schema = first.schema
        from .parts import combine_part_metadata
        metas = [parse_release_metadata(f.schema, f.path) for f in self.files]
        combined = combine_part_metadata(metas, self.paths, [f.num_rows for f in self.files])
        if combined is not None and metas[0] is not None:
            schema = schema.with_metadata({**(schema.metadata or {}), RELEASE_METADATA_KEY:
                                           json.dumps(combined, sort_keys=True).encode()})
        cols = _check_columns(schema, columns, self.paths[0])
        for f in self.files[1:]:
            _check_columns(f.schema, cols, f.path)
            for c in cols:
                if not f.schema.field(c).type.equals(schema.field(c).type):
                    raise InvalidInputError(
                        f"{f.path!r}: column {c!r} has type {f.schema.field(c).type}, but "
                        f"{schema.field(c).type} in {self.paths[0]!r}; write all files with one "
                        f"schema")
        counts = [f.num_rows for f in self.files]
        num_rows = None if any(c is None for c in counts) else int(sum(counts))
        self.file_rows = counts
        super().__init__(schema, cols, batch_rows, num_rows)

    def group_ends(self) -> list[int] | None:
        if any(f.group_rows is None for f in self.files):
            return None
        ends, row = [], 0
        for f in self.files:
            for n in f.group_rows:
                row += n
                if n:
                    ends.append(row)
        return ends

    def _open(self, loc, batch_rows):
        if self.format == "parquet":
            return _ParquetFile(loc)
        if self.format == "ipc":
            return _IpcFile(loc)
        return _CsvFile(loc, batch_rows)

    def _located(self, columns, start_row, batch_rows):
        if any(c is None for c in self.file_rows):
            # unknown file lengths (CSV, IPC stream): read and drop the rows before start_row
            return _skip(self._gen(columns, 0, batch_rows), start_row)
        return self._gen(columns, start_row, batch_rows)

    def _gen(self, columns, start_row, batch_rows):
        row = 0
        for i, f in enumerate(self.files):
            n = self.file_rows[i]
            if n is not None and row + n <= start_row:
                row += n
                continue
            start_in_file = max(0, start_row - row)
            last = row
            for origin, batch in f.located(i, columns, batch_rows, row, start_in_file):
                yield origin, batch
                last = origin.global_row + batch.num_rows
            row = last if n is None else row + n


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
        super().__init__(base.full_schema, base.columns, base.batch_rows, self.stop - self.start)
        # the release metadata stays the whole release's (its row count is the release's)

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


# --------------------------------------------------------------------------- entry point
def _expand_path(loc: Location) -> tuple[list[Location], str]:
    """The data files ``loc`` names: a glob, a folder / prefix (a multi-part release's manifest
    lists its parts), or one file."""
    from .parts import read_manifest_parts
    path = loc.display
    if loc.is_glob:
        found = loc.glob()
        if not found:
            raise InvalidInputError(f"glob {path!r} matches no file; check the pattern")
        return found, path
    kind = loc.kind()
    if kind == "dir":
        parts = read_manifest_parts(loc)
        if parts is not None:
            return parts, path
        entries = loc.listdir()
        found = [e for e in entries if not e.name.startswith((".", "_"))
                 and has_data_suffix(e.name)]
        if not found:
            raise InvalidInputError(
                f"directory {path!r} holds no Parquet/IPC/CSV file (by extension); found "
                f"{[e.name for e in entries][:20]}")
        return found, path
    if kind == "missing":
        raise InvalidInputError(f"{path!r} does not exist; check the path")
    return [loc], path


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
    if isinstance(source, Location):
        paths, desc = _expand_path(source)
        return FileSource(paths, columns, batch_rows, description=desc)
    if isinstance(source, (str, os.PathLike)):
        paths, desc = _expand_path(resolve(source, filesystem))
        return FileSource(paths, columns, batch_rows, description=desc)
    if isinstance(source, (list, tuple)) and source and all(
            isinstance(s, (str, os.PathLike)) for s in source):
        paths = [resolve(s, filesystem) for s in source]
        for p in paths:
            if p.kind() != "file":
                raise InvalidInputError(f"{p.display!r} does not exist or is not a file")
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
    if isinstance(source, tuple) and len(source) == 2:
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
    raise InvalidInputError(
        f"cannot read a {type(source).__module__}.{type(source).__name__}: pass a Parquet/IPC/CSV "
        f"path, a directory or glob, a pyarrow Table/Dataset/RecordBatchReader, a pandas or polars "
        f"DataFrame, a dict of 1-D arrays or an (X, y) tuple")


def _is_known(path: str) -> bool:
    try:
        _file_format(path)
        return True
    except InvalidInputError:
        return False


def _local_fs(dataset) -> bool:
    fs = getattr(dataset, "filesystem", None)
    return fs is None or type(fs).__name__ == "LocalFileSystem"
