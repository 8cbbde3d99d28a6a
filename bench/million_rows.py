"""The default at about a million all-private rows of a real table (issues 44 and 46 goals).

    python bench/million_rows.py [RELEASES] [--copies K]       # default 3 releases, K = 4

The shipped ACS 2024 income table has 281,136 rows; the goals speak of ~10^6 private rows. Its
first 230,000 rows are repeated K times (K = 4: 920,000 rows; every copy of a row gets its own
noise, as K people with the same answers would release) and released with every column private
at (epsilon_x, epsilon_y) = (4, 2), bound 1, shuffled; the other 51,136 rows are the clean
hold-out.  Per release, on the same file:

- classification (label y = PINCP > 50,000): ``IWPClassifier()`` (the default across learners),
  ``IWPClassifier(solver='moments', loss='quadratic')``, accuracy on the hold-out; beside them
  the majority and clean scikit-learn ``LogisticRegression`` on the training rows' features
  scaled and clipped as the release does them;
- regression (target PINCP clipped to 0:200,000 dollars, a second release with
  ``task='regression'``): ``IWPRegressor()`` (the default: the moment learner), R^2 in dollars
  on the hold-out, against clean OLS on the same scaled features.

Repeating rows does not add information about the population (the clean baselines are fitted on
the 230,000 distinct rows): it measures what a million rows' worth of noise leaves of the
release's quality.  Prints the CPU model and the load average.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import iwpfast  # noqa: E402
from iwpfast.benchmarks import cpu_model  # noqa: E402
from iwpfast.datasets import acs_path  # noqa: E402
from iwpfast.estimators._units import scale_and_clip  # noqa: E402
from iwpfast.privacy import ReleaseSpec, release  # noqa: E402

FEATURES = ["AGEP", "SCHL", "WKHP", "SEX"]
RANGES = {"AGEP": (0.0, 99.0), "SCHL": (1.0, 24.0), "WKHP": (0.0, 99.0), "SEX": (1.0, 2.0)}
N_TRAIN, BOUND, TARGET_RANGE = 230_000, 1.0, (0.0, 200_000.0)


def _design(X):
    lo = np.array([RANGES[f][0] for f in FEATURES])
    hi = np.array([RANGES[f][1] for f in FEATURES])
    cols = scale_and_clip(list(X.T), lo, hi, BOUND, private=[True] * len(FEATURES))
    return np.column_stack(cols)


def _columns(table):
    X = np.column_stack([table.column(f).to_numpy().astype(np.float64) for f in FEATURES])
    return X, table.column("y").to_numpy(), np.clip(
        table.column("PINCP").to_numpy().astype(np.float64), *TARGET_RANGE)


def main() -> None:
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("releases", nargs="?", type=int, default=3)
    parser.add_argument("--copies", type=int, default=4)
    opts = parser.parse_args()
    repeats, copies = opts.releases, opts.copies
    table = pq.read_table(str(acs_path("income")))
    train, hold = table.slice(0, N_TRAIN), table.slice(N_TRAIN)
    X_tr, y_tr, t_tr = _columns(train)
    X_ho, y_ho, t_ho = _columns(hold)
    from sklearn.linear_model import LogisticRegression
    lr = LogisticRegression(max_iter=1000).fit(_design(X_tr), y_tr)
    lr_acc = float(np.mean(lr.predict(_design(X_ho)) == y_ho))
    Z = np.column_stack([_design(X_tr), np.ones(len(t_tr))])
    beta = np.linalg.lstsq(Z, t_tr, rcond=None)[0]
    pred = np.column_stack([_design(X_ho), np.ones(len(t_ho))]) @ beta
    ss = float(np.sum((t_ho - t_ho.mean()) ** 2))
    ols_r2 = 1.0 - float(np.sum((t_ho - pred) ** 2)) / ss
    majority = max(float(np.mean(y_ho)), 1.0 - float(np.mean(y_ho)))
    n = N_TRAIN * copies
    print(f"ACS income, first {N_TRAIN:,} rows x {copies} copies = {n:,} released rows, all "
          f"private (4, 2), bound {BOUND:g}; {hold.num_rows:,} clean hold-out rows")
    print(f"  majority {majority:.4f}; clean LogisticRegression {lr_acc:.4f}; clean OLS R^2 "
          f"{ols_r2:.4f}")
    acc_default, acc_moments, r2_default = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.parquet")
        pq.write_table(pa.concat_tables([train] * copies), raw)
        cls_spec = ReleaseSpec(epsilon_x=4.0, epsilon_y=2.0, delta=1e-5, bound=BOUND,
                               features=tuple(FEATURES), ranges=RANGES, label="y")
        reg_spec = ReleaseSpec(epsilon_x=4.0, epsilon_y=2.0, delta=1e-5, bound=BOUND,
                               features=tuple(FEATURES), ranges=RANGES, label="PINCP",
                               task="regression", target_range=TARGET_RANGE)
        for r in range(repeats):
            cls_path, reg_path = (os.path.join(tmp, f"{k}{r}.parquet") for k in ("c", "r"))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                release(raw, cls_path, cls_spec, shuffle=True, overwrite=True)
                release(raw, reg_path, reg_spec, shuffle=True, overwrite=True)
                t0 = time.perf_counter()
                default = iwpfast.IWPClassifier(progress=False).fit(cls_path)
                t1 = time.perf_counter()
                moments = iwpfast.IWPClassifier(progress=False, solver="moments",
                                                loss="quadratic").fit(cls_path)
                t2 = time.perf_counter()
                reg = iwpfast.IWPRegressor(progress=False).fit(reg_path)
                t3 = time.perf_counter()
            acc_default.append(float(np.mean(default.predict(X_ho) == y_ho)))
            acc_moments.append(float(np.mean(moments.predict(X_ho) == y_ho)))
            p = reg.predict(X_ho)
            r2_default.append(1.0 - float(np.sum((t_ho - p) ** 2)) / ss)
            print(f"  release {r + 1}: IWPClassifier() {acc_default[-1]:.4f} "
                  f"({default.tuning_.get('learners', {}).get('chosen', 'sgd')} chosen, "
                  f"{t1 - t0:.1f} s); moments {acc_moments[-1]:.4f} ({t2 - t1:.1f} s); "
                  f"IWPRegressor() R^2 {r2_default[-1]:.4f} (solver_ {reg.solver_}, alpha_ "
                  f"{reg.alpha_:.3g}, {t3 - t2:.1f} s)")
    for name, values, ref, what in (("IWPClassifier()", acc_default, lr_acc, "clean LR"),
                                    ("moments classifier", acc_moments, lr_acc, "clean LR"),
                                    ("IWPRegressor()", r2_default, ols_r2, "clean OLS R^2")):
        a = np.array(values)
        se = a.std(ddof=1) / np.sqrt(a.size) if a.size > 1 else float("nan")
        print(f"  mean of {a.size}: {name:20s} {a.mean():.4f} (SE {se:.4f}); minus {what} "
              f"{a.mean() - ref:+.4f}")
    print(f"CPU: {cpu_model()}; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
