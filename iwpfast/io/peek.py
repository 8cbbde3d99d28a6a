"""A one-shot stream of unknown length, its first rows read ahead: what an "auto" fit splits.

An "auto" fit cuts the rows into blocks whose size depends on the number of rows
(``iwpfast.sgd.split._block_rows``: 8192, fewer when there are fewer than 20 validation blocks
of that size).  A stream does not say its length, so ``peek_stream`` reads its first batches
into memory until either the stream ends (then it is a table of known length: split, rungs,
tail average and the small-data fallback are exactly a file's) or the blocks no longer depend on
the length (``full_block_rows``: 20 x period x 8192 rows, 1,638,400 at the default
validation_fraction), or ``STREAM_PEEK_BYTES`` are held, whichever comes first
(docs/streaming.md "'auto' on a stream").  The batches read stay in ``PeekedSource`` and are
yielded first when the scan reads it.
"""
from __future__ import annotations

import itertools

import pyarrow as pa

from .source_base import BatchOrigin, Source
from .sources import TableSource, rebatched

#: the most memory the first rows of a stream of unknown length are held in while an "auto"
#: fit learns whether it is short (``peek_stream``)
STREAM_PEEK_BYTES = 128 << 20


def full_block_rows(period: int, block: int = 8192) -> int:
    """The rows from which the split's blocks are ``block`` rows whatever the length (20
    validation blocks of that size)."""
    return 20 * int(period) * int(block)


class PeekedSource(Source):
    """A one-shot ``inner`` whose first ``batches`` were already read: those, then the rest.

    ``num_rows``: the declared length (``fit(..., n_rows_total=)``), or None.  ``split_rows``:
    the length the validation split sizes its blocks for (the declared one, else the rows
    peeked when the peek stopped on its byte bound, else None: blocks of 8192 rows, the size a
    file of that many rows gets too)."""

    rereadable = False

    def __init__(self, inner: Source, batches: list, rest, num_rows: int | None,
                 split_rows: int | None):
        self.inner = inner
        self.description = inner.description
        self._buffer, self._rest = batches, rest
        self.split_rows = split_rows
        #: the pass length an "auto" fit plans its tail average and rungs for when the length
        #: is unknown: the rows read ahead (``iwpfast.sgd.split.pass_rows``)
        self.assumed_rows = num_rows if num_rows is not None else sum(b.num_rows for b in batches)
        self._used = False
        super().__init__(inner.full_schema, inner.columns, inner.batch_rows, num_rows,
                         release_metadata=inner.release_metadata)

    def _located(self, columns, start_row, batch_rows):
        from ..exceptions import InvalidInputError
        if self._used:
            raise InvalidInputError(
                f"{self.description} was already read: a stream can be read only once. "
                f"Pass a file path, a Table or a Dataset to read the data again.")
        self._used = True
        buffer, self._buffer = self._buffer, []
        row = 0
        for batch in rebatched(itertools.chain(buffer, self._rest), batch_rows):
            if row + batch.num_rows > start_row:
                cut = max(0, start_row - row)
                piece = batch.select(list(columns)).slice(cut)
                yield BatchOrigin(0, self.description, -1, row + cut, row + cut), piece
            row += batch.num_rows


def peek_stream(src: Source, period: int, declared: int | None = None,
                max_bytes: int | None = None) -> Source:
    """``src`` (a source of unknown length) ready for an "auto" fit's split: a ``TableSource``
    of its rows when it ends within the peek (its length then known), else a ``PeekedSource``
    (module docstring).  ``declared``: the length the caller declared (``n_rows_total``): the
    split then sizes its blocks for it and nothing is read ahead."""
    iterator = (batch for _, batch in src.located_batches(None, 0))
    if declared is not None:
        return PeekedSource(src, [], iterator, int(declared), int(declared))
    budget = STREAM_PEEK_BYTES if max_bytes is None else int(max_bytes)
    enough = full_block_rows(period)
    held: list[pa.RecordBatch] = []
    rows = size = 0
    for batch in iterator:
        held.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
        if rows >= enough or size >= budget:
            peeked = PeekedSource(src, held, iterator, None, None if rows >= enough else rows)
            # planned for a length that does not depend on the stream's batch sizes
            peeked.assumed_rows = min(rows, enough)
            return peeked
    table = pa.Table.from_batches(held, schema=src.schema)
    return TableSource(table, None, src.batch_rows, description=src.description)
