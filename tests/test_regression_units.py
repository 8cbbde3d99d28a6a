"""Issue 46 item 1: a regressor fitted on a release that declares the target's range predicts,
scores and evaluates in the target's units (``target_units='model'``: the release's [-1, 1] space);
models without a declared target range keep their one space."""
import json
import warnings

import numpy as np
import pandas as pd
import pytest

import iwpfast
from iwpfast import IWPRegressor
from iwpfast.cli import main
from iwpfast.exceptions import InvalidInputError, NumericalWarning, PrivacyLeakWarning, UnitsWarning
from iwpfast.privacy import ReleaseSpec, release

pytestmark = pytest.mark.kernels

LO, HI = 0.0, 100_000.0
MID, HALF = 0.5 * (LO + HI), 0.5 * (HI - LO)
RANGES = {"a": (0.0, 10.0), "b": (-3.0, 3.0)}


def _table(n, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(0, 10, n), rng.uniform(-3, 3, n)
    t = np.clip(50_000 + 8_000 * (a - 5) - 6_000 * b + rng.normal(0, 5_000, n), LO, HI)
    return pd.DataFrame({"a": a, "b": b, "t": t})


def _spec(**kw):
    args = dict(epsilon_x=4.0, epsilon_y=2.0, delta=1e-5, bound=1.0, features=("a", "b"),
                ranges=RANGES, label="t", task="regression", target_range=(LO, HI))
    args.update(kw)
    return ReleaseSpec(**args)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("units")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)      # seeded: a simulation
        release(_table(20_000, 0), d / "rel.parquet", _spec(), seed=1, threads=1)
        release(_table(8_000, 2), d / "hold_ldp.parquet", _spec(), seed=3, threads=1)
        release(_table(20_000, 0), d / "target_only.parquet",
                _spec(epsilon_x=None, public_features=("a", "b")), seed=4, threads=1)
    _table(5_000, 1).to_parquet(d / "hold.parquet")
    return d


def _fit(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        return IWPRegressor(progress=False, **kw).fit(path)


@pytest.fixture(scope="module")
def model(files):
    return _fit(files / "rel.parquet", solver="moments")


def _r2(y, pred):
    return 1.0 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)


def test_predictions_are_in_the_targets_units(model):
    hold = _table(5_000, 1)
    X, y = hold[["a", "b"]].to_numpy(), hold["t"].to_numpy()
    assert model.target_range_ == (LO, HI)
    u = model.predict(X, target_units="model")
    pred = model.predict(X)
    assert np.allclose(pred, MID + HALF * u, rtol=0, atol=1e-9)      # the release's map inverted
    assert np.array_equal(model.decision_function(X), pred)
    assert np.array_equal(model.decision_function(X, target_units="model"), u)
    assert abs(pred.mean() - y.mean()) < 0.1 * y.std()              # dollars, not [-1, 1]
    assert _r2(y, pred) > 0.6


def test_score_is_the_r2_of_predict(model, files):
    hold = _table(5_000, 1)
    X, y = hold[["a", "b"]].to_numpy(), hold["t"].to_numpy()
    pred = model.predict(X)
    assert model.score(X, y) == pytest.approx(_r2(y, pred), rel=1e-12)
    assert model.score(files / "hold.parquet") == pytest.approx(_r2(y, pred), rel=1e-12)
    assert model.risk(X, y) == pytest.approx(0.5 * np.mean((pred - y) ** 2), rel=1e-12)
    r = model.evaluate_report(files / "hold.parquet")
    assert r.r2 == pytest.approx(model.score(X, y), rel=1e-12)
    assert r.rmse == pytest.approx(np.sqrt(np.mean((pred - y) ** 2)), rel=1e-12)
    assert r.constant_rmse == pytest.approx(y.std(), rel=1e-12) and not r.warnings
    assert "the target's units (t, declared range 0:100000)" in r.describe()
    assert model.score_and_risk(X, y) == pytest.approx((model.score(X, y), model.risk(X, y)))
    # the model's space: y scaled as the release did (inside the range: R^2 unchanged)
    ys = (y - MID) / HALF
    assert model.score(X, ys, target_units="model") == pytest.approx(model.score(X, y), rel=1e-9)
    assert model.risk(X, ys, target_units="model") == pytest.approx(model.risk(X, y) / HALF ** 2,
                                                                   rel=1e-9)


def test_targets_in_the_wrong_units_warn(model):
    hold = _table(2_000, 5)
    X, y = hold[["a", "b"]].to_numpy(), hold["t"].to_numpy()
    with pytest.warns(UnitsWarning, match="target_units='model'"):
        model.score(X, (y - MID) / HALF)                  # scaled targets read as dollars
    with pytest.warns(UnitsWarning, match="drop target_units='model'"):
        model.score(X, y, target_units="model")           # dollars read as the model's space
    with pytest.warns(UnitsWarning, match="outside the declared range 0:100000"):
        model.score(X, y * 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnitsWarning)
        model.score(X, y)
    with pytest.raises(InvalidInputError, match="target_units='dollars'"):
        model.predict(X, target_units="dollars")


def test_saved_models_keep_their_units(model, tmp_path):
    X = _table(300, 7)[["a", "b"]].to_numpy()
    model.save(tmp_path / "m.json")
    loaded = iwpfast.load(tmp_path / "m.json")
    assert loaded.target_range_ == (LO, HI)
    assert np.array_equal(loaded.predict(X), model.predict(X))
    # a model file written before item 1, without a release: one space, as before
    old = iwpfast.load("tests/data/model_regressor_v1.json")
    Xo = np.zeros((3, old.n_features_in_))
    assert old.target_range_ is None
    assert np.array_equal(old.predict(Xo), old.predict(Xo, target_units="model"))


def test_models_without_a_declared_target_range_predict_as_before():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (3_000, 2))
    y = 3.0 + X @ np.array([2.0, -1.0]) + rng.normal(0, 0.1, 3_000)
    m = IWPRegressor(alpha=1e-3, learning_rate=0.1, progress=False).fit(X, y, noise_var=0.0)
    assert m.target_range_ is None
    assert np.array_equal(m.predict(X), m.predict(X, target_units="model"))
    assert np.array_equal(m.predict(X), m.decision_function(X))
    assert m.score(X, y) == pytest.approx(_r2(y, m.predict(X)), rel=1e-12)
    assert "training units" in m.evaluate_report(X, y).units


def test_sgd_and_a_target_only_release_predict_in_the_targets_units(files):
    hold = _table(5_000, 1)
    X, y = hold[["a", "b"]].to_numpy(), hold["t"].to_numpy()
    for m in (_fit(files / "rel.parquet", alpha=1e-3, learning_rate=0.05),
              _fit(files / "target_only.parquet", solver="moments")):
        pred = m.predict(X)
        assert m.target_range_ == (LO, HI)
        assert m.score(X, y) == pytest.approx(_r2(y, pred), rel=1e-12)
        assert _r2(y, pred) > 0.3


def test_private_risk_is_in_the_targets_units_squared(model, files):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        dollars = model.private_risk(files / "hold_ldp.parquet")
        scaled = model.private_risk(files / "hold_ldp.parquet", target_units="model")
    assert dollars.risk == pytest.approx(scaled.risk * HALF ** 2, rel=1e-12)
    assert dollars.stderr == pytest.approx(scaled.stderr * HALF ** 2, rel=1e-12)


def test_the_evaluate_command_says_the_units(model, files, tmp_path, capsys):
    path = tmp_path / "m.json"
    model.save(path)
    hold = _table(5_000, 1)
    assert main(["evaluate", str(path), str(files / "hold.parquet")]) == 0
    text = capsys.readouterr().out
    assert "in the target's units (t, declared range 0:100000)" in text
    assert f"R^2 {model.score(hold[['a', 'b']].to_numpy(), hold['t'].to_numpy()):.4f}" in text
    assert main(["evaluate", str(path), str(files / "hold.parquet"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["R^2"] == pytest.approx(model.score(files / "hold.parquet"), rel=1e-12)
    assert out["target_range"] == [LO, HI] and out["rmse"] > 1000
    assert main(["evaluate", str(path), str(files / "hold_ldp.parquet"), "--private"]) == 0
    text = capsys.readouterr().out
    assert "in the target's units (t, declared range 0:100000) squared" in text
    assert main(["evaluate", str(path), str(files / "hold_ldp.parquet"), "--private", "--json",
                 "--target-units", "model"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["target_range"] is None and "model's space" in out["units"]
