"""Model files: round trip, version check, corruption detection, continuing a pass after load."""
import json
import pathlib

import numpy as np
import pytest

import iwpfast
from iwpfast import IWPClassifier, IWPRegressor
from iwpfast.exceptions import InvalidInputError

pytestmark = pytest.mark.kernels


@pytest.fixture()
def fitted(tmp_path, linear_data):
    X, y = linear_data(1500, label_noise=0.3)
    m = IWPClassifier(alpha=0.5, learning_rate=0.05, average="tail", variance_cap=3.0, progress=False)
    m.fit(X, y, noise_var=[0.2, 0.3, 0.4], epsilon_y=3.0, feature_bound=2.0)
    path = tmp_path / "model.json"
    m.save(path)
    return m, path, X, y


def test_round_trip_is_exact(fitted):
    m, path, X, y = fitted
    back = iwpfast.load(path)
    assert type(back) is IWPClassifier and back.get_params() == m.get_params()
    np.testing.assert_array_equal(back.coef_, m.coef_)
    np.testing.assert_array_equal(back.intercept_, m.intercept_)
    np.testing.assert_array_equal(back.decision_function(X), m.decision_function(X))
    np.testing.assert_array_equal(back.noise_var_, m.noise_var_)
    assert back.label_keep_prob_ == m.label_keep_prob_ and back.radius_ == m.radius_
    assert list(back.classes_) == list(m.classes_) and back.n_rows_seen_ == m.n_rows_seen_
    assert back.private_risk(X, y, noise_var=[0.2, 0.3, 0.4], epsilon_y=3.0) == \
        m.private_risk(X, y, noise_var=[0.2, 0.3, 0.4], epsilon_y=3.0)


def test_file_is_small_self_describing_json(fitted):
    m, path, X, y = fitted
    doc = json.loads(path.read_text())
    assert doc["format"] == "iwpfast.model" and doc["format_version"] == 1
    assert doc["library_version"] == iwpfast.__version__ and doc["estimator"] == "IWPClassifier"
    assert doc["params"]["variance_cap"] == 3.0 and doc["fitted"]["features"] == ["x0", "x1", "x2"]
    assert path.stat().st_size < 20_000


def test_partial_fit_continues_after_load(tmp_path, linear_data):
    X, y = linear_data(2000, label_noise=0.3)
    kw = dict(noise_var=0.3, epsilon_y=3.0, feature_bound=2.0)
    make = lambda: IWPClassifier(alpha=0.5, learning_rate=0.05, average=True, progress=False)  # noqa: E731
    whole = make().fit(X, y, **kw)
    first = make().partial_fit(X[:1280], y[:1280], **kw)  # batch-aligned: nothing held back
    first.save(tmp_path / "half.json")
    resumed = iwpfast.load(tmp_path / "half.json").partial_fit(X[1280:], y[1280:], **kw).finalize()
    np.testing.assert_array_equal(resumed.coef_, whole.coef_)


def test_partial_fit_after_load_keeps_the_resolved_paper_step(tmp_path, linear_data):
    """schedule='paper' becomes a constant step computed from n and the bound at the start of the
    pass; the file must carry that step (the hyper-parameters give back only learning_rate)."""
    X, y = linear_data(2560, label_noise=0.3)
    kw = dict(noise_var=0.3, epsilon_y=3.0, feature_bound=2.0)
    make = lambda: IWPClassifier(alpha=0.5, schedule="paper", progress=False)  # noqa: E731
    first = make().partial_fit(X[:1280], y[:1280], n_rows_total=2560, **kw)
    assert first._pass.config.learning_rate != first.learning_rate   # resolved, not the default 1e-3
    first.save(tmp_path / "half.json")
    back = iwpfast.load(tmp_path / "half.json")
    assert back._pass.config.learning_rate == first._pass.config.learning_rate
    resumed = back.partial_fit(X[1280:], y[1280:], **kw).finalize()
    continued = first.partial_fit(X[1280:], y[1280:], **kw).finalize()
    np.testing.assert_array_equal(resumed.coef_, continued.coef_)


def test_newer_format_is_refused_with_upgrade_hint(fitted):
    m, path, X, y = fitted
    doc = json.loads(path.read_text())
    doc["format_version"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError, match="format version 99.*upgrade iwpfast"):
        iwpfast.load(path)


@pytest.mark.parametrize("damage", ["edit", "truncate", "not_json", "other_json"])
def test_corrupt_files_are_refused(fitted, damage):
    m, path, X, y = fitted
    text = path.read_text()
    if damage == "edit":
        doc = json.loads(text)
        doc["fitted"]["coef"][0] += 1.0
        path.write_text(json.dumps(doc))
        match = "checksum does not match"
    elif damage == "truncate":
        path.write_text(text[: len(text) // 2])
        match = "corrupt"
    elif damage == "not_json":
        path.write_bytes(b"\x00\x01PAR1")
        match = "corrupt"
    else:
        path.write_text('{"hello": 1}')
        match = "not an iwpfast model file"
    with pytest.raises(InvalidInputError, match=match):
        iwpfast.load(path)


def test_regressor_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(800, 2))
    y = X @ np.array([0.5, -0.2])
    m = IWPRegressor(alpha=0.1, learning_rate=0.05, progress=False).fit(X, y)
    m.save(tmp_path / "r.json")
    back = iwpfast.load(tmp_path / "r.json")
    assert type(back) is IWPRegressor
    np.testing.assert_array_equal(back.predict(X), m.predict(X))
    assert back.score(X, y) == m.score(X, y)


# Files written by iwpfast at commit 6c93f45 (before estimators wrote their own documents): a
# binary logistic classifier, a regressor and a 3-class one-vs-rest classifier, fitted on 400 rows
# (X = uniform(-1, 1) with seed 0), with the scores they gave for X[:20].
OLD_MODELS = pathlib.Path(__file__).parent / "data"


@pytest.mark.parametrize("name, method", [("binary", "decision_function"), ("regressor", "predict"),
                                          ("multiclass", "decision_function")])
def test_files_written_before_load_and_predict_the_same_bits(name, method, tmp_path):
    expected = json.loads((OLD_MODELS / "model_v1_predictions.json").read_text())
    X = np.array(expected["X"])
    model = iwpfast.load(OLD_MODELS / f"model_{name}_v1.json")
    np.testing.assert_array_equal(getattr(model, method)(X), np.array(expected[name]))
    # written again, the document is the same one (the format did not change)
    model.save(tmp_path / "again.json")
    old = json.loads((OLD_MODELS / f"model_{name}_v1.json").read_text())
    new = json.loads((tmp_path / "again.json").read_text())
    for doc in (old, new):
        for key in ("sha256", "library_version", "numpy_version"):
            doc.pop(key)
    assert new == old
    # and the pass goes on after the load
    y = np.where(X[:, 0] > 0, 1, -1) if name == "binary" else None
    if y is not None:
        model.partial_fit(X, y)
        assert model.n_rows_seen_ == 420
