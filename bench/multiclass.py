"""k one-vs-rest heads in one scan against one binary head: M rows/s and the same-run ratio.

    python bench/multiclass.py [--rows 2000000] [--p 10] [--k 3,5] [--repeats 7] [--clock cpu]

In memory, one core, compile excluded, float32 features, batch 128, exponential loss, mode iwp
with private labels (the binary head: randomized response, S~; the k heads: k-ary randomized
response's label-weight table).  Timed in one process, the variants interleaved repeat by repeat
so that the machine's load hits all of them alike; medians and ratios to the binary head:

- binary:        ``run_chunk`` of one binary head (the issue's unit of cost);
- k heads, one scan: ``run_chunk_heads`` (every batch used by the k heads while in cache);
- k heads, k passes: ``run_chunk`` once per head over the whole array (what k separate binary
  models cost), for comparison.

The goal (issue 13): k = 5 at p = 10 costs at most 3x one binary head.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(_HERE)]
from iwpfast.benchmarks import cpu_model  # noqa: E402
from iwpfast.label_noise import label_weight_table  # noqa: E402
from iwpfast.sgd.engine import run_chunk, run_chunk_heads, warmup  # noqa: E402
from iwpfast.sgd.state import HeadConfig, HeadState  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--p", type=int, default=10)
    parser.add_argument("--k", default="3,5")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args(argv)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    ks = [int(k) for k in args.k.split(",")]
    p, n = args.p, args.rows
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, (p, n)).astype(np.float32)
    scores = np.stack([X[c % p] for c in range(max(ks))]) + rng.gumbel(size=(max(ks), n))
    base = dict(loss="exponential", mode="iwp", n_features=p, noise_var=np.full(p, 0.25 / p),
                batch_size=128, alpha=1e-3, learning_rate=1e-3, radius=2.0, average_start=0)
    binary_cfg = HeadConfig(**base, label_keep_prob=1.0 / (1.0 + np.exp(-2.0)))
    y_binary = np.where(X[0] > 0, 1.0, -1.0).astype(np.float32)
    warmup(("float32",))
    variants = {"binary": lambda: run_chunk(binary_cfg, HeadState.new(binary_cfg), X, y_binary)}
    for k in ks:
        codes = np.argmax(scores[:k], axis=0).astype(np.int8)
        cfgs = [HeadConfig(**base, label_class=c, label_weights=label_weight_table(2.0, k))
                for c in range(k)]
        variants[f"k={k} one scan"] = (lambda cfgs=cfgs, codes=codes: run_chunk_heads(
            cfgs, [HeadState.new(c) for c in cfgs], X, codes))
        variants[f"k={k} k passes"] = (lambda cfgs=cfgs, codes=codes: [
            run_chunk(c, HeadState.new(c), X, codes) for c in cfgs])
    for f in variants.values():          # compile / load every specialization first
        f()
    times = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, f in variants.items():
            start = clock()
            f()
            times[name].append(clock() - start)
    binary = statistics.median(times["binary"])
    print(f"# CPU: {cpu_model()}; rows={n} p={p} float32 batch=128 exponential iwp private labels; "
          f"repeats={args.repeats} clock={args.clock}; medians")
    print(f"{'variant':18s} {'M rows/s':>9s} {'x binary':>9s}")
    for name in variants:
        median = statistics.median(times[name])
        print(f"{name:18s} {n / median / 1e6:9.1f} {median / binary:9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
