"""Release benchmark: rows/s of the local-DP release, next to its baselines measured in the same run.

    python bench/release.py                      # 1e7 rows, p = 10, float32
    python bench/release.py --rows 2000000 --repeat 5

Measures (medians over --repeat runs, wall clock; the machine may be shared, so compare ratios):
1. ``noise floor``: ``Generator(SFC64).standard_normal(float32, out=...)`` for rows x p values in
   cache-sized blocks, one thread, and two threads with independent streams (half the rows each)
   -- the work no release can avoid, and its ceiling on this machine at this moment.
2. ``in-memory``: :func:`iwpfast.privacy.privatize` on p float32 columns + a {0,1} label, with
   the fused Numba kernels and with the NumPy path (``kernel=``), 1 and 2 threads, bound = sqrt(p)
   (the cube fits in the ball: no clipping) and bound = 1 (most vectors clipped).  The kernels
   are compiled/loaded by a warm-up call first: the one-off cost is printed separately.
3. ``parquet read+write``: pyarrow alone, ``ParquetFile(pre_buffer=False).iter_batches`` into a
   ``ParquetWriter`` with the release's settings (features uncompressed, label snappy with
   dictionary), and with snappy on every column (pyarrow's default codec).
4. ``parquet release``: :func:`iwpfast.privacy.release` Parquet -> Parquet, same data, fused and
   NumPy path.  ``ratio`` = release time / read+write time (goal <= 1.5).
The input file is generated into a temporary directory and deleted afterwards (never committed).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


_CPU = []  # median CPU seconds (user + system, user, system; all threads) of the last median_time call


def median_time(fn, repeat):
    """Median wall time; the median CPU time goes to _CPU (robust to other jobs on the machine)."""
    import resource

    times, cpus = [], []
    for _ in range(repeat):
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        cpus.append((r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime))
    user, system = (np.array(c) for c in zip(*cpus, strict=True))
    _CPU[:] = [float(np.median(user + system)), float(np.median(user)), float(np.median(system))]
    return float(np.median(times))


def make_columns(rows, p, seed=0):
    rng = np.random.default_rng(seed)
    cols = {f"x{j}": rng.uniform(0.0, 100.0, rows).astype(np.float32) for j in range(p)}
    cols["y"] = rng.integers(0, 2, rows).astype(np.int8)
    return cols


def noise_floor(rows, p):
    rng = np.random.Generator(np.random.SFC64(0))
    block = 16384
    buf = np.empty(p * block, dtype=np.float32)

    def run():
        for _ in range(0, rows, block):
            rng.standard_normal(dtype=np.float32, out=buf)
    return run


def noise_floor_threads(rows, p, threads=2):
    """The noise alone on ``threads`` threads, independent streams, half the rows each."""
    from concurrent.futures import ThreadPoolExecutor

    rngs = [np.random.Generator(np.random.SFC64(s)) for s in np.random.SeedSequence(0).spawn(threads)]
    block = 16384
    bufs = [np.empty(p * block, dtype=np.float32) for _ in range(threads)]
    pool = ThreadPoolExecutor(threads)

    def part(k):
        for _ in range(0, rows // threads, block):
            rngs[k].standard_normal(dtype=np.float32, out=bufs[k])

    def run():
        list(pool.map(part, range(threads)))
    return run


def parquet_read_write(src, dst, compression):
    import pyarrow.parquet as pq

    def run():
        pf = pq.ParquetFile(src, pre_buffer=False)
        writer = pq.ParquetWriter(dst, pf.schema_arrow, compression=compression,
                                  use_dictionary=["y"], store_schema=False)
        for batch in pf.iter_batches(batch_size=1 << 18):
            writer.write_batch(batch)
        writer.close()
    return run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--p", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-files", action="store_true")
    args = parser.parse_args(argv)

    import pyarrow as pa
    import pyarrow.parquet as pq

    from iwpfast.privacy import ReleaseSpec, privatize, release

    rows, p = args.rows, args.p
    cols = make_columns(rows, p)
    names = [f"x{j}" for j in range(p)]
    ranges = {n: (0.0, 100.0) for n in names}
    results = []

    def record(name, seconds, baseline=None):
        results.append((name, seconds, rows / seconds / 1e6, None if baseline is None else seconds / baseline,
                        *_CPU))

    floor = median_time(noise_floor(rows, p), args.repeat)
    record("noise floor (1 thread)", floor)
    floor2 = median_time(noise_floor_threads(rows, p, 2), args.repeat)
    record("noise floor (2 threads)", floor2)
    X = {n: cols[n] for n in names}
    small = {n: v[:70000] for n, v in X.items()}
    t0 = time.perf_counter()  # first Numba dispatch in this process: set-up + cache load/compile
    privatize(small, cols["y"][:70000], ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
              ranges=ranges, features=tuple(names), label="y"), kernel="fused")
    warmup = time.perf_counter() - t0
    for bound, label in ((math.sqrt(p), "sqrt(p)"), (1.0, "1")):
        spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=bound, epsilon_y=1.0, ranges=ranges,
                           features=tuple(names), label="y")
        for kernel in ("fused", "numpy"):
            for threads in (1, 2):
                def run(spec=spec, threads=threads, kernel=kernel):
                    privatize(X, cols["y"], spec, threads=threads, kernel=kernel)
                t = median_time(run, args.repeat)
                record(f"in-memory {kernel}, bound {label}, {threads} thr", t,
                       floor2 if threads == 2 else floor)

    if not args.skip_files:
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
            src = os.path.join(tmp, "in.parquet")
            pq.write_table(pa.table(cols), src, row_group_size=1 << 20, compression="snappy")
            del cols
            # the release's own output settings: features uncompressed, label snappy
            same = {n: "none" for n in names} | {"y": "snappy"}
            rw = median_time(parquet_read_write(src, os.path.join(tmp, "copy.parquet"), same), args.repeat)
            record("parquet read+write (pyarrow alone)", rw)
            rw_snappy = median_time(parquet_read_write(src, os.path.join(tmp, "copy.parquet"), "snappy"),
                                    args.repeat)
            record("  same, all columns snappy", rw_snappy)
            spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=math.sqrt(p), epsilon_y=1.0,
                               ranges=ranges, features=tuple(names), label="y")
            out = os.path.join(tmp, "release.parquet")
            for kernel in ("fused", "numpy"):
                def run_release(kernel=kernel):
                    release(src, out, spec, overwrite=True, kernel=kernel)
                rel = median_time(run_release, args.repeat)
                record(f"parquet release {kernel}, bound sqrt(p)", rel, rw)

    print(f"\nrelease benchmark: {rows:,} rows, p = {p}, float32, median of {args.repeat}, "
          f"{os.cpu_count()} cores")
    print(f"{'measurement':44s} {'seconds':>8s} {'M rows/s':>9s} {'ratio':>6s} {'CPU s':>6s} "
          f"{'M rows/CPU s':>12s} {'user ns/row':>11s} {'sys ns/row':>10s}")
    for name, seconds, mrows, ratio, cpu, user, system in results:
        r = "" if ratio is None else f"{ratio:6.2f}"
        print(f"{name:44s} {seconds:8.3f} {mrows:9.2f} {r:>6s} {cpu:6.3f} {rows / cpu / 1e6:12.2f} "
              f"{user / rows * 1e9:11.1f} {system / rows * 1e9:10.1f}")
    print("ratio: in-memory = wall time / noise floor with the same threads; "
          "release = wall time / pyarrow read+write.")
    print(f"first fused call in this process (Numba set-up, cache load or compile): {warmup:.2f} s")
    print("CPU s: user + system seconds of all threads (other jobs on the machine inflate it much less "
          "than the wall time); sys is mostly the first touch (page faults) of the output array.")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return results


if __name__ == "__main__":
    main()
