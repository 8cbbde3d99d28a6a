"""One-vs-rest heads of a k-class label: the 2 x 2 label-weight table, the k-head kernel against
its NumPy twin, k = 2 against the binary path bit for bit, and the unbiasedness of the inverse.

Sizes are small so that CI can run these with NUMBA_DISABLE_JIT=1.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from iwpfast import iwp_gradient, iwp_loss
from iwpfast.estimates import label_tilde, label_weight_table
from iwpfast.exceptions import InvalidInputError
from iwpfast.privacy import KaryRandomizedResponse, kary_probabilities
from iwpfast.sgd.engine import finish, finish_heads, run_chunk, run_chunk_heads
from iwpfast.sgd.reference import (
    reference_finish_heads,
    reference_run_chunk_heads,
)
from iwpfast.sgd.state import HeadConfig, HeadState
from iwpfast.transforms import logistic_gradient_truncation_bias

pytestmark = pytest.mark.kernels

P, K = 3, 4


def _data(n=601, p=P, k=K, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(p, n)) + 0.3 * rng.standard_normal((p, n))
    scores = np.stack([X[0], X[1], -X[0], -X[1] + 0.2][:k]) + 0.5 * rng.standard_normal((k, n))
    return X.astype(dtype), np.argmax(scores, axis=0).astype(np.int8)


def _heads(k=K, eps=1.0, **overrides):
    base = dict(loss="exponential", mode="iwp", n_features=P, noise_var=np.full(P, 0.09),
                batch_size=16, learning_rate=0.05, alpha=0.01, truncation=2,
                label_weights=label_weight_table(eps, k))
    base.update(overrides)
    return [HeadConfig(**base, label_class=c) for c in range(k)]


def _run_heads(run, fin, cfgs, X, y, chunk, trace_capacity=0):
    states = [HeadState.new(cfg, trace_capacity=trace_capacity) for cfg in cfgs]
    for start in range(0, y.shape[0], chunk):
        run(cfgs, states, X[:, start:start + chunk], y[start:start + chunk])
    fin(cfgs, states)
    return states


def test_label_weight_table_rows_sum_to_one_and_two_classes_are_binary():
    for k, eps in [(3, 1.0), (5, 0.4), (10, 3.0)]:
        q, r = kary_probabilities(eps, k)
        t = label_weight_table(eps, k)
        assert math.isclose(t[0] + t[1], 1.0, rel_tol=1e-12) and math.isclose(t[2] + t[3], 1.0, rel_tol=1e-12)
        assert math.isclose(t[0], (1 - r) / (q - r), rel_tol=1e-14)
        assert math.isclose(t[3], -r / (q - r), rel_tol=1e-14)
    s = label_tilde(0.8)
    assert label_weight_table(0.8, 2) == (s, 1 - s, s, 1 - s)
    assert label_weight_table(None, 5) == (1.0, 0.0, 1.0, 0.0)


CASES = [("exponential", dict()), ("exponential", dict(fit_intercept=True, average_start=3)),
         ("logistic", dict(truncation=2, radius=0.3)), ("logistic", dict(truncation=0)),
         ("quadratic", dict(fit_intercept=True, trace_every=5)),
         ("exponential", dict(mode="naive")), ("logistic", dict(mode="clean", noise_var=np.zeros(P)))]


@pytest.mark.parametrize("loss,overrides", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_k_head_kernel_matches_the_twin(loss, overrides):
    cfgs = _heads(loss=loss, **overrides)
    X, y = _data()
    capacity = 60 if overrides.get("trace_every") else 0
    kernel = _run_heads(run_chunk_heads, finish_heads, cfgs, X, y, chunk=250, trace_capacity=capacity)
    twin = _run_heads(reference_run_chunk_heads, reference_finish_heads, cfgs, X, y, chunk=250,
                      trace_capacity=capacity)
    for a, b in zip(kernel, twin, strict=True):
        scale = max(1.0, float(np.abs(b.theta).max()))
        np.testing.assert_allclose(a.theta, b.theta, rtol=1e-12, atol=1e-12 * scale)
        np.testing.assert_allclose(a.theta_avg, b.theta_avg, rtol=1e-12, atol=1e-12 * scale)
        np.testing.assert_allclose(a.intercept, b.intercept, rtol=1e-12, atol=1e-12 * scale)
        np.testing.assert_allclose(a.trace, b.trace, rtol=1e-12, atol=1e-12 * scale)
        np.testing.assert_array_equal(a.counters, b.counters)
        np.testing.assert_allclose(a.telemetry, b.telemetry, rtol=1e-9, atol=1e-12)
        assert a.step == 38
    # the heads learned different things (one per class), and each differs from the naive head
    assert np.linalg.norm(kernel[0].theta - kernel[2].theta) > 1e-3


# the release's own types by default; the other label types each compile two kernel versions
# of their own (about 30 s of a cold run): the slow suite (and CI's kernel step) runs them
_OTHER_TYPES = pytest.mark.slow


@pytest.mark.parametrize("dtype,label_dtype", [
    (np.float32, np.int8), pytest.param(np.float64, np.int16, marks=_OTHER_TYPES),
    pytest.param(np.float32, np.float32, marks=_OTHER_TYPES),
    pytest.param(np.float64, np.int64, marks=_OTHER_TYPES)])
def test_chunking_and_label_dtypes_do_not_change_the_bits(dtype, label_dtype):
    cfgs = _heads(loss="logistic", fit_intercept=True)
    X, y = _data(dtype=dtype)
    y = y.astype(label_dtype)
    whole = _run_heads(run_chunk_heads, finish_heads, cfgs, X, y, chunk=601)
    for chunk in (7, 100):
        parts = _run_heads(run_chunk_heads, finish_heads, cfgs, X, y, chunk=chunk)
        for a, b in zip(whole, parts, strict=True):
            np.testing.assert_array_equal(a.theta, b.theta)
            np.testing.assert_array_equal(a.intercept, b.intercept)
    # each head of the k-head scan equals that head run alone (run_chunk with label_class)
    alone = [HeadState.new(cfg) for cfg in cfgs]
    for cfg, state in zip(cfgs, alone, strict=True):
        run_chunk(cfg, state, X, y)
        finish(cfg, state)
        assert state.carry_n == 0
    for a, b in zip(whole, alone, strict=True):
        np.testing.assert_array_equal(a.theta, b.theta)


@pytest.mark.parametrize("loss", ["exponential", "logistic", "quadratic"])
def test_two_classes_equal_the_binary_head_bit_for_bit(loss):
    X, codes = _data(k=2)
    binary = HeadConfig(loss=loss, mode="iwp", n_features=P, noise_var=np.full(P, 0.09),
                        label_keep_prob=0.8, batch_size=16, learning_rate=0.05, fit_intercept=True)
    signs = np.where(codes == 1, 1.0, -1.0)
    expected = HeadState.new(binary)
    run_chunk(binary, expected, X, signs)
    finish(binary, expected)
    head = dataclasses.replace(binary, label_keep_prob=None, label_class=1,
                               label_weights=binary.label_table)
    got = _run_heads(run_chunk_heads, finish_heads, [head], X, codes, chunk=601)[0]
    np.testing.assert_array_equal(got.theta, expected.theta)
    np.testing.assert_array_equal(got.intercept, expected.intercept)
    # and the per-example estimates: head 1 of classes=2 is the binary estimate, bit for bit
    theta = np.array([[0.3, -0.2, 0.1], [0.5, 0.4, -0.6]])
    for fn in (iwp_loss, iwp_gradient):
        multi = fn(theta, X.T, codes, loss=loss, noise_var=0.09, epsilon_y=0.9, classes=2,
                   intercept=np.array([0.1, -0.2]))
        single = fn(theta[1], X.T, signs, loss=loss, noise_var=0.09, epsilon_y=0.9, intercept=-0.2)
        np.testing.assert_array_equal(multi[:, 1], single)


def test_bad_class_labels_and_mismatched_heads_name_the_fix():
    cfgs = _heads()
    X, y = _data(n=40)
    states = [HeadState.new(cfg) for cfg in cfgs]
    for bad, text in [(-1, "-1"), (2.5, "2.5"), (np.nan, "nan")]:
        y_bad = y.astype(np.float64)
        y_bad[7] = bad
        with pytest.raises(InvalidInputError, match=rf"y\[7\] = {text}.*class index"):
            run_chunk_heads(cfgs, states, X, y_bad)
    assert all(st.step == 0 for st in states)
    mixed = cfgs[:2] + [dataclasses.replace(cfgs[2], batch_size=32)]
    with pytest.raises(InvalidInputError, match="batch_size"):
        run_chunk_heads(mixed, [HeadState.new(c) for c in mixed], X, y)
    with pytest.raises(InvalidInputError, match="label_weights"):
        run_chunk(dataclasses.replace(cfgs[0], label_weights=(1.0, 2.0)), states[0], X, y)
    with pytest.raises(InvalidInputError, match=r"y\[0\] = 5 is not a class index 0..2"):
        iwp_loss(np.zeros((3, P)), X.T, np.full(40, 5), loss="exponential", noise_var=0.1, classes=3)
    with pytest.raises(InvalidInputError, match=r"y\[0\] = 'z' is not one of the classes"):
        iwp_loss(np.zeros((2, P)), X.T[:1], np.array(["z"]), loss="exponential", noise_var=0.1,
                 classes=["a", "b"])


# Monte Carlo over releases of one example: the mean of the estimate must equal its clean value
# within 5 standard errors (sd of the R draws / sqrt(R)); exponential: exact, logistic: the clean
# value plus the truncation bias computed by iwpfast.transforms (the label inverse adds none).
@pytest.mark.parametrize("loss", ["exponential", "logistic"])
@pytest.mark.parametrize("true_class", [0, 2])
def test_every_head_is_unbiased_over_releases(loss, true_class):
    k, eps, sigma2, R = 3, 1.5, 0.3, 200_000
    x = np.array([0.4, -0.3, 0.2])
    theta = np.array([[0.5, -0.4, 0.3], [-0.2, 0.6, 0.1], [0.1, 0.2, -0.5]])
    rng = np.random.default_rng(7 + true_class)
    X_rel = x + math.sqrt(sigma2) * rng.standard_normal((R, P))
    y_rel = KaryRandomizedResponse(eps, k).apply(np.full(R, true_class, np.int8), rng)
    grads = iwp_gradient(theta, X_rel, y_rel, loss=loss, noise_var=sigma2, epsilon_y=eps,
                         classes=k, truncation=2)
    naive = iwp_gradient(theta, X_rel, y_rel, loss=loss, noise_var=sigma2, epsilon_y=eps,
                         classes=k, truncation=2, correction="none").mean(axis=0)
    for c in range(k):
        y_c = 1.0 if c == true_class else -1.0
        z = y_c * float(theta[c] @ x)
        f1 = -math.exp(-z) if loss == "exponential" else -1.0 / (1.0 + math.exp(z))
        expected = f1 * y_c * x
        if loss == "logistic":
            expected = expected + logistic_gradient_truncation_bias(theta[c], x, y_c, sigma2, 2)
        mean = grads[:, c].mean(axis=0)
        se = grads[:, c].std(axis=0) / math.sqrt(R)
        assert np.all(np.abs(mean - expected) <= 5 * se), (c, mean, expected, se)
        if c == true_class:
            # the naive estimate of the true class's head is biased far beyond its error
            assert np.max(np.abs(naive[c] - f1 * y_c * x) / se) > 10
