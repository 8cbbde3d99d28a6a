"""The fused Numba kernel (iwpfast.sgd.engine) against its NumPy twin (iwpfast.sgd.reference).

Sizes are small so that CI can run these with NUMBA_DISABLE_JIT=1 (kernels as plain Python).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from iwpfast.exceptions import DivergenceError, InvalidInputError
from iwpfast.sgd.engine import finish, run_chunk
from iwpfast.sgd.reference import reference_finish, reference_run_chunk
from iwpfast.sgd.state import HeadState
from tests.conftest import make_head_config, run_in_chunks

pytestmark = pytest.mark.kernels

P = 3


def _data(n=600, p=P, loss="exponential", seed=0, dtype=np.float64, noise=0.3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(p, n)) + noise * rng.standard_normal((p, n))
    if loss == "squared_error":
        y = X.T @ np.linspace(0.5, -0.5, p) + 0.1 * rng.standard_normal(n)
    else:
        y = np.where(X[0] + 0.5 * X[1] + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
        y[rng.random(n) < 0.1] *= -1.0                      # flipped labels
    return X.astype(dtype), y


def _assert_states_close(kernel, twin, rtol):
    scale = max(1.0, float(np.max(np.abs(twin.theta))))
    np.testing.assert_allclose(kernel.theta, twin.theta, rtol=rtol, atol=rtol * scale)
    np.testing.assert_allclose(kernel.theta_avg, twin.theta_avg, rtol=rtol, atol=rtol * scale)
    np.testing.assert_allclose(kernel.intercept, twin.intercept, rtol=rtol, atol=rtol * scale)
    np.testing.assert_allclose(kernel.intercept_avg, twin.intercept_avg, rtol=rtol, atol=rtol * scale)
    np.testing.assert_array_equal(kernel.counters, twin.counters)
    np.testing.assert_allclose(kernel.telemetry, twin.telemetry, rtol=1e3 * rtol, atol=rtol)
    np.testing.assert_allclose(kernel.trace, twin.trace, rtol=rtol, atol=rtol * scale)
    np.testing.assert_array_equal(kernel.trace_steps, twin.trace_steps)
    np.testing.assert_allclose(kernel.carry_X, twin.carry_X, rtol=rtol)
    np.testing.assert_allclose(kernel.carry_y, twin.carry_y, rtol=rtol)


CASES = [
    # (loss, mode, overrides)
    ("exponential", "iwp", {}),
    ("exponential", "iwp", dict(label_keep_prob=0.85)),
    ("exponential", "naive", {}),
    ("exponential", "clean", dict(noise_var=np.zeros(P))),
    ("exponential", "iwp", dict(fit_intercept=True, noise_var=np.array([0.01, 0.2, 0.05]))),
    ("exponential", "iwp", dict(radius=0.3, average_start=0, trace_every=5)),
    ("exponential", "iwp", dict(variance_cap=0.002, schedule="inverse", mu=0.5)),
    ("quadratic", "iwp", {}),
    ("quadratic", "iwp", dict(label_keep_prob=0.8, fit_intercept=True)),
    ("quadratic", "naive", dict(radius=0.2)),
    ("quadratic", "clean", dict(noise_var=np.zeros(P), average_start=10)),
    ("logistic", "iwp", dict(truncation=0)),
    ("logistic", "iwp", dict(truncation=1)),
    ("logistic", "iwp", dict(truncation=3, label_keep_prob=0.9, fit_intercept=True)),
    ("logistic", "iwp", dict(truncation=2, noise_var=np.array([0.5, 0.1, 0.3]), radius=0.1)),
    ("logistic", "naive", dict(trace_every=3)),
    ("logistic", "clean", dict(noise_var=np.zeros(P), fit_intercept=True)),
    ("squared_error", "iwp", {}),
    ("squared_error", "iwp", dict(fit_intercept=True, variance_cap=0.01, average_start=5)),
    ("squared_error", "naive", dict(radius=0.2)),
    ("squared_error", "clean", dict(noise_var=np.zeros(P), trace_every=4)),
]


@pytest.mark.parametrize("loss,mode,overrides", CASES,
                         ids=[f"{c[0]}-{c[1]}-{'-'.join(c[2]) or 'default'}" for c in CASES])
def test_kernel_matches_numpy_twin_float64(loss, mode, overrides):
    cfg = make_head_config(loss=loss, mode=mode, **overrides)
    X, y = _data(n=601, loss=loss)                            # 601 = 37 full batches + 9 rows
    capacity = 200 if cfg.trace_every else 0
    kernel = run_in_chunks(run_chunk, finish, cfg, X, y, chunk=250, trace_capacity=capacity)
    twin = run_in_chunks(reference_run_chunk, reference_finish, cfg, X, y, chunk=250, trace_capacity=capacity)
    assert kernel.step == 38
    _assert_states_close(kernel, twin, rtol=1e-12)
    if overrides.get("radius"):
        assert kernel.telemetry[2] > 0, "the case meant to exercise the projection never projected"
    if overrides.get("variance_cap"):
        assert kernel.telemetry[6] > 0, "the case meant to exercise the variance cap never capped"


@pytest.mark.parametrize("loss", ["exponential", "logistic", "squared_error"])
def test_float32_input_matches_twin_on_the_same_float32_values(loss):
    cfg = make_head_config(loss=loss, fit_intercept=True,
                           label_keep_prob=0.9 if loss != "squared_error" else None)
    X, y = _data(n=300, loss=loss, dtype=np.float32)
    y = y.astype(np.float32)
    kernel = run_in_chunks(run_chunk, finish, cfg, X, y, chunk=100)
    twin = run_in_chunks(reference_run_chunk, reference_finish, cfg, X.astype(np.float64),
                y.astype(np.float64), chunk=100)
    # accumulation is float64 in both, so the float32 inputs give float64-close results
    _assert_states_close(kernel, twin, rtol=1e-12)
    # and within float32 tolerance of the float64 data the float32 values were rounded from
    X64, y64 = _data(n=300, loss=loss)
    exact = run_in_chunks(reference_run_chunk, reference_finish, cfg, X64, y64, chunk=100)
    np.testing.assert_allclose(kernel.theta, exact.theta, rtol=1e-4, atol=1e-5)


def test_separate_readonly_columns_equal_the_2d_array():
    cfg = make_head_config(loss="logistic", fit_intercept=True)
    X, y = _data(n=200, loss="logistic")
    columns = [np.array(X[j]) for j in range(P)]
    for column in columns:
        column.setflags(write=False)
    fortran = np.asfortranarray(X)                            # strided rows: the wrapper copies
    a = run_in_chunks(run_chunk, finish, cfg, X, y, chunk=200)
    b = run_in_chunks(run_chunk, finish, cfg, columns, y, chunk=200)
    c = run_in_chunks(run_chunk, finish, cfg, fortran, y.astype(np.int8), chunk=200)
    np.testing.assert_array_equal(a.theta, b.theta)
    np.testing.assert_array_equal(a.theta, c.theta)


@pytest.mark.parametrize("loss", ["exponential", "logistic", "quadratic", "squared_error"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_chunk_size_invariance_is_bit_exact(loss, dtype):
    # small steps: with large ones the exponential-loss trajectories are chaotic, but the kernel
    # must in any case give the same bits, since a carried batch is computed like an in-place one
    cfg = make_head_config(loss=loss, batch_size=128, learning_rate=0.01, fit_intercept=True,
                  average_start=0, label_keep_prob=0.8 if loss != "squared_error" else None)
    X, y = _data(n=1000, loss=loss, dtype=dtype)
    states = [run_in_chunks(run_chunk, finish, cfg, X, y, chunk=chunk) for chunk in (1, 7, 128, 10_000)]
    for state in states[1:]:
        np.testing.assert_array_equal(state.theta, states[0].theta)
        np.testing.assert_array_equal(state.theta_avg, states[0].theta_avg)
        np.testing.assert_array_equal(state.intercept, states[0].intercept)
        np.testing.assert_array_equal(state.telemetry, states[0].telemetry)


@pytest.mark.parametrize("loss", ["exponential", "quadratic", "logistic"])
def test_iwp_without_noise_and_public_labels_is_clean_exactly(loss):
    X, y = _data(n=500, loss=loss)
    common = dict(loss=loss, noise_var=np.zeros(P), fit_intercept=True, average_start=0)
    clean = run_in_chunks(run_chunk, finish, make_head_config(mode="clean", **common), X, y, chunk=77)
    iwp = run_in_chunks(run_chunk, finish, make_head_config(mode="iwp", **common), X, y, chunk=77)
    np.testing.assert_array_equal(iwp.theta, clean.theta)
    np.testing.assert_array_equal(iwp.intercept, clean.intercept)
    np.testing.assert_array_equal(iwp.theta_avg, clean.theta_avg)


def test_hand_exp_is_within_one_ulp_of_numpy():
    from iwpfast._kernels.fastexp import exp_array
    rng = np.random.default_rng(1)
    x = np.concatenate([np.linspace(-745.0, 709.7, 20_001), rng.uniform(-40.0, 40.0, 20_000),
                        rng.uniform(-1e-3, 1e-3, 1000)])
    out = np.empty_like(x)
    exp_array(x, out)
    expected = np.exp(x)
    normal = expected > np.finfo(np.float64).tiny
    ulps = np.abs(out[normal] - expected[normal]) / np.spacing(expected[normal])
    assert ulps.max() <= 1.0
    # subnormal results: within one unit of the smallest subnormal
    assert np.max(np.abs(out[~normal] - expected[~normal])) <= 5e-324
    special = np.array([np.nan, np.inf, -np.inf, 709.79, 710.0, -745.2, -800.0, 0.0, -0.0])
    out = np.empty_like(special)
    exp_array(special, out)
    assert np.isnan(out[0])
    np.testing.assert_array_equal(out[1:], [np.inf, 0.0, np.inf, np.inf, 0.0, 0.0, 1.0, 1.0])


def test_hand_exp_polynomial_range_is_within_one_ulp():
    """Densely over the reduced range |r| <= ln2/2 (k = 0) and its neighbours k = +-1, +-2, where
    the degree-11 polynomial's own error (1.6e-17 relative) is largest against the rounding."""
    from iwpfast._kernels.fastexp import exp_array
    rng = np.random.default_rng(7)
    half_ln2 = 0.5 * np.log(2.0)
    x = np.concatenate([np.linspace(-half_ln2, half_ln2, 4001),
                        rng.uniform(-5 * half_ln2, 5 * half_ln2, 4000),
                        np.nextafter(half_ln2 * np.array([1.0, -1.0, 3.0, -3.0]), 0.0)])
    out = np.empty_like(x)
    exp_array(x, out)
    expected = np.exp(x)
    assert np.max(np.abs(out - expected) / np.spacing(expected)) <= 1.0


def test_config_cache_sees_noise_variances_changed_in_place():
    """The packed config is cached per HeadConfig object; changing its noise_var array in place
    (the one mutable field of the frozen config) must take effect like a fresh config."""
    X, y = _data(n=160)
    noise = np.full(P, 0.09)
    cfg = make_head_config(noise_var=noise)
    state = HeadState.new(cfg)
    run_chunk(cfg, state, X[:, :80], y[:80])
    noise[:] = [0.3, 0.0, 0.5]
    run_chunk(cfg, state, X[:, 80:], y[80:])
    expected = HeadState.new(cfg)
    run_chunk(make_head_config(noise_var=np.full(P, 0.09)), expected, X[:, :80], y[:80])
    run_chunk(make_head_config(noise_var=np.array([0.3, 0.0, 0.5])), expected, X[:, 80:], y[80:])
    np.testing.assert_array_equal(state.theta, expected.theta)
    other = run_in_chunks(run_chunk, finish, make_head_config(), X, y, 160)
    assert not np.array_equal(state.theta, other.theta)


def test_config_cache_eviction_keeps_results_per_config():
    """More configs than the cache holds (64): each still runs with its own parameters."""
    from iwpfast.sgd import engine
    X, y = _data(n=32)
    configs = [make_head_config(learning_rate=0.01 * (k + 1)) for k in range(engine._CONFIG_CACHE_SIZE + 6)]
    thetas = []
    for cfg in configs + configs[:3]:                  # the first ones were evicted by now
        state = HeadState.new(cfg)
        run_chunk(cfg, state, X, y)
        thetas.append(state.theta.copy())
    assert len(engine._CONFIG_CACHE) <= engine._CONFIG_CACHE_SIZE
    for k in range(3):
        np.testing.assert_array_equal(thetas[len(configs) + k], thetas[k])
    assert not np.array_equal(thetas[0], thetas[1])


def test_column_slices_of_a_2d_array_equal_contiguous_columns():
    """A (p, n) slice X[:, a:b] (rows contiguous, not C-contiguous as a whole) takes the addresses
    of its rows directly; a Fortran-ordered array is copied column by column: same bits."""
    X, y = _data(n=400)
    wide = np.concatenate([X, X], axis=1)
    for dtype in (np.float32, np.float64):
        contiguous = run_in_chunks(run_chunk, finish, make_head_config(), X.astype(dtype), y, 400)
        sliced = run_in_chunks(run_chunk, finish, make_head_config(), wide.astype(dtype)[:, 400:], y, 400)
        fortran = run_in_chunks(run_chunk, finish, make_head_config(),
                                np.asfortranarray(X.astype(dtype)), y, 400)
        np.testing.assert_array_equal(sliced.theta, contiguous.theta)
        np.testing.assert_array_equal(fortran.theta, contiguous.theta)


def test_divergence_names_the_row_and_suggests_a_fix():
    cfg = make_head_config(loss="exponential", mode="clean", noise_var=np.zeros(P), learning_rate=1e6,
                  batch_size=10)
    X, y = _data(n=200)
    state = HeadState.new(cfg)
    with pytest.raises(DivergenceError) as kernel_error:
        run_chunk(cfg, state, X, y)
    twin_state = HeadState.new(cfg)
    with pytest.raises(DivergenceError) as twin_error:
        reference_run_chunk(cfg, twin_state, X, y)
    message = str(kernel_error.value)
    row = int(message.split("ending at row ")[1].split()[0])
    assert f"at row {row} " in str(twin_error.value)
    assert (row + 1) % 10 == 0 and "learning_rate" in message and "radius" in message
    np.testing.assert_array_equal(state.counters, twin_state.counters)


def test_nonfinite_feature_is_reported_as_divergence_with_its_batch():
    cfg = make_head_config(batch_size=8)
    X, y = _data(n=64)
    X[1, 21] = np.nan
    with pytest.raises(DivergenceError, match="row 23 "):
        run_chunk(cfg, HeadState.new(cfg), X, y)


@pytest.mark.parametrize("change,match", [
    (dict(loss="hinge"), "HeadConfig.loss"),
    (dict(mode="private"), "HeadConfig.mode"),
    (dict(schedule="paper"), "paper_learning_rate"),
    (dict(truncation=-1), "HeadConfig.truncation"),
    (dict(noise_var=np.array([0.1, -0.2, 0.1])), r"noise_var\[1\]"),
    (dict(noise_var=np.zeros(2)), "noise_var has shape"),
    (dict(batch_size=0), "batch_size"),
    (dict(learning_rate=0.0), "learning_rate"),
    (dict(radius=-1.0), "radius"),
    (dict(label_keep_prob=0.4), "label_keep_prob"),
])
def test_bad_config_is_rejected_before_any_update(change, match):
    cfg = make_head_config()
    X, y = _data(n=40)
    state = HeadState.new(cfg)
    bad = dataclasses.replace(cfg, **change)
    with pytest.raises(InvalidInputError, match=match):
        run_chunk(bad, state, X, y)
    assert state.step == 0 and np.all(state.theta == 0)


def test_bad_data_errors_name_the_problem_and_the_fix():
    cfg = make_head_config()
    X, y = _data(n=40)
    state = HeadState.new(cfg)
    with pytest.raises(InvalidInputError, match="pass X.T"):
        run_chunk(cfg, state, np.ascontiguousarray(X.T), y)
    with pytest.raises(InvalidInputError, match="float32 or float64"):
        run_chunk(cfg, state, X.astype(np.int32), y)
    with pytest.raises(InvalidInputError, match="column 2 has 39 rows"):
        run_chunk(cfg, state, [X[0], X[1], X[2, :39]], y)
    with pytest.raises(InvalidInputError, match="one dtype"):
        run_chunk(cfg, state, [X[0], X[1].astype(np.float32), X[2]], y)
    with pytest.raises(InvalidInputError, match="expected \\(40,\\)"):
        run_chunk(cfg, state, X, y[:30])
    bad_labels = y.copy()
    bad_labels[17] = 0.0
    with pytest.raises(InvalidInputError, match=r"y\[17\] = 0.0.*-1 or \+1"):
        run_chunk(cfg, state, X, bad_labels)
    with pytest.raises(InvalidInputError, match="HeadState.new"):
        run_chunk(cfg, HeadState.new(make_head_config(batch_size=8)), X, y)
    traced = make_head_config(trace_every=1)
    with pytest.raises(InvalidInputError, match="trace_capacity"):
        run_chunk(traced, HeadState.new(traced, trace_capacity=1), X, y)
    assert state.step == 0


def test_regression_targets_need_not_be_labels():
    cfg = make_head_config(loss="squared_error")
    X, y = _data(n=64, loss="squared_error")
    state = HeadState.new(cfg)
    run_chunk(cfg, state, X, y)
    assert state.step == 4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ir_reductions_equal_their_python_definitions_bit_for_bit(dtype):
    # the LLVM-IR blocks (lane sums, grouped lane sums, margin blocks) must sum in exactly the
    # order of their plain-Python definitions (used under NUMBA_DISABLE_JIT), for both column
    # dtypes: the carry path reads float64 and the in-place path float32, so any difference in
    # order or conversion would break chunk invariance
    from iwpfast._kernels import _lowlevel as low
    from iwpfast._kernels.sgd import reduction_blocks

    rng = np.random.default_rng(5)
    p, m = 6, 96
    X = np.ascontiguousarray((rng.standard_normal((p, m)) * 10.0 ** rng.integers(-8, 8, (p, m))
                              ).astype(dtype))
    addresses = np.array([X[j].ctypes.data for j in range(p)], dtype=np.int64)
    like = np.empty(0, dtype)
    weight = rng.standard_normal(m) * 10.0 ** rng.integers(-8, 8, m)
    theta = rng.standard_normal(p)

    def run_all(lane_blocks, lane_blocks_group, margin_blocks):
        lanes = np.full(low.LANES, np.nan)
        lane_blocks(weight, X[2], m // low.LANES, lanes)
        group = np.full(low.GRADIENT_GROUP * low.LANES, np.nan)
        lane_blocks_group(weight, addresses, 1, 16, like, (m - 16) // low.LANES, group)
        margin = np.full(m, np.nan)
        margin_blocks(addresses, 8, like, theta, (m - 8) // low.MARGIN_BLOCK, margin)
        return lanes, group, margin

    expected = run_all(low.lane_blocks, low.lane_blocks_group, low.margin_blocks)
    got = (np.full(low.LANES, np.nan), np.full(low.GRADIENT_GROUP * low.LANES, np.nan),
           np.full(m, np.nan))
    reduction_blocks(weight, X[2], addresses, like, theta, *got)
    rows = low.MARGIN_BLOCK * ((m - 8) // low.MARGIN_BLOCK)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    np.testing.assert_array_equal(got[2][:rows], expected[2][:rows])
    # and the definitions are what they claim: lane k of column 2 sums rows k, k + 16, ...
    lane_sum = np.zeros(low.LANES)
    for i in range(m):
        lane_sum[i % low.LANES] += weight[i] * np.float64(X[2, i])
    np.testing.assert_array_equal(expected[0], lane_sum)
    margin = np.zeros(rows)
    for j in range(p):
        margin += theta[j] * X[j, 8:8 + rows].astype(np.float64)
    np.testing.assert_array_equal(expected[2][:rows], margin)


def test_fma_rounds_once_like_exact_arithmetic():
    # fast_exp's Horner steps are fused multiply-adds; the compiled llvm.fma and the plain-Python
    # fallback (NUMBA_DISABLE_JIT) must both round the exact a*b + c once
    from fractions import Fraction

    from iwpfast._kernels.fastexp import fma_array

    rng = np.random.default_rng(7)
    n = 3000
    a, b, c = (rng.standard_normal(n) * 10.0 ** rng.integers(-40, 40, n) for _ in range(3))
    # products that cancel c almost exactly: where one rounding and two roundings differ most
    c[: n // 3] = -(a[: n // 3] * b[: n // 3])
    a[-3:], b[-3:], c[-3:] = [1e300, 1e-300, 0.0], [1e300, 1e-300, -1.0], [-np.inf, 1e-310, 0.0]
    out = np.empty(n)
    fma_array(a, b, c, out)
    with np.errstate(over="ignore"):
        finite = np.isfinite(a * b) & np.isfinite(c)
    exact = [float(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in
             zip(a[finite], b[finite], c[finite], strict=True)]
    np.testing.assert_array_equal(out[finite], exact)
    assert np.sum(out[: n // 3] != 0.0) > n // 10      # the cancelling cases keep the product error
    assert out[-3] == -np.inf and out[-1] == 0.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_many_columns_staged_path_is_chunk_invariant_and_matches_twin(dtype):
    # p >= sgd.STAGE_MIN_FEATURES: complete batches run from a staging copy of each column
    # (refilled every STAGE_COLUMN_BYTES); chunk boundaries that fall inside and across stage
    # refills, and the carry buffer, must all give the same bits
    from iwpfast._kernels import sgd

    p = sgd.STAGE_MIN_FEATURES + 6
    rows_per_stage = sgd.STAGE_COLUMN_BYTES // np.dtype(dtype).itemsize
    n = 2 * rows_per_stage + 300                      # two full refills and a partial one
    X, y = _data(n=n, p=p, dtype=dtype)
    cfg = make_head_config(n_features=p, noise_var=np.full(p, 0.01), batch_size=128, learning_rate=0.01,
                  fit_intercept=True, average_start=0, label_keep_prob=0.8)
    states = [run_in_chunks(run_chunk, finish, cfg, X, y, chunk=chunk)
              for chunk in (n, rows_per_stage - 5, 1000, 333)]
    for state in states[1:]:
        np.testing.assert_array_equal(state.theta, states[0].theta)
        np.testing.assert_array_equal(state.theta_avg, states[0].theta_avg)
        np.testing.assert_array_equal(state.intercept, states[0].intercept)
        np.testing.assert_array_equal(state.telemetry, states[0].telemetry)
    twin = run_in_chunks(reference_run_chunk, reference_finish, cfg, X.astype(np.float64), y, chunk=n)
    _assert_states_close(states[0], twin, 1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8])
def test_label_checks_find_the_first_bad_label_at_block_edges(dtype):
    """first_invalid_label / first_invalid_class scan blocks of 4096 labels: the first bad label
    is found wherever it sits (block edges, the last row), as NumPy finds it."""
    from iwpfast._kernels.sgd import first_invalid_class, first_invalid_label
    n = 3 * 4096 + 17
    signs = np.where(np.arange(n) % 3 == 0, 1, -1).astype(dtype)
    codes = (np.arange(n) % 2).astype(dtype)
    assert first_invalid_label(signs) == -1 and first_invalid_class(codes, 2) == -1
    for where in (0, 4095, 4096, 8191, 2 * 4096 + 5, n - 1):
        bad_signs, bad_codes = signs.copy(), codes.copy()
        bad_signs[where] = 0
        bad_signs[min(n - 1, where + 4100)] = 0          # a later bad label must not be reported
        bad_codes[where] = 2
        expected = int(np.flatnonzero(np.abs(bad_signs.astype(np.float64)) != 1.0)[0])
        assert expected == where
        assert first_invalid_label(bad_signs) == where
        assert first_invalid_class(bad_codes, 2) == where
    if np.dtype(dtype).kind == "f":
        with_nan = signs.copy()
        with_nan[4097] = np.nan
        assert first_invalid_label(with_nan) == 4097
        assert first_invalid_class(np.where(np.arange(n) == 4097, np.nan, codes).astype(dtype), 2) == 4097


@pytest.mark.parametrize("private", [False, True])
@pytest.mark.parametrize("truncation", [1, 2, 4])
def test_logistic_rows_have_the_bits_of_the_row_by_row_series(private, truncation):
    # _logistic_rows (rows innermost, vectorized) against _logistic_scalars row by row: the same
    # operations per row in the same order, so the same bits, margins of both signs and zero
    from iwpfast._kernels import sgd
    from iwpfast.losses import sigmoid_eulerian_table
    rng = np.random.default_rng(truncation)
    m = 77
    y = np.where(rng.random(m) < 0.5, 1.0, -1.0)
    margin = np.r_[rng.normal(0.0, 3.0, m - 2), 0.0, -0.0]
    tau, label_tilde = 0.37, (1.6 if private else 1.0)
    eulerian = sigmoid_eulerian_table(truncation)
    w = np.exp(-np.abs(y * margin))
    weight, curvature = np.full(sgd.LOGISTIC_ROWS * m, np.nan), w.copy()
    sgd._logistic_rows(y, m, margin, tau, truncation, label_tilde, private, eulerian, weight,
                       curvature)
    for i in range(m):
        a, c = sgd._logistic_scalars(y[i] * margin[i], w[i], tau, truncation, label_tilde,
                                     1.0 - label_tilde, private, eulerian)
        assert weight[i] == a * y[i] and curvature[i] == c, i
