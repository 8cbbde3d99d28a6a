"""Public columns and label-only releases against all-private ones (issue 18's goals).

    python bench/public_columns.py --data randhie --seeds 5   # needs: pip install statsmodels
    python bench/public_columns.py --data acs --seeds 3       # the shipped ACS income data

For each data set: a fixed train / hold-out split (the hold-out stays clean), then the clean test
risk (exponential loss, raw units scaled by the declared ranges) of the **default** model,
``IWPClassifier()`` ("auto" alpha and step), fitted on

- the clean training rows (``fit(X_raw, y, ranges=...)``: the clean baseline),
- an all-private release at (eps_x + eps_y, delta) = (4 + 2, 1e-5), bound 2,
- the same release with 2 of the 5 features declared public (same eps, delta, bound: the same
  sigma on the 3 private columns, none on the public ones),
- a label-only release at eps_y = 1 (every feature public), and the naive model on it
  (``correction="none"``: the flipped labels taken as they are),

each release written to a Parquet file by ``iwpfast.release`` and read back by ``fit(path)`` (the
user's path), over ``--seeds`` release seeds (mean and its standard error).  Also the best
constant's risk (the majority class: 2 sqrt(p (1 - p)) at the training share p) and the
accuracies and AUC of ``evaluate_report``.

Data.  ``randhie``: the RAND Health Insurance Experiment extract bundled inside statsmodels'
wheel (20,190 rows; nothing is downloaded), label ``mdvis >= 1`` (any outpatient visit, 68.8%),
features lncoins (log coinsurance + 1), idp (individual deductible), lpi (log participation
incentive), physlm (physical limitation), disea (chronic diseases); public: the two plan
variables the insurer assigned, lncoins and idp.  Declared ranges from the variables' definitions
(coinsurance 0..100%, incentive up to 1,000 dollars), not from the data.  ``acs``:
iwpfast/data/acs2024_income_FL_NY_PA.parquet (281,136 rows), label PINCP > 50,000, features AGEP,
SCHL, WKHP, SEX and NY (the state is New York); public: SEX and NY.
"""
from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
import warnings

import numpy as np

from iwpfast import IWPClassifier, ReleaseSpec, release
from iwpfast.exceptions import NumericalWarning, PrivacyLeakWarning

DATA = {
    "randhie": dict(features=["lncoins", "idp", "lpi", "physlm", "disea"],
                    public=["lncoins", "idp"],
                    ranges={"lncoins": (0.0, 4.62), "idp": (0.0, 1.0), "lpi": (0.0, 7.2),
                            "physlm": (0.0, 1.0), "disea": (0.0, 60.0)}),
    "fair": dict(features=["rate_marriage", "age", "yrs_married", "religious", "educ"],
                 public=["age", "educ"],
                 ranges={"rate_marriage": (1.0, 5.0), "age": (17.5, 42.0),
                         "yrs_married": (0.0, 23.0), "religious": (1.0, 4.0), "educ": (9.0, 20.0)}),
    "acs": dict(features=["AGEP", "SCHL", "WKHP", "SEX", "NY"], public=["SEX", "NY"],
                ranges={"AGEP": (0.0, 99.0), "SCHL": (1.0, 24.0), "WKHP": (0.0, 99.0),
                        "SEX": (1.0, 2.0), "NY": (0.0, 1.0)}),
}


def load(name: str, threshold: int = 1):
    """(columns dict of float64 arrays, labels 0/1) of a data set, in its stored order."""
    if name == "randhie":
        import statsmodels.api as sm  # the data set ships inside statsmodels' wheel

        d = sm.datasets.randhie.load_pandas().data
        cols = {f: d[f].to_numpy(dtype=np.float64) for f in DATA[name]["features"]}
        return cols, (d["mdvis"].to_numpy() >= threshold).astype(np.int64)
    if name == "fair":
        import statsmodels.api as sm

        d = sm.datasets.fair.load_pandas().data
        cols = {f: d[f].to_numpy(dtype=np.float64) for f in DATA[name]["features"]}
        return cols, (d["affairs"].to_numpy() > 0).astype(np.int64)
    import pyarrow.parquet as pq

    path = os.path.join(os.path.dirname(__import__("iwpfast").__file__), "data",
                        "acs2024_income_FL_NY_PA.parquet")
    t = pq.read_table(path)
    cols = {f: t.column(f).to_numpy().astype(np.float64) for f in ("AGEP", "SCHL", "WKHP", "SEX")}
    cols["NY"] = (np.asarray(t.column("ST").to_pylist()) == "36").astype(np.float64)
    return cols, t.column("y").to_numpy().astype(np.int64)


def split(cols, y, test_fraction: float = 0.25, seed: int = 0):
    order = np.random.default_rng(seed).permutation(len(y))
    cut = int(len(y) * (1 - test_fraction))
    tr, te = order[:cut], order[cut:]
    return ({k: v[tr] for k, v in cols.items()}, y[tr]), ({k: v[te] for k, v in cols.items()}, y[te])


def best_constant_risk(p_train: float, p_test: float) -> float:
    """Exponential risk on the hold-out of the best constant score of the training share."""
    b = 0.5 * math.log(p_train / (1 - p_train))
    return p_test * math.exp(-b) + (1 - p_test) * math.exp(b)


def fit_release(train, spec, seed, tmp, correction="iwp"):
    path = os.path.join(tmp, f"r{seed}_{len(spec.public_features)}_{spec.epsilon_x}.parquet")
    if not os.path.exists(path):
        cols, y = train
        release({**cols, "y": y}, path, spec, seed=seed)
    return IWPClassifier(correction=correction, progress=False).fit(path)


def main(argv=None):
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--data", choices=sorted(DATA), default="randhie")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epsilon-x", type=float, default=4.0)
    ap.add_argument("--epsilon-y", type=float, default=2.0)
    ap.add_argument("--label-epsilon", type=float, default=1.0, help="eps_y of the label-only release")
    ap.add_argument("--bound", type=float, default=2.0)
    ap.add_argument("--public", nargs="+", default=None, help="the public features (default: the "
                    "data set's)")
    ap.add_argument("--threshold", type=int, default=1, help="randhie: the label is mdvis >= this")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore", PrivacyLeakWarning)   # seeded releases: a benchmark
    warnings.simplefilter("ignore", NumericalWarning)     # counted below, not printed per fit
    warnings.simplefilter("ignore", UserWarning)          # values beyond a declared range: clipped
    info = DATA[a.data]
    cols, y = load(a.data, a.threshold)
    if a.public:
        info = dict(info, public=a.public)
    train, test = split(cols, y)
    Xtest = np.column_stack([test[0][f] for f in info["features"]])
    feats, ranges = info["features"], info["ranges"]
    common = dict(delta=1e-5, features=tuple(feats), ranges=ranges, label="y")
    specs = {
        "all private": ReleaseSpec(epsilon_x=a.epsilon_x, bound=a.bound, epsilon_y=a.epsilon_y,
                                   **common),
        "2 of 5 public": ReleaseSpec(epsilon_x=a.epsilon_x, bound=a.bound, epsilon_y=a.epsilon_y,
                                     public_features=tuple(info["public"]), **common),
        "label-only": ReleaseSpec(epsilon_y=a.label_epsilon, public_features=tuple(feats),
                                  **dict(common, delta=None)),
    }
    t0 = time.perf_counter()
    rows = {}

    def record(name, model):
        rep = model.evaluate_report(Xtest, test[1])
        rows.setdefault(name, []).append((rep.risk, rep.accuracy, rep.auc,
                                          max(rep.predicted_share)))

    clean = IWPClassifier(progress=False).fit(
        np.column_stack([train[0][f] for f in feats]), train[1],
        ranges={f"x{j}": ranges[f] for j, f in enumerate(feats)}, feature_bound=a.bound)
    record("clean baseline", clean)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(a.seeds):
            for name, spec in specs.items():
                record(name, fit_release(train, spec, seed, tmp))
            record("label-only naive", fit_release(train, specs["label-only"], seed, tmp, "none"))
    p_train, p_test = float(train[1].mean()), float(test[1].mean())
    majority = max(p_test, 1 - p_test)
    print(f"# {a.data}: {len(train[1]):,} training rows, {len(test[1]):,} clean hold-out rows, "
          f"positives {p_train:.3f}; releases ({a.epsilon_x:g} + {a.epsilon_y:g}, 1e-5), bound "
          f"{a.bound:g}; label-only eps_y {a.label_epsilon:g}; {a.seeds} release seeds; "
          f"{time.perf_counter() - t0:.0f} s")
    print(f"# best constant (majority class): risk {best_constant_risk(p_train, p_test):.4f}, "
          f"accuracy {majority:.4f}")
    print("| model | clean test risk (mean +- se) | accuracy | AUC | largest predicted share |")
    print("|---|---|---|---|---|")
    for name, values in rows.items():
        v = np.array(values)
        se = v[:, 0].std(ddof=1) / math.sqrt(len(v)) if len(v) > 1 else 0.0
        print(f"| {name} | {v[:, 0].mean():.4f} +- {se:.4f} | {v[:, 1].mean():.4f} | "
              f"{v[:, 2].mean():.4f} | {v[:, 3].mean():.3f} |")
    mean = {k: float(np.mean([r[0] for r in v])) for k, v in rows.items()}
    print(f"# label-only - clean: {mean['label-only'] - mean['clean baseline']:+.4f} (goal <= 0.03); "
          f"naive - label-only: {mean['label-only naive'] - mean['label-only']:+.4f} (goal >= 0.03); "
          f"all private - 2 public: {mean['all private'] - mean['2 of 5 public']:+.4f} "
          "(goal >= 0.015)")


if __name__ == "__main__":
    main()
