"""The discrete Laplace law and its exact inverse (iwpfast.laplace, iwp_loss / iwp_gradient with
noise_law=): every identity of docs/math.md "Pure epsilon" checked by exact summation over the
lattice (to rounding), and the gradient's unbiasedness by Monte Carlo (4-SE bounds, fixed seeds).
"""
import math

import numpy as np
import pytest

from iwpfast.estimates import iwp_gradient, iwp_loss
from iwpfast.exceptions import InvalidInputError
from iwpfast.label_noise import keep_probability
from iwpfast.laplace import DiscreteLaplace, compose_inverse, lattice_expectation

# coarse grids (a = e^{-L/b} = 0.37, 0.45, 0.30) keep the lattice small enough to sum exactly
LAW3 = DiscreteLaplace([0.5, 0.4, 0.5], [0.5, 0.32, 0.6])
THETA3 = np.array([0.3, -0.6, 0.2])
X3 = np.array([0.4, -0.7, 0.1])
# two features for the loss and gradient sums (75 x 93 lattice points)
LAW2 = DiscreteLaplace([0.5, 0.4], [0.5, 0.32])
THETA2 = THETA3[:2]
X2 = X3[:2]


def lattice_points(law, theta, tail=1e-17):
    """Every noise vector L * k of the lattice (rows) with its probability (prod of the pmfs)."""
    p = len(theta)
    ks = [law.lattice(j, tail) for j in range(p)]
    grids = np.meshgrid(*ks, indexing="ij")
    points = np.stack([g.ravel() for g in grids], axis=1)
    prob = np.ones(points.shape[0])
    for j in range(p):
        prob *= law.pmf(points[:, j])[j]
    return points * law.grid[None, :], prob


def fsum_rows(prob, values):
    values = np.asarray(values)
    if values.ndim == 1:
        return math.fsum((prob * values).tolist())
    return np.array([math.fsum((prob * values[:, i]).tolist()) for i in range(values.shape[1])])


def test_pmf_variance_and_characteristic_function_by_summation():
    law = DiscreteLaplace([0.5, 0.3], [2.0**-3, 2.0**-2])
    for j in range(2):
        k = law.lattice(j, 1e-20)
        pmf = law.pmf(k)
        assert math.fsum(pmf[j].tolist()) == pytest.approx(1.0, abs=1e-14)
        var = math.fsum((pmf[j] * (k * law.grid[j]) ** 2).tolist())
        assert var == pytest.approx(law.variance[j], rel=1e-13)
        t = np.array([0.1, 1.0, 2.9])
        exact = [math.fsum((pmf[j] * np.cos(tt * k)).tolist()) for tt in t]
        np.testing.assert_allclose(law.characteristic(t)[j], exact, rtol=1e-12)
    # the variance tends to the continuous Laplace's 2 b^2 as the grid shrinks
    fine = DiscreteLaplace(0.5, 2.0**-20)
    assert fine.variance[0] == pytest.approx(0.5, rel=1e-10)


@pytest.mark.parametrize("f", [lambda u: np.exp(-u), lambda u: np.logaddexp(0.0, -u),
                               lambda u: np.sin(u) * u])
def test_composed_second_differences_invert_the_noise_for_any_function(f):
    # E[D_1 D_2 D_3 f(u + theta^T L Z)] = f(u), whatever f (absolutely summable against the law)
    g = compose_inverse(f, LAW3, THETA3)
    for u in (-0.8, 0.0, 1.3):
        assert lattice_expectation(g, u, LAW3, THETA3) == pytest.approx(float(f(u)), rel=1e-11,
                                                                       abs=1e-12)


def test_exponential_closed_form_is_the_composed_second_difference():
    g = compose_inverse(lambda u: np.exp(-u), LAW3, THETA3)
    log_kappa, _ = LAW3.exponential_factor(THETA3)
    a = LAW3.alpha
    direct = (1 + a * a - 2 * a * np.cosh(LAW3.grid * THETA3)) / (1 - a) ** 2
    np.testing.assert_allclose(np.exp(log_kappa), direct, rtol=1e-13)
    for u in (-0.5, 0.7):
        assert float(g(np.array(u))) == pytest.approx(math.exp(-u + log_kappa.sum()), rel=1e-12)
    # continuous limit: kappa -> 1 - b^2 theta^2 as the grid shrinks (with a fixed)
    fine = DiscreteLaplace(0.5, 2.0**-24)
    assert math.exp(fine.exponential_factor(np.array([0.8]))[0][0]) == pytest.approx(
        1 - 0.25 * 0.64, rel=1e-9)


def test_direction_is_the_derivative_of_minus_log_kappa():
    _, direction = LAW3.exponential_factor(THETA3)
    h = 1e-6
    for j in range(3):
        step = np.zeros(3)
        step[j] = h
        numeric = -(LAW3.exponential_factor(THETA3 + step)[0][j]
                    - LAW3.exponential_factor(THETA3 - step)[0][j]) / (2 * h)
        assert direction[j] == pytest.approx(numeric, rel=1e-7)
    # small theta: the Gaussian's s_j theta_j with s_j = Var_j
    small = np.array([1e-4, -2e-4, 3e-4])
    np.testing.assert_allclose(LAW3.exponential_factor(small)[1], LAW3.variance * small, rtol=1e-6)


@pytest.mark.parametrize("loss", ["exponential", "quadratic"])
@pytest.mark.parametrize("epsilon_y", [None, 1.5])
def test_loss_and_gradient_are_exact_in_expectation_by_lattice_summation(loss, epsilon_y):
    noise, prob = lattice_points(LAW2, THETA2)
    assert math.fsum(prob.tolist()) == pytest.approx(1.0, abs=1e-13)
    X = X2[None, :] + noise
    b = 0.2
    for y in (1.0, -1.0):
        clean_loss = iwp_loss(THETA2, X2[None, :], [y], loss=loss, noise_var=0.0, intercept=b)[0]
        clean_grad = iwp_gradient(THETA2, X2[None, :], [y], loss=loss, noise_var=0.0, intercept=b)[0]
        if epsilon_y is None:
            labels = [(y, 1.0)]
        else:
            keep = keep_probability(epsilon_y)
            labels = [(y, keep), (-y, 1.0 - keep)]
        mean_loss, mean_grad = 0.0, np.zeros(3)
        for released, weight in labels:
            ys = np.full(X.shape[0], released)
            mean_loss += weight * fsum_rows(prob, iwp_loss(
                THETA2, X, ys, loss=loss, noise_law=LAW2, epsilon_y=epsilon_y, intercept=b))
            mean_grad += weight * fsum_rows(prob, iwp_gradient(
                THETA2, X, ys, loss=loss, noise_law=LAW2, epsilon_y=epsilon_y, intercept=b))
        assert mean_loss == pytest.approx(clean_loss, rel=1e-10)
        np.testing.assert_allclose(mean_grad, clean_grad, rtol=1e-9, atol=1e-12)


def test_squared_error_is_exact_by_lattice_summation():
    noise, prob = lattice_points(LAW2, THETA2)
    X = X2[None, :] + noise
    target = 0.3
    ys = np.full(X.shape[0], target)
    clean = iwp_gradient(THETA2, X2[None, :], [target], loss="squared_error", noise_var=0.0)[0]
    mean = fsum_rows(prob, iwp_gradient(THETA2, X, ys, loss="squared_error", noise_law=LAW2))
    np.testing.assert_allclose(mean, clean, rtol=1e-10, atol=1e-13)
    clean_loss = iwp_loss(THETA2, X2[None, :], [target], loss="squared_error", noise_var=0.0)[0]
    mean_loss = fsum_rows(prob, iwp_loss(THETA2, X, ys, loss="squared_error", noise_law=LAW2))
    assert mean_loss == pytest.approx(clean_loss, rel=1e-10)


def test_one_vs_rest_heads_are_exact_by_lattice_summation():
    noise, prob = lattice_points(LAW2, THETA2)
    X = X2[None, :] + noise
    thetas = np.stack([THETA2, -THETA2 * 0.5])
    clean = iwp_gradient(thetas, X2[None, :], [1], loss="exponential", noise_var=0.0,
                         classes=2)[0]
    ys = np.full(X.shape[0], 1)
    mean = np.stack([fsum_rows(prob, block) for block in np.moveaxis(
        iwp_gradient(thetas, X, ys, loss="exponential", noise_law=LAW2, classes=2), 1, 0)])
    np.testing.assert_allclose(mean, clean, rtol=1e-10, atol=1e-13)


def test_gradient_rows_are_the_exact_gradient_of_the_loss_rows():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(5, 3))
    y = np.array([1.0, -1.0, 1.0, 1.0, -1.0])
    grad = iwp_gradient(THETA3, X, y, loss="exponential", noise_law=LAW3, epsilon_y=1.0)
    h = 1e-6
    for j in range(3):
        step = np.zeros(3)
        step[j] = h
        numeric = (iwp_loss(THETA3 + step, X, y, loss="exponential", noise_law=LAW3, epsilon_y=1.0)
                   - iwp_loss(THETA3 - step, X, y, loss="exponential", noise_law=LAW3,
                              epsilon_y=1.0)) / (2 * h)
        np.testing.assert_allclose(grad[:, j], numeric, rtol=1e-6, atol=1e-9)


def sample_laplace(rng, law, n):
    """Discrete Laplace by the difference of two geometrics (numpy's, independent of iwpfast)."""
    q = law.one_minus_alpha            # success probability of the geometric counting failures
    g1 = rng.geometric(q, size=(n, q.size)) - 1
    g2 = rng.geometric(q, size=(n, q.size)) - 1
    return (g1 - g2) * law.grid[None, :]


@pytest.mark.parametrize("loss", ["exponential", "quadratic"])
def test_gradient_is_unbiased_by_monte_carlo(loss):
    # a realistic fine grid (a = 1 - 2^-12): the mean of 2*10^5 releases of one example is within
    # 4 standard errors (sample sd / sqrt(n)) of the clean gradient, per coordinate
    law = DiscreteLaplace([0.4, 0.5, 0.3], 2.0**-12)
    rng = np.random.default_rng(2026)
    n = 200_000
    X = X3[None, :] + sample_laplace(rng, law, n)
    keep = keep_probability(2.0)
    y = np.where(rng.random(n) < keep, 1.0, -1.0)
    grads = iwp_gradient(THETA3, X, y, loss=loss, noise_law=law, epsilon_y=2.0, intercept=0.1)
    clean = iwp_gradient(THETA3, X3[None, :], [1.0], loss=loss, noise_var=0.0, intercept=0.1)[0]
    se = grads.std(axis=0, ddof=1) / math.sqrt(n)
    assert np.all(np.abs(grads.mean(axis=0) - clean) <= 4 * se), (grads.mean(axis=0), clean, se)
    # and naive training is biased on the same draws (the test can fail)
    naive = iwp_gradient(THETA3, X, y, loss=loss, noise_var=0.0, intercept=0.1)
    assert np.any(np.abs(naive.mean(axis=0) - clean) > 10 * se)


def test_refusals_name_the_fix():
    X = X3[None, :]
    with pytest.raises(InvalidInputError, match="loss='exponential' or loss='quadratic'"):
        iwp_loss(THETA3, X, [1.0], loss="logistic", noise_law=LAW3)
    with pytest.raises(InvalidInputError, match="not both"):
        iwp_loss(THETA3, X, [1.0], loss="exponential", noise_law=LAW3, noise_var=0.1)
    with pytest.raises(InvalidInputError, match="pass noise_var"):
        iwp_loss(THETA3, X, [1.0], loss="exponential")
    with pytest.raises(InvalidInputError, match=r"theta\[1\].*1/b_j"):
        iwp_loss(np.array([0.1, 2.6, 0.0]), X, [1.0], loss="exponential", noise_law=LAW3)
    with pytest.raises(InvalidInputError, match="3 features but the data has 2"):
        iwp_loss(THETA3[:2], X[:, :2], [1.0], loss="exponential", noise_law=LAW3)
    with pytest.raises(InvalidInputError, match="scale"):
        DiscreteLaplace(-1.0, 0.1)


def test_a_feature_without_noise_is_the_identity():
    # scale 0 (a public column): a = 0, Var = 0, kappa = 1, and the composition still inverts
    law = DiscreteLaplace([0.5, 0.0], [0.5, 0.5])
    assert law.variance[1] == 0.0 and law.alpha[1] == 0.0
    log_kappa, direction = law.exponential_factor(np.array([0.3, 7.0]))
    assert log_kappa[1] == 0.0 and direction[1] == 0.0
    assert law.energy_limit == pytest.approx(float(law.variance[0] / (4 * 0.25)))
    f = lambda u: np.exp(-u)      # noqa: E731
    g = compose_inverse(f, law, np.array([0.3, 7.0]))
    assert lattice_expectation(g, 0.2, law, np.array([0.3, 7.0])) == pytest.approx(math.exp(-0.2),
                                                                                 rel=1e-11)
