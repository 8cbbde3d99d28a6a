"""Arrow streams in and out: any stream as a source, streams and file-likes as sinks, and release
metadata that survives DataFrame libraries (docs/streaming.md "Streams in and out")."""
import io
import os
import subprocess
import sys
import warnings

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import iwpfast
from iwpfast import IWPClassifier
from iwpfast.exceptions import InvalidInputError, ReleaseSpecError
from iwpfast.privacy import Privatized, privatize, read_release, release_stream

N = 3000
ROWS = 1024          # record_batch_rows: the raw file has one row group, so batches of ROWS
FIT = dict(alpha=1.0, learning_rate=0.01, variance_cap=2.0, progress=False)


def spec():
    return iwpfast.ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                               ranges="a=-1:1,b=-1:1", features=("a", "b"), label="y")


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    y = (a - 0.5 * b + 0.3 * rng.standard_normal(N) > 0).astype(np.int64)
    table = pa.table({"a": a, "b": b, "y": y})
    folder = tmp_path_factory.mktemp("etl")
    pq.write_table(table, folder / "raw.parquet")
    return table, folder


def release_of(source, folder, name, **kw):
    out = folder / f"{name}.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the seeded-release warning
        iwpfast.release(source, out, spec(), seed=3, overwrite=True, record_batch_rows=ROWS, **kw)
    return pq.read_table(out)


class Capsule:
    """Only the Arrow PyCapsule stream protocol: what pandas >= 2.2, polars and DuckDB export."""

    def __init__(self, table):
        self.table = table

    def __arrow_c_stream__(self, requested_schema=None):
        return self.table.__arrow_c_stream__(requested_schema)


def sources(table, folder):
    path = str(folder / "raw.parquet")
    return {
        "generator": lambda: (b for b in table.to_batches(max_chunksize=700)),
        "tables-generator": lambda: (table.slice(i, 500) for i in range(0, N, 500)),
        "list": lambda: table.to_batches(max_chunksize=300),
        "capsule": lambda: Capsule(table),
        "reader": lambda: pa.RecordBatchReader.from_batches(table.schema,
                                                            table.to_batches(max_chunksize=333)),
        "polars-lazy": lambda: pl.scan_parquet(path),
        "polars-frame": lambda: pl.from_arrow(table),
        "duckdb": lambda: duckdb.sql(f"select * from '{path}'"),
    }


@pytest.mark.parametrize("kind", ["generator", "tables-generator", "list", "capsule", "reader",
                                  "polars-lazy", "polars-frame", "duckdb"])
def test_every_stream_gives_the_release_of_the_parquet_file(raw, kind):
    table, folder = raw
    expected = release_of(str(folder / "raw.parquet"), folder, "ref")
    got = release_of(sources(table, folder)[kind](), folder, kind)
    assert got.equals(expected)
    assert got.num_rows == N


def test_a_later_item_with_another_schema_is_refused_by_index(raw):
    table, folder = raw
    good = table.to_batches(max_chunksize=1000)
    bad = pa.table({"a": table["a"], "b": table["b"].cast(pa.float32()), "y": table["y"]})

    def gen():
        yield good[0]
        yield good[1]
        yield bad.to_batches()[0]

    with pytest.raises(InvalidInputError, match="item 2 has the schema"):
        release_of(gen(), folder, "bad")
    assert not os.path.exists(folder / "bad.parquet")
    with pytest.raises(InvalidInputError, match="item 1 is a builtins.dict"):
        release_of(iter([good[0], {"a": 1}]), folder, "bad")


def test_fit_on_streams_is_the_fit_on_the_file(raw):
    table, folder = raw
    release_of(str(folder / "raw.parquet"), folder, "ref")
    path = str(folder / "ref.parquet")
    expected = IWPClassifier(**FIT).fit(path).coef_
    released = pq.read_table(path)        # its schema (and batches) carry the metadata
    for source in (iter(released.to_batches(max_chunksize=100)), Capsule(released),
                   pa.RecordBatchReader.from_batches(released.schema, released.to_batches(77))):
        np.testing.assert_array_equal(IWPClassifier(**FIT).fit(source).coef_, expected)


# ----------------------------------------------------------------------------------- sinks
@pytest.mark.parametrize("fmt", ["ipc", "parquet"])
def test_release_into_a_file_like_round_trips(raw, fmt):
    table, folder = raw
    expected = release_of(str(folder / "raw.parquet"), folder, "ref")
    for sink in (io.BytesIO(), pa.BufferOutputStream()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = iwpfast.release(str(folder / "raw.parquet"), sink, spec(), seed=3,
                                     record_batch_rows=ROWS, format=fmt)
        data = sink.getvalue() if isinstance(sink, io.BytesIO) else sink.getvalue().to_pybytes()
        got = (pa.ipc.open_stream(data).read_all() if fmt == "ipc"
               else pq.read_table(pa.BufferReader(data)))
        assert got.equals(expected) and result.rows_written == N
        back, back_spec = read_release(pa.ipc.open_stream(data) if fmt == "ipc"
                                       else pq.read_table(pa.BufferReader(data)))
        assert back_spec == spec() and back.num_rows == N


def test_a_failed_release_leaves_a_stream_without_its_end(raw):
    table, folder = raw
    bad = table.set_column(0, "a", pa.array(np.r_[table["a"].to_numpy()[:-1], np.nan]))
    sink = io.BytesIO()
    with pytest.raises(InvalidInputError, match="column 'a'"):
        iwpfast.release(bad, sink, spec(), record_batch_rows=ROWS, format="ipc")
    # the batches written before the error are there, the end-of-stream marker is not: a reader
    # that checks it (iwpfast's, for a file) refuses the stream as truncated
    assert not sink.getvalue().endswith(b"\xff\xff\xff\xff\x00\x00\x00\x00")
    path = folder / "cut.arrows"
    path.write_bytes(sink.getvalue())
    with pytest.raises(InvalidInputError, match="truncated"):
        iwpfast.io.open_source(str(path))


def test_a_failed_release_into_a_parquet_stream_leaves_no_readable_file(raw):
    table, folder = raw
    bad = table.set_column(0, "a", pa.array(np.r_[table["a"].to_numpy()[:-1], np.nan]))
    for sink in (io.BytesIO(), pa.BufferOutputStream()):
        with pytest.raises(InvalidInputError, match="column 'a'"):
            iwpfast.release(bad, sink, spec(), record_batch_rows=ROWS, format="parquet")
        data = sink.getvalue() if isinstance(sink, io.BytesIO) else sink.getvalue().to_pybytes()
        assert data                          # row groups went out before the bad row...
        with pytest.raises(pa.ArrowInvalid):  # ...but no footer: no readable Parquet file
            pq.read_table(pa.BufferReader(data))


def _cli_env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(),
                                                        os.environ.get("PYTHONPATH", "")]))


def _stdout_release(source, fmt):
    return [sys.executable, "-m", "iwpfast.cli", "release", str(source), "-", "--format", fmt,
            "--features", "a", "b", "--ranges", "a=-1:1", "b=-1:1", "--epsilon-x", "2",
            "--epsilon-y", "1", "--record-batch-rows", "256", "--progress", "none"]


@pytest.mark.parametrize("fmt", ["parquet", "ipc"])
def test_cli_a_release_to_stdout_that_fails_midway_says_discard(raw, fmt):
    table, folder = raw
    a = table["a"].to_numpy().copy()
    a[2000] = np.nan                       # after several batches of 256 rows went out
    pq.write_table(table.set_column(0, "a", pa.array(a)), folder / "bad.parquet")
    done = subprocess.run(_stdout_release(folder / "bad.parquet", fmt), capture_output=True,
                          env=_cli_env(), timeout=120)
    assert done.returncode != 0 and done.stdout
    errors = [line for line in done.stderr.decode().splitlines() if "error" in line]
    assert len(errors) == 1 and "column 'a'" in errors[0], done.stderr.decode()
    assert "bytes already written to stdout" in errors[0] and "discard them" in errors[0]
    assert "Traceback" not in done.stderr.decode()
    if fmt == "parquet":
        with pytest.raises(pa.ArrowInvalid):
            pq.read_table(pa.BufferReader(done.stdout))
    else:
        assert "cannot be retracted" in errors[0]


@pytest.mark.parametrize("fmt", ["parquet", "ipc"])
def test_cli_a_broken_pipe_on_stdout_fails_the_release(tmp_path, fmt):
    rng = np.random.default_rng(1)
    n = 100_000                            # far more than a pipe's buffer
    pq.write_table(pa.table({"a": rng.uniform(-1, 1, n), "b": rng.uniform(-1, 1, n),
                             "y": rng.integers(0, 2, n)}), tmp_path / "big.parquet")
    with open(tmp_path / "err.txt", "wb") as err:
        proc = subprocess.Popen(_stdout_release(tmp_path / "big.parquet", fmt),
                                stdout=subprocess.PIPE, stderr=err, env=_cli_env())
        assert proc.stdout is not None
        proc.stdout.read(1000)
        proc.stdout.close()                # the reader goes away (`| head -c 1000`)
        assert proc.wait(timeout=120) != 0
    text = (tmp_path / "err.txt").read_text()
    assert "broken pipe" in text and "discard them" in text and "Traceback" not in text, text
    assert len([line for line in text.splitlines() if "error" in line]) == 1, text


def test_release_stream_is_lazy_and_is_the_release(raw, monkeypatch):
    import iwpfast.io.sources as sources

    monkeypatch.setattr(sources, "STREAM_READ_AHEAD", 0)      # read in the caller's thread
    table, folder = raw
    expected = release_of(str(folder / "raw.parquet"), folder, "ref")
    pulled = []

    def counted():
        for batch in table.to_batches(max_chunksize=ROWS):
            pulled.append(batch.num_rows)
            yield batch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reader = release_stream(counted(), spec(), seed=3, record_batch_rows=ROWS)
        # the schema (and its release metadata) is there before any row was noised
        assert reader.schema.metadata[b"iwpfast.release"]
        assert pulled == [ROWS]           # the first item was read for its schema, no more
        first = reader.read_next_batch()
        assert first.num_rows == ROWS and len(pulled) <= 2
        rest = reader.read_all()
    got = pa.Table.from_batches([first, *rest.to_batches()])
    assert got.equals(expected)
    meta_spec = iwpfast.ReleaseSpec.from_metadata(reader.schema.metadata[b"iwpfast.release"])
    assert meta_spec == spec() and meta_spec.seeded


def test_cli_stdin_to_stdout(raw, tmp_path):
    table, folder = raw
    expected = release_of(str(folder / "raw.parquet"), folder, "ref")
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=999)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-m", "iwpfast.cli", "release", "-", "-", "--features", "a", "b",
         "--ranges", "a=-1:1", "b=-1:1", "--epsilon-x", "2", "--epsilon-y", "1", "--seed", "3",
         "--record-batch-rows", str(ROWS), "--progress", "none"],
        input=sink.getvalue().to_pybytes(), capture_output=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert pa.ipc.open_stream(done.stdout).read_all().equals(expected)
    assert b"released 3,000 rows" in done.stderr
    # and fit reads the release from stdin
    model = tmp_path / "m.json"
    fitted = subprocess.run(
        [sys.executable, "-m", "iwpfast.cli", "fit", "-", "--out", str(model), "--alpha", "1",
         "--variance-cap", "2", "--learning-rate", "0.01", "--progress", "none"],
        input=done.stdout, capture_output=True, env=env, timeout=120)
    assert fitted.returncode == 0, fitted.stderr.decode()
    coef = iwpfast.load(str(model)).coef_
    np.testing.assert_array_equal(coef, IWPClassifier(**FIT).fit(str(folder / "ref.parquet")).coef_)


# ------------------------------------------------------------------------- travelling metadata
def test_metadata_survives_pandas_polars_and_duckdb(raw):
    table, folder = raw
    release_of(str(folder / "raw.parquet"), folder, "ref")
    path = str(folder / "ref.parquet")
    expected = IWPClassifier(**FIT).fit(path).coef_
    released, rspec = read_release(path)
    assert rspec == spec() and rspec.row_count == N
    reader, _ = read_release(path, stream=True)
    assert isinstance(reader, pa.RecordBatchReader) and reader.read_all().equals(released)
    frames = [released.to_pandas(), pl.from_arrow(released), pl.scan_parquet(path),
              duckdb.sql(f"select * from '{path}'")]
    for frame in frames[:2]:
        # what a DataFrame library gives back has no release metadata: fit cannot debias it
        with pytest.raises(InvalidInputError, match="no release metadata"):
            IWPClassifier(**FIT).fit(frame)
    for frame in frames + [pd.read_parquet(path)]:
        np.testing.assert_array_equal(IWPClassifier(**FIT).fit(frame, release_spec=rspec).coef_,
                                      expected)
    np.testing.assert_array_equal(
        IWPClassifier(**FIT).fit(released.to_pandas(), release=path).coef_, expected)
    np.testing.assert_array_equal(
        IWPClassifier(**FIT).fit(released.to_pandas(), release=rspec).coef_, expected)
    other = iwpfast.ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                                ranges="a=-1:1,b=-1:1", features=("a", "b"), label="y")
    with pytest.raises(ReleaseSpecError, match="different releases"):
        IWPClassifier(**FIT).fit(path, release_spec=other)


def test_privatize_returns_what_fit_needs(raw):
    table, _ = raw
    X = np.column_stack([table["a"].to_numpy(), table["b"].to_numpy()])
    y = table["y"].to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = privatize(X, y, spec(), seed=5)
        from_table = privatize(table, spec=spec(), seed=5)
    X_tilde, y_tilde = result                  # the pair it always was
    assert isinstance(result, Privatized) and X_tilde.shape == (N, 2) and y_tilde.dtype == np.int8
    np.testing.assert_array_equal(from_table.X, X_tilde)
    np.testing.assert_array_equal(from_table.y, y_tilde)
    assert result.spec == spec() and result.spec.row_count == N and result.spec.seeded
    by_object = IWPClassifier(**FIT).fit(result).coef_
    by_spec = IWPClassifier(**FIT).fit(X_tilde, y_tilde, **result.fit_params()).coef_
    by_table = IWPClassifier(**FIT).fit(result.to_arrow()).coef_
    by_hand = IWPClassifier(**FIT).fit(X_tilde, y_tilde, noise_var=spec().sigma ** 2,
                                       epsilon_y=1.0, feature_bound=1.0).coef_
    np.testing.assert_array_equal(by_object, by_spec)
    np.testing.assert_array_equal(by_object, by_table)
    np.testing.assert_array_equal(by_object, by_hand)
    import pickle
    again = pickle.loads(pickle.dumps(result))
    assert again.spec == result.spec and np.array_equal(again.X, X_tilde)


def test_a_categorical_release_travels_too(tmp_path):
    """One-hot columns (a categorical feature) keep their names and noise through a DataFrame
    and through privatize."""
    rng = np.random.default_rng(3)
    raw = pa.table({"a": rng.uniform(-1, 1, 2000), "c": rng.choice(["u", "v", "w"], 2000),
                    "y": rng.integers(0, 2, 2000)})
    cat = iwpfast.ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.5, epsilon_y=1.0,
                              ranges="a=-1:1", categories={"c": ["u", "v", "w"]},
                              features=("a", "c"), label="y")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iwpfast.release(raw, tmp_path / "cat.parquet", cat, seed=1)
        result = privatize(raw, spec=cat, seed=1)
    table, back = read_release(tmp_path / "cat.parquet")
    assert list(back.released_features) == ["a", "c=u", "c=v", "c=w"] == table.column_names[:4]
    expected = IWPClassifier(**FIT).fit(tmp_path / "cat.parquet").coef_
    np.testing.assert_array_equal(
        IWPClassifier(**FIT).fit(table.to_pandas(), release_spec=back).coef_, expected)
    assert result.X.shape == (2000, 4)
    # the whole table in one chunk, as the file's 2,000 rows: the same noise, the same model
    np.testing.assert_array_equal(IWPClassifier(**FIT).fit(result).coef_, expected)
    np.testing.assert_array_equal(IWPClassifier(**FIT).fit(result.to_arrow()).coef_, expected)


def test_a_stream_destination_takes_one_release(raw):
    table, _ = raw
    with pytest.raises(InvalidInputError, match="stream destination .* takes one release"):
        iwpfast.release(table, io.BytesIO(), spec(), max_part_rows=1000)
    with pytest.raises(InvalidInputError, match="format='csv' for a stream destination"):
        iwpfast.release(table, io.BytesIO(), spec(), format="csv")


def test_a_stream_is_read_ahead_a_bounded_number_of_batches(raw):
    """A generator's batches are produced by a thread of their own (STREAM_READ_AHEAD = 2
    batches ahead of the release), no further: the release still equals the file's."""
    import time

    import iwpfast.io.sources as sources

    table, folder = raw
    pulled = []

    def counted():
        for batch in table.to_batches(max_chunksize=100):
            pulled.append(batch.num_rows)
            yield batch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = pa.Table.from_batches(list(release_stream(
            str(folder / "raw.parquet"), spec(), seed=3, record_batch_rows=100)))
        reader = release_stream(counted(), spec(), seed=3, record_batch_rows=100)
        first = reader.read_next_batch()
        time.sleep(0.3)                    # the producer thread fills its queue meanwhile
        # the schema's item, the batch handed out, STREAM_READ_AHEAD queued, one waiting to be
        assert sources.STREAM_READ_AHEAD == 2 and 3 <= len(pulled) <= 5 < N // 100
        rest = reader.read_all()
    assert pa.Table.from_batches([first, *rest.to_batches()]).equals(expected)


def test_a_release_of_randomized_response_codes_is_fitted_from_its_files(tmp_path):
    rng = np.random.default_rng(5)
    raw = pd.DataFrame({"a": rng.uniform(0, 1, 500), "c": rng.choice(["x", "y"], 500),
                        "y": rng.integers(0, 2, 500)})
    rr = iwpfast.ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                             ranges={"a": (0, 1)}, categories={"c": ["x", "y"]},
                             categorical_mechanism="rr", epsilon_categorical=1.0,
                             features=("a", "c"), label="y")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iwpfast.release(raw, tmp_path / "rr.parquet", rr, seed=1)
    table, back = read_release(tmp_path / "rr.parquet")
    with pytest.raises(InvalidInputError, match="randomized-response categorical columns"):
        IWPClassifier(**FIT).fit(table.to_pandas(), release_spec=back)
