"""``IWPClassifier.fit`` on a release whose categorical columns are randomized-response codes.

Such a release (``categorical_mechanism="rr"``, format version 4) is learned in memory by the
kernel ``iwpfast._kernels.categorical.rr_sgd_pass`` with the exponential loss's exact inverse
(``iwpfast.categorical_rr``): one pass over the rows in a seeded random order, as ``fit`` does on
other releases. ``alpha='auto'`` / ``learning_rate='auto'`` choose alpha x step x block cap from
``RR_ALPHAS``, ``RR_STEPS``, ``RR_BLOCK_CAPS`` on a private hold-out of ``validation_fraction`` of
the rows (the unbiased per-row loss estimate averaged, trusted only where the reliability judge of
every private risk trusts it), then the chosen head is refitted on every row. Every head runs with
the variance cap sigma^2|theta_F|^2 <= 2 on the noised float columns (as the other learners'
'auto') and each attribute's coefficients shrunk towards their mean until the log of its inverse-
variance factor (``block_log_factor``) is at most the block cap: the exponential estimate's
variance grows like exp(sigma^2|theta_F|^2) times the attributes' factors, and without both caps
SGD diverged on the benchmark tables (docs/release.md). The model's coordinates are the one-hot
coordinates of the feature map, so ``predict`` & co. read raw tables (strings) as for any
categorical release.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ..categorical_rr import RRLayout, check_rr_loss
from ..exceptions import InvalidInputError
from ..label_noise import label_tilde_from_keep

#: the 'auto' grid: ridge alpha x initial step (schedule gamma0 / (1 + alpha gamma0 t)) x the cap
#: on each attribute's log inverse-variance factor (0: the blocks stay constant, a model of the
#: float columns alone, which the hold-out risk then compares with the models that use them)
RR_ALPHAS = (1e-3, 1e-2, 1e-1)
RR_STEPS = (0.03, 0.1, 0.3)
RR_BLOCK_CAPS = (0.0, 1.0)
#: the cap on the float columns' noise energy sigma^2|theta|^2 ('auto', as the other learners')
RR_VARIANCE_CAP = 2.0


def rr_release_spec(X):
    """The ReleaseSpec of ``X`` when it is a release with randomized-response categorical columns,
    else None (arrays and other sources go the usual way)."""
    if not isinstance(X, (str, os.PathLike)):
        return None
    from ..io.sources import open_source
    try:
        meta = open_source(X).release_metadata
    except Exception:           # not readable here: the usual path names the problem
        return None
    if not meta:
        return None
    import json
    if isinstance(meta, (bytes, str)):
        meta = json.loads(meta)
    if not meta.get("categorical_rr"):
        return None
    from ..privacy import ReleaseSpec
    return ReleaseSpec.from_metadata(meta)


def _read(X, spec):
    """(X (P, n) float64 released float columns, codes (m, n) uint16, y (n,) int8) in memory."""
    from ..io.sources import open_source
    fm = spec.feature_map
    rr = spec.rr_mechanisms
    floats = [n for c in fm.inputs if c.name not in rr
              for n in fm.released_columns[slice(*fm.released_slices[c.name])]]
    coded = [c.name for c in fm.inputs if c.name in rr]
    if spec.label is None:
        raise InvalidInputError("the release has no label column: nothing to learn")
    if spec.label_encoding != "pm1":
        raise InvalidInputError("a release with randomized-response categorical columns is learned "
                                "for a binary label only (k-class labels: not supported yet)")
    parts_x, parts_c, parts_y = [], [], []
    for batch in open_source(X).batches(columns=floats + coded + [spec.label]):
        parts_x.append(np.stack([batch.column(f).to_numpy().astype(np.float64) for f in floats])
                       if floats else np.zeros((0, batch.num_rows)))
        parts_c.append(np.stack([batch.column(c).to_numpy().astype(np.uint16) for c in coded]))
        parts_y.append(batch.column(spec.label).to_numpy().astype(np.int8))
    if not parts_y:
        raise InvalidInputError("the release holds no rows: nothing to learn")
    return (np.ascontiguousarray(np.concatenate(parts_x, axis=1)),
            np.ascontiguousarray(np.concatenate(parts_c, axis=1)), np.concatenate(parts_y))


def _pass(layout, X, codes, y, order, label_weight, alpha, step, batch_size, radius,
          fit_intercept, average_start, variance_cap=math.inf, block_cap=math.inf):
    from .._kernels.categorical import rr_sgd_pass
    p = layout.n_coords
    theta, b = np.zeros(p), np.zeros(1)
    theta_avg, b_avg = np.zeros(p), np.zeros(1)
    counters = np.zeros(2, np.int64)
    rr_sgd_pass(X, codes, y, order, layout.float_index, layout.noise_var, layout.offsets,
                layout.sizes, layout.keep, layout.other, theta, b, theta_avg, b_avg, counters,
                float(label_weight), int(batch_size), float(step), float(alpha), float(alpha),
                float(radius), float(variance_cap), float(block_cap), bool(fit_intercept),
                int(average_start), True)
    if counters[1] > 0:
        return theta_avg, float(b_avg[0]), int(counters[0])
    return theta, float(b[0]), int(counters[0])


def _risk(layout, X, codes, y, label_weight, theta, b):
    """The private hold-out risk of (theta, b): a ``RiskEstimate`` judged as every private risk
    is (``iwpfast.estimates``), its noise energy the numeric part's sigma^2|theta|^2 plus the log
    of the attributes' inverse variance factor (the exponential estimate is log-normal-like in
    both), or None when theta is not finite."""
    from .._kernels.categorical import rr_loss_values
    from ..estimates import RiskAccumulator
    if not (np.all(np.isfinite(theta)) and math.isfinite(b)):
        return None
    out = np.empty(y.shape[0])
    rr_loss_values(X, codes, y, layout.float_index, layout.noise_var, layout.offsets, layout.sizes,
                   layout.keep, layout.other, theta, b, float(label_weight), out)
    acc = RiskAccumulator(1)
    acc.add(out)
    theta_f = theta[layout.float_index]
    energy = float(np.dot(layout.noise_var, theta_f * theta_f)) \
        + math.log(layout.inverse_variance_factor(theta))
    return acc.estimates("exponential", energy)[0]


def fit_rr(est, X, spec, v: dict):
    """Fit ``est`` (an IWPClassifier) on the randomized-response release ``X`` (spec ``spec``)."""
    check_rr_loss(v["loss"])
    if est.correction != "iwp":
        raise InvalidInputError(f"correction={est.correction!r}: a release with randomized-response "
                                "categorical columns is learned with correction='iwp' only")
    layout = RRLayout.from_spec(spec)
    Xf, codes, y = _read(X, spec)
    n = y.shape[0]
    label_weight = label_tilde_from_keep(spec.label_keep_prob)
    fm = spec.feature_map
    bound = fm.vector_bound(spec.bound)
    rng = np.random.default_rng(est.random_state)
    batch_size = v["batch_size"]

    def radius_for(alpha):
        return math.inf if est.radius is None and alpha <= 0 else (
            float(est.radius) if est.radius is not None else bound / alpha)

    alphas = RR_ALPHAS if not isinstance(v["alpha"], float) else (v["alpha"],)
    steps = RR_STEPS if not isinstance(v["learning_rate"], float) else (v["learning_rate"],)
    tune = len(alphas) * len(steps) > 1
    variance_cap = (RR_VARIANCE_CAP if est.variance_cap is None else float(est.variance_cap))
    # the block caps are part of 'auto' (a fixed alpha and step keep the blocks free, up to the
    # variance cap's share: the largest cap of the grid)
    block_caps = RR_BLOCK_CAPS if tune else (max(RR_BLOCK_CAPS),)
    tuning = None
    if tune:
        order = rng.permutation(n).astype(np.int64)
        cut = n - max(1, int(round(v["validation_fraction"] * n)))
        train, hold = order[:cut], np.sort(order[cut:])
        Xh, ch, yh = Xf[:, hold], codes[:, hold], y[hold]
        tuning = []
        n_updates = -(-train.shape[0] // batch_size)
        for block_cap in block_caps:
            for alpha in alphas:
                for step in steps:
                    theta, b, _ = _pass(layout, Xf, codes, y, train, label_weight, alpha, step,
                                        batch_size, radius_for(alpha), est.fit_intercept,
                                        n_updates // 2, variance_cap, block_cap)
                    estimate = _risk(layout, Xh, ch, yh, label_weight, theta, b)
                    tuning.append((alpha, step, block_cap,
                                   math.inf if estimate is None else estimate.risk,
                                   estimate is not None and estimate.reliable))
        # a heavy-tailed estimate that the judge cannot trust is no basis for a choice; with
        # none trusted, the largest alpha's best head (the least noise energy)
        trusted = [t for t in tuning if t[4] and math.isfinite(t[3])]
        if not trusted:
            trusted = [t for t in tuning if t[0] == max(alphas) and math.isfinite(t[3])]
        if not trusted:
            raise InvalidInputError("every head of the 'auto' grid diverged on this release; set "
                                    "alpha and learning_rate, or a smaller radius")
        alpha, step, block_cap = min(trusted, key=lambda t: t[3])[:3]
    else:
        alpha, step, block_cap = alphas[0], steps[0], block_caps[0]
    order = rng.permutation(n).astype(np.int64)
    n_updates = -(-n // batch_size)
    average_start = n_updates // 2 if (est.average == "auto" and tuning is not None) \
        else est._average_start(n, batch_size)
    theta, b, updates = _pass(layout, Xf, codes, y, order, label_weight, alpha, step, batch_size,
                              radius_for(alpha), est.fit_intercept, average_start, variance_cap,
                              block_cap)
    if not (np.all(np.isfinite(theta)) and math.isfinite(b)):
        from ..exceptions import DivergenceError
        raise DivergenceError(f"theta became non-finite (alpha={alpha:g}, learning_rate={step:g}); "
                              "use a larger alpha or a smaller learning_rate")
    est.coef_ = theta
    est.intercept_ = np.array([b if est.fit_intercept else 0.0])
    est.classes_ = np.asarray(spec_label_classes(X))
    est.features_ = list(fm.coordinates)
    est.n_features_in_ = len(fm.coordinates)
    est.label_ = spec.label
    est.release_spec_ = spec
    est.feature_map_ = fm
    est.feature_bound_ = float(spec.bound) if spec.bound is not None else math.inf
    est.noise_var_ = np.zeros(len(fm.coordinates))
    est.noise_var_[layout.float_index] = layout.noise_var
    est.label_keep_prob_ = spec.label_keep_prob
    est.target_noise_var_ = None
    est.truncation_ = 0
    est.alpha_ = float(alpha)
    est.learning_rate_ = float(step)
    est.radius_ = radius_for(alpha)
    est.variance_cap_ = variance_cap
    est.block_cap_ = float(block_cap)
    est.n_rows_seen_ = int(n)
    est.mode_ = "iwp"
    est.categorical_mechanism_ = "rr"
    if tuning is not None:
        est.tuning_ = {"grid": [{"alpha": a, "learning_rate": s, "block_cap": c,
                                 "private_risk": r, "reliable": ok}
                                for a, s, c, r, ok in tuning],
                       "chosen": {"alpha": float(alpha), "learning_rate": float(step),
                                  "block_cap": float(block_cap)}}
    est.telemetry_ = {"rows_seen": int(n), "batches": int(updates)}
    return est


def spec_label_classes(X) -> list:
    """The release's binary ``label_classes`` (-1/+1 stand for them), default [0, 1]."""
    import json

    from ..io.sources import open_source
    meta = open_source(X).release_metadata
    if isinstance(meta, (bytes, str)):
        meta = json.loads(meta)
    return list((meta or {}).get("label_classes") or [0, 1])
