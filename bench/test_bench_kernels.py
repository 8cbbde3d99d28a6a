"""pytest-benchmark timings of one exact kernel pass (compile excluded by ``warmup``).

    python -m pytest bench/test_bench_kernels.py -o addopts="" --benchmark-columns=median,rounds

(``-o addopts=""`` lifts the project default ``--benchmark-skip``.)

Rows/s = rows / the reported mean; ``bench/kernels.py`` prints the full table with NumPy ratios.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]

from kernels import config, make_data  # noqa: E402
from numpy_baseline import numpy_pass  # noqa: E402

from iwpfast.sgd.engine import finish, run_chunk, warmup  # noqa: E402
from iwpfast.sgd.state import HeadState  # noqa: E402

ROWS = 1_000_000


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    warmup()


@pytest.mark.parametrize("loss", ["exponential", "quadratic", "logistic", "squared_error"])
@pytest.mark.parametrize("p", [2, 10, 100])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_kernel_pass(benchmark, loss, p, dtype):
    rows = ROWS if p <= 10 else ROWS // 4
    cfg = config(loss, p, 128)
    X, y = make_data(p, rows, dtype, loss)

    def one_pass():
        state = HeadState.new(cfg)
        run_chunk(cfg, state, X, y)
        finish(cfg, state)
        return state

    state = benchmark(one_pass)
    benchmark.extra_info["rows"] = rows
    assert state.step == -(-rows // 128) and np.all(np.isfinite(state.theta))


@pytest.mark.parametrize("p", [2, 10, 100])
def test_numpy_baseline_pass(benchmark, p):
    rows = 50_000
    cfg = config("exponential", p, 128)
    X, y = make_data(p, rows, np.float32, "exponential")
    theta = benchmark(numpy_pass, cfg, X, y)
    benchmark.extra_info["rows"] = rows
    assert np.all(np.isfinite(theta))
