"""The learner on a discrete Laplace release: the kernel's Laplace law (LAW_LAPLACE, exponential
loss) against the NumPy twin, the quadratic loss as the Gaussian formula with the exact variance,
the variance cap that keeps theta in the finite-variance region, and the unbiasedness of one
kernel update by Monte Carlo (4-SE bounds, fixed seeds).  CI reruns this file with JIT off.
"""
import dataclasses
import math

import numpy as np
import pytest

from iwpfast._kernels import abi
from iwpfast.estimates import iwp_gradient
from iwpfast.exceptions import InvalidInputError
from iwpfast.laplace import DiscreteLaplace
from iwpfast.sgd import engine, reference
from iwpfast.sgd.engine import _pack_config
from iwpfast.sgd.state import HeadConfig, HeadState

LAW = DiscreteLaplace([0.375, 0.5, 0.3], [2.0**-19, 2.0**-18, 2.0**-19])


def laplace_config(**overrides):
    values = dict(loss="exponential", mode="iwp", n_features=3, noise_var=LAW.variance,
                  noise_law=LAW, label_keep_prob=0.88, learning_rate=0.05, batch_size=64,
                  variance_cap=LAW.default_variance_cap(), fit_intercept=True)
    values.update(overrides)
    return HeadConfig(**values)


def data(n, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(3, n)) * 0.6).astype(dtype)
    y = np.where(rng.random(n) < 0.6, 1.0, -1.0)
    return X, y


def run(cfg, X, y, runner, finisher, chunk=None):
    state = HeadState.new(cfg)
    n = y.shape[0]
    step = chunk or n
    for start in range(0, n, step):
        runner(cfg, state, X[:, start:start + step], y[start:start + step])
    finisher(cfg, state)
    return state


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_matches_the_twin_and_ignores_the_chunking(dtype):
    cfg = laplace_config()
    X, y = data(5000, 1, dtype)
    kernel = run(cfg, X, y, engine.run_chunk, engine.finish)
    twin = run(cfg, X, y, reference.reference_run_chunk, reference.reference_finish)
    # the twin takes kappa_j from iwpfast.laplace (np.sinh, np.log per coordinate), the kernel
    # from a series and one log per batch: equal to rounding, not bit for bit
    np.testing.assert_allclose(kernel.theta, twin.theta, rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(kernel.intercept, twin.intercept, rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(kernel.telemetry, twin.telemetry, rtol=1e-9)
    assert np.any(kernel.theta != 0)
    # chunking never changes the result (carried rows), bit for bit
    chunked = run(cfg, X, y, engine.run_chunk, engine.finish, chunk=7)
    np.testing.assert_array_equal(chunked.theta, kernel.theta)


def test_the_law_code_changes_the_update():
    # a Laplace head is not the Gaussian head with the same variances (the test can fail)
    cfg = laplace_config(learning_rate=0.5)
    gaussian = dataclasses.replace(cfg, noise_law=None)
    X, y = data(3000, 2)
    a = run(cfg, X, y, engine.run_chunk, engine.finish)
    b = run(gaussian, X, y, engine.run_chunk, engine.finish)
    assert not np.array_equal(a.theta, b.theta)
    assert _pack_config(cfg)[1][abi.I_NOISE_LAW] == abi.LAW_LAPLACE
    assert _pack_config(cfg)[2].shape == (9,)
    assert _pack_config(gaussian)[1][abi.I_NOISE_LAW] == abi.LAW_GAUSSIAN


def test_quadratic_is_the_gaussian_formula_with_the_exact_variance_bit_for_bit():
    cfg = laplace_config(loss="quadratic", variance_cap=float("inf"))
    gaussian = dataclasses.replace(cfg, noise_law=None)
    X, y = data(3000, 3)
    a = run(cfg, X, y, engine.run_chunk, engine.finish)
    b = run(gaussian, X, y, engine.run_chunk, engine.finish)
    np.testing.assert_array_equal(a.theta, b.theta)
    assert _pack_config(cfg)[1][abi.I_NOISE_LAW] == abi.LAW_GAUSSIAN


def test_the_cap_keeps_theta_in_the_region_and_is_counted():
    cap = LAW.default_variance_cap()
    cfg = laplace_config(learning_rate=5.0, label_keep_prob=None, fit_intercept=False)
    X, y = data(4000, 4)
    X[:] = np.abs(X) * 3      # every score pushes theta the same way: the cap must bind
    y[:] = 1.0
    state = run(cfg, X, y, engine.run_chunk, engine.finish)
    energy = float(np.dot(LAW.variance, state.theta**2))
    assert energy <= cap * (1 + 1e-12)
    assert state.telemetry[abi.T_CAP] > 0
    assert np.all(np.abs(state.theta) < LAW.variance_limit)
    twin = run(cfg, X, y, reference.reference_run_chunk, reference.reference_finish)
    np.testing.assert_allclose(state.theta, twin.theta, rtol=1e-11)


def test_refusals_name_the_fix():
    X, y = data(10, 5)
    with pytest.raises(InvalidInputError, match="variance cap below"):
        engine.run_chunk(laplace_config(variance_cap=float("inf")), HeadState.new(laplace_config()),
                         X, y)
    with pytest.raises(InvalidInputError, match="loss='exponential' or loss='quadratic'"):
        cfg = laplace_config(loss="logistic")
        reference.reference_run_chunk(cfg, HeadState.new(cfg), X, y)
    with pytest.raises(InvalidInputError, match="noise_law.variance"):
        cfg = laplace_config(noise_var=LAW.variance * 2)
        engine.run_chunk(cfg, HeadState.new(cfg), X, y)
    # naive and clean heads on a Laplace release need no cap
    naive = laplace_config(mode="naive", variance_cap=float("inf"))
    engine.run_chunk(naive, HeadState.new(naive), X, y)


def test_one_vs_rest_heads_match_the_twin():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(3, 2000)) * 0.5
    y = rng.integers(0, 3, 2000).astype(np.float64)
    cfgs = [laplace_config(label_class=c, label_keep_prob=None,
                           label_weights=(1.4, -0.4, 1.2, -0.2)) for c in range(3)]
    kernel = [HeadState.new(c) for c in cfgs]
    twin = [HeadState.new(c) for c in cfgs]
    engine.run_chunk_heads(cfgs, kernel, X, y)
    engine.finish_heads(cfgs, kernel)
    reference.reference_run_chunk_heads(cfgs, twin, X, y)
    reference.reference_finish_heads(cfgs, twin)
    for a, b in zip(kernel, twin, strict=True):
        np.testing.assert_allclose(a.theta, b.theta, rtol=1e-11, atol=1e-14)


def test_one_kernel_update_is_unbiased_by_monte_carlo():
    # theta_1 = theta_0 - 0.1 g (no l2, no projection, the cap not reached): g is the mean of m IWP
    # row gradients
    # of fresh releases of one clean example; over R batches its mean is within 4 standard errors
    # (sd over batches / sqrt(R)) of the clean gradient, per coordinate
    law = DiscreteLaplace(0.4, 2.0**-10)
    theta0 = np.array([0.3, -0.5, 0.2])
    x = np.array([0.5, -0.4, 0.9])
    keep = 1 / (1 + math.exp(-2.0))
    cfg = HeadConfig(loss="exponential", mode="iwp", n_features=3, noise_var=law.broadcast(3).variance,
                     noise_law=law, label_keep_prob=keep, learning_rate=0.1, batch_size=256,
                     variance_cap=law.broadcast(3).default_variance_cap())
    rng = np.random.default_rng(2026)
    q = law.one_minus_alpha[0]
    grads = []
    for _ in range(300):
        noise = ((rng.geometric(q, (3, 256)) - rng.geometric(q, (3, 256))) * law.grid[0])
        X = x[:, None] + noise
        y = np.where(rng.random(256) < keep, 1.0, -1.0)
        state = HeadState.new(cfg, theta0=theta0)
        engine.run_chunk(cfg, state, X, y)
        assert state.telemetry[abi.T_CAP] == 0
        grads.append((theta0 - state.theta) / 0.1)
    grads = np.array(grads)
    clean = iwp_gradient(theta0, x[None, :], [1.0], loss="exponential", noise_var=0.0)[0]
    se = grads.std(axis=0, ddof=1) / math.sqrt(grads.shape[0])
    assert np.all(np.abs(grads.mean(axis=0) - clean) <= 4 * se), (grads.mean(axis=0), clean, se)
    # the bound is tight enough to mean something (the noise bias e^{-tau} - 1 here is ~0.03)
    assert se.max() < 0.01
