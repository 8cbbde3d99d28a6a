"""Write a large synthetic release for the streaming benchmarks (never committed: bench/data/).

    python bench/make_data.py --rows 300000000 --p 10 --format parquet --out bench/data/r300m.parquet
    python bench/make_data.py --rows 300000000 --p 10 --format ipc --out bench/data/r300m.arrow

Rows: float32 features x0..x{p-1} (a clean logistic-model sample plus Gaussian noise of scale
sigma, as a release would hold) and an int8 label in {-1, +1}; 41 bytes a row at p = 10.  To write
3e8 rows in about a minute, 8 distinct blocks of 2^20 rows are generated and written cyclically
(the data repeats every 8 Mi rows: irrelevant for throughput, stated in bench/README.md).  Parquet:
uncompressed, one row group per block (2^20 rows); IPC: file format, one record batch per block.
The schema carries release metadata (key iwpfast.release) so the learner reads sigma from it.
"""
from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
import pyarrow as pa

BLOCK = 1 << 20
DISTINCT_BLOCKS = 8


def release_spec(p: int, sigma: float, keep: float, rows: int):
    """A ReleaseSpec whose parameters give exactly this sigma and keep probability, so that
    `iwpfast info` and `fit` read the file like any release (its contract checks recompute sigma
    from epsilon_x, delta and the bound).  epsilon_x is solved for sigma by bisection (float
    Gaussian law: the blocks add float Gaussian noise); the features' declared range is [-1, 1]
    (the clean rows are N(0, 1/p) per coordinate, so ||x|| is about 1 = the bound; they are not
    clipped: synthetic data for throughput, not a privacy claim).  Recorded as seeded: the noise
    is reproducible from make_data's fixed seed."""
    from dataclasses import replace

    from iwpfast.privacy import ReleaseSpec
    from iwpfast.privacy.calibration import gaussian_noise_scale

    delta, bound = 1e-5, 1.0
    lo, hi = 1e-6, 1e6  # epsilon_x: sigma falls as epsilon_x grows
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if gaussian_noise_scale(mid, delta, bound) > sigma else (lo, mid)
    names = [f"x{j}" for j in range(p)]
    spec = ReleaseSpec(epsilon_x=math.sqrt(lo * hi), delta=delta, bound=bound,
                       epsilon_y=math.log(keep / (1 - keep)), features=names,
                       ranges={n: (-1.0, 1.0) for n in names}, label="y", noise="float")
    return replace(spec, row_count=rows, seeded=True)


def blocks(p: int, sigma: float, keep: float, seed: int = 0):
    rng = np.random.Generator(np.random.SFC64(seed))
    theta = rng.standard_normal(p)
    theta /= np.linalg.norm(theta)
    out = []
    for _ in range(DISTINCT_BLOCKS):
        clean = rng.standard_normal((p, BLOCK), dtype=np.float32) / np.float32(np.sqrt(p))
        margin = theta @ clean
        y = np.where(rng.random(BLOCK) < 1 / (1 + np.exp(-4 * margin)), 1, -1).astype(np.int8)
        y = np.where(rng.random(BLOCK) < keep, y, -y).astype(np.int8)
        noisy = clean + rng.standard_normal((p, BLOCK), dtype=np.float32) * np.float32(sigma)
        out.append([np.ascontiguousarray(noisy[j]) for j in range(p)] + [y])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--p", type=int, default=10)
    ap.add_argument("--format", choices=["parquet", "ipc", "csv"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sigma", type=float, default=0.5)
    ap.add_argument("--keep", type=float, default=0.9)
    ap.add_argument("--no-metadata", action="store_true",
                    help="plain data without release metadata (the estimators then check and "
                         "recode the labels; bench/api_speed.py)")
    a = ap.parse_args(argv)
    names = [f"x{j}" for j in range(a.p)] + ["y"]
    spec = release_spec(a.p, a.sigma, a.keep, a.rows)
    meta = None if a.no_metadata else {b"iwpfast.release": spec.to_json().encode()}
    schema = pa.schema([(n, pa.float32()) for n in names[:-1]] + [("y", pa.int8())],
                       metadata=meta)
    data = blocks(a.p, spec.sigma, spec.label_keep_prob)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tmp = a.out + ".tmp"
    t0 = time.perf_counter()
    if a.format == "parquet":
        import pyarrow.parquet as pq
        writer = pq.ParquetWriter(tmp, schema, compression="none", use_dictionary=False,
                                  write_statistics=False)
        write = lambda b: writer.write_batch(b, row_group_size=BLOCK)  # noqa: E731
    elif a.format == "ipc":
        sink = pa.OSFile(tmp, "wb")
        writer = pa.ipc.new_file(sink, schema)
        write = writer.write_batch
    else:
        from pyarrow import csv
        sink = pa.OSFile(tmp, "wb")
        writer = csv.CSVWriter(sink, schema)
        write = writer.write_batch
    done = 0
    i = 0
    while done < a.rows:
        n = min(BLOCK, a.rows - done)
        cols = data[i % DISTINCT_BLOCKS]
        write(pa.record_batch([c[:n] for c in cols], schema=schema))
        done += n
        i += 1
    writer.close()
    if a.format != "parquet":
        sink.close()
    os.replace(tmp, a.out)
    dt = time.perf_counter() - t0
    print(f"wrote {a.rows} rows, p={a.p}, {a.format}, {os.path.getsize(a.out) / 1e9:.2f} GB "
          f"to {a.out} in {dt:.1f} s")


if __name__ == "__main__":
    main()
