"""The default 'auto' against a wide manual grid and clean scikit-learn, on real public tables.

    python bench/real_tables.py                          # every table and release kind
    python bench/real_tables.py --tables acs_income,fair --kinds label,public --seeds 2
    PYTHONPATH=/work/main python bench/real_tables.py    # the same with another checkout's code

Tables (all shipped: in iwpfast's wheel or in statsmodels' / scikit-learn's):

- ``acs_income``: iwpfast/data/acs2024_income_FL_NY_PA.parquet, AGEP SCHL WKHP SEX, label y
  (PINCP > 50000);
- ``acs_pubcov``: iwpfast/data/acs2024_pubcov_FL_NY_PA.parquet, AGEP SCHL PINCP SEX, label y
  (public coverage);
- ``fair``: statsmodels.datasets.fair (Fair's 1978 affairs survey), 8 survey codes, label
  affairs > 0;
- ``randhie``: statsmodels.datasets.randhie (RAND health insurance experiment), 9 columns, label
  mdvis > 0 (any outpatient visit);
- ``breast_cancer``: scikit-learn's ``load_breast_cancer`` (569 rows: only the clean fit, whose
  goal does not depend on a noisy hold-out; ``--kinds`` can add the others).

Ranges are declared, not read from the data: the codebooks' ranges (ACS PUMS data dictionary; the
task filters of iwpfast/data/README.md are public, so pubcov's PINCP is declared -19998:30000),
the category codes of the statsmodels descriptions (fair), the variables' definitions (randhie:
lncoins = ln(coinsurance + 1) with coinsurance 0..100 %, lpi and fmde logarithms of dollar
amounts declared 0:8 and 0:9, disea 0:60 chronic conditions).  One exception, for this benchmark
only: breast_cancer has no codebook, its ranges are the data's min/max (no release is made of it
by default).  Every bound is sqrt(p) (no row is clipped).

Release kinds (``iwpfast.privacy.release`` to a Parquet file, a benchmark seed; fitted from the
path, as a user does):

- ``label``: label-only, eps_y = 1, every feature public;
- ``public``: the columns named in PUBLIC public, the others private, (eps_x, eps_y) = (4, 2);
- ``private``: every feature private, (4, 2);
- ``clean``: no release: ``fit(X_raw, y, ranges=..., feature_bound=B)``, the data owner's clean
  fit.

Per table and kind the script prints the default ``IWPClassifier()`` (its chosen alpha / step and
whether ``tuning_["edge"]`` flagged it), the best head of a manual grid (steps 1e-3 .. 1 on a
half-decade grid x alpha 1e-4, 1e-3, 1e-2; ranked by the clean hold-out accuracy, an oracle no
private learner has; variance cap 2 where the features are noised, tail averaging), the accuracy
of the manual head with the lowest clean exponential risk (the oracle of what 'auto' minimizes:
the private risk is an unbiased estimate of that risk, not of the accuracy), the majority
class and scikit-learn's ``LogisticRegression`` on the same scaled clean columns: accuracy and AUC
on a clean hold-out (30% of the rows, at most 50,000), mean over ``--seeds`` release seeds.
``--json FILE`` also writes the rows (to compare two checkouts).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

MANUAL_STEPS = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0)
MANUAL_ALPHAS = (1e-4, 1e-3, 1e-2)
KINDS = ("label", "public", "private", "clean")


def _acs(name, features, ranges, public):
    def load():
        import pyarrow.parquet as pq

        import iwpfast
        t = pq.read_table(Path(iwpfast.__file__).parent / "data" / name)
        X = np.column_stack([t.column(f).to_numpy().astype(np.float64) for f in features])
        return X, t.column("y").to_numpy().astype(np.int64)
    return dict(load=load, features=features, ranges=ranges, public=public)


def _statsmodels(name, label, threshold, ranges, public):
    def load():
        import statsmodels.api as sm
        d = getattr(sm.datasets, name).load_pandas().data
        X = d[list(ranges)].to_numpy(dtype=np.float64)
        return X, (d[label].to_numpy() > threshold).astype(np.int64)
    return dict(load=load, features=list(ranges), ranges=ranges, public=public)


def _breast_cancer():
    from sklearn.datasets import load_breast_cancer
    d = load_breast_cancer()
    names = [f"f{j}" for j in range(d.data.shape[1])]
    # no codebook: the data's own ranges (this benchmark only; never for a real release)
    ranges = {n: (float(d.data[:, j].min()), float(d.data[:, j].max()))
              for j, n in enumerate(names)}
    return dict(load=lambda: (d.data.astype(np.float64), d.target.astype(np.int64)),
                features=names, ranges=ranges, public=names[:10], default_kinds=("clean",))


TABLES = {
    "acs_income": _acs("acs2024_income_FL_NY_PA.parquet", ["AGEP", "SCHL", "WKHP", "SEX"],
                       {"AGEP": (0, 99), "SCHL": (1, 24), "WKHP": (0, 99), "SEX": (1, 2)},
                       public=["SCHL", "SEX"]),
    "acs_pubcov": _acs("acs2024_pubcov_FL_NY_PA.parquet", ["AGEP", "SCHL", "PINCP", "SEX"],
                       {"AGEP": (0, 99), "SCHL": (1, 24), "PINCP": (-19998, 30000),
                        "SEX": (1, 2)}, public=["SCHL", "SEX"]),
    "fair": _statsmodels("fair", "affairs", 0.0,
                         {"rate_marriage": (1, 5), "age": (17.5, 42), "yrs_married": (0.5, 23),
                          "children": (0, 5.5), "religious": (1, 4), "educ": (9, 20),
                          "occupation": (1, 6), "occupation_husb": (1, 6)},
                         public=["children", "religious", "educ", "occupation",
                                 "occupation_husb"]),
    "randhie": _statsmodels("randhie", "mdvis", 0.0,
                            {"lncoins": (0, 4.61512), "idp": (0, 1), "lpi": (0, 8),
                             "fmde": (0, 9), "physlm": (0, 1), "disea": (0, 60),
                             "hlthg": (0, 1), "hlthf": (0, 1), "hlthp": (0, 1)},
                            public=["lncoins", "idp", "lpi", "fmde"]),
}


def machine() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)["Model name"]
    except (OSError, subprocess.CalledProcessError, KeyError):
        model = "unknown"
    return (f"CPU: {model.strip()}; {os.cpu_count()} cores; load average "
            + " ".join(f"{x:.2f}" for x in os.getloadavg()))


def split(n, seed=0):
    order = np.random.default_rng(seed).permutation(n)
    n_test = min(50_000, int(0.3 * n))
    return order[n_test:], order[:n_test]


def scaled(X, table):
    lo = np.array([table["ranges"][f][0] for f in table["features"]], dtype=np.float64)
    hi = np.array([table["ranges"][f][1] for f in table["features"]], dtype=np.float64)
    return np.clip(2.0 * (X - lo) / (hi - lo) - 1.0, -1.0, 1.0)


def auc(y, score):
    from sklearn.metrics import roc_auc_score
    s = np.asarray(score, dtype=np.float64)
    return float(roc_auc_score(y, s)) if np.all(np.isfinite(s)) and np.ptp(s) > 0 else 0.5


def evaluate(model, Xt, yt):
    return float(model.score(Xt, yt)), auc(yt, model.decision_function(Xt))


def make_release(table, kind, X, y, path, seed):
    from iwpfast.privacy import ReleaseSpec, release
    feats = table["features"]
    bound = math.sqrt(len(feats))
    if kind == "label":
        spec = ReleaseSpec(epsilon_y=1.0, bound=bound, features=feats, ranges=table["ranges"],
                           label="y", public_features=tuple(feats))
    else:
        public = tuple(table["public"]) if kind == "public" else ()
        spec = ReleaseSpec(epsilon_x=4.0, delta=1e-5, epsilon_y=2.0, bound=bound, features=feats,
                           ranges=table["ranges"], label="y", public_features=public)
    data = {f: X[:, j] for j, f in enumerate(feats)}
    data["y"] = y
    release(data, path, spec, seed=seed, overwrite=True)
    return spec


def run_one(name, table, kind, seeds, tmp):
    import iwpfast
    X, y = table["load"]()
    tr, te = split(len(y))
    Xtr, ytr, Xt, yt = X[tr], y[tr], X[te], y[te]
    bound = math.sqrt(len(table["features"]))
    from sklearn.linear_model import LogisticRegression
    sk = LogisticRegression(max_iter=5000).fit(scaled(Xtr, table), ytr)
    row = dict(table=name, kind=kind, rows=len(tr), test=len(te),
               majority=float(max(yt.mean(), 1 - yt.mean())),
               sklearn=(float(sk.score(scaled(Xt, table), yt)),
                        auc(yt, sk.decision_function(scaled(Xt, table)))))
    autos, bests, by_risk, chosen, edges, secs = [], [], [], [], [], []
    for seed in range(seeds if kind != "clean" else 1):
        ranges = [tuple(table["ranges"][f]) for f in table["features"]]
        if kind == "clean":
            def fit(ranges=ranges, **kw):
                return iwpfast.IWPClassifier(progress=False, **kw).fit(
                    Xtr, ytr, ranges=ranges, feature_bound=bound)
            noised = False
        else:
            path = Path(tmp) / f"{name}_{kind}_{seed}.parquet"
            spec = make_release(table, kind, Xtr, ytr, path, seed=1000 + seed)
            noised = spec.epsilon_x is not None

            def fit(path=path, **kw):
                return iwpfast.IWPClassifier(progress=False, **kw).fit(str(path))
        t0 = time.perf_counter()
        auto = fit()
        secs.append(time.perf_counter() - t0)
        autos.append(evaluate(auto, Xt, yt))
        chosen.append((float(np.ravel(auto.alpha_)[0]), float(np.ravel(auto.learning_rate_)[0])))
        edges.append(str(getattr(auto, "tuning_", {}).get("edge", "-") or "none"))
        grid = []
        for a in MANUAL_ALPHAS:
            for g in MANUAL_STEPS:
                try:
                    m = fit(alpha=a, learning_rate=g, average="tail",
                            **(dict(variance_cap=2.0) if noised else {}))
                except Exception:            # a diverged head: not a candidate
                    continue
                grid.append((*evaluate(m, Xt, yt), a, g, float(m.risk(Xt, yt))))
        bests.append(max(grid))
        by_risk.append(min(grid, key=lambda h: h[4]))
    auto_acc = np.array([a for a, _ in autos])
    row.update(auto=(float(auto_acc.mean()), float(np.mean([u for _, u in autos]))),
               auto_sd=float(auto_acc.std(ddof=1)) if len(auto_acc) > 1 else 0.0,
               best=(float(np.mean([b[0] for b in bests])), float(np.mean([b[1] for b in bests]))),
               best_heads=[(b[2], b[3]) for b in bests], chosen=chosen, edge=edges,
               best_risk_acc=float(np.mean([b[0] for b in by_risk])),
               auto_seconds=float(np.median(secs)))
    return row


def main():
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", default=",".join([*TABLES, "breast_cancer"]))
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--seeds", type=int, default=2, help="release seeds per private kind")
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import iwpfast
    print(machine())
    print(f"iwpfast from {Path(iwpfast.__file__).parent}")
    tables = dict(TABLES, breast_cancer=_breast_cancer())
    rows = []
    print("| table | release | train rows | default acc / AUC (chosen alpha, step; edge) | "
          "best manual head acc / AUC (alpha, step) | default - best | acc of the manual head "
          "with the lowest clean risk | majority | sklearn acc / AUC |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for name in args.tables.split(","):
        table = tables[name]
        kinds = [k for k in args.kinds.split(",")
                 if k in table.get("default_kinds", KINDS) or args.kinds != ",".join(KINDS)]
        for kind in kinds:
            with tempfile.TemporaryDirectory() as tmp:
                r = run_one(name, table, kind, args.seeds, tmp)
            rows.append(r)
            a, c = r["chosen"][0], r["best_heads"][0]
            print(f"| {name} | {kind} | {r['rows']:,} | {r['auto'][0]:.4f} ± {r['auto_sd']:.4f} / "
                  f"{r['auto'][1]:.4f} ({a[0]:.2g}, {a[1]:.2g}; {r['edge'][0]}) | "
                  f"{r['best'][0]:.4f} / {r['best'][1]:.4f} ({c[0]:g}, {c[1]:g}) | "
                  f"{r['auto'][0] - r['best'][0]:+.4f} | {r['best_risk_acc']:.4f} | "
                  f"{r['majority']:.4f} | "
                  f"{r['sklearn'][0]:.4f} / {r['sklearn'][1]:.4f} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    sys.exit(main())
