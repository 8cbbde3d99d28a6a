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



def test_class_weight_refuses_a_class_twice_and_all_zero_weights(tmp_path, capsys):
    """Issue 42 (D11): {0: 1, '0': 2} named class 0 twice and {0: 0, 1: 0} learned nothing,
    both accepted silently; on the CLI, '0=1,0=2' kept the last weight."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from iwpfast.cli import main
    X, y, _ = _rr_data(500, 6)
    kw = dict(alpha=1e-3, learning_rate=0.05, progress=False)
    with pytest.raises(InvalidInputError, match=r"gives class 0 twice \(keys 0 and '0'\)"):
        IWPClassifier(class_weight={0: 1.0, "0": 2.0}, **kw).fit(X, y, noise_var=0.0)
    with pytest.raises(InvalidInputError, match="every class .* the weight 0.*--class-weight"):
        IWPClassifier(class_weight={0: 0.0, 1: 0}, **kw).fit(X, y, noise_var=0.0)
    pq.write_table(pa.table({"a": X[:, 0], "y": y}), tmp_path / "r.parquet")
    for weights, words in (("0=1,0=2", "--class-weight '0=1,0=2' gives class 0 twice"),
                           ("0=1,0.0=2", "gives class 0 twice"),
                           ("0=0,1=0", "the weight 0: nothing would be learned")):
        assert main(["fit", str(tmp_path / "r.parquet"), "--out", str(tmp_path / "m.json"),
                     "--features", "a", "--label", "y", "--class-weight", weights,
                     "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "m.json").exists()


def _kary_head_configs(w, eps, k, **kw):
    """The k one-vs-rest heads of class weights w under k-ary RR (eps; None: public labels)."""
    from iwpfast.estimators._heads import OneVsRestHeads
    from iwpfast.label_noise import label_weight_table
    heads = OneVsRestHeads(classes=np.arange(k), table=label_weight_table(eps, k),
                           class_weights=tuple(w))
    base = make_head_config(**kw)
    return heads.head_configs(base)


@pytest.mark.parametrize("loss", ["exponential", "quadratic", "logistic"])
@pytest.mark.parametrize("eps", [None, 1.0, 3.0])
def test_k_class_weights_are_unbiased_for_each_heads_weighted_loss(loss, eps):
    """k = 4 classes, weights w: for each true class y and head c, the exact expectation over
    k-ary randomized response, sum_o P(o | y) (row loss of a row released as o), of the head's
    table-plus-boost loss (and of its gradient scalar a y~_c) is w_y f(+-u) (and w_y (+-1)
    f'(+-u)), + for y = c; closed form, to 1e-12 (tau = 0)."""
    k, w = 4, np.array([0.5, 1.0, 2.0, 3.5])
    cfgs = _kary_head_configs(w, eps, k, loss=loss, mode="iwp")
    q, r = (1.0, 0.0) if eps is None else kary_probabilities(eps, k)
    u = np.linspace(-2, 2, 7)
    for c, cfg in enumerate(cfgs):
        boost = np.asarray(cfg.class_boost)
        for y in range(k):
            loss_mean = np.zeros_like(u)
            slope_mean = np.zeros_like(u)
            for o in range(k):
                prob = q if o == y else r
                sign = np.full(u.size, 1.0 if o == c else -1.0)
                rows = np.full(u.size, boost[o])
                loss_mean += prob * glm_loss_values_table(loss, sign * u, sign, 0.0,
                                                          cfg.label_weights, 2, rows)
                a, _ = glm_scalars_table(loss, sign * u, sign, 0.0, cfg.label_weights, 2, rows)
                slope_mean += prob * a * sign
            truth = 1.0 if y == c else -1.0
            np.testing.assert_allclose(loss_mean, w[y] * derivative(loss, 0, truth * u),
                                       rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(slope_mean, w[y] * truth * derivative(loss, 1, truth * u),
                                       rtol=1e-12, atol=1e-12)


def test_k_class_weighted_kernel_matches_its_twin_and_is_unbiased():
    """Three one-vs-rest heads with class weights (eps_y = 1, feature noise sigma = 0.5): the
    kernel equals its NumPy twin (several chunks, a carried batch), and over R = 600 releases of
    the same 64 clean rows at a fixed theta its one-batch gradient has, per head and coordinate,
    the class-weighted clean gradient (1/n) sum w_{y_i} grad f(y_ic u_ic) + alpha theta as mean
    within 4 SE (SE = sample sd of the R gradients / sqrt(R))."""
    from iwpfast.sgd.engine import finish_heads, run_chunk_heads
    from iwpfast.sgd.reference import reference_finish_heads, reference_run_chunk_heads
    rng = np.random.default_rng(31)
    k, p, sigma, eps = 3, 3, 0.5, 1.0
    w = np.array([0.6, 1.0, 2.4])
    q, _ = kary_probabilities(eps, k)
    common = dict(loss="exponential", mode="iwp", n_features=p, noise_var=np.full(p, sigma ** 2),
                  fit_intercept=True, alpha=0.01)
    n = 601
    X = rng.uniform(-1, 1, (p, n))
    y = np.digitize(X[0] + 0.3 * rng.standard_normal(n), [-0.3, 0.5]).astype(np.float64)
    cfgs = _kary_head_configs(w, eps, k, learning_rate=0.01, average_start=0, variance_cap=1.0,
                              radius=2.0, **common)
    kernel = [HeadState.new(c) for c in cfgs]
    twin = [HeadState.new(c) for c in cfgs]
    for start in range(0, n, 250):
        run_chunk_heads(cfgs, kernel, X[:, start:start + 250], y[start:start + 250])
        reference_run_chunk_heads(cfgs, twin, X[:, start:start + 250], y[start:start + 250])
    finish_heads(cfgs, kernel)
    reference_finish_heads(cfgs, twin)
    for a, b in zip(kernel, twin, strict=True):
        np.testing.assert_allclose(a.theta, b.theta, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(a.intercept, b.intercept, rtol=1e-12, atol=1e-12)
    m, R = 64, 600
    Xc, yc = X[:, :m], y[:m].astype(np.int64)
    theta0, b0 = np.array([0.4, -0.3, 0.2]), 0.1
    cfgs = _kary_head_configs(w, eps, k, learning_rate=1.0, batch_size=m, **common)
    gradients = np.empty((R, k, p + 1))
    for r in range(R):
        Xr = Xc + sigma * rng.standard_normal((p, m))
        yr = np.where(rng.random(m) < q, yc, (yc + rng.integers(1, k, m)) % k)
        states = [HeadState.new(c, theta0=theta0, intercept0=b0) for c in cfgs]
        run_chunk_heads(cfgs, states, Xr, yr.astype(np.float64))
        for c, st in enumerate(states):
            gradients[r, c, :p] = theta0 - st.theta
            gradients[r, c, p] = b0 - st.intercept[0]
    mean = gradients.mean(axis=0)
    se = gradients.std(axis=0, ddof=1) / math.sqrt(R)
    u = theta0 @ Xc + b0
    far = []
    for c in range(k):
        sign = np.where(yc == c, 1.0, -1.0)
        coefficient = -sign * np.exp(-sign * u) * w[yc]
        exact = np.append(Xc @ coefficient / m + 0.01 * theta0, coefficient.sum() / m)
        assert np.all(np.abs(mean[c] - exact) <= 4 * se[c]), (c, mean[c], exact, se[c])
        # power: the unweighted clean gradient is far outside the bound for some head
        plain = -sign * np.exp(-sign * u)
        far.append(np.max(np.abs(mean[c] - np.append(Xc @ plain / m + 0.01 * theta0,
                                                     plain.sum() / m)) / se[c]))
    assert max(far) > 8, far


def test_k_class_balanced_fit_raises_the_mean_recall(tmp_path):
    """3 classes (shares ~0.4, 0.42, 0.18) released by 3-ary RR at eps_y = 2: 'balanced' takes the
    shares debiased from the released labels and raises the mean recall (balanced accuracy) by
    more than 0.05; saved and loaded, the model predicts the same and keeps its weights."""
    rng = np.random.default_rng(9)
    n, k, eps = 6000, 3, 2.0
    X = rng.uniform(-1, 1, (n, 2))
    y = np.digitize(X[:, 0] + 0.4 * rng.standard_normal(n), [-0.2, 0.7])
    q, _ = kary_probabilities(eps, k)
    yt = np.where(rng.random(n) < q, y, (y + rng.integers(1, k, n)) % k)
    kw = dict(alpha=1e-3, learning_rate=0.05, progress=False)
    plain = IWPClassifier(**kw).fit(X, yt, epsilon_y=eps, noise_var=0.0, classes=[0, 1, 2])
    model = IWPClassifier(class_weight="balanced", **kw).fit(X, yt, epsilon_y=eps, noise_var=0.0,
                                                             classes=[0, 1, 2])
    shares, _ = debiased_class_shares(np.bincount(yt, minlength=k), q)
    np.testing.assert_allclose(model.class_shares_, shares, rtol=1e-12)
    np.testing.assert_allclose(model.class_weight_, 1 / (k * shares), rtol=1e-12)

    def mean_recall(m):
        pred = m.predict(X)
        return np.mean([np.mean(pred[y == c] == c) for c in range(k)])

    assert mean_recall(model) > mean_recall(plain) + 0.05, (mean_recall(model), mean_recall(plain))
    model.save(tmp_path / "k.json")
    from iwpfast import load
    back = load(tmp_path / "k.json")
    np.testing.assert_array_equal(back.decision_function(X), model.decision_function(X))
    np.testing.assert_allclose(back.class_weight_, model.class_weight_)
    assert back._pass.heads.configs[0].class_boost == model._pass.heads.configs[0].class_boost


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
    assert main(["info", str(model_path)]) == 0
    assert "class_weight 'balanced': weights [" in capsys.readouterr().out
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
    # a pass run by another driver (iwpfast.distributed) gets the same weights in its config
    plan = IWPClassifier(alpha=0.001, learning_rate=0.05, class_weight="balanced",
                         progress=False).plan_pass(str(tmp_path / "r.parquet"))
    assert plan.config.label_weights == model._pass.config.label_weights


def test_class_weight_dict_on_a_clean_file_whose_labels_are_zero_and_one(tmp_path):
    """A streamed {0, 1} label column finds its classes in its first batch: the dict's keys are
    those classes (not +-1), and the weights reach the head's table."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    X, y, _ = _rr_data(2000, 12)
    pq.write_table(pa.table({"a": X[:, 0], "b": X[:, 1], "y": y}), tmp_path / "c.parquet")
    model = IWPClassifier(alpha=1e-3, learning_rate=0.05, progress=False,
                          class_weight={0: 1.0, 1: 3.0}).fit(
        str(tmp_path / "c.parquet"), features=["a", "b"], label="y", noise_var=0.0)
    np.testing.assert_allclose(model.class_weight_, [1.0, 3.0])
    assert model._pass.config.label_weights == (3.0, 0.0, 1.0, 0.0)


# ---- the hold-out ('auto', halving rungs) scores the class-weighted risk ---------------------

def _scored(cols, names, states, configs, loss, engine, **kw):
    import pyarrow as pa

    from iwpfast.io.sources import open_source
    from iwpfast.sgd.scoring import score_heads
    source = open_source(pa.table(cols))
    return score_heads(source, [k for k in cols if k.startswith("x")], "y", names, states,
                       configs, loss=loss, engine=engine, compiled_from=0, **kw)


def _weighted_heads(cfgs, seed, p):
    rng = np.random.default_rng(seed)
    names, states, configs = [], {}, {}
    for i, cfg in enumerate(cfgs):
        state = HeadState.new(cfg, theta0=rng.normal(0.0, 0.5, p))
        state.intercept[0] = rng.normal(0.0, 0.3)
        names.append(f"h{i}")
        states[names[-1]], configs[names[-1]] = state, cfg
    return names, states, configs


@pytest.mark.parametrize("loss", ["exponential", "quadratic", "logistic"])
def test_two_class_hold_out_scores_the_weighted_training_loss(loss):
    """Three binary heads of a grid trained with class weights (0.6, 2.5) (S = 0.8, feature
    noise): the hold-out's risk of each head is the mean of the training's weighted per-row loss
    (the head's table) to 1e-12, compiled and NumPy step alike, and differs from the unweighted
    risk; heads of different weights are refused."""
    from iwpfast.estimates import noise_tau
    p, n, keep = 3, 2000, 0.8
    rng = np.random.default_rng(41)
    cfgs = [make_head_config(loss=loss, mode="iwp", n_features=p, noise_var=np.full(p, 0.05),
                             label_keep_prob=keep, alpha=alpha,
                             label_weights=class_weighted_table((0.6, 2.5), keep))
            for alpha in (1e-4, 1e-3, 1e-2)]
    names, states, configs = _weighted_heads(cfgs, 42, p)
    cols = {f"x{j}": rng.uniform(-1, 1, n) for j in range(p)}
    cols["y"] = np.where(rng.random(n) < 0.3, 1.0, -1.0)
    X = np.column_stack([cols[f"x{j}"] for j in range(p)])
    for engine in ("numpy", "numba"):
        estimates, _ = _scored(cols, names, states, configs, loss, engine)
        for name, est in zip(names, estimates, strict=True):
            theta, b = states[name].coef(configs[name].average_start >= 0)
            tau = noise_tau(loss, configs[name].noise_var, theta, None)[0]
            z = cols["y"] * (X @ theta + b)
            rows = glm_loss_values_table(loss, z, cols["y"], tau, configs[name].label_table,
                                         configs[name].truncation)
            assert est.risk == pytest.approx(rows.mean(), rel=1e-12, abs=1e-12)
    unweighted, _ = _scored(cols, names, states,
                            {h: dataclasses_replace(c, label_weights=None)
                             for h, c in configs.items()}, loss, "numpy")
    # the two objectives differ by more than the hold-out's noise (3 SE of the weighted risk)
    assert abs(unweighted[0].risk - estimates[0].risk) > 3 * estimates[0].stderr
    configs["h2"] = dataclasses_replace(configs["h2"], label_weights=class_weighted_table(
        (1.0, 1.0), keep))
    with pytest.raises(InvalidInputError, match="different class weights"):
        _scored(cols, names, states, configs, loss, "numpy")


def dataclasses_replace(cfg, **kw):
    import dataclasses
    return dataclasses.replace(cfg, **kw)


@pytest.mark.parametrize("loss", ["exponential", "logistic"])
def test_k_class_hold_out_scores_the_weighted_training_loss(loss):
    """k = 3 one-vs-rest heads with class weights (eps_y = 1): each head's hold-out risk is the
    mean of its training loss with its table and the per-class boost, to 1e-12 (the compiled
    engine asked for: the boost is scored by the NumPy step)."""
    from iwpfast.estimates import noise_tau
    k, p, n = 3, 3, 1500
    cfgs = _kary_head_configs([0.5, 1.0, 2.5], 1.0, k, loss=loss, mode="iwp", n_features=p,
                              noise_var=np.full(p, 0.05))
    names, states, configs = _weighted_heads(cfgs, 43, p)
    rng = np.random.default_rng(44)
    cols = {f"x{j}": rng.uniform(-1, 1, n) for j in range(p)}
    cols["y"] = rng.integers(0, k, n).astype(np.float64)
    X = np.column_stack([cols[f"x{j}"] for j in range(p)])
    estimates, _ = _scored(cols, names, states, configs, loss, "numba")
    for name, est in zip(names, estimates, strict=True):
        cfg = configs[name]
        theta, b = states[name].coef(cfg.average_start >= 0)
        tau = noise_tau(loss, cfg.noise_var, theta, None)[0]
        sign = np.where(cols["y"] == cfg.label_class, 1.0, -1.0)
        boost = np.asarray(cfg.class_boost)[cols["y"].astype(int)]
        rows = glm_loss_values_table(loss, sign * (X @ theta + b), sign, tau, cfg.label_weights,
                                     cfg.truncation, boost)
        assert est.risk == pytest.approx(rows.mean(), rel=1e-12, abs=1e-12)


def test_weighted_hold_out_risk_is_unbiased_for_the_clean_weighted_risk():
    """R = 300 label releases (S = 0.75) of the same 400 clean rows, a fixed exponential head
    with weights (0.5, 2.0): the mean of the hold-out risk equals the clean weighted risk
    (1/n) sum w_{y_i} f(y_i u_i) within 4 SE (SE = sample sd of the R risks / sqrt(R)); weighting
    the unweighted hold-out's rows by the released label's weight misses it by more than 8 SE."""
    p, n, keep, R = 2, 400, 0.75, 300
    weights = (0.5, 2.0)
    rng = np.random.default_rng(45)
    X = rng.uniform(-1, 1, (n, p))
    y = np.where(rng.random(n) < 0.25, 1.0, -1.0)
    cfg = make_head_config(loss="exponential", mode="iwp", n_features=p, noise_var=np.zeros(p),
                           label_keep_prob=keep, label_weights=class_weighted_table(weights, keep))
    names, states, configs = _weighted_heads([cfg], 46, p)
    plain = {"h0": dataclasses_replace(cfg, label_weights=None)}
    theta, b = states["h0"].coef(cfg.average_start >= 0)
    u = X @ theta + b
    clean = np.mean(np.where(y > 0, weights[1], weights[0]) * np.exp(-y * u))
    cols = {f"x{j}": X[:, j] for j in range(p)}
    risks, naive = [], []
    for _ in range(R):
        cols["y"] = np.where(rng.random(n) < keep, y, -y)
        risks.append(_scored(cols, names, states, configs, "exponential", "numpy")[0][0].risk)
        released = dict(cols, w=np.where(cols["y"] > 0, weights[1], weights[0]))
        naive.append(_scored(released, names, states, plain, "exponential", "numpy",
                             sample_weight="w")[0][0].risk)
    se = np.std(risks, ddof=1) / math.sqrt(R)
    assert abs(np.mean(risks) - clean) < 4 * se, (np.mean(risks), clean, se)
    assert abs(np.mean(naive) - clean) > 8 * se


def test_auto_chooses_a_class_weighted_head_by_the_weighted_risk(monkeypatch, single_holdout):
    """'auto' with class_weight='balanced' (20% positives, eps_y = 1): the final hold-out scoring
    of the grid (and every halving rung) gives each head the mean over the hold-out rows of its
    weighted training loss (its weighted table, S~ of the release) to 1e-12, and the tuning_
    table shows those risks; weights (1, 1) give the unweighted fit's risks bit for bit."""
    import warnings

    from iwpfast.estimates import noise_tau
    from iwpfast.io.sources import open_source
    from iwpfast.sgd import tuning
    real = tuning.score_heads
    calls = []

    def recording(source, *args, **kw):
        out = real(source, *args, **kw)
        calls.append((source, args, kw, out))
        return out

    monkeypatch.setattr(tuning, "score_heads", recording)
    X, _, yt = _rr_data(3000, 8)
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, cw in (("plain", None), ("ones", {0: 1.0, 1: 1.0}), ("balanced", "balanced")):
            calls.clear()
            model = IWPClassifier(progress=False, class_weight=cw).fit(
                X, yt, epsilon_y=1.0, noise_var=0.0)
            fits[name] = model.tuning_
    np.testing.assert_array_equal(fits["ones"]["risk"], fits["plain"]["risk"])
    source, (features, label, heads, states, configs), kw, (estimates, _) = calls[-1]
    assert configs[heads[0]].label_weights == class_weighted_table(
        model.class_weight_, 1 / (1 + math.exp(-1.0)))
    batches = list(open_source(source).batches([*features, label]))
    Xv = np.concatenate([np.column_stack([b.column(f).to_numpy() for f in features])
                         for b in batches])
    yv = np.concatenate([b.column(label).to_numpy() for b in batches]).astype(np.float64)
    for name, est in zip(heads, estimates, strict=True):
        cfg = configs[name]
        theta, b = states[name].coef(cfg.average_start >= 0)
        tau = noise_tau("exponential", cfg.noise_var, theta, None)[0]
        rows = glm_loss_values_table("exponential", yv * (Xv @ theta + b), yv, tau,
                                     cfg.label_table, cfg.truncation)
        assert est.risk == pytest.approx(rows.mean(), rel=1e-12, abs=1e-12)
    chosen = [r for r, c in zip(fits["balanced"]["risk"], fits["balanced"]["chosen"],
                                strict=True) if c]
    assert chosen and chosen[0] == pytest.approx(
        estimates[list(heads).index(next(h for h in heads if np.isclose(
            configs[h].learning_rate, model.learning_rate_) and np.isclose(
            configs[h].alpha, model.alpha_)))].risk, rel=1e-12)


def test_balanced_weights_on_a_one_shot_stream_are_refused_with_the_fix():
    # the shares are a read of the labels before the pass: a generator cannot be read twice, so
    # the fit says so up front instead of failing inside the pass on an empty stream
    import pyarrow as pa

    rng = np.random.default_rng(3)
    n = 600
    table = pa.table({"a": rng.uniform(-1, 1, n), "y": rng.integers(0, 2, n)})
    model = IWPClassifier(progress=False, class_weight="balanced", alpha=0.1, learning_rate=0.05)
    with pytest.raises(InvalidInputError, match="read only once.*class_weight as a dict"):
        model.fit(iter(table.to_batches(max_chunksize=100)), features=["a"], label="y")
    model.fit(table, features=["a"], label="y")       # a Table is read twice: the shares, the pass
    assert model.class_shares_ is not None and model.n_rows_seen_ == n
