"""What cross-validation (iwpfast/sgd/crossval.py) costs on small data: the default 'auto' fit
against the same fit with the single hold-out and against a fixed fit, on label-only releases of
the shipped ACS income rows cut to several sizes (all at most CROSS_VALIDATE_MAX_ROWS).

    python bench/crossval_cost.py                    # 20,000 / 100,000 / 281,136 rows
    python bench/crossval_cost.py --rows 50000 --repeats 7

Prints the CPU model and load, the median wall and CPU seconds of each fit (warm: every kernel
compiled by a first fit), M rows/s and the ratios to the fixed fit measured in the same run.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
import warnings
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="20000,100000,281136")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import pyarrow.parquet as pq

    import iwpfast
    from iwpfast.privacy import ReleaseSpec, release
    data = Path(iwpfast.__file__).parent / "data" / "acs2024_income_FL_NY_PA.parquet"
    table = pq.read_table(data)
    features = ["AGEP", "SCHL", "WKHP", "SEX"]
    ranges = {"AGEP": (0, 99), "SCHL": (1, 24), "WKHP": (0, 99), "SEX": (1, 2)}
    print(f"CPU: {cpu_model()}; {os.cpu_count()} cores; load average "
          + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    print("| rows | fit | wall s | CPU s | M rows/s | wall / fixed |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(v) for v in args.rows.split(",")):
            path = Path(tmp) / f"r{n}.parquet"
            spec = ReleaseSpec(epsilon_y=1.0, features=features, ranges=ranges, label="y",
                               public_features=tuple(features), bound=2.0)
            release(table.slice(0, n), path, spec, seed=1)
            fits = {
                "default 'auto' (cross-validated)": (True, {}),
                "'auto', single hold-out": (False, {}),
                "fixed alpha, step": (True, dict(alpha=1e-3, learning_rate=0.1)),
            }
            times: dict = {}
            for name, (cv, kw) in fits.items():
                os.environ["IWPFAST_CROSS_VALIDATE"] = str(int(cv))
                iwpfast.IWPClassifier(progress=False, **kw).fit(str(path))     # warm
                wall, cpu = [], []
                for _ in range(args.repeats):
                    t0, c0 = time.perf_counter(), time.process_time()
                    iwpfast.IWPClassifier(progress=False, **kw).fit(str(path))
                    wall.append(time.perf_counter() - t0)
                    cpu.append(time.process_time() - c0)
                times[name] = (statistics.median(wall), statistics.median(cpu))
            os.environ.pop("IWPFAST_CROSS_VALIDATE", None)
            fixed = times["fixed alpha, step"][0]
            for name, (w, c) in times.items():
                print(f"| {n:,} | {name} | {w:.3f} | {c:.3f} | {n / w / 1e6:.2f} | "
                      f"{w / fixed:.1f} |")
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
