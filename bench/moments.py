"""The debiased second moments (iwpfast.moments, issue 44): the chunk kernel alone against BLAS for
the float columns' Gram plus the kernel for the rest, against ``accumulate_runs`` (what a pass
runs: one kernel call per chunk of float32 columns read in place, 20 folds of 2^15-row blocks),
and a whole pass over a Parquet release against pyarrow's decode-only read of the same columns,
and a whole ``solver='moments'`` fit (five fold moments, the alpha search, the refit).

    python bench/moments.py [--rows 1000000] [--repeat 7]

Chunk rates: 2^18 rows at p = 10, 2^15 at p = 100 (float64 (p, n) blocks, a +-1 label; the
same values as p float32 columns for ``accumulate_runs``), best of ``--repeat``.  The pass: a
seeded release (epsilon_x 4, bound 1, epsilon_y 2) of ``--rows`` rows and p = 10 uniform
features, written once to ``bench/data/moments_<rows>.parquet``; best of ``--repeat`` warm
passes.  One JSON line per measurement.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def _best(f, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def chunk_rates(repeat):
    from iwpfast._kernels.moments import moments_chunk
    from iwpfast.moment_stats import (
        SCALAR_LABEL,
        accumulate_chunk,
        accumulate_runs,
        layout_for_columns,
    )
    rng = np.random.default_rng(0)
    for p, n in ((10, 1 << 18), (100, 1 << 15)):
        X = rng.normal(size=(p, n))
        y = rng.choice([-1.0, 1.0], n)

        def args(X=X, y=y, p=p, n=n):
            return (X, np.arange(p), np.ones(p), np.zeros((0, n), np.uint16),
                    np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0), y,
                    SCALAR_LABEL, 1.0, 1.0, 0.0, np.zeros((p + 1, p + 1)), np.zeros((p + 1, 1)))
        moments_chunk(*args())
        accumulate_chunk(*args())
        columns = list(X.astype(np.float32))
        layout = layout_for_columns([f"x{j}" for j in range(p)], np.ones(p), "y",
                                    label_kind=SCALAR_LABEL)

        def runs(columns=columns, layout=layout, y=y, p=p, n=n):
            accumulate_runs(layout, columns, np.zeros((0, n), np.uint16), y, 0, 20, 1 << 15,
                            np.zeros((20, p + 1, p + 1)), np.zeros((20, p + 1, 1)),
                            np.zeros(20, np.int64))
        runs()
        for name, f in (("kernel alone", lambda: moments_chunk(*args())),
                        ("BLAS X X^T + kernel", lambda: accumulate_chunk(*args())),
                        ("BLAS X X^T only", lambda X=X: X @ X.T),
                        ("accumulate_runs, float32 columns", runs)):
            print(json.dumps({"p": p, "what": name,
                              "M_rows_per_s": round(n / _best(f, repeat) / 1e6, 2)}))


def whole_pass(rows, repeat):
    import pyarrow.parquet as pq

    import iwpfast
    from iwpfast.privacy import ReleaseSpec
    path = os.path.join(os.path.dirname(__file__), "data", f"moments_{rows}.parquet")
    names = [f"x{j}" for j in range(10)]
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        rng = np.random.default_rng(1)
        X = rng.uniform(-1, 1, (rows, 10))
        data = {n: X[:, j] for j, n in enumerate(names)}
        data["y"] = (X @ np.linspace(1.5, -1, 10) + rng.logistic(size=rows) > 0).astype(np.int8)
        spec = ReleaseSpec(epsilon_x=4.0, delta=1e-5, bound=1.0, epsilon_y=2.0, features=names,
                           ranges={n: (-1.0, 1.0) for n in names}, label="y")
        iwpfast.release(data, path, spec, seed=0)
    from iwpfast.moment_stats import fold_moments

    def solver():
        iwpfast.IWPClassifier(solver="moments", loss="quadratic", progress=False).fit(path)

    iwpfast.moments(path)
    solver()
    t_mom = _best(lambda: iwpfast.moments(path), repeat)
    t_folds = _best(lambda: fold_moments(path, folds=5), repeat)
    t_fit = _best(solver, repeat)
    t_read = _best(lambda: pq.read_table(path, columns=names + ["y"]), repeat)
    print(json.dumps({"rows": rows, "moments_s": round(t_mom, 3),
                      "M_rows_per_s": round(rows / t_mom / 1e6, 2),
                      "five_folds_s": round(t_folds, 3), "solver_moments_fit_s": round(t_fit, 3),
                      "decode_only_s": round(t_read, 3), "ratio": round(t_mom / t_read, 2),
                      "fit_ratio": round(t_fit / t_read, 2)}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    a = parser.parse_args()
    from iwpfast.benchmarks import cpu_model
    print(json.dumps({"cpu": cpu_model(), "load_average": os.getloadavg()}))
    chunk_rates(a.repeat)
    whole_pass(a.rows, a.repeat)
