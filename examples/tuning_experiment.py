"""Auto vs a manual grid vs naive vs clean, on the shipped ACS 2024 income data (issue 14).

    python examples/tuning_experiment.py [--rows 32561] [--seeds 4] [--epsilon-x 4] [--epsilon-y 2]

A random training sample of ``--rows`` rows is released (features AGEP SCHL WKHP SEX with their
codebook ranges, bound 2) under ``--seeds`` fresh release seeds; every method is fitted on the
release and scored on 50,000 other clean rows (exponential risk, accuracy), mean and sd over seeds:

- auto: ``IWPClassifier()`` (alpha, step chosen by private validation on 10% of the release);
- manual grid: alpha x step x cap 2 x tail averaging, each on the whole release, best/median/worst
  by the *clean* test risk (an oracle no private learner has);
- old default: alpha=1, learning_rate=1e-3 (the defaults before "auto");
- naive: ``IWPClassifier(correction="none")`` (auto, no debiasing);
- clean: the clean baseline ``fit(X_raw, y, ranges=...)`` with auto (no noise);
- intercept only: the best constant score.
"""
import argparse
import warnings

import numpy as np

FEATURES = ["AGEP", "SCHL", "WKHP", "SEX"]
RANGES = {"AGEP": (0, 99), "SCHL": (1, 24), "WKHP": (0, 99), "SEX": (1, 2)}
GRID_ALPHA = (0.1, 0.5, 2.0)
GRID_STEP = (0.003, 0.01, 0.03, 0.1)


def main():
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=32561)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--epsilon-x", type=float, default=4.0)
    ap.add_argument("--epsilon-y", type=float, default=2.0)
    ap.add_argument("--bound", type=float, default=2.0)
    args = ap.parse_args()

    from pathlib import Path

    import pyarrow.parquet as pq

    import iwpfast
    from iwpfast.privacy import ReleaseSpec, privatize
    t = pq.read_table(Path(iwpfast.__file__).parent / "data" / "acs2024_income_FL_NY_PA.parquet")
    X = np.column_stack([t.column(f).to_numpy().astype(np.float64) for f in FEATURES])
    y = t.column("y").to_numpy()
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    test, pool = order[:50000], order[50000:]
    Xt, yt = X[test], y[test]
    spec = ReleaseSpec(epsilon_x=args.epsilon_x, epsilon_y=args.epsilon_y, delta=1e-5,
                       bound=args.bound, features=FEATURES, ranges=RANGES, label="y")
    results = {}

    def add(name, model):
        results.setdefault(name, []).append((model.risk(Xt, yt), model.score(Xt, yt)))

    warnings.simplefilter("ignore")
    for seed in range(args.seeds):
        idx = np.random.default_rng(100 + seed).choice(pool, args.rows, replace=False)
        Xr, yr = X[idx], y[idx]
        Xn, yn = privatize(Xr, yr, spec, seed=1000 + seed)  # the released rows (scaled, noised)
        noise = dict(noise_var=spec.sigma ** 2, label_keep_prob=spec.label_keep_prob,
                     feature_bound=spec.bound)

        def fit(Xn=Xn, yn=yn, noise=noise, **kw):
            m = iwpfast.IWPClassifier(progress=False, **kw).fit(Xn, yn, **noise)
            # the release's ranges, so the clean test rows are read in raw units
            m.feature_ranges_ = dict(zip([f"x{j}" for j in range(4)], RANGES.values(), strict=True))
            m.feature_bound_ = spec.bound
            return m

        auto = fit()
        add("auto (IWP, private validation)", auto)
        grid = [(fit(alpha=a, learning_rate=g, variance_cap=2.0, average="tail"), a, g)
                for a in GRID_ALPHA for g in GRID_STEP]
        risks = sorted((m.risk(Xt, yt), m.score(Xt, yt)) for m, _, _ in grid)
        results.setdefault("manual grid: best (clean oracle)", []).append(risks[0])
        results.setdefault("manual grid: median", []).append(risks[len(risks) // 2])
        results.setdefault("manual grid: worst", []).append(risks[-1])
        add("old default (alpha 1, step 1e-3)", fit(alpha=1.0, learning_rate=1e-3))
        add("naive SGD (auto)", fit(correction="none"))
        clean = iwpfast.IWPClassifier(progress=False).fit(Xr, yr, ranges=list(RANGES.values()),
                                                          feature_bound=spec.bound)
        add("clean baseline (auto, no noise)", clean)
        p1 = yr.mean()
        const = 0.5 * np.log(p1 / (1 - p1))          # minimizer of the exponential risk
        risk0 = np.mean(np.exp(-np.where(yt == 1, 1, -1) * const))
        acc0 = max(np.mean(yt), 1 - np.mean(yt))
        results.setdefault("intercept only", []).append((risk0, acc0))
        print(f"seed {seed}: auto chose alpha {auto.alpha_:.3g}, step {auto.learning_rate_:.3g} "
              f"({sum(auto.tuning_['reliable'])}/{auto.tuning_['heads']} heads reliable)")
    print(f"\nACS 2024 income, {args.rows:,} training rows, ({args.epsilon_x:g} + {args.epsilon_y:g}, "
          f"1e-5)-LDP, bound {args.bound:g}, sigma {spec.sigma:.3f}; clean test rows 50,000; "
          f"{args.seeds} release seeds (mean +- sd)")
    print("| method | clean test risk (exponential) | accuracy |\n|---|---|---|")
    for name, vals in results.items():
        r = np.array(vals)
        print(f"| {name} | {r[:, 0].mean():.4f} +- {r[:, 0].std(ddof=1) if len(r) > 1 else 0:.4f} | "
              f"{r[:, 1].mean():.4f} +- {r[:, 1].std(ddof=1) if len(r) > 1 else 0:.4f} |")


if __name__ == "__main__":
    main()
