"""Cross-validated choice of the grid on small data: every row scored once, the choice refit.

On a small release one hold-out of a tenth of the rows cannot tell the grid's heads apart: on
``bench/real_tables.py``'s fair table (4,457 training rows, 440 validation rows with
randomized-response labels) the paired standard errors (0.018-0.032) were as large as the clean
risk gaps between the heads (0.012-0.055).  Where a scan is cheap (at most
``cross_validate_max_rows`` rows of ``iwpfast.settings.SearchOptions``, where successive
halving takes no rung anyway), the grid is
scanned once per phase of the validation blocks instead: fold f holds out the blocks that the
split of ``iwpfast.sgd.split`` would hold out with the block numbering shifted by f, so the m folds
(m = 1 / validation_fraction) hold out every row exactly once and fold 0 is the single split's.
Each head's m estimates are pooled by row count into one estimate over every row (the folds'
rows are disjoint, so their covariances add, each weighted by its squared share), the paired
standard-error rule (``iwpfast.sgd.choice.select``) chooses on the pooled estimates, and the chosen head is
trained once more on every row: the model is a single pass over all the data, as without
cross-validation, and the choice rests on m times the validation rows.  It costs m scans of the
grid on (m - 1)/m of the rows and one single-head pass: at most 10 x 28 x 400,000 head updates
on the largest data it applies to, with the needed columns read once and held in memory when
they fit in ``SearchOptions.cross_validate_held_bytes`` (docs/tuning.md, "What auto does",
step 6).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ..exceptions import DivergenceError
from ..settings import SearchOptions
from .choice import TuningResult, choose
from .grid import GridPoint, class_head_name
from .grid_scan import diverged_notes, hold_validation, scan_heads
from .scoring import blas_single_threaded, score_heads, scored_columns
from .split import scoring_source
from .state import HeadConfig


def cross_validates(train, validation, kw: dict, options: SearchOptions) -> bool:
    """Whether a tuning scan with training part ``train`` cross-validates (``tune_stream``):
    ``options.cross_validate``, no separate validation release, no checkpoint, a split that can
    be read again and at most ``options.cross_validate_max_rows`` rows."""
    from ..io.views import PartSource
    if not options.cross_validate or validation is not None or "checkpoint" in kw:
        return False
    if not isinstance(train, PartSource) or train.period is None or not train.rereadable:
        return False
    n = train.inner.num_rows
    return n is not None and 0 < n <= options.cross_validate_max_rows


def _pooled(estimates: list, rows: list[int]):
    """One RiskEstimate over the folds' disjoint rows: the row-weighted mean of the risks, the
    variance of that mean, reliable when every fold's is (the warnings of each unreliable fold)."""
    from ..estimates import RiskEstimate
    total = sum(rows)
    share = [r / total for r in rows]
    risk = sum(s * e.risk for s, e in zip(share, estimates, strict=True))
    var = sum((s * e.stderr) ** 2 for s, e in zip(share, estimates, strict=True))
    warnings = tuple(dict.fromkeys(w for e in estimates for w in e.warnings))
    return RiskEstimate(
        risk, math.sqrt(var), total,
        largest_share=max(s * e.largest_share for s, e in zip(share, estimates, strict=True)),
        effective_rows=sum(e.effective_rows for e in estimates),
        noise_energy=max(e.noise_energy for e in estimates),
        variance_factor=max(e.variance_factor for e in estimates),
        reliable=all(e.reliable for e in estimates), warnings=warnings)


def held_source(train, columns: list[str], budget: int):
    """The rows the folds read: ``train``'s source with ``columns`` read once into memory when
    they fit in ``budget`` bytes (``SearchOptions.cross_validate_held_bytes``; 8 bytes a value
    at most; ``io.sources.HeldSource`` keeps each batch's origin and the decoded release
    metadata), else the source itself (read again by every fold; in-memory data as it is)."""
    from ..io.sources import HeldSource
    inner = train.inner
    columns = list(dict.fromkeys(columns))   # a label that is also a feature is one column
    if inner.cheap_decode or 8 * len(columns) * int(inner.num_rows) > budget:
        return inner
    return HeldSource(inner, columns)


class Folds:
    """The folds' scans of a grid (``fold_scans``): each head's estimate pooled over every row;
    ``source`` the rows they read (``held_source``), ``mapper`` the batches' mapping."""

    def __init__(self, pooled: dict, per_fold: list, first, diverged: list, passes: float,
                 source, mapper, held: bool):
        self.pooled, self.per_fold, self.first = pooled, per_fold, first
        self.diverged, self.passes = diverged, passes
        self.source, self.mapper = source, mapper
        #: reads of the data the refit adds (none when the folds held the rows in memory)
        self.refit_reads = 0.0 if held else 1.0
        #: the rows scored (every row once) and the rows of the data
        self.rows = sum(r for _, _, _, r in per_fold)
        self.n_rows = int(source.num_rows)

    def cov_of(self, a: str, b: str) -> float:
        """The covariance of two heads' pooled estimates (the folds' rows are disjoint)."""
        return sum((r / self.rows) ** 2 * c[i[a], i[b]] for _, i, c, r in self.per_fold)



def fold_scans(train, names: list[str], heads_of: Callable[[list[str]], list], kw: dict,
               *, score_kw: dict, options: SearchOptions,
               siblings: Callable[[str], list[str]] | None = None) -> Folds:
    """Scan the named heads once per fold of ``train``'s validation blocks (module docstring)
    and score each fold's heads on its held-out rows.  ``heads_of(names)``: the heads, their
    configs made for ``train``'s training rows (the folds' differ by less than a block, so the
    tail average's start moves by less than that: one config per head serves every fold);
    ``score_kw``: ``score_heads``' features, label, loss, noise, sample_weight, engine (and
    label_table); a head diverging in one fold is dropped (with its ``siblings``) from the later
    folds and from the choice (each fold scans with ``grid_scan.scan_heads``); ``options``: the
    search's (the rows held in memory)."""
    from ..io.views import PartSource
    period, block, mapper = train.period, train.block, train.mapper
    columns = scored_columns(score_kw["features"], score_kw["label"],
                              score_kw.get("sample_weight"))
    src = held_source(train, columns, options.cross_validate_held_bytes)
    held = src is not train.inner
    passes = 1.0 if held else 0.0          # reads of the data
    per_fold: list = []            # (scored, index, cov, validation rows) per fold
    diverged: list[str] = []
    first = None
    for f in range(period):
        tr = train if f == 0 and not held else PartSource(
            src, period=period, block=block, validation=False, mapper=mapper,
            row_offset=f * block)
        va = PartSource(src, period=period, block=block, validation=True, mapper=mapper,
                        row_offset=f * block)
        if not va.num_rows:
            continue
        rows_held = hold_validation(tr, va, None, options)
        alive = [n for n in names if n not in diverged]
        result, active, lost, repeats = scan_heads(tr, heads_of, alive, dict(kw),
                                                    siblings=siblings)
        diverged += [n for n in lost if n not in diverged]
        scoring, saved = scoring_source(va, rows_held, columns)
        if not held:
            passes += 2.0 + repeats - saved
        with blas_single_threaded():
            scored, cov = score_heads(scoring, heads=active, states=result.states,
                                      configs=result.configs, width=len(names), **score_kw)
        per_fold.append((dict(zip(active, scored, strict=True)),
                         {n: i for i, n in enumerate(active)}, cov, int(va.num_rows)))
        first = first or result
    if first is None:
        raise ValueError("cross-validation needs validation rows")   # callers check the rows
    rows = [r for _, _, _, r in per_fold]
    kept = [n for n in names if n not in diverged and all(n in s for s, _, _, _ in per_fold)]
    pooled = {n: _pooled([s[n] for s, _, _, _ in per_fold], rows) for n in kept}
    return Folds(pooled, per_fold, first, diverged, passes, src, mapper, held)


def refit(folds: Folds, heads: list, kw: dict):
    """The chosen heads trained once more on every row the folds read (the result of
    ``driver.fit_stream``), or None when one diverges there (then the first fold's models
    stand, with a note)."""
    from ..io.views import PartSource
    from . import driver
    whole = PartSource(folds.source, mapper=folds.mapper)
    try:
        # the grid's kernel: the single-head one would be one more compile on a first fit
        return driver.fit_stream(whole, heads, **kw, heads_kernel=True)
    except DivergenceError:
        return None


def updates_per_row(folds: Folds, n_rows: int, n_heads: int, n_refit: int) -> int:
    """Head updates per row of the data: every fold trains the kept heads on its other rows,
    then the refit trains the chosen ones on all of them."""
    kept = n_heads - len(folds.diverged)
    trained = (n_rows * len(folds.per_fold) - folds.rows) * kept + n_rows * n_refit
    return max(1, round(trained / max(n_rows, 1)))


def _heads_of(features, label, sample_weight, config_of: Callable[[str], HeadConfig]):
    """``fold_scans``' heads_of: each head's config made once (``config_of(name)``)."""
    from . import driver
    made: dict = {}

    def heads_of(names):
        for n in names:
            if n not in made:
                made[n] = config_of(n)
        return [driver.Head(n, made[n], list(features), label, sample_weight=sample_weight)
                for n in names]
    return heads_of


def tune_folds(train, points: Sequence[GridPoint],
               make_config: Callable[[GridPoint, int | None], HeadConfig], kw: dict, *,
               score_kw: dict, options: SearchOptions):
    """``tune_stream`` by cross-validation (module docstring): a ``TuningResult`` whose
    estimates are pooled over every row and whose chosen head's state is its pass over all the
    rows."""
    from . import driver
    by_name = {pt.name: pt for pt in points}
    names = list(by_name)
    features, label, weight = score_kw["features"], score_kw["label"], score_kw["sample_weight"]
    n_train = train.num_rows
    folds = fold_scans(train, names, _heads_of(features, label, weight,
                                               lambda h: make_config(by_name[h], n_train)),
                       kw, score_kw=score_kw, options=options)
    estimates, chosen, rule, notes, edge = choose(points, names, folds.pooled, folds.cov_of)
    n, name, first = folds.n_rows, names[chosen], folds.first
    final = refit(folds, [driver.Head(name, make_config(by_name[name], n), list(features), label,
                                      sample_weight=weight)], kw)
    states, configs, telemetry = dict(first.states), dict(first.configs), dict(first.telemetry)
    if final is None:
        notes.append(f"the chosen head ({name}) diverged when trained on all {n:,} rows; the "
                     "model is its pass over the first fold's training rows")
    else:
        states[name], configs[name] = final.states[name], final.configs[name]
        telemetry[name] = final.telemetry.get(name, {})
    notes += diverged_notes(folds.diverged)
    return TuningResult(
        points=list(points), estimates=estimates, states=states, configs=configs,
        telemetry=telemetry, chosen=chosen, rule=rule,
        n_train=int((first if final is None else final).n_rows), n_validation=folds.rows,
        passes=folds.passes + folds.refit_reads,
        head_updates_per_row=updates_per_row(folds, n, len(names), 1),
        notes=notes, pruned={}, edge=edge, folds=len(folds.per_fold))


def tune_folds_classes(train, points: Sequence[GridPoint],
                       make_configs: Callable[[GridPoint, int | None], list], n_classes: int,
                       kw: dict, *, score_kw: dict, options: SearchOptions) -> list:
    """``tune_stream_classes`` by cross-validation: every class chooses its point on the pooled
    estimates of its heads, and the k chosen heads are trained once more on every row, together
    (one TuningResult per class, as ``tune_stream_classes``)."""
    from . import driver
    k = int(n_classes)
    owner = {class_head_name(pt, c): (pt, c) for c in range(k) for pt in points}
    features, label, weight = score_kw["features"], score_kw["label"], score_kw["sample_weight"]
    per_point: dict = {}

    def config_of(name, rows):
        pt, c = owner[name]
        if (pt.name, rows) not in per_point:
            per_point[(pt.name, rows)] = make_configs(pt, rows)
        return per_point[(pt.name, rows)][c]

    def siblings(name):
        return [class_head_name(owner[name][0], c) for c in range(k)]

    n_train = train.num_rows
    folds = fold_scans(train, list(owner),
                       _heads_of(features, label, weight, lambda h: config_of(h, n_train)), kw,
                       score_kw=score_kw, options=options, siblings=siblings)
    n, first = folds.n_rows, folds.first
    choices = []
    for c in range(k):
        names = [class_head_name(pt, c) for pt in points]
        choices.append((names, *choose(points, names, folds.pooled, folds.cov_of)))
    chosen_heads = [names[chosen] for names, _, chosen, *_ in choices]
    final = refit(folds, [driver.Head(h, config_of(h, n), list(features), label,
                                      sample_weight=weight) for h in chosen_heads], kw)
    source = first if final is None else final
    results = []
    for c, (names, estimates, chosen, rule, notes, edge) in enumerate(choices):
        kept = {pt.name: h for pt, h in zip(points, names, strict=True)
                if h in first.states and h not in folds.diverged}
        states = {p: first.states[h] for p, h in kept.items()}
        configs = {p: first.configs[h] for p, h in kept.items()}
        telemetry = {p: first.telemetry.get(h, {}) for p, h in kept.items()}
        point, head = points[chosen].name, names[chosen]
        states[point], configs[point] = source.states[head], source.configs[head]
        telemetry[point] = source.telemetry.get(head, {})
        if final is None:
            notes.append(f"the chosen heads diverged when trained on all {n:,} rows; the models "
                         "are their passes over the first fold's training rows")
        notes += diverged_notes(
            [owner[h][0].name for h in folds.diverged if owner[h][1] == c], points=True)
        results.append(TuningResult(
            points=list(points), estimates=estimates, states=states, configs=configs,
            telemetry=telemetry, chosen=chosen, rule=rule, n_train=int(source.n_rows),
            n_validation=folds.rows, passes=folds.passes + folds.refit_reads,
            head_updates_per_row=updates_per_row(folds, n, k * len(points), k), notes=notes,
            pruned={}, edge=edge, folds=len(folds.per_fold)))
    return results
