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
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..exceptions import InvalidInputError
from ..progress import logger

SOLVERS = ("auto", "sgd", "moments")

#: the settings that only mean something to SGD: one set away from its default makes 'auto' SGD
_SGD_ONLY = dict(learning_rate="auto", schedule="constant", mu=None, radius=None,
                 variance_cap=None, average="auto")

#: the attribute of the ``PassState`` that holds a moment pass's sums (``MomentPass``)
PASS_ATTR = "moments"


@dataclass
class MomentPass:
    """What a ``solver='moments'`` pass carries from one call to the next: the layout its rows
    are read with (columns, noise laws, label law: a later call must read the same), the debiased
    sums of each fold (O(folds p^2) floats), and the rows per fold block (fixed for the pass: a
    later call's rows continue the pass's row counter, so any split of the rows deals them to
    the same folds as one read)."""

    layout: Any
    folds: list
    block_rows: int

    @property
    def rows(self) -> int:
        return int(sum(f.rows for f in self.folds))

    def add(self, parts: list) -> None:
        self.folds = [a + b for a, b in zip(self.folds, parts, strict=True)]


def moment_pass(est) -> MomentPass | None:
    """The estimator's moment pass (None: none running)."""
    return getattr(est._pass, PASS_ATTR, None)

#: the losses the moments solve exactly (the quadratic risk is their quadratic form)
MOMENT_LOSSES = {"classification": "quadratic", "regression": "squared_error"}


def resolve_solver(est, v: dict, *, sample_weight=None, checkpoint=None, validation=None,
                   partial: bool = False) -> str:
    """The solver a fit runs: ``solver`` as given, or for ``'auto'`` the moment learner where it
    is the better learner and applies, else SGD.

    'auto' is the moment learner for a regressor with the squared error (its exact minimizer:
    bench/regression_tables.py) and debiasing on, when no SGD-only setting
    (``sgd_settings_given``), no ``sample_weight`` and no checkpoint is given, and any
    validation is a release.  A classifier's 'auto' resolves to SGD here; its fit then weighs
    the moment model in (``estimators/_across.py``; docs/tuning.md "The default across
    learners").  ``partial_fit`` continues the solver of the pass it extends and starts SGD
    passes (usable after the first minibatch, as before)."""
    solver = v["solver"]
    if solver != "auto":
        return solver
    if partial:
        fitted = moment_pass(est) is not None or getattr(est, "solver_", None) == "moments"
        return "moments" if fitted else "sgd"
    if est._task != "regression" or v["loss"] != MOMENT_LOSSES["regression"]:
        return "sgd"
    if est.correction != "iwp" or sample_weight is not None or checkpoint is not None:
        return "sgd"
    if sgd_settings_given(est):
        return "sgd"
    if validation is not None and not _is_release_like(validation):
        return "sgd"
    return "moments"


def sgd_settings_given(est) -> bool:
    """Whether an SGD-only setting is set away from its default (a step, a schedule, mu, a
    radius, a variance cap, averaging): a user who sets one asks for SGD under 'auto'."""
    return any(getattr(est, name, default) != default for name, default in _SGD_ONLY.items())


def _is_release_like(validation) -> bool:
    """A path or what ``privatize`` returned (the moment learner's validation=RELEASE forms)."""
    import os

    from ..privacy.streams import Privatized
    return isinstance(validation, (str, os.PathLike, Privatized))


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
    if validation is not None and getattr(est, "class_weight", None) is not None:
        raise InvalidInputError("solver='moments' with validation= scores the plain quadratic "
                                "risk: drop class_weight, or drop validation= (the folds of the "
                                "pass then score the class-weighted risk)")


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


def fit_moments_plan(est, plan, mapper, v: dict, validation=None) -> None:
    """Fit ``est`` by the moment learner on the prepared ``plan`` (``_fit_prepared``'s branch)."""
    import time

    from ..moment_learner import MomentSearch, fit_moments
    from ..moment_stats import accumulate_folds, fold_block_rows, layout_reader
    started = time.perf_counter()
    source = plan_source(plan, mapper)
    layout = _plan_layout(est, plan)
    search = getattr(est, "moment_search", None) or MomentSearch()
    alpha = _alpha_request(v)
    folds = search.groups           # a fixed alpha too: the groups give coef_stderr_
    reader = layout_reader(source, layout, est.chunk_rows)
    block_rows = fold_block_rows(plan.rows, search.folds)
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
    _check_searchable(v, MomentPass(layout, parts, block_rows), partial=False)
    held = None if validation is None else _validation_parts(validation, plan, search.folds)
    fit = fit_moments(parts, alpha=alpha, fit_intercept=bool(est.fit_intercept), search=search,
                      validation=held)
    _set_fitted(est, plan, v, fit, rows)
    if getattr(est, "class_weight_", None) is None:     # partial_fit continues the pass
        setattr(est._pass, PASS_ATTR, MomentPass(layout, parts, block_rows))
    logger.info("solver='moments': %s rows, %d coordinates, %s in %.2f s", f"{rows:,}",
                len(plan.features), _said(fit), time.perf_counter() - started)


def plan_source(plan, mapper):
    """The prepared plan's source as a ``Source`` read through ``mapper`` (labels mapped to
    +-1 or class indices, raw columns scaled), as the SGD pass reads it."""
    from ..io.source_base import Source
    from ..io.sources import open_source
    from ..io.views import PartSource
    source = plan.source
    if mapper is not None:
        return PartSource(open_source(source), mapper=mapper)
    return source if isinstance(source, Source) else open_source(source)


def _plan_layout(est, plan):
    """The moment layout of the prepared ``plan``: its feature columns with the noise laws'
    variances, its label (as the plan's mapper encodes it) with its law's inverse."""
    from ..moment_stats import layout_for_columns
    variances = _variances(plan)
    return layout_for_columns(plan.features, variances, plan.label,
                              **_label_law(est, plan, plan.noise.release_spec(), True),
                              notes=_notes(variances, plan))


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
    """``fit``'s first step with ``solver='moments'`` (as given or 'auto' resolved): a release
    with randomized-response categorical columns (a file, or what ``privatize`` returned: read
    as the table its file would hold) is fitted here (returns ``est``); anything else is
    returned for the usual path."""
    if resolve_solver(est, est._validated(), **given) != "moments":
        return X
    from ..privacy.streams import Privatized
    from ._rr import rr_release_spec
    if isinstance(X, Privatized) and X.spec.rr_mechanisms:
        from ..io.sources import open_source
        from ..moment_stats import privatized_table
        X = open_source(privatized_table(X))
    spec = rr_release_spec(X)
    if spec is None:
        return X
    _check_task(est, spec)
    check_solver(est, est._validated(), **given)
    return fit_rr_moments(est, X, spec, est._validated())


def _check_task(est, spec) -> None:
    if spec.task != est._task:
        fix = "IWPClassifier" if spec.task == "classification" else "IWPRegressor"
        raise InvalidInputError(f"a release with randomized-response categorical columns and "
                                f"task {spec.task!r} is a {spec.task} release; use {fix}")


def fit_rr_moments(est, X, spec, v: dict):
    """``solver='moments'`` on a release with randomized-response categorical columns: the
    moments read with the spec's inverses (``moment_stats.fold_moments``), the fitted attributes
    as ``estimators/_rr.py`` sets them (the feature map's one-hot coordinates)."""
    from ..moment_learner import MomentSearch
    search = getattr(est, "moment_search", None) or MomentSearch()
    layout, parts, block_rows = _rr_parts(est, X, spec, search, None, 0)
    _solve_rr(est, X, spec, v, parts, search)
    setattr(est._pass, PASS_ATTR, MomentPass(layout, parts, block_rows))
    return est


def _rr_parts(est, X, spec, search, block_rows: int | None, first_row: int) -> tuple:
    """(layout, the moments of ``search.groups`` groups, block_rows) of a release with
    randomized-response columns, read with its spec's inverses as ``moment_stats.fold_moments``
    reads it; ``first_row``: the rows of the pass before these (``partial_fit``)."""
    from ..io.source_base import DEFAULT_BATCH_ROWS
    from ..io.sources import open_source
    from ..moment_stats import accumulate_folds, fold_block_rows, layout_reader, release_layout
    chunk = est.chunk_rows
    src = open_source(X, record_batch_rows=DEFAULT_BATCH_ROWS if chunk is None else int(chunk))
    layout = release_layout(spec, None, None)
    reader = layout_reader(src, layout, chunk)
    if block_rows is None:
        block_rows = fold_block_rows(src.num_rows, search.folds)
    return (layout, accumulate_folds(reader, layout, search.groups, block_rows, first_row),
            block_rows)


def _solve_rr(est, X, spec, v: dict, parts: list, search) -> None:
    """The RR release's model from the fold moments ``parts`` (``fit_rr_moments``)."""
    from ..moment_learner import fit_moments
    from ._rr import _set_fitted as rr_set_fitted
    from ._rr import spec_label_classes
    alpha = _alpha_request(v)
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


# ---- partial_fit --------------------------------------------------------------------------------
def partial_fit_moments(est, X, y, sample_weight, *, n_rows_total, noise_kw: dict, features,
                        label, override: bool):
    """``partial_fit`` with ``solver='moments'``: the batch read into the fold moments of the
    pass (its rows continue the pass's row counter: ``first_row`` = the rows so far), added to
    the pass's sums (``MomentPass``), and the model solved again on all of them (the alpha search
    on the folds, or the given alpha), so the estimator is usable after every call.  Any split
    of the rows gives the statistics of one ``fit`` up to float addition order (the same folds
    when the blocks are: ``n_rows_total`` on the first call sets them as ``fit`` would, else
    ``moment_stats.FOLD_BLOCK_ROWS``)."""
    v = est._validated()
    state = moment_pass(est)
    if v["solver"] not in ("moments", "auto"):
        raise InvalidInputError(
            f"this pass runs solver='moments' but the estimator now has solver={v['solver']!r}; "
            "one pass runs one solver: set solver='moments' back, or call fit to start a new pass")
    check_solver(est, v, sample_weight=sample_weight)
    if state is None and hasattr(est, "coef_"):
        raise _no_sums(est)
    from ..moment_learner import MomentSearch
    from ..moment_stats import fold_block_rows
    from ._rr import rr_release_spec
    search = getattr(est, "moment_search", None) or MomentSearch()
    block_rows = (state.block_rows if state is not None
                  else fold_block_rows(n_rows_total, search.folds))
    first_row = 0 if state is None else state.rows
    if y is None:
        X = _opened_batch(X)    # opened once: its metadata read once for this call
        spec = rr_release_spec(X)
        if spec is not None:    # randomized-response codes (estimators/_rr.py's features)
            _check_task(est, spec)
            layout, parts, _ = _rr_parts(est, X, spec, search, block_rows, first_row)
            state = _added(est, state, layout, parts, block_rows)
            setattr(est._pass, PASS_ATTR, state)
            _check_searchable(v, state)
            _solve_rr(est, X, spec, v, state.folds, search)
            setattr(est._pass, PASS_ATTR, state)
            return est
    plan = _batch_plan(est, X, y, state, noise_kw=noise_kw, features=features, label=label,
                       override=override)
    old_noise = est._pass.noise
    if state is not None and old_noise is not None and \
            plan.noise.target_noise_var != old_noise.target_noise_var:
        raise InvalidInputError(
            f"partial_fit got target_noise_var={plan.noise.target_noise_var} but the pass "
            f"started with {old_noise.target_noise_var}; give every call the same noise "
            "arguments (or call fit to start a new pass)")
    layout = _plan_layout(est, plan)
    parts = _read_batch(est, plan, layout, search.groups, block_rows, first_row)
    state = _added(est, state, layout, parts, block_rows)
    setattr(est._pass, PASS_ATTR, state)    # the rows are in the pass even if the solve fails
    from ..moment_learner import fit_moments
    _check_searchable(v, state)
    fit = fit_moments(state.folds, alpha=_alpha_request(v), fit_intercept=bool(est.fit_intercept),
                      search=search)
    _set_fitted(est, plan, v, fit, state.rows)
    return est


def _opened_batch(X):
    """A path, an Arrow table or stream, or what ``privatize`` returned, opened as a ``Source``
    (so that a release's randomized-response codes are recognized as codes, not read as
    numbers); anything else unchanged."""
    import pyarrow as pa

    from ..io.sources import open_source
    from ..privacy.streams import Privatized
    from ._rr import opened
    if isinstance(X, Privatized) and X.spec.rr_mechanisms:
        from ..moment_stats import privatized_table
        X = privatized_table(X)
    if isinstance(X, (pa.Table, pa.RecordBatchReader)):
        return open_source(X)
    return opened(X)


def _check_searchable(v: dict, state: MomentPass, partial: bool = True) -> None:
    """alpha 'auto' or a list is chosen on the folds: at least two must hold rows."""
    if not isinstance(_alpha_request(v), float) and sum(f.rows > 0 for f in state.folds) < 2:
        raise InvalidInputError(
            f"alpha={v['alpha']!r} is chosen on the folds of the pass (blocks of "
            f"{state.block_rows:,} rows dealt in turn), and its {state.rows:,} rows fill only "
            "one: " + ("the rows are kept in the pass and the next partial_fit solves once two "
                       "folds hold rows; or pass a number as alpha" if partial else
                       "pass a number as alpha, or fit on more rows"))


def _no_sums(est) -> InvalidInputError:
    if getattr(est, "solver_", None) != "moments":
        return InvalidInputError(
            "this estimator's pass ran with solver='sgd'; one pass runs one solver: call fit with "
            "solver='moments' (or partial_fit on a new estimator)")
    return InvalidInputError(
        "partial_fit cannot continue this solver='moments' model: it holds the solution but not "
        "the debiased moments it was solved from (a model file stores no sums). Call fit on all "
        "the rows, or partial_fit every batch on one estimator in one process; to carry the "
        "statistics elsewhere, accumulate iwpfast.moments(batch) and save them (Moments.save, "
        "Moments.update)")


def _batch_plan(est, X, y, state, *, noise_kw, features, label, override):
    """The batch's ``PassPlan`` with its labels in the pass's encoding: a later call reads the
    classes the pass found (two: ``classes_hint``; k: the one-vs-rest heads' classes)."""
    ps = est._pass
    request = getattr(est, "_fit_request", None)
    if state is not None and ps.ovr is not None and request is None:
        est._fit_request = (list(ps.ovr.classes), noise_kw.get("epsilon_y"),
                            noise_kw.get("label_keep_prob"))
    elif state is not None and ps.classes_hint is None and ps.classes is not None:
        ps.classes_hint = np.asarray(ps.classes)
    try:
        if y is not None:
            return est._prepare_arrays(X, y, noise_kw=noise_kw, features=features,
                                       whole_pass=False)
        plan = est._prepare_source(X, None, noise_kw=noise_kw, features=features, label=label,
                                   override=override, sample_weight=None)
        plan.source = est._label_mapped_source(plan.source, plan.label)
        return plan
    finally:
        if state is not None and request is None and hasattr(est, "_fit_request"):
            est._fit_request = None


def _read_batch(est, plan, layout, folds: int, block_rows: int, first_row: int) -> list:
    from ..io.source_base import Source
    from ..io.sources import open_source
    from ..moment_stats import accumulate_folds, layout_reader
    source = plan.source if isinstance(plan.source, Source) else open_source(plan.source)
    return accumulate_folds(layout_reader(source, layout, est.chunk_rows), layout, folds,
                            block_rows, first_row)


def _added(est, state: MomentPass | None, layout, parts: list, block_rows: int) -> MomentPass:
    """The pass's sums with the batch's ``parts`` added (a new pass on the first call); a batch
    read with another layout (columns, noise, label or its law) is refused, naming what differs."""
    if state is None:
        if sum(p.rows for p in parts) == 0:
            raise InvalidInputError("the batch holds no rows: nothing to fit")
        return MomentPass(layout, parts, block_rows)
    differs = _layout_difference(state.layout, layout)
    if differs:
        raise InvalidInputError(
            f"partial_fit got a batch with {differs[1]} but the pass started with {differs[0]}; "
            "one pass reads one release: give every call the same features, label and noise "
            "arguments (or call fit to start a new pass)")
    state.add(parts)
    return state


def _layout_difference(old, new) -> tuple | None:
    """(what the pass has, what the batch has), in words, for the first field that differs."""
    fields = [
        ("coordinates", lambda lay: list(lay.names[:-1])),
        ("label", lambda lay: lay.label),
        ("feature noise variances", lambda lay: [float(x) for x in lay.variance]),
        ("randomized-response keep/other probabilities",
         lambda lay: [float(x) for x in np.r_[lay.keep, lay.other]]),
        ("classes", lambda lay: list(lay.targets)),
        ("label law (kind, 1/(2q - 1), q, r)",
         lambda lay: (int(lay.label_kind), float(lay.label_scale), float(lay.label_q),
                      float(lay.label_r))),
    ]
    for name, of in fields:
        a, b = of(old), of(new)
        if a != b:
            return f"{name} {a}", f"{name} {b}"
    return None


def _validation_parts(validation, plan, folds: int) -> list:
    """``fit(..., validation=RELEASE)``: the separate release's moments in ``folds`` parts (its
    own laws debias it), for the features the model reads."""
    from ..io.sources import open_source
    from ..moment_stats import fold_moments, privatized_table
    from ..privacy.streams import Privatized
    src = open_source(privatized_table(validation) if isinstance(validation, Privatized)
                      else validation)
    if not src.release_metadata:
        raise InvalidInputError(f"validation={validation!r} is not an iwpfast release (no release "
                                "metadata): pass a release written like the training one")
    return fold_moments(src, features=list(plan.features), folds=folds)
