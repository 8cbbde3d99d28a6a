"""ChunkReader: fixed-size feature-major chunks, zero-copy where possible, exact error places."""
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iwpfast.exceptions import InvalidInputError
from iwpfast.io.reader import ChunkReader, default_chunk_rows

N = 20_000


def make_table(n=N, seed=0):
    rng = np.random.default_rng(seed)
    return pa.table({
        "a": rng.normal(size=n).astype(np.float32),
        "b": rng.normal(size=n).astype(np.float32),
        "c": rng.normal(size=n),
        "y": np.where(rng.random(n) < 0.5, -1, 1).astype(np.int8),
    })


@pytest.fixture
def table():
    return make_table()


def test_chunks_have_the_fixed_size_and_the_right_rows(table, tmp_path):
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=3000)
    r = ChunkReader(str(tmp_path / "f.parquet"), [["a", "b"]], ["y"], 1024, start_row=7)
    chunks = list(r)
    assert [c.n_rows for c in chunks[:-1]] == [1024] * (len(chunks) - 1)
    assert sum(c.n_rows for c in chunks) == N - 7
    assert chunks[0].start_row == 7 and chunks[-1].end_row == N
    a = np.concatenate([c.features[0][0] for c in chunks])
    np.testing.assert_array_equal(a, table["a"].to_numpy()[7:])
    assert chunks[0].labels["y"].dtype == np.int8  # labels keep their type (no copy)
    assert r.stats.rows == N - 7 and r.stats.chunks == len(chunks)


def test_aligned_chunks_are_zero_copy_views(table, tmp_path):
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=4096)
    r = ChunkReader(str(tmp_path / "f.parquet"), [["a", "b"]], ["y"], 2048)
    chunks = list(r)
    # 4096 = 2 chunks per row group; the last row group (N % 4096 = 3616 rows) gives 2048 + 1568
    assert r.stats.copied_chunks == 0 and r.stats.copied_bytes == 0
    assert r.stats.zero_copy_columns == 3 * len(chunks)
    x = chunks[0].features[0][0]
    assert not x.flags.owndata and not x.flags.writeable  # a view of Arrow memory


def test_straddling_chunks_are_copied_once_and_counted(table, tmp_path):
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=3000)
    r = ChunkReader(str(tmp_path / "f.parquet"), [["a", "b"]], ["y"], 2000)
    list(r)
    # chunk k covers rows [2000k, 2000k+2000): the row-group boundaries 3000, 9000, 15000 fall
    # inside chunks 1, 4, 7 (6000, 12000, 18000 are chunk boundaries): exactly 3 chunks copied
    assert r.stats.copied_chunks == 3
    assert r.stats.copied_bytes == 3 * 2000 * (4 + 4 + 1)


def test_mixed_dtype_group_is_float64(table):
    r = ChunkReader(table, [["a", "c"], ["a", "b"]], ["y"], 5000)
    ch = next(iter(r))
    assert all(x.dtype == np.float64 for x in ch.features[0])
    assert all(x.dtype == np.float32 for x in ch.features[1])
    np.testing.assert_array_equal(ch.features[0][0], table["a"].to_numpy()[:5000].astype(np.float64))
    r.close()


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_mid_stream_names_file_row_group_column_row(table, tmp_path, bad):
    b = table["b"].to_numpy().copy()
    b[12_345] = bad
    t = table.set_column(1, "b", pa.array(b))
    pq.write_table(t, tmp_path / "bad.parquet", row_group_size=5000)
    r = ChunkReader(str(tmp_path / "bad.parquet"), [["a", "b"]], ["y"], 1000)
    seen = 0
    with pytest.raises(InvalidInputError) as info:
        for ch in r:
            seen = ch.end_row
    msg = str(info.value)
    # row 12345 = row 2345 of row group 2
    assert "bad.parquet" in msg and "row group 2" in msg and "'b'" in msg
    assert "row 2345 of that row group" in msg and "row 12345 of the stream" in msg
    assert seen <= 12_000  # the chunks before the bad one were delivered, not the bad one


def test_null_mid_stream_is_refused(table, tmp_path):
    y = pa.array(table["y"].to_numpy(), mask=np.arange(N) == 777)
    t = table.set_column(3, "y", y)
    pq.write_table(t, tmp_path / "null.parquet", row_group_size=500)
    with pytest.raises(InvalidInputError, match=r"null value in column 'y'.*row group 1, row 277"):
        list(ChunkReader(str(tmp_path / "null.parquet"), [["a"]], ["y"], 100))


def test_corrupt_parquet_page_names_the_file(table, tmp_path):
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=5000, compression="snappy")
    raw = bytearray((tmp_path / "f.parquet").read_bytes())
    # garble the first page header (right after the 4-byte magic), keep the footer intact
    raw[4:40] = np.random.default_rng(5).integers(0, 256, 36, dtype=np.uint8).tobytes()
    (tmp_path / "f.parquet").write_bytes(bytes(raw))
    with pytest.raises(InvalidInputError, match="f.parquet.*truncated or corrupt"):
        list(ChunkReader(str(tmp_path / "f.parquet"), [["a", "b"]], ["y"], 1000))


def test_missing_column_lists_the_columns_found(table):
    with pytest.raises(InvalidInputError, match=r"\['z'\].*\['a', 'b', 'c', 'y'\]"):
        ChunkReader(table, [["a", "z"]], ["y"])


def test_non_numeric_column_is_refused():
    t = pa.table({"a": [1.0, 2.0], "s": ["x", "y"]})
    with pytest.raises(InvalidInputError, match="column 's' has type string"):
        ChunkReader(t, [["a"]], ["s"])


def _reader_threads():
    return [t for t in threading.enumerate() if t.name == "iwpfast-reader"]


def test_thread_stops_on_early_exit_and_on_exception(table):
    r = ChunkReader(table, [["a"]], ["y"], 100)
    for i, _ in enumerate(r):
        if i == 3:
            break
    r.close()
    assert not _reader_threads()
    r = ChunkReader(table, [["a"]], ["y"], 100)
    with pytest.raises(KeyboardInterrupt):
        for i, _ in enumerate(r):
            if i == 2:
                raise KeyboardInterrupt
    assert not _reader_threads()


def test_decode_errors_reach_the_caller():
    def batches():
        yield pa.record_batch({"a": [1.0, 2.0], "y": [1, -1]})
        raise OSError("disk went away")
    schema = pa.schema([("a", pa.float64()), ("y", pa.int64())])
    src = pa.RecordBatchReader.from_batches(schema, batches())
    with pytest.raises(OSError, match="disk went away"):
        list(ChunkReader(src, [["a"]], ["y"], 1))
    assert not _reader_threads()


def test_default_chunk_rows_bounds():
    assert default_chunk_rows(41) == 1 << 18
    assert default_chunk_rows(401) == 1 << 15
    assert default_chunk_rows(10**7) == 1 << 13


MEMORY_SCRIPT = textwrap.dedent("""
    import resource, sys
    import numpy as np, pyarrow as pa, pyarrow.parquet as pq
    from iwpfast.io.reader import ChunkReader
    path = sys.argv[1]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    total = 0.0
    for ch in ChunkReader(path, [["a", "b", "c"]], ["y"], 8192):
        total += float(ch.features[0][0][0])
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base)  # KiB
""")


def test_memory_does_not_grow_with_the_number_of_rows(tmp_path):
    # Peak RSS while reading a 0.5 M-row and a 4 M-row file (6.5 MB and 52 MB of columns) in
    # 8192-row chunks.  Holding the data would add >= 45 MB for the big file; a bounded reader
    # adds only allocator noise.  RSS of a subprocess, so the test's own memory does not count.
    sizes = {}
    for n in (500_000, 4_000_000):
        rng = np.random.default_rng(1)
        t = pa.table({c: rng.normal(size=n).astype(np.float32) for c in "abc"} |
                     {"y": np.ones(n, dtype=np.int8)})
        path = tmp_path / f"m{n}.parquet"
        pq.write_table(t, path, compression="none")
        del t
        out = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(path)],
                             capture_output=True, text=True, check=True)
        sizes[n] = int(out.stdout.strip()) / 1024  # MiB
    assert sizes[4_000_000] - sizes[500_000] < 20, sizes


def test_source_batch_is_one_chunk_only_when_every_boundary_is_a_chunk_boundary(table, tmp_path,
                                                                                monkeypatch):
    import iwpfast.io.reader as reader_module
    # chunks of 2048 rows: batches of whole chunks of at least 4096 rows (here: 2 chunks)
    monkeypatch.setattr(reader_module, "MIN_SOURCE_BATCH_ROWS", 4096)
    assert ChunkReader(table, [["a"]], ["y"], 8192).source_batch_rows() == 8192
    pq.write_table(table, tmp_path / "aligned.parquet", row_group_size=4096)
    pq.write_table(table, tmp_path / "ragged.parquet", row_group_size=3000)
    aligned = ChunkReader(str(tmp_path / "aligned.parquet"), [["a"]], ["y"], 2048)
    assert aligned.source_batch_rows() == 4096
    chunks = list(aligned)
    assert aligned.stats.copied_chunks == 0 and [c.n_rows for c in chunks[:-1]] == [2048] * 9
    # resuming at a row that is not a multiple of the chunk moves every boundary off the chunks
    assert ChunkReader(str(tmp_path / "aligned.parquet"), [["a"]], ["y"], 2048,
                       start_row=100).source_batch_rows() == 4 * 2048
    # resuming at 4096: boundaries 8192, 12288, ... are still chunk boundaries from there
    assert ChunkReader(str(tmp_path / "aligned.parquet"), [["a"]], ["y"], 2048,
                       start_row=4096).source_batch_rows() == 4096
    assert ChunkReader(str(tmp_path / "ragged.parquet"), [["a"]], ["y"], 2048
                       ).source_batch_rows() == 4 * 2048
    # CSV: boundaries unknown before reading
    from pyarrow import csv
    csv.write_csv(table, tmp_path / "f.csv")
    assert ChunkReader(str(tmp_path / "f.csv"), [["a"]], ["y"], 2048
                       ).source_batch_rows() == 4 * 2048


def test_one_chunk_batches_give_the_same_rows_as_four_chunk_batches(table, tmp_path, monkeypatch):
    import iwpfast.io.reader as reader_module
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=4096)

    def rows(**kw):
        r = ChunkReader(str(tmp_path / "f.parquet"), [["a", "b"]], ["y"], 1024, **kw)
        chunks = list(r)
        return (np.concatenate([c.features[0][1] for c in chunks]),
                [c.start_row for c in chunks], r.stats.copied_chunks)

    b1, starts1, copied1 = rows(start_row=2048)
    monkeypatch.setattr(ChunkReader, "source_batch_rows",
                        lambda self: reader_module.SOURCE_BATCH_CHUNKS * self.chunk_rows)
    b4, starts4, copied4 = rows(start_row=2048)
    np.testing.assert_array_equal(b1, b4)
    np.testing.assert_array_equal(b1, table["b"].to_numpy()[2048:])
    assert starts1 == starts4 and copied1 == copied4 == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_validation_check_is_exact_for_overflowing_and_each_non_finite_value(dtype):
    big = np.finfo(dtype).max / 4      # finite, but the sum of a chunk of them (the check) is inf
    clean = np.full(3000, big, dtype=dtype)
    clean[1::2] = big / 2
    r = ChunkReader(pa.table({"a": clean, "y": np.ones(3000, np.int8)}), [["a"]], ["y"], 1000)
    assert sum(c.n_rows for c in r) == 3000   # no false alarm
    for bad in (np.nan, np.inf, -np.inf):
        for pos in (0, 1234, 2999):
            x = np.linspace(-1, 1, 3000).astype(dtype)
            x[pos] = bad
            r = ChunkReader(pa.table({"a": x, "y": np.ones(3000, np.int8)}), [["a"]], ["y"], 1000)
            with pytest.raises(InvalidInputError, match=f"row {pos} of the stream"):
                list(r)


def _parquet_threads():
    return [t for t in threading.enumerate() if t.name.startswith("iwpfast-parquet")]


@pytest.mark.parametrize("start_row", [0, 7, 6000, 14_999])
def test_row_groups_decoded_in_threads_give_the_chunks_read_in_turn(table, tmp_path, monkeypatch,
                                                                    start_row):
    from iwpfast.io import format_readers
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=3000)   # 7 row groups

    def read(threads):
        monkeypatch.setattr(format_readers, "PARQUET_DECODE_THREADS", threads)
        r = ChunkReader(str(tmp_path / "f.parquet"), [["a", "c"]], ["y"], 1024,
                        start_row=start_row)
        return [(c.origin, c.later_origins, c.n_rows, [x.copy() for x in c.features[0]],
                 c.labels["y"].copy()) for c in r]

    in_turn = read(1)
    for threads in (2, 3, 8):
        assert not _parquet_threads()
        threaded = read(threads)
        assert len(threaded) == len(in_turn)
        for a, b in zip(threaded, in_turn, strict=True):
            assert a[:3] == b[:3]
            for x, y in zip(a[3], b[3], strict=True):
                np.testing.assert_array_equal(x, y)
            np.testing.assert_array_equal(a[4], b[4])
    assert in_turn[0][0].global_row == start_row and sum(c[2] for c in in_turn) == N - start_row


def test_parquet_threads_stop_on_early_exit_and_errors(table, tmp_path, monkeypatch):
    from iwpfast.io import format_readers
    monkeypatch.setattr(format_readers, "PARQUET_DECODE_THREADS", 3)
    monkeypatch.setattr(format_readers, "PARQUET_THREAD_BATCHES", 1)
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=1000)  # 20 row groups
    r = ChunkReader(str(tmp_path / "f.parquet"), [["a"]], ["y"], 100)
    for i, _ in enumerate(r):
        if i == 3:
            break
    r.close()
    assert not _parquet_threads() and not _reader_threads()
    # a page garbled in row group 12: the error names the file and that row group, and every
    # thread is stopped
    pq.write_table(table, tmp_path / "g.parquet", row_group_size=1000, compression="snappy")
    raw = bytearray((tmp_path / "g.parquet").read_bytes())
    column = pq.ParquetFile(tmp_path / "g.parquet").metadata.row_group(12).column(0)
    at = column.data_page_offset
    raw[at:at + 24] = np.random.default_rng(5).integers(0, 256, 24, dtype=np.uint8).tobytes()
    (tmp_path / "g.parquet").write_bytes(bytes(raw))
    seen = 0
    with pytest.raises(InvalidInputError, match=r"g.parquet', row group 12: cannot be read") as e:
        for ch in ChunkReader(str(tmp_path / "g.parquet"), [["a", "b"]], ["y"], 1000):
            seen = ch.end_row
    assert seen == 12_000, e.value
    assert not _parquet_threads() and not _reader_threads()
    # an error of the reader itself (a NaN in a checked column): the threads are stopped at
    # once, not when the exception (whose traceback holds the reader's frames) is collected
    b = table["b"].to_numpy().copy()
    b[5432] = np.nan
    pq.write_table(table.set_column(1, "b", pa.array(b)), tmp_path / "h.parquet",
                   row_group_size=1000)
    with pytest.raises(InvalidInputError, match="non-finite value nan in column 'b'") as e:
        list(ChunkReader(str(tmp_path / "h.parquet"), [["a", "b"]], ["y"], 1000))
    assert not _parquet_threads() and not _reader_threads()


def test_threaded_batches_keep_the_schema_pyarrow_reads(table, tmp_path, monkeypatch):
    from iwpfast.io import format_readers
    from iwpfast.io.sources import open_source
    schema = pa.schema([pa.field("a", pa.float32(), nullable=False, metadata={b"unit": b"m"}),
                        pa.field("b", pa.float32()), pa.field("c", pa.float64()),
                        pa.field("y", pa.int8(), nullable=False)], metadata={b"release": b"{}"})
    pq.write_table(table.cast(schema), tmp_path / "f.parquet", row_group_size=3000)

    def batches(threads):
        monkeypatch.setattr(format_readers, "PARQUET_DECODE_THREADS", threads)
        src = open_source(str(tmp_path / "f.parquet"))
        return list(src.located_batches(["y", "a", "c"], start_row=100, batch_rows=1000))

    in_turn, threaded = batches(1), batches(3)
    assert len(in_turn) == len(threaded) > 7
    for (o1, b1), (o2, b2) in zip(in_turn, threaded, strict=True):
        assert o1 == o2 and b1.equals(b2)
        assert b1.schema.equals(b2.schema, check_metadata=True)
