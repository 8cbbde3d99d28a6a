"""The base of every source: a stream of Arrow record batches that can say where each comes from.

:class:`Source` (schema, release metadata, row count, ``batches()`` and ``located_batches()``),
:class:`BatchOrigin` (file, row group, row: the place a batch starts) and the parsing of a
schema's release metadata.  The concrete sources are in ``iwpfast.io.sources`` (tables, readers,
datasets, files), ``iwpfast.io.arrays`` (NumPy arrays) and ``iwpfast.io.views``.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from ..exceptions import InvalidInputError, ReleaseSpecError
from .formats import RELEASE_METADATA_KEY_BYTES as RELEASE_METADATA_KEY

DEFAULT_BATCH_ROWS = 1 << 16


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


def load_lazy_imports() -> None:
    """Import now what pyarrow would import on its first conversion of a batch: pandas, where it
    is installed (``pa.array`` of a NumPy array asks whether it is a pandas Series).  A release
    or a fit calls this before its first batch: a Ctrl-C that lands in that lazy import (seconds
    into a run) came out as a raw traceback of a half-imported pandas, or was lost in an import
    lock, and the run went on or hung."""
    import numpy as np

    try:
        import pandas  # noqa: F401
    except ImportError:
        pass
    pa.array(np.zeros(1))        # pyarrow's own pandas shim, initialized here


#: ``Source(release_metadata=...)``'s default: decode the schema's metadata
READ_FROM_SCHEMA = object()


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
                 num_rows: int | None, release_metadata: dict | None | object = READ_FROM_SCHEMA):
        """``release_metadata``: the metadata ``schema`` carries, when the caller decoded it
        already (a file's, a wrapped source's): the JSON is decoded once per source opened, not
        once per view of it."""
        if int(batch_rows) < 1:
            raise InvalidInputError(f"batch_rows={batch_rows} must be a positive number of rows")
        self.full_schema = schema
        self.columns = _check_columns(schema, columns, self.description)
        self.batch_rows = int(batch_rows)
        self.num_rows = num_rows
        self.release_metadata: dict | None = (
            parse_release_metadata(schema, self.description)
            if release_metadata is READ_FROM_SCHEMA else release_metadata)  # type: ignore[assignment]

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
