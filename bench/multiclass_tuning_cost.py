"""Cost of alpha/learning_rate='auto' for k > 2 classes (k x G one-vs-rest heads in one scan, each
class choosing its own point) against a k-class fit with fixed values, on the same Parquet release.

    python bench/multiclass_tuning_cost.py [--rows 1000000] [--p 5] [--classes 3 4 5] [--repeats 3]

For every k: a k-class release (k-ary randomized response, epsilon_y = 2) of synthetic data;
timed, interleaved in one process: the fixed fit (k heads, one pass) and the "auto" fit (k x G
heads in the training scan + one validation read).  Prints the CPU model, medians, rows/s of fit
(rows of the release / wall time), the auto/fixed ratio, the heads, the reads of the data
(``tuning_["passes"]``), and for reference a two-class "auto" fit on the same features.
"""
import argparse
import statistics
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines()
                    if line.startswith("Model name"))
    except Exception:  # lscpu missing: say so rather than fail the benchmark
        return "unknown (no lscpu)"


def main():
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--p", type=int, default=5)
    ap.add_argument("--classes", type=int, nargs="+", default=[3, 4, 5])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import iwpfast
    from iwpfast.privacy import ReleaseSpec, release

    print(f"CPU: {cpu_model()}; rows {args.rows:,}, p {args.p}, repeats {args.repeats} (medians)")
    n, p = args.rows, args.p
    names = [f"x{j}" for j in range(p)]
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (n, p))
    tmp = Path(tempfile.mkdtemp(prefix="iwpfast-mc-tuning-cost-"))
    print(f"{'k':>3} {'fixed s':>8} {'fixed rows/s':>13} {'auto s':>8} {'auto rows/s':>12} "
          f"{'auto/fixed':>10} {'heads':>6} {'passes':>6}")
    for k in [2, *args.classes]:
        W = rng.normal(0, 1.5, (k, p))
        y = np.argmax(X @ W.T + rng.gumbel(size=(n, k)), axis=1)
        classes = [f"c{c}" for c in range(k)]
        path = tmp / f"rel{k}.parquet"
        spec = ReleaseSpec(epsilon_x=4.0, delta=1e-5, bound=2.0, epsilon_y=2.0, features=names,
                           ranges={f: (-1.0, 1.0) for f in names}, label="y",
                           classes=classes if k > 2 else None)
        labels = np.array(classes)[y] if k > 2 else y.astype(np.int8)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            release({**{f: X[:, j] for j, f in enumerate(names)}, "y": labels}, path, spec, seed=k)

        def fixed(path=path):
            return iwpfast.IWPClassifier(alpha=0.05, learning_rate=0.03, variance_cap=2.0,
                                         progress=False).fit(path)

        def auto(path=path):
            return iwpfast.IWPClassifier(progress=False).fit(path)

        times = {"fixed": [], "auto": []}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fixed()                  # compile and warm the page cache
            model = auto()
            for _ in range(args.repeats):
                for name, fn in (("fixed", fixed), ("auto", auto)):
                    t0 = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - t0)
        tf, ta = statistics.median(times["fixed"]), statistics.median(times["auto"])
        t = model.tuning_
        print(f"{k:>3} {tf:8.3f} {n / tf / 1e6:11.2f} M {ta:8.3f} {n / ta / 1e6:10.2f} M "
              f"{ta / tf:10.1f} {int(t['heads']):>6} {float(t['passes']):6.2f}"
              + ("   (two classes: the binary 'auto', for reference)" if k == 2 else ""))


if __name__ == "__main__":
    main()
