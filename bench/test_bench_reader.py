"""pytest-benchmark: reader alone and one-head pass on a 2 M-row in-memory-size Parquet file.

    python -m pytest -o addopts="" bench/test_bench_reader.py -p no:cacheprovider

(``-o addopts=""`` lifts the project defaults ``--benchmark-skip`` and ``-n auto``: benchmarks
run in this process.)

(Not collected by the default test run: testpaths = tests.)  The large-file figures come from
bench/stream.py; this file tracks regressions of the per-chunk overhead at a small size.
"""
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iwpfast.io.reader import ChunkReader
from iwpfast.sgd.driver import Head, fit_stream
from iwpfast.sgd.state import HeadConfig

N, P = 2_000_000, 10
FEATURES = [f"x{j}" for j in range(P)]


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    rng = np.random.default_rng(0)
    cols = {f: rng.standard_normal(N, dtype=np.float32) for f in FEATURES}
    cols["y"] = np.where(rng.random(N) < 0.5, 1, -1).astype(np.int8)
    p = tmp_path_factory.mktemp("bench") / "b.parquet"
    pq.write_table(pa.table(cols), p, compression="none")
    return str(p)


def test_reader_only(benchmark, path):
    rows = benchmark(lambda: sum(c.n_rows for c in ChunkReader(path, [FEATURES], ["y"])))
    assert rows == N


def test_one_head_pass(benchmark, path):
    cfg = HeadConfig(loss="exponential", mode="iwp", n_features=P, noise_var=np.full(P, 0.25),
                     batch_size=128, learning_rate=1e-3, radius=2.0)
    heads = [Head("iwp", cfg, FEATURES, "y")]
    fit_stream(path, heads, progress=False)  # compile outside the timing
    res = benchmark(lambda: fit_stream(path, heads, progress=False))
    assert res.n_rows == N
