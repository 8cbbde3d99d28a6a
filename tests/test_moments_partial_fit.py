"""``partial_fit`` with ``solver='moments'`` (issue 44 item 1): each call adds its batch's debiased
moments to the pass's sums and solves again; any split of the rows gives the statistics of one
``fit`` (up to float addition order) and, at a fixed alpha, its coefficients to 1e-12."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from test_moments import kind_release

import iwpfast
from iwpfast import IWPClassifier, IWPRegressor
from iwpfast.estimators._moments import moment_pass
from iwpfast.exceptions import InvalidInputError, NumericalWarning
from iwpfast.moment_stats import privatized_table

#: predicting on a release's noisy rows (values outside the declared ranges) warns: expected here;
#: and small releases may choose the constant model under alpha='auto'
pytestmark = [pytest.mark.filterwarnings("ignore::iwpfast.exceptions.UnitsWarning"),
              pytest.mark.filterwarnings("ignore::iwpfast.exceptions.NumericalWarning")]

#: uneven batch boundaries (a batch of one row, batches across fold blocks of 1,024 rows)
CUTS = [700, 2_000, 2_001, 4_100]
NOISE = dict(noise_var=0.3, epsilon_y=2.0)


def _rows(n=6_000, p=4, seed=0, k=2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, p))
    score = 3 * X @ np.linspace(1.5, -1.0, p)
    if k == 2:
        return X, (rng.uniform(size=n) < 1 / (1 + np.exp(-score))).astype(int)
    return X, np.digitize(score + rng.logistic(size=n), np.quantile(score, [1 / 3, 2 / 3]))


def _classifier(**kw):
    return IWPClassifier(solver="moments", loss="quadratic", progress=False, **kw)


def _regressor(**kw):
    return IWPRegressor(solver="moments", progress=False, **kw)


def _batches(n, cuts=CUTS):
    return np.split(np.arange(n), cuts)


def _same_statistics(a, b):
    """The two estimators' passes hold the same fold sums (up to float addition order)."""
    fa, fb = moment_pass(a).folds, moment_pass(b).folds
    assert [f.rows for f in fa] == [f.rows for f in fb]
    for x, y in zip(fa, fb, strict=True):
        np.testing.assert_allclose(x.gram_sum, y.gram_sum, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(x.rhs_sum, y.rhs_sum, rtol=1e-12, atol=1e-9)


def _same_model(a, b, rtol=1e-12):
    np.testing.assert_allclose(np.asarray(b.coef_), np.asarray(a.coef_), rtol=rtol, atol=1e-13)
    np.testing.assert_allclose(np.asarray(b.intercept_), np.asarray(a.intercept_), rtol=rtol,
                               atol=1e-13)
    assert b.n_rows_seen_ == a.n_rows_seen_ and b.solver_ == "moments"


# ------------------------------------------------------------------ any split = one fit
@pytest.mark.parametrize("alpha", [0.01, "auto"])
def test_binary_arrays_split_in_batches_give_the_fit_of_all_rows(alpha):
    X, y = _rows()
    whole = _classifier(alpha=alpha).fit(X, y, **NOISE)
    model = _classifier(alpha=alpha)
    # 'auto' chooses on the folds: the first batch must reach two of them (1,024-row blocks)
    for rows in _batches(len(y), CUTS if alpha == 0.01 else [1_500, 2_000, 2_001, 4_100]):
        model.partial_fit(X[rows], y[rows], **NOISE)
        assert model.n_rows_seen_ == rows[-1] + 1 and hasattr(model, "coef_")   # usable
        assert model.predict(X[:5]).shape == (5,)
    _same_statistics(whole, model)
    _same_model(whole, model, rtol=1e-12 if alpha == 0.01 else 1e-9)
    assert model.alpha_ == pytest.approx(whole.alpha_, rel=1e-12)
    assert list(model.classes_) == [0, 1]
    np.testing.assert_allclose(model.coef_stderr_, whole.coef_stderr_, rtol=1e-9)
    before = model.coef_.copy()
    assert model.finalize() is model        # nothing carried: a no-op
    np.testing.assert_array_equal(model.coef_, before)


def test_k_classes_declared_on_the_first_call_give_the_fit_of_all_rows():
    X, y = _rows(k=3, seed=1)
    classes = [0, 1, 2]
    whole = _classifier(alpha=0.01).fit(X, y, classes=classes, **NOISE)
    model = _classifier(alpha=0.01)
    for i, rows in enumerate(_batches(len(y))):
        # classes on the first call only (a later call may repeat them)
        model.partial_fit(X[rows], y[rows], classes=classes if i in (0, 2) else None, **NOISE)
    assert model.coef_.shape == (3, 4) and list(model.classes_) == classes
    _same_statistics(whole, model)
    _same_model(whole, model)


def test_regression_arrays_split_in_batches_give_the_fit_of_all_rows():
    X, _ = _rows(seed=2)
    t = X @ np.array([0.5, -1.0, 0.25, 2.0]) + np.random.default_rng(3).normal(0, 0.5, len(X))
    whole = _regressor(alpha=0.01).fit(X, t, noise_var=0.3)
    model = _regressor(alpha=0.01)
    for rows in _batches(len(t)):
        model.partial_fit(X[rows], t[rows], noise_var=0.3)
    _same_statistics(whole, model)
    _same_model(whole, model)
    assert np.ndim(model.intercept_) == 0


def _kind_release(kind, R=300, seed=11):
    return kind_release(kind, R, seed)


def _release_parts(rel, tmp_path, cuts):
    """The release as one Parquet file, and its rows read back in batches (tables with the
    file's schema and its release metadata)."""
    whole = tmp_path / "release.parquet"
    pq.write_table(privatized_table(rel), whole)
    table = pq.read_table(whole)
    return str(whole), [table.slice(int(rows[0]), len(rows))
                        for rows in np.split(np.arange(table.num_rows), cuts)]


@pytest.mark.parametrize("kind", ["gaussian_discrete", "laplace", "kary_labels", "regression",
                                  "rr_categorical"])
def test_a_release_file_split_in_batches_gives_the_fit_of_the_file(kind, tmp_path):
    rel = _kind_release(kind)                       # 300 x 24 = 7,200 rows
    whole_file, parts = _release_parts(rel, tmp_path, [1_000, 1_001, 3_500, 6_000])
    make = _regressor if kind == "regression" else _classifier
    whole = make(alpha=1.0).fit(whole_file)
    model = make(alpha=1.0)
    for part in parts:
        model.partial_fit(part)
    _same_statistics(whole, model)
    _same_model(whole, model)
    assert model.features_ == whole.features_
    np.testing.assert_allclose(model.predict(whole_file), whole.predict(whole_file), rtol=1e-12)


def test_the_alpha_search_after_every_call_matches_fit_on_the_rows_so_far(tmp_path):
    rel = _kind_release("gaussian_discrete", R=400)     # 9,600 rows
    # a first part of at least folds x 1,024 rows: fit deals it the 1,024-row blocks a
    # partial_fit without n_rows_total deals (moment_stats.fold_block_rows)
    whole_file, parts = _release_parts(rel, tmp_path, [5_200])
    model = _classifier()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)   # small data: the constant may win
        model.partial_fit(parts[0])
        first = _classifier().fit(parts[0])
        _same_model(first, model, rtol=1e-9)
        model.partial_fit(parts[1])
        whole = _classifier().fit(whole_file)
    _same_model(whole, model, rtol=1e-9)
    assert model.tuning_["folds"] == 5 and model.tuning_["n_train"] == 9_600


def test_fit_then_partial_fit_continues_the_pass():
    X, y = _rows()
    whole = _classifier(alpha=0.01).fit(X, y, **NOISE)
    # a first fit of at least folds x 1,024 rows deals 1,024-row blocks, as fit on all rows
    # does (fewer rows get smaller blocks: moment_stats.fold_block_rows)
    model = _classifier(alpha=0.01).fit(X[:5_200], y[:5_200], **NOISE)
    model.partial_fit(X[5_200:], y[5_200:], **NOISE)
    _same_statistics(whole, model)
    _same_model(whole, model)


def test_a_dataframe_batch_keeps_its_column_names():
    X, y = _rows()
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    whole = _classifier(alpha=0.01).fit(frame, y, **NOISE)
    model = _classifier(alpha=0.01)
    for rows in _batches(len(y)):
        model.partial_fit(frame.iloc[rows], y[rows], **NOISE)
    _same_model(whole, model)
    assert list(model.feature_names_in_) == ["a", "b", "c", "d"]


def test_a_first_batch_in_one_fold_waits_for_the_next_under_auto():
    X, y = _rows()
    model = _classifier()
    with pytest.raises(InvalidInputError, match="fill only one.*next partial_fit"):
        model.partial_fit(X[:500], y[:500], **NOISE)
    model.partial_fit(X[500:], y[500:], **NOISE)        # the 500 rows were kept
    whole = _classifier().fit(X, y, **NOISE)
    _same_model(whole, model, rtol=1e-9)
    _classifier(alpha=0.1).partial_fit(X[:500], y[:500], **NOISE)   # a fixed alpha solves
    # fit knows the length: 500 rows are dealt in blocks of 16, every part holds rows
    small = _classifier().fit(X[:500], y[:500], **NOISE)
    assert small.solver_ == "moments" and len(small.tuning_["alpha"]) == 38
    with pytest.raises(InvalidInputError, match="fill only one: pass a number as alpha"):
        _classifier().fit(X[:1], y[:1], **NOISE)                    # one row: one part


# ------------------------------------------------------------------ what must stay the same
def test_later_calls_with_other_features_label_or_noise_are_refused_naming_what_differs():
    X, y = _rows()
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    model = _classifier(alpha=0.01).partial_fit(frame.iloc[:2_000], y[:2_000], **NOISE)
    coef = model.coef_.copy()
    with pytest.raises(InvalidInputError, match=r"coordinates \['a', 'b', 'd', 'c'\]"):
        model.partial_fit(frame[["a", "b", "d", "c"]].iloc[2_000:], y[2_000:], **NOISE)
    with pytest.raises(InvalidInputError, match="feature noise variances"):
        model.partial_fit(frame.iloc[2_000:], y[2_000:], noise_var=0.2, epsilon_y=2.0)
    with pytest.raises(InvalidInputError, match=r"label law"):
        model.partial_fit(frame.iloc[2_000:], y[2_000:], noise_var=0.3, epsilon_y=1.0)
    np.testing.assert_array_equal(model.coef_, coef)      # nothing added by a refused call
    assert moment_pass(model).rows == 2_000
    reg = _regressor(alpha=0.01).partial_fit(X[:2_000], X[:2_000, 0], noise_var=0.3,
                                             target_noise_var=0.1)
    with pytest.raises(InvalidInputError, match="target_noise_var=0.2"):
        reg.partial_fit(X[2_000:], X[2_000:, 0], noise_var=0.3, target_noise_var=0.2)


def test_a_batch_of_another_release_is_refused(tmp_path):
    a = _kind_release("gaussian_discrete")
    b = _kind_release("laplace")
    model = _classifier(alpha=1.0).partial_fit(privatized_table(a))
    with pytest.raises(InvalidInputError, match="feature noise variances"):
        model.partial_fit(privatized_table(b))
    rr = _kind_release("rr_categorical")
    with pytest.raises(InvalidInputError, match="coordinates"):
        model.partial_fit(privatized_table(rr))


def test_class_weight_and_sample_weight_are_refused_with_the_fix():
    # class_weight='balanced' needs the shares of all rows before the weights exist (and a
    # dict one Gram per fold and released class): fit reads the source once, partial_fit refuses
    X, y = _rows()
    with pytest.raises(InvalidInputError, match="class_weight.*use fit"):
        _classifier(class_weight="balanced").partial_fit(X, y, **NOISE)
    with pytest.raises(InvalidInputError, match="sample_weight"):
        _classifier().partial_fit(X, y, sample_weight=np.ones(len(y)), **NOISE)


def test_one_pass_runs_one_solver():
    X, y = _rows()
    sgd = IWPClassifier(loss="quadratic", alpha=0.01, learning_rate=0.05, progress=False)
    sgd.partial_fit(X[:2_000], y[:2_000], **NOISE)
    sgd.set_params(solver="moments")
    with pytest.raises(InvalidInputError, match="solver='sgd'"):
        sgd.partial_fit(X[2_000:], y[2_000:], **NOISE)
    model = _classifier(alpha=0.01).partial_fit(X[:2_000], y[:2_000], **NOISE)
    model.set_params(solver="sgd")
    with pytest.raises(InvalidInputError, match="one pass runs one solver"):
        model.partial_fit(X[2_000:], y[2_000:], **NOISE)


# ------------------------------------------------------------------ the model file
def test_save_load_after_partial_fit_predicts_the_same_and_refuses_more_rows(tmp_path):
    X, y = _rows()
    model = _classifier()
    for rows in _batches(len(y)):
        if len(rows) > 1_500:
            model.partial_fit(X[rows], y[rows], **NOISE)
    path = tmp_path / "m.json"
    model.save(path)
    back = iwpfast.load(path)
    np.testing.assert_array_equal(back.predict(X), model.predict(X))
    np.testing.assert_array_equal(back.decision_function(X), model.decision_function(X))
    assert back.solver_ == "moments"
    with pytest.raises(InvalidInputError, match="model file stores no sums"):
        back.partial_fit(X, y, **NOISE)
    assert back.finalize() is back
