"""Cost of the trace callback: one IWP head streamed from an in-memory source, with and without
recording (theta, b) every k updates (issue 4: "without slowing the pass by more than a few percent").

    python bench/trace_overhead.py [--rows 20000000] [--p 10] [--every 10] [--repeats 5]

Prints the median rows/s of each variant, run interleaved in one process, and their ratio.
"""
import argparse
import time
import warnings

import numpy as np

from iwpfast.sgd.driver import Head, fit_stream
from iwpfast.sgd.engine import warmup
from iwpfast.sgd.state import HeadConfig


def main():
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--p", type=int, default=10)
    ap.add_argument("--every", type=int, default=10, help="trace every k updates")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    data = {f"x{j}": rng.standard_normal(args.rows, dtype=np.float32) for j in range(args.p)}
    data["y"] = np.where(rng.random(args.rows) < 0.5, 1, -1).astype(np.int8)
    cfg = HeadConfig(loss="exponential", mode="iwp", n_features=args.p, noise_var=np.full(args.p, 9.0),
                     batch_size=128, learning_rate=1e-4, alpha=5.0, radius=0.3)
    heads = [Head("iwp", cfg, [f"x{j}" for j in range(args.p)], "y")]
    warmup()
    received = [0]

    def on_trace(steps, params):
        received[0] += len(steps["iwp"])

    times = {0: [], args.every: []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # this synthetic pass ends on the sphere: irrelevant here
        for _ in range(args.repeats):
            for every in times:
                t = time.perf_counter()
                fit_stream(data, heads, progress=False, trace_every=every,
                           trace_callback=on_trace if every else None)
                times[every].append(time.perf_counter() - t)
    base = args.rows / np.median(times[0]) / 1e6
    traced = args.rows / np.median(times[args.every]) / 1e6
    print(f"rows={args.rows:,} p={args.p} medians of {args.repeats}, interleaved")
    print(f"no trace            {base:8.1f} M rows/s")
    print(f"trace every {args.every:<7d} {traced:8.1f} M rows/s   ratio {traced / base:.3f}"
          f"   ({received[0] // args.repeats:,} iterates per pass)")


if __name__ == "__main__":
    main()
