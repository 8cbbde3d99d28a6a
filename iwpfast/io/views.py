"""Views of a Source: a part of its rows (training / validation blocks) and batches mapped on the fly.

``PartSource(inner, period=m, block=b, validation=...)``: the rows are cut into blocks of ``b``
consecutive rows; every m-th block (the last of each group of m) is the validation part, the rest
the training part.  Every piece is a zero-copy slice of a batch of ``inner``, one per run of
consecutive blocks of the part (the period - 1 training blocks of a group are one piece); row numbers
(origins, ``start_row``) count the part's own rows, so the driver's resume works on a part.
``period=None``: every row (a pure mapping view).

``mapper=(schema_fn, batch_fn)``: the view's schema is ``schema_fn(inner schema)`` and each
yielded batch is ``batch_fn(batch)`` (e.g. labels recoded to +-1, raw features scaled and clipped
as a release does).  One call per batch: nothing runs per row in Python.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from ..exceptions import InvalidInputError
from .source_base import BatchOrigin, Source


def split_counts(n: int, period: int, block: int) -> tuple[int, int]:
    """(training rows, validation rows) of n rows."""
    group = period * block
    full, rest = divmod(n, group)
    val = full * block + max(0, rest - (period - 1) * block)
    return n - val, val


def part_rows(a: int, b: int, period: int | None, block: int, validation: bool) -> int:
    """The rows of the training (or validation) part among rows ``[a, b)`` of the whole source
    (``period`` None: no split, all of them)."""
    if period is None:
        return b - a
    end, before = split_counts(b, period, block), split_counts(a, period, block)
    return end[1] - before[1] if validation else end[0] - before[0]


def column_mapper(functions: dict[str, Callable[[np.ndarray], np.ndarray]],
                  dtype=np.float64):
    """A mapper that replaces each named column by ``fn(values)`` as ``dtype`` (float64; int8
    for labels recoded to +-1: an eighth of the bytes to write and read again)."""
    dtype = np.dtype(dtype)
    arrow_type = pa.from_numpy_dtype(dtype)

    def schema_fn(schema: pa.Schema) -> pa.Schema:
        for name in functions:
            i = schema.get_field_index(name)
            if i >= 0:
                schema = schema.set(i, pa.field(name, arrow_type))
        return schema

    def batch_fn(batch: pa.RecordBatch) -> pa.RecordBatch:
        for name, fn in functions.items():
            i = batch.schema.get_field_index(name)
            if i >= 0:
                values = batch.column(i).to_numpy(zero_copy_only=False)
                batch = batch.set_column(i, name, pa.array(np.asarray(fn(values), dtype=dtype)))
        return batch

    return schema_fn, batch_fn


def chain_mappers(*mappers):
    """One mapper applying ``mappers`` in order (None entries skipped)."""
    ms = [m for m in mappers if m is not None]
    if not ms:
        return None

    def schema_fn(schema):
        for m in ms:
            schema = m[0](schema)
        return schema

    def batch_fn(batch):
        for m in ms:
            batch = m[1](batch)
        return batch

    return schema_fn, batch_fn


class HeldRows:
    """The validation rows a training view passes over, copied into compact arrays while they
    fit ``budget_bytes``: a tuning scan then scores its hold-out from memory instead of decoding
    the whole source a second time (a Parquet row group holds training and validation blocks
    alike, so the validation read decodes every row).  ``source()`` is the held rows as an
    in-memory Source once every one of the ``n_rows`` validation rows was held, else None (over
    the budget, a column that is not a plain number, nulls: the caller reads the validation part
    as before, which reports bad values itself).

    ``one_shot``: the source is a stream read once (``iwpfast.io.peek``), so the validation part
    cannot be read again: ``n_rows`` may be None (the arrays grow as the rows come), and what
    would make ``source()`` None raises instead, as soon as it happens, with the fix."""

    def __init__(self, n_rows: int | None, budget_bytes: int, one_shot: bool = False,
                 description: str = "the stream"):
        self.n_rows = None if n_rows is None else int(n_rows)
        self.budget_bytes = int(budget_bytes)
        self.one_shot, self.description = bool(one_shot), description
        self.reset()

    def reset(self) -> None:
        """Forget the rows held (a scan starts again from the first row)."""
        self.names: list[str] | None = None
        self.arrays: list[np.ndarray] = []
        self.filled = 0
        self.failed = False

    def _fail(self, why: str) -> None:
        self.failed = True
        if self.one_shot:
            raise InvalidInputError(
                f"{self.description}: an 'auto' fit of a stream holds its validation rows in "
                f"memory (the stream cannot be read again), but {why}; pass a smaller "
                "validation_fraction, a separate validation release (validation=...), numbers "
                "for alpha and learning_rate, or write the stream to Parquet first")

    def _allocate(self, schema: pa.Schema, rows: int) -> None:
        dtypes = []
        for field in schema:
            if not (pa.types.is_integer(field.type) or pa.types.is_floating(field.type)
                    or pa.types.is_boolean(field.type)):
                self._fail(f"column {field.name!r} is {field.type}, not a number")
                return
            dtypes.append(np.dtype(field.type.to_pandas_dtype()))
        self.row_bytes = sum(d.itemsize for d in dtypes)
        if rows * self.row_bytes > self.budget_bytes:
            self._fail(self._over(rows))
            return
        self.names = list(schema.names)
        self.arrays = [np.empty(rows, d) for d in dtypes]

    def _over(self, rows: int) -> str:
        return (f"{rows:,} validation rows of {self.row_bytes} bytes are over the "
                f"{self.budget_bytes / 2**20:.0f} MiB it may hold (IWPFAST_HELD_VALIDATION_BYTES)")

    def _grow(self, rows: int) -> bool:
        """Room for ``rows`` rows in all (a stream of unknown length: doubling, within the
        budget)."""
        capacity = len(self.arrays[0]) if self.arrays else 0
        if rows <= capacity:
            return True
        if self.n_rows is not None:        # more rows than declared
            self._fail(f"it holds more than the {self.n_rows:,} validation rows of its "
                       "declared length (n_rows_total)")
            return False
        if rows * self.row_bytes > self.budget_bytes:
            self._fail(self._over(rows))
            return False
        new = min(max(2 * capacity, rows, 1 << 12), self.budget_bytes // self.row_bytes)
        for i, old in enumerate(self.arrays):
            grown = np.empty(new, old.dtype)
            grown[:self.filled] = old[:self.filled]
            self.arrays[i] = grown
        return True

    def add(self, batch: pa.RecordBatch) -> None:
        """Copy the rows of one validation piece (in the order of the validation part)."""
        if self.failed:
            return
        if self.names is None:
            self._allocate(batch.schema, 0 if self.n_rows is None else self.n_rows)
            if self.failed:
                return
        m, at = batch.num_rows, self.filled
        if list(batch.schema.names) != self.names:
            self._fail("its columns changed")
            return
        if not self.one_shot and at + m > (self.n_rows or 0):
            self.failed = True
            return
        if self.one_shot and not self._grow(at + m):
            return
        for name, target, column in zip(self.names, self.arrays, batch.columns, strict=True):
            if column.null_count:
                self._fail(f"column {name!r} has missing values")
                return
            target[at:at + m] = column.to_numpy(zero_copy_only=False)
        self.filled = at + m

    def source(self, columns) -> Source | None:
        """The held rows as a Source with ``columns``, or None when they are not all held."""
        if self.filled != self.n_rows and not (self.one_shot and self.n_rows is None):
            return None
        table = self._table(columns, self.filled)
        if table is None:
            return None
        from .sources import open_source
        return open_source(table)

    def _table(self, columns, n: int) -> pa.Table | None:
        """The first ``n`` held rows of ``columns`` (zero-copy), or None when not all held."""
        if self.failed or self.names is None or self.filled < n \
                or not set(columns) <= set(self.names):
            return None
        return pa.table({c: self.arrays[self.names.index(c)][:n] for c in columns})

    def prefix_source(self, columns, n_rows: int, batch_rows: int = 1 << 16) -> Source | None:
        """The first ``n_rows`` held rows as a Source with ``columns`` in batches of
        ``batch_rows`` (a tuning scan scores its heads on them mid-scan, two threads taking the
        batches in turn; ``iwpfast.sgd.tuning``), or None when they are not all held.
        Zero-copy: the training view only writes rows after ``filled`` until it starts over."""
        table = self._table(columns, int(n_rows))
        if table is None:
            return None
        from .sources import open_source
        return open_source(pa.Table.from_batches(table.to_batches(max_chunksize=batch_rows),
                                                 schema=table.schema))


class PartSource(Source):
    """Training or validation rows of ``inner`` (or all rows, ``period=None``), batches mapped.

    ``hold``: a ``HeldRows`` that a training view hands the validation pieces it skips."""

    def __init__(self, inner: Source, *, period: int | None = None, block: int = 1,
                 validation: bool = False, mapper=None, row_offset: int = 0,
                 hold: HeldRows | None = None):
        self.inner = inner
        self.hold = hold
        # the row number of inner's first row in the data the blocks are cut from: a shard of a
        # split (rows a:b of a file on one worker) keeps the blocks of the whole split
        self.row_offset = int(row_offset)
        self.period = None if period is None else int(period)
        self.block = int(block)
        self.validation = bool(validation)
        self.mapper = mapper
        part = "validation" if validation else "training"
        self.description = (inner.description if period is None else
                            f"{inner.description} ({part} part, 1 block in {period})")
        self.rereadable = inner.rereadable
        self.cheap_decode = inner.cheap_decode and mapper is None
        n = inner.num_rows
        if n is not None:
            n = part_rows(self.row_offset, self.row_offset + int(n), self.period, self.block,
                          self.validation)
        schema = inner.full_schema if mapper is None else mapper[0](inner.full_schema)
        # the release metadata is inner's (decoded once, when inner was opened) unless a mapper
        # gave the schema other metadata
        same = schema.metadata == inner.full_schema.metadata
        super().__init__(schema, inner.columns, inner.batch_rows, n,
                         **({"release_metadata": inner.release_metadata} if same else {}))

    def group_ends(self):
        return self.inner.group_ends() if self.period is None else None

    def _keep(self, block_index: int) -> bool:
        period = self.period
        assert period is not None                   # called only when the view splits blocks
        return (block_index % period == period - 1) == self.validation

    def _map(self, piece: pa.RecordBatch) -> pa.RecordBatch:
        return piece if self.mapper is None else self.mapper[1](piece)

    def _located(self, columns, start_row, batch_rows):
        if self.period is None:
            for origin, batch in self.inner.located_batches(columns, start_row, batch_rows):
                yield origin, self._map(batch)
            return
        row = 0  # the part's own row counter
        hold = None if self.validation else self.hold
        if hold is not None:
            hold.reset()
        for origin, batch in self.inner.located_batches(columns, 0, batch_rows):
            g0 = origin.global_row + self.row_offset
            g_end = g0 + batch.num_rows
            pos = g0
            while pos < g_end:
                b = pos // self.block
                keep = self._keep(b)
                # the consecutive blocks of one part are one piece (the period - 1 training
                # blocks of a group: a piece, and its conversion and checks, per block cost
                # ~30 pieces per chunk in Python)
                end_block = b + 1
                while end_block * self.block < g_end and self._keep(end_block) == keep:
                    end_block += 1
                stop = min(g_end, end_block * self.block)
                if keep:
                    piece_n = stop - pos
                    if row + piece_n > start_row:
                        cut = max(0, start_row - row)
                        piece = batch.slice(pos - g0 + cut, piece_n - cut)
                        yield (BatchOrigin(origin.file_index, origin.file, origin.row_group,
                                           origin.group_row + (pos - g0) + cut, row + cut),
                               self._map(piece))
                    row += piece_n
                elif hold is not None:
                    hold.add(self._map(batch.slice(pos - g0, stop - pos)))
                pos = stop


class FeatureMapSource(Source):
    """A raw source seen through a ``FeatureMap`` (``iwpfast.privacy.feature_map``): its input
    columns (strings, categories, raw numbers) replaced by the released coordinates (float64,
    scaled, clipped, one-hot), what a model fitted on a release with categorical columns reads
    raw data through.  ``bound``: the L2 clip of the private numeric part (a release's bound)."""

    def __init__(self, inner: Source, feature_map, bound: float | None):
        self.inner = inner
        self.fmap = feature_map
        self.bound = bound
        self.description = inner.description
        self.rereadable = inner.rereadable
        inputs = [c.name for c in feature_map.inputs]
        missing = [c for c in inputs if c not in inner.full_schema.names]
        if missing:
            raise InvalidInputError(
                f"{inner.description}: the model's input column(s) {missing} are missing (its "
                f"columns: {list(inner.full_schema.names)}); the model maps the raw columns "
                f"{inputs} to its coordinates")
        self.inputs = inputs
        fields = [f for f in inner.full_schema if f.name not in inputs]
        fields += [pa.field(c, pa.float64()) for c in feature_map.coordinates]
        schema = pa.schema(fields, metadata=inner.full_schema.metadata)
        super().__init__(schema, None, inner.batch_rows, inner.num_rows)

    def group_ends(self):
        return self.inner.group_ends()

    def _located(self, columns, start_row, batch_rows):
        coords = set(self.fmap.coordinates)
        passed = [c for c in columns if c not in coords]
        inner_cols = list(dict.fromkeys([c for c in passed if c not in self.inputs] + self.inputs))
        for origin, batch in self.inner.located_batches(inner_cols, start_row, batch_rows):
            mapped = dict(zip(self.fmap.coordinates,
                              self.fmap.transform(batch, self.bound, origin.describe), strict=True))
            arrays = [pa.array(mapped[c]) if c in coords else batch.column(c) for c in columns]
            yield origin, pa.RecordBatch.from_arrays(arrays, names=list(columns))
