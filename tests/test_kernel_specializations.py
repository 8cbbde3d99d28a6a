"""What the first fit compiles (issue 10, "first run in seconds"): one copy of the batch update
per (column dtype, label dtype), no k-class table form for a binary head, no logistic code for the
other losses, no kernel of its own for the end of a stream; and the narrowing of the carried rows
that this relies on stays exact."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from iwpfast.sgd.engine import finish, run_chunk
from iwpfast.sgd.state import HeadConfig, HeadState
from tests.conftest import make_head_config

ROOT = Path(__file__).resolve().parents[1]
JIT = os.environ.get("NUMBA_DISABLE_JIT") != "1"


def _config(**kw) -> HeadConfig:
    """conftest's head config with batches of 32, noise variance 0.1, averaging from the start
    and private labels (S = 0.8)."""
    return make_head_config(**{"noise_var": np.full(3, 0.1), "batch_size": 32, "alpha": 0.0,
                               "average_start": 0, "label_keep_prob": 0.8, **kw})


def _assert_same_bits(a: HeadState, b: HeadState) -> None:
    for name in ("theta", "theta_avg", "intercept", "telemetry", "counters"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.parametrize("weighted", [False, True])
def test_float64_chunk_then_float32_chunk_equals_one_float64_pass(weighted):
    # the carried rows of a float64 chunk are not float32 values: the float32 chunk that completes
    # their batch must not round them (it runs in float64), so the stream equals one float64 pass;
    # sample weights are carried with the features and follow them
    cfg = _config(weighted=weighted)
    rng = np.random.default_rng(7)
    first = rng.standard_normal((3, 50))                       # 50 = 32 + 18 carried rows
    second = rng.standard_normal((3, 70)).astype(np.float32)
    y = np.where(rng.random(120) < 0.5, -1.0, 1.0)
    w = rng.uniform(0.5, 2.0, 120) if weighted else None
    streamed = HeadState.new(cfg)
    run_chunk(cfg, streamed, first, y[:50], None if w is None else w[:50])
    run_chunk(cfg, streamed, second, y[50:].astype(np.float32),
              None if w is None else w[50:].astype(np.float32))
    finish(cfg, streamed)
    whole = HeadState.new(cfg)
    w_whole = None if w is None else np.concatenate([w[:50], w[50:].astype(np.float32)])
    run_chunk(cfg, whole, np.concatenate([first, second.astype(np.float64)], axis=1), y, w_whole)
    finish(cfg, whole)
    _assert_same_bits(streamed, whole)


def test_float32_stream_carries_through_float32_code_with_the_bits_of_float64():
    # float32 rows carried between chunks are narrowed back exactly: a float32 stream cut at odd
    # places equals the same rows as one float64 chunk (products and sums are float64 either way)
    rng = np.random.default_rng(8)
    X = rng.standard_normal((3, 301)).astype(np.float32)
    y = np.where(rng.random(301) < 0.5, -1.0, 1.0).astype(np.float32)
    _cut_stream_equals_one_float64_pass(_config(), X, y)


def _cut_stream_equals_one_float64_pass(cfg, X, y) -> HeadState:
    """X, y streamed in chunks cut at odd places (rows carried between them) give the bits of the
    same rows as one float64 chunk; returns the streamed state."""
    streamed = HeadState.new(cfg)
    for start, stop in ((0, 5), (5, 77), (77, 300), (300, 301)):
        run_chunk(cfg, streamed, X[:, start:stop], y[start:stop])
    finish(cfg, streamed)
    whole = HeadState.new(cfg)
    run_chunk(cfg, whole, X.astype(np.float64), y.astype(np.float64))
    finish(cfg, whole)
    _assert_same_bits(streamed, whole)
    return streamed


@pytest.mark.parametrize("features", [np.float32, np.float64])
def test_int8_labels_are_read_in_place_with_the_bits_of_float64(features):
    # a release's labels and the facade's classification labels are int8 +-1: the wrapper hands
    # them to the kernel as they are (no float64 copy), the carried rows narrow back to int8
    # exactly, and a stream cut at odd places equals one float64 pass
    from iwpfast.sgd import engine
    cfg = _config(fit_intercept=True)
    rng = np.random.default_rng(9)
    X = rng.standard_normal((3, 301)).astype(features)
    y = np.where(rng.random(301) < 0.3, -1, 1).astype(np.int8)
    assert engine._labels(cfg, y, 301) is y
    streamed = _cut_stream_equals_one_float64_pass(cfg, X, y)
    assert streamed.step == 301 // 32 + 1


@pytest.mark.skipif(not JIT, reason="NUMBA_DISABLE_JIT: nothing is compiled")
def test_finish_runs_in_a_compiled_specialization():
    from iwpfast._kernels import sgd
    cfg = _config(n_features=2, noise_var=np.zeros(2), batch_size=8)
    state = HeadState.new(cfg)
    X = np.ones((2, 13), np.float32)
    run_chunk(cfg, state, X, np.ones(13, np.float32))
    compiled = len(sgd.sgd_chunk.signatures)
    assert state.carry_n == 5
    finish(cfg, state)
    assert state.carry_n == 0 and state.step == 2
    assert len(sgd.sgd_chunk.signatures) == compiled      # the end of the stream compiled nothing


PROBE = """
import inspect, json, numpy as np, iwpfast
from iwpfast._kernels import score, sgd
X = np.random.default_rng(0).standard_normal((1000, 3))
iwpfast.IWPClassifier(progress=False).fit(X, (X[:, 0] > 0).astype(int))
counts = {name: len(getattr(sgd, name).signatures) for name in
          ("sgd_chunk", "_batch", "_table_row_scalars", "_logistic_scalars",
           "sgd_chunk_heads", "_heads_batch")}
counts["score_block_heads"] = len(score.score_block_heads.signatures)
parameters = list(inspect.signature(sgd.sgd_chunk_heads.py_func).parameters)
pruned = {name: [str(s[parameters.index(name)]) for s in sgd.sgd_chunk_heads.signatures]
          for name in ("table_form", "classes", "eulerian", "laplace_law", "weighted")}
print(json.dumps({"counts": counts, "pruned": pruned}))
"""


# a fresh process compiling into an empty cache (about 14 s): run on purpose with -m slow, and by
# CI's kernel step
@pytest.mark.slow
@pytest.mark.skipif(not JIT, reason="NUMBA_DISABLE_JIT: nothing is compiled")
def test_a_binary_first_fit_compiles_one_batch_step_and_no_table_or_logistic_code(tmp_path):
    # a fresh process with an empty kernel cache, as bench/first_fit.py measures: the default
    # (exponential) binary fit ('auto': its grid of heads runs in the several-heads kernel) types
    # and lowers that kernel's batch step once, without the k-class table form, the logistic code,
    # the one-vs-rest signs, the discrete Laplace tau, the sample weights (None-typed arguments:
    # Numba prunes their branches before typing), the single-head kernel and the hold-out
    # scoring kernel (a small hold-out is scored by its NumPy step)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_DISABLE_JIT",)}
    env.update(IWPFAST_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["pruned"] == {name: ["none"] for name in
                                ("table_form", "classes", "eulerian", "laplace_law", "weighted")}
    compiled = result["counts"]
    assert compiled == {"sgd_chunk": 0, "_batch": 0, "_table_row_scalars": 0,
                        "_logistic_scalars": 0, "sgd_chunk_heads": 1, "_heads_batch": 1,
                        "score_block_heads": 0}


@pytest.mark.skipif(not JIT, reason="NUMBA_DISABLE_JIT: nothing is compiled")
def test_finish_of_one_vs_rest_heads_runs_in_a_compiled_specialization():
    from iwpfast._kernels import sgd
    from iwpfast.sgd.engine import finish_heads, run_chunk_heads
    cfgs = [_config(n_features=2, noise_var=np.zeros(2), batch_size=8, label_keep_prob=None,
                    label_class=c) for c in range(3)]
    states = [HeadState.new(cfg) for cfg in cfgs]
    codes = np.arange(13, dtype=np.int8) % 3
    run_chunk_heads(cfgs, states, np.ones((2, 13), np.float32), codes)
    compiled = len(sgd.sgd_chunk_heads.signatures)
    finish_heads(cfgs, states)
    assert all(st.carry_n == 0 and st.step == 2 for st in states)
    assert len(sgd.sgd_chunk_heads.signatures) == compiled    # the end of the stream compiled nothing


@pytest.mark.skipif(not JIT, reason="nothing is compiled with NUMBA_DISABLE_JIT=1")
def test_warmup_with_heads_compiles_the_several_heads_kernel_of_its_dtypes():
    # iwpfast demo warms the scan's kernel before its clock starts (its rows/s were the compile's).
    # float64 features with int8 labels: the specialization of an 'auto' fit of arrays, which
    # `iwpfast warmup` (and so a cold suite run) compiles anyway; float32 features with float64
    # labels, used here before, were a specialization of the several-heads kernel that nothing
    # else needs (~25 s of compiling in a cold run)
    from iwpfast._kernels import sgd
    from iwpfast.sgd.engine import warmup

    def heads_signatures():
        return {(str(s[1].dtype), str(s[3].dtype)) for s in sgd.sgd_chunk_heads.signatures}
    warmup(dtypes=("float64",), label_dtypes=("int8",), losses=("exponential",))
    without = heads_signatures()
    warmup(dtypes=("float64",), label_dtypes=("int8",), losses=("exponential",), heads=True)
    assert ("float64", "int8") in heads_signatures()
    assert heads_signatures() - without <= {("float64", "int8")}
