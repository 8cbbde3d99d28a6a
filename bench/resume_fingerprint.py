"""What the resume checks of a multi-part release cost (issue 42, D2), next to the release itself.

    python bench/resume_fingerprint.py                  # 10^6 rows x 4 float64 features + label
    python bench/resume_fingerprint.py --rows 4000000 --repeat 7

Measured in one run, interleaved (round robin, median per measurement), on one generated Parquet
input (pyarrow's defaults: snappy, 1 row group per 2^20 rows) in a temporary directory:

1. ``release``: ``iwpfast.privacy.release(input, "out/")``, a multi-part release of one part
   (plan, fingerprints, the part with its row digest, manifest);
2. ``fingerprint``: the plan-time fingerprint of the input (size, mtime, footer SHA-256 and the
   keyed sample of 16 blocks of 64 KiB, ``iwpfast.privacy.fingerprints.input_fingerprint``), page
   cache warm (a cold cache adds 16 random reads of 64 KiB);
3. ``digest in release``: the part's row digest alone over the batches the release reads (what
   it adds to the release);
4. ``digest on resume``: a kept part's input read again without noise and digested (what a
   resumed run pays per kept part instead of releasing it again).

Printed: rows/s, seconds, each ratio to the release, the CPU model and the load average.  The
goal of issue 42: fingerprint <= 10% of the release's time.
"""
from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from iwpfast.benchmarks import cpu_model  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    import pyarrow as pa
    import pyarrow.parquet as pq

    from iwpfast.io.filesystem import resolve
    from iwpfast.privacy import ReleaseSpec, release
    from iwpfast.privacy.fingerprints import input_fingerprint
    from iwpfast.privacy.multipart import plan_parts
    from iwpfast.privacy.part_rows import RowDigest

    features = [f"x{j}" for j in range(args.features)]
    rng = np.random.default_rng(0)
    tmp = tempfile.TemporaryDirectory()
    src = os.path.join(tmp.name, "in.parquet")
    pq.write_table(pa.table({**{f: rng.uniform(-1, 1, args.rows) for f in features},
                             "y": rng.integers(0, 2, args.rows)}), src)
    spec = ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                       ranges=",".join(f"{f}=-1:1" for f in features))
    key = secrets.token_bytes(16)
    loc = resolve(src)
    plan = plan_parts(src, os.path.join(tmp.name, "plan") + "/", spec, features, "y")
    from dataclasses import replace
    plan = replace(plan, digest_key=key)
    from iwpfast.io.sources import open_source
    from iwpfast.privacy.fingerprints import part_input_digest

    batches = list(open_source(src, columns=features + ["y"]).batches())
    n_out = [0]

    def run_release():
        n_out[0] += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            release(src, os.path.join(tmp.name, f"out{n_out[0]}") + "/", spec, features, "y")

    def digest_batches():
        d = RowDigest(key)
        for b in batches:
            d.update(b)

    runs = {"release": run_release,
            "fingerprint": lambda: input_fingerprint(loc, key),
            "digest in release": digest_batches,
            "digest on resume": lambda: part_input_digest(plan, 0, 65536)}
    run_release()                                   # warm-up: kernels loaded, page cache warm
    times: dict = {k: [] for k in runs}
    for _ in range(args.repeat):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["release"])
    print(f"{args.rows:,} rows x {args.features} float64 features + label, "
          f"{os.path.getsize(src) / 2**20:.1f} MiB Parquet, median of {args.repeat}")
    print(f"{'measurement':<20}{'seconds':>10}{'M rows/s':>10}{'/ release':>11}")
    for name in runs:
        s = statistics.median(times[name])
        print(f"{name:<20}{s:>10.4f}{args.rows / s / 1e6:>10.2f}{s / base:>10.1%}")
    ratio = statistics.median(times["fingerprint"]) / base
    print(f"goal: fingerprint <= 10% of the release: {ratio:.2%} "
          f"({'met' if ratio <= 0.10 else 'NOT met'})")
    print(f"CPU: {cpu_model()} ({os.cpu_count()} cores); load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    tmp.cleanup()


if __name__ == "__main__":
    main()
