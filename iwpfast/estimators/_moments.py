"""``solver='moments'``: the estimators' pass through the moment learner (``iwpfast.moment_learner``).

The facade's prepared input (the ``PassPlan``: source, features, label, noise; the label mapped to
+-1 or class indices as for SGD) is read once into the debiased moments of ``MomentSearch.folds``
parts; alpha is chosen on them (or taken as given) and the model solved on every row.  The
fitted attributes are the same as an SGD fit's (``coef_`` over the released coordinates, the
pass's head configs for the model file, ``tuning_`` with one entry per candidate), plus
``solver_``.  A randomized-response release (categorical codes) is read with its spec's
inverses (``fit_rr_moments``).
"""
from __future__ import annotations

import math

import numpy as np

from ..exceptions import InvalidInputError
from ..progress import logger

SOLVERS = ("sgd", "moments")

#: the losses the moments solve exactly (the quadratic risk is their quadratic form)
MOMENT_LOSSES = {"classification": "quadratic", "regression": "squared_error"}


def check_solver(est, v: dict, *, sample_weight=None, checkpoint=None, validation=None) -> None:
    """Refuse what the moment learner does not do, each message naming the fix."""
    want = MOMENT_LOSSES[est._task]
    if v["loss"] != want:
        raise InvalidInputError(
            f"solver='moments' minimizes the {want} loss exactly (its risk is a quadratic form "
            f"in the release's debiased moments); loss={v['loss']!r} needs solver='sgd'. Pass "
            f"loss={want!r} with solver='moments' (CLI: --solver moments sets it)")
    if est.correction != "iwp":
        raise InvalidInputError("solver='moments' always debiases (correction='iwp'); naive "
                                "training is solver='sgd', correction='none'")
    if sample_weight is not None:
        raise InvalidInputError("sample_weight is not implemented for solver='moments' yet; "
                                "use solver='sgd' or drop sample_weight")
    if checkpoint is not None:
        raise InvalidInputError("solver='moments' reads the data once into O(p^2) sums and keeps "
                                "no SGD state to checkpoint: drop checkpoint=")
    if validation is not None:
        raise InvalidInputError("solver='moments' validates on folds of the same pass; drop "
                                "validation=")


def _alpha_request(v: dict):
    """A number (no search), a list (its candidates), or None (the default grid)."""
    alpha = v["alpha"]
    return None if isinstance(alpha, str) else alpha


def _label_law(est, plan, spec, variances_from_spec: bool) -> dict:
    """The label's kind and inverse for the moment layout (labels as the plan's mapper gives
    them: +-1, class indices, or regression targets)."""
    from ..moment_stats import CLASS_LABEL, SCALAR_LABEL
    ovr = getattr(est._pass, "ovr", None)
    if est._task == "classification" and ovr is not None:
        a, _, c, d = (float(w) for w in ovr.table)
        gap = 1.0 / (a - d)                 # label_noise.label_weight_table inverted
        q, r = c * gap, -d * gap
        return dict(label_kind=CLASS_LABEL, label_q=q, label_r=r,
                    targets=tuple(str(k) for k in ovr.classes))
    if est._task == "classification":
        q = plan.noise.label_keep_prob
        return dict(label_kind=SCALAR_LABEL,
                    label_scale=1.0 if q is None else 1.0 / (2.0 * float(q) - 1.0))
    return dict(label_kind=SCALAR_LABEL)


def _variances(plan) -> np.ndarray:
    """The feature noise variances the moments subtract: the release's exact laws (Gaussian as
    sampled, Laplace, 0 for public columns) when the plan reads a release, else the explicit
    ``noise_var``."""
    spec = plan.noise.release_spec()
    if spec is not None and plan.noise.origin == "release":
        by_name = dict(zip(spec.released_features, spec.feature_noise_variances(), strict=True))
        if all(f in by_name for f in plan.features):
            return np.array([by_name[f] for f in plan.features], np.float64)
    return np.asarray(plan.noise.noise_var, np.float64)


def fit_moments_plan(est, plan, mapper, v: dict) -> None:
    """Fit ``est`` by the moment learner on the prepared ``plan`` (``_fit_prepared``'s branch)."""
    import time

    from ..io.reader import ChunkReader
    from ..io.source_base import Source
    from ..io.sources import open_source
    from ..io.views import PartSource
    from ..moment_learner import MomentSearch, fit_moments
    from ..moment_stats import accumulate_folds, fold_block_rows, layout_for_columns
    started = time.perf_counter()
    source = plan.source
    if mapper is not None:
        source = PartSource(open_source(source), mapper=mapper)
    elif not isinstance(source, Source):
        source = open_source(source)
    spec = plan.noise.release_spec()
    variances = _variances(plan)
    layout = layout_for_columns(plan.features, variances, plan.label,
                                **_label_law(est, plan, spec, True),
                                notes=_notes(variances, plan))
    search = getattr(est, "moment_search", None) or MomentSearch()
    alpha = _alpha_request(v)
    folds = search.folds            # a fixed alpha too: the folds give coef_stderr_
    reader = ChunkReader(source, [plan.features], [plan.label], est.chunk_rows)
    block_rows = fold_block_rows(plan.rows, folds)
    from ..sgd.driver import stream_runner
    runner = stream_runner()
    if runner is not None:
        # a cluster (distributed.fit_files): each shard's fold moments on a worker, added here
        if getattr(est, "class_weight_", None) is not None or not hasattr(runner, "moment_parts"):
            raise InvalidInputError(
                f"solver='moments' on this cluster runner ({type(runner).__name__}) "
                + ("with class_weight " if getattr(est, "class_weight_", None) is not None
                   else "") + "is not implemented yet: fit on one machine (it reads the release "
                "once at decode speed) or use solver='sgd'")
        parts = runner.moment_parts(source, layout, folds, block_rows, est.chunk_rows)
    elif getattr(est, "class_weight_", None) is not None:
        parts = _class_weighted_parts(est, reader, layout, folds, block_rows)
    else:
        parts = accumulate_folds(reader, layout, folds, block_rows)
    rows = sum(p.rows for p in parts)
    if rows == 0:
        raise InvalidInputError("the source holds no rows: nothing to fit")
    fit = fit_moments(parts, alpha=alpha, fit_intercept=bool(est.fit_intercept), search=search)
    _set_fitted(est, plan, v, fit, rows)
    logger.info("solver='moments': %s rows, %d coordinates, %s in %.2f s", f"{rows:,}",
                len(plan.features), _said(fit), time.perf_counter() - started)


def _class_weighted_parts(est, reader, layout, folds: int, block_rows: int) -> list:
    """``class_weight`` (``est.class_weight_``, one weight per class in ``classes_`` order, set by
    the classifier's ``_prepare_class_weight``): one Gram per fold and released class, combined
    with the weights' randomized-response inverse (``moment_stats.class_weighted``)."""
    from ..moment_stats import CLASS_LABEL, accumulate_class_folds, class_weighted
    weights = np.asarray(est.class_weight_, np.float64)
    k = len(weights)
    if layout.label_kind == CLASS_LABEL:
        keep, other, targets = layout.label_q, layout.label_r, np.eye(k)
    else:
        # +-1 labels: the kernel's label_scale is 1/(2q - 1); q = (1 + 1/scale)/2
        keep = 0.5 * (1.0 + 1.0 / layout.label_scale)
        other, targets = 1.0 - keep, np.array([[-1.0, 1.0]])
    if keep == other:
        raise InvalidInputError("the label's randomized response keeps no information "
                                "(q = r): class weights cannot be debiased")
    G, rows = accumulate_class_folds(reader, layout, folds, block_rows, k)
    return class_weighted(G, rows, targets, weights, keep, other, layout)


def _notes(variances, plan) -> tuple:
    notes = ["features: diagonal minus the noise variance" if np.any(variances)
             else "features: no noise to correct"]
    if plan.noise.label_keep_prob is not None:
        notes.append("label: the randomized-response inverse")
    return tuple(notes)


def _said(fit) -> str:
    return "the constant model" if fit.alpha is None else f"alpha {fit.alpha:.4g}"


def _set_fitted(est, plan, v: dict, fit, rows: int) -> None:
    """The fitted attributes as an SGD pass leaves them (``IWPBase._start_pass`` sets the
    input side), then the solution."""
    alpha = 0.0 if fit.alpha is None else float(fit.alpha)
    fixed = dict(v, alpha=alpha, learning_rate=1.0, mu=alpha)
    plan.config = est._make_config(fixed, plan.noise, len(plan.features), rows)
    est._start_pass(plan)
    ps = est._pass
    k = fit.coef.shape[0]
    if est._task == "regression":
        est.coef_, est.intercept_ = fit.coef[0].copy(), float(fit.intercept[0])
    elif getattr(ps, "ovr", None) is not None:
        est.coef_, est.intercept_ = fit.coef.copy(), fit.intercept.copy()
        est.classes_ = np.asarray(ps.ovr.classes)
    else:
        est.coef_, est.intercept_ = fit.coef.copy(), fit.intercept.copy()
        est.classes_ = np.asarray(ps.classes if ps.classes is not None else [-1, 1])
    telemetry = {"rows_seen": int(rows), "batches": 0, "constant_model": fit.alpha is None}
    est.telemetry_ = telemetry
    if k > 1 and est._task == "classification":
        est.telemetry_per_class_ = [dict(telemetry) for _ in range(k)]
    est.n_rows_seen_ = int(rows)
    est.n_iter_ = 0
    _set_stderr(est, fit)
    est.alpha_ = math.nan if fit.alpha is None else float(fit.alpha)
    est.learning_rate_ = math.nan
    est.solver_ = "moments"
    if fit.tuning is not None:
        est.tuning_ = fit.tuning
    if fit.alpha is None:
        import warnings

        from ..exceptions import NumericalWarning
        warnings.warn(
            "solver='moments' returned the constant model (every row predicts the label's "
            f"debiased mean): {fit.tuning['rule'] if fit.tuning else ''}. The release holds too "
            "few rows for its noise to support a linear model; more rows or a larger budget "
            "would", NumericalWarning, stacklevel=4)


def fit_codes_release(est, X, **given):
    """``fit``'s first step with ``solver='moments'``: a release with randomized-response
    categorical columns (a file, or what ``privatize`` returned: read as the table its file would
    hold) is fitted here (returns ``est``); anything else is returned for the usual path."""
    from ..privacy.streams import Privatized
    from ._rr import rr_release_spec
    if isinstance(X, Privatized) and X.spec.rr_mechanisms:
        from ..io.sources import open_source
        from ..moment_stats import privatized_table
        X = open_source(privatized_table(X))
    spec = rr_release_spec(X)
    if spec is None:
        return X
    check_solver(est, est._validated(), **given)
    return fit_rr_moments(est, X, spec, est._validated())


def fit_rr_moments(est, X, spec, v: dict):
    """``solver='moments'`` on a release with randomized-response categorical columns: the
    moments read with the spec's inverses (``moment_stats.fold_moments``), the fitted attributes
    as ``estimators/_rr.py`` sets them (the feature map's one-hot coordinates)."""
    from ..moment_learner import MomentSearch, fit_moments
    from ..moment_stats import fold_moments
    from ._rr import _set_fitted as rr_set_fitted
    from ._rr import spec_label_classes
    search = getattr(est, "moment_search", None) or MomentSearch()
    alpha = _alpha_request(v)
    parts = fold_moments(X, folds=search.folds, record_batch_rows=est.chunk_rows)
    rows = sum(p.rows for p in parts)
    if rows == 0:
        raise InvalidInputError("the release holds no rows: nothing to learn")
    if parts[0].targets != (spec.label,):
        raise InvalidInputError("solver='moments' on a release with randomized-response "
                                "columns needs its binary label (k classes: not yet)")
    fit = fit_moments(parts, alpha=alpha, fit_intercept=bool(est.fit_intercept), search=search)
    from ._rr import RRLayout
    layout = RRLayout.from_spec(spec)

    class _Solved:                          # what _rr._set_fitted reads of a head
        alpha = 0.0 if fit.alpha is None else float(fit.alpha)
        step = math.nan
        variance_cap = math.inf
        block_cap = math.inf
        average_start = -1
        counters = (0,)

    rr_set_fitted(est, spec_label_classes(X), spec, layout, _Solved, fit.coef[0],
                  float(fit.intercept[0]), rows, math.inf, fit.tuning)
    est.telemetry_ = {"rows_seen": int(rows), "batches": 0, "constant_model": fit.alpha is None}
    est.alpha_ = math.nan if fit.alpha is None else float(fit.alpha)
    est.learning_rate_ = math.nan
    est.solver_ = "moments"
    _set_stderr(est, fit)
    return est


def _set_stderr(est, fit) -> None:
    """``coef_stderr_`` and ``intercept_stderr_`` in the shapes of ``coef_`` and ``intercept_``
    (the jackknife over the folds; nan where it cannot be computed)."""
    coef = np.asarray(est.coef_, np.float64)
    icpt = np.asarray(est.intercept_, np.float64)
    if fit.coef_stderr is None:
        est.coef_stderr_ = np.full(coef.shape, np.nan)
        est.intercept_stderr_ = np.full(icpt.shape, np.nan) if icpt.ndim else math.nan
        return
    est.coef_stderr_ = fit.coef_stderr.reshape(coef.shape).copy()
    est.intercept_stderr_ = (fit.intercept_stderr.reshape(icpt.shape).copy() if icpt.ndim
                             else float(fit.intercept_stderr[0]))
