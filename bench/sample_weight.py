"""What sample weights cost the kernel: M rows/s of one pass without and with weights, same process.

    python bench/sample_weight.py [--rows 4000000] [--repeats 7] [--losses exponential,logistic]
                                  [--p 2,10,100] [--batch 128] [--clock cpu]

For each loss x p x dtype: the median of ``--repeats`` timed passes of ``run_chunk`` (mode iwp,
the configs of ``bench/kernels.py``) over the same array, unweighted and with random weights
(``HeadConfig(weighted=True)``, ``sample_weight=`` one more column in the features' dtype), timed
alternately so that a change of the machine's load hits both; the ratio weighted / unweighted is
what to quote.  The unweighted path itself is compared before/after with ``bench/kernels.py`` run
from two trees (see bench/README.md).
"""
from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import time

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]     # bench/ and the repository root

from kernels import config, kernel_bench_parser, kernel_cases, make_data  # noqa: E402

from iwpfast.sgd.engine import finish, run_chunk, warmup  # noqa: E402
from iwpfast.sgd.state import HeadState  # noqa: E402


def main(argv=None) -> None:
    parser = kernel_bench_parser(__doc__.splitlines()[0], repeats=7)
    args = parser.parse_args(argv)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    warmup()
    print(f"# rows={args.rows} batch={args.batch} repeats={args.repeats} clock={args.clock} "
          "mode=iwp labels=public; M rows/s, medians")
    print(f"{'loss':<14} {'p':>4} {'dtype':<8} {'plain':>9} {'weighted':>9} {'ratio':>7}")
    for loss, p, dtype, rows in kernel_cases(args):
        cfg = config(loss, p, args.batch)
        weighted = dataclasses.replace(cfg, weighted=True)
        X, y = make_data(p, rows, dtype, loss)
        w = np.random.default_rng(1).exponential(1.0, rows).astype(dtype)
        # compile/load the weighted specialization's path before timing
        run_chunk(weighted, HeadState.new(weighted), X[:, :1000], y[:1000], sample_weight=w[:1000])
        times = {"plain": [], "weighted": []}
        for _ in range(args.repeats):
            for name, c, kw in (("plain", cfg, {}), ("weighted", weighted, {"sample_weight": w})):
                state = HeadState.new(c)
                start = clock()
                run_chunk(c, state, X, y, **kw)
                finish(c, state)
                times[name].append(clock() - start)
        plain = rows / statistics.median(times["plain"]) / 1e6
        heavy = rows / statistics.median(times["weighted"]) / 1e6
        print(f"{loss:<14} {p:>4} {np.dtype(dtype).name:<8} {plain:>9.1f} {heavy:>9.1f} "
              f"{heavy / plain:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
