import numpy as np
import pytest

from iwpfast.exceptions import InvalidInputError
from iwpfast.solvers import (
    accuracy,
    gradient,
    noisy_exponential_objective,
    objective,
    risk,
    solve,
    solve_noisy_exponential,
)


@pytest.mark.parametrize("loss", ["exponential", "logistic", "quadratic", "squared_error"])
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_gradient_vanishes_at_solution(loss, fit_intercept, linear_data):
    X, y = linear_data(regression=loss == "squared_error", intercept=0.3)
    sol = solve(X, y, loss=loss, alpha=0.5, fit_intercept=fit_intercept)
    assert sol.converged and sol.n_iter < 30
    g, gb = gradient(sol.theta, X, y, loss, 0.5, sol.intercept)
    assert np.linalg.norm(g) < 1e-9 and (abs(gb) < 1e-9 or not fit_intercept)
    assert sol.objective == pytest.approx(objective(sol.theta, X, y, loss, 0.5, sol.intercept))
    # it is a minimum: random perturbations increase the (strongly convex) objective
    rng = np.random.default_rng(1)
    for _ in range(5):
        d = 1e-3 * rng.standard_normal(3)
        assert objective(sol.theta + d, X, y, loss, 0.5, sol.intercept) > sol.objective


def test_gradient_matches_finite_differences(linear_data):
    X, y = linear_data()
    theta = np.array([0.3, -0.2, 0.5])
    for loss in ("exponential", "logistic", "quadratic"):
        g, gb = gradient(theta, X, y, loss, 0.7, 0.1)
        eps = 1e-6
        fd = [(objective(theta + eps * e, X, y, loss, 0.7, 0.1)
               - objective(theta - eps * e, X, y, loss, 0.7, 0.1)) / (2 * eps) for e in np.eye(3)]
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
        fdb = (objective(theta, X, y, loss, 0.7, 0.1 + eps)
               - objective(theta, X, y, loss, 0.7, 0.1 - eps)) / (2 * eps)
        assert gb == pytest.approx(fdb, rel=1e-6, abs=1e-8)


def test_logistic_matches_sklearn(linear_data):
    lm = pytest.importorskip("sklearn.linear_model")
    X, y = linear_data(n=800)
    alpha = 0.05
    # sklearn minimizes C * sum log-loss + |w|^2 / 2, i.e. our objective with alpha = 1 / (C n)
    clf = lm.LogisticRegression(C=1.0 / (alpha * len(y)), tol=1e-12, max_iter=10000)
    clf.fit(X, y)
    sol = solve(X, y, loss="logistic", alpha=alpha, fit_intercept=True)
    np.testing.assert_allclose(sol.theta, clf.coef_[0], rtol=1e-5, atol=1e-6)
    assert sol.intercept == pytest.approx(clf.intercept_[0], abs=1e-5)


def test_squared_error_matches_ridge(linear_data):
    lm = pytest.importorskip("sklearn.linear_model")
    X, y = linear_data(n=500, regression=True, intercept=0.3)
    alpha = 0.2
    # Ridge minimizes |y - Xw - b|^2 + a |w|^2, i.e. ours times 2n with a = alpha * n
    r = lm.Ridge(alpha=alpha * len(y)).fit(X, y)
    sol = solve(X, y, loss="squared_error", alpha=alpha, fit_intercept=True)
    np.testing.assert_allclose(sol.theta, r.coef_, rtol=1e-8, atol=1e-10)
    assert sol.intercept == pytest.approx(r.intercept_, abs=1e-9)


def test_exponential_matches_scipy(linear_data):
    opt = pytest.importorskip("scipy.optimize")
    X, y = linear_data(n=400)
    alpha = 5.0
    sol = solve(X, y, loss="exponential", alpha=alpha)
    ref = opt.minimize(lambda t: objective(t, X, y, "exponential", alpha), np.zeros(3),
                       jac=lambda t: gradient(t, X, y, "exponential", alpha)[0],
                       method="BFGS", options={"gtol": 1e-12})
    np.testing.assert_allclose(sol.theta, ref.x, atol=1e-7)


def test_risk_and_accuracy():
    X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    y = np.array([1.0, -1.0, 1.0])
    theta = np.array([2.0, 1.0])
    margins = y * (X @ theta)                  # 2, -1, -2
    assert risk(theta, X, y, "exponential") == pytest.approx(np.mean(np.exp(-margins)))
    assert risk(theta, X, y, "quadratic") == pytest.approx(np.mean(0.5 * (margins - 1) ** 2))
    assert risk(theta, X, y, "logistic") == pytest.approx(np.mean(np.log1p(np.exp(-margins))))
    assert accuracy(theta, X, y) == pytest.approx(1 / 3)
    assert accuracy(theta, X, y, b=-1.5) == pytest.approx(2 / 3)  # margins with b: 0.5, 0.5, -3.5


def test_logistic_risk_is_stable_for_large_margins():
    X = np.array([[1.0], [1.0]])
    y = np.array([1.0, -1.0])
    assert risk([800.0], X, y, "logistic") == pytest.approx(400.0)


def test_noisy_exponential_objective_matches_monte_carlo(linear_data):
    # E exp(-y~ theta^T x~) over feature noise N(0, s) and label flips (keep prob S), per row.
    rng = np.random.default_rng(5)
    X, y = linear_data(n=5, p=2)
    theta = np.array([0.4, -0.3])
    s, S = np.array([0.5, 0.8]), 0.8
    draws = 400000
    total = 0.0
    for i in range(5):
        xt = X[i] + rng.standard_normal((draws, 2)) * np.sqrt(s)
        yt = np.where(rng.uniform(size=draws) < S, y[i], -y[i])
        total += np.mean(np.exp(-yt * (xt @ theta)))
    mc = total / 5
    value, _, _ = noisy_exponential_objective(theta, X, y, noise_var=s, keep_prob=S, alpha=0.0)
    # Monte Carlo sd of exp(-m) here is < 1.5 per draw: se < 1.5/sqrt(2e6) = 1e-3; 5 se margin
    assert value == pytest.approx(mc, abs=5e-3)


def test_noisy_exponential_optimum(linear_data):
    X, y = linear_data(n=500, p=2)
    clean = solve(X, y, loss="exponential", alpha=5.0)
    same = solve_noisy_exponential(X, y, noise_var=0.0, keep_prob=None, alpha=5.0)
    np.testing.assert_allclose(same.theta, clean.theta, atol=1e-9)
    noisy = solve_noisy_exponential(X, y, noise_var=4.0, keep_prob=0.73, alpha=5.0)
    _, g, _ = noisy_exponential_objective(noisy.theta, X, y, noise_var=4.0, keep_prob=0.73, alpha=5.0)
    assert np.linalg.norm(g) < 1e-9
    # noise shrinks the optimum towards 0 (the exp(sigma^2|theta|^2/2) factor and the flips)
    assert np.linalg.norm(noisy.theta) < 0.5 * np.linalg.norm(clean.theta)


def test_solver_errors_name_the_problem(linear_data):
    X, y = linear_data(n=10)
    with pytest.raises(InvalidInputError, match="loss"):
        solve(X, y, loss="hinge", alpha=1.0)
    with pytest.raises(InvalidInputError, match=r"y\[0\]"):
        solve(X, np.zeros(10), loss="logistic", alpha=1.0)
    with pytest.raises(InvalidInputError, match="rows"):
        solve(X, y[:5], loss="logistic", alpha=1.0)
