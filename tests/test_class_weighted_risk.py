"""The private risk of a model fitted with class_weight is the class-weighted risk it minimized
(``private_risk(..., class_weighted=None)``; docs/usage.md "Class weights"): the label inverse
applied to y -> w_y loss(u, y), unbiased for the clean (1/n) sum_i w_{y_i} loss_i, with the best
constant model chosen under the same weights and the plain risk of the same rows beside it.

The models are fitted on a few hundred rows and then given fixed coefficients: the private risk
itself runs no kernel, so these tests stay fast with NUMBA_DISABLE_JIT=1.

Bounds: the estimate's reported standard error is the sample sd of the per-row private values
/ sqrt(n).  A row's private value is its clean value plus label (and feature) noise of mean 0
given the row, so its variance is the clean values' spread plus the noise's: the gap between
the private estimate and the clean risk of the *same* rows (the noise part only) has a standard
deviation below the reported standard error, and 4 SE bound it (fixed seeds)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from iwpfast import IWPClassifier
from iwpfast.estimates import constant_intercept
from iwpfast.exceptions import InvalidInputError
from iwpfast.losses import derivative

KW = dict(alpha=1e-3, learning_rate=0.05, progress=False)


def _rr(y, eps, rng, k=2):
    """k-ary randomized response of class indices 0..k-1 with budget eps."""
    q = math.exp(eps) / (math.exp(eps) + k - 1)
    other = (y + rng.integers(1, k, y.size)) % k
    return np.where(rng.random(y.size) < q, y, other)


def _two_class_release(n, seed, sigma):
    """20% positives; labels by randomized response (eps_y = 1), features + N(0, sigma^2)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 2))
    logit = 2.5 * X[:, 0] + math.log(0.2 / 0.8)
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return X, y, X + rng.normal(0.0, sigma, X.shape), _rr(y, 1.0, rng)


def _fixed(model, coef, intercept):
    model.coef_ = np.array(coef, dtype=np.float64)
    model.intercept_ = np.array(intercept, dtype=np.float64)
    return model


@pytest.mark.parametrize("loss", ["exponential", "quadratic"])
def test_two_class_weighted_private_risk_is_unbiased_for_the_clean_weighted_risk(loss):
    """20,000 rows, weights (0.5, 3): the weighted private risk of a fixed model agrees with the
    clean weighted risk of the same rows within 4 SE (module docstring), and the constant model
    chosen under the weights (its risk, exponential loss; the paired difference, both losses)
    with the clean weighted constant (the minimum of A f(b) + B f(-b), A = w_+ pi,
    B = w_- (1 - pi)).  The clean plain risk lies more than 6 SE
    from the weighted one, so an estimate of the wrong risk would fail."""
    n, sigma = 20_000, 0.3
    X, y, Xt, yt = _two_class_release(n, 21, sigma)
    weights = np.array([0.5, 3.0])
    model = IWPClassifier(loss=loss, class_weight={0: 0.5, 1: 3.0}, **KW).fit(
        Xt[:300], yt[:300], epsilon_y=1.0, noise_var=sigma ** 2)
    _fixed(model, [[1.2, -0.4]], [-0.8])
    est = model.private_risk(Xt, yt, epsilon_y=1.0, noise_var=sigma ** 2)
    ypm = 2.0 * y - 1.0
    values = derivative(loss, 0, ypm * model.decision_function(X))
    clean = float(np.mean(weights[y] * values))
    assert est.class_weight == (0.5, 3.0) and est.unweighted is not None
    assert abs(est.risk - clean) < 4 * est.stderr, (est.risk, clean, est.stderr)
    assert abs(est.unweighted.risk - float(np.mean(values))) < 4 * est.unweighted.stderr
    assert abs(float(np.mean(values)) - clean) > 6 * est.stderr, (np.mean(values), clean)
    # the weighted constant model: b minimizes A f(b) + B f(-b) with the debiased shares
    c = est.baseline
    assert c.class_weighted and not est.unweighted.baseline.class_weighted
    pi = y.mean()
    a, b = weights[1] * pi, weights[0] * (1 - pi)
    share = a / (a + b)
    grid = np.linspace(-2, 2, 40_001)
    clean_constant = float(np.min(a * derivative(loss, 0, grid) + b * derivative(loss, 0, -grid)))
    if loss == "exponential":
        # the quadratic constant's two per-class values can nearly coincide, and then its
        # reported SE (their spread) misses the share's estimation error: over 60 seeds its
        # z-score had sd 1.7 (the exponential's 0.98, the paired differences' 1.0 for both)
        assert abs(c.risk - clean_constant) < 4 * c.stderr, (c.risk, clean_constant, c.stderr)
    # the weighted share A/(A + B) moves with the debiased positive share pi^ by
    # w_+ w_- / (A + B)^2 (delta method); pi^'s per-row sd is (2 S~ - 1) sqrt(o (1 - o)), o the
    # released positive share
    tilde = 1 / (1 - math.exp(-1.0))
    o = np.mean(yt == 1)
    share_se = weights[0] * weights[1] / (a + b) ** 2 * (2 * tilde - 1) * math.sqrt(o * (1 - o) / n)
    assert abs(c.shares[0] - share) < 4 * share_se, (c.shares[0], share, share_se)
    assert c.intercept[0] == pytest.approx(constant_intercept(loss, c.shares[0]), rel=1e-12)
    assert abs(c.difference - (clean - clean_constant)) < 4 * c.difference_stderr
    text = est.describe()
    assert text.startswith("class-weighted risk") and "under the same class weights" in text
    assert "unweighted risk (comparable with models fitted without class weights)" in text


def test_the_plain_risk_is_unchanged():
    """An unweighted model: the default and class_weighted=False give the same estimate bit for
    bit, with no class weights and no nested estimate, equal to the mean of the rows' IWP losses
    S~ f(z) + (1 - S~) f(-z) (public features) to rounding.  A weighted model with the same
    coefficients: class_weighted=False gives that plain estimate bit for bit, and so does the
    ``unweighted`` field of its default (class-weighted) estimate."""
    X, _, _, yt = _two_class_release(4000, 22, 0.0)
    plain = _fixed(IWPClassifier(**KW).fit(X[:300], yt[:300], epsilon_y=1.0, noise_var=0.0),
                   [[1.0, 0.5]], [-0.2])
    weighted = _fixed(IWPClassifier(class_weight="balanced", **KW).fit(
        X[:300], yt[:300], epsilon_y=1.0, noise_var=0.0), [[1.0, 0.5]], [-0.2])
    kw = dict(epsilon_y=1.0, noise_var=0.0)
    default = plain.private_risk(X, yt, **kw)
    assert default == plain.private_risk(X, yt, class_weighted=False, **kw)
    assert default.class_weight is None and default.unweighted is None
    assert default.baseline is not None and not default.baseline.class_weighted
    tilde = 1 / (1 - math.exp(-1.0))
    z = (2.0 * yt - 1.0) * plain.decision_function(X)
    direct = tilde * np.exp(-z) + (1 - tilde) * np.exp(z)
    assert default.risk == pytest.approx(direct.mean(), rel=1e-12)
    assert default.stderr == pytest.approx(direct.std(ddof=1) / math.sqrt(z.size), rel=1e-9)
    assert weighted.private_risk(X, yt, class_weighted=False, **kw) == default
    both = weighted.private_risk(X, yt, **kw)
    assert both.unweighted == default and both.risk != default.risk
    assert weighted.private_risk(X, yt, class_weighted=True, **kw) == both


def test_k_class_weighted_private_risk_is_unbiased_for_the_clean_weighted_risk():
    """k = 3 (shares about 0.6, 0.26, 0.14; 3-ary randomized response, eps_y = 1), weights
    (3, 1, 0.5): the weighted private risk (sum over the heads of w_y f(+-u_c)) of a fixed model
    agrees with its clean value on the same rows within 4 SE, and the constant model chosen under
    the weights with the clean weighted constant (per head c: 2 sqrt(A_c B_c), A_c = w_c pi_c,
    B_c = sum_{y != c} w_y pi_y, the exponential loss's minimum); the clean plain risk lies more
    than 6 SE away."""
    rng = np.random.default_rng(23)
    n, k = 20_000, 3
    X = rng.uniform(-1, 1, (n, 2))
    y = np.digitize(X[:, 0] + 0.4 * rng.standard_normal(n), [0.2, 0.8])
    yt = _rr(y, 1.0, rng, k)
    weights = np.array([3.0, 1.0, 0.5])
    model = IWPClassifier(class_weight={0: 3.0, 1: 1.0, 2: 0.5}, **KW).fit(
        X[:300], yt[:300], classes=[0, 1, 2], epsilon_y=1.0, noise_var=0.0)
    _fixed(model, [[-1.0, 0.2], [0.3, 0.0], [1.2, -0.3]], [0.3, -0.5, -1.0])
    est = model.private_risk(X, yt, epsilon_y=1.0, noise_var=0.0)
    u = model.decision_function(X)
    signs = np.where(y[:, None] == np.arange(k), 1.0, -1.0)
    per_row = np.exp(-signs * u).sum(axis=1)
    clean = float(np.mean(weights[y] * per_row))
    assert est.class_weight == (3.0, 1.0, 0.5)
    assert abs(est.risk - clean) < 4 * est.stderr, (est.risk, clean, est.stderr)
    assert abs(est.unweighted.risk - float(np.mean(per_row))) < 4 * est.unweighted.stderr
    assert abs(float(np.mean(per_row)) - clean) > 6 * est.stderr, (np.mean(per_row), clean)
    pi = np.bincount(y, minlength=k) / n
    mass = weights * pi
    clean_constant = float(np.sum(2 * np.sqrt(mass * (mass.sum() - mass))))
    c = est.baseline
    assert c.class_weighted and len(c.intercept) == k
    assert abs(c.risk - clean_constant) < 4 * c.stderr, (c.risk, clean_constant, c.stderr)
    assert abs(c.difference - (clean - clean_constant)) < 4 * c.difference_stderr
    # an unweighted k-class model keeps its plain estimate
    plain = _fixed(IWPClassifier(**KW).fit(X[:300], yt[:300], classes=[0, 1, 2], epsilon_y=1.0,
                                           noise_var=0.0), model.coef_, model.intercept_)
    assert plain.private_risk(X, yt, epsilon_y=1.0, noise_var=0.0) == est.unweighted
    assert model.private_risk(X, yt, epsilon_y=1.0, noise_var=0.0,
                              class_weighted=False) == est.unweighted


def test_class_weighted_true_without_class_weights_is_an_error_naming_the_fix():
    X, _, _, yt = _two_class_release(600, 24, 0.0)
    model = IWPClassifier(**KW).fit(X[:300], yt[:300], epsilon_y=1.0, noise_var=0.0)
    with pytest.raises(InvalidInputError, match=r"class_weighted=True but this IWPClassifier "
                       r"was fitted without class_weight.*class_weighted=None or False"):
        model.private_risk(X, yt, epsilon_y=1.0, noise_var=0.0, class_weighted=True)
    with pytest.raises(InvalidInputError, match="class_weighted='yes'; use None"):
        model.private_risk(X, yt, epsilon_y=1.0, noise_var=0.0, class_weighted="yes")


def test_cli_evaluate_prints_the_class_weighted_risks(tmp_path, capsys):
    """A balanced model on a label-only release (eps_y = 1): `evaluate --private` prints the
    class-weighted risk and constant on lines that say so, then the unweighted ones; --json holds
    both (the unweighted nested, equal to private_risk(class_weighted=False)); clean `evaluate`
    adds the class-weighted risk line, equal to the weighted mean loss of the clean rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from iwpfast.cli import main
    rng = np.random.default_rng(25)
    n = 2000
    age = rng.uniform(18, 90, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(age - 70) / 8))).astype(np.int64)
    pq.write_table(pa.table({"AGEP": age, "y": y}), tmp_path / "clean.parquet")
    assert main(["release", str(tmp_path / "clean.parquet"), str(tmp_path / "r.parquet"),
                 "--features", "AGEP", "--label", "y", "--ranges", "AGEP=0:99", "--public",
                 "AGEP", "--epsilon-y", "1", "--seed", "3"]) == 0
    model = IWPClassifier(class_weight="balanced", **KW).fit(str(tmp_path / "r.parquet"))
    model.save(tmp_path / "m.json")
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "m.json"), str(tmp_path / "r.parquet"),
                 "--private"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "class-weighted risk (1/n) sum w_y loss" in lines[0]
    assert lines[1].startswith("best constant model") and "under the same class weights" in lines[1]
    assert any(line.startswith("unweighted risk (comparable") for line in lines[2:])
    assert main(["evaluate", str(tmp_path / "m.json"), str(tmp_path / "r.parquet"), "--private",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    weighted = model.private_risk(str(tmp_path / "r.parquet"))
    plain = model.private_risk(str(tmp_path / "r.parquet"), class_weighted=False)
    assert doc["class_weighted"] is True and doc["class_weight"] == list(model.class_weight_)
    assert doc["risk"] == weighted.risk and doc["constant_risk"] == weighted.baseline.risk
    assert doc["unweighted"]["risk"] == plain.risk
    assert doc["unweighted"]["difference"] == plain.baseline.difference
    assert main(["evaluate", str(tmp_path / "m.json"), str(tmp_path / "clean.parquet")]) == 0
    out = capsys.readouterr().out
    assert "class-weighted exponential risk" in out and "is unweighted" in out
    report = model.evaluate_report(str(tmp_path / "clean.parquet"))
    u = model.decision_function(age.reshape(-1, 1))
    expected = np.mean(model.class_weight_[y] * np.exp(-(2.0 * y - 1.0) * u))
    assert report.weighted_risk == pytest.approx(expected, rel=1e-12)
    assert report.risk == pytest.approx(np.mean(np.exp(-(2.0 * y - 1.0) * u)), rel=1e-12)


@pytest.mark.parametrize("k", [2, 3])
def test_private_risk_is_the_risk_auto_scores_the_heads_by(k):
    """The weighted private risk of a fitted model equals the hold-out score that 'auto' gives
    the same head (``score_heads`` with the head's own config: the weighted table, and for k
    classes the per-class boost) to 1e-12, so the evaluation judges the model by the objective
    its tuning chose it by."""
    import pyarrow as pa

    from iwpfast.io.sources import open_source
    from iwpfast.sgd.scoring import score_heads
    rng = np.random.default_rng(26 + k)
    n, sigma = 2400, 0.3
    X = rng.uniform(-1, 1, (n, 2))
    y = np.digitize(X[:, 0] + 0.4 * rng.standard_normal(n), [0.2, 0.8][: k - 1])
    yt = _rr(y, 1.0, rng, k)
    Xt = X + rng.normal(0.0, sigma, X.shape)
    extra = {} if k == 2 else dict(classes=list(range(k)))
    weights = {0: 0.5, 1: 3.0} if k == 2 else {0: 3.0, 1: 1.0, 2: 0.5}
    model = IWPClassifier(class_weight=weights, **KW).fit(
        Xt[:400], yt[:400], epsilon_y=1.0, noise_var=sigma ** 2, **extra)
    est = model.private_risk(Xt[400:], yt[400:], epsilon_y=1.0, noise_var=sigma ** 2)
    heads = model._pass.heads
    names = [f"h{c}" for c in range(len(heads.configs))]
    label = (2.0 * yt[400:] - 1.0) if k == 2 else yt[400:].astype(np.float64)
    source = open_source(pa.table({"a": Xt[400:, 0], "b": Xt[400:, 1], "y": label}))
    scored, _ = score_heads(source, ["a", "b"], "y", names, dict(zip(names, heads.states, strict=True)),
                            dict(zip(names, heads.configs, strict=True)), loss=model.loss, engine="numpy")
    assert est.class_weight == tuple(weights.values())
    # k heads: the one-vs-rest risk is the sum over the heads of each head's mean
    assert est.risk == pytest.approx(sum(s.risk for s in scored), rel=1e-12)


def test_weighted_constant_baseline_matches_a_direct_computation():
    """k = 3 class-weighted tables and boost (eps_y = 1), several batches: the one-pass constant's
    risk and paired difference equal the direct per-row computation (the table-plus-boost loss at
    theta = 0, summed over the heads), and each head's b minimizes that head's private risk."""
    from iwpfast.estimates import ConstantBaseline, glm_loss_values_table
    from iwpfast.label_noise import (
        class_weighted_head_tables,
        kary_probabilities,
        label_weight_table,
    )
    rng = np.random.default_rng(27)
    k, n = 3, 3000
    tables, boost = class_weighted_head_tables(label_weight_table(1.0, k), [3.0, 1.0, 0.5])
    boost = np.asarray(boost)
    # released shares (q - r) pi + r of true shares pi = (0.5, 0.3, 0.2): each weighted share
    # inside (0, 1), so no b is clipped
    q, r = kary_probabilities(1.0, k)
    codes = rng.choice(k, n, p=(q - r) * np.array([0.5, 0.3, 0.2]) + r)
    values = rng.exponential(2.0, n)
    base = ConstantBaseline("exponential", tables, range(k), k, boost=boost, class_weighted=True)
    for part in np.array_split(np.arange(n), 5):
        base.add(values[part], codes[part])
    c = base.result()

    def head_values(h, b):
        signs = np.where(codes == h, 1.0, -1.0)
        return glm_loss_values_table("exponential", signs * b, signs, 0.0, tables[h], 0,
                                     boost[codes])

    direct = sum(head_values(h, c.intercept[h]) for h in range(k))
    assert c.class_weighted and "under the same class weights" in c.describe()
    assert c.risk == pytest.approx(direct.mean(), rel=1e-10)
    assert c.difference == pytest.approx((values - direct).mean(), rel=1e-10)
    assert c.difference_stderr == pytest.approx((values - direct).std(ddof=1) / math.sqrt(n),
                                                rel=1e-9)
    for h in range(k):
        best = head_values(h, c.intercept[h]).mean()
        for step in (-0.01, 0.01):
            assert head_values(h, c.intercept[h] + step).mean() > best
