"""Hyper-parameters by private validation: the search of "auto", stage by stage.

No clean data is needed.  ``tune_stream`` trains every (alpha, learning rate) pair of a grid as one
head of the streaming driver, all in the same scan of the training part of a release, then scores
every head on a private validation part with the unbiased private risk (the IWP loss, whose mean
over the release noise is the clean risk; ``iwpfast.estimates``), drops heads whose estimate is not
reliable, and picks one by the standard-error rule (half a paired SE).  docs/tuning.md derives
the default grid and states the cost.  Each stage is a module that imports only the earlier ones;
this module runs them in order:

1. candidates: ``iwpfast.sgd.grid`` (the derived grid of (alpha, step) points);
2. the split: ``iwpfast.sgd.split`` (every m-th block of rows held out, m = round(1/f) for the
   validation fraction f: two ``iwpfast.io.views.PartSource`` views of the source);
3. the scan: ``iwpfast.sgd.grid_scan`` (every head in one pass; a head that diverges is left
   out and the scan goes on, on a cluster's shards too; the validation rows the scan passes
   over are held in memory, up to ``SearchOptions.held_validation_bytes``, on a Dask
   cluster by each shard's worker) with ``iwpfast.sgd.halving`` (the grid halved after
   1/32, 1/16, 1/8 and 1/4 of the rows, docs/tuning.md "Successive halving");
4. the scoring: ``iwpfast.sgd.scoring`` (every head's private risk in one read of the held rows;
   a larger hold-out is read again; a separate validation release is read instead);
5. the choice: ``iwpfast.sgd.choice`` (the rule, the ``TuningResult``, the ``tuning_`` table);
6. on small data, ``iwpfast.sgd.crossval`` runs stages 3-5 once per fold and refits the choice.

Cost: one read of the data (each training row updates every live head: k heads cost k kernel
updates per row, the reading and decoding is shared).  ``options``
(``iwpfast.settings.SearchOptions``) says how the search prunes, holds and cross-validates.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ..settings import SearchOptions
from .choice import UNRELIABLE_DISCARDED, TuningResult, choose
from .crossval import cross_validates, tune_folds, tune_folds_classes
from .grid import GridPoint, class_head_name
from .grid_scan import (
    DIVERGED_DROPPED,
    POINTS_DIVERGED,
    diverged_notes,
    driver_kw,
    hold_validation,
    scan_heads,
)
from .halving import PRUNED_EARLY, make_race, race_notes
from .scoring import blas_single_threaded, score_heads, scored_columns
from .split import open_parts, pass_rows, scoring_source
from .state import HeadConfig

#: default share of a stream held out for validation
VALIDATION_FRACTION = 0.1
#: below this many validation rows "auto" does not validate (the derived grid's centre is used)
MIN_VALIDATION_ROWS = 30
#: the variance cap "auto" uses for IWP heads when none is given (sigma^2 |theta|^2 <= 2)
AUTO_VARIANCE_CAP = 2.0

#: the phrases of the notes on routine events of a search (heads pruned, heads diverged, heads
#: left out for an unreliable estimate, a cluster's search): the estimator logs those notes
#: (``routine_note``); the others ask the user to act and are warnings
ON_CLUSTER = "the passes ran on a cluster's runner"
ROUTINE_PHRASES = (PRUNED_EARLY, DIVERGED_DROPPED, POINTS_DIVERGED, UNRELIABLE_DISCARDED,
                   ON_CLUSTER)


def routine_note(note: str) -> bool:
    """Whether a tuning note reports a routine event of the search (logged, not warned)."""
    return any(phrase in note for phrase in ROUTINE_PHRASES)


def _search_options(options: SearchOptions | None) -> tuple[SearchOptions, list[str]]:
    """The options a search follows and the note saying where they differ from those asked:
    inside ``driver.streams_on`` (a cluster's runner) the passes run on the shards, so the
    search holds no rows here, takes no halving rungs and does not cross-validate
    (``SearchOptions.on_cluster``; a runner that ``holds_validation`` holds them on its
    workers)."""
    from .driver import stream_runner
    options = SearchOptions() if options is None else options
    runner = stream_runner()
    if runner is None:
        return options, []
    cluster = options.on_cluster()
    if getattr(runner, "holds_validation", False):
        # the shards hold their validation rows on their workers (one read in all)
        cluster = dataclasses.replace(cluster, hold_validation=options.hold_validation)
    return cluster, [f"{ON_CLUSTER}: one hold-out scored on the shards, without halving rungs "
                     "or cross-validation"]


def tune_stream(source, features: Sequence[str], label: str, points: Sequence[GridPoint],
                make_config: Callable[[GridPoint, int | None], HeadConfig], *, loss: str,
                validation_fraction: float = VALIDATION_FRACTION, validation=None,
                mapper=None, validation_mapper=None, engine: str = "numba", progress=True,
                chunk_rows=None, feature_bound=None, noise=None, checkpoint=None,
                checkpoint_every=None, resume: bool = False, overwrite: bool = False,
                sample_weight: str | None = None, prune: bool = True,
                options: SearchOptions | None = None) -> TuningResult:
    """Train every grid point as a head in one scan, score each privately, choose one.

    source: the training data (a Source or anything ``open_source`` takes); ``mapper`` (see
    ``iwpfast.io.views``) turns its batches into the kernel's form (labels +-1, features scaled).
    validation: None (hold out ``validation_fraction`` of ``source``) or a separate private
    release (mapped by ``validation_mapper``).  make_config(point, n_train):
    the HeadConfig of a grid point for a pass over n_train rows.  noise: the ``NoiseModel`` (or
    the triple noise_var, label_keep_prob, target_noise_var) the validation risk debiases for
    (default: the heads').
    checkpoint, checkpoint_every, resume: as ``fit_stream`` (the grid's heads are checkpointed
    together; the split is a function of the row numbers, so a resumed scan sees the same rows).
    sample_weight: a column of public row weights: every head is weighted and the hold-out scores
    the weighted risk.
    prune: stop hopeless heads early on the validation rows the scan has passed
    (``iwpfast.sgd.halving.Race``; only when the hold-out is held in memory, the length is known
    and there is no checkpoint).
    options: how the search prunes, holds and cross-validates (``iwpfast.settings.SearchOptions``;
    default: its defaults).
    """
    from . import driver
    options, cluster_notes = _search_options(options)
    train, val, passes = open_parts(source, validation_fraction, validation, mapper,
                                     validation_mapper)
    kw = driver_kw(engine, progress, chunk_rows, feature_bound, checkpoint, checkpoint_every,
                    resume, overwrite)
    by_name = {pt.name: pt for pt in points}
    configs: dict = {}          # made once (the scan and the race's rungs both ask)

    def heads_of(names):
        for n in names:
            if n not in configs:
                configs[n] = make_config(by_name[n], pass_rows(train))
        return [driver.Head(n, configs[n], list(features), label, sample_weight=sample_weight)
                for n in names]

    held = hold_validation(train, val, validation, options)
    race = (make_race(train, held, by_name, heads_of, kw, options, features=features, label=label,
                  loss=loss, noise=noise, sample_weight=sample_weight, engine=engine)
            if prune else None)
    if race is not None and "chunk_rows" not in kw:
        kw["chunk_rows"] = race.chunk_rows(len(features))
    if race is None and cross_validates(train, validation, kw, options):
        # small data: every row scored once, the choice refit on all of them (sgd/crossval.py)
        return tune_folds(train, points, make_config, kw, options=options,
                          score_kw=dict(features=features, label=label, loss=loss, noise=noise,
                                        sample_weight=sample_weight, engine=engine))
    result, active, diverged, repeats = scan_heads(train, heads_of, [pt.name for pt in points], kw,
                                              race=race)
    pruned = result.pruned
    scoring, saved = scoring_source(val, held, scored_columns(features, label, sample_weight))
    passes += repeats - saved
    with blas_single_threaded():
        scored, cov_active = score_heads(scoring, features, label, active, result.states,
                                         result.configs, loss=loss, noise=noise,
                                         sample_weight=sample_weight, engine=engine,
                                         width=len(points))
    index = {n: i for i, n in enumerate(active)}
    estimates, chosen, rule, notes, edge = choose(
        points, [pt.name for pt in points], dict(zip(active, scored, strict=True)),
        lambda a, b: cov_active[index[a], index[b]], pruned)
    notes += race_notes(race, pruned, len(points), int(result.n_rows))
    notes += diverged_notes(diverged, repeats) + cluster_notes
    n_val = max((e.n_rows for e in estimates), default=0)
    return TuningResult(points=list(points), estimates=estimates, states=result.states,
                        configs=result.configs, telemetry=result.telemetry, chosen=chosen,
                        rule=rule, n_train=int(result.n_rows), n_validation=int(n_val),
                        passes=passes, head_updates_per_row=len(points), notes=notes,
                        pruned=pruned, edge=edge)


def tune_stream_classes(source, features: Sequence[str], label: str, points: Sequence[GridPoint],
                        make_configs: Callable[[GridPoint, int | None], list], n_classes: int, *,
                        loss: str, validation_fraction: float = VALIDATION_FRACTION,
                        validation=None, mapper=None, validation_mapper=None,
                        engine: str = "numba", progress=True, chunk_rows=None, feature_bound=None,
                        noise=None, label_table=None, checkpoint=None, checkpoint_every=None,
                        resume: bool = False, overwrite: bool = False,
                        sample_weight: str | None = None, prune: bool = True,
                        options: SearchOptions | None = None) -> list[TuningResult]:
    """``tune_stream`` for k > 2 classes learned one-vs-rest: one TuningResult per class.

    Each class's head is a two-class problem (class c against the rest), so every (grid point,
    class) pair is one head: ``make_configs(point, n_train)`` gives the k one-vs-rest configs of a
    point (config c with ``label_class = c``; the label column holds class indices).  All k x G
    heads are trained in the same scan of the training part (the driver runs them as one k-head
    kernel unit: every batch is read once) and scored in the same read of the validation part,
    each on its own binary problem with the k-ary label weights ``label_table``
    (``score_heads``).  A grid point whose head diverges on one class is dropped for every class
    (a raced scan stops its other heads at the end of that chunk, ``Race.siblings``; otherwise,
    a cluster's pass included, they train to the end of the same scan and are dropped then).
    Then every class chooses its own point by ``select`` (the same standard-error rule, with
    the paired covariance of that class's heads): the one-vs-rest risk is a sum over the heads
    of risks that depend on one head each, so choosing per class minimizes it too.  Result c
    holds class c's estimates, states and configs keyed by the point names
    (``TuningResult.table`` works as for two classes); ``passes`` and ``n_train`` are the
    shared scan's, ``head_updates_per_row`` is k x G.
    ``sample_weight``, ``prune``: as for ``tune_stream`` (a class's heads are compared only with
    each other: the covariance between classes is infinite, so the rule never crosses them, and
    each class keeps at least its best head).  ``options``: as for ``tune_stream``.
    """
    from . import driver
    options, cluster_notes = _search_options(options)
    k = int(n_classes)
    train, val, passes = open_parts(source, validation_fraction, validation, mapper,
                                     validation_mapper)
    kw = driver_kw(engine, progress, chunk_rows, feature_bound, checkpoint, checkpoint_every,
                    resume, overwrite)
    # class-major: one class's heads are adjacent (its scores are one slice of the product)
    owner = {class_head_name(pt, c): (pt, c) for c in range(k) for pt in points}
    cache: dict = {}

    def heads_of(names):
        heads = []
        for n in names:
            pt, c = owner[n]
            if pt.name not in cache:
                cache[pt.name] = make_configs(pt, pass_rows(train))
            heads.append(driver.Head(n, cache[pt.name][c], list(features), label,
                                     sample_weight=sample_weight))
        return heads

    # a step that makes one class's head diverge is too large for these data: the point is
    # dropped for every class, within the same scan
    held = hold_validation(train, val, validation, options)
    race = (make_race(train, held, {n: pt for n, (pt, _) in owner.items()}, heads_of, kw, options,
                  groups={n: c for n, (_, c) in owner.items()}, features=features, label=label,
                  loss=loss, noise=noise,
                  label_table=label_table, sample_weight=sample_weight, engine=engine)
            if prune else None)
    def siblings(name):
        return [class_head_name(owner[name][0], c) for c in range(k)]

    if race is not None:
        race.siblings = siblings
        if "chunk_rows" not in kw:
            kw["chunk_rows"] = race.chunk_rows(len(features))
    if race is None and cross_validates(train, validation, kw, options):
        # small data: as tune_stream (sgd/crossval.py)
        return tune_folds_classes(train, points, make_configs, k, kw, options=options,
                                  score_kw=dict(features=features, label=label, loss=loss,
                                                noise=noise, label_table=label_table,
                                                sample_weight=sample_weight, engine=engine))
    result, active, diverged, repeats = scan_heads(train, heads_of, list(owner), kw,
                                              siblings=siblings, race=race)
    all_pruned = result.pruned
    scoring, saved = scoring_source(val, held, scored_columns(features, label, sample_weight))
    passes += repeats - saved
    with blas_single_threaded():
        scored, cov_active = score_heads(scoring, features, label, active, result.states,
                                         result.configs, loss=loss, noise=noise,
                                         label_table=label_table, sample_weight=sample_weight,
                                         engine=engine, width=len(points))
    by_name = dict(zip(active, scored, strict=True))
    index = {n: i for i, n in enumerate(active)}
    results = []
    for c in range(k):
        names = [class_head_name(pt, c) for pt in points]
        estimates, chosen, rule, notes, edge = choose(points, names, by_name,
                                                 lambda a, b: cov_active[index[a], index[b]],
                                                 all_pruned)
        pruned = {pt.name: all_pruned[n] for pt, n in zip(points, names, strict=True)
                  if n in all_pruned}
        notes += race_notes(race, pruned, len(points), int(result.n_rows))
        notes += diverged_notes([owner[n][0].name for n in diverged if owner[n][1] == c],
                                 repeats, points=True) + cluster_notes
        kept = {pt.name: n for pt, n in zip(points, names, strict=True) if n in result.states}
        results.append(TuningResult(
            points=list(points), estimates=estimates,
            states={p: result.states[n] for p, n in kept.items()},
            configs={p: result.configs[n] for p, n in kept.items()},
            telemetry={p: result.telemetry.get(n, {}) for p, n in kept.items()},
            chosen=chosen, rule=rule, n_train=int(result.n_rows),
            n_validation=int(max((e.n_rows for e in estimates), default=0)), passes=passes,
            head_updates_per_row=k * len(points), notes=notes, pruned=pruned, edge=edge))
    return results
