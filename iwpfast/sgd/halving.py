"""The scan stage's successive halving: hopeless heads of a grid stopped early on the hold-out.

A tuning scan (``iwpfast.sgd.grid_scan.scan_heads``) passes a ``Race`` to the driver
(``fit_stream``'s ``race``): at each rung (a share ``SearchOptions.prune_at`` of the training
rows) the live heads are scored on the validation rows the scan has passed and held
(``iwpfast.io.views.HeldRows``), with the same unbiased private risk as the final choice
(``iwpfast.sgd.scoring.score_heads``), and each class keeps its best third
(docs/tuning.md "Successive halving").  ``make_race`` builds one for a scan, or None where no
rung can be taken; ``race_notes`` says what it pruned.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from ..settings import SearchOptions
from .scoring import SCORE_KERNEL_MIN_VALUES, blas_single_threaded, score_heads, scored_columns
from .split import pass_rows

#: a pruning rung is taken only when the chunk reaching it ends before this share of the rows
#: after the rung (the rungs' rows and sizes: ``iwpfast.settings.SearchOptions``)
PRUNE_LATEST = 0.5
#: why a head was pruned (its estimate's warning and the tuning notes)
PRUNE_REASON = ("successive halving: not among the best third of its class's live heads by "
                "interim private risk, the last place going to the best head of the class's "
                "largest alpha")
#: the phrase of the note on heads pruned (a routine event: ``iwpfast.sgd.tuning.routine_note``)
PRUNED_EARLY = "heads pruned early"


class Race:
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


def make_race(train, held, points: dict, heads_of, kw: dict, options: SearchOptions,
          groups: dict | None = None, **score_kw):
    """The ``Race`` of a tuning scan (``points``: head name -> its GridPoint; ``score_kw``:
    ``score_heads``'s features, label, loss, noise, sample_weight, engine[, label_table]), or
    None (no held hold-out, unknown length, a checkpoint, no rungs in ``options``, or too few
    validation rows for any rung)."""
    n_train = pass_rows(train)
    if held is None or not options.prune_at or n_train is None or "checkpoint" in kw:
        return None
    columns = scored_columns(score_kw["features"], score_kw["label"], score_kw["sample_weight"])
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
        with blas_single_threaded():
            return score_heads(source, heads=alive, states=states, configs=configs, **score_kw)

    race = Race(points, held, train.period, train.block, int(n_train), score,
                 groups=groups, options=options)
    return race if race.rows else None


def race_notes(race, pruned: dict, n_points: int, n_train: int) -> list[str]:
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
