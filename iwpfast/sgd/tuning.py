"""Hyper-parameters by private validation: a grid of heads in one scan, scored on a private hold-out.

No clean data is needed.  ``tune_stream`` trains every (alpha, learning rate) pair of a grid as one
head of the streaming driver, all in the same scan of the training part of a release, then scores
every head on a private validation part with the unbiased private risk (the IWP loss, whose mean
over the release noise is the clean risk; ``iwpfast.estimates``), drops heads whose estimate is not
reliable, and picks one by the standard-error rule (``select``: half a paired SE).
docs/tuning.md derives the default grid (``default_grid``) and states the cost.

The validation part (``validation_fraction`` f of a stream, ``iwpfast.sgd.split.make_split``: two
``iwpfast.io.views.PartSource`` views of the source): the rows are cut
into blocks of ``block_rows`` consecutive rows and every m-th block (m = round(1/f), the last of
each group of m) is held out.  Blocks spread the hold-out over the whole file (a file sorted by,
say, state is not validated on its last state only) while every piece stays a zero-copy slice.
The split depends only on the row numbers: the same data always splits the same way.

Cost: one read of the data (each training row updates every live head: k heads cost k kernel
updates per row, the reading and decoding is shared; ``_Race`` halves the grid after 1/32,
1/16, 1/8 and 1/4 of the rows, docs/tuning.md "Successive halving").  The training scan copies
the validation blocks it passes over (``iwpfast.io.views.HeldRows``, up to
``SearchOptions.held_validation_bytes``) and the heads are scored from them (``iwpfast.sgd.scoring``); a
larger hold-out is read again (a Parquet row group holds both parts: that read decodes the whole
file).  A head that diverges is left out and the scan goes on (``_scan``).  With a separate
validation release the scoring reads that release.
"""
from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..exceptions import NumericalWarning
from ..settings import SearchOptions
from .grid import (  # noqa: F401  (the grid's names: also reached here)
    ALPHA_MULTIPLIERS,
    STEP_MULTIPLIERS,
    ColumnNoise,
    GridPoint,
    column_noise,
    default_grid,
    edge_note,
    grid_centre,
    grid_edge,
    step_scale,
)
from .scoring import (  # noqa: F401  (HeadScorer, score_heads: also reached here)
    HeadScorer,
    _blas_single_threaded,
    _scored_columns,
    score_heads,
    warm_scoring,
)
from .split import (  # noqa: F401  (the split's names: also reached here)
    _block_rows,
    _open_parts,
    _scoring_source,
    _split_counts,
    make_split,
    pass_rows,
    validation_period,
    validation_rows,
)
from .state import HeadConfig

#: default share of a stream held out for validation
VALIDATION_FRACTION = 0.1
#: below this many validation rows "auto" does not validate (the derived grid's centre is used)
MIN_VALIDATION_ROWS = 30
#: the variance cap "auto" uses for IWP heads when none is given (sigma^2 |theta|^2 <= 2)
AUTO_VARIANCE_CAP = 2.0
#: a pruning rung is taken only when the chunk reaching it ends before this share of the rows
#: after the rung (the rungs' rows and sizes: ``iwpfast.settings.SearchOptions``)
PRUNE_LATEST = 0.5
#: why a head was pruned (its estimate's warning and the tuning notes)
PRUNE_REASON = ("successive halving: not among the best third of its class's live heads by "
                "interim private risk, the last place going to the best head of the class's "
                "largest alpha")

#: the phrases of the notes on routine events of a search (heads pruned, heads diverged, heads
#: left out for an unreliable estimate, a cluster's search): the estimator logs those notes
#: (``routine_note``); the others ask the user to act and are warnings
PRUNED_EARLY = "heads pruned early"
DIVERGED_DROPPED = "diverged and were dropped"
POINTS_DIVERGED = "diverged on some class's head and were dropped for every class"
UNRELIABLE_DISCARDED = "heads discarded: their private risk is unreliable"
ON_CLUSTER = "the passes ran on a cluster's runner"
ROUTINE_PHRASES = (PRUNED_EARLY, DIVERGED_DROPPED, POINTS_DIVERGED, UNRELIABLE_DISCARDED,
                   ON_CLUSTER)


def routine_note(note: str) -> bool:
    """Whether a tuning note reports a routine event of the search (logged, not warned)."""
    return any(phrase in note for phrase in ROUTINE_PHRASES)


# ------------------------------------------------------------------------------ scoring + choice
@dataclass
class TuningResult:
    """What ``tune_stream`` did: the grid, every head's private validation risk, the choice."""

    points: list[GridPoint]
    estimates: list            # RiskEstimate per point
    states: dict               # head name -> HeadState
    configs: dict              # head name -> HeadConfig
    telemetry: dict            # head name -> dict
    chosen: int                # index into points
    rule: str
    n_train: int
    n_validation: int
    passes: float              # reads of the data, training + validation
    head_updates_per_row: int
    notes: list = field(default_factory=list)
    pruned: dict = field(default_factory=dict)     # head name -> training row it stopped at
    edge: str | None = None    # where the chosen point sits on the grid's edge (``grid_edge``)
    folds: int = 0             # cross-validated over this many folds (sgd/crossval.py); 0: one split

    def table(self) -> dict:
        """Column-wise table (``pandas.DataFrame(model.tuning_)`` shows it)."""
        cols: dict[str, list] = {k: [] for k in ("alpha", "learning_rate", "risk", "stderr", "reliable",
                                "effective_rows", "noise_energy", "capped", "on_sphere",
                                "pruned_at_row", "chosen")}
        for i, (pt, est) in enumerate(zip(self.points, self.estimates, strict=True)):
            tel = self.telemetry.get(pt.name, {})
            cols["alpha"].append(pt.alpha)
            cols["learning_rate"].append(pt.learning_rate)
            cols["risk"].append(est.risk)
            cols["stderr"].append(est.stderr)
            cols["reliable"].append(bool(est.reliable))
            cols["effective_rows"].append(est.effective_rows)
            cols["noise_energy"].append(math.nan if pt.name in self.pruned else est.noise_energy)
            cols["capped"].append(bool(tel.get("capped", False)))
            cols["on_sphere"].append(bool(tel.get("on_sphere", False)))
            cols["pruned_at_row"].append(self.pruned.get(pt.name))
            cols["chosen"].append(i == self.chosen)
        return cols


#: the standard-error rule's multiplier m: candidates lie within m paired standard errors of the
#: best head (``select``).  Half, not the classic one: on bench/real_tables.py's small hold-outs
#: (fair, label-only: 440 validation rows) one paired SE (up to 0.032) hid clean risks up to 0.055
#: worse, the largest alpha within it cost 0.0074 accuracy (10 seeds, SE 0.0042), and no table
#: or release kind lost more than one SE by the half (docs/tuning.md "The final choice")
SE_RULE_MULTIPLIER = 0.5
#: the rule's name in ``tuning_["rule"]``
SE_RULE = f"{SE_RULE_MULTIPLIER:g} standard error (paired)"


def select(points: Sequence[GridPoint], estimates: Sequence,
           covariance: np.ndarray | None = None, n_pruned: int = 0,
           n_diverged: int = 0) -> tuple[int, str, list[str]]:
    """The standard-error rule over reliable heads, with paired standard errors (docs/tuning.md).

    best = the reliable head with the lowest estimated risk.  Every head is scored on the same
    validation rows, so the difference of two estimates has the paired standard error
    se_j = sqrt(C_jj + C_bb - 2 C_jb) (``covariance``: the estimates' covariance; without it, best's
    own standard error).  Candidates: reliable heads with risk_j - risk_best <= m se_j
    (m = ``SE_RULE_MULTIPLIER``), heads the hold-out cannot tell from the best; among them the
    largest alpha (the most regularized, the simplest model), then the lowest estimate.  Without
    any reliable head: among heads whose estimate is not made heavy-tailed by the noise (too few
    rows, or a few rows dominating), the lowest estimate + standard error; if none, the smallest
    sigma^2 |theta|^2; with a note.
    """
    notes = []
    reliable = [i for i, e in enumerate(estimates) if e.reliable and math.isfinite(e.risk)]
    if not reliable:
        # heads whose estimate is not heavy-tailed by the noise (only too few rows, or a few rows
        # dominating): the lowest estimate + its standard error; else the smallest sigma^2|theta|^2
        light = [j for j, e in enumerate(estimates)
                 if math.isfinite(e.risk) and math.isfinite(e.stderr)
                 and (e.noise_energy <= 0.0
                      or math.exp(min(e.noise_energy, 700.0)) * 100 <= getattr(e, "n_rows", 0))]
        if light:
            i = min(light, key=lambda j: (estimates[j].risk + estimates[j].stderr, -points[j].alpha))
            rule = "fallback: lowest estimate + standard error"
        else:
            i = min(range(len(points)), key=lambda j: (estimates[j].noise_energy, -points[j].alpha))
            rule = "fallback: smallest sigma^2|theta|^2"
        notes.append("no head's private validation risk is reliable (see tuning_); chose by "
                     f"{rule.split(': ')[1]}. Release more rows, or use a larger hold-out.")
        return i, rule, notes
    best = min(reliable, key=lambda j: estimates[j].risk)

    def se_diff(j):
        if covariance is None:
            return estimates[best].stderr
        c = covariance
        return math.sqrt(max(c[j, j] + c[best, best] - 2.0 * c[j, best], 0.0))

    cand = [j for j in reliable
            if estimates[j].risk - estimates[best].risk <= SE_RULE_MULTIPLIER * se_diff(j)]
    chosen = max(cand, key=lambda j: (points[j].alpha, -estimates[j].risk))
    # ``n_pruned`` heads stopped mid-scan (``_Race``) and ``n_diverged`` ones are not
    # candidates, but not for being unreliable (a note of their own says they diverged)
    dropped = len(points) - len(reliable) - n_pruned - n_diverged
    if dropped:
        notes.append(f"{dropped} of {len(points)} {UNRELIABLE_DISCARDED}")
    return chosen, SE_RULE, notes


def _hold_validation(train, val, validation, options: SearchOptions):
    """A ``HeldRows`` for the validation rows the training scan passes over (a split of one
    source, ``options.hold_validation``; at most ``options.held_validation_bytes``), or None."""
    from ..io.views import HeldRows, PartSource
    if (validation is not None or not options.hold_validation
            or not isinstance(train, PartSource) or train.period is None):
        return None
    if not train.rereadable:
        # a stream read once: its validation rows can only be held (or the fit stops, saying so)
        train.hold = HeldRows(val.num_rows, options.held_validation_bytes, one_shot=True,
                              description=train.inner.description)
        return train.hold
    if val.num_rows is None:
        return None
    train.hold = HeldRows(val.num_rows, options.held_validation_bytes)
    return train.hold


class _Race:
    """Successive halving of a tuning grid on the interleaved hold-out (``fit_stream``'s
    ``race``).

    After each share ``options.prune_at`` of the training rows (a rung with at least
    ``options.prune_min_rows`` validation rows behind it), every live head is scored with its
    current theta on the validation rows the scan has passed (held in memory, ``HeldRows``) with
    the same unbiased private risk as the final choice; each group's (class's) live heads are
    ranked, reliable ones first by interim risk, and the best ``options.halving_keep`` of them go
    on (at least ``options.halving_min``).  The final choice is still ``select`` over the
    survivors' final models on the whole hold-out (docs/tuning.md "Successive halving").
    The rows a rung uses depend only on the row numbers (the blocks before the rung's group),
    so a fit prunes the same heads every time.  ``groups``: head name -> its group (k classes:
    its class; heads of different groups are never compared)."""

    def __init__(self, points: dict, held, period: int, block: int, n_train: int,
                 score: Callable, groups: dict | None = None,
                 options: SearchOptions | None = None):
        self.points, self.held, self.period, self.block = points, held, period, block
        self.score, self.n_train = score, int(n_train)
        self.groups = groups or {}
        self.options = options = SearchOptions() if options is None else options
        #: name -> the heads dropped with it when it diverges (k classes: its grid point's)
        self.siblings: Callable[[str], list[str]] | None = None
        self.last_row = 0
        self.targets = [max(1, math.ceil(f * n_train))
                        for f in sorted(options.prune_at) if 0 < f < 1]
        rows = sorted(set(self.targets))
        self.rows = [r for r in rows if self.validation_rows(r) >= options.prune_min_rows]

    def validation_rows(self, row: int) -> int:
        """The validation rows that precede training row ``row`` (those of the groups of blocks
        before its group): held by the time the scan has trained on ``row`` rows."""
        if row <= 0:
            return 0
        group = (row - 1) // self.block // (self.period - 1)
        return group * self.block if self.held.n_rows is None else min(self.held.n_rows,
                                                                       group * self.block)

    def chunk_rows(self, n_features: int) -> int:
        """Rows per chunk for a raced scan (it sets the rungs' rows too): the training rows of
        one group of blocks, (period - 1) x block, or the largest divisor of them within the
        reader's default bounds for rows of ``n_features`` float64 (a whole number of groups on
        small files).  The training view hands out each group's training blocks as one
        zero-copy slice of a decoded batch, so such a chunk is that slice; a chunk across two
        of them was copied (``bench/default_cost.py``'s release: 27 of 28 chunks, 145 MB a
        pass, a third of the reading's CPU).  Each rung then moves to the chunk end nearest its
        share of the rows (a rung is taken at a chunk's end), after the previous rung's and with
        ``options.prune_min_rows`` validation rows behind it (else a later one)."""
        from ..io.reader import MIN_DEFAULT_CHUNK_ROWS, default_chunk_rows
        group = (self.period - 1) * self.block
        cap = default_chunk_rows(8 * (int(n_features) + 1))
        if group < MIN_DEFAULT_CHUNK_ROWS:
            chunk = min(cap, group * -(-MIN_DEFAULT_CHUNK_ROWS // group))
        else:
            chunk = next(group // d for d in range(1, group + 1)
                         if group % d == 0 and group // d <= cap)
        rows: list[int] = []
        for target in sorted(self.targets):
            if self.validation_rows(target) < self.options.prune_min_rows:
                continue                # as without a race's chunks: too early for any rung
            row = max(round(target / chunk), 1 + (rows[-1] // chunk if rows else 0)) * chunk
            while self.validation_rows(row) < self.options.prune_min_rows:
                row += chunk
            if row < self.n_train:
                rows.append(row)
        self.rows = rows
        return int(chunk)

    def prune(self, row: int, alive: list[str], states: dict) -> list[str]:
        target = max((r for r in self.rows if r <= row), default=row)
        # the rungs this call takes (a chunk can pass several): halving applies once for each
        passed = max(1, sum(1 for r in self.rows if self.last_row < r <= row))
        self.last_row = row
        if row - target > PRUNE_LATEST * (self.n_train - target):
            # a rung is taken at the end of the chunk reaching it: with chunks that are a large
            # share of the rows it can come too late to save what its scoring costs
            return []
        if not any(len(g) > self.options.halving_min for g in self._grouped(alive).values()):
            return []                  # nothing to halve: no scoring
        n_val = self.validation_rows(row)
        estimates, _ = self.score(n_val, alive, states)
        if estimates is None:
            return []
        reliable = [i for i, e in enumerate(estimates) if e.reliable and math.isfinite(e.risk)]
        return self._halve(alive, estimates, reliable, self.options.halving_keep ** passed)

    def _grouped(self, alive: list[str]) -> dict:
        grouped: dict = {}
        for i, name in enumerate(alive):
            grouped.setdefault(self.groups.get(name), []).append(i)
        return grouped

    def _halve(self, alive, estimates, reliable, share: float) -> list[str]:
        """Successive halving: in each group keep the best ``share`` (``halving_keep`` per rung
        passed, at least ``halving_min``): reliable heads by interim risk, then the
        unreliable ones (an interim estimate can be unreliable on a rung's few rows and recover
        on the whole hold-out; they go last, by the smaller noise energy).  The best head of the
        group's largest alpha takes the last of those places when it has none of its own."""
        ok = set(reliable)
        out = []
        for members in self._grouped(alive).values():
            keep = max(self.options.halving_min, math.ceil(share * len(members) - 1e-9))
            if keep >= len(members):
                continue
            ranked = sorted(members, key=lambda i: (
                (0, estimates[i].risk) if i in ok
                else (1, estimates[i].noise_energy if math.isfinite(estimates[i].noise_energy)
                      else math.inf), i))
            kept = ranked[:keep]
            # the most regularized alpha keeps its best head: the standard-error rule prefers
            # it wherever the hold-out cannot tell it from the best, and with private labels it
            # is the head least exposed to a drifting intercept (docs/tuning.md).  In the place
            # of the last kept head, not beside it: a third survivor per group made a third of a
            # race's head updates (docs/tuning.md "What it costs")
            top = max(self.points[alive[i]].alpha for i in members)
            firm = next(i for i in ranked if self.points[alive[i]].alpha == top)
            if firm not in kept:
                kept[-1] = firm
            out += [alive[i] for i in ranked if i not in kept]
        return out


def _race(train, held, points: dict, heads_of, kw: dict, options: SearchOptions,
          groups: dict | None = None, **score_kw):
    """The ``_Race`` of a tuning scan (``points``: head name -> its GridPoint; ``score_kw``:
    ``score_heads``'s features, label, loss, noise, sample_weight, engine[, label_table]), or
    None (no held hold-out, unknown length, a checkpoint, no rungs in ``options``, or too few
    validation rows for any rung)."""
    n_train = pass_rows(train)
    if held is None or not options.prune_at or n_train is None or "checkpoint" in kw:
        return None
    from .scoring import SCORE_KERNEL_MIN_VALUES
    columns = _scored_columns(score_kw["features"], score_kw["label"], score_kw["sample_weight"])
    configs: dict = {}
    # the rungs use the compiled scoring step whenever the final scoring of the whole grid would
    # (it is then compiled anyway; the NumPy step on a rung's few heads costs 3x more), on two
    # threads when two cores are usable (the heads' threads wait for the rung)
    expected = held.n_rows if held.n_rows is not None else (
        n_train // max(1, train.period - 1))      # a stream's: at least these
    compiled = expected * len(points) >= SCORE_KERNEL_MIN_VALUES

    def score(n_val, alive, states):
        source = held.prefix_source(columns, n_val)
        if source is None:
            return None, None
        missing = [n for n in alive if n not in configs]
        if missing:
            configs.update({h.name: h.config for h in heads_of(missing)})
        if compiled:
            return score_heads(source, heads=alive, states=states, configs=configs,
                               compiled_from=0, threads_from=0, **score_kw)
        with _blas_single_threaded():
            return score_heads(source, heads=alive, states=states, configs=configs, **score_kw)

    race = _Race(points, held, train.period, train.block, int(n_train), score,
                 groups=groups, options=options)
    return race if race.rows else None


def _race_notes(race, pruned: dict, n_points: int, n_train: int) -> list[str]:
    """What the pruning did, for the notes of a TuningResult."""
    if not pruned:
        return []
    trained = sum(pruned.values()) + (n_points - len(pruned)) * n_train
    rows = sorted(set(pruned.values()))
    rungs = ", ".join(f"{sum(1 for v in pruned.values() if v == r)} after row {r:,} "
                      f"({race.validation_rows(r):,} validation rows)" for r in rows)
    return [f"{len(pruned)} of {n_points} {PRUNED_EARLY} ({rungs}): {PRUNE_REASON}; the "
            f"scan made {trained / max(n_train, 1):.1f} head updates per row instead of "
            f"{n_points}"]


def _diverged_notes(names: list[str], repeats: int = 0, points: bool = False) -> list[str]:
    """The tuning note on the heads (k classes: the grid ``points``, dropped for every class)
    that diverged, or none."""
    if not names:
        return []
    what = (f"grid point(s) {POINTS_DIVERGED}" if points else f"head(s) {DIVERGED_DROPPED}")
    return [f"{len(names)} {what} ({', '.join(names)})"
            + (f"; the scan was repeated {repeats} time(s) without them" if repeats else "")]


def _scan(train, heads_of: Callable[[list[str]], list], names: list[str], kw: dict,
          siblings: Callable[[str], list[str]] | None = None, race=None):
    """Train the named heads in one scan of ``train``; a head that diverges is dropped (with its
    ``siblings``).  Here the scan drops it and goes on with the others (``fit_stream``'s
    ``drop_diverged``: the heads are independent, so the others keep the bits of a scan without
    it); a cluster's pass stops instead and is repeated without it (one more read each).
    Returns (result, names kept to the end, names dropped, scans repeated); the heads a
    ``race`` stopped are in ``result.pruned``, neither kept nor dropped."""
    from ..exceptions import DivergenceError
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
        try:
            with warnings.catch_warnings():
                # per-head telemetry warnings (sphere, cap) are in the table, not k times over
                warnings.simplefilter("ignore", NumericalWarning)
                result = driver.fit_stream(train, heads_of(active), **kw,
                                           **(dict(drop_diverged=True, race=race) if here
                                              else {}))
        except DivergenceError as exc:
            # a head's step was too large for the data: drop it and scan again (one more read);
            # the heads of one fused unit diverged in the same batch are dropped together
            name = getattr(exc, "head", None)
            if name is None:
                raise
            drop = dropping(getattr(exc, "heads", None) or [name])
            if name not in active or len(drop) >= len(active) \
                    or not train.rereadable:
                raise
            active = [n for n in active if n not in drop]
            diverged += [n for n in drop if n not in diverged]
            repeats += 1
            if "checkpoint" in kw:   # the grid changed: the checkpoint starts over
                kw.update(resume=False, overwrite=True)
            continue
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


def _driver_kw(engine, progress, chunk_rows, feature_bound, checkpoint, checkpoint_every, resume,
               overwrite) -> dict:
    kw = dict(progress=progress, engine=engine)
    if chunk_rows is not None:
        kw["chunk_rows"] = int(chunk_rows)
    if feature_bound is not None:
        kw["feature_bound"] = feature_bound
    if checkpoint is not None:
        kw.update(checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume,
                  overwrite=overwrite)
    return kw


def _choose(points, names: list[str], scored: dict, cov_of: Callable[[str, str], float],
            pruned: dict | None = None):
    """(estimates per point, covariance, chosen, rule, notes): the points' heads (``names[i]``
    is point i's head; a head missing from ``scored`` diverged, or was ``pruned``: {name: row})
    chosen by ``select``."""
    from ..estimates import RiskEstimate
    pruned = pruned or {}
    estimates = [scored[n] if n in scored else
                 RiskEstimate(math.nan, math.inf, 0, noise_energy=math.inf, reliable=False,
                              warnings=(f"pruned after training row {pruned[n]}: {PRUNE_REASON}.",))
                 if n in pruned else
                 RiskEstimate(math.nan, math.inf, 0, reliable=False,
                              warnings=("the head diverged (theta became non-finite).",))
                 for n in names]
    k = len(points)
    cov = np.full((k, k), np.inf)
    for i, ni in enumerate(names):
        for j, nj in enumerate(names):
            if ni in scored and nj in scored:
                cov[i, j] = cov_of(ni, nj)
    chosen, rule, notes = select(points, estimates, cov,
                                 n_pruned=sum(1 for n in names if n in pruned),
                                 n_diverged=sum(1 for n in names
                                                if n not in scored and n not in pruned))
    # a fallback's choice (no reliable head) says nothing about where the good region lies
    edge = grid_edge(points, chosen) if rule == SE_RULE else None
    if edge:
        notes.append(edge_note(edge, points[chosen]))
    return estimates, chosen, rule, notes, edge


def _search_options(options: SearchOptions | None) -> tuple[SearchOptions, list[str]]:
    """The options a search follows and the note saying where they differ from those asked:
    inside ``driver.streams_on`` (a cluster's runner) the passes run on the shards, so the
    search holds no rows here, takes no halving rungs and does not cross-validate
    (``SearchOptions.on_cluster``)."""
    from .driver import stream_runner
    options = SearchOptions() if options is None else options
    if stream_runner() is None:
        return options, []
    return options.on_cluster(), [f"{ON_CLUSTER}: one hold-out scored on the shards, without "
                                  "halving rungs or cross-validation"]


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
    prune: stop hopeless heads early on the validation rows the scan has passed (``_Race``; only
    when the hold-out is held in memory, the length is known and there is no checkpoint).
    options: how the search prunes, holds and cross-validates (``iwpfast.settings.SearchOptions``;
    default: its defaults).
    """
    from . import driver
    options, cluster_notes = _search_options(options)
    train, val, passes = _open_parts(source, validation_fraction, validation, mapper,
                                     validation_mapper)
    kw = _driver_kw(engine, progress, chunk_rows, feature_bound, checkpoint, checkpoint_every,
                    resume, overwrite)
    by_name = {pt.name: pt for pt in points}
    configs: dict = {}          # made once (the scan and the race's rungs both ask)

    def heads_of(names):
        for n in names:
            if n not in configs:
                configs[n] = make_config(by_name[n], pass_rows(train))
        return [driver.Head(n, configs[n], list(features), label, sample_weight=sample_weight)
                for n in names]

    held = _hold_validation(train, val, validation, options)
    race = (_race(train, held, by_name, heads_of, kw, options, features=features, label=label,
                  loss=loss, noise=noise, sample_weight=sample_weight, engine=engine)
            if prune else None)
    if race is not None and "chunk_rows" not in kw:
        kw["chunk_rows"] = race.chunk_rows(len(features))
    from .crossval import cross_validates, tune_folds
    if race is None and cross_validates(train, validation, kw, options):
        # small data: every row scored once, the choice refit on all of them (sgd/crossval.py)
        return tune_folds(train, points, make_config, kw, tuning=sys.modules[__name__],
                          options=options,
                          score_kw=dict(features=features, label=label, loss=loss, noise=noise,
                                        sample_weight=sample_weight, engine=engine))
    result, active, diverged, repeats = _scan(train, heads_of, [pt.name for pt in points], kw,
                                              race=race)
    pruned = result.pruned
    scoring, saved = _scoring_source(val, held, _scored_columns(features, label, sample_weight))
    passes += repeats - saved
    with _blas_single_threaded():
        scored, cov_active = score_heads(scoring, features, label, active, result.states,
                                         result.configs, loss=loss, noise=noise,
                                         sample_weight=sample_weight, engine=engine,
                                         width=len(points))
    index = {n: i for i, n in enumerate(active)}
    estimates, chosen, rule, notes, edge = _choose(
        points, [pt.name for pt in points], dict(zip(active, scored, strict=True)),
        lambda a, b: cov_active[index[a], index[b]], pruned)
    notes += _race_notes(race, pruned, len(points), int(result.n_rows))
    notes += _diverged_notes(diverged, repeats) + cluster_notes
    n_val = max((e.n_rows for e in estimates), default=0)
    return TuningResult(points=list(points), estimates=estimates, states=result.states,
                        configs=result.configs, telemetry=result.telemetry, chosen=chosen,
                        rule=rule, n_train=int(result.n_rows), n_validation=int(n_val),
                        passes=passes, head_updates_per_row=len(points), notes=notes,
                        pruned=pruned, edge=edge)


def class_head_name(point: GridPoint, c: int) -> str:
    """The name of class c's one-vs-rest head at a grid point in ``tune_stream_classes``."""
    return f"{point.name},class={c}"


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
    (a raced scan stops its other heads at the end of that chunk, ``_Race.siblings``; a
    cluster's pass is repeated once per such point).  Then every class chooses its own point by
    ``select`` (the same standard-error rule, with the paired covariance of that class's
    heads): the one-vs-rest risk is a sum over the heads of risks that depend on one head each,
    so choosing per class minimizes it too.  Result c holds class c's estimates, states and
    configs keyed by the point names (``TuningResult.table`` works as for two classes);
    ``passes`` and ``n_train`` are the shared scan's, ``head_updates_per_row`` is k x G.
    ``sample_weight``, ``prune``: as for ``tune_stream`` (a class's heads are compared only with
    each other: the covariance between classes is infinite, so the rule never crosses them, and
    each class keeps at least its best head).  ``options``: as for ``tune_stream``.
    """
    from . import driver
    options, cluster_notes = _search_options(options)
    k = int(n_classes)
    train, val, passes = _open_parts(source, validation_fraction, validation, mapper,
                                     validation_mapper)
    kw = _driver_kw(engine, progress, chunk_rows, feature_bound, checkpoint, checkpoint_every,
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
    # dropped for every class (one repeated scan per point, not per head)
    held = _hold_validation(train, val, validation, options)
    race = (_race(train, held, {n: pt for n, (pt, _) in owner.items()}, heads_of, kw, options,
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
    from .crossval import cross_validates, tune_folds_classes
    if race is None and cross_validates(train, validation, kw, options):
        # small data: as tune_stream (sgd/crossval.py)
        return tune_folds_classes(train, points, make_configs, k, kw,
                                  tuning=sys.modules[__name__], options=options,
                                  score_kw=dict(features=features, label=label, loss=loss,
                                                noise=noise, label_table=label_table,
                                                sample_weight=sample_weight, engine=engine))
    result, active, diverged, repeats = _scan(train, heads_of, list(owner), kw,
                                              siblings=siblings, race=race)
    all_pruned = result.pruned
    scoring, saved = _scoring_source(val, held, _scored_columns(features, label, sample_weight))
    passes += repeats - saved
    with _blas_single_threaded():
        scored, cov_active = score_heads(scoring, features, label, active, result.states,
                                         result.configs, loss=loss, noise=noise,
                                         label_table=label_table, sample_weight=sample_weight,
                                         engine=engine, width=len(points))
    by_name = dict(zip(active, scored, strict=True))
    index = {n: i for i, n in enumerate(active)}
    results = []
    for c in range(k):
        names = [class_head_name(pt, c) for pt in points]
        estimates, chosen, rule, notes, edge = _choose(points, names, by_name,
                                                 lambda a, b: cov_active[index[a], index[b]],
                                                 all_pruned)
        pruned = {pt.name: all_pruned[n] for pt, n in zip(points, names, strict=True)
                  if n in all_pruned}
        notes += _race_notes(race, pruned, len(points), int(result.n_rows))
        notes += _diverged_notes([owner[n][0].name for n in diverged if owner[n][1] == c],
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
