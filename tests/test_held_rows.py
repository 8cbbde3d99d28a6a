"""HeldRows: the validation rows a training view passes over, held so the hold-out is scored
without a second read (iwpfast.io.views; docs/tuning.md "What it costs")."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from iwpfast.io.sources import open_source
from iwpfast.io.views import HeldRows, PartSource, column_mapper


def _parts(table, hold, mapper=None):
    src = open_source(table)
    train = PartSource(src, period=4, block=7, validation=False, mapper=mapper, hold=hold)
    val = PartSource(src, period=4, block=7, validation=True, mapper=mapper)
    return train, val


def _rows(source, columns):
    return pa.Table.from_batches(list(source.batches(columns))).select(columns)


def _table(n=1000):
    rng = np.random.default_rng(3)
    return pa.Table.from_batches(pa.table({
        "a": rng.normal(size=n).astype(np.float32), "b": rng.normal(size=n),
        "y": rng.integers(0, 2, n).astype(np.int8)}).to_batches(max_chunksize=93))


def test_held_rows_are_the_validation_part_mapped():
    table = _table()
    mapper = column_mapper({"y": lambda v: 2.0 * v - 1.0})
    hold = HeldRows(0, 1 << 20)
    train, val = _parts(table, hold, mapper)
    hold.n_rows = val.num_rows
    for _ in range(2):                  # a repeated scan holds the rows afresh
        n_train = sum(b.num_rows for b in train.batches(["a", "b", "y"]))
        assert n_train == train.num_rows
        held = hold.source(["a", "b", "y"])
        assert held is not None
        assert _rows(held, ["a", "b", "y"]).equals(_rows(val, ["a", "b", "y"]))
    assert _rows(held, ["y"]).column("y").type == pa.float64()
    assert hold.source(["a", "z"]) is None          # a column the scan did not read


def test_held_rows_give_up_and_the_part_is_read_again():
    table = _table()
    n_val = PartSource(open_source(table), period=4, block=7, validation=True).num_rows
    # over the budget (9 bytes a row here)
    hold = HeldRows(n_val, 9 * n_val - 1)
    train, _ = _parts(table, hold)
    list(train.batches(["a", "b", "y"]))
    assert hold.source(["a", "b", "y"]) is None
    # nulls (row 21 is in the first validation block), and columns that are not plain numbers
    for bad in (pa.array([1.0] * 21 + [None] + [1.0] * 978), pa.array(["s"] * 1000)):
        hold = HeldRows(n_val, 1 << 20)
        train, _ = _parts(table.append_column("c", bad), hold)
        list(train.batches(["a", "c", "y"]))
        assert hold.source(["a", "c", "y"]) is None
    # a scan stopped early has not held every row
    hold = HeldRows(n_val, 1 << 20)
    train, _ = _parts(table, hold)
    for _ in zip(range(3), train.batches(["a", "y"]), strict=False):
        pass
    assert hold.source(["a", "y"]) is None


def test_the_training_part_is_one_piece_per_run_of_training_blocks():
    # period 4, block 7: rows [28g, 28g + 21) of each group g are training rows, one piece per
    # group within a batch of the source (batches of 93 rows cut a run in two), resumable at
    # any row
    n = 1000
    table = _table(n)
    # a table is read in batches of record_batch_rows whatever its chunks: 93 rows here
    src = open_source(table, record_batch_rows=93)
    train = PartSource(src, period=4, block=7, validation=False)
    rows = np.arange(n)
    expected = rows[(rows // 7) % 4 != 3]
    a = table.column("a").to_numpy()
    pieces = list(train.located_batches(["a"], 0))
    assert np.array_equal(np.concatenate([p.column("a").to_numpy() for _, p in pieces]),
                          a[expected])
    runs = {(g0 // 28, g0 // 93) for g0 in expected}   # (group, source batch) pairs
    assert len(pieces) == len(runs)
    for start in (0, 5, 20, 21, 400):
        resumed = list(train.located_batches(["a"], start))
        assert resumed[0][0].global_row == start
        got = np.concatenate([p.column("a").to_numpy() for _, p in resumed])
        assert np.array_equal(got, a[expected[start:]])
