"""partial_fit with the default alpha/learning_rate = "auto": a stream cannot hold rows out, so the
values are the centre of the grid fit would derive, from public quantities only (docs/tuning.md
"partial_fit"); and partial_fit learning k > 2 classes as one-vs-rest heads."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from iwpfast import IWPClassifier, IWPRegressor
from iwpfast.estimators._base import STREAM_ROWS
from iwpfast.exceptions import InvalidInputError
from iwpfast.sgd import tuning
from iwpfast.sgd.grid import default_grid, grid_centre
from iwpfast.sgd.schedules import default_radius


def _binary(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 3))
    y = (X @ np.array([1.5, -1.0, 0.5]) + 0.3 * rng.standard_normal(n) > 0).astype(int)
    return X, y


def _expected_centre(loss, n_rows, p, noise_var, keep, cap, bound=None):
    """The grid centre from the documented formulas (docs/tuning.md), public quantities only."""
    bound = math.sqrt(p) if bound is None else bound
    points = default_grid(loss=loss, n_rows=n_rows, bound=bound, batch_size=128,
                                 noise_var=noise_var, label_keep_prob=keep, n_features=p,
                                 variance_cap=cap, radius_of=lambda a: default_radius(loss, bound, a))
    return grid_centre(points)


@pytest.mark.parametrize("n_rows_total", [None, 40_000])
def test_auto_is_the_derived_centre_from_public_quantities(n_rows_total):
    X, y = _binary(600, 0)
    Xn = X + np.random.default_rng(1).normal(0, 0.5, X.shape)
    model = IWPClassifier(progress=False).partial_fit(Xn, y, noise_var=0.25, epsilon_y=2.0,
                                                      n_rows_total=n_rows_total)
    keep = 1.0 / (1.0 + math.exp(-2.0))
    centre = _expected_centre("exponential", STREAM_ROWS if n_rows_total is None else n_rows_total,
                              3, 0.25, keep, tuning.AUTO_VARIANCE_CAP)
    assert (model.alpha_, model.learning_rate_) == (centre.alpha, centre.learning_rate)
    cfg = model._pass.config
    assert cfg.variance_cap == tuning.AUTO_VARIANCE_CAP
    # tail averaging only when the pass's length is known
    expected_start = -1 if n_rows_total is None else (-(-n_rows_total // 128)) // 2
    assert cfg.average_start == expected_start


def test_auto_never_reads_the_data_values_and_stays_for_the_pass():
    X1, y1 = _binary(500, 2)
    X2, y2 = _binary(500, 3)
    a = IWPRegressor(progress=False).partial_fit(X1, X1 @ [1.0, 0.0, 2.0], noise_var=0.1)
    b = IWPRegressor(progress=False).partial_fit(5 * X2, -y2.astype(float), noise_var=0.1)
    # other values, same public quantities (p, noise, loss, batch, n): the same hyper-parameters
    assert (a.alpha_, a.learning_rate_) == (b.alpha_, b.learning_rate_)
    config = a._pass.config
    a.partial_fit(X2, X2 @ [1.0, 0.0, 2.0], noise_var=0.1)
    assert a._pass.config == config and (a.alpha_, a.learning_rate_) == (b.alpha_, b.learning_rate_)


def test_auto_partial_fit_over_any_split_is_one_partial_fit():
    X, y = _binary(1000, 4)
    whole = IWPClassifier(progress=False).partial_fit(X, y, noise_var=0.0).finalize()
    parts = IWPClassifier(progress=False)
    for lo, hi in ((0, 333), (333, 700), (700, 1000)):
        parts.partial_fit(X[lo:hi], y[lo:hi], noise_var=0.0)
    parts.finalize()
    np.testing.assert_array_equal(whole.coef_, parts.coef_)
    assert whole.intercept_[0] == parts.intercept_[0]
    # and it learns: clean test accuracy above 0.75 (chance 0.5; SE over 4000 rows <= 0.008,
    # so the margin is > 30 standard errors; measured 0.9)
    Xt, yt = _binary(4000, 5)
    assert whole.score(Xt, yt) > 0.75


def test_auto_partial_fit_refuses_a_list_naming_the_fix():
    X, y = _binary(100, 6)
    with pytest.raises(InvalidInputError, match="cannot choose alpha from a list"):
        IWPClassifier(alpha=[0.1, 1.0], progress=False).partial_fit(X, y)


def test_partial_fit_after_an_auto_fit_continues_its_chosen_head():
    X, y = _binary(3000, 7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = IWPClassifier(progress=False).fit(X, y)
    alpha, step = model.alpha_, model.learning_rate_
    config = model._pass.config
    model.partial_fit(X[:500], y[:500])
    assert (model.alpha_, model.learning_rate_) == (alpha, step) and model._pass.config == config


# ------------------------------------------------------------------------------ k classes
W = np.array([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [-1.5, -1.5, 0.5]])
NAMES = np.array(["a", "b", "c"])


def _three(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 3))
    return X, np.argmax(X @ W.T + 0.3 * rng.standard_normal((n, 3)), axis=1)


@pytest.mark.parametrize("epsilon_y", [None, 2.0])
def test_partial_fit_k_classes_over_any_split_is_fit(epsilon_y):
    X, y = _three(1500, 8)
    params = dict(alpha=0.1, learning_rate=0.05, batch_size=64, progress=False)
    labels = NAMES[y]
    whole = IWPClassifier(**params).fit(X, labels, classes=["a", "b", "c"], noise_var=0.1,
                                        epsilon_y=epsilon_y)
    parts = IWPClassifier(**params)
    for i, (lo, hi) in enumerate(((0, 500), (500, 1001), (1001, 1500))):
        parts.partial_fit(X[lo:hi], labels[lo:hi], noise_var=0.1, epsilon_y=epsilon_y,
                          classes=["a", "b", "c"] if i in (0, 2) else None)
        assert parts.coef_.shape == (3, 3) and parts.classes_.tolist() == ["a", "b", "c"]
    parts.finalize()
    np.testing.assert_array_equal(parts.coef_, whole.coef_)
    np.testing.assert_array_equal(parts.intercept_, whole.intercept_)
    assert parts.n_rows_seen_ == 1500
    np.testing.assert_array_equal(parts.predict(X), whole.predict(X))


def test_partial_fit_k_classes_from_a_release_is_fit(tmp_path):
    import pandas as pd
    import pyarrow.parquet as pq

    from iwpfast.privacy import ReleaseSpec, release
    X, y = _three(3000, 9)
    df = pd.DataFrame(X, columns=["f0", "f1", "f2"])
    df["y"] = NAMES[y]
    spec = ReleaseSpec(epsilon_x=4, delta=1e-5, bound=1.7, epsilon_y=2.0,
                       features=["f0", "f1", "f2"], ranges={f: (-1.0, 1.0) for f in df.columns[:3]},
                       label="y", classes=["a", "b", "c"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # seeded release: a test fixture
        release(df, tmp_path / "r.parquet", spec, seed=2)
    params = dict(loss="logistic", alpha=0.1, learning_rate=0.05, progress=False)
    whole = IWPClassifier(**params).fit(tmp_path / "r.parquet")
    table = pq.read_table(tmp_path / "r.parquet")
    parts = IWPClassifier(**params)
    parts.partial_fit(table.slice(0, 1234)).partial_fit(table.slice(1234)).finalize()
    np.testing.assert_array_equal(parts.coef_, whole.coef_)
    assert parts.classes_.tolist() == ["a", "b", "c"]


def test_partial_fit_k_classes_auto_uses_the_label_weights_public_equivalent():
    from iwpfast.estimators._multiclass import equivalent_keep_prob
    from iwpfast.label_noise import label_weight_table
    X, y = _three(600, 10)
    model = IWPClassifier(progress=False).partial_fit(X, y, classes=[0, 1, 2], noise_var=0.2,
                                                      epsilon_y=1.5, n_rows_total=20_000)
    keep = equivalent_keep_prob(label_weight_table(1.5, 3))
    # two classes: the equivalent is the binary keep probability itself
    assert equivalent_keep_prob(label_weight_table(1.5, 2)) == pytest.approx(
        1.0 / (1.0 + math.exp(-1.5)), rel=1e-12)
    centre = _expected_centre("exponential", 20_000, 3, 0.2, keep, tuning.AUTO_VARIANCE_CAP)
    assert (model.alpha_, model.learning_rate_) == (centre.alpha, centre.learning_rate)
    assert all(c.alpha == centre.alpha for c in model._pass.ovr.configs)


def test_partial_fit_k_classes_errors_name_the_fix():
    X, y = _three(300, 11)
    model = IWPClassifier(alpha=0.1, learning_rate=0.05, progress=False)
    model.partial_fit(X, y, classes=[0, 1, 2])
    with pytest.raises(InvalidInputError, match=r"classes=\[0, 1, 3\] but this pass learns"):
        model.partial_fit(X, y, classes=[0, 1, 3])
    bad = y.copy()
    bad[17] = 5
    with pytest.raises(InvalidInputError, match=r"y\[17\] = 5 is not one of the classes"):
        model.partial_fit(X, bad)
    with pytest.raises(InvalidInputError, match="declare all k classes on the pass's first call"):
        IWPClassifier(alpha=0.1, learning_rate=0.05, progress=False).partial_fit(
            X, NAMES[y])
