"""Regression quality in the target's raw units on four tables: R^2 and RMSE of ``IWPRegressor()``
(the default, ``solver='auto'``: the moment learner) and ``IWPRegressor(solver='sgd')`` (the SGD
search) against clean least squares and the constant model.

    python bench/regression_tables.py [RELEASES] [--quick]

RELEASES (default 3; 2 with --quick): releases per setting of tables 1, 2 and 4.  Table 3 takes 5
splits x 4 releases (5 x 2 with --quick); table 4 takes 1,000,000 training rows (200,000 with
--quick).  The default run takes about 35 s on a 2-core AMD EPYC machine (--quick: about 18 s).

Every release: delta 1e-5, bound 1 (table 4: sqrt(5) + 1e-9), shuffled, OS randomness (no seed).
Settings of tables 1-3: "target only" (every feature public, ``public_features``: scaled and
clipped to its range, not noised nor L2-clipped; epsilon_y 2), "mixed" (half the features public,
named in the heading; the private half at epsilon_x 4; epsilon_y 2), "all private" (epsilon_x 4,
epsilon_y 2).  Table 4: all private only.

1. ACS income (the shipped acs2024_income table): target PINCP clipped to 0:200,000 dollars
   (``target_range=(0, 200000)``), features AGEP SCHL WKHP SEX, ranges AGEP=0:99 SCHL=1:24
   WKHP=0:99 SEX=1:2; the first 230,000 rows released, the other 51,136 the clean hold-out.
2. ACS public coverage (the shipped acs2024_pubcov table, 156,934 rows): target PINCP with the
   declared range -20,000:30,000 dollars (the upper end is the task's filter PINCP <= 30000; the
   lower end the PUMS bottom code of PINCP, a loss of $19,998 or more: no row is clipped),
   features AGEP SCHL SEX y (y: public health coverage, 0/1), ranges AGEP=0:64 (the filter
   AGEP < 65) SCHL=1:24 SEX=1:2 y=0:1; the first 125,000 rows released, the rest the hold-out.
3. scikit-learn's diabetes table (442 rows, 10 features; skipped if scikit-learn is missing):
   every feature declared in [-0.25, 0.25] (the columns are mean-centred and scaled to unit L2
   norm over the 442 rows; every value of the shipped table lies inside, max |x| 0.199, so
   nothing is clipped to the ranges), target 25:346 (the documented range of the disease
   progression score).  5 disjoint hold-outs of 90 rows (a fixed permutation, seed 0), each with
   the other 352 rows released.  The question: is the default ever below the constant model by
   more than 1 SE?  Printed: the mean R^2 of each model, the constant's, and the difference
   default - constant with its SE (over the split x release fits, and over the 5 split means);
   likewise for the release's own constant (the mean of the noised target: the clean training
   mean is out of a private model's reach, and at epsilon_y 2 the target's noise is several
   times the target's spread, so that mean is itself off by a good share of an sd).
4. Synthetic with known coefficients: p = 5 features uniform on [-1, 1], y = X theta + 0.1 +
   N(0, 0.3^2), theta = (0.8, -0.5, 0.3, 0, -0.2); declared ranges -1:1 (the release's map onto
   [-1, 1] is the identity), bound sqrt(5) + 1e-9 (the L2 clip never bites), target range -4:4
   (mapped onto [-1, 1]: u = y / 4; a clip would need |noise| > 10 sd).  So the model's space
   holds theta / 4 and intercept 0.1 / 4 (converted generally: theta_j half_j / half_t, see
   ``model_space_truth``).  ``IWPRegressor(alpha=0.0)`` (the moment learner, no ridge) is fitted
   besides the two models; its ``coef_``, ``coef_stderr_`` (the delete-one-group jackknife over the
   pass's 20 groups: 19 degrees of freedom) and z = (coef - truth) / stderr are printed, with z against the
   pooled stderr (the root mean square over the 5 coefficients: the design is symmetric, so they
   share one true stderr up to theta's small effect).  200,000 fresh rows are the hold-out; the
   gap of the default's mean R^2 to clean OLS's is printed (goal: within 0.01).

Each model predicts the raw hold-out (``predict``: the release's target map inverted); R^2 and
RMSE are against the hold-out target clipped to the declared range; ``score`` is checked to give
predict's R^2 (1e-9).  Clean OLS: numpy lstsq with an intercept on the training rows' features
scaled as that release scales them (``scale_and_clip``: public columns range-clipped only, the
private ones also L2-clipped to the bound), the clipped target in raw units.  The constant model:
the training rows' mean; the release's target mean (the noised target's mean mapped back: the
private constant model) is summarized beside the models.  Per release and model one line
(solver_, alpha_ (nan: the constant model), seconds per fit, the classes of any warnings silenced
during the fit); then the mean over the releases with its standard error std(ddof=1) / sqrt(R).
Prints the CPU model and the load average at the end.
"""
from __future__ import annotations

import math
import os
import sys
import tempfile
import time
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import iwpfast  # noqa: E402
from iwpfast.benchmarks import cpu_model  # noqa: E402
from iwpfast.datasets import acs_path  # noqa: E402
from iwpfast.estimators._units import scale_and_clip, to_target_units  # noqa: E402
from iwpfast.exceptions import InvalidInputError  # noqa: E402
from iwpfast.privacy import ReleaseSpec, release  # noqa: E402

DELTA, EPS_X, EPS_Y = 1e-5, 4.0, 2.0
MODELS = {"IWPRegressor()": {}, "IWPRegressor(solver='sgd')": {"solver": "sgd"}}
DEFAULT = "IWPRegressor()"
#: the release's own constant model (the mean of the noised target): what a private model knows
#: without features; the clean constant model (the training mean) is beyond its reach
RELEASE_MEAN = "release's target mean"


class Table:
    """One table: training rows (raw, target clipped), a clean hold-out, the declared ranges."""

    def __init__(self, name, features, ranges, target, target_range, X_train, y_train, X_hold,
                 y_hold, public_half, bound=1.0, units="{:,.0f}"):
        self.name, self.features, self.ranges = name, list(features), dict(ranges)
        self.target, self.target_range, self.bound = target, tuple(target_range), float(bound)
        self.X_train, self.X_hold = X_train, X_hold
        self.y_train = np.clip(y_train, *self.target_range)
        self.y_hold = np.clip(y_hold, *self.target_range)
        self.public_half = tuple(public_half)
        self.units = units

    def settings(self, only_private=False):
        """[(heading, privacy keywords of ReleaseSpec)]."""
        private = [f for f in self.features if f not in self.public_half]
        found = [
            ("target only (every feature public; epsilon_y 2)",
             dict(epsilon_y=EPS_Y, public_features=tuple(self.features))),
            (f"mixed (public {' '.join(self.public_half)}; private {' '.join(private)} at "
             f"epsilon_x 4; epsilon_y 2)",
             dict(epsilon_x=EPS_X, epsilon_y=EPS_Y, public_features=self.public_half)),
            ("all private (epsilon_x 4, epsilon_y 2)", dict(epsilon_x=EPS_X, epsilon_y=EPS_Y)),
        ]
        return found[2:] if only_private else found

    def arrow(self) -> pa.Table:
        cols = {f: self.X_train[:, j] for j, f in enumerate(self.features)}
        return pa.table({**cols, self.target: self.y_train})

    def fmt(self, v: float) -> str:
        return self.units.format(v)


def metrics(y: np.ndarray, pred: np.ndarray) -> tuple[float, float]:
    """(R^2, RMSE) of predictions against y, in y's units."""
    res = float(np.sum((y - pred) ** 2))
    return 1.0 - res / float(np.sum((y - y.mean()) ** 2)), float(np.sqrt(res / y.size))


def design(t: Table, X: np.ndarray, private) -> np.ndarray:
    """Raw features -> the release's clean coordinates (public columns range-clipped only), plus a
    column of ones."""
    lo = np.array([t.ranges[f][0] for f in t.features])
    hi = np.array([t.ranges[f][1] for f in t.features])
    cols = scale_and_clip(list(X.T), lo, hi, t.bound, private=private)
    return np.column_stack(cols + [np.ones(X.shape[0])])


def ols(t: Table, private) -> tuple[np.ndarray, np.ndarray]:
    """(coefficients with the intercept last, predictions on the hold-out): clean least squares on
    the features scaled as the release scales them, the clipped target in raw units."""
    coef = np.linalg.lstsq(design(t, t.X_train, private), t.y_train, rcond=None)[0]
    return coef, design(t, t.X_hold, private) @ coef


def spec_for(t: Table, privacy: dict) -> ReleaseSpec:
    return ReleaseSpec(delta=DELTA, bound=t.bound, features=tuple(t.features), ranges=t.ranges,
                       label=t.target, task="regression", target_range=t.target_range, **privacy)


def do_release(source, path: str, spec: ReleaseSpec):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # the clipped targets' / values' warnings
        return release(source, path, spec, shuffle=True, overwrite=True)


def fit(t: Table, kw: dict, path: str):
    """(model, seconds, R^2, RMSE, warning classes) or (None, seconds, error text)."""
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = iwpfast.IWPRegressor(progress=False, **kw).fit(path)
            pred = model.predict(t.X_hold)
            score = model.score(t.X_hold, t.y_hold)
        except Exception as exc:   # reported, the run goes on
            return None, time.perf_counter() - start, f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - start
    r2, rmse = metrics(t.y_hold, pred)
    assert abs(score - r2) < 1e-9, (score, r2)    # score is predict's R^2
    kinds = sorted({w.category.__name__ for w in caught})
    return model, seconds, r2, rmse, kinds


def line(t: Table, label: str, name: str, res) -> str:
    if res[0] is None:
        return f"  {label}: {name:27s} FAILED after {res[1]:.1f} s: {res[2]}"
    model, seconds, r2, rmse, kinds = res
    alpha = float(np.ravel(model.alpha_)[0])
    note = f"; warned {', '.join(kinds)}" if kinds else ""
    return (f"  {label}: {name:27s} R^2 {r2:7.4f}, RMSE {t.fmt(rmse):>8s} (solver_ "
            f"{getattr(model, 'solver_', '?')}, alpha_ {alpha:.3g}, {seconds:.1f} s{note})")


def mean_se(values) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(values, dtype=np.float64)
    se = a.std(axis=0, ddof=1) / math.sqrt(len(a)) if len(a) > 1 else np.full(a.shape[1:], np.nan)
    return a.mean(axis=0), se


def noise_text(spec: ReleaseSpec, t: Table) -> str:
    scale = (t.target_range[1] - t.target_range[0]) / 2
    return (f"noise sd per private feature coordinate {spec.sigma:.3g}; target {spec.target_noise_scale:.3g} "
            f"in the model's [-1, 1] space = {t.fmt(spec.target_noise_scale * scale)} in the target's units")


def release_mean(t: Table, path: str) -> float:
    """The release's own constant model: the mean of the released (noised) target, in raw units."""
    u = pq.read_table(path, columns=[t.target]).column(t.target).to_numpy().astype(np.float64)
    return float(to_target_units(u.mean(), t.target_range))


def run_setting(t: Table, tmp: str, heading: str, privacy: dict, releases: int, models=MODELS,
                label_prefix: str = "release", quiet_reference: bool = False):
    """Release the training rows ``releases`` times under ``privacy`` and fit every model on each.
    Returns ({model: [(r2, rmse, release index)]}, {model: [fitted model]}, (ols r2, rmse),
    (constant r2, rmse), [release result]); found[RELEASE_MEAN] holds the release mean's."""
    spec = spec_for(t, privacy)
    private = [f not in spec.public_features for f in t.features]
    _, pred_ols = ols(t, private)
    ref_ols = metrics(t.y_hold, pred_ols)
    ref_const = metrics(t.y_hold, np.full(t.y_hold.size, t.y_train.mean()))
    if not quiet_reference:
        print(f"\n{heading}:\n  clean OLS on the scaled features: R^2 {ref_ols[0]:.4f}, RMSE "
              f"{t.fmt(ref_ols[1])}; constant model: R^2 {ref_const[0]:.4f}, RMSE {t.fmt(ref_const[1])}")
        print(f"  {noise_text(spec, t)}")
    found: dict[str, list] = {name: [] for name in models}
    found[RELEASE_MEAN] = []
    fitted: dict[str, list] = {name: [] for name in models}
    results = []
    source = t.arrow()
    for r in range(releases):
        path = os.path.join(tmp, f"rel{r}.parquet")
        results.append(do_release(source, path, spec))
        found[RELEASE_MEAN].append((*metrics(t.y_hold, np.full(t.y_hold.size, release_mean(t, path))), r))
        for name, kw in models.items():
            res = fit(t, kw, path)
            print(line(t, f"{label_prefix} {r + 1}", name, res))
            if res[0] is not None:
                found[name].append((*res[2:4], r))       # (r2, rmse, release index)
                fitted[name].append(res[0])
    return found, fitted, ref_ols, ref_const, results


def summarize(t: Table, found: dict, ref_ols) -> None:
    for name, values in found.items():
        if not values:
            print(f"  mean: {name:27s} no successful fit")
            continue
        m, se = mean_se([v[:2] for v in values])
        print(f"  mean of {len(values)}: {name:27s} R^2 {m[0]:7.4f} (SE {se[0]:.4f}), RMSE "
              f"{t.fmt(m[1])} (SE {t.fmt(se[1])}); R^2 - clean OLS {m[0] - ref_ols[0]:+.4f}")


# ---- the tables ------------------------------------------------------------------------------
def acs_table(kind: str, n_train: int, features, ranges, target_range, public_half, name) -> Table:
    table = pq.read_table(str(acs_path(kind)))
    X = np.column_stack([table.column(f).to_numpy().astype(np.float64) for f in features])
    y = table.column("PINCP").to_numpy().astype(np.float64)
    return Table(name, features, ranges, "PINCP", target_range, X[:n_train], y[:n_train],
                 X[n_train:], y[n_train:], public_half)


def header(t: Table) -> None:
    ranges = " ".join(f"{f}={t.ranges[f][0]:g}:{t.ranges[f][1]:g}" for f in t.features)
    lo, hi = t.target_range
    print(f"\n===== {t.name}: {len(t.y_train):,} training rows released, {len(t.y_hold):,} clean "
          f"hold-out rows; target {t.target} clipped to {lo:g}:{hi:g} (hold-out mean "
          f"{t.fmt(t.y_hold.mean())}, sd {t.fmt(t.y_hold.std())}); features {ranges}; bound {t.bound:g}")


def plain_table(t: Table, tmp: str, releases: int) -> None:
    header(t)
    for heading, privacy in t.settings():
        found, _, ref_ols, _, _ = run_setting(t, tmp, heading, privacy, releases)
        summarize(t, found, ref_ols)


def diabetes(tmp: str, per_split: int, splits: int = 5) -> None:
    try:
        from sklearn.datasets import load_diabetes
    except ImportError:
        print("\n===== diabetes: skipped (scikit-learn is not importable)")
        return
    data = load_diabetes()
    X, y = data.data.astype(np.float64), data.target.astype(np.float64)
    features = list(data.feature_names)
    ranges = {f: (-0.25, 0.25) for f in features}
    order = np.random.default_rng(0).permutation(len(y))
    holds = np.array_split(order, splits)             # 5 disjoint hold-outs of 88 or 89 rows
    print(f"\n===== diabetes (scikit-learn, {len(y)} rows, {len(features)} features; max |x| "
          f"{np.abs(X).max():.3f}, inside the declared [-0.25, 0.25]): {splits} disjoint hold-outs "
          f"of {min(map(len, holds))}-{max(map(len, holds))} rows, the rest released, {per_split} "
          f"releases per split; target 25:346 (observed {y.min():g}:{y.max():g}), bound 1")
    first = Table("diabetes", features, ranges, "progression", (25.0, 346.0), X, y, X, y,
                  features[:5], units="{:.1f}")
    for heading, privacy in first.settings():
        print(f"\n{heading}:\n  {noise_text(spec_for(first, privacy), first)}")
        per_fit = {name: [] for name in [*MODELS, RELEASE_MEAN]}     # (split, r2, r2 - constant)
        consts, olss = [], []
        for s, hold in enumerate(holds):
            train = np.setdiff1d(order, hold)
            t = Table("diabetes", features, ranges, "progression", (25.0, 346.0), X[train],
                      y[train], X[hold], y[hold], features[:5], units="{:.1f}")
            found, _, ref_ols, ref_const, _ = run_setting(
                t, tmp, heading, privacy, per_split, label_prefix=f"split {s + 1} release",
                quiet_reference=True)
            print(f"  split {s + 1}: clean OLS R^2 {ref_ols[0]:.4f}, RMSE {ref_ols[1]:.1f}; constant "
                  f"R^2 {ref_const[0]:.4f}, RMSE {ref_const[1]:.1f}")
            consts.append(ref_const[0])
            olss.append(ref_ols[0])
            own = {v[2]: v[0] for v in found[RELEASE_MEAN]}
            for name, values in found.items():
                per_fit[name] += [(s, v[0], v[0] - ref_const[0], v[0] - own[v[2]]) for v in values]
        print(f"  mean over the {splits} splits: clean OLS R^2 {np.mean(olss):.4f}, constant "
              f"R^2 {np.mean(consts):.4f}")
        for name, rows in per_fit.items():
            if not rows:
                print(f"  {name:27s} no successful fit")
                continue
            a = np.array(rows)
            m, se = mean_se(a[:, 1:])
            split_means = [a[a[:, 0] == s, 2].mean() for s in range(splits) if np.any(a[:, 0] == s)]
            _, se_split = mean_se(np.array(split_means)[:, None])
            below = m[1] < -se[1]
            print(f"  {name:27s} mean R^2 {m[0]:7.4f} (SE {se[0]:.4f}, {len(a)} fits); "
                  f"minus constant {m[1]:+.4f} (SE {se[1]:.4f} over the fits, {se_split[0]:.4f} over "
                  f"the split means): {'BELOW' if below else 'not below'} the constant by more than 1 SE")
            if name != RELEASE_MEAN:
                print(f"  {'':27s} minus the release's target mean {m[2]:+.4f} (SE {se[2]:.4f}): "
                      f"{'BELOW' if m[2] < -se[2] else 'not below'} it by more than 1 SE")


def model_space_truth(theta, intercept, ranges, target_range):
    """The model's space: x_j = mid_j + half_j x'_j (the feature's range onto [-1, 1]), and
    u = (y - mid_t) / half_t (the target's range onto [-1, 1]); y = theta.x + b gives
    u = sum_j theta_j half_j / half_t x'_j + (b + theta.mid - mid_t) / half_t."""
    mid = np.array([(a + b) / 2 for a, b in ranges])
    half = np.array([(b - a) / 2 for a, b in ranges])
    mid_t, half_t = sum(target_range) / 2, (target_range[1] - target_range[0]) / 2
    return theta * half / half_t, (intercept + theta @ mid - mid_t) / half_t


def synthetic(tmp: str, n: int, releases: int) -> None:
    theta, b, noise_sd, p = np.array([0.8, -0.5, 0.3, 0.0, -0.2]), 0.1, 0.3, 5
    rng = np.random.default_rng(20240611)

    def rows(m):
        X = rng.uniform(-1.0, 1.0, (m, p))
        return X, X @ theta + b + rng.normal(0.0, noise_sd, m)

    X, y = rows(n)
    Xh, yh = rows(200_000)
    features = [f"x{j + 1}" for j in range(p)]
    ranges = {f: (-1.0, 1.0) for f in features}
    bound = math.sqrt(p) + 1e-9
    t = Table("synthetic", features, ranges, "y", (-4.0, 4.0), X, y, Xh, yh, (), bound=bound,
              units="{:.4f}")
    header(t)
    truth, truth_b = model_space_truth(theta, b, [ranges[f] for f in features], t.target_range)
    print(f"  theta {theta.tolist()}, intercept {b:g}, noise sd {noise_sd:g}; in the model's space "
          f"(features: range -1:1 onto [-1, 1], identity; target: -4:4 onto [-1, 1], u = y / 4): "
          f"theta' {np.round(truth, 6).tolist()}, intercept' {truth_b:g}; targets outside -4:4: "
          f"{int(np.sum(np.abs(y) > 4))} training, {int(np.sum(np.abs(yh) > 4))} hold-out")
    coef_ols, _ = ols(t, [True] * p)
    half_t = (t.target_range[1] - t.target_range[0]) / 2
    print(f"  clean OLS coefficients in the model's space: {np.round(coef_ols[:-1] / half_t, 4).tolist()}, "
          f"intercept {coef_ols[-1] / half_t:.4f}")
    ridge_free = _alpha_zero(t, tmp)
    models = dict(MODELS, **{f"IWPRegressor(alpha={ridge_free:g})": {"alpha": ridge_free}})
    (heading, privacy), = t.settings(only_private=True)
    found, fitted, ref_ols, _, results = run_setting(t, tmp, heading, privacy, releases, models)
    print("  release rows L2-clipped / targets clipped: "
          + ", ".join(f"{r.rows_clipped}/{r.targets_clipped}" for r in results))
    summarize(t, found, ref_ols)
    if found[DEFAULT]:
        gap = mean_se([v[:2] for v in found[DEFAULT]])[0][0] - ref_ols[0]
        verdict = "within" if abs(gap) <= 0.01 else "NOT within"
        print(f"  default's mean R^2 - clean OLS R^2: {gap:+.4f} ({verdict} 0.01 at {n:,} all-private rows)")
    name = f"IWPRegressor(alpha={ridge_free:g})"
    print(f"\n  {name}: coefficients in the model's space (z = (coef - truth) / coef_stderr_; "
          "z_pooled against the RMS stderr of the 5 coefficients of that release)")
    zs, zps, coefs = [], [], []
    for r, model in enumerate(fitted[name]):
        coef, se = np.ravel(model.coef_), np.ravel(model.coef_stderr_)
        z = (coef - truth) / se
        pooled = math.sqrt(float(np.mean(se ** 2)))
        zp = (coef - truth) / pooled
        zi = (float(model.intercept_) - truth_b) / float(model.intercept_stderr_)
        zs.append(z)
        zps.append(zp)
        coefs.append(coef)
        print(f"  release {r + 1}:")
        for j, f in enumerate(features):
            print(f"    {f}: coef {coef[j]:+.4f}  stderr {se[j]:.4f}  truth {truth[j]:+.4f}  "
                  f"z {z[j]:+.2f}  z_pooled {zp[j]:+.2f}")
        print(f"    intercept: {float(model.intercept_):+.4f}  stderr {float(model.intercept_stderr_):.4f}"
              f"  truth {truth_b:+.4f}  z {zi:+.2f}")
        if not np.all(np.isfinite(se)):
            print("    coef_stderr_ is nan: the jackknife found a leave-one-fold-out Gram that is not "
                  "positive definite at this alpha (moment_learner.jackknife); no z for this release")
    z, zp = np.abs(np.array(zs)), np.abs(np.array(zps))
    if z.size and np.isfinite(z).any():
        top = float(np.nanmax(z))
        print(f"  max |z| {top:.2f} over {int(np.isfinite(z).sum())} coefficients with a stderr: "
              f"{'all |z| < 3' if top < 3 else f'{int(np.sum(z >= 3))} with |z| >= 3'} "
              f"(the jackknife stderr has 19 degrees of freedom: P(|t_19| > 3) = 0.007 per "
              f"coefficient); max |z_pooled| {float(np.nanmax(zp)):.2f}")
    else:
        print("  no z: no release gave a finite coef_stderr_")
    if len(coefs) > 1:
        spread = np.std(np.array(coefs), axis=0, ddof=1)
        rms = math.sqrt(float(np.nanmean([np.ravel(m.coef_stderr_) ** 2 for m in fitted[name]])))
        print(f"  spread of each coefficient over the {len(coefs)} releases (sd): "
              f"{np.round(spread, 4).tolist()}; RMS coef_stderr_ (finite ones) {rms:.4f}")


def _alpha_zero(t: Table, tmp: str) -> float:
    """0.0 if the moment learner takes alpha=0.0 on a release of this table, else the smallest
    alpha of a short ladder it takes (printed)."""
    path = os.path.join(tmp, "probe.parquet")
    (_, privacy), = t.settings(only_private=True)
    do_release(t.arrow(), path, spec_for(t, privacy))
    for alpha in (0.0, 1e-4, 1e-3, 1e-2, 1e-1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                iwpfast.IWPRegressor(progress=False, alpha=alpha).fit(path)
        except InvalidInputError as exc:
            print(f"  alpha={alpha:g} refused: {exc}")
            continue
        print(f"  the moment learner takes alpha={alpha:g} (probe release)")
        return alpha
    raise SystemExit("no alpha of the ladder is accepted")


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--quick"]
    quick = "--quick" in sys.argv[1:]
    releases = int(args[0]) if args else (2 if quick else 3)
    n_synth = 200_000 if quick else 1_000_000
    per_split = 2 if quick else 4
    t0 = time.perf_counter()
    print(f"iwpfast {iwpfast.__version__}; {releases} releases per setting{' (--quick)' if quick else ''}; "
          f"models: {', '.join(MODELS)} (progress=False)")
    with tempfile.TemporaryDirectory() as tmp:
        plain_table(acs_table("income", 230_000, ["AGEP", "SCHL", "WKHP", "SEX"],
                              {"AGEP": (0.0, 99.0), "SCHL": (1.0, 24.0), "WKHP": (0.0, 99.0),
                               "SEX": (1.0, 2.0)}, (0.0, 200_000.0), ("AGEP", "SEX"),
                              "ACS income (PINCP, dollars)"), tmp, releases)
        plain_table(acs_table("pubcov", 125_000, ["AGEP", "SCHL", "SEX", "y"],
                              {"AGEP": (0.0, 64.0), "SCHL": (1.0, 24.0), "SEX": (1.0, 2.0),
                               "y": (0.0, 1.0)}, (-20_000.0, 30_000.0), ("AGEP", "SEX"),
                              "ACS public coverage (PINCP, dollars)"), tmp, releases)
        diabetes(tmp, per_split)
        synthetic(tmp, n_synth, releases)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s; CPU: {cpu_model()}; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
