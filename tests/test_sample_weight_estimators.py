"""sample_weight in IWPClassifier / IWPRegressor fit and partial_fit, fit(path) with a weight
column, the 'auto' hold-out scored with the weights, and the CLI's --sample-weight.

The update's unbiasedness for the weighted clean risk is tested on the kernel
(tests/test_sample_weight_kernel.py); here: the estimators hand the weights to it unchanged
(weights of 1 give the unweighted model bit for bit, a column of a Parquet file gives the model of
the same weights as an array) and refuse bad weights naming the row or column.
"""
import numpy as np
import pytest

from iwpfast import IWPClassifier, IWPRegressor
from iwpfast.cli import main
from iwpfast.exceptions import InvalidInputError
from iwpfast.sgd.engine import finish, run_chunk
from iwpfast.sgd.state import HeadState

pytestmark = pytest.mark.kernels

N, P = 3000, 3
HYPER = dict(alpha=0.1, learning_rate=0.05, batch_size=32, progress=False)


def _data(dtype=np.float32, seed=0, k=2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (N, P)).astype(dtype)
    score = X @ np.array([1.5, -1.0, 0.5])
    if k == 2:
        y = np.where(score + 0.3 * rng.standard_normal(N) > 0, 1, 0)
    else:
        y = np.digitize(score + 0.3 * rng.standard_normal(N), [-0.5, 0.5])      # 0, 1, 2
    weights = rng.exponential(1.0, N) * (1.0 + (X[:, 2] > 0))
    return X, y, weights


def _same_model(a, b):
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [2, 3])
def test_classifier_weights_of_one_give_the_unweighted_model_bit_for_bit(dtype, k):
    X, y, _ = _data(dtype, k=k)
    plain = IWPClassifier(**HYPER).fit(X, y, noise_var=0.05)
    ones = IWPClassifier(**HYPER).fit(X, y, sample_weight=np.ones(N), noise_var=0.05)
    _same_model(plain, ones)
    assert ones.coef_.shape == (1 if k == 2 else k, P)


def test_regressor_weights_of_one_give_the_unweighted_model_bit_for_bit():
    X, _, _ = _data(np.float64)
    t = X @ np.array([0.5, -0.2, 0.1])
    plain = IWPRegressor(**HYPER).fit(X, t, noise_var=0.02)
    _same_model(plain, IWPRegressor(**HYPER).fit(X, t, np.ones(N), noise_var=0.02))
    _same_model(plain, IWPRegressor(**HYPER).fit(X, t, sample_weight=1.0, noise_var=0.02))


def test_weighted_fit_is_the_weighted_engine_and_differs_from_unweighted():
    X, y, w = _data(np.float32)
    model = IWPClassifier(**HYPER).fit(X, y, sample_weight=w, noise_var=0.05, epsilon_y=2.0)
    cfg = model._pass.config
    assert cfg.weighted
    state = HeadState.new(cfg)
    run_chunk(cfg, state, np.ascontiguousarray(X.T), np.where(y == 1, 1.0, -1.0).astype(np.float32),
              sample_weight=w)
    finish(cfg, state)
    theta, b = state.coef(averaged=cfg.average_start >= 0)
    np.testing.assert_array_equal(model.coef_.reshape(-1), theta)
    assert model.intercept_[0] == b
    plain = IWPClassifier(**HYPER).fit(X, y, noise_var=0.05, epsilon_y=2.0)
    assert np.max(np.abs(plain.coef_ - model.coef_)) > 1e-3


@pytest.mark.parametrize("k", [2, 3])
def test_weight_column_of_a_parquet_file_equals_array_weights(tmp_path, k):
    import pyarrow as pa
    import pyarrow.parquet as pq
    X, y, w = _data(np.float32, k=k)
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({**{f"x{j}": X[:, j] for j in range(P)}, "y": y.astype(np.int8),
                             "w": w}), path)                     # float64 weights, float32 features
    extra = {} if k == 2 else {"classes": [0, 1, 2]}
    arrays = IWPClassifier(**HYPER).fit(X, y.astype(np.int8), sample_weight=w, **extra)
    source = IWPClassifier(**HYPER).fit(str(path), sample_weight="w",
                                        features=[f"x{j}" for j in range(P)], label="y", **extra)
    _same_model(arrays, source)
    assert source._pass.config.weighted


@pytest.mark.parametrize("k", [2, 3])
def test_partial_fit_with_weights_equals_fit(k):
    X, y, w = _data(np.float64, k=k)
    classes = list(range(k))
    full = IWPClassifier(**HYPER).fit(X, y, sample_weight=w, noise_var=0.05,
                                      **({} if k == 2 else {"classes": classes}))
    parts = IWPClassifier(**HYPER)
    for start in range(0, N, 1001):                               # splits inside batches
        stop = start + 1001
        parts.partial_fit(X[start:stop], y[start:stop], sample_weight=w[start:stop],
                          classes=classes, noise_var=0.05)
    parts.finalize()
    _same_model(full, parts)
    y = np.minimum(y, 1)
    with pytest.raises(InvalidInputError, match="started with sample_weight and this call gives none"):
        parts.partial_fit(X[:10], y[:10], noise_var=0.05)
    plain = IWPClassifier(**HYPER).partial_fit(X[:100], y[:100], classes=[0, 1], noise_var=0.05)
    with pytest.raises(InvalidInputError, match="started without sample_weight and this call gives"):
        plain.partial_fit(X[:10], y[:10], sample_weight=w[:10], noise_var=0.05)


@pytest.mark.parametrize("bad,match", [
    ("negative", r"sample_weight\[17\] = -1.0: sample weights must be finite and >= 0"),
    ("nan", r"sample_weight\[17\] = nan: sample weights must be finite and >= 0"),
    ("short", r"sample_weight.shape == \(2999,\), expected \(3000,\)"),
    ("column", r"sample_weight='w' names a column, but X is an in-memory array"),
])
def test_bad_array_weights_are_refused_naming_the_row(bad, match):
    X, y, w = _data()
    w = w.copy()
    if bad == "negative":
        w[17] = -1.0
    elif bad == "nan":
        w[17] = np.nan
    elif bad == "short":
        w = w[1:]
    else:
        w = "w"
    for model in (IWPClassifier(**HYPER), IWPRegressor(**HYPER)):
        with pytest.raises(InvalidInputError, match=match):
            model.fit(X, y, sample_weight=w)


def test_bad_weight_column_is_refused_naming_column_and_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    X, y, w = _data(np.float32)
    w[2500] = -3.0
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({**{f"x{j}": X[:, j] for j in range(P)}, "y": y.astype(np.int8),
                             "w": w}), path)
    kw = dict(features=[f"x{j}" for j in range(P)], label="y")
    with pytest.raises(InvalidInputError,
                       match=r"sample weight -3.0 in column 'w' at .*row 2500 of the stream"):
        IWPClassifier(**HYPER, chunk_rows=1000).fit(str(path), sample_weight="w", **kw)
    # a float64 weight too large for the float32 features: refused too, with column and row
    too_large = np.abs(w.astype(np.float64))
    too_large[2900] = 1e39
    big = tmp_path / "big.parquet"
    pq.write_table(pa.table({**{f"x{j}": X[:, j] for j in range(P)}, "y": y.astype(np.int8),
                             "w": too_large}), big)
    with pytest.raises(InvalidInputError, match=r"sample weight 1e\+39 in column 'w' at .*row 2900 "
                                                r"of the stream\): it overflows the features. dtype float32"):
        IWPClassifier(**HYPER, chunk_rows=1000).fit(str(big), sample_weight="w", **kw)
    with pytest.raises(InvalidInputError, match=r"sample_weight column 'v' not in the source"):
        IWPClassifier(**HYPER).fit(str(path), sample_weight="v", **kw)
    with pytest.raises(InvalidInputError, match=r"sample_weight column 'x1' is also the feature"):
        IWPClassifier(**HYPER).fit(str(path), sample_weight="x1", **kw)
    with pytest.raises(InvalidInputError, match=r"sample_weight names the column"):
        IWPClassifier(**HYPER).fit(str(path), sample_weight=w, **kw)


def test_hold_out_risk_is_weighted():
    # score_heads multiplies each row's IWP loss by its weight: weights of 2 double the risk
    import pyarrow as pa

    from iwpfast.sgd.scoring import score_heads
    from iwpfast.sgd.state import HeadConfig
    X, y, _ = _data(np.float64)
    cfg = HeadConfig(loss="exponential", mode="iwp", n_features=P, noise_var=np.full(P, 0.05))
    state = HeadState.new(cfg, theta0=np.array([0.5, -0.5, 0.2]))
    table = pa.table({**{f"x{j}": X[:, j] for j in range(P)}, "y": np.where(y == 1, 1.0, -1.0),
                      "one": np.ones(N), "two": np.full(N, 2.0)})
    scores = {}
    for column in (None, "one", "two"):
        scores[column] = score_heads(table, [f"x{j}" for j in range(P)], "y", ["h"],
                                            {"h": state}, {"h": cfg}, loss="exponential",
                                            sample_weight=column)[0][0]
    assert scores["one"].risk == scores[None].risk
    assert scores["two"].risk == pytest.approx(2.0 * scores[None].risk, rel=1e-12)


@pytest.mark.parametrize("k", [2, 3])
def test_auto_hyper_parameters_with_weights_run_weighted_heads(k):
    X, y, w = _data(np.float32, k=k)
    model = IWPClassifier(progress=False, batch_size=32).fit(X, y, sample_weight=w, noise_var=0.05)
    assert model._pass.config.weighted and model._pass.sample_weight is not None
    if k > 2:
        assert all(cfg.weighted for cfg in model._pass.ovr.configs)
    assert np.isfinite(model.tuning_["risk"]).any()


def test_cli_fit_sample_weight_column(tmp_path, capsys):
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    X, y, w = _data(np.float64)
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": y, "w": w}), path)
    out = tmp_path / "m.json"
    assert main(["fit", str(path), "--out", str(out), "--features", "a", "b", "c", "--label", "y",
                 "--sample-weight", "w", "--alpha", "0.1", "--learning-rate", "0.05",
                 "--batch-size", "32", "--no-progress"]) == 0
    assert "sample weights: w" in capsys.readouterr().out
    api = IWPClassifier(**HYPER).fit(str(path), sample_weight="w", features=["a", "b", "c"],
                                     label="y")
    saved = json.loads(out.read_text())
    assert json.dumps(saved)  # a readable model
    from iwpfast import load
    np.testing.assert_array_equal(load(str(out)).coef_, api.coef_)
    w_bad = w.copy()
    w_bad[7] = np.nan
    pq.write_table(pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": y, "w": w_bad}), path)
    assert main(["fit", str(path), "--out", str(tmp_path / "m2.json"), "--features", "a", "b", "c",
                 "--label", "y", "--sample-weight", "w", "--alpha", "0.1", "--learning-rate",
                 "0.05", "--no-progress"]) == 65     # bad data (EX_DATAERR)
    err = capsys.readouterr().err
    assert err.startswith("iwpfast: error:") and "'w'" in err and "row 7" in err


def test_a_saved_weighted_pass_continues_with_weights_after_load(tmp_path):
    from iwpfast import load
    X, y, w = _data(np.float64)
    full = IWPClassifier(**HYPER).fit(X, y, sample_weight=w, noise_var=0.05)
    first = IWPClassifier(**HYPER).partial_fit(X[:1000], y[:1000], sample_weight=w[:1000],
                                               classes=[0, 1], noise_var=0.05)
    first.save(tmp_path / "m.json")
    again = load(tmp_path / "m.json")
    assert again._pass.config.weighted and again._pass.head.carry_X.shape[0] == P + 1
    again.partial_fit(X[1000:], y[1000:], sample_weight=w[1000:], noise_var=0.05).finalize()
    _same_model(full, again)
    plain = IWPClassifier(**HYPER).fit(X, y, noise_var=0.05)
    plain.save(tmp_path / "p.json")
    assert not load(tmp_path / "p.json")._pass.config.weighted


def test_a_frame_column_names_the_weights():
    pd = pytest.importorskip("pandas")
    X, y, w = _data(np.float64)
    frame = pd.DataFrame({"a": X[:, 0], "w": w, "b": X[:, 1], "c": X[:, 2]})
    by_name = IWPClassifier(**HYPER).fit(frame, y, sample_weight="w")
    assert list(by_name.feature_names_in_) == ["a", "b", "c"]           # the weights are no feature
    _same_model(by_name, IWPClassifier(**HYPER).fit(X, y, sample_weight=w))
    _same_model(by_name, IWPClassifier(**HYPER).fit(frame[["a", "b", "c"]], y,
                                                    sample_weight=frame["w"]))
    with pytest.raises(InvalidInputError, match="sample_weight column 'v' not in X"):
        IWPClassifier(**HYPER).fit(frame, y, sample_weight="v")


def test_shuffle_applies_the_same_permutation_to_the_weights():
    X, y, w = _data(np.float64)
    shuffled = IWPClassifier(**HYPER, shuffle=True, random_state=4).fit(X, y, sample_weight=w)
    order = np.random.default_rng(4).permutation(N)
    by_hand = IWPClassifier(**HYPER).fit(X[order], y[order], sample_weight=w[order])
    _same_model(shuffled, by_hand)


def test_weighted_pass_resumes_from_a_checkpoint_bit_for_bit(tmp_path):
    # a crash mid-stream, then resume: the carried rows' weights are in the checkpoint; another
    # weight column is refused (the configuration hash covers it)
    import pyarrow as pa
    import pyarrow.parquet as pq

    from iwpfast.exceptions import CheckpointError
    from iwpfast.sgd.driver import Head, fit_stream
    from iwpfast.sgd.state import HeadConfig
    X, y, w = _data(np.float64)
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2],
                             "y": np.where(y == 1, 1.0, -1.0), "w": w, "w2": 2 * w}), path,
                   row_group_size=500)
    cfg = HeadConfig(loss="exponential", mode="iwp", n_features=P, noise_var=np.full(P, 0.05),
                     batch_size=32, learning_rate=0.05, alpha=0.1)

    def head(column="w"):
        return [Head("h", cfg, ["a", "b", "c"], "y", sample_weight=column)]

    whole = fit_stream(str(path), head(), chunk_rows=250, progress=False)
    ck = tmp_path / "run.ckpt"
    calls = []

    def crash(steps, params):
        calls.append(1)
        if len(calls) == 5:
            raise RuntimeError("crash")

    with pytest.raises(RuntimeError, match="crash"):
        fit_stream(str(path), head(), chunk_rows=250, progress=False, checkpoint=ck,
                   checkpoint_every=500, trace_every=1, trace_callback=crash)
    with pytest.raises(CheckpointError, match="other heads or settings"):
        fit_stream(str(path), head("w2"), chunk_rows=250, progress=False, checkpoint=ck,
                   resume=True)
    resumed = fit_stream(str(path), head(), chunk_rows=333, progress=False, checkpoint=ck,
                         resume=True)
    assert 0 < resumed.resumed_from_row < N
    for name in ("theta", "theta_avg", "intercept", "telemetry", "counters"):
        np.testing.assert_array_equal(getattr(resumed.states["h"], name),
                                      getattr(whole.states["h"], name))
    assert whole.configs["h"].weighted


def test_weighted_score_and_risk_follow_their_definitions(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    X, y, w = _data(np.float64)
    clf = IWPClassifier(**HYPER).fit(X, y, sample_weight=w)
    correct = clf.predict(X) == y
    assert clf.score(X, y, np.ones(N)) == clf.score(X, y)
    assert clf.score(X, y, w) == pytest.approx(np.sum(w * correct) / np.sum(w), rel=1e-12)
    u = clf.decision_function(X)
    losses = np.exp(-np.where(y == 1, 1.0, -1.0) * u)                 # exponential loss
    assert clf.risk(X, y, w) == pytest.approx(np.mean(w * losses), rel=1e-12)   # (1/n) sum s l
    assert clf.risk(X, y, np.ones(N)) == clf.risk(X, y)
    # a weight column of a file gives the same as the array
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"x0": X[:, 0], "x1": X[:, 1], "x2": X[:, 2], "y": y, "w": w}), path)
    assert clf.score(str(path), sample_weight="w", features=["x0", "x1", "x2"], label="y") \
        == pytest.approx(clf.score(X, y, w), rel=1e-12)
    assert clf.risk(str(path), sample_weight="w", features=["x0", "x1", "x2"], label="y") \
        == pytest.approx(clf.risk(X, y, w), rel=1e-12)
    t = X @ np.array([0.5, -0.2, 0.1])
    reg = IWPRegressor(**HYPER).fit(X, t, sample_weight=w)
    pred = reg.predict(X)
    mean = np.average(t, weights=w)
    r2 = 1 - np.sum(w * (t - pred) ** 2) / np.sum(w * (t - mean) ** 2)
    assert reg.score(X, t, w) == pytest.approx(r2, rel=1e-12)
    assert reg.risk(X, t, w) == pytest.approx(np.mean(w * 0.5 * (pred - t) ** 2), rel=1e-12)
    with pytest.raises(InvalidInputError, match=r"sample_weight\[3\] = -1.0"):
        clf.score(X, y, np.where(np.arange(N) == 3, -1.0, 1.0))


@pytest.mark.parametrize("k", [2, 3])
def test_weighted_private_risk_is_the_mean_of_weighted_iwp_losses(k):
    X, y, w = _data(np.float64, k=k)
    kw = dict(noise_var=0.05) if k == 2 else dict(noise_var=0.05, classes=[0, 1, 2])
    clf = IWPClassifier(**HYPER).fit(X, y, sample_weight=w, **kw)
    plain = clf.private_risk(X, y, noise_var=0.05)
    ones = clf.private_risk(X, y, np.ones(N), noise_var=0.05)
    assert ones.risk == plain.risk and ones.stderr == plain.stderr
    twos = clf.private_risk(X, y, np.full(N, 2.0), noise_var=0.05)
    assert twos.risk == pytest.approx(2.0 * plain.risk, rel=1e-12)
    assert twos.stderr == pytest.approx(2.0 * plain.stderr, rel=1e-9)
    weighted = clf.private_risk(X, y, w, noise_var=0.05)
    assert weighted.risk != pytest.approx(plain.risk, rel=1e-3)
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "w": w, "x2": X[:, 2]})
    by_column = clf.private_risk(frame, y, "w", noise_var=0.05)
    assert by_column.risk == pytest.approx(weighted.risk, rel=1e-12)


def test_class_balancing_weights_with_private_labels_warn():
    import warnings

    from iwpfast.exceptions import PrivacyLeakWarning

    def model():
        return IWPClassifier(**{**HYPER, "learning_rate": 0.01}, radius=2.0)

    X, y, w = _data(np.float64)
    balanced = np.where(y == 1, 0.5 / np.mean(y == 1), 0.5 / np.mean(y == 0))   # one per class
    with pytest.warns(PrivacyLeakWarning, match="one value per label value"):
        model().fit(X, y, sample_weight=balanced, epsilon_y=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        model().fit(X, y, sample_weight=balanced)                        # public labels: fine
        model().fit(X, y, sample_weight=w, epsilon_y=2.0)                 # not one per class
        model().fit(X, y, sample_weight=np.full(N, 3.0), epsilon_y=2.0)   # constant
    X3, y3, _ = _data(np.float64, k=3)
    per_class = np.array([1.0, 2.0, 5.0])[y3]
    with pytest.warns(PrivacyLeakWarning, match="one value per label value"):
        model().fit(X3, y3, sample_weight=per_class, epsilon_y=4.0, classes=[0, 1, 2])
