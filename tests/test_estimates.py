"""Per-example IWP loss/gradient (iwpfast.estimates): exact gradients, the paper's closed forms,
Monte-Carlo unbiasedness and input validation."""
import math

import numpy as np
import pytest

import iwpfast
from iwpfast.estimates import iwp_gradient, iwp_loss, label_tilde
from iwpfast.exceptions import InvalidInputError
from iwpfast.transforms import logistic_gradient_truncation_bias

CASES = [
    # loss, noise_var, epsilon_y, intercept, extra kwargs
    ("exponential", 0.3, None, None, {}),
    ("exponential", [0.1, 0.4, 0.2], 1.5, 0.3, {}),
    ("quadratic", 0.5, 0.8, None, {}),
    ("quadratic", [0.0, 1.0, 0.3], None, -0.2, {}),
    ("logistic", 0.6, None, None, {"truncation": 0}),
    ("logistic", [0.2, 0.9, 0.5], 1.2, 0.4, {"truncation": 2}),
    ("logistic", 1.0, 2.0, -0.1, {"truncation": 4}),
    ("squared_error", 0.4, None, None, {"target_noise_var": 0.3}),
    ("squared_error", [0.1, 0.0, 0.5], None, 0.7, {}),
]


def _data(loss, n=6, p=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = rng.normal(size=n) if loss == "squared_error" else rng.choice([-1.0, 1.0], size=n)
    theta = rng.normal(size=p) * 0.7
    return theta, X, y


def test_public_names_are_wired():
    assert iwpfast.iwp_loss is iwp_loss and iwpfast.iwp_gradient is iwp_gradient


@pytest.mark.parametrize("correction", ["iwp", "none"])
@pytest.mark.parametrize("loss,noise_var,epsilon_y,intercept,extra", CASES)
def test_gradient_is_central_finite_difference_of_loss(loss, noise_var, epsilon_y, intercept, extra,
                                                      correction):
    theta, X, y = _data(loss)
    kw = dict(loss=loss, noise_var=noise_var, epsilon_y=epsilon_y, correction=correction, **extra)
    grad = iwp_gradient(theta, X, y, intercept=intercept, **kw)
    p = theta.size
    assert grad.shape == (6, p + (intercept is not None))
    h = 1e-6
    for j in range(p):
        e = np.zeros(p)
        e[j] = h
        fd = (iwp_loss(theta + e, X, y, intercept=intercept, **kw)
              - iwp_loss(theta - e, X, y, intercept=intercept, **kw)) / (2 * h)
        # central difference error ~ h^2 |L'''| + eps |L| / h ~ 1e-9 at these magnitudes
        assert np.allclose(grad[:, j], fd, rtol=1e-6, atol=1e-7), (j, grad[:, j], fd)
    if intercept is not None:
        fd = (iwp_loss(theta, X, y, intercept=intercept + h, **kw)
              - iwp_loss(theta, X, y, intercept=intercept - h, **kw)) / (2 * h)
        assert np.allclose(grad[:, -1], fd, rtol=1e-6, atol=1e-7)


def test_paper_quadratic_example_sec_4_3():
    # L~ = S~ f(z) + (1-S~) f(-z) - sigma^2 |theta|^2 / 2,
    # grad = S~ f'(z) y x - (1-S~) f'(-z) y x - sigma^2 theta
    theta, X, y = _data("quadratic", n=5)
    sigma2, eps = 0.7, 1.3
    St = 1.0 / (1.0 - math.exp(-eps))
    z = y * (X @ theta)
    f = lambda v: 0.5 * (v - 1.0) ** 2
    df = lambda v: v - 1.0
    expected_loss = St * f(z) + (1 - St) * f(-z) - sigma2 * theta @ theta / 2
    expected_grad = ((St * df(z) - (1 - St) * df(-z)) * y)[:, None] * X - sigma2 * theta
    kw = dict(loss="quadratic", noise_var=sigma2, epsilon_y=eps)
    assert np.allclose(iwp_loss(theta, X, y, **kw), expected_loss, rtol=1e-13)
    assert np.allclose(iwp_gradient(theta, X, y, **kw), expected_grad, rtol=1e-13)


def test_paper_exponential_example_sec_4_3():
    # L~ = e^{-sigma^2|theta|^2/2} (S~ f(z) + (1-S~) f(-z)); the gradient has the four terms of the paper
    theta, X, y = _data("exponential", n=5)
    sigma2, eps = 0.7, 1.3
    St = 1.0 / (1.0 - math.exp(-eps))
    z = y * (X @ theta)
    damp = math.exp(-sigma2 * theta @ theta / 2)
    f = lambda v: np.exp(-v)
    expected_loss = damp * (St * f(z) + (1 - St) * f(-z))
    # grad_theta f(theta^T x y) = -f(z) y x and grad_theta f(-theta^T x y) = f(-z) y x
    expected_grad = (damp * (St * (-f(z)) + (1 - St) * f(-z)) * y)[:, None] * X \
        - sigma2 * damp * (St * f(z))[:, None] * theta - sigma2 * damp * ((1 - St) * f(-z))[:, None] * theta
    kw = dict(loss="exponential", noise_var=sigma2, epsilon_y=eps)
    assert np.allclose(iwp_loss(theta, X, y, **kw), expected_loss, rtol=1e-13)
    assert np.allclose(iwp_gradient(theta, X, y, **kw), expected_grad, rtol=1e-13)


def test_regression_formulas():
    theta, X, y = _data("squared_error", n=4)
    s = np.array([0.1, 0.2, 0.3])
    u = X @ theta + 0.5
    tau = 0.5 * s @ theta ** 2
    L = iwp_loss(theta, X, y, loss="squared_error", noise_var=s, intercept=0.5, target_noise_var=0.4)
    assert np.allclose(L, 0.5 * (u - y) ** 2 - tau - 0.2, rtol=1e-14)
    g = iwp_gradient(theta, X, y, loss="squared_error", noise_var=s, intercept=0.5)
    assert np.allclose(g[:, :-1], (u - y)[:, None] * X - s * theta, rtol=1e-14)
    assert np.allclose(g[:, -1], u - y, rtol=1e-14)


@pytest.mark.parametrize("loss", ["exponential", "quadratic", "logistic", "squared_error"])
def test_zero_noise_public_labels_is_the_plain_loss_exactly(loss):
    theta, X, y = _data(loss, n=50)
    kw = dict(loss=loss, intercept=0.3)
    assert np.array_equal(iwp_gradient(theta, X, y, noise_var=0.0, **kw),
                          iwp_gradient(theta, X, y, noise_var=0.8, correction="none", **kw))
    assert np.array_equal(iwp_loss(theta, X, y, noise_var=0.0, **kw),
                          iwp_loss(theta, X, y, noise_var=0.8, correction="none", **kw))


def test_label_tilde():
    assert label_tilde(None) == 1.0
    s = 1 / (1 + math.exp(-0.7))
    assert label_tilde(0.7) == pytest.approx(s / (2 * s - 1), rel=1e-14)


# ---------------------------------------------------------------------------------------------
# Monte Carlo: simulate many releases of ONE clean example and average the per-release gradient.
# Bound: |mean - clean| <= 4 * SE per coordinate, SE = sd / sqrt(n) estimated from the same draws
# (a false failure has probability ~6e-5 per coordinate under normality; seeds are fixed anyway).
# ---------------------------------------------------------------------------------------------

N_RELEASES = 100_000


def _releases(x, y, noise_var, epsilon_y, n, seed, target_noise_var=0.0, regression=False):
    rng = np.random.default_rng(seed)
    s = np.broadcast_to(np.asarray(noise_var, float), x.shape)
    Xt = x + rng.normal(size=(n, x.size)) * np.sqrt(s)
    if regression:
        yt = y + rng.normal(size=n) * math.sqrt(target_noise_var)
    elif epsilon_y is None:
        yt = np.full(n, y)
    else:
        keep = rng.random(n) < 1 / (1 + math.exp(-epsilon_y))
        yt = np.where(keep, y, -y)
    return Xt, yt


MC_CASES = [
    # loss, theta, x, y, noise_var, epsilon_y, intercept, extra
    ("exponential", [0.4, -0.3, 0.2], [0.5, -0.3, 0.8], 1.0, [0.8, 0.5, 1.0], 1.0, None, {}),
    ("exponential", [0.3, 0.5], [-0.4, 0.9], -1.0, 1.0, None, 0.2, {}),
    ("quadratic", [0.6, -0.8, 0.3], [0.5, 0.2, -0.7], -1.0, 1.5, 0.5, 0.1, {}),
    ("squared_error", [0.6, -0.8, 0.3], [0.5, 0.2, -0.7], 0.9, [2.0, 1.0, 0.5], None, -0.3,
     {"target_noise_var": 4.0}),
    ("logistic", [0.5, -1.0], [1.0, 0.3], 1.0, [1.0, 2.0], None, None, {"truncation": 2}),
    ("logistic", [0.8, 0.4], [0.2, -0.6], -1.0, 0.5, 1.5, 0.3, {"truncation": 3}),
]


def _clean_gradient(loss, theta, x, y, intercept):
    return iwp_gradient(theta, x[None, :], np.array([y]), loss=loss, noise_var=0.0,
                        intercept=intercept, correction="none")[0]


@pytest.mark.parametrize("case", range(len(MC_CASES)))
def test_monte_carlo_unbiasedness(case):
    loss, theta, x, y, noise_var, eps, intercept, extra = MC_CASES[case]
    theta, x = np.array(theta), np.array(x)
    Xt, yt = _releases(x, y, noise_var, eps, N_RELEASES, seed=100 + case,
                       target_noise_var=extra.get("target_noise_var", 0.0),
                       regression=loss == "squared_error")
    kw = dict(loss=loss, noise_var=noise_var, epsilon_y=eps, intercept=intercept, **extra)
    clean = _clean_gradient(loss, theta, x, y, intercept)
    g = iwp_gradient(theta, Xt, yt, **kw)
    se = g.std(axis=0, ddof=1) / math.sqrt(N_RELEASES)
    target = clean
    if loss == "logistic":
        # the truncated estimator is biased by a known amount (labels add none: B^-1 is exact)
        bias = logistic_gradient_truncation_bias(theta, x, y, noise_var, extra["truncation"],
                                                 intercept=intercept)
        assert np.all(np.abs(bias) < 0.05)
        target = clean + bias
    assert np.all(np.abs(g.mean(axis=0) - target) <= 4 * se), (g.mean(axis=0), target, se)
    if case == 4:
        # here the truncation bias is ~11 SE: the bias formula is what makes the test pass
        assert np.max(np.abs(g.mean(axis=0) - clean) / se) > 6
    if loss != "squared_error":   # (the naive regression gradient is biased only by -s*theta... below)
        naive = iwp_gradient(theta, Xt, yt, correction="none", **kw)
        naive_se = naive.std(axis=0, ddof=1) / math.sqrt(N_RELEASES)
        assert np.max(np.abs(naive.mean(axis=0) - clean) / naive_se) > 20


def test_monte_carlo_naive_regression_is_biased_by_s_theta():
    # E[(u~ - y~) x~] = (u - y) x + s * theta: the naive gradient's bias is exactly s*theta
    loss, theta, x, y, noise_var, eps, intercept, extra = MC_CASES[3]
    theta, x = np.array(theta), np.array(x)
    Xt, yt = _releases(x, y, noise_var, None, N_RELEASES, seed=7, target_noise_var=4.0,
                       regression=True)
    naive = iwp_gradient(theta, Xt, yt, loss=loss, noise_var=noise_var, intercept=intercept,
                         correction="none")
    se = naive.std(axis=0, ddof=1) / math.sqrt(N_RELEASES)
    shift = np.append(np.asarray(noise_var) * theta, 0.0)
    clean = _clean_gradient(loss, theta, x, y, intercept)
    assert np.all(np.abs(naive.mean(axis=0) - clean - shift) <= 4 * se)
    assert np.max(np.abs(naive.mean(axis=0) - clean)[:-1] / se[:-1]) > 20


@pytest.mark.slow
@pytest.mark.parametrize("case", range(len(MC_CASES)))
def test_monte_carlo_unbiasedness_large(case):
    """4e6 releases per case: SE 6x smaller than the default test (same 4-SE bound)."""
    loss, theta, x, y, noise_var, eps, intercept, extra = MC_CASES[case]
    theta, x = np.array(theta), np.array(x)
    kw = dict(loss=loss, noise_var=noise_var, epsilon_y=eps, intercept=intercept, **extra)
    target = _clean_gradient(loss, theta, x, y, intercept)
    if loss == "logistic":
        target = target + logistic_gradient_truncation_bias(theta, x, y, noise_var, extra["truncation"],
                                                            intercept=intercept)
    total, total_sq, n = 0.0, 0.0, 0
    for block in range(40):
        Xt, yt = _releases(x, y, noise_var, eps, N_RELEASES, seed=1000 * case + block,
                           target_noise_var=extra.get("target_noise_var", 0.0),
                           regression=loss == "squared_error")
        g = iwp_gradient(theta, Xt, yt, **kw)
        total = total + g.sum(axis=0)
        total_sq = total_sq + (g * g).sum(axis=0)
        n += g.shape[0]
    mean = total / n
    se = np.sqrt((total_sq / n - mean ** 2) / n)
    assert np.all(np.abs(mean - target) <= 4 * se), (mean, target, se)


@pytest.mark.parametrize("loss", ["exponential", "quadratic", "squared_error"])
def test_monte_carlo_loss_is_unbiased(loss):
    theta, x, y, noise_var = np.array([0.4, -0.3]), np.array([0.5, -0.8]), 1.0, [0.6, 1.2]
    eps = 1.2 if loss != "squared_error" else None
    Xt, yt = _releases(x, y, noise_var, eps, N_RELEASES, seed=11, target_noise_var=0.5,
                       regression=loss == "squared_error")
    extra = {"target_noise_var": 0.5} if loss == "squared_error" else {}
    L = iwp_loss(theta, Xt, yt, loss=loss, noise_var=noise_var, epsilon_y=eps, **extra)
    clean = iwp_loss(theta, x[None], np.array([y]), loss=loss, noise_var=0.0, correction="none")[0]
    assert abs(L.mean() - clean) <= 4 * L.std(ddof=1) / math.sqrt(N_RELEASES)


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

GOOD = dict(theta=np.array([0.1, 0.2]), X=np.ones((3, 2)), y=np.array([1, -1, 1]))


@pytest.mark.parametrize("change,match", [
    (dict(loss="hinge"), "choose one of"),
    (dict(truncation=-1), "truncation"),
    (dict(noise_var=-0.1), "noise_var"),
    (dict(noise_var=[0.1, 0.2, 0.3]), "noise_var has 3 entries"),
    (dict(epsilon_y=0.0), "epsilon_y"),
    (dict(y=np.array([1, 0, 1])), r"y\[1\] = 0.0.*-1 or \+1"),
    (dict(y=np.array([1, -1])), "y has 2 labels but X has 3 rows"),
    (dict(theta=np.array([0.1, 0.2, 0.3])), "theta has 3 coefficients but X has 2 columns"),
    (dict(X=np.ones(2)), "2-D"),
    (dict(X=np.array([["a", "b"]] * 3)), "dtype"),
    (dict(X=np.array([[1.0, np.nan]] * 3)), "non-finite"),
    (dict(correction="bias"), "correction"),
    (dict(intercept="0"), "intercept"),
    (dict(target_noise_var=1.0), "target_noise_var"),
])
def test_bad_input_is_rejected_with_a_clear_error(change, match):
    args = dict(GOOD, loss="logistic", noise_var=0.1)
    args.update(change)
    theta, X, y = args.pop("theta"), args.pop("X"), args.pop("y")
    with pytest.raises(InvalidInputError, match=match):
        iwp_gradient(theta, X, y, **args)
    with pytest.raises(InvalidInputError, match=match):
        iwp_loss(theta, X, y, **args)


def test_regression_rejects_epsilon_y_and_negative_target_noise():
    theta, X = GOOD["theta"], GOOD["X"]
    with pytest.raises(InvalidInputError, match="target_noise_var"):
        iwp_loss(theta, X, np.zeros(3), loss="squared_error", noise_var=0.1, epsilon_y=1.0)
    with pytest.raises(InvalidInputError, match="target_noise_var"):
        iwp_loss(theta, X, np.zeros(3), loss="squared_error", noise_var=0.1, target_noise_var=-1.0)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int64])
def test_class_indices_lookup_table_agrees_with_the_search(dtype):
    # integer labels of a small span go through a lookup table; its codes are the binary
    # search's (classes in any order, negative ones, the dtype's extremes) and a value between
    # the classes that is none of them still names its row
    from iwpfast.estimates import _small_integer_codes, class_indices
    info = np.iinfo(dtype)
    rng = np.random.default_rng(7)
    for classes in ([3, 0, 1], [int(info.max), int(info.min), int(info.min) + 1], [5, 2, 9, 7]):
        labels = rng.choice(np.array(classes, dtype=dtype), 5000)
        lookup = {c: i for i, c in enumerate(classes)}
        expected = [lookup[v] for v in labels.tolist()]
        np.testing.assert_array_equal(class_indices(labels, classes)[0], expected)
        table = _small_integer_codes(labels, classes)
        if max(classes) - min(classes) >= 1 << 16:     # int64's extremes: the search's path
            assert table is None
        else:
            np.testing.assert_array_equal(table, expected)
    labels = np.array([5, 2, 8, 9], dtype=dtype)
    assert _small_integer_codes(labels, [5, 2, 9, 7]) is None
    with pytest.raises(InvalidInputError, match=r"y\[2\] = 8 is not one of the classes"):
        class_indices(labels, [5, 2, 9, 7])
    assert _small_integer_codes(np.array([0, 1]), [0, 1 << 20]) is None      # span too large
    assert _small_integer_codes(np.array([0.0, 1.0]), [0, 1]) is None        # not integers
