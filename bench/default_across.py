"""The classifier's default across learners (``solver='auto'``: the SGD search, then the choice
among the SGD model, the moment learner's model and the constant; ``iwpfast.learner_choice``,
``iwpfast/estimators/_across.py``) against its candidates, on two shipped ACS tables.

    python bench/default_across.py [RELEASES] [--quick] [--grid] [--tables T,...] [--settings S,...]

RELEASES: releases per table and setting (default 5; ``--quick``: 2).  The default run takes
about 35-45 s on a 2-core AMD EPYC machine (--quick about 17 s; 20 releases of one setting about
50 s).  ``--tables``: a comma list of ``income`` and ``pubcov`` (default both); ``--settings``: a
comma list of ``all_private`` and ``label_only`` (default both), e.g.
``python bench/default_across.py 20 --tables income --settings all_private``.  ``--grid``: also,
in the label-only settings, a hand grid of fixed heads ``IWPClassifier(alpha=a,
learning_rate=g, variance_cap=2.0)``, a in (1e-4, 1e-3, 1e-2, 1e-1), g in (1e-3, 3e-3, 1e-2,
3e-2, 1e-1): 20 more fits per release; the best grid head per release is chosen on the clean
hold-out (an ORACLE: no private model can choose so).

Tables (every release: delta 1e-5, bound 1, epsilon_y 2, shuffled, OS randomness; the first rows
released, the rest the clean hold-out):

1. ``income``: the shipped ACS income table (``iwpfast.datasets.acs_path("income")``), label y,
   features AGEP SCHL WKHP SEX with ranges AGEP=0:99 SCHL=1:24 WKHP=0:99 SEX=1:2; the first
   230,000 rows released.
2. ``pubcov``: the shipped ACS public coverage table (``acs_path("pubcov")``), label y, features
   AGEP SCHL SEX PINCP with ranges AGEP=0:64 SCHL=1:24 SEX=1:2 PINCP=-20000:30000; the first
   125,000 rows released.

The shipped tables are ordered by state (ST): the released rows are states 12, 36 and 42, the
hold-out state 42 only, so the label's base rate differs between them (income: 0.487 released,
0.506 hold-out; pubcov: 0.341 and 0.352) and the default's debiased accuracies on the release
(printed with its choice) need not match the hold-out's.

Settings: ``all_private`` (every feature private at epsilon_x 4, epsilon_y 2) and
``label_only`` (every feature public, ``public_features``: range-clipped only, no feature noise;
epsilon_y 2; no epsilon_x: such a spec refuses it).

Models per release (all ``progress=False``): ``IWPClassifier()`` (the default; its
``tuning_["learners"]["chosen"]`` printed), ``IWPClassifier(solver='sgd')`` (the previous
default), ``IWPClassifier(solver='moments', loss='quadratic')`` (the moment learner alone) and,
the cost references, ``IWPClassifier(alpha=A, learning_rate=G)`` at the alpha_ / learning_rate_
the sgd search chose on that release and the same with ``variance_cap=C``, the cap the search ran
its heads with (``tuning_["variance_cap"]``: 2.0 on noisy features, none on clean ones).  Without
C the one head is not the search's head: on all-private releases it runs uncapped and may diverge
or land far below the search's model.  The seconds ratios divide by the capped head's seconds
(the search's chosen head refitted alone; the default's seconds / its seconds is the default's
cost in fixed fits).  Before the first release's timed fits every model is fitted once untimed
(the kernels' compile or cache load).  Each model predicts the RAW hold-out features (``predict`` maps
them as the release did); printed per release and model: the clean hold-out accuracy and the
fit's wall seconds.  Per model: the mean accuracy over the releases, its SE (std ddof=1 /
sqrt(R)), and mean - the moment learner's mean with the SE of the paired difference.  Baselines:
the majority class of the hold-out, and clean scikit-learn ``LogisticRegression(max_iter=1000)``
on the training rows' features scaled as the release scales them (``scale_and_clip``: each range
onto [-1, 1], the private columns also L2-clipped to the bound), scored on the hold-out scaled
the same way.  At the end a summary table (seconds: the median over the releases of each
release's ratio to the fixed head's seconds), the CPU model and the load average.
"""
from __future__ import annotations

import math
import os
import sys
import tempfile
import time
import warnings

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import iwpfast  # noqa: E402
from iwpfast.benchmarks import cpu_model  # noqa: E402
from iwpfast.datasets import acs_path  # noqa: E402
from iwpfast.estimators._units import scale_and_clip  # noqa: E402
from iwpfast.privacy import ReleaseSpec, release  # noqa: E402

DELTA, EPS_X, EPS_Y, BOUND = 1e-5, 4.0, 2.0, 1.0
LABEL = "y"
TABLES = {
    "income": dict(kind="income", rows=230_000, features=["AGEP", "SCHL", "WKHP", "SEX"],
                   ranges={"AGEP": (0.0, 99.0), "SCHL": (1.0, 24.0), "WKHP": (0.0, 99.0),
                           "SEX": (1.0, 2.0)}, title="ACS income"),
    "pubcov": dict(kind="pubcov", rows=125_000, features=["AGEP", "SCHL", "SEX", "PINCP"],
                   ranges={"AGEP": (0.0, 64.0), "SCHL": (1.0, 24.0), "SEX": (1.0, 2.0),
                           "PINCP": (-20_000.0, 30_000.0)}, title="ACS public coverage"),
}
SETTINGS = {
    "all_private": ("all private (epsilon_x 4, epsilon_y 2)",
                    lambda features: dict(epsilon_x=EPS_X, epsilon_y=EPS_Y)),
    "label_only": ("label only (every feature public; epsilon_y 2)",
                   lambda features: dict(epsilon_y=EPS_Y, public_features=tuple(features))),
}
DEFAULT, SGD, MOMENTS, FIXED, FIXED_CAP = ("default", "sgd", "moments", "fixed", "fixed_cap")
MODELS = {DEFAULT: ("IWPClassifier()", {}),
          SGD: ("IWPClassifier(solver='sgd')", {"solver": "sgd"}),
          MOMENTS: ("IWPClassifier(solver='moments', loss='quadratic')",
                    {"solver": "moments", "loss": "quadratic"})}
GRID_ALPHAS = (1e-4, 1e-3, 1e-2, 1e-1)
GRID_RATES = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
GRID = "grid (oracle)"
WARM: list = []          # set after the first release's untimed warm-up fits


def load(name: str):
    """(table dict, training Arrow table, hold-out raw features DataFrame, hold-out labels)."""
    t = TABLES[name]
    table = pq.read_table(str(acs_path(t["kind"])), columns=[*t["features"], LABEL])
    train, hold = table.slice(0, t["rows"]), table.slice(t["rows"])
    X_hold = hold.select(t["features"]).to_pandas().astype(np.float64)
    return t, train, X_hold, hold.column(LABEL).to_numpy().astype(int)


def scaled(t: dict, X: pd.DataFrame, private) -> np.ndarray:
    lo = np.array([t["ranges"][f][0] for f in t["features"]])
    hi = np.array([t["ranges"][f][1] for f in t["features"]])
    cols = [X[f].to_numpy(np.float64) for f in t["features"]]
    return np.column_stack(scale_and_clip(cols, lo, hi, BOUND, private=private))


def clean_lr(t: dict, train, X_hold: pd.DataFrame, y_hold: np.ndarray, private) -> float:
    from sklearn.linear_model import LogisticRegression
    X_train = train.select(t["features"]).to_pandas().astype(np.float64)
    y_train = train.column(LABEL).to_numpy().astype(int)
    lr = LogisticRegression(max_iter=1000).fit(scaled(t, X_train, private), y_train)
    return float(lr.score(scaled(t, X_hold, private), y_hold))


def fit(kw: dict, path: str, X_hold: pd.DataFrame, y_hold: np.ndarray):
    """(model, hold-out accuracy, seconds) or (None, error text, seconds)."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = iwpfast.IWPClassifier(progress=False, **kw).fit(path)
        except Exception as exc:  # noqa: BLE001  (a benchmark reports and goes on)
            return None, f"{type(exc).__name__}: {exc}", time.perf_counter() - start
        seconds = time.perf_counter() - start
        acc = float(np.mean(np.asarray(model.predict(X_hold)).astype(int) == y_hold))
    return model, acc, seconds


def mean_se(values) -> tuple[float, float]:
    a = np.asarray(values, np.float64)
    if a.size == 0:
        return math.nan, math.nan
    return float(a.mean()), float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else math.nan


def run(name: str, setting: str, releases: int, grid: bool, tmp: str) -> dict:
    t, train, X_hold, y_hold = load(name)
    heading, privacy = SETTINGS[setting]
    spec = ReleaseSpec(delta=DELTA, bound=BOUND, features=tuple(t["features"]),
                       ranges=t["ranges"], label=LABEL, **privacy(t["features"]))
    private = [f not in spec.public_features for f in t["features"]]
    majority = float(max(y_hold.mean(), 1 - y_hold.mean()))
    lr = clean_lr(t, train, X_hold, y_hold, private)
    grid = grid and setting == "label_only"
    ranges = " ".join(f"{f}={lo:g}:{hi:g}" for f, (lo, hi) in t["ranges"].items())
    print(f"\n===== {t['title']}, {heading}: {train.num_rows:,} rows released, {len(y_hold):,} "
          f"hold-out; features {ranges}; bound {BOUND:g}, delta {DELTA:g}\n  majority "
          f"{majority:.4f}; clean LogisticRegression on the scaled features {lr:.4f}")
    acc = {k: [] for k in (*MODELS, FIXED, FIXED_CAP)}   # per release (nan: the fit failed)
    secs = {k: [] for k in (*MODELS, FIXED, FIXED_CAP)}
    chosen, best_grid = [], []
    for r in range(releases):
        path = os.path.join(tmp, f"{name}_{setting}_{r}.parquet")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            release(train, path, spec, shuffle=True, overwrite=True)
        if not WARM:                 # compile / load the kernels once, untimed
            for kw in [kw for _, kw in MODELS.values()] + [{"alpha": 1e-3, "learning_rate": 0.1}]:
                fit(kw, path, X_hold, y_hold)
            WARM.append(True)
        fitted = {}
        for key, (label, kw) in MODELS.items():
            model, a, s = fit(kw, path, X_hold, y_hold)
            fitted[key] = model
            note = ""
            if model is None:
                print(f"  release {r + 1}: {label:51s} FAILED ({s:.1f} s): {a}")
                a = math.nan
            else:
                if key == DEFAULT:
                    learners = (getattr(model, "tuning_", None) or {}).get("learners")
                    choice = learners["chosen"] if learners else "(no choice recorded)"
                    chosen.append(choice)
                    note = f"; chosen {choice}, solver_ {getattr(model, 'solver_', '?')}"
                    if learners:
                        note += "; " + ", ".join(
                            f"{c} {k} {v[k]:.4f} (SE {v['stderr']:.4f})"
                            for c, v in learners["candidates"].items()
                            for k in v if k != "stderr")
                elif key == SGD:
                    note = (f"; alpha_ {model.alpha_:.3g}, learning_rate_ "
                            f"{model.learning_rate_:.3g}, search's variance_cap "
                            f"{(model.tuning_ or {}).get('variance_cap')}")
                elif key == MOMENTS:
                    note = f"; alpha_ {model.alpha_:.3g}"
                print(f"  release {r + 1}: {label:51s} accuracy {a:.4f}, {s:7.3f} s{note}")
            acc[key].append(a)
            secs[key].append(s)
        sgd = fitted[SGD]
        cap = (getattr(sgd, "tuning_", None) or {}).get("variance_cap") if sgd is not None else None
        for key in (FIXED, FIXED_CAP):
            a, s = math.nan, math.nan
            if sgd is not None:
                kw = {"alpha": float(sgd.alpha_), "learning_rate": float(sgd.learning_rate_)}
                if key == FIXED_CAP:
                    kw["variance_cap"] = None if cap is None or math.isinf(cap) else float(cap)
                model, a, s = fit(kw, path, X_hold, y_hold)
                label = "IWPClassifier(" + ", ".join(f"{k}={v:.3g}" if isinstance(v, float)
                                                     else f"{k}={v}" for k, v in kw.items()) + ")"
                if model is None:
                    print(f"  release {r + 1}: {label:51s} FAILED ({s:.3f} s): {a}")
                    a = math.nan
                else:
                    print(f"  release {r + 1}: {label:51s} accuracy {a:.4f}, {s:7.3f} s (fixed "
                          f"head{'' if key == FIXED else ', the search cap'})")
            acc[key].append(a)
            secs[key].append(s)
        if grid:
            heads = []
            for alpha in GRID_ALPHAS:
                for rate in GRID_RATES:
                    model, a, _ = fit({"alpha": alpha, "learning_rate": rate, "variance_cap": 2.0},
                                      path, X_hold, y_hold)
                    if model is not None:
                        heads.append((a, alpha, rate))
            if heads:
                a, alpha, rate = max(heads)
                print(f"  release {r + 1}: best of the {len(heads)} grid heads (chosen on the "
                      f"clean hold-out: an oracle) alpha {alpha:g}, learning_rate {rate:g}: "
                      f"accuracy {a:.4f}")
                best_grid.append(a)
            else:
                print(f"  release {r + 1}: every grid head failed")
                best_grid.append(math.nan)
        os.remove(path)
    print(f"  over {releases} releases (mean, SE = std(ddof=1)/sqrt(R); difference to the moment "
          f"learner paired by release):")
    mom = np.asarray(acc[MOMENTS], np.float64)
    out = {"table": name, "setting": setting, "majority": majority, "lr": lr, "chosen": chosen}
    rows = [*MODELS, FIXED, FIXED_CAP] + ([GRID] if grid else [])
    acc[GRID] = best_grid
    for key in rows:
        a = np.asarray(acc[key], np.float64)
        ok = np.isfinite(a) & np.isfinite(mom)
        m, se = mean_se(a[np.isfinite(a)])
        d, dse = mean_se(a[ok] - mom[ok])
        label = MODELS[key][0] if key in MODELS else (
            "fixed head at the sgd search's alpha_, learning_rate_" if key == FIXED else
            "the same, at the search's variance_cap too" if key == FIXED_CAP else
            "best grid head per release (ORACLE)")
        flag = "  <-- below the moments by more than 1 SE" if d < -dse else ""
        print(f"    {label:55s} {m:.4f} (SE {se:.4f}); minus moments {d:+.4f} (SE {dse:.4f})"
              f"{flag if key != MOMENTS else ''}")
        out[key] = (m, se, d, dse)
    if chosen:
        counts = {c: chosen.count(c) for c in sorted(set(chosen))}
        print(f"    the default chose: {', '.join(f'{c} {n}x' for c, n in counts.items())}")
    fixed = np.asarray(secs[FIXED_CAP], np.float64)
    for key in MODELS:
        ratio = np.asarray(secs[key], np.float64) / fixed
        out[f"{key}_ratio"] = float(np.nanmedian(ratio)) if np.isfinite(ratio).any() else math.nan
        out[f"{key}_secs"] = float(np.median(secs[key]))
    out["fixed_secs"] = float(np.nanmedian(fixed)) if np.isfinite(fixed).any() else math.nan
    print(f"    median seconds: default {out['default_secs']:.3f}, sgd {out['sgd_secs']:.3f}, "
          f"moments {out['moments_secs']:.3f}, fixed head {out['fixed_secs']:.3f}; median ratio "
          f"to the fixed head: default {out['default_ratio']:.2f}, sgd {out['sgd_ratio']:.2f}, "
          f"moments {out['moments_ratio']:.2f}")
    return out


def summary(results: list[dict], releases: int) -> None:
    print(f"\n===== summary ({releases} releases per setting; accuracy on the clean hold-out; "
          "seconds: median per-release ratio to the fixed head)")
    head = (f"{'table':7s} {'setting':11s} {'major':>6s} {'cleanLR':>7s} {'default ± SE':>15s} "
            f"{'sgd':>6s} {'moments':>7s} {'def-mom (SE)':>16s} {'grid*':>6s} {'def/fix':>7s} "
            f"{'sgd/fix':>7s} {'mom/fix':>7s}")
    print(head)
    for o in results:
        grid = f"{o[GRID][0]:.4f}" if GRID in o else "-"
        print(f"{o['table']:7s} {o['setting']:11s} {o['majority']:6.4f} {o['lr']:7.4f} "
              f"{o[DEFAULT][0]:.4f} ± {o[DEFAULT][1]:.4f} {o[SGD][0]:6.4f} {o[MOMENTS][0]:7.4f} "
              f"{o[DEFAULT][2]:+.4f} ({o[DEFAULT][3]:.4f}) {grid:>6s} {o['default_ratio']:7.2f} "
              f"{o['sgd_ratio']:7.2f} {o['moments_ratio']:7.2f}")
    if any(GRID in o for o in results):
        print("  grid*: the mean of the best grid head per release, chosen on the clean hold-out "
              "(an oracle, an upper reference)")


def main() -> None:
    argv = sys.argv[1:]
    opts = {"--tables": ",".join(TABLES), "--settings": ",".join(SETTINGS)}
    plain = []
    i = 0
    while i < len(argv):
        a = argv[i]
        key, _, val = a.partition("=")
        if key in opts:
            if not val:
                i += 1
                val = argv[i]
            opts[key] = val
        elif not a.startswith("--"):
            plain.append(a)
        elif a not in ("--quick", "--grid"):
            raise SystemExit(f"unknown option {a}")
        i += 1
    quick, grid = "--quick" in argv, "--grid" in argv
    releases = int(plain[0]) if plain else (2 if quick else 5)
    tables = [s for s in opts["--tables"].split(",") if s]
    settings = [s for s in opts["--settings"].split(",") if s]
    for s, known in ((tables, TABLES), (settings, SETTINGS)):
        bad = [x for x in s if x not in known]
        if bad:
            raise SystemExit(f"unknown {bad}: choose from {', '.join(known)}")
    t0 = time.perf_counter()
    print(f"iwpfast {iwpfast.__version__}; {releases} releases per setting"
          f"{' (--quick)' if quick else ''}{'; with the grid' if grid else ''}; tables "
          f"{', '.join(tables)}; settings {', '.join(settings)}")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in tables:
            for setting in settings:
                results.append(run(name, setting, releases, grid, tmp))
    summary(results, releases)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s; CPU: {cpu_model()}; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
