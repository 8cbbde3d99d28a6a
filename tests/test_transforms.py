"""Analysis tools (iwpfast.transforms)."""
import itertools
import math

import numpy as np
import pytest

from iwpfast import transforms as T
from iwpfast.exceptions import InvalidInputError
from iwpfast.losses import derivative, series_F


def test_weierstrass_is_exact_on_polynomials_and_exponentials():
    v = np.array([-1.0, 0.0, 2.5])
    assert np.allclose(T.weierstrass(lambda w: w ** 2, v, 0.7), v ** 2 + 0.7, rtol=1e-13)
    assert np.allclose(T.weierstrass(lambda w: w ** 4, v, 0.7), v ** 4 + 6 * v ** 2 * 0.7 + 3 * 0.49,
                       rtol=1e-12)
    assert np.allclose(T.weierstrass(lambda w: np.exp(-w), v, 1.3), np.exp(0.65 - v), rtol=1e-12)


@pytest.mark.parametrize("loss", ["exponential", "quadratic"])
def test_inverse_weierstrass_closed_forms_invert_the_forward_transform(loss):
    v = np.linspace(-2, 2, 7)
    var = 0.9
    back = T.weierstrass(lambda w: T.inverse_weierstrass(loss, w, var), v, var)
    assert np.allclose(back, derivative(loss, 0, v), rtol=1e-12)


def test_inverse_weierstrass_series_matches_closed_form():
    v = np.linspace(-1, 1, 5)
    series = T.inverse_weierstrass_series(lambda n, w: derivative("exponential", n, w), v, 1.2, 40)
    assert np.allclose(series, T.inverse_weierstrass("exponential", v, 1.2), rtol=1e-14)


def test_bernoulli_and_inverse_round_trip():
    g = lambda y: np.where(y > 0, 3.0, -1.5)
    y = np.array([1.0, -1.0])
    eps = 0.8
    s = 1 / (1 + math.exp(-eps))
    assert np.allclose(T.bernoulli(g, y, eps), s * g(y) + (1 - s) * g(-y))
    assert np.allclose(T.bernoulli(lambda t: T.inverse_bernoulli(g, t, eps), y, eps), g(y), rtol=1e-14)
    assert np.array_equal(T.inverse_bernoulli(g, y, None), g(y))


def _dataset(seed=0, n=200, p=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) * 0.5
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return np.array([0.8, -0.4, 0.3]), X, y


def test_exponential_noisy_risk_is_the_paper_example_and_matches_theorem_3_1():
    theta, X, y = _dataset()
    sigma2, eps = 0.6, 1.1
    s = 1 / (1 + math.exp(-eps))
    expected = math.exp(sigma2 * theta @ theta / 2) * (
        s * np.mean(np.exp(-y * (X @ theta))) + (1 - s) * np.mean(np.exp(y * (X @ theta))))
    assert T.exponential_noisy_risk(theta, X, y, sigma2, eps) == pytest.approx(expected, rel=1e-14)
    bias = T.noisy_risk_bias("exponential", theta, X, y, sigma2, eps)
    assert bias.noisy_risk == pytest.approx(expected, rel=1e-13)
    assert bias.total == pytest.approx(bias.label_noise + bias.feature_noise + bias.interaction, rel=1e-12)


@pytest.mark.parametrize("loss", ["exponential", "quadratic", "logistic"])
def test_noisy_risk_matches_monte_carlo(loss):
    theta, X, y = _dataset(n=40)
    noise_var, eps = np.array([0.5, 1.0, 0.2]), 1.0
    bias = T.noisy_risk_bias(loss, theta, X, y, noise_var, eps)
    rng = np.random.default_rng(3)
    reps = 5000      # 5000 releases of the 40 rows: SE of the mean loss from the draws themselves
    Xt = X[None] + rng.normal(size=(reps, *X.shape)) * np.sqrt(noise_var)
    yt = np.where(rng.random((reps, len(y))) < 1 / (1 + math.exp(-eps)), y, -y)
    per_release = derivative(loss, 0, yt * (Xt @ theta)).mean(axis=1)
    se = per_release.std(ddof=1) / math.sqrt(reps)
    assert abs(per_release.mean() - bias.noisy_risk) <= 4 * se
    # and the noise really shifts the risk (otherwise the test above is vacuous)
    assert abs(bias.total) > 10 * se


def test_quadratic_bias_closed_form():
    # W_{2 tau}[(v-1)^2/2] = (v-1)^2/2 + tau: the feature-noise term is S * tau exactly
    theta, X, y = _dataset()
    bias = T.noisy_risk_bias("quadratic", theta, X, y, 0.4, 2.0)
    s = 1 / (1 + math.exp(-2.0))
    assert bias.feature_noise == pytest.approx(s * 0.2 * theta @ theta, rel=1e-13)
    assert bias.interaction == pytest.approx((1 - s) * 0.2 * theta @ theta, rel=1e-13)


def test_logistic_sd_at_t5_reproduces_design():
    # docs/design.md section 3: sd 1.8 / 2.0 / 2.3 / 3.5 / 78 for K = 0/1/2/3/5 at t = 5 (margin v = 0)
    sd = {K: float(np.sqrt(T.logistic_estimator_variance(5.0, K))) for K in range(6)}
    for K, quoted in {0: 1.8, 1: 2.0, 2: 2.3, 3: 3.5, 5: 78.0}.items():
        assert sd[K] == pytest.approx(quoted, rel=0.03), (K, sd[K])
    # the exact values from the quadrature, to check nothing drifts
    assert sd[0] == pytest.approx(1.77397, rel=1e-4)
    assert sd[4] == pytest.approx(12.2635, rel=1e-3)


def test_logistic_sd_k0_closed_form_limit():
    # K = 0 at v = 0: F_0 = softplus(-W), W ~ N(0, 2t); for large t it behaves like relu(W) whose sd
    # is sqrt(2t (1/2 - 1/(2 pi))); at t = 50 softplus and relu differ by < 1e-2 in sd
    sd = float(np.sqrt(T.logistic_estimator_variance(50.0, 0)))
    assert sd == pytest.approx(math.sqrt(100 * (0.5 - 1 / (2 * math.pi))), rel=0.01)


def test_truncation_bias_falls_with_K_and_matches_monte_carlo():
    for t in (0.5, 2.0, 5.0, 10.0):
        bias = [abs(float(T.logistic_truncation_bias(t, K, 0.3))) for K in range(5)]
        assert all(b1 < b0 for b0, b1 in itertools.pairwise(bias)), (t, bias)
    rng = np.random.default_rng(5)
    t, K, v = 2.0, 1, 0.7
    w = v + math.sqrt(2 * t) * rng.normal(size=400_000)
    F = series_F("logistic", 0, w, t, K)
    se = F.std(ddof=1) / math.sqrt(w.size)
    assert abs(F.mean() - derivative("logistic", 0, v) - float(T.logistic_truncation_bias(t, K, v))) <= 4 * se
    assert float(T.logistic_estimator_variance(t, K, v)) == pytest.approx(F.var(), rel=0.02)


def test_grid_quadrature_agrees_with_gauss_hermite_where_both_are_accurate():
    v = np.array([-1.0, 0.0, 1.5])
    gh = T.weierstrass(lambda w: derivative("logistic", 0, w), v, 3.0)
    mean, _ = T.truncated_series_moments(1.5, 0, v)
    assert np.allclose(gh, mean, rtol=1e-9)


def test_choose_truncation_by_mse():
    rows = T.truncation_tradeoff(5.0, 128)
    assert [r["truncation"] for r in rows] == list(range(6))
    best = T.choose_truncation(5.0, 128)
    assert best == min(rows, key=lambda r: r["mse"])["truncation"] == 2
    # more rows per batch -> less variance per update -> a larger K can pay off (never smaller)
    ks = [T.choose_truncation(5.0, b) for b in (1, 10, 128, 10_000, 10**6)]
    assert ks == sorted(ks) and ks[0] == 0 and ks[-1] >= 3
    with pytest.raises(InvalidInputError, match="batch_size"):
        T.choose_truncation(5.0, 0)
