"""The choice stage of a search: one rule picks a candidate, one builder writes ``tuning_``.

``select`` is the paired standard-error rule over the candidates' private risk estimates
(docs/tuning.md "The final choice"); ``choose`` applies it to the heads of a grid scan (a head
that diverged or was pruned is no candidate) and says where the choice sits on the grid's edge.
``TuningResult`` is what a search did; ``tuning_table`` is the only builder of an estimator's
``tuning_``: every learner (the SGD heads, the randomized-response learner, the moment learner,
the untuned centre) writes its table through it, with the schema of docs/tuning.md
"tuning_ schema".
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .grid import GridPoint, edge_note, grid_edge
from .halving import PRUNE_REASON

#: the phrase of the note on heads left out for an unreliable estimate (a routine event:
#: ``iwpfast.sgd.tuning.routine_note``)
UNRELIABLE_DISCARDED = "heads discarded: their private risk is unreliable"

# ------------------------------------------------------------------------- the tuning_ schema
#: the learners a ``tuning_`` entry can come from (its ``learner`` column)
LEARNERS = ("sgd", "rr", "moments", "constant")
#: the columns every ``tuning_`` has, one entry per candidate (a learner adds its own columns)
ENTRY_COLUMNS = ("learner", "alpha", "learning_rate", "risk", "stderr", "reliable", "chosen")
#: the keys about the whole search every ``tuning_`` has (a learner adds its own keys)
SEARCH_KEYS = ("rule", "n_train", "n_validation", "folds", "passes", "edge", "notes")


def tuning_table(entries: dict, *, learner, rule: str, n_train: int, n_validation: int,
                 passes: float, folds: int | None, edge: str | None = None, notes=(),
                 **extra) -> dict:
    """An estimator's ``tuning_`` (docs/tuning.md "tuning_ schema"): ``entries``, columns of
    one entry per candidate (at least ``alpha``, ``learning_rate``, ``risk``, ``stderr``,
    ``reliable``, ``chosen``; a learner's own columns beside them), the ``learner`` column
    (one of ``LEARNERS``: one name for every entry, or a list), then ``SEARCH_KEYS``:
    ``rule`` (how the chosen entry was chosen), ``n_train`` and ``n_validation`` (rows),
    ``folds`` (cross-validated over this many folds; 0: one hold-out; None: nothing validated),
    ``passes`` (reads of the data), ``edge`` (where the choice sits on the grid's edge, or
    None) and ``notes``; ``extra``: a learner's own keys about the whole search (never lists:
    every list but ``notes`` is a column)."""
    n = len(entries["alpha"])
    table: dict = {"learner": [learner] * n if isinstance(learner, str) else list(learner),
             **{k: list(v) for k, v in entries.items()}}
    missing = [k for k in ENTRY_COLUMNS if k not in table]
    uneven = [k for k, v in table.items() if len(v) != n]
    unknown = set(table["learner"]) - set(LEARNERS)
    clash = (set(extra) & (set(table) | set(SEARCH_KEYS))) | {
        k for k, v in extra.items() if isinstance(v, list)}
    if missing or uneven or unknown or clash:
        raise ValueError(f"tuning_table: missing columns {missing}, columns not of {n} entries "
                         f"{uneven}, unknown learners {sorted(unknown)}, misplaced keys "
                         f"{sorted(clash)}")
    table.update(rule=rule, n_train=n_train, n_validation=n_validation, folds=folds,
                 passes=passes, edge=edge, notes=list(notes))
    table.update(extra)
    return table


def entry_columns(table: dict) -> dict:
    """The columns of a ``tuning_`` (every list but ``notes``)."""
    return {k: v for k, v in table.items() if isinstance(v, list) and k != "notes"}


# ------------------------------------------------------------------------ the rule and choice
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
    # ``n_pruned`` heads stopped mid-scan (``halving.Race``) and ``n_diverged`` ones are not
    # candidates, but not for being unreliable (a note of their own says they diverged)
    dropped = len(points) - len(reliable) - n_pruned - n_diverged
    if dropped:
        notes.append(f"{dropped} of {len(points)} {UNRELIABLE_DISCARDED}")
    return chosen, SE_RULE, notes


def choose(points, names: list[str], scored: dict, cov_of: Callable[[str, str], float],
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

    def entries(self) -> dict:
        """The columns of ``tuning_``, one entry per grid point (``tuning_table``'s entries)."""
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

    def table(self, **extra) -> dict:
        """``tuning_`` of the search (``tuning_table``, learner "sgd"; ``pandas.DataFrame`` of its
        columns shows it); ``extra``: more keys about the whole search."""
        return tuning_table(self.entries(), learner="sgd", rule=self.rule, n_train=self.n_train,
                            n_validation=self.n_validation, passes=self.passes, folds=self.folds,
                            edge=self.edge, notes=self.notes,
                            heads=self.head_updates_per_row, **extra)
