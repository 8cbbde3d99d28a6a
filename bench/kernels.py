"""Kernel throughput table: M rows/s of one exact pass (in memory, one core, compile excluded).

    python bench/kernels.py [--rows 4000000] [--repeats 5] [--losses exponential,logistic]
                            [--p 2,10,100] [--batch 128] [--numpy-rows 200000] [--clock cpu]

For each loss x p x dtype: the median of ``--repeats`` timed passes of ``run_chunk`` over the whole
array (mode iwp, private labels off, K=2 for logistic), and the same minibatch loop written with
vectorized NumPy (``bench/numpy_baseline.py``) measured in the same run, with their ratio.
The machine is shared: medians, and ratios measured side by side, are what to quote;
``--clock cpu`` times with the process CPU time (``time.process_time``), which does not count the
time the process waits for a core that another process holds (memory contention still counts).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]     # bench/ and the repository root

from numpy_baseline import numpy_pass  # noqa: E402

from iwpfast.sgd.engine import finish, run_chunk, warmup  # noqa: E402
from iwpfast.sgd.state import HeadConfig, HeadState  # noqa: E402

LOSSES = ("exponential", "quadratic", "logistic", "squared_error")


def make_data(p: int, n: int, dtype, loss: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(p, n)).astype(dtype)
    X += rng.standard_normal((p, n), dtype=np.float32).astype(dtype) * dtype(0.5)
    if loss == "squared_error":
        y = (X[0] - 0.5 * X[min(1, p - 1)]).astype(dtype)
    else:
        y = np.where(X[0] > 0, 1.0, -1.0).astype(dtype)
    return X, y


def config(loss: str, p: int, batch: int, label_keep_prob=None) -> HeadConfig:
    # bound radius and small steps keep every loss stable on the synthetic data
    return HeadConfig(loss=loss, mode="iwp", n_features=p, noise_var=np.full(p, 0.25 / p),
                      label_keep_prob=label_keep_prob, truncation=2, batch_size=batch,
                      alpha=1e-3, learning_rate=1e-3, radius=2.0, average_start=0)


CLOCK = time.perf_counter


def time_kernel(cfg, X, y, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        state = HeadState.new(cfg)
        start = CLOCK()
        run_chunk(cfg, state, X, y)
        finish(cfg, state)
        times.append(CLOCK() - start)
    return y.shape[0] / statistics.median(times) / 1e6


def time_numpy(cfg, X, y, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = CLOCK()
        numpy_pass(cfg, X, y)
        times.append(CLOCK() - start)
    return y.shape[0] / statistics.median(times) / 1e6


def kernel_bench_parser(description: str, *, repeats: int, losses: str = "exponential,logistic",
                        clock: str = "cpu") -> argparse.ArgumentParser:
    """The options every kernel benchmark of bench/ shares (rows, repeats, batch, losses, p, clock)."""
    parser = argparse.ArgumentParser(allow_abbrev=False, description=description)
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--losses", default=losses)
    parser.add_argument("--p", default="2,10,100")
    parser.add_argument("--clock", choices=("wall", "cpu"), default=clock,
                        help="wall: time.perf_counter; cpu: time.process_time (shared machines)")
    return parser


def kernel_cases(args):
    """(loss, p, dtype, rows) of every measured case: each loss and p of the options, float32 then
    float64; a quarter of the rows for p > 10 (each row costs ~p)."""
    for loss in args.losses.split(","):
        for p in (int(v) for v in args.p.split(",")):
            rows = args.rows if p <= 10 else max(args.rows // 4, args.batch)
            for dtype in (np.float32, np.float64):
                yield loss, p, dtype, rows


def main(argv=None) -> None:
    parser = kernel_bench_parser(__doc__.splitlines()[0], repeats=5, losses=",".join(LOSSES),
                                 clock="wall")
    parser.add_argument("--numpy-rows", type=int, default=200_000)
    parser.add_argument("--private-labels", action="store_true",
                        help="label_keep_prob=0.8 (two exponentials per row for the exponential loss)")
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    warmup()
    keep = 0.8 if args.private_labels else None
    print(f"# rows={args.rows} batch={args.batch} repeats={args.repeats} clock={args.clock} mode=iwp "
          f"labels={'private (S=0.8)' if keep else 'public'}; M rows/s, medians")
    print(f"{'loss':<14} {'p':>4} {'dtype':<8} {'kernel':>9} {'numpy':>8} {'ratio':>7}")
    for loss, p, dtype, rows in kernel_cases(args):
        cfg = config(loss, p, args.batch, keep if loss != "squared_error" else None)
        X, y = make_data(p, rows, dtype, loss)
        kernel = time_kernel(cfg, X, y, args.repeats)
        n_np = min(args.numpy_rows, rows)
        numpy = time_numpy(cfg, X[:, :n_np], y[:n_np], max(3, args.repeats // 2))
        print(f"{loss:<14} {p:>4} {np.dtype(dtype).name:<8} {kernel:>9.1f} {numpy:>8.2f} "
              f"{kernel / numpy:>6.0f}x", flush=True)


if __name__ == "__main__":
    main()
