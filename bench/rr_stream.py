"""Throughput and peak memory of ``IWPClassifier.fit`` on a release with randomized-response
categorical columns (issue 34: the rr learner streams its release).

    python bench/rr_stream.py --rows 1000000 [--repeat 3] [--steps fixed,auto]

Makes (once) ``bench/data/rr_<rows>.parquet``: 4 numeric columns (ranges [0, 1], L2 bound 1,
epsilon_x 4) and 3 categorical columns of 3, 6 and 12 categories by k-ary randomized response
(epsilon_cat 1 each), a binary label at epsilon_y 2, seeded (a simulation).  Then each step runs
in a fresh child process (so that one step's heap does not inflate the next one's peak), after a
warm-up fit on 2,000 rows (kernels loaded from the cache, imports done):

- ``fixed``: alpha and learning_rate given: one pass, one head;
- ``auto``:  the 'auto' grid (18 heads on the training blocks, the validation blocks scored, the
  chosen head refitted on every row).

Each JSON line: wall seconds, rows / wall (rows of the release, not head updates), CPU seconds of
the process, peak VmRSS and RssAnon during the fit (sampled every 20 ms from /proc/self/status;
RssAnon is what the process itself holds, VmRSS adds the mapped file's pages) and the RssAnon
before the fit.  Median over ``--repeat`` children.  To compare two versions of the library, run
the script with PYTHONPATH pointing at each checkout: it uses the public API only.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CATS = {"c3": [f"a{i}" for i in range(3)], "c6": [f"b{i}" for i in range(6)],
        "c12": [f"c{i}" for i in range(12)]}


def make_release(path: str, rows: int) -> None:
    import pandas as pd

    from iwpfast.exceptions import PrivacyLeakWarning
    from iwpfast.privacy import ReleaseSpec, release
    rng = np.random.default_rng(0)
    df = pd.DataFrame({f"x{j}": rng.uniform(0, 1, rows) for j in range(4)})
    score = df.x0 - df.x1 + 0.5 * df.x2 - 0.5
    for name, cats in CATS.items():
        codes = rng.integers(0, len(cats), rows)
        df[name] = np.asarray(cats, dtype=object)[codes]
        score = score + np.linspace(-1, 1, len(cats))[codes]
    df["y"] = (score + rng.normal(0, 0.5, rows) > 0).astype(np.int64)
    spec = ReleaseSpec(epsilon_x=4.0, delta=1e-5, bound=1.0, epsilon_y=2.0,
                       ranges={f"x{j}": (0, 1) for j in range(4)}, categories=CATS,
                       categorical_mechanism="rr", epsilon_categorical=1.0, label="y")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)     # seeded: a simulation
        release(df, path, spec, features=[*(f"x{j}" for j in range(4)), *CATS], label="y",
                seed=1)


class Peak:
    """Peak VmRSS and RssAnon (MiB) of this process, sampled every ``period`` seconds."""

    def __init__(self, period: float = 0.02):
        self.period, self.peak = period, {"VmRSS": 0, "RssAnon": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> dict:
        now = {}
        with open("/proc/self/status") as f:
            for line in f:
                key = line.split(":")[0]
                if key in self.peak:
                    now[key] = int(line.split()[1]) / 1024
                    self.peak[key] = max(self.peak[key], now[key])
        return now

    def _run(self):
        while not self._stop.is_set():
            self.sample()
            time.sleep(self.period)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sample()


def child(step: str, path: str, small: str) -> None:
    import iwpfast
    kw = dict(alpha=0.01, learning_rate=0.1) if step == "fixed" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iwpfast.IWPClassifier(**kw).fit(small)                   # warm-up: imports, kernels
        before = Peak().sample()["RssAnon"]
        cpu0, t0 = time.process_time(), time.perf_counter()
        with Peak() as peak:
            model = iwpfast.IWPClassifier(**kw).fit(path)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    rows = model.n_rows_seen_
    print(json.dumps({"step": step, "rows": rows, "seconds": round(wall, 3),
                      "rows_per_s": round(rows / wall), "cpu_s": round(cpu, 3),
                      "peak_VmRSS_MiB": round(peak.peak["VmRSS"]),
                      "peak_RssAnon_MiB": round(peak.peak["RssAnon"]),
                      "RssAnon_before_MiB": round(before),
                      "load_avg_1min": os.getloadavg()[0]}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", default="fixed,auto")
    ap.add_argument("--child", nargs=3, metavar=("STEP", "PATH", "SMALL"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    data = os.path.join(HERE, "data")
    os.makedirs(data, exist_ok=True)
    path, small = (os.path.join(data, f"rr_{n}.parquet") for n in (args.rows, 2000))
    for p, n in ((path, args.rows), (small, 2000)):
        if not os.path.exists(p):
            make_release(p, n)
    for step in args.steps.split(","):
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run([sys.executable, __file__, "--child", step, path, small],
                                 check=True, capture_output=True, text=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
            print(json.dumps(runs[-1]), flush=True)
        med = {k: statistics.median(r[k] for r in runs)
               for k in ("seconds", "rows_per_s", "cpu_s", "peak_VmRSS_MiB", "peak_RssAnon_MiB",
                         "RssAnon_before_MiB")}
        print(json.dumps({"step": step, "median_of": len(runs), **med}), flush=True)


if __name__ == "__main__":
    main()
