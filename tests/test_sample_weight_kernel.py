"""Sample weights in the SGD update (HeadConfig.weighted, run_chunk(..., sample_weight=)).

The weighted risk is R_w(theta) = (1/n) sum_i s_i l(y_i, theta^T x_i) + alpha/2 |theta|^2 with
public weights s_i >= 0; the update multiplies row i's IWP gradient by s_i and divides by the
batch size m (docs/math.md "Sample weights").  Tested here: weights of 1 give the bits of no
weights, the kernel equals its NumPy twin with random weights (also across chunks, carry and the
staged many-column path, and for one-vs-rest heads), the gradient is unbiased for the weighted
clean gradient (Monte Carlo over releases), and bad weights are refused naming the row.
Sizes are small so that CI can run this with NUMBA_DISABLE_JIT=1.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from iwpfast.exceptions import InvalidInputError
from iwpfast.sgd.engine import finish, finish_heads, run_chunk, run_chunk_heads
from iwpfast.sgd.reference import (
    reference_finish,
    reference_finish_heads,
    reference_run_chunk,
    reference_run_chunk_heads,
)
from iwpfast.sgd.state import HeadConfig, HeadState
from tests.conftest import make_head_config, run_in_chunks

pytestmark = pytest.mark.kernels

P = 3


def _data(n=601, p=P, loss="exponential", seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(p, n)) + 0.3 * rng.standard_normal((p, n))
    if loss == "squared_error":
        y = X.T @ np.linspace(0.5, -0.5, p) + 0.1 * rng.standard_normal(n)
    else:
        y = np.where(X[0] + 0.5 * X[1] + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    weights = rng.exponential(1.0, n)
    weights[rng.random(n) < 0.1] = 0.0                # zero weights are allowed
    return X.astype(dtype), y, weights


def _config(**overrides) -> HeadConfig:
    """conftest's head config, averaged from the start, with private labels (S = 0.85)."""
    return make_head_config(**{"average_start": 0, "label_keep_prob": 0.85, **overrides})


def _run(run, fin, cfg, X, y, weights, chunk):
    return run_in_chunks(run, fin, cfg, X, y, chunk, sample_weight=weights)


def _assert_same_bits(a: HeadState, b: HeadState):
    for name in ("theta", "theta_avg", "intercept", "intercept_avg", "telemetry", "counters"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


CASES = [("exponential", {}), ("quadratic", dict(radius=0.5)),
         ("logistic", dict(truncation=3, variance_cap=0.05)),
         ("squared_error", dict(label_keep_prob=None)),
         ("logistic", dict(mode="clean", noise_var=np.zeros(P), label_keep_prob=None))]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("loss,overrides", CASES, ids=[f"{c[0]}-{'-'.join(c[1]) or 'default'}"
                                                       for c in CASES])
def test_weights_of_one_give_the_bits_of_no_weights(loss, overrides, dtype):
    X, y, _ = _data(loss=loss, dtype=dtype)
    cfg = _config(loss=loss, **overrides)
    plain = _run(run_chunk, finish, cfg, X, y, None, chunk=250)
    weighted = _run(run_chunk, finish, dataclasses.replace(cfg, weighted=True), X, y,
                    np.ones(y.shape[0]), chunk=250)
    _assert_same_bits(plain, weighted)
    assert weighted.carry_X.shape == (P + 1, cfg.batch_size)


@pytest.mark.parametrize("loss,overrides", CASES, ids=[f"{c[0]}-{'-'.join(c[1]) or 'default'}"
                                                       for c in CASES])
def test_kernel_matches_twin_with_random_weights(loss, overrides):
    X, y, weights = _data(loss=loss)
    cfg = _config(loss=loss, weighted=True, **overrides)
    kernel = _run(run_chunk, finish, cfg, X, y, weights, chunk=250)
    twin = _run(reference_run_chunk, reference_finish, cfg, X, y, weights, chunk=250)
    scale = max(1.0, float(np.max(np.abs(twin.theta))))
    np.testing.assert_allclose(kernel.theta, twin.theta, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(kernel.intercept, twin.intercept, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(kernel.theta_avg, twin.theta_avg, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_array_equal(kernel.counters, twin.counters)
    # the weights matter: the unweighted model is another one
    plain = _run(run_chunk, finish, dataclasses.replace(cfg, weighted=False), X, y, None, 250)
    assert np.max(np.abs(plain.theta - kernel.theta)) > 1e-3


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_weighted_chunking_and_carry_are_bit_exact(dtype):
    X, y, weights = _data(dtype=dtype)
    cfg = _config(weighted=True)
    states = [_run(run_chunk, finish, cfg, X, y, weights, chunk) for chunk in (601, 250, 7, 16)]
    for state in states[1:]:
        _assert_same_bits(state, states[0])


def test_staged_many_columns_path_reads_the_weights_too():
    from iwpfast._kernels import sgd

    p = sgd.STAGE_MIN_FEATURES + 2
    n = sgd.STAGE_COLUMN_BYTES // 8 + 300            # one refill of the stage and a partial one
    X, y, weights = _data(n=n, p=p)
    cfg = _config(n_features=p, noise_var=np.full(p, 0.01), batch_size=64, learning_rate=0.01,
                  weighted=True)
    kernel = [_run(run_chunk, finish, cfg, X, y, weights, chunk) for chunk in (n, 1000)]
    _assert_same_bits(kernel[0], kernel[1])
    twin = _run(reference_run_chunk, reference_finish, cfg, X, y, weights, n)
    np.testing.assert_allclose(kernel[0].theta, twin.theta, rtol=1e-12, atol=1e-12)
    ones = _run(run_chunk, finish, cfg, X, y, np.ones(n), n)
    plain = _run(run_chunk, finish, dataclasses.replace(cfg, weighted=False), X, y, None, n)
    _assert_same_bits(ones, plain)


def test_one_vs_rest_heads_with_weights():
    rng = np.random.default_rng(3)
    n, k = 500, 3
    X = rng.standard_normal((P, n))
    codes = rng.integers(0, k, n).astype(np.int8)
    weights = rng.uniform(0.0, 3.0, n)
    cfgs = [_config(label_class=c, label_keep_prob=None, weighted=True) for c in range(k)]

    def run_heads(run, fin, cfgs, w, chunk):
        states = [HeadState.new(c) for c in cfgs]
        for start in range(0, n, chunk):
            kw = {} if w is None else {"sample_weight": w[start:start + chunk]}
            run(cfgs, states, X[:, start:start + chunk], codes[start:start + chunk], **kw)
        fin(cfgs, states)
        return states

    kernel = run_heads(run_chunk_heads, finish_heads, cfgs, weights, 130)
    twin = run_heads(reference_run_chunk_heads, reference_finish_heads, cfgs, weights, 130)
    for a, b in zip(kernel, twin, strict=True):
        np.testing.assert_allclose(a.theta, b.theta, rtol=1e-12, atol=1e-12)
    ones = run_heads(run_chunk_heads, finish_heads, cfgs, np.ones(n), 130)
    plain = run_heads(run_chunk_heads, finish_heads,
                      [dataclasses.replace(c, weighted=False) for c in cfgs], None, 130)
    for a, b in zip(ones, plain, strict=True):
        _assert_same_bits(a, b)


def _exact_weighted_gradient(loss, theta, b, X, y, s, alpha):
    """(1/n) sum s_i grad l(y_i, theta^T x_i + b) + alpha theta, and its intercept part, straight
    from the clean loss: exponential l = exp(-y u), squared_error l = (u - y)^2 / 2."""
    u = theta @ X + b
    if loss == "exponential":
        coefficient = -y * np.exp(-y * u)
    else:
        coefficient = u - y
    n = y.shape[0]
    return (X @ (s * coefficient)) / n + alpha * theta, float(np.sum(s * coefficient)) / n


@pytest.mark.parametrize("loss", ["exponential", "squared_error"])
def test_weighted_iwp_gradient_is_unbiased_for_the_weighted_clean_gradient(loss):
    # Monte Carlo over R independent releases of the same clean rows (Gaussian feature noise,
    # randomized-response labels / Gaussian target noise) at a fixed theta: the kernel's one-batch
    # gradient g = (theta0 - theta1) / learning_rate.  Its mean over the releases must equal the
    # exact weighted clean gradient within 4 standard errors per coordinate (SE = sample sd of
    # the R gradients / sqrt(R)); fixed seeds, so the outcome is the same on every run.
    rng = np.random.default_rng(11)
    n, p, R, sigma = 64, 3, 1500, 0.5
    X = rng.uniform(-1.0, 1.0, size=(p, n))
    theta0 = np.array([0.4, -0.3, 0.2])
    b0 = 0.1
    if loss == "exponential":
        y = np.where(X[0] - X[1] + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
        keep = 0.8                                           # S(eps_y): label kept w.p. 0.8
    else:
        y = X.T @ np.array([0.5, -0.5, 0.2]) + 0.1 * rng.standard_normal(n)
        keep = None
    s = rng.exponential(1.0, n) * (X[2] > 0) + 0.5          # weights tied to a feature
    alpha = 0.01
    cfg = HeadConfig(loss=loss, mode="iwp", n_features=p, noise_var=np.full(p, sigma ** 2),
                     label_keep_prob=keep, batch_size=n, learning_rate=1.0, alpha=alpha,
                     fit_intercept=True, weighted=True)
    gradients = np.empty((R, p + 1))
    for r in range(R):
        Xr = X + sigma * rng.standard_normal((p, n))
        if keep is None:
            yr = y + 0.3 * rng.standard_normal(n)
        else:
            yr = np.where(rng.random(n) < keep, y, -y)
        state = HeadState.new(cfg, theta0=theta0, intercept0=b0)
        run_chunk(cfg, state, Xr, yr, sample_weight=s)
        gradients[r, :p] = theta0 - state.theta               # learning rate 1, no projection
        gradients[r, p] = b0 - state.intercept[0]
    mean = gradients.mean(axis=0)
    se = gradients.std(axis=0, ddof=1) / np.sqrt(R)
    g_theta, g_b = _exact_weighted_gradient(loss, theta0, b0, X, y, s, alpha)
    exact = np.append(g_theta, g_b)
    assert np.all(np.abs(mean - exact) <= 4 * se), (mean, exact, se)
    # the test has power: the unweighted clean gradient is far outside those bounds
    u_theta, u_b = _exact_weighted_gradient(loss, theta0, b0, X, y, np.ones(n), alpha)
    assert np.any(np.abs(mean - np.append(u_theta, u_b)) > 8 * se)


@pytest.mark.parametrize("bad,match", [
    (-0.5, r"sample_weight\[5\] = -0.5 \(row 5 of this chunk\).*finite and >= 0"),
    (np.nan, r"sample_weight\[5\] = nan .*finite and >= 0"),
    (np.inf, r"sample_weight\[5\] = inf .*finite and >= 0"),
])
@pytest.mark.parametrize("run", [run_chunk, reference_run_chunk])
def test_bad_weights_are_refused_naming_the_row(run, bad, match):
    X, y, _ = _data(n=40)
    cfg = _config(weighted=True)
    weights = np.ones(40)
    weights[5] = bad
    state = HeadState.new(cfg)
    with pytest.raises(InvalidInputError, match=match):
        run(cfg, state, X, y, sample_weight=weights)
    assert state.step == 0 and state.carry_n == 0               # nothing changed


@pytest.mark.parametrize("run", [run_chunk, reference_run_chunk])
def test_weights_and_config_must_agree(run):
    X, y, _ = _data(n=40)
    with pytest.raises(InvalidInputError, match=r"shape \(39,\); expected \(40,\)"):
        run(_config(weighted=True), HeadState.new(_config(weighted=True)), X, y,
            sample_weight=np.ones(39))
    with pytest.raises(InvalidInputError, match="weighted=True: pass sample_weight"):
        run(_config(weighted=True), HeadState.new(_config(weighted=True)), X, y)
    with pytest.raises(InvalidInputError, match="without weights"):
        run(_config(), HeadState.new(_config()), X, y, sample_weight=np.ones(40))
    with pytest.raises(InvalidInputError, match=r"overflows the features' dtype float32"):
        run(_config(weighted=True), HeadState.new(_config(weighted=True)), X.astype(np.float32), y,
            sample_weight=np.full(40, 1e300))


def test_a_state_of_an_unweighted_head_is_refused_for_a_weighted_one():
    X, y, w = _data(n=40)
    with pytest.raises(InvalidInputError, match=r"carry_X.*\(4, 16\).*weighted=True"):
        run_chunk(_config(weighted=True), HeadState.new(_config()), X, y, sample_weight=w)
