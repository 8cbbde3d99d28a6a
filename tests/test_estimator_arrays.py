"""fit(X, y) on arrays without copies: every layout and dtype gives the engine's model on the same
data, bit for bit where the dtype is the same; checks ride in the pass and name the row."""
import numpy as np
import pytest

from iwpfast import IWPClassifier, IWPRegressor
from iwpfast.exceptions import InvalidInputError
from iwpfast.sgd.engine import finish, run_chunk
from iwpfast.sgd.state import HeadState

pytestmark = pytest.mark.kernels

N, P = 5000, 4


def _data(dtype, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, P)).astype(dtype)
    y = np.where(X @ np.arange(1, P + 1) + rng.standard_normal(N) > 0, 7, 3)  # any two labels
    return X, y


def _engine_model(model, X, y_pm):
    """The engine alone over the same rows (feature-major, one chunk) with the estimator's config."""
    cfg = model._pass.config
    state = HeadState.new(cfg)
    run_chunk(cfg, state, np.ascontiguousarray(X.T), y_pm)
    finish(cfg, state)
    return state.coef(averaged=cfg.average_start >= 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("order", ["C", "F"])
def test_fit_arrays_equals_the_engine_bit_for_bit(dtype, order):
    X, y = _data(dtype)
    X = np.asarray(X, order=order)
    model = IWPClassifier(alpha=1.0, learning_rate=0.05, batch_size=64, chunk_rows=777, progress=False)
    model.fit(X, y, noise_var=0.05, epsilon_y=2.0)
    assert model.classes_.tolist() == [3, 7]
    theta, b = _engine_model(model, X, np.where(y == 7, 1.0, -1.0).astype(dtype))
    np.testing.assert_array_equal(model.coef_.reshape(-1), theta)
    assert model.intercept_[0] == b
    # F-order input is read as views: nothing copied; C-order: transposed chunk by chunk
    assert model.n_rows_seen_ == N


def test_float32_fit_runs_in_float32_not_a_float64_copy():
    X32, y = _data(np.float32)
    m32 = IWPClassifier(alpha=1.0, learning_rate=0.05, progress=False).fit(X32, y)
    m64 = IWPClassifier(alpha=1.0, learning_rate=0.05, progress=False).fit(X32.astype(np.float64), y)
    # the same values, so the float32 kernel (float64 accumulation) agrees to rounding ...
    np.testing.assert_allclose(m32.coef_, m64.coef_, rtol=1e-5, atol=1e-7)
    theta, _ = _engine_model(m32, X32, np.where(y == 7, 1.0, -1.0).astype(np.float32))
    np.testing.assert_array_equal(m32.coef_.reshape(-1), theta)    # ... and is the float32 engine


def test_frames_equal_arrays():
    pd = pytest.importorskip("pandas")
    X, y = _data(np.float32)
    df = pd.DataFrame(X, columns=list("abcd"))
    a = IWPClassifier(alpha=1.0, learning_rate=0.01, progress=False).fit(X, y)
    f = IWPClassifier(alpha=1.0, learning_rate=0.01, progress=False).fit(df, y)
    np.testing.assert_array_equal(a.coef_, f.coef_)
    assert list(f.feature_names_in_) == list("abcd")
    try:
        import polars as pl
    except ImportError:
        return
    g = IWPClassifier(alpha=1.0, learning_rate=0.01, progress=False).fit(pl.from_pandas(df), y)
    np.testing.assert_array_equal(a.coef_, g.coef_)


def test_classification_labels_reach_the_kernel_as_int8(monkeypatch):
    # +-1 in 1 byte a row, as a release's labels (the kernel reads them in place); the model is
    # the engine's on float64 labels, bit for bit
    from iwpfast.sgd import engine
    seen = []
    run = engine.run_chunk

    def spy(cfg, state, X, y, *args):
        seen.append(np.asarray(y).dtype)
        return run(cfg, state, X, y, *args)
    monkeypatch.setattr(engine, "run_chunk", spy)
    X, y = _data(np.float32)
    model = IWPClassifier(alpha=1.0, learning_rate=0.05, batch_size=64, chunk_rows=777,
                          progress=False).fit(X, y, noise_var=0.05, epsilon_y=2.0)
    assert seen and set(seen) == {np.dtype(np.int8)}
    monkeypatch.setattr(engine, "run_chunk", run)
    theta, b = _engine_model(model, X, np.where(y == 7, 1.0, -1.0))
    np.testing.assert_array_equal(model.coef_[0], theta)
    assert model.intercept_[0] == b


def test_fit_path_equals_fit_arrays(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    X, y = _data(np.float32)
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({**{f"x{j}": X[:, j] for j in range(P)}, "y": (y == 7).astype(np.int8)}),
                   path)
    a = IWPClassifier(alpha=1.0, learning_rate=0.01, progress=False).fit(X, (y == 7).astype(np.int8))
    f = IWPClassifier(alpha=1.0, learning_rate=0.01, progress=False).fit(
        str(path), features=[f"x{j}" for j in range(P)], label="y")
    np.testing.assert_array_equal(a.coef_, f.coef_)
    assert f.intercept_[0] == a.intercept_[0]


def test_non_finite_feature_names_column_and_row():
    X, y = _data(np.float64)
    X[4321, 2] = np.nan
    model = IWPClassifier(alpha=1.0, learning_rate=0.01, progress=False, chunk_rows=1000)
    with pytest.raises(InvalidInputError,
                       match=r"non-finite value nan in column 'x2' at .*row 4321 of the stream"):
        model.fit(X, y)
    X[4321, 2] = 1.0
    model.fit(X, y)
    X[10, 1] = -np.inf                                     # predict checks as fit does
    with pytest.raises(InvalidInputError, match=r"non-finite value -inf in column 'x1' at row 10"):
        model.predict(X)


def test_third_label_value_is_found_in_the_pass():
    X, y = _data(np.float64)
    y[3210] = 5
    # two declared classes: the label outside them is found in the pass, its row named
    with pytest.raises(InvalidInputError, match=r"y\[3210\] = 5 is not one of the classes \[3, 7\]"):
        IWPClassifier(alpha=1.0, learning_rate=0.01, progress=False).fit(X, y, classes=[3, 7])
    # undeclared: three values are three classes (one-vs-rest heads, docs/math.md "k classes")
    model = IWPClassifier(alpha=1.0, learning_rate=0.01, progress=False).fit(X, y)
    assert model.classes_.tolist() == [3, 5, 7] and model.coef_.shape == (3, P)


def test_regression_targets_stay_float64_and_nan_target_named():
    X, _ = _data(np.float32)
    t = X.astype(np.float64) @ np.ones(P) + 0.1
    model = IWPRegressor(alpha=1.0, learning_rate=0.01, progress=False).fit(X, t)
    assert np.all(np.isfinite(model.coef_))
    t[77] = np.inf
    with pytest.raises(InvalidInputError, match="y has a non-finite value at row 77"):
        IWPRegressor(alpha=1.0, learning_rate=0.01, progress=False).fit(X, t)


def test_shuffle_reads_rows_in_the_permuted_order():
    X, y = _data(np.float64)
    model = IWPClassifier(alpha=1.0, learning_rate=0.01, shuffle=True, random_state=3,
                          progress=False).fit(X, y)
    perm = np.random.default_rng(3).permutation(N)
    theta, _ = _engine_model(model, X[perm], np.where(y[perm] == 7, 1.0, -1.0))
    np.testing.assert_array_equal(model.coef_.reshape(-1), theta)


@pytest.fixture
def parquet_with_null(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    X, y = _data(np.float32)
    a = pa.array(X[:, 1], mask=np.arange(N) == 1234)        # one null in column x1
    cols = {f"x{j}": (a if j == 1 else X[:, j]) for j in range(P)}
    path = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({**cols, "y": (y == 7).astype(np.int8)}), path, row_group_size=1000)
    clean = tmp_path / "clean.parquet"
    pq.write_table(pa.table({**{f"x{j}": X[:, j] for j in range(P)}, "y": (y == 7).astype(np.int8)}),
                   clean)
    return path, clean


def test_nulls_in_predict_score_and_private_risk_give_the_error_fit_gives(parquet_with_null):
    path, clean = parquet_with_null
    feats = [f"x{j}" for j in range(P)]
    kw = dict(features=feats, label="y")
    with pytest.raises(InvalidInputError) as fit_error:
        IWPClassifier(alpha=1.0, learning_rate=0.01, progress=False).fit(str(path), **kw)
    expected = str(fit_error.value)
    assert "null value in column 'x1'" in expected and "row group 1, row 234" in expected
    model = IWPClassifier(alpha=1.0, learning_rate=0.01, progress=False).fit(str(clean), **kw)
    calls = [lambda: model.predict(str(path), features=feats, scaled=True),
             lambda: model.decision_function(str(path), features=feats, scaled=True),
             lambda: model.score(str(path), scaled=True, **kw),
             lambda: model.risk(str(path), scaled=True, **kw),
             lambda: model.private_risk(str(path), noise_var=0.0, **kw)]
    for call in calls:
        with pytest.raises(InvalidInputError) as info:
            call()
        assert str(info.value) == expected


def test_paper_schedule_on_a_parquet_file_without_metadata(parquet_with_null):
    _, clean = parquet_with_null
    model = IWPClassifier(alpha=1.0, learning_rate=0.01, schedule="paper", progress=False)
    model.fit(str(clean), features=[f"x{j}" for j in range(P)], label="y", feature_bound=4.0)
    assert model.n_rows_seen_ == N and np.isfinite(model._pass.config.learning_rate)
