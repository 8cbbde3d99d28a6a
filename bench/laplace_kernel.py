"""The SGD kernel's rows/s with the discrete Laplace law against the Gaussian one, in one run.

    python bench/laplace_kernel.py [--rows 4000000] [--repeats 15] [--p 3,10] [--batch 128]
                                   [--dtype float32]

Both heads are mode iwp, exponential loss, on the same feature-major array (``bench/kernels.py``'s
data), with the Laplace release's law for the goal's setting (epsilon_x = 8, L1 bound 1.5: grid
2^-19, scale 0.375) and a Gaussian head with the same variances; both under the same variance cap
(the Laplace default), so they take the same path apart from the law's per-minibatch work (tau
and the direction d_j).  Passes alternate (the order flips every round) so a change of load hits
both; prints median M rows/s and the ratio Laplace / Gaussian (goal: >= 0.8).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]     # bench/ and the repository root

from kernels import make_data  # noqa: E402

from iwpfast.privacy.laplace import calibrate_laplace  # noqa: E402
from iwpfast.sgd.engine import finish, run_chunk  # noqa: E402
from iwpfast.sgd.state import HeadConfig, HeadState  # noqa: E402


def configs(p: int, batch: int):
    law = calibrate_laplace(8.0, 1.5, p).noise_law().broadcast(p)
    laplace = HeadConfig(loss="exponential", mode="iwp", n_features=p, noise_var=law.variance,
                         noise_law=law, label_keep_prob=0.88, batch_size=batch, alpha=1e-3,
                         learning_rate=1e-3, radius=2.0, average_start=0,
                         variance_cap=law.default_variance_cap())
    return laplace, dataclasses.replace(laplace, noise_law=None)


def one_pass(cfg, X, y) -> float:
    state = HeadState.new(cfg)
    start = time.perf_counter()
    run_chunk(cfg, state, X, y)
    finish(cfg, state)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--p", default="3,10")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    args = parser.parse_args(argv)
    dtype = np.dtype(args.dtype).type
    print(f"rows {args.rows:,}, batch {args.batch}, {args.dtype}, exponential loss, mode iwp; "
          "M rows/s (median of alternating passes)")
    print("   p   gaussian   laplace   laplace/gaussian")
    worst = float("inf")
    for p in (int(v) for v in args.p.split(",")):
        X, y = make_data(p, args.rows, dtype, "exponential")
        laplace, gaussian = configs(p, args.batch)
        one_pass(laplace, X[:, :10_000], y[:10_000])        # compile / load both
        one_pass(gaussian, X[:, :10_000], y[:10_000])
        times = {"gaussian": [], "laplace": []}
        for r in range(args.repeats):
            order = [("gaussian", gaussian), ("laplace", laplace)]
            for name, cfg in (order if r % 2 == 0 else order[::-1]):
                times[name].append(one_pass(cfg, X, y))
        rate = {k: args.rows / statistics.median(v) / 1e6 for k, v in times.items()}
        ratio = rate["laplace"] / rate["gaussian"]
        worst = min(worst, ratio)
        print(f"{p:4d}   {rate['gaussian']:8.1f}   {rate['laplace']:7.1f}   {ratio:16.3f}")
    print(f"worst ratio {worst:.3f} (goal >= 0.8)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
