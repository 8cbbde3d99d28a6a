"""Cost of learning_rate/alpha='auto' (a grid of heads in one scan, scored on a private hold-out)
against one fit with fixed values, on the same Parquet release (issue 14: "state the cost in passes").

    python bench/tuning_cost.py [--rows 2000000] [--p 5] [--repeats 3]

Counts the rows read from the file (``passes`` = rows read / rows: 1, the training scan, which
holds the validation rows it passes over; 2 when the hold-out exceeds the memory the scan may hold
it in, ``iwpfast.settings.SearchOptions.held_validation_bytes``, and is read again) and times, interleaved in
one process: a read-only pass (pyarrow decode of the columns), one fixed fit (one head), and the
'auto' fit (25 heads by default).  Prints medians, rows/s and the ratios.
"""
import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np


def main():
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--p", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import pyarrow.parquet as pq

    import iwpfast
    from iwpfast.io import sources
    from iwpfast.privacy import ReleaseSpec, release

    rng = np.random.default_rng(0)
    n, p = args.rows, args.p
    names = [f"x{j}" for j in range(p)]
    X = rng.uniform(-1, 1, (n, p))
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ np.linspace(1.5, -1.0, p)))).astype(np.int8)
    tmp = Path(tempfile.mkdtemp(prefix="iwpfast-tuning-cost-"))
    path = tmp / "rel.parquet"
    spec = ReleaseSpec(epsilon_x=4.0, delta=1e-5, bound=2.0, epsilon_y=2.0, features=names,
                       ranges={f: (-1.0, 1.0) for f in names}, label="y")
    release({**{f: X[:, j] for j, f in enumerate(names)}, "y": y}, path, spec, seed=1)
    del X, y

    # count the rows every FileSource yields (all reads go through located_batches)
    counted = [0]
    original = sources.Source.located_batches

    def counting(self, *a, **kw):
        for origin, batch in original(self, *a, **kw):
            if type(self).__name__ == "FileSource":
                counted[0] += batch.num_rows
            yield origin, batch

    sources.Source.located_batches = counting

    def read_only():
        rows = 0
        for batch in pq.ParquetFile(path, pre_buffer=False).iter_batches(columns=[*names, "y"]):
            rows += batch.num_rows
        return rows

    def fixed():
        iwpfast.IWPClassifier(alpha=0.5, learning_rate=0.03, variance_cap=2.0, progress=False).fit(path)

    def auto():
        return iwpfast.IWPClassifier(progress=False).fit(path)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fixed()                      # compile and warm the page cache
        counted[0] = 0
        m = auto()
        passes = counted[0] / n
        times = {"read-only": [], "fixed (1 head)": [], "auto": []}
        for _ in range(args.repeats):
            for name, fn in (("read-only", read_only), ("fixed (1 head)", fixed), ("auto", auto)):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    import platform
    import subprocess
    cpu = subprocess.run("lscpu | grep 'Model name'", shell=True, capture_output=True, text=True).stdout
    print(f"# {cpu.strip() or platform.processor()}; {n:,} rows x {p} features, Parquet release")
    t = m.tuning_
    print(f"auto: {t['heads']} heads, {t['n_train']:,} training / {t['n_validation']:,} validation rows; "
          f"rows read / rows = {passes:.3f} (1: one training scan holding the validation rows; "
          "2: the hold-out read again)")
    base = statistics.median(times["fixed (1 head)"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:16s} median {med:7.3f} s  {n / med / 1e6:7.2f} M rows/s  x{med / base:5.2f} of fixed")
    for f in tmp.iterdir():
        f.unlink()
    tmp.rmdir()


if __name__ == "__main__":
    main()
