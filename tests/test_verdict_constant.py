"""Issue 33 item 4: the verdict warns below the majority class, and the private risk comes with
the best constant model's beside it (its risk, the paired difference and their standard errors)."""
import math

import numpy as np
import pytest

from iwpfast import IWPClassifier
from iwpfast.estimates import ConstantBaseline


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
