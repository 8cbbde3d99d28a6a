"""Regression in dollars on the shipped ACS income table (issue 46 item 1): R^2 and RMSE in the
target's units of ``IWPRegressor()`` and ``IWPRegressor(solver='moments')``.

    python bench/regression_units.py [RELEASES]        # default 3 releases per setting

The shipped ACS 2024 income table (iwpfast/data/acs2024_income_FL_NY_PA.parquet): the first
230,000 rows are released, the rest (51,136 rows) is the clean hold-out.  Target PINCP clipped to
0:200,000 dollars (declared ``target_range=(0, 200000)``), features AGEP SCHL WKHP SEX with the
declared ranges AGEP=0:99 SCHL=1:24 WKHP=0:99 SEX=1:2, bound 1, shuffled.  Two releases:
- all private at (epsilon_x, epsilon_y) = (4, 2) (delta 1e-5);
- target only (every feature public, ``public_features``; epsilon_y = 2): the features are scaled
  and clipped to their ranges but not noised (nor L2-clipped).
Each model predicts the raw hold-out (``predict``: dollars, the release's target map inverted);
R^2 and RMSE are against the hold-out's PINCP clipped to 0:200,000 (``score`` gives the same R^2,
checked).  Beside them: clean ordinary least squares (numpy lstsq with an intercept on the
training rows' features scaled as each release scales them, the clipped target in dollars) and
the constant model (the training rows' mean).  Per release and model: one line; then the mean
over the releases and its standard error.  Prints the CPU model and the load average.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
import warnings

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import iwpfast  # noqa: E402
from iwpfast.benchmarks import cpu_model  # noqa: E402
from iwpfast.datasets import acs_path  # noqa: E402
from iwpfast.estimators._units import scale_and_clip  # noqa: E402
from iwpfast.privacy import ReleaseSpec, release  # noqa: E402

FEATURES = ["AGEP", "SCHL", "WKHP", "SEX"]
RANGES = {"AGEP": (0.0, 99.0), "SCHL": (1.0, 24.0), "WKHP": (0.0, 99.0), "SEX": (1.0, 2.0)}
TARGET, TARGET_RANGE = "PINCP", (0.0, 200_000.0)
N_TRAIN, BOUND = 230_000, 1.0
SETTINGS = {
    "all private (4, 2)": dict(epsilon_x=4.0, epsilon_y=2.0),
    "target only (public features, eps_y 2)": dict(epsilon_y=2.0, public_features=tuple(FEATURES)),
}
MODELS = {"IWPRegressor()": {}, "IWPRegressor(solver='moments')": {"solver": "moments"}}


def columns(table) -> tuple[np.ndarray, np.ndarray]:
    """(raw features (n, p), PINCP clipped to the declared range)."""
    X = np.column_stack([table.column(f).to_numpy().astype(np.float64) for f in FEATURES])
    y = np.clip(table.column(TARGET).to_numpy().astype(np.float64), *TARGET_RANGE)
    return X, y


def metrics(y: np.ndarray, pred: np.ndarray) -> tuple[float, float]:
    """(R^2, RMSE) of predictions against y, in y's units."""
    res = float(np.sum((y - pred) ** 2))
    return 1.0 - res / float(np.sum((y - y.mean()) ** 2)), float(np.sqrt(res / y.size))


def ols(X_train, y_train, X_test, private: bool) -> np.ndarray:
    """Clean least squares on the features scaled as the release scales them."""
    lo = np.array([RANGES[f][0] for f in FEATURES])
    hi = np.array([RANGES[f][1] for f in FEATURES])
    which = [private] * len(FEATURES)

    def design(X):
        cols = scale_and_clip(list(X.T), lo, hi, BOUND, private=which)
        return np.column_stack(cols + [np.ones(X.shape[0])])

    coef = np.linalg.lstsq(design(X_train), y_train, rcond=None)[0]
    return design(X_test) @ coef


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    table = pq.read_table(str(acs_path("income")))
    train, hold = table.slice(0, N_TRAIN), table.slice(N_TRAIN)
    X_train, y_train = columns(train)
    X_hold, y_hold = columns(hold)
    print(f"ACS income: {train.num_rows:,} training rows released, {hold.num_rows:,} clean hold-out "
          f"rows; target {TARGET} clipped to {TARGET_RANGE[0]:g}:{TARGET_RANGE[1]:g} (hold-out mean "
          f"{y_hold.mean():,.0f}, sd {y_hold.std():,.0f}); features {' '.join(FEATURES)}, bound {BOUND:g}")
    r2c, rmsec = metrics(y_hold, np.full(y_hold.size, y_train.mean()))
    print(f"  constant model (training mean): R^2 {r2c:.4f}, RMSE {rmsec:,.0f}")
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "train.parquet")
        pq.write_table(train, raw)
        for setting, privacy in SETTINGS.items():
            private = "public_features" not in privacy
            r2o, rmseo = metrics(y_hold, ols(X_train, y_train, X_hold, private))
            print(f"\n{setting}:\n  clean OLS on the scaled features: R^2 {r2o:.4f}, RMSE {rmseo:,.0f}")
            spec = ReleaseSpec(delta=1e-5, bound=BOUND, features=tuple(FEATURES), ranges=RANGES,
                               label=TARGET, task="regression", target_range=TARGET_RANGE,
                               **privacy)
            found: dict[str, list] = {name: [] for name in MODELS}
            for r in range(repeats):
                path = os.path.join(tmp, f"rel{r}.parquet")
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")      # the clipped targets' warning
                    release(raw, path, spec, shuffle=True, overwrite=True)
                for name, kw in MODELS.items():
                    start = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model = iwpfast.IWPRegressor(progress=False, **kw).fit(path)
                        pred = model.predict(X_hold)
                        score = model.score(X_hold, y_hold)
                    seconds = time.perf_counter() - start
                    r2, rmse = metrics(y_hold, pred)
                    assert abs(score - r2) < 1e-9, (score, r2)    # score is predict's R^2
                    found[name].append((r2, rmse))
                    print(f"  release {r + 1}: {name:32s} R^2 {r2:.4f}, RMSE {rmse:,.0f} "
                          f"(alpha {float(np.ravel(model.alpha_)[0]):.3g}, {seconds:.1f} s)")
            for name, values in found.items():
                a = np.array(values)
                se = a.std(axis=0, ddof=1) / np.sqrt(len(a)) if len(a) > 1 else np.full(2, np.nan)
                print(f"  mean of {len(a)}: {name:32s} R^2 {a[:, 0].mean():.4f} (SE {se[0]:.4f}), "
                      f"RMSE {a[:, 1].mean():,.0f} (SE {se[1]:,.0f})")
    print(f"\nCPU: {cpu_model()}; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
