"""Issue 14: one rule for units (raw by default, scaled=True), its warnings, labels kept as given,
and the private risk's reliability diagnostics on a release."""
import warnings

import numpy as np
import pytest

from iwpfast import IWPClassifier
from iwpfast.estimators._units import scale_and_clip
from iwpfast.exceptions import NumericalWarning, UnitsWarning

pytestmark = pytest.mark.kernels

RANGES = {"age": (0.0, 100.0), "hours": (0.0, 80.0), "score": (-5.0, 5.0)}
NAMES = list(RANGES)
LO = np.array([r[0] for r in RANGES.values()])
HI = np.array([r[1] for r in RANGES.values()])


def _raw(n, seed=0):
    rng = np.random.default_rng(seed)
    Xs = rng.uniform(-1, 1, size=(n, 3))
    theta = np.array([1.5, -1.0, 0.5])
    y = (rng.random(n) < 1 / (1 + np.exp(-2 * (Xs @ theta)))).astype(np.int64)  # 0/1 labels
    X = LO + (Xs + 1) / 2 * (HI - LO)                                            # raw units
    return X, y


@pytest.fixture(scope="module")
def release_file(tmp_path_factory):
    from iwpfast.privacy import ReleaseSpec, release
    X, y = _raw(20000)
    path = tmp_path_factory.mktemp("u") / "rel.parquet"
    spec = ReleaseSpec(epsilon_x=4.0, delta=1e-5, bound=1.5, epsilon_y=2.0, features=NAMES,
                       ranges=RANGES, label="y")
    release({**{n: X[:, j] for j, n in enumerate(NAMES)}, "y": y}, path, spec, seed=3)
    return path


def _fit(path, **kw):
    args = dict(alpha=0.3, learning_rate=0.05, variance_cap=2.0, progress=False)
    args.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        return IWPClassifier(**args).fit(path)


def test_raw_units_equal_scaled_by_hand(release_file):
    m = _fit(release_file)
    X, y = _raw(500, seed=9)
    by_hand = np.column_stack(scale_and_clip(list(X.T), LO, HI, 1.5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnitsWarning)   # raw data in range: no warning
        u_raw = m.decision_function(X)
    assert np.allclose(u_raw, m.decision_function(by_hand, scaled=True), rtol=0, atol=1e-12)
    assert np.array_equal(u_raw, m.decision_function(X, raw=True))   # the older spelling
    assert m.score(X, y) == m.score(by_hand, y, scaled=True)
    assert m.risk(X, y) == pytest.approx(m.risk(by_hand, y, scaled=True), rel=1e-12)
    # by hand: [lo, hi] onto [-1, 1], then the L2 clip at the bound
    first = (X[0] - (LO + HI) / 2) / ((HI - LO) / 2)
    first = first * min(1.0, 1.5 / np.linalg.norm(first))
    assert np.allclose(by_hand[0], first)


def test_already_scaled_data_without_scaled_true_warns(release_file):
    m = _fit(release_file)
    X, _ = _raw(300, seed=4)
    scaled = np.column_stack(scale_and_clip(list(X.T), LO, HI, 1.5))
    with pytest.warns(UnitsWarning, match="look already scaled"):
        m.predict(scaled)
    with pytest.warns(UnitsWarning, match="outside \\[-1, 1\\]"):
        m.predict(X, scaled=True)


def test_out_of_range_share_warns(release_file):
    m = _fit(release_file)
    X, _ = _raw(400, seed=5)
    X[:40, 0] = 150.0          # 10% of 'age' above its declared range 0:100
    with pytest.warns(UnitsWarning, match="age 10.0% outside 0:100"):
        m.decision_function(X)
    with pytest.raises(Exception, match="contradict"):
        m.decision_function(X, scaled=True, raw=True)


def test_release_labels_come_back_as_given(release_file, tmp_path):
    m = _fit(release_file)
    assert m.classes_.tolist() == [0, 1]
    X, _ = _raw(50, seed=6)
    assert set(np.unique(m.predict(X)).tolist()) <= {0, 1}
    m.save(tmp_path / "m.json")
    from iwpfast import load
    back = load(tmp_path / "m.json")
    assert back.classes_.tolist() == [0, 1]
    assert np.array_equal(back.predict(X), m.predict(X))
    assert back.feature_ranges_ == m.feature_ranges_ and back.feature_bound_ == 1.5
    # scikit-learn's binary convention: coef_ (1, p), intercept_ (1,)
    assert m.coef_.shape == (1, 3) and m.intercept_.shape == (1,)


@pytest.mark.parametrize("labels", [np.array(["no", "yes"]), np.array([0, 1]), np.array([3, 7])])
def test_array_labels_round_trip(labels, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (600, 2))
    y = labels[(X[:, 0] > 0).astype(int)]
    m = IWPClassifier(alpha=0.1, learning_rate=0.1, progress=False).fit(X, y)
    assert m.classes_.tolist() == labels.tolist()
    pred = m.predict(X)
    assert pred.dtype.kind == labels.dtype.kind and np.mean(pred == y) > 0.8
    m.save(tmp_path / "m.json")
    from iwpfast import load
    assert np.array_equal(load(tmp_path / "m.json").predict(X), pred)


# ------------------------------------------------------------------ private risk diagnostics
def test_private_risk_flags_the_no_cap_large_step_case(release_file, tmp_path):
    """The issue's case: no variance cap, a large step: theta runs to the sphere, sigma^2|theta|^2
    explodes and the estimate (here on a released hold-out) cannot be trusted: it must say so."""
    bad = _fit(release_file, variance_cap=None, learning_rate=2.0, alpha=0.01)
    assert bad.telemetry_["max_noise_energy"] > 8
    with pytest.warns(NumericalWarning, match="not reliable"):
        est = bad.private_risk(release_file)
    assert not est.reliable and est.ci95 is None and "UNRELIABLE" in est.describe()
    good = _fit(release_file)            # capped at sigma^2|theta|^2 <= 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericalWarning)
        est = good.private_risk(release_file)
    assert est.reliable and est.ci95 is not None and est.noise_energy <= 2.0 + 1e-9


def test_evaluate_private_prints_no_interval_when_unreliable(release_file, tmp_path, capsys):
    from iwpfast.cli import main
    bad = _fit(release_file, variance_cap=None, learning_rate=2.0, alpha=0.01)
    bad.save(tmp_path / "bad.json")
    assert main(["evaluate", str(tmp_path / "bad.json"), str(release_file), "--private"]) == 0
    out = capsys.readouterr().out
    assert "UNRELIABLE" in out and "95% CI" not in out
    good = _fit(release_file)
    good.save(tmp_path / "good.json")
    assert main(["evaluate", str(tmp_path / "good.json"), str(release_file), "--private"]) == 0
    assert "95% CI" in capsys.readouterr().out


def test_streamed_0_1_labels_are_recoded_to_int8_and_train_as_plus_minus_one(tmp_path):
    # a label column of 0/1 in a file is recoded batch by batch to +-1 as int8 (the kernels take
    # labels in their own dtype, as a release's int8 labels): the same model, bit for bit, as
    # the same file with -1/+1 labels
    import pyarrow as pa
    import pyarrow.parquet as pq
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (5000, 3))
    y01 = (X @ np.array([1.0, -1.0, 0.5]) + 0.3 * rng.standard_normal(5000) > 0).astype(np.int64)
    cols = {f"x{j}": X[:, j] for j in range(3)}
    pq.write_table(pa.table({**cols, "y": y01}), tmp_path / "a.parquet")
    pq.write_table(pa.table({**cols, "y": (2 * y01 - 1).astype(np.int8)}), tmp_path / "b.parquet")
    kw = dict(features=list(cols), label="y", noise_var=0.1, label_keep_prob=0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = IWPClassifier(alpha=0.1, learning_rate=0.05, progress=False).fit(tmp_path / "a.parquet", **kw)
        b = IWPClassifier(alpha=0.1, learning_rate=0.05, progress=False).fit(tmp_path / "b.parquet", **kw)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert list(a.classes_) == [0, 1] and list(b.classes_) == [-1, 1]
    schema_fn, batch_fn = IWPClassifier(progress=False)._label_mapper("y")
    batch = batch_fn(pa.record_batch({"y": pa.array(y01[:10])}))
    assert batch.schema.field("y").type == pa.int8() == schema_fn(batch.schema).field("y").type
    np.testing.assert_array_equal(batch.column(0).to_numpy(), 2 * y01[:10] - 1)
