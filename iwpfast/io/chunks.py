"""What the training reader hands out: :class:`Chunk` (feature-major columns of a run of rows and
where they come from) and :class:`ReaderStats` (the counters of one pass).

Its own module so that the sources that build chunks themselves (``iwpfast.io.arrays``) and the
reader (``iwpfast.io.reader``) share it without importing each other.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..exceptions import BadDataError, InvalidInputError
from .source_base import BatchOrigin


@dataclass
class ReaderStats:
    """Counters of one pass.  ``wait_s``: time the caller spent waiting for a chunk (decode not
    hidden behind the kernel)."""

    chunks: int = 0
    rows: int = 0
    zero_copy_columns: int = 0
    copied_columns: int = 0
    copied_chunks: int = 0
    copied_bytes: int = 0
    wait_s: float = 0.0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Chunk:
    """One chunk of rows.

    features: one tuple of p 1-D arrays per feature group (``features[g][j]`` is column
    ``feature_groups[g][j]``).  labels: {column: 1-D array}.  origin: where the first row comes from
    (file index, file, row group, row in the group, global row).  end_row: global row after the
    last row.  later_origins: ((offset in the chunk, origin), ...) of the batches after the first
    that a chunk straddling a row-group / record-batch / file boundary was copied from (empty
    otherwise), so that ``describe`` names the right group for every row.
    """

    features: list[tuple[np.ndarray, ...]]
    labels: dict[str, np.ndarray]
    origin: BatchOrigin
    n_rows: int
    later_origins: tuple[tuple[int, BatchOrigin], ...] = ()

    def describe(self, offset: int) -> str:
        """Human-readable place of row ``offset`` of this chunk (file, row group, row)."""
        start, origin = 0, self.origin
        for piece_start, piece_origin in self.later_origins:
            if piece_start > offset:
                break
            start, origin = piece_start, piece_origin
        return origin.describe(offset - start)

    @property
    def start_row(self) -> int:
        return self.origin.global_row

    @property
    def end_row(self) -> int:
        return self.origin.global_row + self.n_rows


def non_finite_value_error(value, column: str, where: str) -> InvalidInputError:
    """The error for a NaN/inf ``value`` in a feature or label ``column`` of training data at
    ``where`` (a ``describe`` text): one wording whether the reader or the SGD scan finds it."""
    return BadDataError(
        f"non-finite value {float(value)!r} in column {column!r} at {where}. Remove or fix the "
        f"rows with NaN/inf before training.")
