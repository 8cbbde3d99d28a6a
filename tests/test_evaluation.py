"""The learner's evaluation (iwpfast/estimators/_evaluation.py, estimates.ConstantBaseline):
probabilities of the exponential loss, evaluate's verdict (majority class, AUC, per-class recall,
warnings), the best constant model beside the private risk, and the defects met on the way."""
import math
import warnings

import numpy as np
import pytest

from iwpfast import IWPClassifier
from iwpfast.estimates import ConstantBaseline
from iwpfast.exceptions import NumericalWarning, PrivacyLeakWarning


def _logistic_sample(n, rng, w=(1.5, -1.0), b=0.3):
    X = rng.uniform(-1, 1, (n, len(w)))
    p = 1 / (1 + np.exp(-(X @ np.asarray(w) + b)))
    return X, (rng.random(n) < p).astype(int), p


def test_predict_proba_of_the_exponential_loss_is_calibrated_on_a_logistic_model():
    """y ~ Bernoulli(sigma(w.x + b)): the exponential risk's minimizer is half the log-odds,
    u* = (w.x + b) / 2 (linear: the model is well specified), so sigma(2u) is the probability.
    Checked (fixed seed) on fresh rows: theta is w/2 within 0.05; in each decile of the predicted
    probability the observed frequency is within 4 binomial standard errors
    sqrt(p(1-p)/n_bin) of the mean prediction (4,000 rows a bin: SE <= 0.008)."""
    rng = np.random.default_rng(5)
    X, y, _ = _logistic_sample(100_000, rng)
    model = IWPClassifier(alpha=1e-4, learning_rate=0.05, average="tail", progress=False)
    model.fit(X, y, noise_var=0.0)
    np.testing.assert_allclose(model.coef_.ravel(), [0.75, -0.5], atol=0.05)
    Xt, yt, pt = _logistic_sample(40_000, rng)
    q = model.predict_proba(Xt)[:, 1]
    assert np.max(np.abs(q - pt)) < 0.02
    order = np.argsort(q)
    for part in np.array_split(order, 10):
        mean_p, freq = q[part].mean(), yt[part].mean()
        se = np.sqrt(mean_p * (1 - mean_p) / len(part))
        assert abs(freq - mean_p) < 4 * se, (mean_p, freq, se)


# ------------------------------------------------------------------------------ the verdict
def test_binary_auc_is_the_mann_whitney_statistic():
    """Against the definition P(u+ > u-) + P(tie)/2 counted over every pair."""
    from iwpfast.estimators._report import binary_auc
    rng = np.random.default_rng(1)
    u = np.round(rng.standard_normal(300), 1)       # rounding makes ties
    pos = rng.random(300) < 0.3
    a, b = u[pos][:, None], u[~pos][None, :]
    want = (np.sum(a > b) + 0.5 * np.sum(a == b)) / (a.size * b.size)
    assert binary_auc(u, pos) == pytest.approx(want, rel=1e-12)
    assert np.isnan(binary_auc(u, np.zeros(300, bool)))


def _one_class_model():
    """A model that predicts one class: intercept -5 and a tiny coefficient (what the default
    fit of issue 18 gave: 0-0.4% of the rows predicted positive)."""
    rng = np.random.default_rng(2)
    X = rng.uniform(-1, 1, (2000, 2))
    y = (rng.random(2000) < 1 / (1 + np.exp(-(3 * X[:, 0] - 1.2)))).astype(int)
    model = IWPClassifier(alpha=0.1, learning_rate=0.01, progress=False).fit(X, y, noise_var=0.0)
    model.coef_ = np.array([[0.05, 0.0]])
    model.intercept_ = np.array([-5.0])
    return model, X, y


def test_the_verdict_on_a_model_that_predicts_one_class():
    model, X, y = _one_class_model()
    r = model.evaluate_report(X, y)
    share_neg = float(np.mean(y == 0))
    assert r.n_rows == 2000 and r.classes == (0, 1)
    assert r.majority_class == 0 and r.majority_accuracy == pytest.approx(share_neg)
    assert r.accuracy == pytest.approx(share_neg)          # every row predicted 0
    assert r.predicted_share == (1.0, 0.0) and r.recall == (1.0, 0.0)
    assert r.auc > 0.8              # the ranking is still right (x0 orders the rows: 0.86)
    assert len(r.warnings) == 1 and "100.0% of the predictions are class 0" in r.warnings[0]
    assert "warning: 100.0%" in r.describe()
    assert r.to_dict()["recall"] == [1.0, 0.0]


def test_the_verdict_of_k_classes_gives_macro_auc_recall_and_the_class_never_predicted():
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (3000, 2))
    y = np.digitize(X[:, 0], [-0.33, 0.33])
    model = IWPClassifier(alpha=0.01, learning_rate=0.1, progress=False).fit(X, y, noise_var=0.0)
    r = model.evaluate_report(X, y)
    u = model.decision_function(X)
    from iwpfast.estimators._report import binary_auc
    assert r.auc == pytest.approx(np.mean([binary_auc(u[:, c], y == c) for c in range(3)]))
    pred = model.predict(X)
    assert r.recall == pytest.approx(tuple(np.mean(pred[y == c] == c) for c in range(3)))
    # a head silenced: its class is never predicted, and the report says so
    model.intercept_ = model.intercept_ + np.array([0.0, -50.0, 0.0])
    r = model.evaluate_report(X, y)
    assert r.predicted_share[1] == 0.0 and r.recall[1] == 0.0
    assert any("class(es) 1 never predicted" in w for w in r.warnings)


def test_evaluate_prints_the_verdict_and_its_warning(tmp_path, capsys):
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from iwpfast.cli import main
    model, X, y = _one_class_model()
    model.save(tmp_path / "m.json")
    pq.write_table(pa.table({"x0": X[:, 0], "x1": X[:, 1], "y": y}), tmp_path / "test.parquet")
    assert main(["evaluate", str(tmp_path / "m.json"), str(tmp_path / "test.parquet"),
                 "--scaled", "--label", "y"]) == 0
    out = capsys.readouterr().out
    assert "majority class 0: accuracy" in out and "AUC" in out and "recall" in out
    assert any(line.startswith("warning: 100.0% of the predictions are class 0")
               for line in out.splitlines())
    assert main(["evaluate", str(tmp_path / "m.json"), str(tmp_path / "test.parquet"),
                 "--scaled", "--label", "y", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["majority_class"] == 0 and doc["predicted_share"] == [1.0, 0.0]
    assert doc["auc"] > 0.8 and len(doc["warnings"]) == 1


# ------------------------------------------------------------------------------ defects
def test_label_values_the_model_never_saw_are_an_error_naming_them(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from iwpfast.cli import main
    from iwpfast.exceptions import InvalidInputError
    model, X, y = _one_class_model()
    named = np.where(y == 1, "b_poor", "a_rich")
    for call in (model.score, model.risk, model.evaluate_report):
        with pytest.raises(InvalidInputError, match=r"'a_rich', 'b_poor'.*never seen.*\[0, 1\]"):
            call(X, named)
    # the release's convention stays: a model of -1/+1 labels reads {0, 1} (0 -> -1)
    pm1 = IWPClassifier(alpha=0.1, learning_rate=0.01, progress=False).fit(X, 2 * y - 1,
                                                                         noise_var=0.0)
    assert pm1.score(X, y) == pm1.score(X, 2 * y - 1)
    model.save(tmp_path / "m.json")
    pq.write_table(pa.table({"x0": X[:, 0], "x1": X[:, 1], "y": named}), tmp_path / "t.parquet")
    assert main(["evaluate", str(tmp_path / "m.json"), str(tmp_path / "t.parquet"), "--scaled",
                 "--label", "y"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "never seen" in err[0] and "a_rich" in err[0]


def test_divergence_on_unscaled_data_names_ranges_whatever_the_step():
    """Raw data (values up to 1000) without ranges: the message names ranges= first; the
    learning rate is named (with its CLI flag) only when the user set it."""
    from iwpfast.exceptions import DivergenceError
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1000, (3000, 2))
    y = (X[:, 0] > 500).astype(int)
    # 'auto' never fails (docs/tuning.md "When every head diverges"): it retries smaller steps
    # and says, in a warning, that the features look unscaled
    from iwpfast.exceptions import NumericalWarning
    with pytest.warns(NumericalWarning, match=r"look unscaled.*--ranges"):
        model = IWPClassifier(progress=False).fit(X, y, noise_var=0.0)
    assert any("look unscaled" in n for n in model.tuning_["notes"])
    with pytest.raises(DivergenceError) as fixed:
        IWPClassifier(alpha=0.01, learning_rate=0.5, progress=False).fit(X, y, noise_var=0.0)
    text = str(fixed.value)
    assert "look unscaled" in text and "--learning-rate; now 0.5" in text


def test_each_loss_log_odds_scale_is_where_its_conditional_risk_is_minimal():
    """d/du [p f(u) + (1 - p) f(-u)] = p f'(u) - (1 - p) f'(-u) vanishes at u* = logit(p) / c
    for the losses that state c; the quadratic loss states none (its u* = 2p - 1 is no multiple
    of the log-odds: at p = 0.9, 2p - 1 = 0.8 but logit(p) = 2.2)."""
    from iwpfast.losses import LOSS_RECORDS
    p = np.linspace(0.05, 0.95, 19)
    for name, record in LOSS_RECORDS.items():
        if record.task != "classification":
            continue
        if record.log_odds_scale is None:
            assert name == "quadratic"
            continue
        u = np.log(p / (1 - p)) / record.log_odds_scale
        slope = p * record.derivative(1, u) - (1 - p) * record.derivative(1, -u)
        np.testing.assert_allclose(slope, 0.0, atol=1e-12)


def test_cli_warnings_go_to_stderr_once(tmp_path, capsys, single_holdout):
    """fit's warnings (here: no release metadata, and the chosen head ending on the cap, as in
    tests/test_cli_robustness.py with seed 0) are on stderr, each text once; stdout has none."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from iwpfast.cli import main
    from iwpfast.commands import print_warnings
    rng = np.random.default_rng(0)
    n = 20000
    X = rng.uniform(-1, 1, (n, 2))
    y = (rng.random(n) < 1 / (1 + np.exp(-6 * X[:, 0]))).astype(int)
    Xn = X + rng.normal(0, 2.0, X.shape)
    pq.write_table(pa.table({"x0": Xn[:, 0], "x1": Xn[:, 1], "y": y}), tmp_path / "d.parquet")
    assert main(["fit", str(tmp_path / "d.parquet"), "--features", "x0", "x1", "--label", "y",
                 "--noise-var", "4", "--out", str(tmp_path / "m.json"), "--no-progress",
                 "--solver", "sgd"]) == 0
    out, err = capsys.readouterr()
    assert "iwpfast: warning" not in out
    lines = err.strip().splitlines()
    assert lines and all(line.startswith("iwpfast: warning: ") for line in lines)
    assert len(set(lines)) == len(lines)
    assert any("variance cap active" in line for line in lines)

    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            warnings.warn("the same sentence", UserWarning, stacklevel=2)
    print_warnings(caught)
    assert capsys.readouterr().err == "iwpfast: warning: the same sentence\n"


def test_a_terminal_bar_moves_on_a_short_pass_and_the_model_is_the_same(capsys):
    """A pass of a file that fits one default chunk is cut into >= 20 chunks when a bar is shown
    (issue 18: no progress for a 6 s tune); the model does not depend on the chunking."""
    from iwpfast.sgd.driver import BAR_MIN_CHUNK_ROWS, bar_chunk_rows
    assert bar_chunk_rows(None, "force", 29_321) == BAR_MIN_CHUNK_ROWS
    assert bar_chunk_rows(None, "force", 1_000_000) == 65_536          # 2^16 >= 10^6 / 20
    assert bar_chunk_rows(None, "force", 100_000_000) is None          # the default moves anyway
    assert bar_chunk_rows(None, False, 29_321) is None
    assert bar_chunk_rows(1000, "force", 29_321) == 1000               # the caller's wins
    rng = np.random.default_rng(6)
    X, y, _ = _logistic_sample(30_000, rng)
    kw = dict(alpha=0.01, learning_rate=0.05)
    quiet = IWPClassifier(progress=False, **kw).fit(X, y, noise_var=0.1)
    shown = IWPClassifier(progress="force", **kw).fit(X, y, noise_var=0.1)
    np.testing.assert_array_equal(quiet.coef_, shown.coef_)
    assert "rows" in capsys.readouterr().err                            # the bar was drawn


def test_release_label_errors_name_the_file_and_classes(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from iwpfast.cli import main
    pq.write_table(pa.table({"a": np.arange(10.0), "y": ["rich", "poor"] * 5}), tmp_path / "s.parquet")
    for extra in ([], ["--shuffle"]):
        assert main(["release", str(tmp_path / "s.parquet"), str(tmp_path / "o.parquet"),
                     "--features", "a", "--ranges", "a=0:10", "--epsilon-x", "1", "--epsilon-y",
                     "1", *extra]) == 65      # bad data (EX_DATAERR)
        err = capsys.readouterr().err
        assert str(tmp_path / "s.parquet") in err and "--classes" in err, err

# --------------------------------------------------------------------------------------------------
# The verdict warns below the majority class, and the private risk comes with the best constant
# model's beside it (its risk, the paired difference and their standard errors)
# --------------------------------------------------------------------------------------------------


def _rr(y01, eps, rng, k=2):
    """k-ary randomized response of class indices 0..k-1 with budget eps."""
    q = math.exp(eps) / (math.exp(eps) + k - 1)
    keep = rng.random(y01.size) < q
    other = (y01 + rng.integers(1, k, y01.size)) % k
    return np.where(keep, y01, other)


def _data(n, rng, share=0.34):
    X = rng.uniform(-1, 1, (n, 2))
    logit = 2.0 * X[:, 0] + math.log(share / (1 - share))
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return X, y


def test_the_verdict_warns_when_the_accuracy_is_below_the_majority_class():
    """A model that predicts 5% of the rows positive, on the wrong side (x0 < -0.9, where few
    are positive): below the majority's accuracy but far from a one-class model, the case of
    issue 33 (0.7523 against 0.7638 with 96.4% one class) that passed without a warning."""
    rng = np.random.default_rng(11)
    X, y = _data(4000, rng)
    model = IWPClassifier(alpha=0.01, learning_rate=0.1, progress=False).fit(X, y, noise_var=0.0)
    good = model.evaluate_report(X, y)
    assert good.accuracy > good.majority_accuracy and good.warnings == ()
    model.coef_ = np.array([[-1.0, 0.0]])
    model.intercept_ = np.array([-0.9])
    r = model.evaluate_report(X, y)
    assert 0.9 < r.predicted_share[0] < 0.99            # not the one-class case
    assert r.accuracy < r.majority_accuracy
    assert len(r.warnings) == 1 and "below the" in r.warnings[0]
    assert f"{r.accuracy:.4f}" in r.warnings[0] and "warning: the model's accuracy" in r.describe()


def test_private_constant_risk_agrees_with_its_clean_counterpart():
    """Exponential loss, 34% positives, labels by randomized response (eps_y = 1), features
    public: the constant model's private risk estimates min_b E[e^{-yb}] = 2 sqrt(pi (1 - pi)),
    computed here from the clean labels of the same rows; the private value differs from it by
    the label noise only, whose sd is below the reported standard error (which also holds the
    rows' sampling spread), so 4 SE bound the gap (fixed seed).  The paired difference model -
    constant is checked against its clean counterpart with 4 paired SE the same way, and the
    intercept against the clean half log-odds."""
    rng = np.random.default_rng(12)
    n = 20_000
    X, y = _data(n, rng)
    yt = _rr(y, 1.0, rng)
    model = IWPClassifier(alpha=1e-3, learning_rate=0.1, progress=False).fit(X, y, noise_var=0.0)
    est = model.private_risk(X, yt, noise_var=0.0, epsilon_y=1.0)
    c = est.baseline
    assert c is not None
    pi = y.mean()
    clean_constant = 2 * math.sqrt(pi * (1 - pi))
    assert abs(c.risk - clean_constant) < 4 * c.stderr, (c.risk, clean_constant, c.stderr)
    # the share: the mean of S~ [y~ = +1] + (1 - S~) [y~ = -1], whose per-row sd is
    # (2 S~ - 1) sqrt(q (1 - q)), q the released positive share; the intercept is its link
    tilde = 1 / (1 - math.exp(-1.0))
    q = np.mean(yt == 1)
    share_se = (2 * tilde - 1) * math.sqrt(q * (1 - q) / n)
    assert abs(c.shares[0] - pi) < 4 * share_se, (c.shares[0], pi, share_se)
    assert c.intercept[0] == pytest.approx(0.5 * math.log(c.shares[0] / (1 - c.shares[0])))
    clean_difference = model.risk(X, y) - clean_constant
    assert clean_difference < -0.05                      # the model learned something
    assert abs(c.difference - clean_difference) < 4 * c.difference_stderr
    assert c.difference_stderr < est.stderr              # pairing removes the shared spread
    assert c.warnings == ()
    assert "best constant model" in est.describe() and "paired" in est.describe()


def test_private_constant_of_k_classes_and_the_warning_of_a_useless_model():
    """Three classes (3-ary randomized response, eps_y = 2): the constant's private risk is the
    sum over the heads of 2 sqrt(pi_c (1 - pi_c)) within 4 SE (as above); a model with theta = 0
    and b = 0 (risk 3 per row) is worse than the constant and the comparison warns."""
    rng = np.random.default_rng(13)
    n = 15_000
    X = rng.uniform(-1, 1, (n, 2))
    y = np.digitize(X[:, 0] + 0.3 * rng.standard_normal(n), [-0.5, 0.2])
    yt = _rr(y, 2.0, rng, k=3)
    model = IWPClassifier(alpha=0.01, learning_rate=0.1, progress=False).fit(
        X, y, noise_var=0.0, classes=[0, 1, 2])
    model.coef_ = np.zeros_like(model.coef_)
    model.intercept_ = np.zeros(3)
    est = model.private_risk(X, yt, noise_var=0.0, epsilon_y=2.0)
    c = est.baseline
    pi = np.bincount(y, minlength=3) / n
    clean_constant = float(np.sum(2 * np.sqrt(pi * (1 - pi))))
    assert abs(c.risk - clean_constant) < 4 * c.stderr, (c.risk, clean_constant, c.stderr)
    assert c.difference > 0 and len(c.warnings) == 1 and "not below" in c.warnings[0]


def test_constant_baseline_matches_a_direct_computation_with_weights():
    """The grouped one-pass sums give the mean and the paired standard error of the per-row
    differences computed directly (weights, several batches, public-label table)."""
    rng = np.random.default_rng(14)
    S = 0.8
    tilde = S / (2 * S - 1)
    table = (tilde, 1 - tilde, tilde, 1 - tilde)
    values = rng.exponential(1.0, 3000)
    groups = (rng.random(3000) < 0.3).astype(int)
    weights = rng.uniform(0.5, 2.0, 3000)
    base = ConstantBaseline("exponential", [table], [1], 2)
    for part in np.array_split(np.arange(3000), 7):
        base.add(values[part] * weights[part], groups[part], weights[part])
    c = base.result()
    a = np.sum(weights * np.where(groups == 1, tilde, 1 - tilde)) / np.sum(weights)
    b = 0.5 * math.log(a / (1 - a))
    assert c.intercept[0] == pytest.approx(b, rel=1e-12)
    z = np.where(groups == 1, b, -b)
    v0 = tilde * np.exp(-z) + (1 - tilde) * np.exp(z)
    d = values * weights - v0 * weights
    assert c.risk == pytest.approx(np.mean(v0 * weights), rel=1e-10)
    assert c.difference == pytest.approx(d.mean(), rel=1e-10)
    assert c.difference_stderr == pytest.approx(d.std(ddof=1) / math.sqrt(d.size), rel=1e-9)
    assert c.stderr == pytest.approx((v0 * weights).std(ddof=1) / math.sqrt(d.size), rel=1e-9)


# ------------------------------------------------- the private verdict (issue 42, item 7)
def _releases(tmp_path, n=6000, seed=0):
    """A clean table and two releases of it: every feature private (eps_x 2) and label-only
    (both features public); labels by randomized response (eps_y 1) in both."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from iwpfast import ReleaseSpec, release
    rng = np.random.default_rng(seed)
    X, y = _data(n, rng)
    pq.write_table(pa.table({"a": X[:, 0], "b": X[:, 1], "y": y}), tmp_path / "t.parquet")
    ranges = {"a": (-1, 1), "b": (-1, 1)}
    common = dict(epsilon_y=1.0, features=["a", "b"], ranges=ranges, label="y")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)     # seeded: a simulation
        release(tmp_path / "t.parquet", tmp_path / "private.parquet",
                ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.5, **common), seed=1)
        release(tmp_path / "t.parquet", tmp_path / "label_only.parquet",
                ReleaseSpec(public_features=["a", "b"], **common), seed=2)
    model = IWPClassifier(alpha=1e-3, learning_rate=0.1, progress=False).fit(
        tmp_path / "label_only.parquet")
    return model, X, y


def test_a_diverged_model_gets_no_difference_verdict(tmp_path, capsys):
    """The audit's case: a huge-norm model's private risk reads ~0 +- ~0, UNRELIABLE (the rows
    that carry its mean are missing), and the difference model - constant taken against it
    claimed the model beats the constant by ~89 SE.  Now no difference is printed, a warning
    says which estimate fails, and the JSON keeps the numbers flagged difference_reliable
    false; with noisy features a line says what cannot be estimated."""
    import json

    from iwpfast.cli import main
    model, _, _ = _releases(tmp_path)
    model.coef_ = np.array([[-400.0, 300.0]])
    with pytest.warns(NumericalWarning, match="not reliable"):
        est = model.private_risk(tmp_path / "private.parquet")
    assert not est.reliable and est.difference_reliable is False
    assert est.predictions is not None and est.predictions.shares is None
    model.save(tmp_path / "m.json")
    args = ["evaluate", str(tmp_path / "m.json"), str(tmp_path / "private.parquet"), "--private"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "UNRELIABLE" in out and "the model minus it" not in out
    assert "warning: no comparison with the best constant model: the model's private risk " \
           "estimate is unreliable" in out
    assert "not estimated (they need clean features" in out
    assert main(args + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["difference_reliable"] is False and "difference" in doc
    assert len(doc["constant_warnings"]) == 1 and "unreliable" in doc["constant_warnings"][0]
    assert doc["accuracy"] is None and doc["predicted_share"] is None
    assert "clean features" in doc["prediction_note"]


def test_a_one_class_model_on_a_label_only_holdout_shows_its_shares(tmp_path, capsys):
    """A model that predicts class 0 on every row: risk says 'beats the constant' or not, but
    the label-only hold-out's clean features give the exact shares (1, 0), its warning, and a
    debiased accuracy equal to the debiased share of class 0 (every row predicted 0)."""
    import json

    from iwpfast.cli import main
    model, _, _ = _releases(tmp_path)
    model.coef_ = np.zeros_like(model.coef_)
    model.intercept_ = np.array([-3.0])
    model.save(tmp_path / "m.json")
    args = ["evaluate", str(tmp_path / "m.json"), str(tmp_path / "label_only.parquet"),
            "--private"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "predicted classes (exact: the hold-out's features are clean): 0: 100.0%, 1: 0.0%" \
        in out
    assert "warning: 100.0% of the predictions are class 0" in out
    assert main(args + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["predicted_share"] == [1.0, 0.0] and doc["difference_reliable"] is True
    assert doc["accuracy"] == pytest.approx(doc["label_share"][0], rel=1e-12)
    assert doc["accuracy_gain"] == pytest.approx(0.0, abs=1e-12)
    assert any("100.0% of the predictions" in w for w in doc["prediction_warnings"])


def test_the_debiased_accuracy_of_a_label_only_release_matches_the_clean_one(tmp_path):
    """Fixed seed, 6,000 rows, eps_y = 1.  Given the clean rows, the estimate's only randomness
    is the label flips: each row's term has variance gap^2 q (1 - q) (gap = 1/(2q - 1)), and the
    reported SE^2 (the sample variance of the terms / n) estimates that plus the spread of
    1{y = p} over the rows, so it is at least the flips' variance and 4 SE bound the gap to the
    clean accuracy of the same rows (|z| > 4: p < 1e-4).  The shares are exact (clean features)."""
    model, X, y = _releases(tmp_path)
    est = model.private_risk(tmp_path / "label_only.parquet")
    p = est.predictions
    assert p is not None and p.accuracy is not None and p.accuracy_stderr is not None
    clean_accuracy = model.score(X, y)
    assert abs(p.accuracy - clean_accuracy) < 4 * p.accuracy_stderr, \
        (p.accuracy, clean_accuracy, p.accuracy_stderr)
    assert 0.005 < p.accuracy_stderr < 0.03
    share_1 = float(np.mean(model.predict(X) == 1))
    assert p.shares[1] == pytest.approx(share_1, abs=1.5 / len(y))
    assert p.warnings == () and est.difference_reliable is True
    assert "debiased accuracy" in est.describe()


def test_the_debiased_accuracy_of_k_classes_matches_the_clean_one(tmp_path, capsys):
    """Three named classes, a label-only release with 3-ary randomized response (eps_y = 2;
    `evaluate --private` on a k-class release): the accuracy's per-row term is
    (1{y~ = p} - r)/(q - r), and 4 SE bound its gap to the clean accuracy for the reason of the
    binary test (the flips' variance gap^2 P (1 - P), P in {q, r}, is part of the reported
    SE^2); the shares are those of predict on the clean rows.  With noisy features (arrays
    given noise_var) the shares are not estimated and a line says why."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from iwpfast import ReleaseSpec, release
    from iwpfast.cli import main
    rng = np.random.default_rng(21)
    n = 15_000
    X = rng.uniform(-1, 1, (n, 2))
    y = np.array(["lo", "mid", "hi"])[np.digitize(X[:, 0] + 0.3 * rng.standard_normal(n),
                                                  [-0.5, 0.2])]
    pq.write_table(pa.table({"a": X[:, 0], "b": X[:, 1], "y": y}), tmp_path / "t.parquet")
    spec = ReleaseSpec(epsilon_y=2.0, features=["a", "b"], ranges={"a": (-1, 1), "b": (-1, 1)},
                       label="y", classes=["lo", "mid", "hi"], public_features=["a", "b"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)     # seeded: a simulation
        release(tmp_path / "t.parquet", tmp_path / "r.parquet", spec, seed=5)
    model = IWPClassifier(alpha=0.01, learning_rate=0.1, progress=False).fit(
        tmp_path / "r.parquet")
    model.save(tmp_path / "m.json")
    assert main(["evaluate", str(tmp_path / "m.json"), str(tmp_path / "r.parquet"), "--private",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["classes"] == ["lo", "mid", "hi"] and doc["difference_reliable"] is True
    predicted = model.predict(X)
    np.testing.assert_allclose(doc["predicted_share"],
                               [np.mean(predicted == c) for c in doc["classes"]], atol=1.5 / n)
    clean_accuracy = float(np.mean(predicted == y))
    assert abs(doc["accuracy"] - clean_accuracy) < 4 * doc["accuracy_stderr"], \
        (doc["accuracy"], clean_accuracy, doc["accuracy_stderr"])
    # (the labels' noise does not matter to what is checked here)
    noisy = model.private_risk(X + rng.normal(0, 0.5, X.shape), y, noise_var=0.25,
                               epsilon_y=2.0)
    assert noisy.predictions is not None and noisy.predictions.shares is None
    assert "need clean features" in noisy.describe()


def test_the_prediction_tally_matches_the_per_row_label_inverse():
    """The counts give the mean and sample sd / sqrt(n) of the per-row terms
    (1{y~ = p} - r)/(q - r) computed directly with label_weight_table's weights (batches, k = 3),
    and the paired gain over always predicting the majority class."""
    from iwpfast.holdout_verdict import PredictionTally
    from iwpfast.label_noise import kary_probabilities, label_weight_table
    rng = np.random.default_rng(22)
    table = label_weight_table(1.0, 3)
    q, r = kary_probabilities(1.0, 3)
    predicted, released = rng.integers(0, 3, 4000), rng.integers(0, 3, 4000)
    released[:1500] = predicted[:1500]
    tally = PredictionTally(["a", "b", "c"], table, clean=True)
    for part in np.array_split(np.arange(4000), 5):
        tally.add(predicted[part], released[part])
    p = tally.result()
    terms = ((released == predicted) - r) / (q - r)
    assert p.accuracy == pytest.approx(terms.mean(), rel=1e-12)
    assert p.accuracy_stderr == pytest.approx(terms.std(ddof=1) / math.sqrt(4000), rel=1e-10)
    shares = [((released == c) - r).mean() / (q - r) for c in range(3)]
    np.testing.assert_allclose(p.label_shares, shares, rtol=1e-12)
    m = int(np.argmax(shares))
    gain = terms - ((released == m) - r) / (q - r)
    assert p.majority_class == "abc"[m]
    assert p.accuracy_gain == pytest.approx(gain.mean(), abs=1e-12)
    assert p.accuracy_gain_stderr == pytest.approx(gain.std(ddof=1) / math.sqrt(4000), rel=1e-10)
    assert p.shares == tuple(np.bincount(predicted, minlength=3) / 4000)


def test_a_constant_estimate_that_overflowed_gives_no_difference():
    """judge_difference on the constant's own numbers: a non-finite difference or a constant
    interval below 0 is no verdict, whatever the model; the comparison's warning is replaced."""
    from iwpfast.holdout_verdict import ConstantRisk, judge_difference
    good = ConstantRisk((0.1,), (0.55,), 0.99, 0.01, -0.2, 0.01)
    assert judge_difference(good).difference_reliable
    for bad in (good._replace(difference_stderr=math.nan), good._replace(risk=0.01, stderr=0.1)):
        judged = judge_difference(bad._replace(warnings=("not below",)))
        assert not judged.difference_reliable and len(judged.warnings) == 1
        assert "no comparison" in judged.warnings[0]
        assert "the model minus it" not in judged.describe()
