"""'auto' on streams of unknown length (docs/streaming.md "'auto' on a stream"): a stream that ends
within the read-ahead, or one whose length is declared, is tuned bit for bit as the same rows read
from a Parquet file; a longer stream chooses as the file within the hold-out's standard errors; the
validation rows it holds are bounded; a stream too short to hold rows out falls back as a file."""
import warnings

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import iwpfast
import iwpfast.io.peek as peek
from iwpfast import IWPClassifier
from iwpfast.exceptions import InvalidInputError
from iwpfast.io.sources import open_source
from iwpfast.io.views import HeldRows
from iwpfast.sgd import tuning
from tests.conftest import write_release_rows

N = 4000


def spec():
    return iwpfast.ReleaseSpec(epsilon_x=4.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                               ranges="a=-1:1,b=-1:1", features=("a", "b"), label="y")


def clean(n, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    return a, b, (a - 0.5 * b + 0.3 * rng.standard_normal(n) > 0).astype(np.int64)


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    folder = tmp_path_factory.mktemp("auto_streams")
    a, b, y = clean(N, 0)
    path = folder / "rel.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the seeded-release warning
        iwpfast.release(pa.table({"a": a, "b": b, "y": y}), path, spec(), seed=3)
    return str(path), pq.read_table(path)


def fit(source, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the grid's edge / cap notes, alike for both
        # the SGD search (a file's default also weighs the moment model, which a stream read
        # once cannot: estimators/_across.py)
        return IWPClassifier(progress=False, solver="sgd").fit(source, **kw)


@pytest.fixture(scope="module")
def file_model(released):
    return fit(released[0])


def streams(path, table):
    return {
        "generator": lambda: (b for b in table.to_batches(max_chunksize=700)),
        "reader": lambda: pa.RecordBatchReader.from_batches(table.schema,
                                                            table.to_batches(max_chunksize=333)),
        "polars-lazy": lambda: pl.scan_parquet(path),     # loses the metadata: release=path
    }


def same_fit(a, b):
    assert (a.alpha_, a.learning_rate_) == (b.alpha_, b.learning_rate_)
    assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
    assert a.tuning_["n_validation"] == b.tuning_["n_validation"]
    assert a.tuning_["risk"] == b.tuning_["risk"] or np.allclose(
        a.tuning_["risk"], b.tuning_["risk"], rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("kind", ["generator", "reader", "polars-lazy"])
def test_a_stream_that_ends_within_the_read_ahead_is_tuned_as_the_file(released, file_model,
                                                                       kind):
    path, table = released
    model = fit(streams(path, table)[kind](), release=path)
    same_fit(model, file_model)
    assert model.tuning_["n_validation"] > tuning.MIN_VALIDATION_ROWS


def test_a_declared_length_is_tuned_as_the_file_without_reading_ahead(released, single_holdout,
                                                                     monkeypatch):
    path, table = released
    # nothing may be read ahead: a peek of 0 bytes would stop after the first batch
    monkeypatch.setattr(peek, "STREAM_PEEK_BYTES", 0)
    model = fit((b for b in table.to_batches(max_chunksize=500)), n_rows_total=N)
    # a stream read once has one hold-out; the file's fit with the same one (on small data the
    # file's default cross-validates, sgd/crossval.py)
    same_fit(model, fit(path))
    with pytest.raises(InvalidInputError, match="n_rows_total=3999 but"):
        fit(path, n_rows_total=N - 1)
    with pytest.raises(InvalidInputError, match="declared|declares"):
        fit((b for b in table.to_batches(max_chunksize=500)), n_rows_total=N - 100)


def test_a_stream_longer_than_the_read_ahead_chooses_as_the_file_within_its_errors(
        released, file_model, monkeypatch):
    path, table = released
    # the read-ahead stops after a few 500-row batches (2,500 rows): the split's blocks (12 rows,
    # not the file's 20) and the tail average's start are planned for the rows read ahead
    monkeypatch.setattr(peek, "STREAM_PEEK_BYTES", 20_000)
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
    model = fit(open_source(reader, record_batch_rows=500))
    assert model.tuning_["n_train"] + model.tuning_["n_validation"] == N
    assert model.tuning_["n_validation"] == pytest.approx(N / 10, abs=10)
    points = list(zip(file_model.tuning_["alpha"], file_model.tuning_["learning_rate"],
                      strict=True))
    j_file = file_model.tuning_["chosen"].index(True)
    j_stream = points.index((model.alpha_, model.learning_rate_))
    risk, se = file_model.tuning_["risk"], file_model.tuning_["stderr"]
    # the file's hold-out cannot tell the stream's choice from its own: within 2 of that head's
    # standard errors (unpaired, so looser than the paired rule's)
    assert risk[j_stream] - risk[j_file] <= 2.0 * se[j_stream]
    a, b, y = clean(20_000, 9)
    acc = [np.mean(m.predict({"a": a, "b": b}) == y) for m in (file_model, model)]
    # two models of the same rows on 20,000 clean test rows: 3 standard errors of a difference
    assert abs(acc[0] - acc[1]) <= 3 * np.sqrt(2 * 0.25 / 20_000) + 0.02


def test_the_validation_rows_a_stream_holds_are_bounded(released, monkeypatch):
    path, table = released
    held = HeldRows(None, 40_000, one_shot=True, description="<stream>")
    piece = pa.record_batch({"a": np.zeros(300), "y": np.ones(300, np.int8)})   # 9 bytes a row
    for _ in range(14):                                   # 4,200 rows: 37,800 bytes
        held.add(piece)
    assert held.filled == 4200 and sum(x.nbytes for x in held.arrays) <= 40_000
    with pytest.raises(InvalidInputError, match="HELD_VALIDATION_BYTES"):
        held.add(piece)
    assert held.source(["a", "y"]) is None
    monkeypatch.setattr(peek, "STREAM_PEEK_BYTES", 20_000)
    monkeypatch.setenv("IWPFAST_HELD_VALIDATION_BYTES", "1000")
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
    with pytest.raises(InvalidInputError, match="smaller validation_fraction"):
        fit(open_source(reader, record_batch_rows=500))


def test_a_stream_too_short_to_hold_out_falls_back_as_a_small_file(released, tmp_path):
    path, table = released
    small = table.slice(0, 200)
    write_release_rows(table, 0, 200, tmp_path / "small.parquet")
    expected = fit(str(tmp_path / "small.parquet"))
    model = fit(b for b in small.to_batches(max_chunksize=64))
    assert model.tuning_["rule"].startswith("too few rows")
    same_fit(model, expected)


def test_cli_fit_auto_from_stdin_is_the_file_fit(released, file_model, tmp_path):
    import json
    import subprocess
    import sys
    path, table = released
    stream = tmp_path / "rel.arrows"
    with pa.OSFile(str(stream), "wb") as f, pa.ipc.new_stream(f, table.schema) as writer:
        writer.write_table(table)
    out = tmp_path / "m.json"
    with open(stream, "rb") as stdin:
        subprocess.run([sys.executable, "-m", "iwpfast.cli", "fit", "-", "--out", str(out),
                        "--progress", "none", "--solver", "sgd"], stdin=stdin, check=True,
                       capture_output=True)
    fitted = json.loads(out.read_text())["fitted"]
    assert fitted["coef"] == file_model.coef_.reshape(-1).tolist()
    assert (fitted["alpha"], fitted["learning_rate"]) == (file_model.alpha_,
                                                          file_model.learning_rate_)
