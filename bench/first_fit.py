"""First fit in a fresh environment: the time a new user waits, empty kernel cache vs warm cache.

    python bench/first_fit.py --repeat 3

Each round runs two fresh Python processes with ``IWPFAST_CACHE_DIR`` pointing at a new empty
folder: the first compiles the kernels (empty cache), the second loads them from that cache.  Each
process imports iwpfast and runs ``IWPClassifier(progress=False).fit(X, y)`` on a 1000 x 3 float64
array (what the README's first lines do; the data is too small to matter).  Prints one JSON line
per process (import seconds, fit seconds, load average) and the medians; the goal is a first fit
<= 3 s with an empty cache.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

CHILD = """
import time
t0 = time.perf_counter()
import numpy as np
import iwpfast
t1 = time.perf_counter()
X = np.random.default_rng(0).standard_normal((1000, 3))
iwpfast.IWPClassifier(progress=False).fit(X, (X[:, 0] > 0).astype(int))
t2 = time.perf_counter()
print(f"{t1 - t0!r} {t2 - t1!r}")
"""


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run_child(cache_dir: str) -> tuple[float, float]:
    env = dict(os.environ, IWPFAST_CACHE_DIR=cache_dir, PYTHONPATH=ROOT)
    env.pop("NUMBA_DISABLE_JIT", None)
    # cwd=ROOT: ``python -c`` puts the working folder first on sys.path, so run from another
    # checkout it would import that checkout's iwpfast instead of this one
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=ROOT, capture_output=True,
                         text=True, check=True)
    imp, fit = out.stdout.split()
    return float(imp), float(fit)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"# CPU: {cpu_model()}, {os.cpu_count()} cores visible")
    cold, warm = [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="iwpfast-first-fit-") as cache:
            for label, into in (("empty_cache", cold), ("warm_cache", warm)):
                imp, fit = run_child(cache)
                into.append(fit)
                print(json.dumps({"case": label, "import_s": round(imp, 3), "first_fit_s": round(fit, 3),
                                  "loadavg": os.getloadavg()[0]}), flush=True)
    print(json.dumps({"median_first_fit_empty_cache_s": round(statistics.median(cold), 2),
                      "median_first_fit_warm_cache_s": round(statistics.median(warm), 2),
                      "goal_s": 3.0}))


if __name__ == "__main__":
    main()
