"""The compiled hold-out scoring (``_kernels/score.py``) against its NumPy twin (``HeadScorer``'s
NumPy batch step): the same sums up to the order of floating-point additions."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from iwpfast.sgd import scoring as tuning
from iwpfast.sgd.state import HeadConfig, HeadState

P = 4


@pytest.fixture(autouse=True)
def _compiled_from_the_first_row(monkeypatch):
    # these tests compare the kernel with its twin on small tables: compile it whatever the size
    monkeypatch.setattr(tuning, "SCORE_KERNEL_MIN_VALUES", 0)


def _heads(loss, n_heads, *, seed, mode="iwp", keep=0.8, classes=None, target_noise_var=0.0):
    rng = np.random.default_rng(seed)
    configs, states = {}, {}
    for h in range(n_heads):
        cls = None if classes is None else h % classes
        cfg = HeadConfig(loss=loss, mode=mode, n_features=P,
                         noise_var=rng.uniform(0.01, 0.2, P),
                         label_keep_prob=None if loss == "squared_error" else keep,
                         target_noise_var=target_noise_var, label_class=cls)
        state = HeadState.new(cfg, theta0=rng.normal(0.0, 0.6, P))
        state.intercept[0] = rng.normal(0.0, 0.3)
        name = f"h{h}"
        configs[name], states[name] = cfg, state
    return list(configs), states, configs


def _table(n, *, seed, dtype, labels, weights=False):
    rng = np.random.default_rng(seed)
    cols = {f"x{j}": rng.uniform(-1.5, 1.5, n).astype(dtype) for j in range(P)}
    if labels == "pm1":
        cols["y"] = np.where(rng.random(n) < 0.4, 1.0, -1.0)
    elif labels == "classes":
        cols["y"] = rng.integers(0, 3, n).astype(np.int8)
    else:
        cols["y"] = rng.normal(0.0, 1.0, n)
    if weights:
        cols["w"] = rng.uniform(0.0, 3.0, n)
    table = pa.table(cols)
    # uneven batches: blocks of the kernel straddle no batch, sums merge across batches
    return pa.Table.from_batches(table.to_batches(max_chunksize=777))


def _score(table, names, states, configs, loss, engine, **kw):
    # sources re-cut a table to record_batch_rows: keep the 777-row batches _table made
    from iwpfast.io.sources import open_source
    source = open_source(table, record_batch_rows=777)
    return tuning.score_heads(source, [f"x{j}" for j in range(P)], "y", names, states, configs,
                              loss=loss, engine=engine, **kw)


def _assert_same(compiled, twin):
    (est_c, cov_c), (est_t, cov_t) = compiled, twin
    for a, b in zip(est_c, est_t, strict=True):
        assert a.n_rows == b.n_rows
        assert a.reliable == b.reliable
        for field in ("risk", "stderr", "effective_rows", "largest_share", "noise_energy"):
            assert getattr(a, field) == pytest.approx(getattr(b, field), rel=1e-10, abs=1e-14)
    finite = np.isfinite(cov_t)
    assert np.array_equal(finite, np.isfinite(cov_c))
    scale = np.max(np.abs(cov_t[finite]))
    np.testing.assert_allclose(cov_c[finite], cov_t[finite], rtol=1e-9, atol=1e-12 * scale)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("loss", ["exponential", "quadratic"])
@pytest.mark.parametrize("keep", [0.8, None])
@pytest.mark.parametrize("n_heads", [1, 6])
def test_binary_heads_match_the_twin(dtype, loss, keep, n_heads):
    names, states, configs = _heads(loss, n_heads, seed=1, keep=keep)
    table = _table(3001, seed=2, dtype=dtype, labels="pm1")
    _assert_same(_score(table, names, states, configs, loss, "numba"),
                 _score(table, names, states, configs, loss, "numpy"))


@pytest.mark.parametrize("loss", ["exponential", "quadratic"])
def test_one_vs_rest_heads_match_the_twin(loss):
    names, states, configs = _heads(loss, 6, seed=3, classes=3)
    table = _table(2500, seed=4, dtype=np.float32, labels="classes")
    label_table = (0.9, -0.1, -0.2, 1.2)
    compiled = _score(table, names, states, configs, loss, "numba", label_table=label_table)
    _assert_same(compiled, _score(table, names, states, configs, loss, "numpy",
                                  label_table=label_table))
    # heads of different classes are never compared
    assert not np.isfinite(compiled[1][0, 1]) and np.isfinite(compiled[1][0, 3])


def test_regression_and_weights_match_the_twin():
    names, states, configs = _heads("squared_error", 4, seed=5, target_noise_var=0.3)
    table = _table(2100, seed=6, dtype=np.float64, labels="targets", weights=True)
    _assert_same(_score(table, names, states, configs, "squared_error", "numba",
                        sample_weight="w"),
                 _score(table, names, states, configs, "squared_error", "numpy",
                        sample_weight="w"))


def test_mixed_column_dtypes_are_scored_in_float64():
    names, states, configs = _heads("exponential", 3, seed=7)
    table = _table(1500, seed=8, dtype=np.float32, labels="pm1")
    table = table.set_column(1, "x1", table.column("x1").cast(pa.float64()))
    _assert_same(_score(table, names, states, configs, "exponential", "numba"),
                 _score(table, names, states, configs, "exponential", "numpy"))


def test_small_hold_outs_are_scored_by_the_numpy_step(monkeypatch):
    # below SCORE_KERNEL_MIN_VALUES (row, head) values the kernel is not called (a first fit on
    # small data does not compile it); above, it is
    from iwpfast._kernels import score
    calls = []
    real = score.score_block_heads
    monkeypatch.setattr(score, "score_block_heads", lambda *a: calls.append(1) or real(*a))
    names, states, configs = _heads("exponential", 3, seed=10)
    table = _table(1000, seed=11, dtype=np.float32, labels="pm1")
    for limit, expected in ((3001, 0), (3000, 1)):
        monkeypatch.setattr(tuning, "SCORE_KERNEL_MIN_VALUES", limit)
        calls.clear()
        _score(table, names, states, configs, "exponential", "numba")
        assert (len(calls) > 0) == bool(expected)


def test_public_labels_skip_the_mirrored_term_where_it_overflows():
    # S~ = 1 (public labels): w_-z = 0, and exp(-tau + z) overflows at z = 800; the value is
    # exp(-tau - z) alone (0 here), not 0 * inf = NaN
    names, states, configs = _heads("exponential", 2, seed=9, keep=None)
    for name in names:
        states[name].theta[:] = [400.0, 0.0, 0.0, 0.0]
        states[name].intercept[0] = 0.0
    table = pa.table({**{f"x{j}": np.full(64, 2.0 if j == 0 else 0.0) for j in range(P)},
                      "y": np.ones(64)})
    estimates, _ = _score(table, names, states, configs, "exponential", "numba")
    assert all(e.risk == 0.0 for e in estimates)


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="nothing is compiled")
def test_one_signature_per_column_dtype_whatever_arrow_hands_over():
    # warm_scoring (iwpfast warmup) compiles the signature that real scoring uses: read-only
    # float64 label and weight buffers from Arrow, int8 labels, float32 features
    from iwpfast._kernels import score
    tuning.warm_scoring(np.float32)
    compiled = len(score.score_block_heads.signatures)
    names, states, configs = _heads("exponential", 3, seed=12)
    for labels in ("pm1", "classes"):
        table = _table(700, seed=13, dtype=np.float32, labels=labels, weights=True)
        if labels == "classes":
            table = table.set_column(P, "y", pa.array(
                np.where(table.column("y").to_numpy() == 1, 1, -1).astype(np.int8)))
        _score(table, names, states, configs, "exponential", "numba", sample_weight="w")
    assert len(score.score_block_heads.signatures) == compiled


def _force_threads(monkeypatch, on: bool):
    from iwpfast.sgd import driver
    monkeypatch.setattr(tuning, "SCORE_THREADS_MIN_VALUES", 0 if on else 1 << 62)
    monkeypatch.setattr(driver, "usable_cores", lambda: 2)


@pytest.mark.parametrize("classes", [None, 3])
def test_two_scoring_threads_give_the_sums_of_one_to_rounding_and_the_same_bits_each_run(
        monkeypatch, classes):
    # a large hold-out is scored on two threads (odd batches on the second, merged at the end):
    # the estimates and the covariance are those of one thread up to the order of additions,
    # and repeatable bit for bit (which thread scores a batch depends on its position only)
    import threading
    names, states, configs = _heads("exponential", 6, seed=21, classes=classes)
    table = _table(3001, seed=22, dtype=np.float32,
                   labels="pm1" if classes is None else "classes")    # 4 batches of 777 rows
    _force_threads(monkeypatch, False)
    one = _score(table, names, states, configs, "exponential", "numba")
    _force_threads(monkeypatch, True)
    seen = []
    real = tuning.HeadScorer._add_compiled
    monkeypatch.setattr(tuning.HeadScorer, "_add_compiled",
                        lambda self, batch: seen.append(threading.current_thread().name)
                        or real(self, batch))
    two = _score(table, names, states, configs, "exponential", "numba")
    assert seen.count("iwpfast-score") == 2 and len(seen) == 4
    _assert_same(two, one)
    again = _score(table, names, states, configs, "exponential", "numba")
    for a, b in zip(two[0], again[0], strict=True):
        assert (a.risk, a.stderr) == (b.risk, b.stderr)
    np.testing.assert_array_equal(two[1], again[1])


def test_an_error_on_the_second_scoring_thread_reaches_the_caller(monkeypatch):
    import threading
    names, states, configs = _heads("exponential", 3, seed=23)
    table = _table(3001, seed=24, dtype=np.float64, labels="pm1")
    _force_threads(monkeypatch, True)
    real = tuning.HeadScorer._add_compiled

    def failing(self, batch):
        if threading.current_thread().name == "iwpfast-score":
            raise RuntimeError("scoring failed on the second thread")
        return real(self, batch)
    monkeypatch.setattr(tuning.HeadScorer, "_add_compiled", failing)
    with pytest.raises(RuntimeError, match="second thread"):
        _score(table, names, states, configs, "exponential", "numba")
    assert not any(t.name == "iwpfast-score" for t in threading.enumerate())


@pytest.mark.parametrize("n_heads", [5, 15])
def test_padded_heads_have_the_bits_of_heads_scored_apart(n_heads):
    # G = 5 or 15 heads are scored padded to a whole vector (8, 16: padded_heads); every sum of
    # a head, and every comoment of a pair, is computed elementwise per head, so it has the bits
    # of the same head scored alone (G = 1) or in a pair (G = 2: not padded)
    from iwpfast._kernels import score

    assert score.padded_heads(n_heads) % score.HEAD_VECTOR == 0
    assert score.padded_heads(2) == 2 and score.padded_heads(25) == 25
    rng = np.random.default_rng(5)
    n = 1500                                    # 2 full blocks of 512 rows and a partial one
    X = np.ascontiguousarray(rng.uniform(-1.5, 1.5, (P, n)).astype(np.float32))
    addresses = np.array([X[j].ctypes.data for j in range(P)], dtype=np.int64)
    y = np.where(rng.random(n) < 0.4, 1.0, -1.0)
    theta = rng.normal(0.0, 0.6, (P, n_heads))
    intercept = rng.normal(0.0, 0.3, n_heads)
    tau = rng.uniform(0.0, 0.2, n_heads)

    def scored(heads):
        g = len(heads)
        sums = [np.zeros(g) for _ in range(5)]
        comoment = np.zeros((g, g))
        score.score_block_heads(addresses, np.empty(0, np.float32), n, y, np.empty(0),
                                np.ascontiguousarray(theta[:, heads]), intercept[heads].copy(),
                                tau[heads].copy(), 0, np.array([0.8, 0.2, 0.8, 0.2]), -1.0, 0.0,
                                sums[0], sums[1], comoment, sums[2], sums[3], sums[4], 0)
        return sums, comoment

    together, comoment = scored(list(range(n_heads)))
    for h in range(n_heads):
        alone, _ = scored([h])
        for a, b in zip(together, alone, strict=True):
            assert a[h] == b[0]
    for a, b in [(0, 1), (1, n_heads - 1), (n_heads - 2, 2)]:
        _, pair = scored([a, b])
        assert comoment[a, b] == pair[0, 1] and comoment[b, a] == pair[1, 0]
        assert comoment[a, a] == pair[0, 0]


def test_up_to_four_heads_are_scored_across_the_rows_with_the_bits_of_a_vector_of_heads():
    # FEW_HEADS (4) heads or fewer are scored a head at a time in vectors of rows (the final
    # scoring of a race's survivors); each of their sums and comoments has the bits of the same
    # heads scored among 15 (vectors of heads, padded to 16)
    from iwpfast._kernels import score

    assert score.FEW_HEADS == 4 and score.padded_heads(4) == 4 and score.padded_heads(5) == 8
    rng = np.random.default_rng(7)
    n = 1300
    X = np.ascontiguousarray(rng.uniform(-1.5, 1.5, (P, n)))
    addresses = np.array([X[j].ctypes.data for j in range(P)], dtype=np.int64)
    y = np.where(rng.random(n) < 0.4, 1.0, -1.0)
    weights = rng.uniform(0.0, 2.0, n)
    theta = rng.normal(0.0, 0.6, (P, 15))
    intercept = rng.normal(0.0, 0.3, 15)
    tau = rng.uniform(0.0, 0.2, 15)

    def scored(heads, loss):
        g = len(heads)
        sums = [np.zeros(g) for _ in range(5)]
        comoment = np.zeros((g, g))
        score.score_block_heads(addresses, np.empty(0), n, y, weights,
                                np.ascontiguousarray(theta[:, heads]), intercept[heads].copy(),
                                tau[heads].copy(), loss, np.array([0.8, -0.2, 0.7, -0.3]), -1.0,
                                0.3, sums[0], sums[1], comoment, sums[2], sums[3], sums[4], 0)
        return sums, comoment

    for loss in (0, 1, 3):      # exponential, quadratic, squared error (abi.LOSS_CODES)
        together, comoment = scored(list(range(15)), loss)
        for few in ([3], [2, 9], [0, 5, 14], [1, 4, 7, 11]):
            sums, pair = scored(few, loss)
            for a, b in zip(together, sums, strict=True):
                np.testing.assert_array_equal(a[few], b)
            if len(few) > 1:            # one head keeps no comoment (its m2 is its variance)
                np.testing.assert_array_equal(comoment[np.ix_(few, few)], pair)
