"""Pure epsilon against (epsilon, delta) on the shipped ACS data: the discrete Laplace release
(delta = 0) and the discrete Gaussian release (delta = 1e-5) at the same epsilon_x.

The paper's ACS setting (docs/results.md): the 4 ACS features scaled into [-1, 1] from their
declared ranges, 20% held out (split seed 0), epsilon_x = epsilon_y = 1, exponential loss,
alpha = 10, batch 50, step 2e-5, one pass, no intercept.  Bounds that never clip, so both
releases carry the same clean data and the same optimum theta*: L2 bound sqrt(p) = 2 for the
Gaussian, L1 bound p = 4 for the Laplace.  Per law and seed: release the training rows (seed
1000 + seed), fit IWP and naive SGD, report the clean test risk (exponential loss on the clean
test rows) and the distance of the seed mean of theta from theta* and from where one pass of
clean SGD with the same hyper-parameters ends (in standard errors: the norm of the per-coordinate
sd over seeds / sqrt(seeds)).

    python examples/experiment_acs_laplace.py [--seeds 10] [--tasks income,pubcov]
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HYPER = dict(loss="exponential", alpha=10.0, learning_rate=2e-5, batch_size=50, fit_intercept=False,
             average=False, progress=False)


def split(task: str):
    from iwpfast.datasets import load_acs, scale_to_unit

    acs = load_acs(task)
    order = np.random.default_rng(0).permutation(acs.n_rows)
    n_test = int(round(0.2 * acs.n_rows))
    test, train = order[:n_test], order[n_test:]
    X = scale_to_unit(acs.X, acs.ranges_array)
    return acs, train, test, X


def run_task(task: str, seeds: int, epsilon_x: float = 1.0, epsilon_y: float = 1.0) -> dict:
    import iwpfast
    from iwpfast.privacy import ReleaseSpec, release
    from iwpfast.solvers import risk, solve

    acs, train, test, X = split(task)
    p = X.shape[1]
    theta_star = solve(X[train], acs.y[train], loss="exponential", alpha=HYPER["alpha"]).theta
    test_risk = lambda theta: risk(theta, X[test], acs.y[test], "exponential")  # noqa: E731
    data = {f: acs.X[train, j] for j, f in enumerate(acs.features)}
    data["y"] = (acs.y[train] > 0).astype(np.int64)
    specs = {
        "gaussian (delta 1e-5)": ReleaseSpec(epsilon_x=epsilon_x, delta=1e-5, bound=math.sqrt(p),
                                             epsilon_y=epsilon_y, features=acs.features,
                                             ranges=acs.ranges, label="y"),
        "laplace (delta 0)": ReleaseSpec(mechanism="laplace", epsilon_x=epsilon_x, delta=0.0,
                                         bound=float(p), epsilon_y=epsilon_y, features=acs.features,
                                         ranges=acs.ranges, label="y"),
    }
    # clean SGD with the same hyper-parameters: where one pass of SGD ends without any noise
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                  # "no release metadata": clean arrays
        clean = iwpfast.IWPClassifier(**HYPER).fit(X[train], acs.y[train], noise_var=0.0)
    theta_sgd = clean.coef_.ravel().copy()
    out = {"task": task, "n_train": int(train.size), "n_test": int(test.size),
           "theta_star_norm": float(np.linalg.norm(theta_star)),
           "risk_star": float(test_risk(theta_star)), "risk_clean_sgd": float(test_risk(theta_sgd)),
           "laws": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in specs.items():
            thetas = {"iwp": [], "naive": []}
            started = time.perf_counter()
            for seed in range(seeds):
                path = Path(tmp) / f"{task}-{seed}.parquet"
                if path.exists():
                    path.unlink()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")              # seeded: a simulation
                    release(data, path, spec, seed=1000 + seed)
                    for head, correction in (("iwp", "iwp"), ("naive", "none")):
                        clf = iwpfast.IWPClassifier(correction=correction, **HYPER).fit(path, label="y")
                        thetas[head].append(clf.coef_.ravel().copy())
            law = {"variance": spec.to_metadata()["noise"]["variance"],
                   "seconds": time.perf_counter() - started}
            for head, values in thetas.items():
                values = np.array(values)
                risks = np.array([test_risk(t) for t in values])
                diff = values.mean(axis=0) - theta_star
                se = np.linalg.norm(values.std(axis=0, ddof=1)) / math.sqrt(seeds)
                law[head] = {"risk_mean": float(risks.mean()), "risk_sd": float(risks.std(ddof=1)),
                             "risk_of_mean": float(test_risk(values.mean(axis=0))),
                             "bias": float(np.linalg.norm(diff)), "bias_se": float(se),
                             "bias_rel": float(np.linalg.norm(diff) / np.linalg.norm(theta_star)),
                             "from_clean_sgd": float(np.linalg.norm(values.mean(axis=0) - theta_sgd))}
            out["laws"][name] = law
    return out


def table(r: dict) -> str:
    lines = [f"**{r['task']}** (n_train = {r['n_train']:,}, |theta*| = {r['theta_star_norm']:.4g}, "
             f"clean test risk at theta* = {r['risk_star']:.5f}, after one pass of clean SGD = "
             f"{r['risk_clean_sgd']:.5f})", "",
             "| release | noise variance | head | test risk (mean ± sd) | risk of mean θ | "
             "|mean θ − θ*| (in se) | / |θ*| | |mean θ − θ_clean-SGD| (in se) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, law in r["laws"].items():
        for head in ("iwp", "naive"):
            h = law[head]
            lines.append(f"| {name} | {law['variance']:.4g} | {head} | {h['risk_mean']:.5f} ± "
                         f"{h['risk_sd']:.5f} | {h['risk_of_mean']:.5f} | {h['bias']:.4g} "
                         f"({h['bias'] / h['bias_se']:.1f}) | {h['bias_rel']:.0%} | "
                         f"{h['from_clean_sgd']:.4g} ({h['from_clean_sgd'] / h['bias_se']:.1f}) |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--tasks", default="income,pubcov")
    args = parser.parse_args(argv)
    for task in args.tasks.split(","):
        print(table(run_task(task, args.seeds)))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
