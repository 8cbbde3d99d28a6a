"""Several heads in one scan (``run_chunk_heads`` / ``sgd_chunk_heads``): every head's model has
the bits of its own single-head run (``run_chunk``), and agrees with the NumPy twin.

The fused kernel computes the margins of all heads as one small matrix product and the O(p)
steps of a batch for all heads at once, on a transposed copy of the state; each head's sums keep
the order of the single-head kernel (features in order from +0.0, rows in the lane order of
``_dot_lanes``), and a conditional step that does not apply multiplies by 1.0 or keeps the old
value, so the bound stated in docs/performance-kernels.md is 0: the tests compare bit for bit
(``assert_array_equal``).  Against the twin (``np.exp``, NumPy's summation order) the bound is
the twin's usual 1e-12.

Sizes are small so that CI can run these with NUMBA_DISABLE_JIT=1.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iwpfast.estimates import label_weight_table
from iwpfast.exceptions import DivergenceError, InvalidInputError
from iwpfast.sgd.driver import Head, _units, fit_stream
from iwpfast.sgd.engine import finish, finish_heads, run_chunk, run_chunk_heads
from iwpfast.sgd.reference import reference_finish_heads, reference_run_chunk_heads
from iwpfast.sgd.state import HeadConfig, HeadState

pytestmark = pytest.mark.kernels

P = 5
STATE = ("theta", "theta_avg", "intercept", "intercept_avg", "telemetry", "counters", "carry_X",
         "carry_y", "trace", "trace_steps")


def _data(n=613, p=P, seed=0, dtype=np.float64, target=False):
    rng = np.random.default_rng(seed)
    X = (rng.uniform(-1.0, 1.0, (p, n)) + 0.3 * rng.standard_normal((p, n))).astype(dtype)
    score = X[0] - 0.5 * X[1] + 0.3 * rng.standard_normal(n)
    y = score if target else np.where(score > 0, 1.0, -1.0)
    return X, y.astype(dtype)


def _grid(loss="exponential", n_heads=6, p=P, **common):
    """Heads that differ in everything a head may differ in within one scan."""
    base = dict(loss=loss, n_features=p, noise_var=np.linspace(0.02, 0.1, p), batch_size=16,
                truncation=2)
    base.update(common)
    variants = [dict(mode="iwp", learning_rate=0.05, alpha=0.01, label_keep_prob=0.8),
                dict(mode="iwp", learning_rate=0.2, alpha=0.001, fit_intercept=True,
                     average_start=3, radius=0.4, label_keep_prob=0.8),
                dict(mode="naive", learning_rate=0.1, alpha=0.0, schedule="inverse", mu=0.5),
                dict(mode="clean", learning_rate=0.02, alpha=0.1, noise_var=np.zeros(p),
                     fit_intercept=True),
                # a public column (s_0 = 0): the variance cap leaves its coordinate alone
                dict(mode="iwp", learning_rate=0.3, alpha=0.01, variance_cap=0.01,
                     average_start=0, noise_var=np.r_[0.0, np.full(p - 1, 0.05)]),
                dict(mode="iwp", learning_rate=0.01, alpha=0.3, trace_every=3,
                     label_keep_prob=0.9)]
    cfgs = []
    for i in range(n_heads):
        v = {**base, **variants[i % len(variants)]}
        if loss == "squared_error":
            v.pop("label_keep_prob", None)
        v["learning_rate"] *= 1.0 + 0.1 * i
        cfgs.append(HeadConfig(**v))
    return cfgs


def _run(run, fin, cfgs, X, y, chunks, weights=None):
    states = [HeadState.new(c, trace_capacity=300) for c in cfgs]
    start = 0
    for size in chunks:
        w = None if weights is None else weights[start:start + size]
        run(cfgs, states, X[:, start:start + size], y[start:start + size], w)
        start += size
    fin(cfgs, states)
    return states


def _one_by_one(cfgs, states, X, y, w=None):
    for cfg, state in zip(cfgs, states, strict=True):
        run_chunk(cfg, state, X, y, w)


def _finish_each(cfgs, states):
    for cfg, state in zip(cfgs, states, strict=True):
        finish(cfg, state)


def _assert_same(got, expected):
    for c, (a, b) in enumerate(zip(got, expected, strict=True)):
        for key in STATE:
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key),
                                          err_msg=f"head {c}: {key}")


# irregular chunks: batches carried across chunk ends, a chunk smaller than a batch, a last
# partial batch that ``finish`` runs
CHUNKS = (100, 7, 250, 33, 223)


@pytest.mark.parametrize("loss", ["exponential", "quadratic", "logistic", "squared_error"])
# float32 features with float32 labels compile kernel versions nothing else needs (a release
# stores int8 labels): the slow suite (and CI's kernel step) runs them
@pytest.mark.parametrize("dtype", [pytest.param(np.float32, marks=pytest.mark.slow), np.float64])
def test_fused_heads_have_the_bits_of_single_head_runs(loss, dtype):
    X, y = _data(dtype=dtype, target=loss == "squared_error")
    for n_heads in (1, 4, 6):       # HEAD_GROUP = 4: groups of four, and the heads after them
        cfgs = _grid(loss, n_heads)
        fused = _run(run_chunk_heads, finish_heads, cfgs, X, y, CHUNKS)
        single = _run(_one_by_one, _finish_each, cfgs, X, y, CHUNKS)
        _assert_same(fused, single)
        assert all(st.step == (sum(CHUNKS) + 15) // 16 for st in fused)


@pytest.mark.parametrize("loss", ["exponential", "logistic", "squared_error"])
def test_fused_heads_match_the_twin(loss):
    X, y = _data(target=loss == "squared_error")
    cfgs = _grid(loss, 5)
    fused = _run(run_chunk_heads, finish_heads, cfgs, X, y, CHUNKS)
    twin = _run(reference_run_chunk_heads, reference_finish_heads, cfgs, X, y, CHUNKS)
    for a, b in zip(fused, twin, strict=True):
        np.testing.assert_allclose(a.theta, b.theta, rtol=0, atol=1e-12)
        np.testing.assert_allclose(a.theta_avg, b.theta_avg, rtol=0, atol=1e-12)
        np.testing.assert_allclose(a.intercept, b.intercept, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(a.counters, b.counters)


# float32 features with float32 labels compile kernel versions nothing else needs (a release
# stores int8 labels): the slow suite (and CI's kernel step) runs them
@pytest.mark.parametrize("dtype", [pytest.param(np.float32, marks=pytest.mark.slow),
                                   np.float64])
def test_weighted_fused_heads_have_the_bits_of_single_head_runs(dtype):
    X, y = _data(dtype=dtype)
    weights = np.random.default_rng(3).uniform(0.0, 2.0, y.shape[0]).astype(dtype)
    cfgs = _grid("exponential", 5, weighted=True)
    fused = _run(run_chunk_heads, finish_heads, cfgs, X, y, CHUNKS, weights)
    single = _run(_one_by_one, _finish_each, cfgs, X, y, CHUNKS, weights)
    _assert_same(fused, single)


@pytest.mark.parametrize("loss", ["exponential", "logistic"])
def test_k_classes_times_a_grid_in_one_scan_have_the_bits_of_single_heads(loss):
    # the product of k one-vs-rest heads and a grid of steps: one scan, every head its own bits
    k = 3
    X, y = _data()
    codes = np.digitize(X[0] - 0.5 * X[1], [-0.3, 0.3]).astype(np.int8)
    cfgs = [HeadConfig(loss=loss, mode="iwp", n_features=P, noise_var=np.full(P, 0.05),
                       batch_size=16, learning_rate=lr, alpha=0.01, label_class=c,
                       label_weights=label_weight_table(1.5, k), fit_intercept=c == 1, radius=3.0)
            for c in range(k) for lr in (0.02, 0.05, 0.1)]
    fused = _run(run_chunk_heads, finish_heads, cfgs, X, codes, CHUNKS)
    single = _run(_one_by_one, _finish_each, cfgs, X, codes, CHUNKS)
    _assert_same(fused, single)


def test_a_diverging_head_is_named_and_stops_the_scan_at_the_single_head_row():
    X, y = _data()
    cfgs = _grid("exponential", 5)
    cfgs[3] = HeadConfig(loss="exponential", mode="clean", n_features=P, noise_var=np.zeros(P),
                         batch_size=16, learning_rate=1e300, alpha=0.0, radius=np.inf)
    single = HeadState.new(cfgs[3])
    with pytest.raises(DivergenceError) as expected:
        run_chunk(cfgs[3], single, X, y)
    states = [HeadState.new(c, trace_capacity=300) for c in cfgs]
    with pytest.raises(DivergenceError) as got:
        run_chunk_heads(cfgs, states, X, y)
    assert str(got.value) == str(expected.value)        # the same row, the same advice
    assert not np.all(np.isfinite(states[3].theta))
    assert all(np.all(np.isfinite(st.theta)) for c, st in enumerate(states) if c != 3)


def test_heads_of_one_scan_must_read_one_kind_of_label():
    cfgs = _grid("exponential", 2)
    cfgs.append(HeadConfig(loss="exponential", mode="iwp", n_features=P,
                           noise_var=np.full(P, 0.05), batch_size=16, label_class=0,
                           label_weights=label_weight_table(1.0, 3)))
    X, y = _data()
    with pytest.raises(InvalidInputError, match="label_class"):
        run_chunk_heads(cfgs, [HeadState.new(c) for c in cfgs], X, y)
    bad = _grid("exponential", 2) + _grid("logistic", 1)
    with pytest.raises(InvalidInputError, match="loss"):
        run_chunk_heads(bad, [HeadState.new(c) for c in bad], X, y)


def test_a_float64_chunk_before_a_float32_one_keeps_the_bits():
    # carried float64 rows that are not float32 values: the float32 chunk then runs in float64
    X, y = _data(dtype=np.float64)
    X32 = X.astype(np.float32)
    cfgs = _grid("exponential", 5)

    def mixed(run, fin):
        states = [HeadState.new(c, trace_capacity=300) for c in cfgs]
        run(cfgs, states, X[:, :105], y[:105])
        run(cfgs, states, X32[:, 105:], y[105:].astype(np.float32))
        fin(cfgs, states)
        return states

    _assert_same(mixed(run_chunk_heads, finish_heads), mixed(_one_by_one, _finish_each))


def test_margin_product_equals_its_python_definition_bit_for_bit():
    from iwpfast._kernels import _lowlevel as low
    from iwpfast._kernels.sgd import head_margin_blocks

    rng = np.random.default_rng(7)
    p, m, heads = 6, 96, 2 * low.HEAD_GROUP
    for dtype in (np.float32, np.float64):
        X = np.ascontiguousarray((rng.standard_normal((p, m)) * 10.0 ** rng.integers(-8, 8, (p, m))
                                  ).astype(dtype))
        addresses = np.array([X[j].ctypes.data for j in range(p)], dtype=np.int64)
        theta_t = rng.standard_normal((p, heads)) * 10.0 ** rng.integers(-5, 5, (p, heads))
        blocks = (m - 8) // low.MARGIN_BLOCK
        expected = np.full((heads, m), np.nan)
        for h in range(0, heads, low.HEAD_GROUP):
            low.margin_blocks_heads(addresses, 8, np.empty(0, dtype), theta_t, h, blocks, expected)
        got = np.full((heads, m), np.nan)
        head_margin_blocks(addresses, np.empty(0, dtype), theta_t, 8, blocks, got)
        rows = low.MARGIN_BLOCK * blocks
        np.testing.assert_array_equal(got[:, :rows], expected[:, :rows])
        single = np.full(m, np.nan)
        low.margin_blocks(addresses, 8, np.empty(0, dtype), theta_t[:, 5].copy(), blocks, single)
        np.testing.assert_array_equal(got[5, :rows], single[:rows])


def test_gradient_blocks_of_a_head_group_have_the_bits_of_each_heads_column_means():
    # gradient_blocks_heads (compiled LLVM IR: one load of each block of a column for the
    # HEAD_GROUP heads, the lane tree in registers) against its Python definition and against
    # _column_means of each head alone: the same sums in the same order, so equal bit for bit;
    # values over 16 orders of magnitude so that a different order would show
    from iwpfast._kernels import _lowlevel as low
    from iwpfast._kernels.sgd import head_gradient_blocks

    rng = np.random.default_rng(11)
    p, n_blocks, heads, row = 6, 5, 3 * low.HEAD_GROUP, 16
    m = low.LANES * n_blocks
    for dtype in (np.float32, np.float64):
        X = np.ascontiguousarray((rng.standard_normal((p, row + m + 7))
                                  * 10.0 ** rng.integers(-8, 8, (p, row + m + 7))).astype(dtype))
        addresses = np.array([X[j].ctypes.data for j in range(p)], dtype=np.int64)
        weights = rng.standard_normal((heads, 3 * m)) * 10.0 ** rng.integers(-5, 5, (heads, 3 * m))
        got = np.full((p, heads), np.nan)
        head_gradient_blocks(weights, addresses, row, np.empty(0, dtype), n_blocks, got)
        expected = np.full((p, heads), np.nan)
        for first in range(0, heads, low.HEAD_GROUP):
            low.gradient_blocks_heads(weights[first:first + low.HEAD_GROUP], addresses, row,
                                      np.empty(0, dtype), n_blocks, expected, first)
        np.testing.assert_array_equal(got, expected)
        for h in range(heads):
            column_sums = [sum(weights[h, i] * np.float64(X[j, row + i]) for i in range(m))
                           for j in range(p)]
            np.testing.assert_allclose(got[:, h], np.array(column_sums) / m, rtol=1e-12,
                                       atol=1e-300)
            lanes = np.zeros(low.LANES)
            for j in range(p):
                low.lane_blocks(weights[h], X[j, row:row + m], n_blocks, lanes)
                assert got[j, h] == low.lane_tree(lanes) / m


# ------------------------------------------------------------------------------ the driver
def _table(n=1500, seed=1):
    X, y = _data(n=n, p=3, seed=seed)
    return pa.table({"a": X[0], "b": X[1], "c": X[2], "y": y.astype(np.int8)})


def _driver_heads():
    cfgs = _grid("logistic", 5, p=3)
    return [Head(f"h{i}", cfg, ["a", "b", "c"], "y") for i, cfg in enumerate(cfgs)]


def test_the_driver_runs_heads_of_one_scan_as_one_unit_split_per_thread():
    heads = _driver_heads()
    other = Head("other", HeadConfig(loss="logistic", mode="iwp", n_features=2, noise_var=np.zeros(2),
                                     batch_size=16, truncation=2), ["a", "b"], "y")
    units = _units([*heads, other])
    assert [[h.name for h in u] for u in units] == [[h.name for h in heads], ["other"]]
    halves = _units(heads, parts=2)
    assert [len(u) for u in halves] == [2, 3] and sum(halves, []) == heads


@pytest.mark.filterwarnings("ignore::iwpfast.exceptions.NumericalWarning")
@pytest.mark.parametrize("head_threads", [1, 2])
def test_a_fused_pass_resumed_from_a_checkpoint_has_the_bits_of_single_head_passes(
        tmp_path, head_threads):
    path = tmp_path / "f.parquet"
    pq.write_table(_table(), path, row_group_size=400)
    kw = dict(progress=False, head_threads=head_threads)
    # one head per pass: the single-head kernel
    alone = {h.name: fit_stream(path, [h], chunk_rows=250, **kw).states[h.name]
             for h in _driver_heads()}
    calls = []

    def crash(steps, params):           # after each chunk's kernel calls: stop mid-stream
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt

    ck = tmp_path / "run.ckpt"
    with pytest.raises(KeyboardInterrupt):
        fit_stream(path, _driver_heads(), chunk_rows=250, checkpoint=ck, checkpoint_every=300,
                   trace_every=1, trace_callback=crash, **kw)
    resumed = fit_stream(path, _driver_heads(), chunk_rows=333, checkpoint=ck, resume=True, **kw)
    assert 0 < resumed.resumed_from_row < 1500
    for name, state in alone.items():
        for key in ("theta", "theta_avg", "intercept", "intercept_avg", "counters"):
            np.testing.assert_array_equal(getattr(resumed.states[name], key), getattr(state, key),
                                          err_msg=f"{name}.{key}")


def test_grid_heads_that_diverge_are_dropped_and_the_scan_goes_on(tmp_path, single_holdout):
    # a fused grid: the heads that diverge are left out from there on and the others finish the
    # same scan (one read, not one more per divergence), with the bits of a grid without them
    from iwpfast.sgd.grid import GridPoint
    from iwpfast.sgd.tuning import tune_stream
    path = tmp_path / "f.parquet"
    pq.write_table(_table(n=3000), path)
    points = [GridPoint(0.01, lr) for lr in (0.01, 0.05, 1e300, 2e300)]

    def make_config(point, n_rows):
        return HeadConfig(loss="logistic", mode="clean", n_features=3, noise_var=np.zeros(3),
                          batch_size=16, learning_rate=point.learning_rate, alpha=point.alpha,
                          radius=np.inf, truncation=2)

    kw = dict(loss="logistic", progress=False, noise=(np.zeros(3), None, 0.0))
    result = tune_stream(path, ["a", "b", "c"], "y", points, make_config, **kw)
    assert result.passes == 1.0
    assert not result.estimates[2].reliable and not result.estimates[3].reliable
    assert result.chosen in (0, 1)
    assert any("2 head(s) diverged" in note and "repeated" not in note for note in result.notes)
    alone = tune_stream(path, ["a", "b", "c"], "y", points[:2], make_config, **kw)
    for point in points[:2]:
        for key in ("theta", "theta_avg", "intercept", "intercept_avg", "counters"):
            np.testing.assert_array_equal(getattr(result.states[point.name], key),
                                          getattr(alone.states[point.name], key))
    assert [e.risk for e in result.estimates[:2]] == [e.risk for e in alone.estimates]


@pytest.mark.parametrize("engine", ["numba", "numpy"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("chunk_rows", [1000, 37])
def test_drop_diverged_keeps_the_other_heads_bits(engine, threads, chunk_rows):
    # heads of one unit diverge (steps of 10 and 3, at different batches) and the scan goes
    # on: every survivor equals its run without the dropped heads, bit for bit;
    # chunks of 37 rows put divergences in the batch completed from the carry
    table = _table(n=1500)
    steps = (0.01, 10.0, 0.05, 3.0, 0.02)

    def heads(keep):
        return [Head(f"h{i}", HeadConfig(loss="exponential", mode="clean", n_features=3,
                                         noise_var=np.zeros(3), batch_size=16, learning_rate=lr,
                                         alpha=0.0, radius=np.inf), ["a", "b", "c"], "y")
                for i, lr in enumerate(steps) if i in keep]
    kw = dict(progress=False, engine=engine, head_threads=threads, chunk_rows=chunk_rows)
    dropped = fit_stream(table, heads(range(5)), drop_diverged=True, **kw)
    assert set(dropped.diverged) == {"h1", "h3"}
    assert all(0 < row <= 1500 for row in dropped.diverged.values())
    alone = fit_stream(table, heads({0, 2, 4}), **kw)
    for name in ("h0", "h2", "h4"):
        for key in ("theta", "theta_avg", "intercept", "intercept_avg", "counters", "telemetry"):
            np.testing.assert_array_equal(getattr(dropped.states[name], key),
                                          getattr(alone.states[name], key), err_msg=name)
    with pytest.raises(DivergenceError):
        fit_stream(table, heads(range(5)), **kw)          # the default: a divergence stops it


@pytest.mark.parametrize("engine", ["numba", "numpy"])
def test_drop_diverged_still_refuses_non_finite_data(engine):
    table = _table(n=800)
    a = table.column("a").to_numpy().copy()
    a[500] = np.nan
    table = table.set_column(0, "a", pa.array(a))
    heads = [Head(f"h{i}", HeadConfig(loss="exponential", mode="clean", n_features=3,
                                      noise_var=np.zeros(3), batch_size=16, learning_rate=lr,
                                      radius=np.inf), ["a", "b", "c"], "y")
             for i, lr in enumerate((0.01, 3.0, 0.05))]
    with pytest.raises(InvalidInputError, match=r"non-finite value nan in column 'a'.*row 500"):
        fit_stream(table, heads, progress=False, engine=engine, drop_diverged=True)


def test_numeric_labels_map_to_class_indices_like_a_lookup_table():
    # the k-class estimators map every chunk's labels to indices: vectorized for numbers (a binary
    # search), the same indices as a lookup by value, and a label outside the classes named
    from iwpfast.estimates import class_indices
    rng = np.random.default_rng(4)
    classes = [7, -2, 0.5, 3]
    labels = rng.choice(np.array(classes, dtype=np.float64), size=1000)
    codes, k = class_indices(labels, classes)
    assert k == 4
    np.testing.assert_array_equal(codes, [classes.index(v) for v in labels.tolist()])
    ints = np.array([3, 7, -2, 7], dtype=np.int16)
    np.testing.assert_array_equal(class_indices(ints, [7, -2, 3])[0], [2, 0, 1, 0])
    with pytest.raises(InvalidInputError, match=r"y\[2\] = 1\.5 is not one of the classes"):
        class_indices(np.array([7.0, 3.0, 1.5, 9.0]), classes)
    with pytest.raises(InvalidInputError, match=r"y\[1\] = nan is not one of the classes"):
        class_indices(np.array([7.0, np.nan]), classes)


# float32 features with float32 labels compile kernel versions nothing else needs (a release
# stores int8 labels): the slow suite (and CI's kernel step) runs them
@pytest.mark.parametrize("dtype", [pytest.param(np.float32, marks=pytest.mark.slow),
                                   np.float64])
def test_discrete_laplace_heads_beside_gaussian_coded_ones_keep_their_bits(dtype):
    # IWP heads of the discrete Laplace law (tau and the direction d_j per head) in one scan with
    # a naive head of the same law (the kernel codes it as Gaussian: its noise row is shorter)
    from iwpfast.laplace import DiscreteLaplace
    law = DiscreteLaplace([0.375, 0.5, 0.0, 0.3, 0.45], [2.0**-19, 2.0**-18, 2.0**-18, 2.0**-19,
                                                        2.0**-18])
    X, y = _data(dtype=dtype)
    base = dict(loss="exponential", n_features=P, noise_var=law.variance, noise_law=law,
                batch_size=16, variance_cap=law.default_variance_cap(), label_keep_prob=0.88)
    cfgs = [HeadConfig(**base, mode="iwp", learning_rate=lr, alpha=0.01, fit_intercept=lr > 0.1)
            for lr in (0.02, 0.05, 0.1, 0.2, 0.4)]
    cfgs.insert(2, HeadConfig(**base, mode="naive", learning_rate=0.05))
    fused = _run(run_chunk_heads, finish_heads, cfgs, X, y, CHUNKS)
    single = _run(_one_by_one, _finish_each, cfgs, X, y, CHUNKS)
    _assert_same(fused, single)
    assert any(np.any(st.theta != 0) for st in fused)


def test_only_heads_that_need_them_compile_the_laplace_tau_and_the_sample_weights():
    # the kernel's laplace_law / weighted / class_boost arguments are None (their code is not
    # compiled) unless a head is an IWP head of the discrete Laplace law / the heads are weighted /
    # one-vs-rest heads have class weights; a naive head of the law runs as Gaussian (the kernel
    # reads its variances only)
    from iwpfast.laplace import DiscreteLaplace
    from iwpfast.sgd.engine import _pack_heads
    law = DiscreteLaplace([0.375, 0.5, 0.0, 0.3, 0.45], [2.0**-19] * P)
    gaussian = dict(loss="exponential", n_features=P, noise_var=np.full(P, 0.1), batch_size=16,
                    mode="iwp")
    laplace = dict(gaussian, noise_var=law.variance, noise_law=law,
                   variance_cap=law.default_variance_cap())
    naive_laplace = dict(laplace, mode="naive")

    def forms(*cfgs):
        return _pack_heads(cfgs, [HeadState.new(c) for c in cfgs])[5]

    assert forms(HeadConfig(**gaussian), HeadConfig(**gaussian, alpha=0.5)) == \
        (None, None, None, None)
    assert forms(HeadConfig(**naive_laplace)) == (None, None, None, None)
    assert forms(HeadConfig(**gaussian), HeadConfig(**laplace)) == (None, True, None, None)
    assert forms(HeadConfig(**gaussian, weighted=True)) == (None, None, True, None)
    # class weights of one-vs-rest heads: the boost array, and the table form even when a head's
    # table has two equal rows (public labels: all zeros)
    boosted = [HeadConfig(**gaussian, label_class=c, label_weights=(0.0, 0.0, 0.0, 0.0),
                          class_boost=(1.0, 2.0)) for c in range(2)]
    table_form, _, _, boost = forms(*boosted)
    assert table_form is True and boost.tolist() == [1.0, 2.0]
