"""The moment learner on a real table (issue 44): ``solver='moments'`` against the default.

    python bench/moments_real.py [RELEASES] [--no-default]     # default 3 releases

The shipped ACS 2024 income table: 230,000 training rows released at (4, 2)-LDP, bound 1, every
feature private (AGEP SCHL WKHP SEX), shuffled; the rest is the clean hold-out.  Per release:
``IWPClassifier(solver='moments', loss='quadratic')`` (alpha by 5-fold private validation of the
one pass, guarded; ``iwpfast.moment_learner``); the first check's 90/10 split:
``iwpfast.moments`` of the first 90% and of the last 10% (a private validation split), the
ridge solution ``solve_ridge`` on a grid of alpha (only those where the training and the whole
Gram are positive definite), alpha chosen by the debiased quadratic risk on the validation
moments; beside them the default ``IWPClassifier()`` on the release (``--no-default``:
skipped).  Printed: each release's clean hold-out accuracy, their mean, standard error and
mean - 2 SE, the majority and clean scikit-learn logistic regression on the same scaled features
(the baselines), the CPU and the load average.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import iwpfast  # noqa: E402
from iwpfast.benchmarks import cpu_model  # noqa: E402
from iwpfast.datasets import acs_path  # noqa: E402
from iwpfast.privacy import ReleaseSpec, release  # noqa: E402

FEATURES = ["AGEP", "SCHL", "WKHP", "SEX"]
RANGES = {"AGEP": (0, 99), "SCHL": (1, 24), "WKHP": (0, 99), "SEX": (1, 2)}
LABEL = "y"
ALPHAS = np.logspace(-4, 0, 13)


def scaled(table) -> np.ndarray:
    """The clean features as the release scales them (before the L2 clip)."""
    cols = []
    for f, (lo, hi) in RANGES.items():
        v = table.column(f).to_numpy().astype(float)
        cols.append(np.clip((v - (lo + hi) / 2) * 2 / (hi - lo), -1, 1))
    return np.column_stack(cols)


def rows_as_release(rel, start: int, stop: int):
    """Rows start:stop of a read release, as a release of their own (its row_count)."""
    stored = json.loads(rel.schema.metadata[b"iwpfast.release"])
    return rel.slice(start, stop - start).replace_schema_metadata(
        {**rel.schema.metadata,
         b"iwpfast.release": json.dumps(dict(stored, row_count=stop - start))})


def moment_model(rel) -> tuple[np.ndarray, float]:
    """(theta with the intercept last, alpha): the validation-chosen ridge solution of the
    first check (a 90/10 split, the alphas where both Grams are positive definite)."""
    cut = int(0.9 * rel.num_rows)
    train = iwpfast.moments(rows_as_release(rel, 0, cut))
    valid = iwpfast.moments(rows_as_release(rel, cut, rel.num_rows))
    best = None
    for alpha in ALPHAS:
        try:
            coef, intercept = iwpfast.solve_ridge(train, alpha)
            iwpfast.solve_ridge(train + valid, alpha)      # positive definite on all rows too
        except iwpfast.exceptions.InvalidInputError:
            continue
        theta = np.append(coef, intercept)
        risk = theta @ valid.G @ theta - 2 * theta @ valid.b
        if best is None or risk < best[0]:
            best = (risk, alpha, theta)
    if best is None:
        raise SystemExit("no alpha of the grid gives a positive definite Gram")
    return best[2], float(best[1])


def main() -> None:
    from sklearn.linear_model import LogisticRegression

    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    releases = int(args[0]) if args else 3
    no_default = "--no-default" in sys.argv
    table = pq.read_table(acs_path("income"))
    train, hold = table.slice(0, 230_000), table.slice(230_000)
    Xh, yh = scaled(hold), hold.column(LABEL).to_numpy().astype(int)
    majority = max(yh.mean(), 1 - yh.mean())
    clean = LogisticRegression().fit(scaled(train), train.column(LABEL).to_numpy()).score(Xh, yh)
    folder = tempfile.mkdtemp()
    got, split, default = [], [], []
    for seed in range(releases):
        out = os.path.join(folder, f"rel{seed}.parquet")
        spec = ReleaseSpec(epsilon_x=4, epsilon_y=2, delta=1e-5, bound=1, ranges=RANGES)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            release(train, out, spec, features=FEATURES, label=LABEL, shuffle=True)
            model = None if no_default else iwpfast.IWPClassifier(progress=False).fit(out)
        solver = iwpfast.IWPClassifier(solver="moments", loss="quadratic", progress=False).fit(out)
        got.append(float(solver.score(hold.select(FEATURES).to_pandas(), yh)))
        theta, alpha = moment_model(pq.read_table(out))
        split.append(float(((Xh @ theta[:-1] + theta[-1] > 0).astype(int) == yh).mean()))
        if model is not None:
            default.append(float(model.score(hold.select(FEATURES).to_pandas(), yh)))
        print(f"release {seed}: solver='moments' {got[-1]:.4f} (alpha {solver.alpha_:.2g}); "
              f"90/10 split {split[-1]:.4f} (alpha {alpha:.2g}); default IWPClassifier "
              f"{default[-1] if model is not None else float('nan'):.4f}")
    se = np.std(got, ddof=1) / np.sqrt(len(got)) if len(got) > 1 else 0.0
    print(f"solver='moments' mean {np.mean(got):.4f} (SE {se:.4f}, mean - 2 SE "
          f"{np.mean(got) - 2 * se:.4f}); 90/10 split mean {np.mean(split):.4f}; default mean "
          f"{np.mean(default) if default else float('nan'):.4f}; majority {majority:.4f}; clean "
          f"logistic regression {clean:.4f}")
    print(f"CPU: {cpu_model()}; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
