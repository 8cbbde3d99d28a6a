"""Categorical columns on real tables: accuracy and AUC on a clean hold-out, release bytes per row.

Tables: the shipped ACS file (iwpfast/data/acs2024_income_FL_NY_PA.parquet: numeric AGEP, WKHP;
categorical ST (state, a string), SCHL (ordinal code 1..24, treated as categorical), SEX) and
statsmodels' ``fair`` (numeric age, yrs_married, children; categorical rate_marriage, religious,
educ, occupation, occupation_husb codes; label: affairs > 0).  Per table: 80/20 split (fixed
seed), then

- clean scikit-learn LogisticRegression on the numeric columns alone and with the one-hot columns
  (the same coordinates the release writes: numeric scaled by range, one-hot 0/1);
- categorical public + numeric private: the default IWPClassifier on the release;
- all private, with and without the categorical columns, same (epsilon_x, epsilon_y);
- all private with the categorical columns by k-ary randomized response (``--epsilon-cat``) at the
  same total budget: epsilon_x - m epsilon_cat for the numeric part, epsilon_cat per column;
- bytes per row of the releases (Parquet, the default layout).

    python bench/categorical.py [--epsilon-x 4 --epsilon-y 2 --seed 0] [--epsilon-cat 0.5 1]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings

import numpy as np
import pandas as pd


def acs():
    import iwpfast
    path = os.path.join(iwpfast.__path__[0], "data", "acs2024_income_FL_NY_PA.parquet")
    df = pd.read_parquet(path)
    numeric = {"AGEP": (0, 99), "WKHP": (0, 99)}
    categories = {"ST": sorted(df["ST"].unique().tolist()), "SCHL": list(range(1, 25)),
                  "SEX": [1, 2]}
    return "ACS income (FL, NY, PA)", df, numeric, categories, "y"


def fair():
    import statsmodels.datasets as d
    df = d.fair.load_pandas().data.copy()
    df["y"] = (df["affairs"] > 0).astype(np.int64)
    for c in ("rate_marriage", "religious", "educ", "occupation", "occupation_husb"):
        df[c] = df[c].astype(np.int64)
    numeric = {"age": (17.5, 42), "yrs_married": (0.5, 23), "children": (0, 5.5)}
    categories = {"rate_marriage": [1, 2, 3, 4, 5], "religious": [1, 2, 3, 4],
                  "educ": [9, 12, 14, 16, 17, 20], "occupation": [1, 2, 3, 4, 5, 6],
                  "occupation_husb": [1, 2, 3, 4, 5, 6]}
    return "statsmodels fair (affairs > 0)", df, numeric, categories, "y"


def acs101():
    """ACS with the SCHL x ST interaction as a fourth categorical column: 3 + 24 + 2 + 72 = 101
    one-hot coordinates (the issue's size goal)."""
    title, df, numeric, categories, label = acs()
    df = df.copy()
    df["SCHLxST"] = df["SCHL"].astype(str) + "x" + df["ST"].astype(str)
    categories = {**categories, "SCHLxST": [f"{s}x{t}" for s in categories["SCHL"]
                                            for t in categories["ST"]]}
    return title + " + SCHL x ST", df, numeric, categories, label


def label_only_grid(train, test, numeric, categories, label, args, tmp):
    """The label-only goal: the default 'auto' model against the best head of a wide hand grid
    (alpha in 1e-5..1e-2, learning_rate in 1e-3..1, 4 x 4) on the same label-only release."""
    import iwpfast
    from iwpfast.privacy import ReleaseSpec, release
    feats = [*numeric, *categories]
    spec = ReleaseSpec(epsilon_y=args.epsilon_y, ranges=numeric, label=label, categories=categories,
                       public_features=feats)
    out = os.path.join(tmp, "label_only_grid.parquet")
    release(train, out, spec, features=feats, label=label, seed=args.seed, overwrite=True,
            shuffle=True)
    yt = test[label].to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = iwpfast.IWPClassifier(random_state=args.seed).fit(out)
        a_acc, a_auc = scores(yt, auto.decision_function(test))
        best = (0.0, 0.0, None)
        for alpha in (1e-5, 1e-4, 1e-3, 1e-2):
            for step in (1e-3, 1e-2, 1e-1, 1.0):
                try:
                    m = iwpfast.IWPClassifier(alpha=alpha, learning_rate=step,
                                              random_state=args.seed).fit(out)
                except iwpfast.IWPError:
                    continue
                acc, auc = scores(yt, m.decision_function(test))
                if acc > best[0]:
                    best = (acc, auc, (alpha, step))
    print(f"| label-only (epsilon_y={args.epsilon_y:g}), default 'auto' | {a_acc:.4f} | {a_auc:.4f} | "
          f"alpha {auto.alpha_:.3g}, step {auto.learning_rate_:.3g} |")
    print(f"| label-only, best of the 4 x 4 hand grid | {best[0]:.4f} | {best[1]:.4f} | "
          f"alpha, step = {best[2]} |")


def one_hot_clean(df, numeric, categories):
    cols = [np.clip((df[c].to_numpy(float) - (lo + hi) / 2) / ((hi - lo) / 2), -1, 1)
            for c, (lo, hi) in numeric.items()]
    num = np.column_stack(cols)
    hot = [(df[c].to_numpy()[:, None] == np.array(v)[None, :]).astype(float)
           for c, v in categories.items()]
    return num, np.column_stack([num, *hot])


def scores(y, u):
    from sklearn.metrics import roc_auc_score
    return float(np.mean((u > 0) == (y == 1))), float(roc_auc_score(y, u))


def main(argv=None):
    from sklearn.linear_model import LogisticRegression

    import iwpfast
    from iwpfast.exceptions import PrivacyLeakWarning
    from iwpfast.privacy import ReleaseSpec, release

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilon-x", type=float, default=4.0)
    ap.add_argument("--epsilon-y", type=float, default=2.0)
    ap.add_argument("--bound", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tables", nargs="+", default=["acs", "fair"])
    ap.add_argument("--epsilon-cat", type=float, nargs="+", default=None,
                    help="per-column budgets of categorical_mechanism='rr' to try at the same total "
                         "budget: epsilon_x for the numeric part is then the Gaussian total "
                         "epsilon_x minus m * epsilon_cat (default: (epsilon_x / 2) / m)")
    ap.add_argument("--only-rr", action="store_true", help="skip the Gaussian cases")
    ap.add_argument("--label-only-grid", action="store_true",
                    help="also compare the label-only default with a 4 x 4 hand grid")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", PrivacyLeakWarning)   # the seeded releases of a simulation
    tmp = tempfile.mkdtemp(prefix="iwp_cat_")
    for name in args.tables:
        title, df, numeric, categories, label = {"acs": acs, "fair": fair, "acs101": acs101}[name]()
        rng = np.random.default_rng(args.seed)
        order = rng.permutation(len(df))
        cut = int(0.8 * len(df))
        train, test = df.iloc[order[:cut]].reset_index(drop=True), df.iloc[order[cut:]].reset_index(drop=True)
        yt = test[label].to_numpy()
        print(f"\n## {title}: {len(train):,} training / {len(test):,} hold-out rows; "
              f"{len(numeric)} numeric, {len(categories)} categorical columns "
              f"({sum(map(len, categories.values()))} one-hot coordinates); "
              f"epsilon_x={args.epsilon_x:g}, epsilon_y={args.epsilon_y:g}, bound {args.bound:g}")
        print(f"majority: {max(yt.mean(), 1 - yt.mean()):.4f}")
        if args.label_only_grid:
            label_only_grid(train, test, numeric, categories, label, args, tmp)
            continue
        print("| model | accuracy | AUC | release bytes/row |")
        print("|---|---|---|---|")
        num_tr, all_tr = one_hot_clean(train, numeric, categories)
        num_te, all_te = one_hot_clean(test, numeric, categories)
        for what, Xtr, Xte in (("clean LogisticRegression, numeric only", num_tr, num_te),
                               ("clean LogisticRegression, numeric + one-hot", all_tr, all_te)):
            lr = LogisticRegression(max_iter=2000).fit(Xtr, train[label])
            print(f"| {what} | %.4f | %.4f | |" % scores(yt, lr.decision_function(Xte)))
        feats = [*numeric, *categories]
        base = dict(epsilon_y=args.epsilon_y, ranges=numeric, label=label)
        cases = [
            ("categorical public, numeric private", feats,
             dict(epsilon_x=args.epsilon_x, delta=1e-5, bound=args.bound, categories=categories,
                  public_features=list(categories))),
            ("all private, numeric only", list(numeric),
             dict(epsilon_x=args.epsilon_x, delta=1e-5, bound=args.bound)),
            ("all private, numeric + categorical", feats,
             dict(epsilon_x=args.epsilon_x, delta=1e-5, bound=args.bound, categories=categories)),
            ("label-only, numeric + categorical (all public)", feats,
             dict(categories=categories, public_features=feats)),
        ]
        m = len(categories)
        for e_cat in (args.epsilon_cat or [args.epsilon_x / 2 / m]):
            e_num = args.epsilon_x - m * e_cat
            if e_num <= 0:
                continue
            cases.append((f"all private, categorical by rr (epsilon_x {e_num:g} + {m} x "
                          f"epsilon_cat {e_cat:g} = {args.epsilon_x:g})", feats,
                          dict(epsilon_x=e_num, delta=1e-5, bound=args.bound, categories=categories,
                               categorical_mechanism="rr", epsilon_categorical=e_cat)))
        if args.only_rr:
            cases = [c for c in cases if "rr" in c[0] or c[0] == "all private, numeric only"]
        for what, features, kw in cases:
            spec = ReleaseSpec(**base, **kw)
            out = os.path.join(tmp, f"{name}_{len(features)}_{len(kw)}_{hash(what)}.parquet")
            t0 = time.perf_counter()
            release(train, out, spec, features=features, label=label, seed=args.seed,
                    overwrite=True, shuffle=True)
            rel_s = time.perf_counter() - t0
            size = os.path.getsize(out) / len(train)
            t0 = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = iwpfast.IWPClassifier(random_state=args.seed).fit(out)
            except iwpfast.IWPError as exc:         # e.g. every 'auto' head of an rr release diverged
                print(f"| IWPClassifier(), {what} | failed: {str(exc)[:60]} | | {size:.1f} |")
                continue
            fit_s = time.perf_counter() - t0
            acc, auc = scores(yt, model.decision_function(test))
            print(f"| IWPClassifier(), {what} | {acc:.4f} | {auc:.4f} | {size:.1f} "
                  f"(release {rel_s:.1f} s, fit {fit_s:.1f} s) |")


if __name__ == "__main__":
    main()
