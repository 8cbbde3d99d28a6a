"""The default 'auto' against a wide manual grid and clean scikit-learn, on real public tables.

    python bench/real_tables.py                          # every table and release kind
    python bench/real_tables.py --tables acs_income,fair --kinds label,public --seeds 2
    PYTHONPATH=/work/main python bench/real_tables.py    # the same with another checkout's code
    python bench/real_tables.py --tables fair --kinds label --seeds 10 --rules --cache /tmp/rt
    python bench/real_tables.py --tables acs_income --kinds private --seeds 4 --resample 2000000 \
        --no-manual                                      # the same population, 2 M training rows

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

The oracle's optimism.  "best manual" picks the best of 21 heads by the very rows it is scored on,
so it is biased upward by the selection (most on small tables: fair's 1,337 test rows give each
accuracy a standard error near 0.012).  Beside it the script prints an **honest manual** baseline:
the manual head chosen by the clean accuracy on one random half of the test rows, scored on the
other half, and the swap, averaged over ``HONEST_SPLITS`` random halvings (a selection made on
n/2 clean rows: slightly weaker than one made on n, never optimistic).  "default - honest" carries
the standard error of the per-seed differences.

``--rules`` also scores, on the same fits, the final-choice rules of ``RULES`` over the heads the
'auto' scan kept (the scan's inputs to ``iwpfast.sgd.choice.select`` are recorded and every kept
head's model is scored on the clean test rows): one 'auto' fit per seed compares them all, and the
rule in force reproduces the default's accuracy exactly (a check).  ``--cache DIR`` keeps the manual
grid's per-row results (they do not depend on 'auto'), so that a rerun fits only 'auto';
``--no-manual`` skips the manual grid (rules and the default only).  ``--alpha-multipliers`` and
``--step-multipliers`` replace the grid's ``iwpfast.sgd.grid`` constants for an experiment,
``--no-prune`` trains every head to the end (the rules then see the whole grid).
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
#: random halvings of the test rows the honest manual baseline averages over
HONEST_SPLITS = 20
#: the draw of ``--resample`` (one fixed draw of the training rows for every release seed)
RESAMPLE_SEED = 20261128
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


def _reliable(estimates):
    return [i for i, e in enumerate(estimates) if e.reliable and math.isfinite(e.risk)]


def _paired_se(cov, estimates, best, j):
    if cov is None:
        return estimates[best].stderr
    return math.sqrt(max(cov[j, j] + cov[best, best] - 2.0 * cov[j, best], 0.0))


def one_se_rule(multiplier=1.0, alpha_span=math.inf, monotone=False, paired=True,
                per_alpha=False):
    """Candidates within ``multiplier`` paired SEs of the best (``paired=False``: the best's own
    SE) and at most ``alpha_span`` times its alpha; ``monotone``: also every head whose estimate
    is below a candidate's; ``per_alpha``: only each alpha's lowest estimate; among them the
    largest alpha, then the lowest estimate."""
    def rule(points, estimates, cov):
        rel = _reliable(estimates)
        if not rel:
            return None
        best = min(rel, key=lambda j: estimates[j].risk)
        if per_alpha:
            rel = [min((j for j in rel if points[j].alpha == a), key=lambda j: estimates[j].risk)
                   for a in {points[j].alpha for j in rel}]
        cand = [j for j in rel
                if estimates[j].risk - estimates[best].risk
                <= multiplier * (_paired_se(cov, estimates, best, j) if paired
                                 else estimates[best].stderr)
                and points[j].alpha <= alpha_span * points[best].alpha * (1 + 1e-9)]
        if monotone:
            top = max(estimates[j].risk for j in cand)
            cand = [j for j in rel if estimates[j].risk <= top]
        return max(cand, key=lambda j: (points[j].alpha, -estimates[j].risk))
    return rule


def one_se_steps_rule(points, estimates, cov):
    """At the best head's alpha, the smallest step within one paired SE of it."""
    rel = _reliable(estimates)
    if not rel:
        return None
    best = min(rel, key=lambda j: estimates[j].risk)
    cand = [j for j in rel if points[j].alpha == points[best].alpha
            and estimates[j].risk - estimates[best].risk <= _paired_se(cov, estimates, best, j)]
    return min(cand, key=lambda j: points[j].learning_rate)


#: final-choice rules ``--rules`` compares on the heads an 'auto' scan kept (None: ``select``'s)
RULES = {
    "in force": None,
    "1 SE": one_se_rule(1.0),
    "0.75 SE": one_se_rule(0.75),
    "0.5 SE": one_se_rule(0.5),
    "min risk": one_se_rule(0.0),
    "1 SE, alpha <= 10 best": one_se_rule(1.0, 10.0),
    "1 SE, steps at best alpha": one_se_steps_rule,
    "1 SE monotone": one_se_rule(1.0, monotone=True),
    "0.5 SE monotone": one_se_rule(0.5, monotone=True),
    "1 SE per alpha": one_se_rule(1.0, per_alpha=True),
    "1 SE unpaired": one_se_rule(1.0, paired=False),
}


class Recorder:
    """Records what 'auto' chose from: ``select``'s inputs and the scan's kept states."""

    def __init__(self):
        from iwpfast.sgd import choice, tuning
        self.choice, self.tuning, self.calls, self.results = choice, tuning, [], []

    def __enter__(self):
        self._select, self._tune = self.choice.select, self.tuning.tune_stream

        def select(points, estimates, covariance=None, **kw):
            self.calls.append((list(points), list(estimates), covariance))
            return self._select(points, estimates, covariance, **kw)

        def tune_stream(*a, **kw):
            result = self._tune(*a, **kw)
            self.results.append(result)
            return result
        self.choice.select, self.tuning.tune_stream = select, tune_stream
        return self

    def __exit__(self, *exc):
        self.choice.select, self.tuning.tune_stream = self._select, self._tune


def rule_accuracies(auto, recorder, Xt, yt):
    """{rule: clean test accuracy of the head it picks} over the heads the scan kept."""
    import copy
    (points, estimates, cov), result = recorder.calls[-1], recorder.results[-1]
    in_force = result.chosen
    out = {}
    for name, rule in RULES.items():
        j = rule(points, estimates, cov) if rule is not None else None
        j = in_force if j is None else j
        pt = points[j]
        state, cfg = result.states[pt.name], result.configs[pt.name]
        theta, b = state.coef(cfg.average_start >= 0)
        m = copy.copy(auto)
        m.coef_, m.intercept_ = theta.reshape(1, -1), np.array([float(b) if auto.fit_intercept
                                                                else 0.0])
        out[name] = (float(m.score(Xt, yt)), pt.alpha, pt.learning_rate)
    assert out["in force"][0] == float(auto.score(Xt, yt)), "the recorded choice is not auto's"
    return out


def manual_grid(fit, noised, Xt, yt, cache_file):
    """Per manual head: alpha, step, per-row correctness on the test rows, AUC, clean risk."""
    if cache_file is not None and cache_file.exists():
        z = np.load(cache_file)
        return {k: z[k] for k in z.files}
    heads = dict(alpha=[], step=[], correct=[], auc=[], risk=[])
    for a in MANUAL_ALPHAS:
        for g in MANUAL_STEPS:
            try:
                m = fit(alpha=a, learning_rate=g, average="tail",
                        **(dict(variance_cap=2.0) if noised else {}))
            except Exception:            # a diverged head: not a candidate
                continue
            heads["alpha"].append(a)
            heads["step"].append(g)
            heads["correct"].append(np.asarray(m.predict(Xt)) == yt)
            heads["auc"].append(auc(yt, m.decision_function(Xt)))
            heads["risk"].append(float(m.risk(Xt, yt)))
    out = {k: np.array(v) for k, v in heads.items()}
    if cache_file is not None:
        np.savez_compressed(cache_file, **out)
    return out


def honest_manual(correct, seed=0):
    """The manual head chosen on one random half of the test rows, scored on the other half (and
    the swap), mean over ``HONEST_SPLITS`` halvings."""
    rng = np.random.default_rng(seed)
    n = correct.shape[1]
    accs = []
    for _ in range(HONEST_SPLITS):
        order = rng.permutation(n)
        halves = order[: n // 2], order[n // 2:]
        for pick, score in (halves, halves[::-1]):
            j = int(np.argmax(correct[:, pick].mean(axis=1)))
            accs.append(float(correct[j, score].mean()))
    return float(np.mean(accs))


def _mean_se(values):
    v = np.asarray(values, dtype=np.float64)
    return float(v.mean()), (float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0)


def run_one(name, table, kind, seeds, tmp, *, rules=False, manual=True, cache=None,
            resample=None):
    import iwpfast
    X, y = table["load"]()
    tr, te = split(len(y))
    if resample:
        # the training rows drawn with replacement up to ``resample`` rows (one fixed draw): the
        # same population at a size where the rungs of successive halving are taken
        tr = np.random.default_rng(RESAMPLE_SEED).choice(tr, size=int(resample), replace=True)
        cache = None                    # the manual grid's cache is keyed by the table alone
    Xtr, ytr, Xt, yt = X[tr], y[tr], X[te], y[te]
    bound = math.sqrt(len(table["features"]))
    from sklearn.linear_model import LogisticRegression
    sk = LogisticRegression(max_iter=5000).fit(scaled(Xtr, table), ytr)
    row = dict(table=name, kind=kind, rows=len(tr), test=len(te),
               majority=float(max(yt.mean(), 1 - yt.mean())),
               sklearn=(float(sk.score(scaled(Xt, table), yt)),
                        auc(yt, sk.decision_function(scaled(Xt, table)))))
    autos, chosen, edges, secs, by_rule = [], [], [], [], []
    bests, honest, by_risk = [], [], []
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
        with Recorder() as recorder:
            auto = fit()
        secs.append(time.perf_counter() - t0)
        autos.append(evaluate(auto, Xt, yt))
        chosen.append((float(np.ravel(auto.alpha_)[0]), float(np.ravel(auto.learning_rate_)[0])))
        edges.append(str(getattr(auto, "tuning_", {}).get("edge", "-") or "none"))
        if rules and recorder.calls:
            by_rule.append(rule_accuracies(auto, recorder, Xt, yt))
        if manual:
            cache_file = None if cache is None else Path(cache) / f"{name}_{kind}_{seed}.npz"
            g = manual_grid(fit, noised, Xt, yt, cache_file)
            acc = g["correct"].mean(axis=1)
            b = int(np.argmax(acc))
            bests.append((float(acc[b]), float(g["auc"][b]), float(g["alpha"][b]),
                          float(g["step"][b])))
            honest.append(honest_manual(g["correct"]))
            by_risk.append(float(acc[int(np.argmin(g["risk"]))]))
    auto_acc = np.array([a for a, _ in autos])
    row.update(auto=(float(auto_acc.mean()), float(np.mean([u for _, u in autos]))),
               auto_sd=float(auto_acc.std(ddof=1)) if len(auto_acc) > 1 else 0.0,
               auto_accs=auto_acc.tolist(), chosen=chosen, edge=edges,
               auto_seconds=float(np.median(secs)))
    if manual:
        row.update(best=(float(np.mean([b[0] for b in bests])),
                         float(np.mean([b[1] for b in bests]))),
                   best_heads=[(b[2], b[3]) for b in bests],
                   vs_best=_mean_se(auto_acc - np.array([b[0] for b in bests])),
                   honest=float(np.mean(honest)),
                   vs_honest=_mean_se(auto_acc - np.array(honest)),
                   best_risk_acc=float(np.mean(by_risk)))
    if by_rule:
        row["rules"] = {r: dict(acc=_mean_se([d[r][0] for d in by_rule]),
                                vs_in_force=_mean_se([d[r][0] - d["in force"][0]
                                                      for d in by_rule]),
                                heads=[d[r][1:] for d in by_rule])
                        for r in RULES}
    return row


def _multipliers(text):
    return tuple(float(v) for v in text.split(","))


def main():
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", default=",".join([*TABLES, "breast_cancer"]))
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--seeds", type=int, default=2, help="release seeds per private kind")
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    ap.add_argument("--rules", action="store_true",
                    help="also compare the final-choice rules of RULES on the same fits")
    ap.add_argument("--no-manual", action="store_true", help="skip the manual grid")
    ap.add_argument("--cache", default=None, help="a folder keeping the manual grid's results")
    ap.add_argument("--no-prune", action="store_true",
                    help="train every head of the grid to the end (iwpfast.sgd.tuning.PRUNE_AT = ())")
    ap.add_argument("--resample", type=int, default=None,
                    help="draw the training rows with replacement up to this many rows (the "
                         "clean test rows do not change; the manual grid is not cached)")
    ap.add_argument("--alpha-multipliers", type=_multipliers, default=None,
                    help="replace iwpfast.sgd.grid.ALPHA_MULTIPLIERS (comma-separated)")
    ap.add_argument("--step-multipliers", type=_multipliers, default=None,
                    help="replace iwpfast.sgd.grid.STEP_MULTIPLIERS (comma-separated)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import iwpfast
    from iwpfast.sgd import grid
    if args.alpha_multipliers:
        grid.ALPHA_MULTIPLIERS = args.alpha_multipliers
    if args.step_multipliers:
        grid.STEP_MULTIPLIERS = args.step_multipliers
    if args.no_prune:
        os.environ["IWPFAST_PRUNE_AT"] = ""        # no halving rungs (iwpfast.settings)
    if args.cache:
        Path(args.cache).mkdir(parents=True, exist_ok=True)
    print(machine())
    print(f"iwpfast from {Path(iwpfast.__file__).parent}; alpha x {grid.ALPHA_MULTIPLIERS}; "
          f"steps x {tuple(round(m, 4) for m in grid.STEP_MULTIPLIERS)}")
    tables = dict(TABLES, breast_cancer=_breast_cancer())
    rows = []
    print("| table | release | train rows | default acc ± sd / AUC (chosen alpha, step; edge) | "
          "oracle best manual acc / AUC (alpha, step) | honest manual acc | default - oracle "
          "± SE | default - honest ± SE | acc of the manual head with the lowest clean risk | "
          "majority | sklearn acc / AUC |\n|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.tables.split(","):
        table = tables[name]
        kinds = [k for k in args.kinds.split(",")
                 if k in table.get("default_kinds", KINDS) or args.kinds != ",".join(KINDS)]
        for kind in kinds:
            with tempfile.TemporaryDirectory() as tmp:
                r = run_one(name, table, kind, args.seeds, tmp, rules=args.rules,
                            manual=not args.no_manual, cache=args.cache,
                            resample=args.resample)
            rows.append(r)
            a = r["chosen"][0]
            manual = "| - | - | - | - | - " if args.no_manual else (
                f"| {r['best'][0]:.4f} / {r['best'][1]:.4f} ({r['best_heads'][0][0]:g}, "
                f"{r['best_heads'][0][1]:g}) | {r['honest']:.4f} | "
                f"{r['vs_best'][0]:+.4f} ± {r['vs_best'][1]:.4f} | "
                f"{r['vs_honest'][0]:+.4f} ± {r['vs_honest'][1]:.4f} | {r['best_risk_acc']:.4f} ")
            print(f"| {name} | {kind} | {r['rows']:,} | {r['auto'][0]:.4f} ± {r['auto_sd']:.4f} / "
                  f"{r['auto'][1]:.4f} ({a[0]:.2g}, {a[1]:.2g}; {r['edge'][0]}) {manual}| "
                  f"{r['majority']:.4f} | "
                  f"{r['sklearn'][0]:.4f} / {r['sklearn'][1]:.4f} |", flush=True)
    if any("rules" in r for r in rows):
        print("\nfinal-choice rules on the same fits: mean accuracy (difference to the rule in "
              "force ± its SE over the seeds)")
        print("| table | release | " + " | ".join(RULES) + " |\n|---|---|"
              + "---|" * len(RULES))
        for r in rows:
            if "rules" in r:
                cells = [f"{v['acc'][0]:.4f} ({v['vs_in_force'][0]:+.4f} ± "
                         f"{v['vs_in_force'][1]:.4f})" for v in r["rules"].values()]
                print(f"| {r['table']} | {r['kind']} | " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    sys.exit(main())
