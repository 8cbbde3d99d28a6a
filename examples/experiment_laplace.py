"""Pure-epsilon releases: does IWP-SGD on discrete-Laplace features land on the clean optimum?

Synthetic data (p = 3 features uniform on [-1, 1], labels from a logistic model), released with
``mechanism="laplace"`` (L1 bound 1.5, epsilon_x = 8, randomized response epsilon_y = 2, delta = 0),
learned with the exponential loss by IWP (the exact Laplace inverse) and naively (no correction),
10 seeds of 3*10^5 rows by default.  The clean optimum is the minimizer of the same regularized
exponential risk on the clean (L1-clipped) rows of each seed (Newton, ``iwpfast.solvers``).

    python examples/experiment_laplace.py            # the issue's goal: 10 seeds, 300,000 rows
    python examples/experiment_laplace.py --quick    # 4 seeds, 60,000 rows (what the test runs)

Prints, per method, the seed mean of theta minus the clean optimum in units of its standard error
(sd over seeds / sqrt(seeds)), and whether |z| <= 3 on every coordinate.
"""
from __future__ import annotations

import math
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

THETA_TRUE = np.array([1.5, -1.0, 0.5])
FEATURES = ("x0", "x1", "x2")


def make_data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, 3))
    y = (X @ THETA_TRUE + rng.logistic(size=n) > 0).astype(np.int64)
    return X, y


def clip_l1(X, bound):
    norm = np.abs(X).sum(axis=1)
    return X * np.minimum(1.0, bound / np.maximum(norm, 1e-300))[:, None]


def run(n: int = 300_000, seeds: int = 10, epsilon_x: float = 8.0, epsilon_y: float = 2.0,
        bound: float = 1.5, alpha: float = 0.1, learning_rate: float = 0.05) -> dict:
    """Per seed: the clean optimum, IWP's and naive's theta; and the z-scores of the seed means."""
    import iwpfast
    from iwpfast.privacy import ReleaseSpec, release
    from iwpfast.solvers import solve

    spec = ReleaseSpec(mechanism="laplace", epsilon_x=epsilon_x, delta=0.0, bound=bound,
                       epsilon_y=epsilon_y, features=FEATURES,
                       ranges={f: (-1.0, 1.0) for f in FEATURES}, label="y")
    rows = {"clean": [], "iwp": [], "naive": []}
    common = dict(loss="exponential", alpha=alpha, learning_rate=learning_rate, fit_intercept=False,
                  progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(seeds):
            X, y = make_data(n, seed)
            ypm = 2.0 * y - 1.0
            rows["clean"].append(solve(clip_l1(X, bound), ypm, loss="exponential", alpha=alpha).theta)
            path = Path(tmp) / f"r{seed}.parquet"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")           # "seeded release": a simulation
                release({**{f: X[:, j] for j, f in enumerate(FEATURES)}, "y": y}, path, spec,
                        seed=1000 + seed)
                for name, correction in (("iwp", "iwp"), ("naive", "none")):
                    clf = iwpfast.IWPClassifier(correction=correction, **common).fit(path, label="y")
                    rows[name].append(clf.coef_.ravel().copy())
    out = {k: np.array(v) for k, v in rows.items()}
    clean_mean = out["clean"].mean(axis=0)
    result = {"n": n, "seeds": seeds, "clean": clean_mean}
    for name in ("iwp", "naive"):
        diff = out[name] - out["clean"]           # paired by seed: the same clean rows
        se = diff.std(axis=0, ddof=1) / math.sqrt(seeds)
        result[name] = {"mean": out[name].mean(axis=0), "se": se,
                        "z": diff.mean(axis=0) / se, "within_3se": bool(np.all(np.abs(diff.mean(axis=0))
                                                                              <= 3 * se))}
    return result


def main(argv) -> int:
    quick = "--quick" in argv
    r = run(n=60_000 if quick else 300_000, seeds=4 if quick else 10)
    print(f"{r['seeds']} seeds x {r['n']:,} rows, p = 3, L1 bound 1.5, epsilon_x = 8 (discrete "
          "Laplace, delta = 0), epsilon_y = 2, exponential loss, alpha 0.1, step 0.05")
    print(f"clean optimum (seed mean): {np.round(r['clean'], 4).tolist()}")
    for name in ("iwp", "naive"):
        m = r[name]
        print(f"{name:5s} mean {np.round(m['mean'], 4).tolist()}  SE {np.round(m['se'], 4).tolist()}  "
              f"z {np.round(m['z'], 2).tolist()}  within 3 SE: {m['within_3se']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
