"""The scan stage of a search: every head of a grid trained in one scan of the training part.

``scan_heads`` runs the named heads through ``driver.fit_stream`` together (each training row
updates every live head; the reading and decoding is shared), drops a head that diverges and
goes on with the others, and hands a ``iwpfast.sgd.halving.Race`` to the driver when one
prunes the grid.  ``hold_validation`` makes the training scan copy the validation rows it
passes over (``iwpfast.io.views.HeldRows``), so the hold-out can be scored without reading it
again (``iwpfast.sgd.split.scoring_source``).  The search (``iwpfast.sgd.tuning``) and the
cross-validation (``iwpfast.sgd.crossval``) both scan through here.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable

from ..exceptions import DivergenceError, NumericalWarning
from ..io.views import HeldRows, PartSource
from ..settings import SearchOptions

#: the phrases of the notes on heads that diverged (routine events:
#: ``iwpfast.sgd.tuning.routine_note``)
DIVERGED_DROPPED = "diverged and were dropped"
POINTS_DIVERGED = "diverged on some class's head and were dropped for every class"


def hold_validation(train, val, validation, options: SearchOptions):
    """A ``HeldRows`` for the validation rows the training scan passes over (a split of one
    source, ``options.hold_validation``; at most ``options.held_validation_bytes``), or None.
    On a cluster whose runner holds rows (``iwpfast.distributed.DaskStreams``) each training
    shard holds its own validation rows on its worker (at most that budget a shard): the
    runner's handle."""
    if (validation is not None or not options.hold_validation
            or not isinstance(train, PartSource) or train.period is None):
        return None
    from .driver import stream_runner
    runner = stream_runner()
    if runner is not None:
        if not getattr(runner, "holds_validation", False):
            return None
        train.hold = runner.hold_validation(options.held_validation_bytes)
        return train.hold
    if not train.rereadable:
        # a stream read once: its validation rows can only be held (or the fit stops, saying so)
        train.hold = HeldRows(val.num_rows, options.held_validation_bytes, one_shot=True,
                              description=train.inner.description)
        return train.hold
    if val.num_rows is None:
        return None
    train.hold = HeldRows(val.num_rows, options.held_validation_bytes)
    return train.hold


def scan_heads(train, heads_of: Callable[[list[str]], list], names: list[str], kw: dict,
          siblings: Callable[[str], list[str]] | None = None, race=None):
    """Train the named heads in one scan of ``train``; a head that diverges is dropped (with its
    ``siblings``) within that scan and the others go on (``fit_stream``'s ``drop_diverged``:
    the heads are independent, so the others keep the bits of a scan without it), on one
    machine and on a cluster's shards alike (``iwpfast.distributed.ShardedStreams``: a head
    that diverges on one shard is left out of the merge), so no scan is repeated for a
    divergence.  Returns (result, names kept to the end, names dropped, scans repeated: only
    when every head a ``race`` kept diverged later, rare); the heads a ``race`` stopped are in
    ``result.pruned``, neither kept nor dropped."""
    from . import driver
    active = list(names)
    diverged: list[str] = []
    repeats = 0

    def dropping(bad_names):
        drop: list[str] = []
        for bad in bad_names:
            for n in ([bad] if siblings is None else siblings(bad)):
                if n not in drop:
                    drop.append(n)
        return drop

    here = driver.stream_runner() is None
    while True:
        with warnings.catch_warnings():
            # per-head telemetry warnings (sphere, cap) are in the table, not k times over
            warnings.simplefilter("ignore", NumericalWarning)
            # a race (halving rungs on held rows) is for a scan on one machine
            result = driver.fit_stream(train, heads_of(active), **kw, drop_diverged=True,
                                       **(dict(race=race) if here else {}))
        # the heads a race stopped are in result.pruned, with their states; not active
        active = [n for n in active if n not in result.pruned]
        drop = dropping(sorted(result.diverged, key=active.index))
        if drop:
            if len(drop) >= len(active) and result.pruned and train.rereadable:
                # every head a race kept diverged later (with private labels the intercept can
                # drift, docs/tuning.md): the heads it stopped are trained again, to the end,
                # without a race (one more read; rare)
                diverged += [n for n in drop if n not in diverged]
                active = [n for n in names if n in result.pruned and n not in diverged]
                race, repeats = None, repeats + 1
                continue
            if len(drop) >= len(active):
                # every head diverged: the error a scan that stops would have raised (the first
                # head to diverge, its chunk's end row, the advice for its config)
                from .engine import _raise_divergence
                first = min(result.diverged, key=lambda n: (result.diverged[n], active.index(n)))
                try:
                    _raise_divergence(result.configs[first], result.diverged[first])
                except DivergenceError as exc:
                    exc.head = first
                    raise
            for n in drop:
                for table in (result.states, result.configs, result.telemetry):
                    table.pop(n, None)
            active = [n for n in active if n not in drop]
            diverged += [n for n in drop if n not in diverged]
        return result, active, diverged, repeats


def driver_kw(engine, progress, chunk_rows, feature_bound, checkpoint, checkpoint_every, resume,
               overwrite) -> dict:
    """The keywords of ``driver.fit_stream`` a tuning scan passes on (only those given)."""
    kw = dict(progress=progress, engine=engine)
    if chunk_rows is not None:
        kw["chunk_rows"] = int(chunk_rows)
    if feature_bound is not None:
        kw["feature_bound"] = feature_bound
    if checkpoint is not None:
        kw.update(checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume,
                  overwrite=overwrite)
    return kw


def diverged_notes(names: list[str], repeats: int = 0, points: bool = False) -> list[str]:
    """The tuning note on the heads (k classes: the grid ``points``, dropped for every class)
    that diverged, or none."""
    if not names:
        return []
    what = (f"grid point(s) {POINTS_DIVERGED}" if points else f"head(s) {DIVERGED_DROPPED}")
    return [f"{len(names)} {what} ({', '.join(names)})"
            + (f"; the heads the race had stopped were trained again without them ({repeats} "
               f"more scan(s))" if repeats else "")]
