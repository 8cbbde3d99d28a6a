"""Release benchmark: rows/s of the local-DP release for both noise laws, next to their baselines,
all measured in the same run and interleaved (round robin over the measurements, median per
measurement), so that the load of a shared machine hits every measurement alike.

    python bench/release.py                      # 1e7 rows, p = 10, float32, 2 threads
    python bench/release.py --rows 2000000 --repeat 5 --numpy

Measures (medians over --repeat rounds, wall clock and CPU seconds; compare the ratios):
1. floors: ``Generator(SFC64).standard_normal(float32)`` for rows x p values on 2 threads (the
   float law's unavoidable work) and the AES-CTR keystream for 2 words per value on 2 threads
   (the discrete law's randomness);
2. ``in-memory``: :func:`iwpfast.privacy.privatize` on p float32 columns + a {0,1} label, fused
   kernels, 2 threads, bound = sqrt(p) (no clipping) and bound = 1 (most vectors clipped), with
   noise="discrete" (default: exact discrete Gaussian on a grid, AES-CTR keystream) and
   noise="float"; ``--numpy`` adds the NumPy paths.  Kernels are loaded by a warm-up call first;
3. ``parquet read+write``: pyarrow alone, ``ParquetFile(pre_buffer=False).iter_batches`` into a
   ``ParquetWriter`` with the release's settings (features uncompressed, label snappy with
   dictionary, page checksums as the release writes them);
4. ``parquet release``: :func:`iwpfast.privacy.release` Parquet -> Parquet, both laws.
Goals printed at the end: discrete >= 0.75 x float rows/s (in memory and Parquet -> Parquet), and
Parquet -> Parquet release <= 1.5 x pyarrow read+write.  The input file is generated into a
temporary directory and deleted afterwards (never committed).
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


def make_columns(rows, p, seed=0):
    rng = np.random.default_rng(seed)
    cols = {f"x{j}": rng.uniform(0.0, 100.0, rows).astype(np.float32) for j in range(p)}
    cols["y"] = rng.integers(0, 2, rows).astype(np.int8)
    return cols


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


def keystream_floor(rows, p, threads=2):
    """AES-CTR keystream, 2 words per value (the discrete sampler's ~2.02 words a value), on
    ``threads`` threads with independent streams."""
    from concurrent.futures import ThreadPoolExecutor

    from iwpfast.privacy.randomness import NoiseKey

    key = NoiseKey.from_os_entropy()
    block = 1 << 15
    bufs = [np.empty(block, dtype=np.uint64) for _ in range(threads)]
    pool = ThreadPoolExecutor(threads)

    def part(k):
        stream = key.stream(k)
        for _ in range(0, 2 * rows * p // threads, block):
            stream.fill(bufs[k])

    def run():
        list(pool.map(part, range(threads)))
    return run


def interleaved(measurements, repeat):
    """{name: fn} -> {name: (median wall s, median CPU s, user s, system s)}, round robin."""
    import resource

    samples = {name: [] for name in measurements}
    for _ in range(repeat):
        for name, fn in measurements.items():
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            fn()
            wall = time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            samples[name].append((wall, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime))
    out = {}
    for name, rows in samples.items():
        wall, user, system = (np.array(c) for c in zip(*rows, strict=True))
        out[name] = (float(np.median(wall)), float(np.median(user + system)), float(np.median(user)),
                     float(np.median(system)))
    return out


def parquet_read_write(src, dst, compression):
    import pyarrow.parquet as pq

    def run():
        pf = pq.ParquetFile(src, pre_buffer=False)
        writer = pq.ParquetWriter(dst, pf.schema_arrow, compression=compression,
                                  use_dictionary=["y"], store_schema=False, write_page_checksum=True)
        for batch in pf.iter_batches(batch_size=1 << 18):
            writer.write_batch(batch)
        writer.close()
    return run


def main(argv=None):
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--p", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--numpy", action="store_true", help="also the NumPy paths (slow)")
    parser.add_argument("--skip-files", action="store_true")
    args = parser.parse_args(argv)

    import pyarrow as pa
    import pyarrow.parquet as pq

    from iwpfast.privacy import ReleaseSpec, privatize, release

    rows, p, threads = args.rows, args.p, args.threads
    cols = make_columns(rows, p)
    names = [f"x{j}" for j in range(p)]
    ranges = {n: (0.0, 100.0) for n in names}
    X = {n: cols[n] for n in names}

    def spec(bound, noise):
        return ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=bound, epsilon_y=1.0, ranges=ranges,
                           features=tuple(names), label="y", noise=noise)

    small = {n: v[:70000] for n, v in X.items()}
    t0 = time.perf_counter()  # first Numba dispatch in this process: set-up + cache load/compile
    for noise in ("discrete", "float"):
        privatize(small, cols["y"][:70000], spec(1.0, noise), engine="numba", threads=threads)
    warmup = time.perf_counter() - t0

    memory = {
        f"noise floor: SFC64 normals, {threads} thr": noise_floor_threads(rows, p, threads),
        f"keystream floor: AES-CTR 2 words/value, {threads} thr": keystream_floor(rows, p, threads),
    }
    kernels = ("numba", "numpy") if args.numpy else ("numba",)
    for bound, label in ((math.sqrt(p), "sqrt(p)"), (1.0, "1")):
        for kernel in kernels:
            for noise in ("discrete", "float"):
                s = spec(bound, noise)

                def run(s=s, kernel=kernel):
                    privatize(X, cols["y"], s, threads=threads, engine=kernel)
                memory[f"in-memory {noise} {kernel}, bound {label}"] = run
    results = interleaved(memory, args.repeat)

    if not args.skip_files:
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
            src = os.path.join(tmp, "in.parquet")
            pq.write_table(pa.table(cols), src, row_group_size=1 << 20, compression="snappy")
            del cols, X
            same = {n: "none" for n in names} | {"y": "snappy"}
            files = {"parquet read+write (pyarrow alone)":
                     parquet_read_write(src, os.path.join(tmp, "copy.parquet"), same)}
            out = os.path.join(tmp, "release.parquet")
            for noise in ("discrete", "float"):
                s = spec(math.sqrt(p), noise)

                def run_release(s=s):
                    release(src, out, s, overwrite=True, engine="numba", threads=threads)
                files[f"parquet release {noise}, bound sqrt(p)"] = run_release
            results.update(interleaved(files, args.repeat))

    print(f"\nrelease benchmark: {rows:,} rows, p = {p}, float32, {threads} threads, median of "
          f"{args.repeat} interleaved rounds, {os.cpu_count()} cores")
    print(f"{'measurement':52s} {'seconds':>8s} {'M rows/s':>9s} {'CPU s':>7s} {'user ns/row':>11s} "
          f"{'sys ns/row':>10s}")
    for name, (wall, cpu, user, system) in results.items():
        print(f"{name:52s} {wall:8.3f} {rows / wall / 1e6:9.2f} {cpu:7.3f} {user / rows * 1e9:11.1f} "
              f"{system / rows * 1e9:10.1f}")
    print("\ngoals (same-run ratios; 'wall' from the medians of wall time, 'CPU' from the medians of "
          "user + system seconds, which a loaded machine distorts much less):")
    for bound in ("sqrt(p)", "1"):
        for kernel in kernels:
            d = results[f"in-memory discrete {kernel}, bound {bound}"]
            f = results[f"in-memory float {kernel}, bound {bound}"]
            print(f"  in-memory {kernel}, bound {bound}: discrete / float rows/s = "
                  f"{f[0] / d[0]:.2f} wall, {f[1] / d[1]:.2f} CPU (goal >= 0.75)")
    if not args.skip_files:
        rw = results["parquet read+write (pyarrow alone)"]
        d = results["parquet release discrete, bound sqrt(p)"]
        f = results["parquet release float, bound sqrt(p)"]
        print(f"  parquet -> parquet: discrete / float rows/s = {f[0] / d[0]:.2f} wall, "
              f"{f[1] / d[1]:.2f} CPU (goal >= 0.75)")
        print(f"  parquet -> parquet: discrete release / pyarrow read+write = {d[0] / rw[0]:.2f} wall, "
              f"{d[1] / rw[1]:.2f} CPU (goal <= 1.5); float release: {f[0] / rw[0]:.2f} wall, "
              f"{f[1] / rw[1]:.2f} CPU")
    print(f"first kernel calls in this process (Numba set-up, cache load or compile): {warmup:.2f} s")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (1 min), {os.getloadavg()[1]:.2f} (5 min)")
    return results


if __name__ == "__main__":
    main()
