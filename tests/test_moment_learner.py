"""The moment learner (``solver='moments'``): its stages, the estimators on it, the model file, the CLI.

Statistical checks use fixed seeds; their bounds are stated where they are set.
"""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from test_moments import KINDS, _clean_table, kind_release

import iwpfast
from iwpfast import IWPClassifier, IWPRegressor
from iwpfast.exceptions import InvalidInputError, NumericalWarning
from iwpfast.moment_learner import (
    MomentSearch,
    choose,
    fit_moments,
    guard_floor,
    reduce,
    refit,
    scan,
)
from iwpfast.moment_stats import fold_block_rows, fold_moments, moments, solve_ridge
from iwpfast.privacy import ReleaseSpec, privatize


def _logistic(n, p=4, seed=0):
    rng = np.random.default_rng(seed)
    theta = np.linspace(1.5, -1.0, p)
    X = rng.uniform(-1, 1, (n, p))
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-3 * (X @ theta)))).astype(int)
    return X, y, theta


def _release(n=40_000, seed=0, **spec):
    X, y, theta = _logistic(n, seed=seed)
    names = ["a", "b", "c", "d"]
    kw = dict(epsilon_x=4.0, delta=1e-5, bound=2.0, epsilon_y=2.0, features=names,
              ranges={f: (-1.0, 1.0) for f in names}, label="y")
    kw.update(spec)
    return privatize(X, y, ReleaseSpec(**kw), seed=seed + 1), X, y


# ------------------------------------------------------------------ the stages
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_the_reduced_solve_equals_the_normal_equations(fit_intercept):
    rel, _, _ = _release(n=5_000)
    m = moments(rel)
    for alpha in (0.5, 1.0, 3.0):
        coef, intercept = refit(m, alpha, fit_intercept)
        want_coef, want_intercept = solve_ridge(m, alpha, fit_intercept=fit_intercept)
        np.testing.assert_allclose(coef[0], want_coef, rtol=1e-9, atol=1e-12)
        assert intercept[0] == pytest.approx(want_intercept, abs=1e-12)


def test_folds_add_up_to_the_whole_pass_and_split_the_rows_in_blocks():
    rel, _, _ = _release(n=10_000)
    parts = fold_moments(rel, folds=5, block_rows=100, record_batch_rows=777)
    whole = moments(rel)
    total = sum(parts[1:], parts[0])
    assert [p.rows for p in parts] == [2_000] * 5
    # the same sums in another order: a float bound of a few ulps of the largest sum
    scale = np.abs(whole.gram_sum).max()
    np.testing.assert_allclose(total.gram_sum, whole.gram_sum, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(total.rhs_sum, whole.rhs_sum, rtol=0,
                               atol=1e-12 * np.abs(whole.rhs_sum).max())
    # block b of 100 rows lands in part b % 5: part 0 holds rows 0..99, 500..599, ...
    first = moments(iwpfast.moment_stats.privatized_table(rel).slice(0, 100))
    part0_alone = fold_moments(iwpfast.moment_stats.privatized_table(rel).slice(0, 500), folds=5,
                               block_rows=100)[0]
    np.testing.assert_allclose(part0_alone.gram_sum, first.gram_sum, rtol=1e-12)


def test_the_guard_floor_tracks_the_noise():
    # clean data: the folds differ only by sampling, a floor far below the noisy release's
    X, y, _ = _logistic(20_000)
    clean = fold_moments((X / 2, 2.0 * y - 1), folds=5)
    noisy = fold_moments(_release(n=20_000)[0], folds=5)
    f_clean = guard_floor(clean, sum(clean[1:], clean[0]), True)
    f_noisy = guard_floor(noisy, sum(noisy[1:], noisy[0]), True)
    assert 0 < f_clean < f_noisy / 5


def test_the_scan_keeps_only_alphas_above_the_floor():
    rel, _, _ = _release(n=20_000)
    parts = fold_moments(rel, folds=5)
    alphas = np.geomspace(1e-5, 1.0, 11)
    sc = scan(parts, alphas, True, MomentSearch())
    total = sum(parts[1:], parts[0])
    lam = np.linalg.eigvalsh(reduce(total.G, total.rhs_sum / total.rows, True).S)[0]
    # every guarded alpha clears the floor on all rows; the smallest one does not here
    assert np.all(lam + alphas[sc.allowed] >= sc.floor)
    assert not sc.allowed[0] and sc.allowed[-1]
    assert sc.risks.shape == (12, 5) and np.all(np.isfinite(sc.risks[-1]))


def test_a_label_independent_of_the_features_gives_the_constant_model():
    # labels drawn without the features: no alpha beats the constant by a standard error in
    # this seed (the choice is then the constant, and the fit says so in one warning)
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (20_000, 4))
    y = rng.integers(0, 2, 20_000)
    names = ["a", "b", "c", "d"]
    rel = privatize(X, y, ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=2.0, epsilon_y=1.0,
                                      features=names, ranges={f: (-1.0, 1.0) for f in names},
                                      label="y"), seed=4)
    with pytest.warns(NumericalWarning, match="constant model"):
        model = IWPClassifier(solver="moments", loss="quadratic", progress=False).fit(rel)
    assert np.all(model.coef_ == 0) and np.isnan(model.alpha_)
    assert model.tuning_["chosen"][-1] and model.tuning_["learner"][-1] == "constant"
    assert model.telemetry_["constant_model"]


def test_choose_takes_the_lowest_guarded_risk():
    rel, _, _ = _release(n=40_000)
    parts = fold_moments(rel, folds=5)
    alphas = np.geomspace(1e-3, 3.0, 9)
    sc = scan(parts, alphas, True, MomentSearch())
    c = choose(sc, MomentSearch())
    ok = np.flatnonzero(sc.allowed)
    assert c.index == ok[np.argmin(c.mean_risk[ok])]
    assert c.alpha == alphas[c.index]


def test_search_options_are_checked():
    with pytest.raises(InvalidInputError, match="folds=1"):
        MomentSearch(folds=1)
    with pytest.raises(InvalidInputError, match="constant_margin"):
        MomentSearch(constant_margin=-1.0)
    rel, _, _ = _release(n=2_000)
    with pytest.raises(InvalidInputError, match="alphas"):
        fit_moments(fold_moments(rel, folds=3), search=MomentSearch(alphas=(-1.0,)))


# ------------------------------------------------------------------ the estimators
def _kind_release(kind, R=400):
    return kind_release(kind, R)


def _estimator(kind):
    if kind == "regression":
        return IWPRegressor(solver="moments", progress=False)
    return IWPClassifier(solver="moments", loss="quadratic", progress=False)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_estimator_solves_the_moments_of_every_release_kind(kind):
    # the facade's pass (its prepared source, label mapping and noise) gives bit for bit the
    # solution of the statistics read straight from the release
    rel = _kind_release(kind)
    # the pass's 20 groups (MomentSearch.groups), merged into its 5 folds by fit_moments
    direct = fit_moments(fold_moments(rel, folds=20, block_rows=fold_block_rows(400 * 24, 5)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)      # small data: the constant may win
        est = _estimator(kind).fit(rel)
    np.testing.assert_array_equal(np.asarray(est.coef_).reshape(direct.coef.shape), direct.coef)
    np.testing.assert_array_equal(np.asarray(est.intercept_).reshape(-1), direct.intercept)
    assert est.solver_ == "moments" and est.n_rows_seen_ == 400 * 24
    assert est.tuning_["folds"] == 5 and est.tuning_["passes"] == 1


@pytest.mark.parametrize("kind", ["gaussian_discrete", "kary_labels", "rr_categorical",
                                  "regression"])
def test_a_saved_moment_model_loads_and_predicts_the_same(kind, tmp_path):
    rel = _kind_release(kind, R=2000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        est = _estimator(kind).fit(rel)
    path = tmp_path / "m.json"
    est.save(path)
    doc = json.loads(path.read_text())
    assert doc["format_version"] == 2 and doc["fitted"]["solver"] == "moments"
    assert doc["params"]["solver"] == "moments"
    back = iwpfast.load(path)
    assert back.solver_ == "moments" and back.solver == "moments"
    a, b, c, *_ = _clean_table()
    import pandas as pd
    frame = pd.DataFrame({"a": a, "b": b, **({"c": c} if "categories" in KINDS[kind] else {})})
    np.testing.assert_array_equal(back.predict(frame), est.predict(frame))


def test_an_sgd_model_file_stays_format_version_1(tmp_path):
    X, y, _ = _logistic(2_000)
    model = IWPClassifier(alpha=0.01, learning_rate=0.1, batch_size=16, progress=False).fit(X, y)
    model.save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["format_version"] == 1 and "solver" not in doc["params"]
    assert iwpfast.load(tmp_path / "m.json").solver_ == "sgd"


def test_clean_arrays_reach_scikit_learn_least_squares():
    # clean data: the moment solution at alpha = 0 is ordinary least squares on (x, 1)
    X, y, _ = _logistic(5_000)
    model = IWPClassifier(solver="moments", loss="quadratic", alpha=0.0, progress=False).fit(X, y)
    Z = np.c_[X, np.ones(len(X))]
    want = np.linalg.lstsq(Z, 2.0 * y - 1, rcond=None)[0]
    np.testing.assert_allclose(model.coef_[0], want[:-1], rtol=1e-9)
    assert model.intercept_[0] == pytest.approx(want[-1], abs=1e-10)
    assert list(model.classes_) == [0, 1] and set(model.predict(X)) <= {0, 1}


def test_a_private_release_predicts_near_clean_logistic_regression():
    # 10^5 private rows, (4, 2)-LDP: within 0.02 accuracy of the clean moment solution on a
    # fresh sample (the accuracy's SE on 10^5 test rows is 0.0014; the gap seen is ~0.004)
    rel, X, y = _release(n=100_000, seed=5)
    model = IWPClassifier(solver="moments", loss="quadratic", progress=False).fit(rel)
    clean = IWPClassifier(solver="moments", loss="quadratic", progress=False).fit(X, y)
    Xt, yt, _ = _logistic(100_000, seed=6)
    assert model.score(Xt, yt, scaled=True) > clean.score(Xt, yt) - 0.02
    assert model.tuning_["chosen"].index(True) < len(model.tuning_["alpha"]) - 1


def test_what_the_moment_learner_does_not_do_is_refused_with_the_fix():
    rel, X, y = _release(n=2_000)
    with pytest.raises(InvalidInputError, match="loss='quadratic'"):
        IWPClassifier(solver="moments", progress=False).fit(rel)
    with pytest.raises(InvalidInputError, match="unknown solver"):
        IWPClassifier(solver="newton", progress=False).fit(rel)
    model = IWPClassifier(solver="moments", loss="quadratic", progress=False)
    with pytest.raises(InvalidInputError, match="sample_weight"):
        model.fit(X, y, sample_weight=np.ones(len(y)))
    with pytest.raises(InvalidInputError, match=r"alpha=1e-09: .*not positive definite.*alpha >"):
        IWPClassifier(solver="moments", loss="quadratic", alpha=1e-9, progress=False).fit(
            _release(n=300, seed=8, epsilon_x=0.5)[0])


def test_k_classes_one_vs_rest_from_one_gram():
    rel = _kind_release("kary_labels", R=2000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        model = _estimator("kary_labels").fit(rel)
    assert model.coef_.shape == (3, 2) and model.intercept_.shape == (3,)
    assert list(model.classes_) == [0, 1, 2]


# ------------------------------------------------------------------ the CLI
def test_the_cli_fits_with_solver_moments_and_info_says_so(tmp_path, capsys):
    from iwpfast.cli import main
    rel, _, _ = _release(n=20_000)
    import pyarrow.parquet as pq
    pq.write_table(iwpfast.moment_stats.privatized_table(rel), tmp_path / "rel.parquet")
    assert main(["tune", str(tmp_path / "rel.parquet"), "--solver", "moments",
                 "--out", str(tmp_path / "m.json")]) == 0
    out = capsys.readouterr().out
    assert "solver: moments" in out and "tuning: 37 alphas and the constant model" in out
    assert "loss='quadratic'" in out and "<- chosen" in out and "updates:" not in out
    assert main(["fit", str(tmp_path / "rel.parquet"), "--solver", "moments", "--alpha", "0.5",
                 "--out", str(tmp_path / "fixed.json")]) == 0
    assert "alpha 0.5" in capsys.readouterr().out
    assert main(["info", str(tmp_path / "m.json")]) == 0
    info = capsys.readouterr().out
    assert "solver moments" in info and "format version 2" in info


def test_coefficient_standard_errors_have_the_model_shapes():
    rel, _, _ = _release(n=20_000)
    model = IWPClassifier(solver="moments", loss="quadratic", alpha=0.5, progress=False).fit(rel)
    assert model.coef_stderr_.shape == model.coef_.shape
    assert model.intercept_stderr_.shape == model.intercept_.shape
    assert np.all(np.isfinite(model.coef_stderr_)) and np.all(model.coef_stderr_ > 0)
    k = IWPClassifier(solver="moments", loss="quadratic", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        k.fit(_kind_release("kary_labels", R=2000))
    assert k.coef_stderr_.shape == (3, 2)


@pytest.mark.slow
def test_the_jackknife_standard_error_matches_the_spread_over_releases():
    # 30 releases of 200,000 rows (new rows and new noise each): the mean jackknife SE of each
    # coefficient within [0.6, 1.6] of the coefficients' SD over the releases.  Both sides are
    # estimates from 30 draws (relative SE ~0.13 each), so the band is about 3 of their SEs;
    # measured (20 groups, 19 degrees of freedom): ratios 0.97, 1.06, 0.82, 1.09; the SE's own
    # spread over the releases 17-20% of its mean.  (At 20,000 rows the jackknife is conservative,
    # ~1.9x: the solution is far from linear in the noisy Gram there.)
    coefs, ses = [], []
    for seed in range(30):
        rel, _, _ = _release(n=200_000, seed=100 + seed)
        model = IWPClassifier(solver="moments", loss="quadratic", alpha=0.5,
                              progress=False).fit(rel)
        coefs.append(model.coef_[0])
        ses.append(model.coef_stderr_[0])
    ratio = np.mean(ses, axis=0) / np.std(coefs, axis=0, ddof=1)
    assert np.all((ratio > 0.6) & (ratio < 1.6)), ratio


def test_class_weight_on_clean_rows_is_weighted_least_squares():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (5_000, 3))
    y = (X @ [1.0, -1.0, 0.5] + rng.logistic(size=5_000) > 0.5).astype(int)
    model = IWPClassifier(solver="moments", loss="quadratic", class_weight={0: 1.0, 1: 3.0},
                          alpha=0.0, progress=False).fit(X, y)
    w = np.where(y == 1, 3.0, 1.0)
    Z = np.c_[X, np.ones(len(X))]
    want = np.linalg.solve(Z.T @ (w[:, None] * Z), Z.T @ (w * (2.0 * y - 1)))
    np.testing.assert_allclose(model.coef_[0], want[:3], rtol=1e-10, atol=1e-13)
    assert model.intercept_[0] == pytest.approx(want[3], abs=1e-12)


def test_balanced_class_weight_on_an_imbalanced_release_raises_the_minority_recall():
    # 20% positives: the unweighted quadratic model predicts the majority far more often; the
    # balanced one (weights from the debiased released shares) recalls more positives
    rng = np.random.default_rng(2)
    n = 100_000
    X = rng.uniform(-1, 1, (n, 4))
    y = (X @ np.linspace(1.5, -1.0, 4) + rng.logistic(size=n) > 2.0).astype(int)
    names = ["a", "b", "c", "d"]
    rel = privatize(X, y, ReleaseSpec(epsilon_x=4.0, delta=1e-5, bound=2.0, epsilon_y=2.0,
                                      features=names, ranges={f: (-1.0, 1.0) for f in names},
                                      label="y"), seed=3)
    plain = IWPClassifier(solver="moments", loss="quadratic", progress=False).fit(rel)
    balanced = IWPClassifier(solver="moments", loss="quadratic", class_weight="balanced",
                             progress=False).fit(rel)
    positive = y == 1
    recall = [np.mean(m.predict(X, scaled=True)[positive] == 1) for m in (plain, balanced)]
    assert recall[1] > recall[0] + 0.2, recall
    assert balanced.class_weight_[1] > 1.5 * balanced.class_weight_[0]


def test_validation_release_scores_the_candidates(tmp_path):
    # fit(train, validation=other release): every alpha solved on all training rows, scored on
    # the other release's moments (its own 5 parts: the paired SE); the same as the stages by hand
    from iwpfast.moment_learner import candidates, choose, refit, scan_holdout
    train, _, _ = _release(n=40_000, seed=11)
    held, _, _ = _release(n=20_000, seed=12)
    import pyarrow.parquet as pq
    pq.write_table(iwpfast.moment_stats.privatized_table(held), tmp_path / "held.parquet")
    model = IWPClassifier(solver="moments", loss="quadratic", progress=False).fit(
        train, validation=str(tmp_path / "held.parquet"))
    folds = fold_moments(train, folds=5)
    parts = fold_moments(str(tmp_path / "held.parquet"), folds=5)
    total = sum(folds[1:], folds[0])
    sc = scan_holdout(folds, parts, candidates(total, MomentSearch(), True), True, MomentSearch())
    c = choose(sc, MomentSearch())
    coef, intercept = refit(total, c.alpha, True)
    np.testing.assert_allclose(model.coef_, coef, rtol=1e-12)
    assert "validated on a separate release's moments" in model.tuning_["notes"]
    with pytest.raises(InvalidInputError, match="not an iwpfast release"):
        pq.write_table(iwpfast.moment_stats.privatized_table(held).replace_schema_metadata({}),
                       tmp_path / "plain.parquet")
        IWPClassifier(solver="moments", loss="quadratic", progress=False).fit(
            train, validation=str(tmp_path / "plain.parquet"))
