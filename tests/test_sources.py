"""open_source: every accepted input gives the same rows, in order, with exact origins."""
import json

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from pyarrow import csv

from iwpfast.exceptions import InvalidInputError, ReleaseSpecError
from iwpfast.io.sources import open_source

N = 5003
META = {"format": "iwpfast.release", "format_version": 1, "row_count": N}


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    t = pa.table({"a": rng.normal(size=N), "b": rng.normal(size=N),
                  "y": np.where(rng.random(N) < 0.5, -1, 1).astype(np.int8)})
    return t.replace_schema_metadata({b"iwpfast.release": json.dumps(META).encode()})


@pytest.fixture(scope="module")
def files(table, tmp_path_factory):
    d = tmp_path_factory.mktemp("src")
    pq.write_table(table, d / "f.parquet", row_group_size=1500, compression="none")
    feather.write_feather(table, d / "f.arrow", chunksize=1200, compression="uncompressed")
    with pa.OSFile(str(d / "s.arrows"), "wb") as f:
        w = pa.ipc.new_stream(f, table.schema)
        w.write_table(table, max_chunksize=999)
        w.close()
    csv.write_csv(table, d / "f.csv")
    parts = d / "parts"
    parts.mkdir()
    for i, lo in enumerate(range(0, N, 2000)):
        pq.write_table(table.slice(lo, 2000), parts / f"part-{i:03d}.parquet", row_group_size=700)
    return d


def all_inputs(table, d):
    return {
        "parquet": str(d / "f.parquet"),
        "ipc-file": str(d / "f.arrow"),
        "ipc-stream": str(d / "s.arrows"),
        "csv": str(d / "f.csv"),
        "directory": str(d / "parts"),
        "glob": str(d / "parts" / "part-*.parquet"),
        "dataset": ds.dataset(str(d / "parts")),
        "in-memory-dataset": ds.dataset(table),
        "table": table,
        "reader": pa.RecordBatchReader.from_batches(table.schema, table.to_batches(333)),
        "pandas": table.to_pandas(),
        "dict": {"a": table["a"].to_numpy(), "y": table["y"].to_numpy()},
        "tuple": (np.column_stack([table["a"].to_numpy(), table["b"].to_numpy()]),
                  table["y"].to_numpy()),
    }


@pytest.mark.parametrize("start", [0, 1, 1499, 1500, 3777])
def test_every_input_gives_the_same_rows_from_any_start(table, files, start):
    for name, src in all_inputs(table, files).items():
        cols = ["x0", "y"] if name == "tuple" else ["a", "y"]
        s = open_source(src, cols, record_batch_rows=640)
        got = list(s.located_batches(start_row=start))
        assert all(b.num_rows <= 640 for _, b in got), name
        a = np.concatenate([b.column(0).to_numpy() for _, b in got])
        y = np.concatenate([b.column(1).to_numpy() for _, b in got])
        np.testing.assert_array_equal(a, table["a"].to_numpy()[start:], err_msg=name)
        np.testing.assert_array_equal(y, table["y"].to_numpy()[start:], err_msg=name)
        # origins are contiguous global rows
        rows = [o.global_row for o, _ in got]
        sizes = [b.num_rows for _, b in got]
        assert rows[0] == start and all(r + k == r2 for r, k, r2 in zip(rows, sizes, rows[1:], strict=False))


def test_parquet_origins_name_row_group_and_offset(files):
    s = open_source(str(files / "parts"), ["a"], record_batch_rows=500)
    got = [(o.file_index, o.row_group, o.group_row, o.global_row)
           for o, _ in s.located_batches(start_row=2750)]
    # file 1 holds rows 2000..3999 in row groups of 700: row 2750 is row 50 of its row group 1
    assert got[0] == (1, 1, 50, 2750)
    assert got[1] == (1, 1, 500, 3200)  # batches keep their alignment inside the row group
    assert got[2] == (1, 2, 0, 3400)


def test_metadata_and_row_counts(table, files):
    for name, src in all_inputs(table, files).items():
        s = open_source(src)
        expect_rows = None if name in ("ipc-stream", "csv", "reader", "in-memory-dataset") else N
        assert s.num_rows == expect_rows, name
        if name in ("parquet", "ipc-file", "ipc-stream", "directory", "glob", "dataset",
                    "in-memory-dataset", "table", "reader"):
            assert s.release_metadata == META, name
        else:
            assert s.release_metadata is None, name


def test_missing_column_lists_the_columns_found(files):
    with pytest.raises(InvalidInputError, match=r"\['nope'\].*found are \['a', 'b', 'y'\]"):
        open_source(str(files / "f.parquet"), ["a", "nope"])


def test_corrupt_release_metadata_is_a_release_spec_error(table, tmp_path):
    bad = table.replace_schema_metadata({b"iwpfast.release": b"{not json"})
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(ReleaseSpecError, match="not valid JSON"):
        open_source(str(tmp_path / "bad.parquet"))


def test_truncated_parquet_names_the_file(files, tmp_path):
    raw = (files / "f.parquet").read_bytes()
    path = tmp_path / "cut.parquet"
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(InvalidInputError, match="cut.parquet.*truncated or corrupt"):
        open_source(str(path))


def test_reader_can_be_read_once(table):
    s = open_source(pa.RecordBatchReader.from_batches(table.schema, table.to_batches()))
    list(s.batches())
    with pytest.raises(InvalidInputError, match="read only once"):
        list(s.batches())


def test_files_with_different_release_metadata_are_refused(table, tmp_path):
    pq.write_table(table, tmp_path / "a.parquet")
    other = table.replace_schema_metadata({b"iwpfast.release": json.dumps({"x": 1}).encode()})
    pq.write_table(other, tmp_path / "b.parquet")
    with pytest.raises(ReleaseSpecError, match="other release metadata"):
        open_source(str(tmp_path))


def test_unknown_input_type_says_what_is_accepted():
    with pytest.raises(InvalidInputError, match="Parquet/IPC/CSV path"):
        open_source(42)


def test_group_ends_are_the_storage_boundaries(table, files):
    assert open_source(str(files / "f.parquet")).group_ends() == [1500, 3000, 4500, N]
    # files of 2000, 2000, 1003 rows in row groups of 700
    assert open_source(str(files / "parts")).group_ends() == [700, 1400, 2000, 2700, 3400, 4000,
                                                              4700, N]
    assert open_source(str(files / "f.arrow")).group_ends()[:2] == [1200, 2400]
    assert open_source(str(files / "f.csv")).group_ends() is None
    assert open_source(str(files / "s.arrows")).group_ends() is None
    t = pa.concat_tables([table.slice(0, 100), table.slice(100)])
    assert open_source(t).group_ends() == [100, N]
