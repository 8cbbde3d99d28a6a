"""NaN / inf / null in a training file: named by column and row with the reader's own error.

Training does not sum the feature columns for NaN/inf while reading (``ChunkReader``'s
``unchecked_columns``): a non-finite feature makes the kernel's update non-finite and the scan
names the value (``iwpfast.sgd.scan._run_unit_chunk``), or finds it among the rows carried to the
next call.  Each test compares the error with the one the reader gives when it checks every
column (as predict, evaluate and the hold-out scoring read files), for every loss and mode, and
at chunk and row-group boundaries.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iwpfast import IWPClassifier
from iwpfast.exceptions import DivergenceError, InvalidInputError
from iwpfast.io.reader import ChunkReader
from iwpfast.sgd.driver import Head, fit_stream
from iwpfast.sgd.state import HeadConfig

N, P = 5000, 3
FEATURES = [f"x{j}" for j in range(P)]
CHUNK = 500          # chunks of 500 rows; batches of 96 rows: rows 480-499 of each chunk carried
BATCH = 96


def _write(tmp_path, bad_row=None, bad=np.nan, column=1, row_group=1000, target=False,
           name="data.parquet"):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (N, P)).astype(np.float32)
    target_values = X.astype(np.float64) @ np.ones(P)
    if bad_row is not None and bad is not None:
        X[bad_row, column] = bad
    y = np.where(rng.random(N) < 0.5, 1, -1).astype(np.int8)
    cols = {f: pa.array(X[:, j]) for j, f in enumerate(FEATURES)}
    if bad is None:                                     # a null
        cols[FEATURES[column]] = pa.array(X[:, column], mask=np.arange(N) == bad_row)
    label = target_values if target else y
    path = tmp_path / name
    pq.write_table(pa.table({**cols, "y": label}), path, row_group_size=row_group)
    return path


def _reader_error(path) -> str:
    """The error of the reader checking every column (what predict / evaluate give)."""
    with pytest.raises(InvalidInputError) as info:
        for _ in ChunkReader(str(path), [FEATURES], ["y"], CHUNK):
            pass
    return str(info.value)


def _config(loss, mode, **kw):
    noise = np.zeros(P) if mode == "clean" else np.full(P, 0.1)
    keep = None if loss == "squared_error" or mode != "iwp" else 0.8
    return HeadConfig(loss=loss, mode=mode, n_features=P, noise_var=noise, label_keep_prob=keep,
                      batch_size=BATCH, alpha=0.1, learning_rate=0.01, radius=5.0,
                      variance_cap=2.0 if mode == "iwp" else float("inf"), **kw)


def _fit(path, configs, **kw):
    heads = [Head(f"h{i}", c, FEATURES, "y") for i, c in enumerate(configs)]
    return fit_stream(str(path), heads, chunk_rows=CHUNK, progress=False, **kw)


LOSSES = ["exponential", "logistic", "quadratic", "squared_error"]
MODES = ["clean", "naive", "iwp"]


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_every_loss_and_mode_names_a_non_finite_feature_as_the_reader_does(tmp_path, loss, mode,
                                                                          bad):
    # row 2345: inside a complete batch of chunk 4 (rows 2000-2499), row 345 of row group 2
    path = _write(tmp_path, 2345, bad, target=loss == "squared_error")
    expected = _reader_error(path)
    assert "column 'x1'" in expected and "row group 2, row 345 of that row group" in expected
    with pytest.raises(InvalidInputError) as info:
        _fit(path, [_config(loss, mode)])
    assert str(info.value) == expected


@pytest.mark.parametrize("bad_row, where", [
    (490, "row group 0, row 490"),       # carried from chunk 0 into the batch chunk 1 completes
    (1020, "row group 1, row 20"),       # in the rows of chunk 2 that complete the carried batch
    (4995, "row group 4, row 995"),      # the stream's last, partial batch
    (4999, "row group 4, row 999"),      # its last row
    (0, "row group 0, row 0"),           # the first row
])
@pytest.mark.parametrize("loss", ["exponential", "logistic"])
def test_non_finite_in_carried_and_last_partial_batches(tmp_path, bad_row, where, loss):
    path = _write(tmp_path, bad_row, np.nan, column=2)
    expected = _reader_error(path)
    assert where in expected and f"(row {bad_row} of the stream)" in expected
    with pytest.raises(InvalidInputError) as info:
        _fit(path, [_config(loss, "iwp")])
    assert str(info.value) == expected
    # also when the stream's end is left to a later call (partial_fit): found in its chunk
    with pytest.raises(InvalidInputError) as info:
        _fit(path, [_config(loss, "iwp")], finish=False)
    assert str(info.value) == expected


def test_chunk_straddling_row_groups_names_the_row_group_of_the_bad_row(tmp_path):
    # row groups of 700 rows, chunks of 500: chunk 2 (rows 1000-1499) is copied from row groups
    # 1 and 2; row 1450 is row 50 of row group 2
    path = _write(tmp_path, 1450, np.inf, column=0, row_group=700)
    expected = _reader_error(path)
    assert "row group 2, row 50 of that row group (row 1450 of the stream)" in expected
    with pytest.raises(InvalidInputError) as info:
        _fit(path, [_config("exponential", "iwp")])
    assert str(info.value) == expected


@pytest.mark.parametrize("bad_row", [2345, 490])
def test_a_unit_of_heads_and_threads_name_it_too(tmp_path, bad_row):
    path = _write(tmp_path, bad_row, np.nan)
    expected = _reader_error(path)
    grid = [replace(_config("exponential", "iwp"), learning_rate=lr) for lr in (0.1, 0.01, 0.001)]
    with pytest.raises(InvalidInputError) as info:        # one call of the several-heads kernel
        _fit(path, grid)
    assert str(info.value) == expected
    mixed = [_config("exponential", "iwp"), _config("logistic", "naive"), _config("quadratic",
                                                                                  "clean")]
    with pytest.raises(InvalidInputError) as info:        # one head per unit, in head threads
        _fit(path, mixed, head_threads=2)
    assert str(info.value) == expected


def test_null_feature_is_still_refused_by_the_reader(tmp_path):
    path = _write(tmp_path, 1234, None, column=1)
    expected = _reader_error(path)
    assert "null value in column 'x1'" in expected and "row group 1, row 234" in expected
    with pytest.raises(InvalidInputError) as info:
        _fit(path, [_config("exponential", "iwp")])
    assert str(info.value) == expected


def test_a_real_divergence_of_finite_data_stays_a_divergence(tmp_path):
    path = _write(tmp_path)
    cfg = HeadConfig(loss="exponential", mode="clean", n_features=P, noise_var=np.zeros(P),
                     batch_size=BATCH, learning_rate=1e300)
    with pytest.raises(DivergenceError):
        _fit(path, [cfg])


def test_estimator_fit_auto_and_predict_give_the_same_error(tmp_path):
    path = _write(tmp_path, 3210, np.nan, column=0)
    expected = _reader_error(path)
    kw = dict(features=FEATURES, label="y")
    with pytest.raises(InvalidInputError) as info:
        IWPClassifier(alpha=1.0, learning_rate=0.01, progress=False).fit(
            str(path), noise_var=0.1, epsilon_y=2.0, **kw)
    assert str(info.value) == expected
    # 'auto' trains on the training part of the rows (its hold-out blocks left out), which
    # numbers its own rows as "of the stream"; file, row group and row are the same
    with pytest.raises(InvalidInputError) as info:
        IWPClassifier(progress=False).fit(str(path), noise_var=0.1, epsilon_y=2.0, **kw)
    assert str(info.value).split(" (row ")[0] == expected.split(" (row ")[0]
    clean = _write(tmp_path, None, name="clean.parquet")
    model = IWPClassifier(alpha=1.0, learning_rate=0.01, progress=False).fit(
        str(clean), noise_var=0.1, epsilon_y=2.0, **kw)
    with pytest.raises(InvalidInputError) as info:
        model.predict(str(path), features=FEATURES, scaled=True)
    assert str(info.value) == expected


def test_the_reader_leaves_unchecked_columns_to_their_consumer(tmp_path):
    path = _write(tmp_path, 2345, np.nan)
    chunks = list(ChunkReader(str(path), [FEATURES], ["y"], CHUNK, unchecked_columns=FEATURES))
    assert sum(c.n_rows for c in chunks) == N
    assert np.isnan(chunks[4].features[0][1][345]) and chunks[4].start_row == 2000
