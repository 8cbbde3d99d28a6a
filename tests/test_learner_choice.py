"""The default's choice across learners (issue 45 item 1; iwpfast/learner_choice.py and
estimators/_across.py): each criterion against its formula on arrays, the choice rule, and the
estimator's default on releases with clean and with noisy features."""
import json
import math
import warnings

import numpy as np
import pytest

import iwpfast
from iwpfast import IWPClassifier
from iwpfast.learner_choice import accuracy_sums, calibrated_quadratic, choose
from iwpfast.moment_stats import SCALAR_LABEL, _block_runs, accumulate_folds, layout_for_columns
from iwpfast.privacy import ReleaseSpec, release


class _Chunk:
    def __init__(self, X, y):
        self.n_rows = len(y)
        self.features = [[X[:, j] for j in range(X.shape[1])]]
        self.codes = np.zeros((0, len(y)), np.int64)
        self.label = y


def _layout(p, scale=1.0):
    return layout_for_columns([f"x{j}" for j in range(p)], np.zeros(p), "y",
                              label_kind=SCALAR_LABEL, label_scale=scale)


def _clean(n=3000, p=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ np.array([1.0, -0.5, 0.2]))), 1.0, -1.0)
    return X, y


def _runs(X, y, layout, folds, block_rows, chunk=700):
    chunks = [_Chunk(X[i:i + chunk], y[i:i + chunk]) for i in range(0, len(y), chunk)]
    return _block_runs(chunks, layout, folds, block_rows, 0)


def test_accuracy_sums_are_the_debiased_accuracy_of_each_model_per_block(monkeypatch):
    import iwpfast.moment_stats as ms
    monkeypatch.setattr(ms, "_checked_codes", lambda chunk, layout: chunk.codes)
    monkeypatch.setattr(ms, "_checked_label", lambda chunk, layout: chunk.label)
    X, y = _clean()
    s = 1.4                                        # a label inverse 1/(2q - 1)
    D = np.stack([np.tile([1.0, -0.5, 0.2], (5, 1)), np.zeros((5, 3))])
    icpt = np.array([np.full(5, 0.1), np.full(5, -1.0)])
    hits, rows = accuracy_sums(_runs(X, y, _layout(3, s), 5, 64), D, icpt, s, 64)
    assert rows.sum() == len(y)
    block = np.arange(len(y)) // 64 % 20
    for c in range(2):
        m = X @ D[c, 0] + icpt[c, 0]
        per_row = np.where(m > 0, 0.5 * (1 + s * y), 0.5 * (1 - s * y))
        np.testing.assert_allclose(hits[c], np.bincount(block, per_row, 20), rtol=1e-12)


def test_calibrated_quadratic_is_the_least_squares_fit_of_the_label_on_the_margin(monkeypatch):
    import iwpfast.moment_stats as ms
    monkeypatch.setattr(ms, "_checked_codes", lambda chunk, layout: chunk.codes)
    monkeypatch.setattr(ms, "_checked_label", lambda chunk, layout: chunk.label)
    X, y = _clean()
    layout = _layout(3)
    parts = accumulate_folds([_Chunk(X, y)], layout, 5, 64)
    D = np.stack([np.tile([1.0, -0.5, 0.2], (5, 1)), np.tile([0.0, 1.0, 0.0], (5, 1)),
                  np.zeros((5, 3))])
    got = calibrated_quadratic(parts, D)
    fold = np.arange(len(y)) // 64 % 5
    for c in range(3):
        m = X @ D[c, 0]
        A = np.column_stack([m, np.ones_like(m)]) if np.any(D[c, 0]) else np.ones((len(y), 1))
        beta = np.linalg.lstsq(A, y, rcond=None)[0]
        resid = (y - A @ beta) ** 2
        want = -np.array([resid[fold == f].mean() for f in range(5)])
        np.testing.assert_allclose(got[c], want, rtol=1e-9)


def test_choose_takes_the_highest_mean_and_pairs_the_standard_errors():
    scores = np.array([[0.70, 0.71, 0.69, 0.70], [0.72, 0.73, 0.71, 0.72], [0.5, 0.5, 0.5, 0.5]])
    w = np.ones(4)
    chosen, table = choose(["sgd", "moments", "constant"], scores, w)
    assert chosen == 1 and table[1].stderr == 0.0 and table[0].stderr == 0.0   # d constant
    noisy = np.array([[0.70, 0.80, 0.60, 0.78], [0.72, 0.69, 0.71, 0.70], [0.5, 0.5, 0.5, 0.5]])
    chosen, table = choose(["sgd", "moments", "c"], noisy, w)
    d = noisy[1] - noisy[0]
    assert chosen == 0 and table[1].stderr == pytest.approx(np.std(d, ddof=1) / 2.0)
    # a batch without rows is left out of the means and the standard errors
    assert choose(["a", "b"], np.array([[0.9, 0.1, 5.0], [0.6, 0.6, 0.0]]),
                  np.array([1.0, 1.0, 0.0]))[0] == 1


def _release(tmp_path, name, n, public=(), seed=1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 4))
    y = (rng.random(n) < 1 / (1 + np.exp(-3 * X @ np.array([1.0, -0.8, 0.6, 0.0])))).astype(int)
    feats = ["a", "b", "c", "d"]
    noise = dict(epsilon_x=4.0, delta=1e-5) if len(public) < len(feats) else {}
    spec = ReleaseSpec(bound=1.0, epsilon_y=2.0, features=feats, label="y",
                       ranges={f: (-1, 1) for f in feats}, public_features=public, **noise)
    out = tmp_path / f"{name}.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release({**{f: X[:, j] for j, f in enumerate(feats)}, "y": y}, out, spec, seed=seed)
    return out


@pytest.mark.parametrize("public", [(), ("a", "b", "c", "d")], ids=["all_private", "label_only"])
def test_the_default_weighs_sgd_against_the_moments_and_records_it(tmp_path, public):
    path = _release(tmp_path, "r", 40_000, public)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = IWPClassifier(progress=False).fit(path)
        sgd = IWPClassifier(progress=False, solver="sgd").fit(path)
    learners = model.tuning_["learners"]
    if public:      # clean features: every candidate scored by its debiased accuracy
        assert set(learners["candidates"]) == {"sgd", "moments", "constant"}
        assert learners["criterion"] == "debiased accuracy"
    else:           # noisy features: the moment model, no SGD search (docs/tuning.md)
        assert learners["candidates"] == {} and learners["chosen"] == "moments"
        assert "heads" not in model.tuning_ and model.tuning_["folds"] == 5
    chosen = learners["chosen"]
    assert model.solver_ == ("moments" if chosen == "moments" else "sgd")
    if chosen == "sgd":         # kept bit for bit
        np.testing.assert_array_equal(model.coef_, sgd.coef_)
    else:
        moments = IWPClassifier(progress=False, solver="moments", loss="quadratic").fit(path)
        np.testing.assert_allclose(model.coef_, moments.coef_, rtol=1e-12)
    assert "learners" not in sgd.tuning_
    # saved and loaded, said by info, reproduced by its resolved parameters
    model.save(tmp_path / "m.json")
    back = iwpfast.load(tmp_path / "m.json")
    np.testing.assert_array_equal(back.coef_, model.coef_)
    assert json.loads((tmp_path / "m.json").read_text())["fitted"]["tuning"]["learners"][
        "chosen"] == chosen
    again = IWPClassifier(**model.resolved_params_).fit(path)
    np.testing.assert_array_equal(again.coef_, model.coef_)


def test_on_noisy_features_the_moment_model_wins_where_it_is_far_better(tmp_path):
    # 200k all-private rows of a strong signal: the SGD search's capped heads are far from the
    # moments' solution (docs/tuning.md "The choice across learners")
    path = _release(tmp_path, "big", 200_000, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = IWPClassifier(progress=False).fit(path)
    assert model.tuning_["learners"]["chosen"] == "moments"
    rng = np.random.default_rng(9)
    X = rng.uniform(-1, 1, (50_000, 4))
    p1 = 1 / (1 + np.exp(-3 * X @ np.array([1.0, -0.8, 0.6, 0.0])))
    y = (rng.random(50_000) < p1).astype(int)
    bayes = np.mean(np.maximum(p1, 1 - p1))
    assert np.mean(model.predict(X) == y) > bayes - 0.02


def test_what_the_moments_cannot_score_keeps_the_sgd_search(tmp_path):
    path = _release(tmp_path, "r", 20_000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quadratic = IWPClassifier(progress=False, loss="quadratic").fit(path)
        weighted = IWPClassifier(progress=False, class_weight="balanced").fit(path)
    for m in (quadratic, weighted):
        assert m.solver_ == "sgd" and "learners" not in m.tuning_
    assert not math.isnan(quadratic.alpha_)


def test_a_moment_model_gives_probabilities_from_its_linear_score(tmp_path):
    path = _release(tmp_path, "p", 40_000)
    model = IWPClassifier(progress=False, solver="moments", loss="quadratic").fit(path)
    rng = np.random.default_rng(2)
    X = rng.uniform(-1, 1, (20_000, 4))
    p1 = 1 / (1 + np.exp(-3 * X @ np.array([1.0, -0.8, 0.6, 0.0])))
    y = (rng.random(len(p1)) < p1).astype(int)
    u = model.decision_function(X)
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba[:, 1], np.clip((1 + u) / 2, 0.01, 0.99), rtol=1e-12)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    # a clean log-loss below the base rate's (the constant model's): the score is informative
    q = proba[np.arange(len(y)), y]
    base = np.mean(y)
    assert -np.mean(np.log(q)) < -(base * np.log(base) + (1 - base) * np.log(1 - base)) - 0.05
    report = model.evaluate_report(X, y)
    assert report.log_loss == pytest.approx(-np.mean(np.log(q)), rel=1e-12)
    assert "log-loss" in report.describe()
    quadratic_sgd = IWPClassifier(progress=False, loss="quadratic", alpha=0.01,
                                  learning_rate=0.01, solver="sgd").fit(path)
    assert quadratic_sgd.evaluate_report(X, y).log_loss is None     # no probabilities
