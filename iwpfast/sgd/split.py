"""The validation split of a tuning scan: which rows train and which are held out.

The rows are cut into blocks of ``block`` consecutive rows and every m-th block (m = round(1/f)
for a validation fraction f; the last of each group of m) is held out.  Blocks spread the
hold-out over the whole file (a file sorted by, say, state is not validated on its last state
only) while every piece stays a zero-copy slice, and the split depends only on the row numbers:
the same data always splits the same way.  ``iwpfast.sgd.grid_scan`` scans the training part
and ``iwpfast.sgd.scoring`` scores the held-out one.
"""
from __future__ import annotations

from ..exceptions import InvalidInputError


def _block_rows(n_rows: int | None, period: int) -> int:
    """Blocks small enough for >= 20 validation blocks, large enough to keep slicing cheap."""
    if n_rows is None:
        return 8192
    return int(min(8192, max(1, n_rows // (20 * period))))


def validation_period(fraction: float) -> int:
    """m = round(1/f): every m-th block is held out."""
    if not (isinstance(fraction, (int, float)) and not isinstance(fraction, bool)
            and 0.0 < fraction <= 0.5):
        raise InvalidInputError(f"validation_fraction={fraction!r} must be in (0, 0.5]; e.g. 0.1 holds "
                                "out a tenth of the rows for choosing the hyper-parameters")
    return max(2, int(round(1.0 / fraction)))


def validation_rows(n_rows: int, fraction: float) -> int:
    """The rows ``make_split`` holds out of ``n_rows``."""
    period = validation_period(fraction)
    return _split_counts(int(n_rows), period, _block_rows(int(n_rows), period))[1]


def make_split(source, fraction: float, mapper=None):
    """(training part, validation part) of a Source: two ``iwpfast.io.views.PartSource`` views,
    both with their batches mapped by ``mapper`` (labels recoded, raw features scaled...)."""
    from ..io.sources import Source, open_source
    from ..io.views import PartSource
    src = source if isinstance(source, Source) else open_source(source)
    from ..io.peek import PeekedSource
    if not src.rereadable and not isinstance(src, PeekedSource):
        raise InvalidInputError(
            f"{src.description} can be read only once, but a validation split reads it twice; pass a "
            "file, a Table or arrays, or a separate validation release (validation=...)")
    period = validation_period(fraction)
    # a stream (``iwpfast.io.peek``): blocks for its declared length, or its peeked rows
    block = _block_rows(getattr(src, "split_rows", src.num_rows), period)
    return (PartSource(src, period=period, block=block, validation=False, mapper=mapper),
            PartSource(src, period=period, block=block, validation=True, mapper=mapper))


def pass_rows(train) -> int | None:
    """The training rows a tuning scan plans for (the tail average's start, the rungs): the
    part's own, else for a stream of unknown length those of the rows it read ahead
    (``iwpfast.io.peek.PeekedSource.assumed_rows``: it is tuned as those rows alone would be)."""
    if train.num_rows is not None:
        return train.num_rows
    assumed = getattr(getattr(train, "inner", None), "assumed_rows", None)
    if assumed is None or getattr(train, "period", None) is None:
        return assumed
    from ..io.views import part_rows
    return part_rows(0, assumed, train.period, train.block, False)


def _split_counts(n: int, period: int, block: int) -> tuple[int, int]:
    from ..io.views import split_counts
    return split_counts(n, period, block)



def open_parts(source, validation_fraction, validation, mapper, validation_mapper):
    """(training source, validation source, reads of the data) of a tuning scan."""
    from ..io.sources import Source, open_source
    from ..io.views import PartSource
    src = source if isinstance(source, Source) else open_source(source)
    if validation is None:
        train, val = make_split(src, validation_fraction, mapper)
        return train, val, 2.0
    val = validation if isinstance(validation, Source) else open_source(validation)
    if validation_mapper is not None:
        val = PartSource(val, mapper=validation_mapper)
    train = src if mapper is None else PartSource(src, mapper=mapper)
    passes = 1.0 + (1.0 if val.num_rows is None or src.num_rows is None
                    else val.num_rows / max(src.num_rows, 1))
    return train, val, passes


def scoring_source(val, held, columns):
    """(the source the hold-out is scored from, reads of the data saved): the held rows when the
    training scan held every one of them, else the validation part (read again)."""
    source = None if held is None else held.source(columns)
    return (val, 0.0) if source is None else (source, 1.0)
