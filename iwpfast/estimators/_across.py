"""The classifier's default across learners (issue 45 item 1): after the SGD search of
``solver='auto'``, the moment learner's model and the constant are scored against the SGD
model on the same rows (``iwpfast.learner_choice``: the exponential loss's private risk after
each candidate's scale and intercept are fitted), and the lowest risk is the fitted model.

Two more reads of the data: the fold moments (``moment_stats.accumulate_folds``), then the
margins of every candidate (at most ``COMPARE_ROWS`` rows).  Where the moment model wins, the
fitted model is its direction at the fitted scale and intercept (``solver_ = 'moments'``; the
exponential loss's ``predict_proba`` then reads the calibrated margin); where the SGD model wins
it is kept bit for bit; the constant wins only below both, with one warning.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..exceptions import NumericalWarning
from ..progress import logger

#: rows the comparison pass reads at most (its standard errors shrink like 1/sqrt(rows); 2e6
#: rows put them far below the differences that matter, bench/default_cost.py)
COMPARE_ROWS = 2_000_000
#: fewer rows than this: no comparison (the moment folds need rows to choose alpha)
MIN_ROWS = 2_000
#: the loss whose private risk compares the learners (the classifier's default loss)
CRITERION_LOSS = "exponential"


def _no_sgd_setting(est) -> bool:
    """No SGD-only setting given (a step, a schedule, a radius, a cap, averaging, mu): a user who
    sets one asks for the SGD search (as the regressor's 'auto', ``_moments.resolve_solver``)."""
    from ._moments import _SGD_ONLY
    return all(getattr(est, name, default) == default for name, default in _SGD_ONLY.items())


def _eligible(est, plan, v: dict, sample_weight, checkpoint, validation) -> bool:
    """What both stages need: ``solver='auto'`` without an SGD-only setting, two classes, the
    exponential loss debiased, no class or sample weights, no checkpoint or separate validation
    release, a source read again on this machine, of at least ``MIN_ROWS`` rows."""
    from ..sgd.driver import stream_runner
    ps = est._pass
    return (est._task == "classification" and getattr(est, "solver", "sgd") == "auto"
            and v["loss"] == CRITERION_LOSS and est.correction == "iwp" and _no_sgd_setting(est)
            and getattr(ps, "ovr", None) is None and getattr(est, "class_weight_", None) is None
            and sample_weight is None and checkpoint is None and validation is None
            and plan.rows is not None and plan.rows >= MIN_ROWS
            and getattr(plan.source, "rereadable", False) and stream_runner() is None)


def applies(est, plan, v: dict, *, sample_weight=None, checkpoint=None, validation=None) -> bool:
    """The comparison after the SGD search: ``_eligible`` and a fitted binary SGD model."""
    return (_eligible(est, plan, v, sample_weight, checkpoint, validation)
            and np.asarray(est.coef_).size == len(plan.features)
            and getattr(est, "tuning_", None) is not None)


def noisy(plan) -> bool:
    """Whether any released feature carries noise (the criterion cannot score SGD fairly)."""
    return bool(np.any(np.asarray(plan.noise.noise_var, np.float64)))


def applies_before(est, plan, v: dict, *, sample_weight=None, checkpoint=None,
                   validation=None) -> bool:
    """The moment model first, before the SGD search: ``_eligible`` on a release whose features
    carry noise."""
    return _eligible(est, plan, v, sample_weight, checkpoint, validation) and noisy(plan)


def moments_first(est, plan, mapper, v: dict) -> bool:
    """Noisy features: the moment model is the default's model when the moment search finds one
    (not the constant), and the SGD search does not run (True).  On noisy features the
    criterion scores the SGD model in-sample against the moment model out of fold: on 60 ACS
    releases it chose SGD 8 times by 2-3 standard errors, and all 8 were worse on the clean
    hold-out (docs/tuning.md).  False: the constant won the moment search; the SGD search runs
    and is weighed against the constant."""
    import time
    started = time.perf_counter()
    fit, _, _ = _moment_fit(est, plan, mapper)
    if fit.alpha is None:
        return False
    moment_table = fit.tuning
    _set_fitted_moments(est, plan, v, fit)
    table = dict(moment_table) if moment_table else {}
    table["learners"] = {
        "chosen": "moments",
        "criterion": "none: noisy features (the SGD search was not run)",
        "rule": "the moment model where the moment search finds one (on noisy features the "
                "criterion would score SGD in-sample against the moment model out of fold)",
        "rows": int(plan.rows), "moment_alpha": float(fit.alpha), "candidates": {}}
    est.tuning_ = table
    logger.getChild("progress").info("auto: noisy features, the moment model (alpha %.4g) in "
                                     "%.2f s", fit.alpha, time.perf_counter() - started)
    return True


def _moment_fit(est, plan, mapper):
    """(the moment learner's fit, its groups, the source read) on the plan's rows."""
    from ..moment_learner import MomentSearch, fit_moments
    from ..moment_stats import accumulate_folds, fold_block_rows, layout_reader
    from ._moments import _plan_layout, plan_source
    source = plan_source(plan, mapper)
    layout = _plan_layout(est, plan)
    search = getattr(est, "moment_search", None) or MomentSearch()
    block_rows = fold_block_rows(plan.rows, search.folds)
    groups = accumulate_folds(layout_reader(source, layout, est.chunk_rows), layout,
                              search.groups, block_rows)
    fit = fit_moments(groups, alpha=None, fit_intercept=bool(est.fit_intercept), search=search)
    return fit, groups, (source, layout, search, block_rows)


def _set_fitted_moments(est, plan, v: dict, fit) -> None:
    from ._moments import _set_fitted
    _set_fitted(est, plan, dict(v, loss=CRITERION_LOSS), fit, plan.rows)


def choose_across(est, plan, mapper, v: dict) -> None:
    """Score the fitted SGD model, the moment model and the constant; adopt the winner."""
    import time

    from ..learner_choice import NOISY_MARGIN, accuracy_sums, calibrated_quadratic, choose
    from ..moment_learner import merge_parts
    from ..moment_stats import _block_runs, layout_reader
    started = time.perf_counter()
    fit, groups, (source, layout, search, block_rows) = _moment_fit(est, plan, mapper)
    folds = search.folds
    parts = merge_parts(groups, folds)
    p = len(plan.features)
    names = ["sgd"]
    directions = [np.tile(np.ravel(est.coef_), (folds, 1))]
    intercepts = [np.full(folds, float(np.ravel(est.intercept_)[0]))]
    if fit.alpha is not None:
        names.append("moments")
        d, c = _out_of_fold(parts, fit.alpha, bool(est.fit_intercept), p)
        directions.append(d)
        intercepts.append(c)
    total = sum(parts[1:], parts[0])
    names.append("constant")
    directions.append(np.zeros((folds, p)))
    # the exponential loss's best constant score at the label's debiased mean E[y]
    mean_y = float(np.clip(np.ravel(total.b)[-1], -0.999, 0.999))
    intercepts.append(np.full(folds, 0.5 * np.log((1.0 + mean_y) / (1.0 - mean_y))))
    D, icpt = np.stack(directions), np.stack(intercepts)
    clean = not np.any(np.asarray(plan.noise.noise_var, np.float64))
    if clean:       # the debiased accuracy of each model, exact with clean features
        runs = _block_runs(layout_reader(source, layout, est.chunk_rows), layout, folds,
                           block_rows, 0)
        hits, rows = accuracy_sums(runs, D, icpt, layout.label_scale, block_rows,
                                   max_rows=COMPARE_ROWS)
        batch_scores, weights = hits / np.maximum(rows, 1), rows
    else:           # the calibrated quadratic risk on each fold's moments (no pass)
        batch_scores = calibrated_quadratic(groups, D)
        weights = np.array([mo.rows for mo in groups], np.float64)
    prefer = None if clean or "moments" not in names else names.index("moments")
    chosen, scores = choose(names, batch_scores, weights, prefer=prefer, margin=NOISY_MARGIN)
    _record(est, scores, chosen, int(np.sum(weights)), fit, clean)
    winner = scores[chosen]
    if winner.name == "moments":
        _adopt_moments(est, plan, v, fit)
    elif winner.name == "constant":
        _adopt_constant(est, float(icpt[-1, 0]))
    logger.getChild("progress").info(
        "auto across learners: %s chosen (%s) in %.2f s", winner.name,
        ", ".join(f"{s.name} {s.score:.5g}" for s in scores), time.perf_counter() - started)


def _out_of_fold(parts, alpha: float, fit_intercept: bool, p: int) -> tuple:
    """(folds, p) directions and (folds,) intercepts: the moment solution at ``alpha`` on every
    fold but f, for f's rows; the all-rows solution where the others' Gram is not positive
    definite at alpha."""
    from ..exceptions import InvalidInputError
    from ..moment_stats import solve_ridge
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    everyone = solve_ridge(total, alpha, fit_intercept)
    out, icpt = np.empty((len(parts), p)), np.empty(len(parts))
    for f in range(len(parts)):
        rest = [part for g, part in enumerate(parts) if g != f]
        others = sum(rest[1:], rest[0])
        try:
            coef, b = solve_ridge(others, alpha, fit_intercept)
        except InvalidInputError:
            coef, b = everyone
        out[f], icpt[f] = np.ravel(coef), float(np.ravel(b)[0])
    return out, icpt


def _record(est, scores, chosen: int, rows: int, fit, clean: bool) -> None:
    from ..learner_choice import NOISY_MARGIN
    """``tuning_['learners']``: the criterion, every candidate's score and its difference's
    standard error to the chosen one, the winner, and the rows or folds compared."""
    table = dict(est.tuning_)
    table["learners"] = {
        "chosen": scores[chosen].name,
        "criterion": ("debiased accuracy" if clean else
                      "quadratic risk at the fitted scale and intercept"),
        "rule": ("the highest" if clean else
                 f"the moment model unless another is lower by more than {NOISY_MARGIN:g} "
                 "standard errors of the difference"),
        "rows": rows,
        "moment_alpha": None if fit.alpha is None else float(fit.alpha),
        # the accuracy (higher is better), or the risk (lower is better)
        "candidates": {s.name: {("accuracy" if clean else "risk"): float(s.score if clean
                                                                         else -s.score),
                                "stderr": float(s.stderr)} for s in scores},
    }
    table["passes"] = float(table.get("passes", 0.0)) + (2.0 if clean else 1.0)
    est.tuning_ = table


def _adopt_moments(est, plan, v: dict, fit) -> None:
    """The moment learner's model (its own scale and intercept) as the fitted model."""
    from ._moments import _set_fitted
    tuning = est.tuning_
    _set_fitted(est, plan, dict(v, loss=CRITERION_LOSS), fit, plan.rows)
    est.tuning_ = tuning


def _adopt_constant(est, sign: float) -> None:
    est.coef_ = np.zeros_like(np.asarray(est.coef_, np.float64))
    est.intercept_ = np.full_like(np.asarray(est.intercept_, np.float64), sign)
    warnings.warn(
        "the default chose the constant model (every row predicts the majority class): it "
        "scored above both the SGD model and the moment model on the release "
        "(tuning_['learners']). The release holds too few rows for its noise to support a "
        "linear model; more rows or a larger privacy budget would", NumericalWarning,
        stacklevel=4)
