"""class_weight on IWPClassifier (issue 33 item 3): scikit-learn's 'balanced' weights n / (k n_c)
with the class shares estimated from the released labels (the unbiased inverse of randomized
response), and the class weights inside the head's label-weight table so that the IWP gradient
stays unbiased for the class-weighted clean risk (docs/math.md "Class weights").
Sizes are small so that CI can run this with NUMBA_DISABLE_JIT=1."""
from __future__ import annotations

import math

import numpy as np
import pytest

from iwpfast import IWPClassifier
from iwpfast.estimates import glm_loss_values_table, glm_scalars_table
from iwpfast.exceptions import InvalidInputError
from iwpfast.label_noise import (
    balanced_class_weights,
    class_weighted_table,
    debiased_class_shares,
    kary_probabilities,
)
from iwpfast.losses import derivative
from iwpfast.sgd.engine import finish, run_chunk
from iwpfast.sgd.reference import reference_finish, reference_run_chunk
from iwpfast.sgd.state import HeadConfig, HeadState
from tests.conftest import make_head_config, run_in_chunks


@pytest.mark.parametrize("k,eps", [(2, 1.0), (2, 0.5), (3, 1.0), (5, 2.0)])
def test_debiased_class_shares_are_unbiased(k, eps):
    """R = 4000 releases of the same n = 400 clean labels by k-ary randomized response: the mean
    of the estimated shares equals the clean shares of those rows within 4 standard errors per
    class (SE = the sample sd of the R estimates / sqrt(R)).  Then with the rows drawn afresh in
    each release (the population view): the reported standard error sqrt(o(1 - o)/n)/(q - r)
    (the multinomial sd of the released share o, whose rows are iid with P(o = c) = (q - r) pi_c
    + r, scaled by the inverse's factor) matches the sample sd of the estimates within 10%."""
    rng = np.random.default_rng(100 + k)
    n, R = 400, 4000
    shares = np.linspace(1.0, 2.0, k)
    shares /= shares.sum()
    y = rng.choice(k, n, p=shares)
    clean = np.bincount(y, minlength=k) / n
    q, _ = kary_probabilities(eps, k)
    estimates = np.empty((R, k))
    reported = np.empty((R, k))
    for r in range(R):
        keep = rng.random(n) < q
        released = np.where(keep, y, (y + rng.integers(1, k, n)) % k)
        estimates[r], reported[r] = debiased_class_shares(np.bincount(released, minlength=k), q)
    mean = estimates.mean(axis=0)
    sd = estimates.std(axis=0, ddof=1)
    assert np.all(np.abs(mean - clean) <= 4 * sd / math.sqrt(R)), (mean, clean, sd)
    for r in range(R):
        fresh = rng.choice(k, n, p=shares)
        released = np.where(rng.random(n) < q, fresh, (fresh + rng.integers(1, k, n)) % k)
        estimates[r], reported[r] = debiased_class_shares(np.bincount(released, minlength=k), q)
    assert np.all(np.abs(estimates.mean(axis=0) - shares)
                  <= 4 * estimates.std(axis=0, ddof=1) / math.sqrt(R))
    np.testing.assert_allclose(reported.mean(axis=0), estimates.std(axis=0, ddof=1), rtol=0.1)
    # the naive shares of the released labels are biased toward 1/k: far outside the bound
    naive = np.bincount(released, minlength=k) / n
    assert np.abs(naive - clean).max() > 0.02


def test_public_shares_and_balanced_weights():
    shares, se = debiased_class_shares([66, 34])
    np.testing.assert_allclose(shares, [0.66, 0.34])
    np.testing.assert_allclose(balanced_class_weights(shares), [100 / (2 * 66), 100 / (2 * 34)])
    with pytest.raises(InvalidInputError, match="share of class 'b'.*<= 0"):
        balanced_class_weights([1.02, -0.02], ["a", "b"])


@pytest.mark.parametrize("loss", ["exponential", "quadratic", "logistic"])
@pytest.mark.parametrize("keep", [None, 0.8, 0.6])
def test_class_weighted_table_is_unbiased_for_the_weighted_loss_row_by_row(loss, keep):
    """The exact expectation over randomized response of a row's table loss (and gradient
    scalars) is w_y f(y u) (and w_y f'(y u)): E = S row(y~ = y) + (1 - S) row(y~ = -y),
    computed in closed form; no Monte Carlo is needed for the label part (tau = 0)."""
    w = (0.7, 2.3)
    table = class_weighted_table(w, keep)
    S = 1.0 if keep is None else keep
    u = np.linspace(-2, 2, 9)
    for y in (-1.0, 1.0):
        weight = w[1] if y > 0 else w[0]
        kept = glm_loss_values_table(loss, y * u, np.full(9, y), 0.0, table, 2)
        flipped = glm_loss_values_table(loss, -y * u, np.full(9, -y), 0.0, table, 2)
        np.testing.assert_allclose(S * kept + (1 - S) * flipped,
                                   weight * derivative(loss, 0, y * u), rtol=1e-12, atol=1e-12)
        a_kept, _ = glm_scalars_table(loss, y * u, np.full(9, y), 0.0, table, 2)
        a_flip, _ = glm_scalars_table(loss, -y * u, np.full(9, -y), 0.0, table, 2)
        # d/du of the row loss is a y~: its expectation is w_y y f'(y u)
        np.testing.assert_allclose(S * a_kept * y + (1 - S) * a_flip * (-y),
                                   weight * y * derivative(loss, 1, y * u), rtol=1e-12,
                                   atol=1e-12)


def test_class_weighted_kernel_matches_its_twin():
    rng = np.random.default_rng(3)
    n, p = 601, 3
    X = rng.uniform(-1, 1, (p, n)) + 0.3 * rng.standard_normal((p, n))
    y = np.where(X[0] + 0.3 * rng.standard_normal(n) > 0.6, 1.0, -1.0)
    cfg = make_head_config(average_start=0, label_keep_prob=0.85, fit_intercept=True,
                           label_weights=class_weighted_table((0.6, 2.5), 0.85))
    kernel = run_in_chunks(run_chunk, finish, cfg, X, y, 250)
    twin = run_in_chunks(reference_run_chunk, reference_finish, cfg, X, y, 250)
    np.testing.assert_allclose(kernel.theta, twin.theta, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(kernel.intercept, twin.intercept, rtol=1e-12, atol=1e-12)
    plain = run_in_chunks(run_chunk, finish, make_head_config(
        average_start=0, label_keep_prob=0.85, fit_intercept=True), X, y, 250)
    assert abs(plain.intercept[0] - kernel.intercept[0]) > 1e-2     # the weights matter


def test_class_weighted_iwp_gradient_is_unbiased_for_the_weighted_clean_gradient():
    """Monte Carlo over R releases (Gaussian feature noise sigma = 0.5, randomized response
    S = 0.8) of the same clean rows at a fixed theta: the kernel's one-batch gradient with the
    class-weighted table has mean (1/n) sum w_{y_i} grad exp(-y_i u_i) + alpha theta within 4
    standard errors per coordinate (SE = the sample sd of the R gradients / sqrt(R)).  Power:
    weighting each row by its *released* label's weight (w[y~] as a sample weight) is biased
    and lands more than 8 SE away."""
    rng = np.random.default_rng(21)
    n, p, R, sigma, keep = 64, 3, 1500, 0.5, 0.8
    X = rng.uniform(-1.0, 1.0, size=(p, n))
    theta0, b0, alpha = np.array([0.4, -0.3, 0.2]), 0.1, 0.01
    y = np.where(X[0] - X[1] + 0.3 * rng.standard_normal(n) > 0.5, 1.0, -1.0)
    w = (0.6, 2.5)
    common = dict(loss="exponential", mode="iwp", n_features=p, noise_var=np.full(p, sigma ** 2),
                  label_keep_prob=keep, batch_size=n, learning_rate=1.0, alpha=alpha,
                  fit_intercept=True)
    cfg = HeadConfig(label_weights=class_weighted_table(w, keep), **common)
    naive_cfg = HeadConfig(weighted=True, **common)
    gradients = np.empty((R, p + 1))
    naive = np.empty((R, p + 1))
    for r in range(R):
        Xr = X + sigma * rng.standard_normal((p, n))
        yr = np.where(rng.random(n) < keep, y, -y)
        for c, out, kw in ((cfg, gradients, {}),
                           (naive_cfg, naive, dict(sample_weight=np.where(yr > 0, w[1], w[0])))):
            state = HeadState.new(c, theta0=theta0, intercept0=b0)
            run_chunk(c, state, Xr, yr, **kw)
            out[r, :p] = theta0 - state.theta
            out[r, p] = b0 - state.intercept[0]
    u = theta0 @ X + b0
    s = np.where(y > 0, w[1], w[0])
    coefficient = -y * np.exp(-y * u) * s
    exact = np.append(X @ coefficient / n + alpha * theta0, coefficient.sum() / n)
    mean = gradients.mean(axis=0)
    se = gradients.std(axis=0, ddof=1) / math.sqrt(R)
    assert np.all(np.abs(mean - exact) <= 4 * se), (mean, exact, se)
    naive_se = naive.std(axis=0, ddof=1) / math.sqrt(R)
    assert np.any(np.abs(naive.mean(axis=0) - exact) > 8 * naive_se)


def _rr_data(n, seed, share=0.2, eps=1.0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 2))
    y = (rng.random(n) < 1 / (1 + np.exp(-(2.5 * X[:, 0] + math.log(share / (1 - share)))))
         ).astype(int)
    S = 1 / (1 + math.exp(-eps))
    return X, y, np.where(rng.random(n) < S, y, 1 - y)


def _balanced_accuracy(pred, y):
    return 0.5 * (np.mean(pred[y == 1] == 1) + np.mean(pred[y == 0] == 0))


def test_balanced_fit_on_released_labels_raises_balanced_accuracy(tmp_path):
    """8,000 rows, 20% positives, labels released with eps_y = 1: the balanced weights come from
    the debiased shares (not the clean ones), the balanced accuracy rises by more than 0.05 and
    the model, saved and loaded, predicts the same and keeps its class weights."""
    X, y, yt = _rr_data(8000, 5)
    kw = dict(alpha=1e-3, learning_rate=0.05, progress=False)
    plain = IWPClassifier(**kw).fit(X, yt, epsilon_y=1.0, noise_var=0.0)
    model = IWPClassifier(class_weight="balanced", **kw).fit(X, yt, epsilon_y=1.0, noise_var=0.0)
    S = 1 / (1 + math.exp(-1.0))
    share = (np.mean(yt == 1) - (1 - S)) / (2 * S - 1)
    np.testing.assert_allclose(model.class_shares_, [1 - share, share], rtol=1e-12)
    np.testing.assert_allclose(model.class_weight_, [1 / (2 * (1 - share)), 1 / (2 * share)])
    assert model.get_params()["class_weight"] == "balanced"
    gain = _balanced_accuracy(model.predict(X), y) - _balanced_accuracy(plain.predict(X), y)
    assert gain > 0.05, gain
    # a dict of the same weights is the same model
    same = IWPClassifier(class_weight=dict(zip([0, 1], model.class_weight_, strict=True)),
                         **kw).fit(X, yt, epsilon_y=1.0, noise_var=0.0)
    np.testing.assert_allclose(same.coef_, model.coef_, rtol=1e-12)
    path = tmp_path / "m.json"
    model.save(path)
    from iwpfast import load
    back = load(path)
    np.testing.assert_array_equal(back.predict(X), model.predict(X))
    np.testing.assert_allclose(back.class_weight_, model.class_weight_)
    assert back._pass.config.label_weights == model._pass.config.label_weights


def test_class_weight_on_a_clean_fit_and_the_refusals():
    X, y, _ = _rr_data(3000, 6)
    kw = dict(alpha=1e-3, learning_rate=0.05, progress=False)
    plain = IWPClassifier(**kw).fit(X, y, noise_var=0.0)
    model = IWPClassifier(class_weight="balanced", **kw).fit(X, y, noise_var=0.0)
    np.testing.assert_allclose(model.class_shares_, [1 - y.mean(), y.mean()], rtol=1e-12)
    assert model.intercept_[0] > plain.intercept_[0] + 0.2     # the threshold moves to the rare class
    with pytest.raises(InvalidInputError, match="class_weight has the key 7"):
        IWPClassifier(class_weight={7: 2.0}, **kw).fit(X, y, noise_var=0.0)
    with pytest.raises(InvalidInputError, match="class_weight='weird'"):
        IWPClassifier(class_weight="weird", **kw).fit(X, y, noise_var=0.0)
    with pytest.raises(InvalidInputError, match="partial_fit cannot"):
        IWPClassifier(class_weight="balanced", **kw).partial_fit(X, y, noise_var=0.0)
    with pytest.raises(InvalidInputError, match="implemented for two classes"):
        IWPClassifier(class_weight="balanced", **kw).fit(X, np.arange(3000) % 3, noise_var=0.0)


def test_cli_fit_class_weight_balanced_on_a_label_only_release(tmp_path, capsys):
    """iwpfast release (labels only, eps_y = 1) -> fit --class-weight balanced: the shares are
    the file's released labels debiased; the model file keeps class_weight; evaluate --private
    prints the best constant model and its paired difference."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from iwpfast import load
    from iwpfast.cli import main
    rng = np.random.default_rng(8)
    n = 3000
    age = rng.uniform(18, 90, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(age - 70) / 8))).astype(np.int64)
    pq.write_table(pa.table({"AGEP": age, "y": y}), tmp_path / "train.parquet")
    assert main(["release", str(tmp_path / "train.parquet"), str(tmp_path / "r.parquet"),
                 "--features", "AGEP", "--label", "y", "--ranges", "AGEP=0:99", "--public", "AGEP",
                 "--epsilon-y", "1",
                 "--seed", "3"]) == 0
    capsys.readouterr()
    model_path = tmp_path / "m.json"
    assert main(["fit", str(tmp_path / "r.parquet"), "--out", str(model_path), "--alpha", "0.001",
                 "--learning-rate", "0.05", "--class-weight", "balanced", "--no-progress"]) == 0
    released = pq.read_table(tmp_path / "r.parquet").column("y").to_numpy()
    S = 1 / (1 + math.exp(-1.0))
    share = (np.mean(released > 0) - (1 - S)) / (2 * S - 1)
    model = load(model_path)
    assert model.get_params()["class_weight"] == "balanced"
    np.testing.assert_allclose(model.class_shares_, [1 - share, share], rtol=1e-12)
    capsys.readouterr()
    assert main(["evaluate", str(model_path), str(tmp_path / "r.parquet"), "--private"]) == 0
    out = capsys.readouterr().out
    assert "best constant model (intercept only, b = " in out and "paired standard error" in out
    assert main(["evaluate", str(model_path), str(tmp_path / "r.parquet"), "--private",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["difference_stderr"] > 0 and len(doc["constant_intercept"]) == 1
    assert main(["fit", str(tmp_path / "r.parquet"), "--out", str(tmp_path / "x.json"),
                 "--class-weight", "1=", "--no-progress"]) == 2
    assert "CLASS=WEIGHT" in capsys.readouterr().err
