"""The classifier's default across learners (issue 45 item 1; docs/tuning.md "The default
across learners").  ``solver='auto'`` with two classes and the exponential loss on a source read
again:

- features with noise: the moment learner's model (``read_moments``: one read of the pass's
  groups, ``adopt_moment_model``), and no SGD search, wherever the moment search finds a model;
  where it returns its constant, the SGD search runs and ``choose_across`` weighs it against
  the constant by the calibrated quadratic risk on the same read's groups (no second read);
- clean features: the SGD search runs, then ``choose_across`` scores its model, the moment
  model (out of fold) and the constant by their debiased accuracy (one more read).

The SGD model, when chosen, is kept bit for bit; the constant warns once.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

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


def _eligible(est, plan, v: dict, sample_weight, checkpoint, validation) -> bool:
    """What both stages need: ``solver='auto'`` without an SGD-only setting, two classes, the
    exponential loss debiased, no class or sample weights, no checkpoint or separate validation
    release, a source read again on this machine, of at least ``MIN_ROWS`` rows."""
    from ..sgd.driver import stream_runner
    from ._moments import sgd_settings_given
    ps = est._pass
    return (est._task == "classification" and getattr(est, "solver", "sgd") == "auto"
            and v["loss"] == CRITERION_LOSS and est.correction == "iwp"
            and not sgd_settings_given(est)
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


@dataclass
class MomentRead:
    """One read of the plan's rows into the moment learner's groups, and its fit."""

    fit: Any
    groups: list
    source: Any
    layout: Any
    search: Any
    block_rows: int


def read_moments(est, plan, mapper) -> MomentRead:
    """The moment learner's groups of the plan's rows (one read) and its fit on them."""
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
    return MomentRead(fit, groups, source, layout, search, block_rows)


def adopt_moment_model(est, plan, v: dict, read: MomentRead) -> bool:
    """Noisy features: the moment model is the default's model when the moment search found
    one (True; the SGD search does not run).  On noisy features the only exact criterion, the
    calibrated quadratic risk, scores the SGD model in-sample against the moment model out of
    fold: a 2-SE rule chose SGD 8 times on ACS releases, and the 7 compared were all worse on
    the clean hold-out (docs/tuning.md).  False: the moment search returned its constant."""
    fit = read.fit
    if fit.alpha is None:
        return False
    _adopt_moments(est, plan, v, fit, fit.tuning)
    table = dict(est.tuning_ or {})
    table["learners"] = {
        "chosen": "moments",
        "criterion": "none: noisy features (the SGD search was not run)",
        "rule": "the moment model where the moment search finds one (on noisy features the "
                "criterion would score SGD in-sample against the moment model out of fold)",
        "rows": int(plan.rows), "moment_alpha": float(fit.alpha), "candidates": {}}
    est.tuning_ = table
    logger.getChild("progress").info("auto: noisy features, the moment model (alpha %.4g)",
                                     fit.alpha)
    return True


def choose_across(est, plan, mapper, v: dict, read: MomentRead | None = None) -> None:
    """Score the fitted SGD model, the moment model (when the moment search found one) and the
    constant; adopt the winner.  ``read``: the moments already read for these rows."""
    import time

    from ..learner_choice import accuracy_sums, calibrated_quadratic, choose
    from ..moment_learner import merge_parts
    from ..moment_stats import _block_runs, layout_reader
    started = time.perf_counter()
    read = read_moments(est, plan, mapper) if read is None else read
    fit, groups, folds = read.fit, read.groups, read.search.folds
    parts = merge_parts(groups, folds)
    total = sum(parts[1:], parts[0])
    p = len(plan.features)
    names = ["sgd"]
    directions = [np.tile(np.ravel(est.coef_), (folds, 1))]
    intercepts = [np.full(folds, float(np.ravel(est.intercept_)[0]))]
    if fit.alpha is not None:
        names.append("moments")
        d, c = _out_of_fold(parts, total, fit.alpha, bool(est.fit_intercept), p)
        directions.append(d)
        intercepts.append(c)
    names.append("constant")
    directions.append(np.zeros((folds, p)))
    # the exponential loss's best constant score at the label's debiased mean E[y]
    mean_y = float(np.clip(np.ravel(total.b)[-1], -0.999, 0.999))
    intercepts.append(np.full(folds, 0.5 * np.log((1.0 + mean_y) / (1.0 - mean_y))))
    D, icpt = np.stack(directions), np.stack(intercepts)
    clean = not np.any(np.asarray(plan.noise.noise_var, np.float64))
    if clean:       # the debiased accuracy of each model, exact with clean features
        runs = _block_runs(layout_reader(read.source, read.layout, est.chunk_rows), read.layout,
                           folds, read.block_rows, 0)
        hits, rows = accuracy_sums(runs, D, icpt, read.layout.label_scale, read.block_rows,
                                   max_rows=COMPARE_ROWS)
        batch_scores, weights = hits / np.maximum(rows, 1), rows
    else:           # the calibrated quadratic risk on each group's moments (no pass)
        batch_scores = calibrated_quadratic(groups, D)
        weights = np.array([mo.rows for mo in groups], np.float64)
    chosen, scores = choose(names, batch_scores, weights)
    _record(est, scores, chosen, int(np.sum(weights)), fit, clean)
    winner = scores[chosen]
    if winner.name == "moments":
        _adopt_moments(est, plan, v, fit, est.tuning_)
    elif winner.name == "constant":
        _adopt_constant(est, float(icpt[-1, 0]))
    logger.getChild("progress").info(
        "auto across learners: %s chosen (%s) in %.2f s", winner.name,
        ", ".join(f"{s.name} {s.score:.5g}" for s in scores), time.perf_counter() - started)


def _out_of_fold(parts, total, alpha: float, fit_intercept: bool, p: int) -> tuple:
    """(folds, p) directions and (folds,) intercepts: the moment solution at ``alpha`` on every
    fold but f, for f's rows; the all-rows solution where the others' Gram is not positive
    definite at alpha."""
    from ..exceptions import InvalidInputError
    from ..moment_stats import solve_ridge
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
    """``tuning_['learners']``: the criterion, every candidate's score and its difference's
    standard error to the chosen one, the winner, and the rows compared."""
    table = dict(est.tuning_)
    table["learners"] = {
        "chosen": scores[chosen].name,
        "criterion": ("debiased accuracy" if clean else
                      "quadratic risk at the fitted scale and intercept"),
        "rule": "the highest accuracy" if clean else "the lowest risk",
        "rows": rows,
        "moment_alpha": None if fit.alpha is None else float(fit.alpha),
        # the accuracy (higher is better), or the risk (lower is better)
        "candidates": {s.name: {("accuracy" if clean else "risk"): float(s.score if clean
                                                                         else -s.score),
                                "stderr": float(s.stderr)} for s in scores},
    }
    table["passes"] = float(table.get("passes", 0.0)) + (2.0 if clean else 1.0)
    est.tuning_ = table


def _adopt_moments(est, plan, v: dict, fit, tuning) -> None:
    """The moment learner's model (its own scale and intercept) as the fitted model, with
    ``tuning`` as its ``tuning_``."""
    from ._moments import _set_fitted
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
