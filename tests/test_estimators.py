"""IWPClassifier / IWPRegressor: parameter protocol, validation, fit on files == fit on arrays,
partial_fit == fit, private_risk unbiasedness, bad input."""
import math
import warnings

import numpy as np
import pytest

from iwpfast import IWPClassifier, IWPRegressor
from iwpfast.exceptions import InvalidInputError, NotFittedError, NumericalWarning, ReleaseSpecError

pytestmark = pytest.mark.kernels  # every fit runs the fused kernels (small sizes: also fast without JIT)

P = 3
RANGES = {f"x{j}": (-1.0, 1.0) for j in range(P)}


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, P))
    theta = np.array([1.5, -1.0, 0.5])
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-(X @ theta))), 1.0, -1.0)
    return X, y


def _spec(**kw):
    from iwpfast.privacy import ReleaseSpec
    args = dict(epsilon_x=2.0, delta=1e-5, bound=math.sqrt(P), epsilon_y=2.0,
                features=tuple(RANGES), ranges=RANGES, label="y")
    args.update(kw)
    return ReleaseSpec(**args)


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A small release on disk, plus its released columns as arrays and the clean data."""
    import pyarrow.parquet as pq

    from iwpfast.privacy import release

    X, y = _data(3000)
    d = tmp_path_factory.mktemp("rel")
    path = d / "rel.parquet"
    res = release({**{f"x{j}": X[:, j] for j in range(P)}, "y": y}, path, _spec(), seed=7)
    t = pq.read_table(path)
    Xr = np.column_stack([t.column(f"x{j}").to_numpy() for j in range(P)]).astype(np.float64)
    yr = t.column("y").to_numpy(zero_copy_only=False).astype(np.float64)
    return path, res.spec, Xr, yr, X, y


def _model(**kw):
    args = dict(alpha=0.5, learning_rate=0.02, progress=False)
    args.update(kw)
    return IWPClassifier(**args)


# ------------------------------------------------------------------ parameter protocol
def test_get_set_params_and_repr_keep_values_as_given():
    m = IWPClassifier(loss="logistic", average="tail", radius=None)
    params = m.get_params()
    assert params["loss"] == "logistic" and params["average"] == "tail" and params["radius"] is None
    assert "truncation" in params and "truncation" not in IWPRegressor().get_params()
    m.set_params(alpha=3.0, loss="bogus")  # stored as given: validation happens at fit time
    assert m.alpha == 3.0 and m.loss == "bogus"
    assert "alpha=3.0" in repr(m)
    with pytest.raises(InvalidInputError, match="no parameter 'alpah'.*alpha"):
        m.set_params(alpah=1)
    with pytest.raises(TypeError):
        IWPClassifier(1.0)  # keyword-only


def test_sklearn_clone_and_api_checks():
    sklearn = pytest.importorskip("sklearn")
    from sklearn.base import clone
    from sklearn.utils import estimator_checks as ec

    m = IWPClassifier(loss="quadratic", average=0.25, learning_rate=0.05)
    c = clone(m)
    assert c is not m and c.get_params() == m.get_params()
    # the subset of check_estimator that applies to a streaming estimator whose defaults differ
    for check in (ec.check_no_attributes_set_in_init, ec.check_parameters_default_constructible,
                  ec.check_get_params_invariance, ec.check_set_params):
        for est in (IWPClassifier(progress=False), IWPRegressor(progress=False)):
            check(type(est).__name__, est)
    assert sklearn.base.is_classifier(IWPClassifier()) and sklearn.base.is_regressor(IWPRegressor())


# ------------------------------------------------------------------ validation / bad input
def test_unfitted_estimator_raises_not_fitted():
    with pytest.raises(NotFittedError, match="not fitted.*fit"):
        IWPClassifier().predict(np.zeros((2, 3)))
    with pytest.raises(NotFittedError):
        IWPRegressor().save("/tmp/never.json")


@pytest.mark.parametrize("param,value,match", [
    ("loss", "hinge", "unknown loss 'hinge'.*'exponential', 'quadratic', 'logistic'"),
    ("schedule", "cosine", "unknown schedule 'cosine'.*'constant', 'inverse', 'paper'"),
    ("correction", "debias", "choose 'iwp'.*'none'"),
    ("average", "head", "average must be"),
    ("batch_size", 0, "batch_size must be a positive integer"),
    ("learning_rate", -1.0, "learning_rate must be"),
    ("truncation", 99, "truncation must be"),
])
def test_bad_hyper_parameters_name_the_fix(param, value, match):
    X, y = _data(200)
    with pytest.raises(InvalidInputError, match=match):
        _model(**{param: value}).fit(X, y)


def test_predict_feature_mismatch_names_the_features(released):
    path, spec, Xr, yr, X, y = released
    m = _model().fit(path)
    with pytest.raises(InvalidInputError, match=r"expecting 3 features .*\[.x0., .x1., .x2.\]"):
        m.predict(X[:, :2])
    import pyarrow as pa
    with pytest.raises(InvalidInputError, match=r"lacks the model's feature columns \['x2'\]"):
        m.predict(pa.table({"x0": X[:, 0], "x1": X[:, 1], "z": X[:, 2]}))
    # features= maps other column names onto the model's
    u = m.decision_function(pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2]}), features=["a", "b", "c"])
    np.testing.assert_allclose(u, m.decision_function(X))


def test_logistic_truncation_too_high_warns_with_the_mse_optimal_k(released):
    path = released[0]
    with pytest.warns(NumericalWarning, match=r"truncation=5 is too high.*MSE-optimal K is \d"):
        _model(loss="logistic", truncation=5).fit(path)
    auto = _model(loss="logistic", truncation="auto").fit(path)
    assert 0 <= auto.truncation_ < 5


def test_predict_proba_is_for_the_logistic_and_exponential_losses(released):
    path, spec, Xr, yr, X, y = released
    with pytest.raises(InvalidInputError, match="loss='logistic' or 'exponential'"):
        _model(loss="quadratic").fit(path).predict_proba(X)
    expo = _model().fit(path)
    u = expo.decision_function(X)
    np.testing.assert_allclose(expo.predict_proba(X)[:, 1], 1 / (1 + np.exp(-2 * u)), rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        proba = _model(loss="logistic", truncation=1).fit(path).predict_proba(X)
    assert proba.shape == (len(X), 2) and np.allclose(proba.sum(axis=1), 1.0)


# ------------------------------------------------------------------ fitting
def test_fit_on_release_file_equals_fit_on_its_arrays(released):
    path, spec, Xr, yr, X, y = released
    f = _model(average="tail").fit(path)
    a = _model(average="tail").fit(Xr, yr, noise_var=spec.sigma ** 2, epsilon_y=spec.epsilon_y,
                                   feature_bound=spec.bound)
    np.testing.assert_array_equal(f.coef_, a.coef_)  # same driver, same rows: bit-identical
    np.testing.assert_array_equal(f.intercept_, a.intercept_)
    assert f.n_rows_seen_ == a.n_rows_seen_ == 3000
    assert f.release_spec_ == spec and a.release_spec_ is None
    assert f.features_ == ["x0", "x1", "x2"] and f.label_ == "y"
    assert f.mode_ == "iwp" and f.radius_ == pytest.approx(spec.bound / 0.5)
    assert set(f.telemetry_) >= {"rows_seen", "batches", "projection_hits", "max_noise_energy"}
    assert list(f.classes_) == [0, 1]  # undeclared binary classes: the fixed rule (labels were -1/+1)


def test_fit_on_a_subset_of_released_features_in_another_order(released):
    # each released column carries its own noise, so [x2, x0] is a valid model: its variances are
    # looked up by name, and the fit equals the same columns given as arrays with those variances
    path, spec, Xr, yr, X, y = released
    f = _model(average="tail").fit(path, features=["x2", "x0"])
    a = _model(average="tail").fit(Xr[:, [2, 0]], yr, noise_var=spec.sigma ** 2,
                                   epsilon_y=spec.epsilon_y, feature_bound=spec.bound)
    np.testing.assert_array_equal(f.coef_, a.coef_)
    assert f.features_ == ["x2", "x0"]
    with pytest.raises(ReleaseSpecError, match="not among the released"):
        _model().fit(path, features=["x0", "nope"])


def test_parameters_contradicting_the_metadata_need_override(released):
    path, spec = released[0], released[1]
    with pytest.raises(ReleaseSpecError, match="contradict.*override=True"):
        _model().fit(path, noise_var=1.0)
    m = _model().fit(path, noise_var=1.0, override=True)
    np.testing.assert_allclose(m.noise_var_, 1.0)
    # agreeing explicit values are fine
    _model().fit(path, noise_var=spec.sigma ** 2)


def test_partial_fit_over_chunks_equals_one_fit(released):
    path, spec, Xr, yr, X, y = released
    kw = dict(noise_var=spec.sigma ** 2, epsilon_y=spec.epsilon_y, feature_bound=spec.bound)
    one = _model(average="tail").fit(Xr, yr, **kw)
    parts = _model(average="tail")
    for lo, hi in [(0, 1), (1, 700), (700, 701), (701, 2222), (2222, 3000)]:  # not batch-aligned
        parts.partial_fit(Xr[lo:hi], yr[lo:hi], n_rows_total=3000, **kw)
    # the last partial batch is carried (seen, not yet an update)...
    assert parts.n_rows_seen_ == 3000 and parts.n_iter_ == 3000 // 128
    parts.finalize()                                 # ...until finalize runs it, as fit does
    np.testing.assert_array_equal(parts.coef_, one.coef_)
    np.testing.assert_array_equal(parts.intercept_, one.intercept_)
    assert parts.n_iter_ == one.n_iter_ == math.ceil(3000 / 128)
    with pytest.raises(InvalidInputError, match="n_rows_total"):
        _model(average="tail").partial_fit(Xr[:10], yr[:10], **kw)


def test_clean_arrays_with_0_1_labels_and_dataframe_names():
    pd = pytest.importorskip("pandas")
    X, y = _data(1000)
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    m = _model().fit(df, (y > 0).astype(int))
    assert list(m.classes_) == [0, 1] and m.mode_ == "clean"
    assert list(m.feature_names_in_) == ["a", "b", "c"] and m.n_features_in_ == 3
    assert set(np.unique(m.predict(df))) <= {0, 1}
    assert m.score(df, (y > 0).astype(int)) > 0.6
    with pytest.raises(InvalidInputError, match=r"lacks the model's feature columns \['c'\]"):
        m.predict(df.rename(columns={"c": "d"}))


def test_regressor_fits_noisy_targets():
    rng = np.random.default_rng(3)
    n = 4000
    X = rng.uniform(-1, 1, size=(n, 2))
    y = X @ np.array([0.6, -0.3]) + 0.1
    sx, sy = 0.5, 0.3
    Xn = X + rng.normal(0, sx, X.shape)
    yn = y + rng.normal(0, sy, n)
    m = IWPRegressor(alpha=0.01, learning_rate=0.1, batch_size=16, average="tail", progress=False)
    m.fit(Xn, yn, noise_var=sx ** 2, target_noise_var=sy ** 2)
    naive = IWPRegressor(alpha=0.01, learning_rate=0.1, batch_size=16, average="tail", correction="none",
                         progress=False).fit(Xn, yn, noise_var=sx ** 2)
    # naive shrinks by ~1/(1 + sigma^2 / var(x)) = 1/(1 + 0.25*3) = 0.57; IWP does not
    assert np.linalg.norm(m.coef_ - [0.6, -0.3]) < 0.5 * np.linalg.norm(naive.coef_ - [0.6, -0.3])
    assert m.score(X, y) > naive.score(X, y)


# ------------------------------------------------------------------ private_risk
def test_private_risk_is_unbiased_over_releases():
    """Monte-Carlo over 60 releases of one hold-out: the mean of the estimates matches the clean
    risk within 4 Monte-Carlo standard errors (sd of the estimates / sqrt(60); a false alarm has
    probability ~6e-5), and the reported stderr matches the spread of the estimates (ratio in
    [0.7, 1.4]: the sd of a 60-sample sd is ~9%)."""
    from iwpfast.privacy import privatize

    X, y = _data(2000, seed=11)
    m = _model(loss="exponential").fit(X, y)  # a fixed model (clean fit)
    clean = m.risk(X, y)
    spec = _spec()
    est, se = [], []
    for seed in range(60):
        Xr, yr = privatize(X, y, spec, seed=seed)
        r = m.private_risk(np.asarray(Xr, dtype=np.float64), yr.astype(np.float64),
                           noise_var=spec.sigma ** 2, epsilon_y=spec.epsilon_y)
        est.append(r.risk)
        se.append(r.stderr)
    est = np.array(est)
    mc_se = est.std(ddof=1) / np.sqrt(len(est))
    assert abs(est.mean() - clean) < 4 * mc_se, (est.mean(), clean, mc_se)
    assert 0.7 < np.mean(se) / est.std(ddof=1) < 1.4
    # the naive estimate (no correction) is biased: far outside the same band
    naive = m.risk(np.asarray(Xr, dtype=np.float64), yr.astype(np.float64))
    assert abs(naive - clean) > 10 * mc_se


# ------------------------------------------------------------------ a pass run by another driver
def test_plan_pass_run_by_the_driver_and_adopted_is_fit(released):
    """plan_pass / adopt_pass (what iwpfast.distributed uses instead of the estimator's
    internals): the plan's source, columns and config run by the driver give fit's model."""
    from iwpfast.sgd import driver

    path = released[0]
    fitted = _model(average="tail").fit(path)
    model = _model(average="tail")
    plan = model.plan_pass(path)
    assert plan.features == [f"x{j}" for j in range(P)] and plan.label == "y" and plan.rows == 3000
    assert plan.config_for(3000).average_start == plan.config.average_start > 0
    assert plan.config_for(1000).average_start < plan.config.average_start   # tail of a shorter pass
    result = driver.fit_stream(plan.source, [driver.Head("model", plan.config, plan.features,
                                                         plan.label)], progress=False)
    model.adopt_pass(plan, result.states["model"], dict(result.telemetry["model"]))
    np.testing.assert_array_equal(model.coef_, fitted.coef_)
    np.testing.assert_array_equal(model.intercept_, fitted.intercept_)
    assert list(model.classes_) == list(fitted.classes_)
    assert model.n_rows_seen_ == fitted.n_rows_seen_ == 3000
    with pytest.raises(InvalidInputError, match="needs numbers for alpha and learning_rate"):
        IWPClassifier(progress=False).plan_pass(path)
