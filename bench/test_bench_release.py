"""pytest-benchmark of the release: in memory, Parquet -> Parquet, and their baselines.

    python -m pytest -o addopts="" bench/test_bench_release.py --benchmark-only -p no:cacheprovider

(Not collected by the default test run: testpaths = tests.)  2 M rows, p = 10 float32; the
10 M-row table with ratios comes from ``python bench/release.py``.
"""
import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iwpfast.privacy import ReleaseSpec, privatize, release

N, P = 2_000_000, 10
FEATURES = [f"x{j}" for j in range(P)]
RANGES = {f: (0.0, 100.0) for f in FEATURES}


@pytest.fixture(scope="module")
def columns():
    rng = np.random.default_rng(0)
    cols = {f: rng.uniform(0, 100, N).astype(np.float32) for f in FEATURES}
    cols["y"] = rng.integers(0, 2, N).astype(np.int8)
    return cols


@pytest.fixture(scope="module")
def path(tmp_path_factory, columns):
    p = tmp_path_factory.mktemp("bench") / "in.parquet"
    pq.write_table(pa.table(columns), p, row_group_size=1 << 20)
    return str(p)


def spec(bound=None, noise="discrete"):
    bound = math.sqrt(P) if bound is None else bound
    return ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=bound, epsilon_y=1.0, ranges=RANGES,
                       features=tuple(FEATURES), label="y", noise=noise)


def test_noise_floor(benchmark):
    rng = np.random.Generator(np.random.SFC64(0))
    buf = np.empty(P * 26214, dtype=np.float32)

    def run():
        for _ in range(0, N, 26214):
            rng.standard_normal(dtype=np.float32, out=buf)
    benchmark(run)


@pytest.mark.parametrize("noise", ["discrete", "float"])
@pytest.mark.parametrize("kernel", ["numba", "numpy"])
@pytest.mark.parametrize("threads", [1, 2])
def test_in_memory(benchmark, columns, threads, kernel, noise):
    X = {f: columns[f] for f in FEATURES}
    s = spec(noise=noise)
    privatize({f: v[:1000] for f, v in X.items()}, columns["y"][:1000], s, engine=kernel)  # load kernels
    Xt, yt = benchmark(lambda: privatize(X, columns["y"], s, threads=threads, engine=kernel))
    assert Xt.shape == (N, P) and yt.shape == (N,)


def test_parquet_read_write_baseline(benchmark, path, tmp_path):
    out = str(tmp_path / "copy.parquet")

    def run():
        pf = pq.ParquetFile(path, pre_buffer=False)
        same = {f: "none" for f in FEATURES} | {"y": "snappy"}  # the release's output settings
        w = pq.ParquetWriter(out, pf.schema_arrow, compression=same, use_dictionary=["y"],
                             store_schema=False, write_page_checksum=True)
        for b in pf.iter_batches(batch_size=1 << 18):
            w.write_batch(b)
        w.close()
    benchmark(run)
    assert pq.read_metadata(out).num_rows == N


@pytest.mark.parametrize("noise", ["discrete", "float"])
@pytest.mark.parametrize("kernel", ["numba", "numpy"])
def test_parquet_release(benchmark, path, tmp_path, kernel, noise):
    out = str(tmp_path / "rel.parquet")
    res = benchmark(lambda: release(path, out, spec(noise=noise), overwrite=True, engine=kernel))
    assert res.rows_written == N and os.path.exists(out)
