"""Per-format file readers behind one table: Parquet, Arrow IPC (file and stream), CSV.

Each reader opens one file (a ``Location`` on any filesystem), exposes its ``schema``,
``num_rows`` (None when unknown: CSV, IPC streams) and ``group_rows`` (Parquet row groups / IPC
record batches, for seeking and for splitting a file into parts), and yields located batches
(``located(file_index, columns, batch_rows, global_row, start_in_file)``).  Each format's record
in ``iwpfast.io.formats.FILE_FORMATS`` names its reader; :func:`open_file` is the one way in.  A
new format is a reader class (here or anywhere) and its record there.
"""
from __future__ import annotations

import os
import queue
import threading

import pyarrow as pa

from ..exceptions import BadDataError, InvalidInputError
from .filesystem import Location, map_ahead
from .formats import input_format, open_reader
from .handoff import join_draining, put_unless_stopped
from .source_base import BatchOrigin


def _file_format(path: str) -> str:
    return input_format(path)


def _corrupt(path: str, fmt: str, exc: Exception, where: str = "") -> InvalidInputError:
    return BadDataError(
        f"{path!r}{where}: cannot be read as {fmt} ({type(exc).__name__}: "
        f"{' '.join(str(exc).split())}); the file is "
        f"truncated or corrupt (e.g. an interrupted copy or write). Re-create or re-copy it.")



def memory_map() -> bool:
    """Whether local Parquet and Arrow IPC files are read through a memory map
    (``IWPFAST_MEMORY_MAP=1`` or the CLI's ``--memory-map``; ``iwpfast.settings``).  Off by
    default: the mapped pages of a file count in the process's resident memory (VmRSS, what
    YARN's and cgroup v1's memory checks see) up to the file's size, buffered reads hold one
    chunk."""
    from ..settings import current
    return current().memory_map

#: local Parquet files: threads decoding the columns ahead of the reader, each a share of them
#: (``_ColumnThreads``; None: one per usable core, at most 4 and at most pyarrow's thread count;
#: 1: each batch decoded when the reader asks for it, with pyarrow's threads)
PARQUET_DECODE_THREADS: int | None = None
#: decoded batches each row-group thread may hold ahead of the reader
PARQUET_THREAD_BATCHES = 2


def usable_cores() -> int:
    """The cores this process may run on (respects taskset / container CPU sets)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
#: remote Parquet files are read in windows of consecutive row groups of about this many bytes
REMOTE_WINDOW_BYTES = 64 << 20
#: windows fetched ahead (concurrently) of the one being read: memory is about
#: (1 + REMOTE_LOOKAHEAD) windows
REMOTE_LOOKAHEAD = 2


#: a remote Parquet file opened to be read at once (``FileSource`` reading parts ahead) is
#: fetched whole in one request when it holds at most this many bytes: pyarrow reads the last
#: 64 KiB for the footer anyway, so a small part costs one request instead of two
REMOTE_WHOLE_BYTES = 64 << 10


class _ParquetFile:
    def __init__(self, loc: Location, whole: bool = False):
        import pyarrow.parquet as pq
        self.path = loc.display
        #: the bytes of a small remote file fetched whole (``whole``), until read_whole uses them
        self._data = None
        #: read through a memory map (``memory_map()``, decided once per file; local files only)
        self.pf_memory_map = bool(loc.local) and memory_map()
        try:
            if loc.local:
                # pre_buffer=False: pyarrow's default pre-buffers whole row groups/files (4 GiB
                # seen).  Buffered reads by default: resident memory stays at a chunk.  With
                # memory_map() pages are decoded straight from the page cache instead of first
                # being copied into a read buffer (one memcpy of the file less; measured 20-35%
                # less CPU for uncompressed files, bench/README.md), but the mapped pages count
                # in VmRSS up to the file's size (issue 47)
                self.pf = pq.ParquetFile(loc.path, pre_buffer=False,
                                         memory_map=self.pf_memory_map,
                                         page_checksum_verification=True)
            else:
                # Remote files cannot be mapped, and each small read is a request: pre_buffer=True
                # fetches the column chunks of the row group being read in a few large coalesced
                # (and concurrent) range requests.  Row groups are read one at a time (located()),
                # so at most one row group is buffered.
                self.handle = loc.open_input_file()
                size = self.handle.size()
                if whole and size <= REMOTE_WHOLE_BYTES:
                    self._data = self.handle.read_at(size, 0)
                self.pf = pq.ParquetFile(
                    self.handle if self._data is None else pa.BufferReader(self._data),
                    pre_buffer=True, page_checksum_verification=True)
            self.schema = self.pf.schema_arrow
        except (pa.ArrowException, OSError) as exc:
            raise _corrupt(self.path, "Parquet", exc) from exc
        md = self.pf.metadata
        self.group_rows = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
        self.group_bytes = [md.row_group(i).total_byte_size for i in range(md.num_row_groups)]
        self.num_rows = int(sum(self.group_rows))
        self.remote = not loc.local
        self.loc = loc

    @property
    def nbytes(self) -> int:
        """Bytes of the object (remote) or its decoded row groups (local)."""
        return int(self.handle.size()) if self.remote else int(sum(self.group_bytes))

    def read_whole(self, file_index, columns, batch_rows, global_row, start_in_file) -> list:
        """A small remote file read in one request and decoded now: the ``located`` batches as a
        list (what ``FileSource`` reads ahead; the batches ``located`` yields, so a seeded
        release of a file is the same read ahead or not)."""
        import pyarrow.parquet as pq
        try:
            data, self._data = self._data, None     # fetched when opened, or now
            if data is None:
                data = self.handle.read_at(self.nbytes, 0)
            pf = pq.ParquetFile(pa.BufferReader(data), metadata=self.pf.metadata,
                                page_checksum_verification=True)
        except (pa.ArrowException, OSError) as exc:
            raise _corrupt(self.path, "Parquet", exc) from exc
        return list(self._located_groups(file_index, columns, batch_rows, global_row,
                                         start_in_file, in_turn=pf))

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
        from contextlib import closing

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
        with closing(map_ahead(load, windows, REMOTE_LOOKAHEAD, "iwpfast-windows")) as ahead:
            for window in windows:
                file_row = starts[window[0]]
                rg = window[0]
                pieces: list = []
                try:
                    batches = next(ahead)
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

    def _located_groups(self, file_index, columns, batch_rows, global_row, start_in_file,
                        in_turn=None):
        """Local files: the row groups from the one holding ``start_in_file``, each cut in
        batches of ``batch_rows`` rows from its start.  With several columns and several cores
        the columns are shared out to PARQUET_DECODE_THREADS threads that decode ahead
        (``_ColumnThreads``); otherwise pyarrow decodes each batch when asked, with its own
        threads."""
        first = 0
        offset_rows = 0
        for nrg in self.group_rows:
            if offset_rows + nrg > start_in_file:
                break
            offset_rows += nrg
            first += 1
        groups = list(range(first, len(self.group_rows)))
        threads = PARQUET_DECODE_THREADS
        # pyarrow's thread count too: a cluster worker that lowered it (iwpfast.distributed)
        threads = min(4, usable_cores(), pa.cpu_count()) if threads is None else int(threads)
        threads = max(1, min(threads, len(columns)))
        cols = list(columns)
        decoded: _ColumnThreads | _RowGroupsInTurn
        if in_turn is not None:     # a file in memory (read_whole): decoded in this thread
            decoded = _RowGroupsInTurn(in_turn, groups, cols, batch_rows, threads=False)
        elif threads > 1:
            decoded = _ColumnThreads(self, groups, cols, batch_rows, threads)
        else:
            decoded = _RowGroupsInTurn(self.pf, groups, cols, batch_rows)
        row = global_row + offset_rows
        try:
            for rg in groups:
                nrg = self.group_rows[rg]
                skip = max(0, start_in_file - offset_rows)
                offset_rows += nrg
                group_row = 0
                try:
                    for batch in decoded.batches(rg):
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
                        f"{self.path!r}, row group {rg}: read {group_row} rows but the footer "
                        f"says {nrg}; the file is corrupt. Re-create or re-copy it.")
        finally:
            decoded.close()


class _RowGroupsInTurn:
    """The batches of each row group, decoded when asked for, with pyarrow's threads."""

    def __init__(self, pf, groups, columns, batch_rows, threads: bool = True):
        self.pf, self.columns, self.batch_rows = pf, columns, batch_rows
        self.threads = threads

    def batches(self, rg):
        return self.pf.iter_batches(batch_size=self.batch_rows, row_groups=[rg],
                                    columns=self.columns, use_threads=self.threads)

    def close(self) -> None:
        pass


class _ColumnThreads:
    """Row groups ``groups`` of a local Parquet file decoded by ``threads`` threads at once, each
    owning a share of the columns (about equal bytes per row): a thread streams its columns
    through every group in order (single-threaded, through its own memory-mapped handle on the
    file's footer), batch by batch, into a queue of PARQUET_THREAD_BATCHES batches.
    ``batches(rg)`` joins the threads' pieces of each batch of group ``rg`` (zero-copy); an error
    in a thread is raised there, for the group being read.

    Why columns and not row groups per thread: a thread's batches of one row group come out in
    order only, so threads decoding whole row groups must run a whole group ahead of the reader
    to work at once (memory: a row group per thread, 400 MiB at p = 100); sharing the columns,
    every thread works on the batch the reader needs next.  And why not pyarrow's own threads
    (``use_threads=True``), which also decode the columns of a batch in parallel: they wait for
    the slowest column at the end of every batch and for the reader to ask for the next one, so
    a core is idle whenever the kernel is not running; these threads decode ahead until their
    queues are full.  Memory: about PARQUET_THREAD_BATCHES + 1 batches ahead of the reader.
    ``close`` stops and joins the threads."""

    _END = object()

    def __init__(self, parquet: _ParquetFile, groups, columns, batch_rows, threads):
        self.columns = list(columns)
        self.schema: pa.Schema | None = None
        self.stop = threading.Event()
        shares = _column_shares(parquet.schema, self.columns, threads)
        self.queues: list[queue.Queue] = [queue.Queue(PARQUET_THREAD_BATCHES) for _ in shares]
        self.threads = [threading.Thread(
            target=self._decode, args=(parquet, list(groups), share, batch_rows, q),
            name=f"iwpfast-parquet-{k}", daemon=True)
            for k, (share, q) in enumerate(zip(shares, self.queues, strict=True))]
        for t in self.threads:
            t.start()

    def _decode(self, parquet, groups, columns, batch_rows, q):
        import pyarrow.parquet as pq
        try:
            pf = pq.ParquetFile(parquet.loc.path, pre_buffer=False,
                                memory_map=parquet.pf_memory_map, metadata=parquet.pf.metadata,
                                page_checksum_verification=True)
            for rg in groups:
                for batch in pf.iter_batches(batch_size=batch_rows, row_groups=[rg],
                                             columns=columns, use_threads=False):
                    if not put_unless_stopped(q, batch, self.stop):
                        return
                if not put_unless_stopped(q, self._END, self.stop):
                    return
        except BaseException as exc:   # raised by batches() for the group being read
            put_unless_stopped(q, exc, self.stop)

    def batches(self, rg):
        """The batches of the next row group, ``rg``."""
        while True:
            pieces = [q.get() for q in self.queues]
            for piece in pieces:
                if isinstance(piece, BaseException):
                    raise piece
            ended = [piece is self._END for piece in pieces]
            if all(ended):
                return
            if any(ended) or len({piece.num_rows for piece in pieces}) > 1:
                # (named with the file and row group by the caller, as a decoding error)
                raise pa.ArrowInvalid("its columns hold different numbers of rows")
            arrays: dict[str, pa.Array] = {}
            fields: dict[str, pa.Field] = {}
            for piece in pieces:
                arrays.update(zip(piece.schema.names, piece.columns, strict=True))
                fields.update((f.name, f) for f in piece.schema)
            if self.schema is None:
                # the fields (nullability, metadata) and the schema metadata of the batches
                # pyarrow reads with all the columns at once
                self.schema = pa.schema([fields[c] for c in self.columns],
                                        metadata=pieces[0].schema.metadata)
            yield pa.RecordBatch.from_arrays([arrays[c] for c in self.columns],
                                             schema=self.schema)

    def close(self) -> None:
        self.stop.set()
        for q, t in zip(self.queues, self.threads, strict=True):
            join_draining(t, q)


def _column_shares(schema: pa.Schema, columns: list[str], threads: int) -> list[list[str]]:
    """``columns`` cut into at most ``threads`` non-empty shares of about equal bytes per row
    (each column to the lightest share so far, widest first)."""
    def width(name):
        try:
            return max(1, schema.field(name).type.bit_width // 8)
        except ValueError:                    # not fixed-width
            return 8
    shares: list[list[str]] = [[] for _ in range(max(1, min(threads, len(columns))))]
    loads = [0] * len(shares)
    for name in sorted(columns, key=width, reverse=True):
        k = loads.index(min(loads))
        shares[k].append(name)
        loads[k] += width(name)
    return shares


class _IpcFile:
    def __init__(self, loc: Location):
        self.path = path = loc.display
        try:
            # local: memory-mapped to read the footer and the row counts (then buffered reads,
            # ``_buffered``, unless ``memory_map()``: batches views of the page cache); remote: a
            # buffered random-access file (record batches are fetched by range requests)
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
        if loc.local and not memory_map():
            self._buffered(loc.path)

    def _buffered(self, path: str) -> None:
        """Read the batches with buffered reads from here on (the default, ``memory_map()``):
        the map served the footer, the row counts and the end-of-stream check, which read
        only the messages' metadata; unmapped now, the file's pages stop counting in the
        process's resident memory, and each batch read is memory of its own, freed with it."""
        try:
            handle = pa.OSFile(path, "rb")
            reader = None if self.stream else pa.ipc.open_file(handle)
        except (pa.ArrowException, OSError) as exc:
            raise _corrupt(self.path, "Arrow IPC", exc) from exc
        self.mm.close()
        self.mm = handle
        if reader is not None:
            self.reader = reader

    @property
    def nbytes(self) -> int:
        return int(self.mm.size())

    def read_whole(self, file_index, columns, batch_rows, global_row, start_in_file) -> list:
        """The ``located`` batches as a list, read now (``FileSource`` reads remote files ahead)."""
        return list(self.located(file_index, columns, batch_rows, global_row, start_in_file))

    def _groups(self):
        if not self.stream:
            assert self.group_rows is not None         # an IPC file knows its record batches
            for i in range(len(self.group_rows)):
                yield i, self.reader.get_record_batch(i)
        else:
            self.mm.seek(0)  # every pass re-opens the stream from its first message
            for i, b in enumerate(pa.ipc.open_stream(self.mm)):
                yield i, b

    def located(self, file_index, columns, batch_rows, global_row, start_in_file):
        idx = [self.schema.get_field_index(c) for c in columns]
        walk = _Walk()
        try:
            # select is zero-copy: cheap on the record batches skipped too
            yield from _cut_groups(((i, b.select(idx)) for i, b in self._groups()), walk,
                                   file_index, self.path, batch_rows, global_row, start_in_file,
                                   offsets_in_group=True)
        except (pa.ArrowException, OSError) as exc:
            raise _corrupt(self.path, "Arrow IPC", exc, f", record batch {walk.group + 1}") from exc


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
        walk = _Walk()
        try:
            reader = csv.open_csv(self._input(), convert_options=convert,
                                  read_options=csv.ReadOptions(block_size=1 << 22))
            with reader:
                yield from _cut_groups(enumerate(reader), walk, file_index, self.path, batch_rows,
                                       global_row, start_in_file, offsets_in_group=False)
        except (pa.ArrowException, OSError) as exc:
            raise InvalidInputError(
                f"{self.path!r}, near row {walk.file_row} of that file: CSV parse error ({exc}). Fix the "
                f"file (e.g. a non-numeric value in a numeric column, or a truncated last line) or "
                f"convert it to Parquet.") from exc


class _Walk:
    """Where a walk over a file's record batches or blocks is, for the error that stops it."""

    def __init__(self) -> None:
        self.group = -1          # the last record batch / block read
        self.file_row = 0        # the file's rows before the one being read


def _cut_groups(groups, walk: _Walk, file_index: int, path: str, batch_rows: int,
                global_row: int, start_in_file: int, *, offsets_in_group: bool):
    """``(BatchOrigin, batch)`` for the rows of ``groups`` (``(index, record batch)`` in file
    order) from row ``start_in_file`` of the file on, each group cut in batches of ``batch_rows``
    rows from its start.  ``offsets_in_group``: the origin names the group and the offset in it
    (IPC record batches, which a reader can seek to); otherwise no group (-1) and the offset in
    the file (CSV blocks, whose size is pyarrow's choice)."""
    row = global_row
    for group, batch in groups:
        walk.group = group
        n = batch.num_rows
        if walk.file_row + n <= start_in_file:
            walk.file_row += n
            row += n
            continue
        first = max(0, start_in_file - walk.file_row)
        row += first
        for off in range(first, n, batch_rows):
            part = batch.slice(off, batch_rows)
            origin = (BatchOrigin(file_index, path, group, off, row) if offsets_in_group
                      else BatchOrigin(file_index, path, -1, walk.file_row + off, row))
            yield origin, part
            row += part.num_rows
        walk.file_row += n


def open_parquet(loc: Location, batch_rows: int, whole: bool = False):
    return _ParquetFile(loc, whole)


def open_ipc(loc: Location, batch_rows: int, whole: bool = False):
    return _IpcFile(loc)


def open_csv(loc: Location, batch_rows: int, whole: bool = False):
    return _CsvFile(loc, batch_rows)


def open_file(loc: Location, batch_rows: int, whole: bool = False):
    """The reader of one file, by its format (from the suffix: its record in
    ``iwpfast.io.formats.FILE_FORMATS``); ``whole``: a remote file read at once."""
    return open_reader(_file_format(loc.path), loc, batch_rows, whole=whole)


def _is_known(path: str) -> bool:
    try:
        _file_format(path)
        return True
    except InvalidInputError:
        return False
