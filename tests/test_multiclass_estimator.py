"""IWPClassifier with k > 2 classes: one-vs-rest heads in one scan, from a release or arrays."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import iwpfast
from iwpfast import IWPClassifier, iwp_loss
from iwpfast.cli import main
from iwpfast.exceptions import InvalidInputError
from iwpfast.privacy import ReleaseSpec, release

FEATURES = ["f0", "f1", "f2"]
RANGES = {f: (-1.0, 1.0) for f in FEATURES}
NAMES = np.array(["a", "b", "c"])
W = np.array([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [-1.5, -1.5, 0.5]])


def _clean(n=6000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 3))
    y = np.argmax(X @ W.T + 0.3 * rng.standard_normal((n, 3)), axis=1)
    return X, y


def _spec(eps_y=2.0, classes=("a", "b", "c")):
    return ReleaseSpec(epsilon_x=4, delta=1e-5, bound=1.7, epsilon_y=eps_y, features=FEATURES,
                       ranges=RANGES, label="y", classes=list(classes))


def _model(**kw):
    base = dict(loss="logistic", alpha=0.1, learning_rate=0.05, radius=5.0, batch_size=64,
                progress=False)
    base.update(kw)
    return IWPClassifier(**base)


@pytest.fixture
def released(tmp_path):
    X, y = _clean()
    df = pd.DataFrame(X, columns=FEATURES)
    df["y"] = NAMES[y]
    path = tmp_path / "rel.parquet"
    release(df, path, _spec(), seed=3)
    return path, X, y


def test_fit_from_a_release_equals_fit_from_arrays_bit_for_bit(released):
    path, X, y = released
    table = pd.read_parquet(path)
    spec = _spec()
    from_file = _model().fit(path)
    from_arrays = _model().fit(table[FEATURES].to_numpy(np.float64), table["y"].to_numpy(),
                               noise_var=spec.sigma ** 2, epsilon_y=2.0, classes=[0, 1, 2])
    np.testing.assert_array_equal(from_file.coef_, from_arrays.coef_)
    np.testing.assert_array_equal(from_file.intercept_, from_arrays.intercept_)
    assert from_file.coef_.shape == (3, 3) and from_file.intercept_.shape == (3,)
    assert from_file.classes_.tolist() == ["a", "b", "c"]          # as declared in the release
    assert from_arrays.classes_.tolist() == [0, 1, 2]
    # the naive baseline is a different model on the same data
    naive = _model(correction="none").fit(path)
    assert naive.mode_ == "naive" and not np.allclose(naive.coef_, from_file.coef_)


def test_the_k_heads_run_in_one_kernel_call_per_chunk(released, monkeypatch):
    from iwpfast.sgd import engine
    calls = {"heads": 0, "single": 0}
    real_heads, real_single = engine.run_chunk_heads, engine.run_chunk

    def heads(cfgs, states, X, y, sample_weight=None):
        calls["heads"] += 1
        assert len(cfgs) == 3
        return real_heads(cfgs, states, X, y, sample_weight)

    def single(*args):
        calls["single"] += 1
        return real_single(*args)

    monkeypatch.setattr(engine, "run_chunk_heads", heads)
    monkeypatch.setattr(engine, "run_chunk", single)
    path, _, _ = released
    _model(chunk_rows=1000).fit(path)
    assert calls == {"heads": 6, "single": 0}                     # 6000 rows in chunks of 1000


def test_predict_is_the_argmax_and_proba_is_normalized(released):
    path, X, y = released
    model = _model().fit(path)
    u = model.decision_function(X)
    assert u.shape == (len(X), 3)
    np.testing.assert_array_equal(model.predict(X), NAMES[np.argmax(u, axis=1)])
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(np.argmax(proba, axis=1), np.argmax(u, axis=1))
    accuracy = model.score(X, NAMES[y])
    assert accuracy == np.mean(model.predict(X) == NAMES[y]) and accuracy > 0.6   # chance: 1/3
    with pytest.raises(InvalidInputError, match="predict_proba needs loss='logistic' or 'exponential'"):
        _model(loss="quadratic", learning_rate=0.01).fit(path).predict_proba(X)
    # exponential: sigma(2 u_c) per head, normalized (issue 18)
    expo = _model(loss="exponential", learning_rate=0.01).fit(path)
    u = expo.decision_function(X)
    want = 1 / (1 + np.exp(-2 * u))
    np.testing.assert_allclose(expo.predict_proba(X), want / want.sum(axis=1, keepdims=True),
                               rtol=1e-12)


def test_two_declared_classes_are_the_binary_model_bit_for_bit():
    X, y = _clean()
    two = np.where(y == 0, "no", "yes")
    named = _model().fit(X, two, noise_var=0.3, epsilon_y=1.0, classes=["no", "yes"])
    binary = _model().fit(X, (y != 0).astype(int), noise_var=0.3, epsilon_y=1.0)
    np.testing.assert_array_equal(named.coef_, binary.coef_)
    np.testing.assert_array_equal(named.intercept_, binary.intercept_)
    assert named.coef_.shape == (1, 3) and named.classes_.tolist() == ["no", "yes"]
    np.testing.assert_array_equal(named.predict(X) == "yes", binary.predict(X) == 1)


def test_private_risk_is_the_mean_of_the_per_head_estimates(released):
    path, _, _ = released
    model = _model().fit(path)
    est = model.private_risk(path)
    table = pd.read_parquet(path)
    Xs = table[FEATURES].to_numpy(np.float64)
    per_head = iwp_loss(model.coef_, Xs, table["y"].to_numpy(), loss="logistic",
                        noise_var=_spec().sigma ** 2, epsilon_y=2.0, classes=3,
                        intercept=model.intercept_, truncation=model.truncation_)
    np.testing.assert_allclose(est.risk, per_head.sum(axis=1).mean(), rtol=1e-10)
    assert est.n_rows == len(table) and est.stderr > 0
    # the same hold-out as arrays (the label's values, the noise given explicitly)
    from_arrays = model.private_risk(Xs, NAMES[table["y"].to_numpy()], noise_var=_spec().sigma ** 2,
                                     epsilon_y=2.0)
    np.testing.assert_allclose(from_arrays.risk, est.risk, rtol=1e-10)


def test_save_and_load_keep_the_k_heads(released, tmp_path):
    path, X, _ = released
    model = _model().fit(path)
    model.save(tmp_path / "m.json")
    loaded = iwpfast.load(tmp_path / "m.json")
    np.testing.assert_array_equal(loaded.coef_, model.coef_)
    np.testing.assert_array_equal(loaded.intercept_, model.intercept_)
    assert loaded.classes_.tolist() == ["a", "b", "c"]
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded._pass.ovr.table == model._pass.ovr.table
    for a, b in zip(loaded._pass.ovr.states, model._pass.ovr.states, strict=True):
        np.testing.assert_array_equal(a.theta, b.theta)


def test_bad_labels_and_calls_name_the_fix():
    X, y = _clean(n=300)
    labels = NAMES[y].astype(object)
    labels[11] = "z"
    with pytest.raises(InvalidInputError, match=r"y\[11\] = 'z' is not one of the classes"):
        _model().fit(X, labels, noise_var=0.3, epsilon_y=1.0, classes=["a", "b", "c"])
    with pytest.raises(InvalidInputError, match="declare the classes"):
        _model().fit(X, NAMES[y], noise_var=0.3, epsilon_y=1.0)
    with pytest.raises(InvalidInputError, match="declared on the first call of a pass"):
        _model().partial_fit(X, (y == 0).astype(int)).partial_fit(X, NAMES[y],
                                                                   classes=["a", "b", "c"])
    # public labels: the classes are those seen (sorted)
    public = _model().fit(X, NAMES[y])
    assert public.classes_.tolist() == ["a", "b", "c"] and public.mode_ == "clean"


def test_cli_fit_and_evaluate_a_k_class_release(released, tmp_path, capsys):
    path, X, y = released
    out = tmp_path / "m.json"
    assert main(["fit", str(path), "--out", str(out), "--loss", "logistic", "--alpha", "0.1",
                 "--learning-rate", "0.05", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "3 classes, one-vs-rest heads trained in one scan" in printed and "'c': coef" in printed
    clean = tmp_path / "clean.parquet"
    df = pd.DataFrame(X, columns=FEATURES)
    df["y"] = NAMES[y]
    df.to_parquet(clean)
    assert main(["evaluate", str(out), str(clean)]) == 0
    assert "accuracy" in capsys.readouterr().out
    assert main(["evaluate", str(out), str(path), "--private"]) == 0
    assert "debiased risk estimate" in capsys.readouterr().out
    assert main(["info", str(out)]) == 0
    assert "one-vs-rest heads" in capsys.readouterr().out


# k classes on a Dask cluster (fit_files): tests/test_distributed.py


def test_at_most_two_values_for_every_label_dtype():
    """The two-class test of fit(X, y) (min/max, then one comparison pass unless integers that
    are one apart): true exactly when y has at most two distinct values."""
    from iwpfast.estimators._multiclass import _at_most_two_values
    cases = [np.array([0, 1, 1, 0], np.int8), np.array([-1, 0, -1], np.int64),
             np.array([3, 3, 3], np.uint8), np.array([True, False]), np.array([0.0, 1.0, 0.0]),
             np.array([-1.0, 1.0]), np.array(["a", "b", "a"]), np.array([0, 2, 0], np.int16),
             np.array([0, 1, 2], np.int8), np.array([0.0, 0.5, 1.0]), np.array(["a", "b", "c"]),
             np.array([5, 7, 6], np.uint16)]
    for y in cases:
        assert _at_most_two_values(y) == (np.unique(y).size <= 2), y
