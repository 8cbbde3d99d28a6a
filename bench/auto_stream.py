"""'auto' on a stream of unknown length against the same rows as a Parquet file.

    python bench/auto_stream.py --rows 2000000 --mode file      # then stream, declared

Writes (once) a seeded release of a 4-feature logistic problem under bench/data/, then fits it
with the default 'auto' in this process, as ``--mode``: ``file`` (``fit(path)``), ``stream`` (a
generator of ``ParquetFile.iter_batches`` of 50,000 rows, ``release=path``: read ahead,
docs/streaming.md "'auto' on a stream"), ``declared`` (the same with ``n_rows_total``) or
``fixed-stream`` (the same stream fitted with the point 'auto' chooses on the file: the cost of
reading the stream with one head).
Prints seconds, the chosen point, the accuracy on 50,000 clean rows and the peak RSS (VmHWM).
Run each mode in its own process (the peak RSS is the process's).
"""
import argparse
import os
import time
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import iwpfast
from iwpfast import IWPClassifier

P = 4


def clean(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, P))
    y = (X @ np.array([1.0, -1.0, 0.5, 0.25]) + 0.5 * rng.standard_normal(n) > 0)
    return X, y.astype(np.int64)


def peak_rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--mode", choices=["file", "stream", "declared", "fixed-stream"],
                    default="file")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    os.makedirs("bench/data", exist_ok=True)
    path = f"bench/data/auto_stream_{args.rows}.parquet"
    names = [f"x{j}" for j in range(P)]
    if not os.path.exists(path):
        X, y = clean(args.rows, 0)
        spec = iwpfast.ReleaseSpec(epsilon_x=4.0, delta=1e-5, bound=2.0, epsilon_y=1.0,
                                   ranges={n: (-1, 1) for n in names}, features=tuple(names),
                                   label="y")
        iwpfast.release(pa.table({**{n: X[:, j] for j, n in enumerate(names)}, "y": y}), path,
                        spec, seed=3)
    model = IWPClassifier(progress=False)
    if args.mode == "fixed-stream":       # the stream's read and one head: what 'auto' adds to
        model.set_params(alpha=0.001, learning_rate=0.00121, variance_cap=2.0, average="tail")
    started = time.perf_counter()
    if args.mode == "file":
        model.fit(path)
    else:
        batches = pq.ParquetFile(path).iter_batches(batch_size=50_000)
        model.fit((b for b in batches), release=path,
                  n_rows_total=None if args.mode == "stream" else args.rows)
    seconds = time.perf_counter() - started
    Xt, yt = clean(50_000, 9)
    acc = float(np.mean(model.predict({n: Xt[:, j] for j, n in enumerate(names)}) == yt))
    held = getattr(model, "tuning_", {}).get("n_validation", 0)
    print(f"{args.mode} {args.rows:,} rows: {seconds:.2f} s, alpha {model.alpha_:.3g}, step "
          f"{model.learning_rate_:.3g}, {held:,} validation rows, accuracy "
          f"{acc:.4f}, peak RSS {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
