"""scikit-learn model selection on the arrays of a release (issue 47 item 8): ``release_spec=`` on
the estimator (arrays carry no metadata, and scikit-learn's indexing drops a ``Privatized``), the
release's labels understood by ``score``, and ``iwpfast.metrics.private_scorer`` (minus the
debiased risk of a fold)."""
import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score  # noqa: E402

import iwpfast  # noqa: E402
from iwpfast import IWPClassifier, IWPRegressor  # noqa: E402
from iwpfast.exceptions import InvalidInputError  # noqa: E402
from iwpfast.privacy import ReleaseSpec, privatize  # noqa: E402

ROWS = 4_000
FIXED = dict(alpha=0.01, learning_rate=0.1, progress=False)


@pytest.fixture(scope="module")
def rel():
    rng = np.random.default_rng(7)
    X = rng.uniform(0, 1, (ROWS, 2))
    y = (X[:, 0] - X[:, 1] + 0.2 * rng.standard_normal(ROWS) > 0).astype(int)
    spec = ReleaseSpec(features=["a", "b"], label="y", epsilon_x=8.0, delta=1e-5, bound=1.0,
                       epsilon_y=3.0, ranges="a=0:1,b=0:1")
    return privatize(X, y, spec, seed=3)


def test_release_spec_is_a_parameter_clone_keeps(rel):
    est = IWPClassifier(release_spec=rel.spec, **FIXED)
    assert est.get_params()["release_spec"] is rel.spec
    copy = clone(est)
    assert copy.release_spec == rel.spec
    assert "release_spec" in IWPRegressor().get_params()
    with pytest.raises(InvalidInputError, match="release_spec must be None or the ReleaseSpec"):
        IWPClassifier(release_spec={"epsilon_x": 1}).fit(rel.X, rel.y)


def test_fit_on_arrays_with_release_spec_is_the_fit_of_the_release(rel):
    by_param = IWPClassifier(release_spec=rel.spec, **FIXED).fit(rel.X, rel.y)
    by_pair = IWPClassifier(**FIXED).fit(rel)
    assert np.array_equal(by_param.coef_, by_pair.coef_)
    assert by_param.mode_ == "iwp" and by_param.classes_.tolist() == [0, 1]


def test_score_reads_rows_and_labels_of_the_release(rel):
    est = IWPClassifier(release_spec=rel.spec, **FIXED).fit(rel.X[:3000], rel.y[:3000])
    Xt, yt = rel.X[3000:], rel.y[3000:]
    # the rows are in the release's space (not scaled again), the labels -1/+1
    u = est.decision_function(Xt, scaled=True)
    assert np.array_equal(est.decision_function(Xt), u)
    expected = np.mean(np.where(u > 0, 1, -1) == yt)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # the release's noise is no units mistake
        assert est.score(Xt, yt) == pytest.approx(expected)


def test_cross_val_score_and_grid_search_on_a_release(rel):
    est = IWPClassifier(release_spec=rel.spec, **FIXED)
    cv = KFold(4)
    acc = cross_val_score(est, rel.X, rel.y, cv=cv, error_score="raise")
    assert np.all(np.isfinite(acc)) and acc.mean() > 0.6
    private = cross_val_score(est, rel.X, rel.y, cv=cv, error_score="raise",
                              scoring=iwpfast.metrics.private_scorer)
    assert np.all(np.isfinite(private)) and np.all(private < 0)
    search = GridSearchCV(est, {"alpha": [0.001, 0.01, 10.0]}, cv=cv, error_score="raise",
                          scoring=iwpfast.metrics.private_scorer).fit(rel.X, rel.y)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores))
    assert search.best_params_["alpha"] != 10.0         # the over-regularized model loses
    assert search.best_estimator_.release_spec == rel.spec       # a clone's copy


def test_private_scorer_is_minus_the_debiased_risk_of_the_fold(rel):
    est = IWPClassifier(release_spec=rel.spec, **FIXED).fit(rel.X[:3000], rel.y[:3000])
    from iwpfast.estimators._inputs import with_release
    source, _ = with_release(rel.X[3000:], rel.y[3000:], rel.spec, None)
    risk = est.private_risk(source).risk
    assert iwpfast.metrics.private_scorer(est, rel.X[3000:], rel.y[3000:]) == -risk
    explicit = iwpfast.metrics.make_private_scorer(rel.spec)
    plain = IWPClassifier(**FIXED).fit(rel.X[:3000], rel.y[:3000], release_spec=rel.spec)
    assert explicit(plain, rel.X[3000:], rel.y[3000:]) == -risk


def test_fit_params_route_works_with_the_private_scorer_and_names_the_fix(rel):
    cv = KFold(4)
    scores = cross_val_score(IWPClassifier(**FIXED), rel.X, rel.y, cv=cv, params=rel.fit_params(),
                             scoring=iwpfast.metrics.private_scorer, error_score="raise")
    with_param = cross_val_score(IWPClassifier(release_spec=rel.spec, **FIXED), rel.X, rel.y,
                                 cv=cv, scoring=iwpfast.metrics.private_scorer)
    assert np.array_equal(scores, with_param)
    # the default score on that route: the message names the constructor parameter
    with pytest.raises(InvalidInputError, match=r"IWPClassifier\(release_spec=spec\)"):
        cross_val_score(IWPClassifier(**FIXED), rel.X, rel.y, cv=cv, params=rel.fit_params(),
                        error_score="raise")


def test_private_scorer_without_a_spec_says_what_it_needs():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (500, 2))
    y = np.where(X[:, 0] > 0, 1, -1)
    est = IWPClassifier(**FIXED).fit(X, y, noise_var=0.0)
    with pytest.raises(InvalidInputError, match="make_private_scorer"):
        iwpfast.metrics.private_scorer(est, X, y)


def test_metrics_is_a_lazy_attribute():
    import subprocess
    import sys
    code = ("import sys, iwpfast; assert 'iwpfast.metrics' not in sys.modules; "
            "assert callable(iwpfast.metrics.private_scorer); assert 'sklearn' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_regressor_takes_release_spec_on_arrays():
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, (ROWS, 2))
    t = X @ np.array([1.0, -0.5]) + 0.1 * rng.standard_normal(ROWS)
    spec = ReleaseSpec(features=["a", "b"], label="t", task="regression", epsilon_x=8.0,
                       delta=1e-5, bound=1.0, epsilon_y=3.0, ranges="a=0:1,b=0:1",
                       target_range=(-1.0, 1.5))
    r = privatize(X, t, spec, seed=2)
    est = IWPRegressor(release_spec=r.spec, **FIXED).fit(r.X, r.y)
    assert np.array_equal(est.coef_, IWPRegressor(**FIXED).fit(r).coef_)
    scores = cross_val_score(IWPRegressor(release_spec=r.spec, **FIXED), r.X, r.y, cv=KFold(3),
                             scoring=iwpfast.metrics.private_scorer, error_score="raise")
    # (the debiased squared error subtracts the target noise: a fold's estimate may be < 0)
    assert np.all(np.isfinite(scores))


def test_a_model_with_release_spec_saves_and_loads_it(rel, tmp_path):
    est = IWPClassifier(release_spec=rel.spec, **FIXED).fit(rel.X, rel.y)
    est.save(tmp_path / "m.json")
    back = iwpfast.load(tmp_path / "m.json")
    assert back.release_spec == rel.spec
    assert np.array_equal(back.predict(rel.X[:50]), est.predict(rel.X[:50]))


def test_regressor_default_score_on_release_folds_compares_in_the_models_space():
    # the folds' y are released targets (the model's [-1, 1] space): R^2 is computed there, not
    # against predictions in the target's units.  (It stays a poor criterion for a debiased
    # model -- noisy features times debiased coefficients -- hence iwpfast.metrics.private_scorer;
    # here it must at least compare like with like.)
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (20_000, 2))
    t = X @ np.array([1.0, -0.5]) + 0.1 * rng.standard_normal(20_000)
    spec = ReleaseSpec(features=["a", "b"], label="t", task="regression", epsilon_x=8.0,
                       delta=1e-5, bound=1.0, epsilon_y=8.0, ranges="a=0:1,b=0:1",
                       target_range=(-1.0, 3.0))
    r = privatize(X, t, spec, seed=5)
    model = IWPRegressor(release_spec=r.spec, solver="moments", progress=False)
    scores = cross_val_score(model, r.X, r.y, cv=KFold(3), error_score="raise")
    assert np.all(np.isfinite(scores))
    fitted = clone(model).fit(r.X, r.y)
    y = np.asarray(r.y, np.float64)
    in_model_space = 1 - np.mean((y - fitted.predict(r.X, target_units="model")) ** 2) / np.var(y)
    in_target_units = 1 - np.mean((y - fitted.predict(r.X)) ** 2) / np.var(y)
    assert fitted.score(r.X, r.y) == pytest.approx(in_model_space, rel=1e-9)
    assert in_target_units < in_model_space - 0.1
