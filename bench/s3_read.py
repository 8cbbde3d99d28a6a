"""Reading a Parquet release from an S3-compatible server on localhost: iwpfast vs pyarrow alone.

    python bench/s3_read.py --rows 4000000 --repeat 5

Starts moto's ThreadedMotoServer on 127.0.0.1 (as the tests do), writes one release of ``--rows``
rows, p = 10 float32 features + int8 label (``iwpfast.release``, row groups of 2^20 rows) into a
bucket, then reads it, interleaving in each round (order reversed every other round):

- ``pyarrow``: pyarrow alone with the same ``S3FileSystem``: ``pq.ParquetFile(fs.open_input_file
  (key), pre_buffer=True).iter_batches(batch_size=65536)`` over every column (the fastest of
  pyarrow's ways measured here; ``pq.read_table(key, filesystem=fs)`` is printed too);
- ``open_source``: ``iwpfast.io.open_source("s3://...?endpoint_override=...").batches()``;
- ``reader``: iwpfast's training reader (``ChunkReader``: validation, NumPy views, prefetch
  thread) over the same URI: what ``fit`` reads with.

Prints one JSON line per measurement and the medians with the ratios to pyarrow alone (goal:
iwpfast >= 0.8x), the CPU model and the load average.  The server is a single Python process
thread: it, not the network or pyarrow, bounds the throughput, and both sides pay it alike.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines()
                    if line.startswith("Model name"))
    except Exception:
        return "unknown"


def make_release(fs, uri, rows, p=10):
    import numpy as np
    import pyarrow as pa

    import iwpfast

    r = np.random.default_rng(0)
    cols = {f"x{j}": r.uniform(-1, 1, rows).astype(np.float32) for j in range(p)}
    cols["y"] = r.integers(0, 2, rows).astype(np.int8)
    spec = iwpfast.ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=p ** 0.5, epsilon_y=1.0,
                               ranges={f"x{j}": (-1, 1) for j in range(p)})
    iwpfast.release(pa.table(cols), uri, spec, features=[f"x{j}" for j in range(p)], label="y",
                    seed=1, overwrite=True)


def read_pyarrow(fs, key):
    import pyarrow.parquet as pq

    rows = 0
    with fs.open_input_file(key) as f:
        for batch in pq.ParquetFile(f, pre_buffer=True).iter_batches(batch_size=65536):
            rows += batch.num_rows
    return rows


def read_table(fs, key):
    import pyarrow.parquet as pq

    return pq.read_table(key, filesystem=fs).num_rows


def read_open_source(uri):
    from iwpfast.io import open_source

    return sum(b.num_rows for b in open_source(uri).batches())


def read_reader(uri):
    from iwpfast.io import open_source
    from iwpfast.io.reader import ChunkReader

    src = open_source(uri)
    feats = [c for c in src.schema.names if c != "y"]
    rows = 0
    for chunk in ChunkReader(src, [feats], ["y"]):
        rows += chunk.n_rows
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from s3_server import s3_server

    with s3_server() as s3:
        fs = s3.filesystem()
        fs.create_dir("bench")
        key = "bench/release.parquet"
        uri = s3.uri(key)
        make_release(fs, uri, args.rows)
        size = fs.get_file_info(key).size
        steps = {"pyarrow": lambda: read_pyarrow(fs, key),
                 "pyarrow_read_table": lambda: read_table(fs, key),
                 "open_source": lambda: read_open_source(uri),
                 "reader": lambda: read_reader(uri)}
        times = {k: [] for k in steps}
        read_pyarrow(fs, key)  # warm-up (server caches, imports)
        for rnd in range(args.repeat):
            order = list(steps) if rnd % 2 == 0 else list(reversed(steps))
            for name in order:
                t0 = time.perf_counter()
                n = steps[name]()
                dt = time.perf_counter() - t0
                assert n == args.rows, (name, n)
                times[name].append(dt)
                print(json.dumps({"step": name, "round": rnd, "rows": n, "seconds": round(dt, 4),
                                  "M_rows_per_s": round(n / dt / 1e6, 3),
                                  "loadavg": os.getloadavg()[0]}), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = args.rows / med["pyarrow"]
    print(f"\nCPU: {cpu_model()}; load average {os.getloadavg()}; object {size / 1e6:.1f} MB, "
          f"{args.rows:,} rows, p = 10 float32 + int8 label; medians of {args.repeat} rounds")
    for k, v in med.items():
        rate = args.rows / v
        print(f"{k:20s} {rate / 1e6:8.2f} M rows/s  ({size / v / 1e6:7.1f} MB/s)  "
              f"{rate / base:5.2f}x pyarrow alone")


if __name__ == "__main__":
    main()
