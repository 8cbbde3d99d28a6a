"""Cross-validation of 'auto' on small data (iwpfast/sgd/crossval.py): the folds hold out every
row once, the pooled estimate is the folds' row-weighted mean with their variances added, the
model is the chosen head trained once more on all the rows, and only where it applies."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iwpfast import IWPClassifier
from iwpfast.estimates import RiskEstimate
from iwpfast.settings import SearchOptions
from iwpfast.sgd import crossval, tuning
from iwpfast.sgd.driver import Head, fit_stream
from iwpfast.sgd.grid import GridPoint
from iwpfast.sgd.state import HeadConfig
from iwpfast.sgd.tuning import tune_stream


def _table(n, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 3))
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-3 * X[:, 0] + X[:, 1])), 1, -1).astype(np.int8)
    return pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": y,
                     "id": np.arange(n, dtype=np.int64)})


def _make_config(point, n_rows):
    return HeadConfig(loss="logistic", mode="clean", n_features=3, noise_var=np.zeros(3),
                      batch_size=16, learning_rate=point.learning_rate, alpha=point.alpha,
                      radius=np.inf, truncation=2,
                      average_start=0 if n_rows is None else n_rows // 32)


POINTS = [GridPoint(a, g) for a in (1e-3, 1e-1) for g in (0.01, 0.1, 1.0)]
KW = dict(loss="logistic", progress=False, noise=(np.zeros(3), None, 0.0))


def test_the_folds_hold_out_every_row_once(tmp_path):
    from iwpfast.io.sources import open_source
    from iwpfast.io.views import PartSource
    from iwpfast.sgd.split import make_split
    n = 5_003                       # not a whole number of blocks or groups
    path = tmp_path / "d.parquet"
    pq.write_table(_table(n), path)
    train, val = make_split(open_source(path), 0.1)
    held, trained = [], []
    for f in range(train.period):
        parts = [PartSource(train.inner, period=train.period, block=train.block,
                            validation=v, row_offset=f * train.block) for v in (True, False)]
        ids = [np.concatenate([b.column("id").to_numpy() for b in p.batches(["id"])])
               for p in parts]
        assert len(ids[0]) == parts[0].num_rows and len(ids[1]) == parts[1].num_rows
        assert np.intersect1d(ids[0], ids[1]).size == 0 and len(ids[0]) + len(ids[1]) == n
        held.append(ids[0])
        trained.append(ids[1])
    # fold 0 is the single split; together the folds' hold-outs are every row exactly once
    first = np.concatenate([b.column("id").to_numpy() for b in val.batches(["id"])])
    np.testing.assert_array_equal(held[0], first)
    np.testing.assert_array_equal(np.sort(np.concatenate(held)), np.arange(n))


def test_the_pooled_estimate_is_the_row_weighted_mean_with_the_variances_added():
    folds = [RiskEstimate(0.5, 0.02, 300, largest_share=0.01, effective_rows=280.0),
             RiskEstimate(0.7, 0.04, 100, largest_share=0.05, effective_rows=90.0,
                          reliable=False, warnings=("few rows.",))]
    pooled = crossval._pooled(folds, [300, 100])
    assert pooled.risk == pytest.approx(0.75 * 0.5 + 0.25 * 0.7, rel=1e-15)
    assert pooled.stderr == pytest.approx(math.hypot(0.75 * 0.02, 0.25 * 0.04), rel=1e-15)
    assert pooled.n_rows == 400 and pooled.effective_rows == 370.0
    assert not pooled.reliable and pooled.warnings == ("few rows.",)


def test_the_model_is_the_chosen_head_trained_on_every_row(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(_table(4_000), path)
    result = tune_stream(path, ["a", "b", "c"], "y", POINTS, _make_config, **KW)
    assert result.n_validation == result.n_train == 4_000
    assert result.folds == 10
    chosen = POINTS[result.chosen]
    alone = fit_stream(path, [Head("h", _make_config(chosen, 4_000), ["a", "b", "c"], "y")],
                       progress=False)
    np.testing.assert_array_equal(result.states[chosen.name].theta, alone.states["h"].theta)
    assert result.states[chosen.name].intercept == alone.states["h"].intercept
    # every head's estimate rests on all 4,000 rows: about sqrt(10) times the precision of one
    # fold's (the single split's 400 rows); 0.6 leaves room for the folds' different variances
    single = tune_stream(path, ["a", "b", "c"], "y", POINTS, _make_config, **KW,
                         options=SearchOptions(cross_validate=False))
    assert single.n_validation == 400 and single.folds == 0
    for e_cv, e_one in zip(result.estimates, single.estimates, strict=True):
        if e_cv.reliable and e_one.reliable:
            assert e_cv.stderr < 0.6 * e_one.stderr


def test_cross_validation_applies_only_to_small_rereadable_data(tmp_path):
    path = tmp_path / "d.parquet"
    table = _table(2_000)
    pq.write_table(table, path)

    def folds(source, **kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return tune_stream(source, ["a", "b", "c"], "y", POINTS, _make_config, **KW,
                               **kw).folds

    assert folds(path) == 10
    # a separate validation release, a checkpointed scan, data over the limit: the one hold-out
    assert folds(path, validation=path) == 0
    assert folds(path, checkpoint=str(tmp_path / "c.ckpt")) == 0
    assert folds(path, options=SearchOptions(cross_validate_max_rows=1_999)) == 0
    assert folds(path, options=SearchOptions(cross_validate=False)) == 0


def test_auto_on_small_data_chooses_on_every_row_and_refits():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (3_000, 2))
    y = (rng.random(3_000) < 1 / (1 + np.exp(-4 * X[:, 0]))).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = IWPClassifier(progress=False, solver="sgd").fit(X + rng.normal(0, 0.5, X.shape), y,
                                              noise_var=0.25, epsilon_y=2.0)
    t = m.tuning_
    assert t["n_validation"] == t["n_train"] == m.n_rows_seen_ == 3_000
    assert sum(t["chosen"]) == 1 and m.alpha_ == t["alpha"][t["chosen"].index(True)]
    # the k-class path cross-validates as the binary one (tests/test_multiclass_auto.py checks
    # that each class's model is the two-class 'auto' model of class against rest, bit for bit)
    assert tuning.VALIDATION_FRACTION == 0.1 and t["folds"] == 10


def test_the_folds_read_a_file_once_when_it_fits_in_memory(tmp_path, file_rows_read):
    # the folds and the refit read the columns held in memory (one read of the file); over
    # cross_validate_held_bytes each fold reads the file again; the same rows either way
    path = tmp_path / "d.parquet"
    pq.write_table(_table(3_000), path)
    read = file_rows_read
    results = {}
    for budget in (SearchOptions().cross_validate_held_bytes, 0):
        read[0] = 0
        results[budget] = tune_stream(path, ["a", "b", "c"], "y", POINTS, _make_config, **KW,
                                      options=SearchOptions(cross_validate_held_bytes=budget))
        assert results[budget].folds == 10
        if budget:
            assert read[0] == 3_000 and results[budget].passes == 1.0
        else:
            # each fold reads its training rows and holds its validation rows as it passes
            # them (one read a fold), then the refit reads every row
            assert read[0] == 11 * 3_000 and results[budget].passes == 11.0
    held, reread = results.values()
    assert held.chosen == reread.chosen
    name = POINTS[held.chosen].name
    np.testing.assert_array_equal(held.states[name].theta, reread.states[name].theta)
    np.testing.assert_allclose([e.risk for e in held.estimates],
                               [e.risk for e in reread.estimates], rtol=1e-12)


@pytest.mark.parametrize("batch_rows,start_row", [(None, 0), (300, 0), (1000, 1_234), (7, 2_999)])
def test_a_held_source_replays_the_file_s_rows_with_their_origins(tmp_path, batch_rows,
                                                                   start_row):
    # the rows, and where each came from (file, row group, row: what an error names), as the
    # file gives them; batches never cross one of the file's batches
    from iwpfast.io.sources import HeldSource, open_source
    path = tmp_path / "d.parquet"
    pq.write_table(_table(3_000), path, row_group_size=700)
    src = open_source(path)
    held = HeldSource(src, ["y", "a"])
    assert held.num_rows == 3_000 and held.release_metadata == src.release_metadata

    def rows(source):
        out = [(o.global_row + i, o.row_group, o.group_row + i, b.column(0)[i].as_py(),
                b.column(1)[i].as_py())
               for o, b in source.located_batches(["a", "y"], start_row, batch_rows)
               for i in range(b.num_rows)]
        return out

    got, want = rows(held), rows(src)
    assert got == want and got[0][0] == start_row and len(got) == 3_000 - start_row
    if batch_rows is not None:
        assert all(b.num_rows <= batch_rows
                   for _, b in held.located_batches(["a"], start_row, batch_rows))
