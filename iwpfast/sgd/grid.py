"""The default grid of "auto": the (alpha, step) points a tuning scan trains, from public
quantities only (docs/tuning.md "The default grid").

alpha: the curvature scale kappa = f''(0) B^2 / p times ``ALPHA_MULTIPLIERS``; the steps: 3
decades around the noise-scaled step h = 1 / (kappa sqrt(L F G)) (``step_scale``, issue 33),
with no worst-case cap.  ``grid_edge`` says when a choice sits on the steps' edge.
(The paper's Theorem 4.4 step, the grid before issue 33, is gone: its worst-case cap held every
step far below what real tables want, docs/tuning.md.)  ``class_head_name`` names the head of a
grid point for one class of k.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..losses import loss_record

#: the steps tried for each alpha: the noise-scaled step h (``step_scale``) times these, seven
#: half-decades from 10^0.5 h down to 10^-2.5 h (3 decades: validation judges them, and a head
#: that diverges is dropped; no worst-case constant caps them)
STEP_MULTIPLIERS = tuple(10.0 ** (0.5 - 0.5 * j) for j in range(7))
#: alpha = curvature scale kappa = f''(0) B^2 / p times these
ALPHA_MULTIPLIERS = (0.001, 0.01, 0.1, 1.0)


@dataclass(frozen=True)
class ColumnNoise:
    """The per-column noise variances s_j as the grid needs them (zeros: public columns)."""

    variances: tuple

    @property
    def total(self) -> float:
        """sum_j s_j: E|x~|^2 - |x|^2, the feature factor's numerator."""
        return float(sum(self.variances))

    @property
    def largest(self) -> float:
        return max(self.variances, default=0.0)

    @property
    def all_private(self) -> bool:
        """Every column noised: only then does a cap on sum_j s_j theta_j^2 bound |theta|."""
        return bool(self.variances) and min(self.variances) > 0

    def capped_radius(self, radius: float, cap: float) -> float:
        """The radius theta can reach under the cap sum_j s_j theta_j^2 <= cap: sqrt(cap / s_min)
        when every column is noised (the least noised direction goes furthest), else the cap
        does not bound the public directions and the radius stays."""
        if self.all_private and math.isfinite(cap):
            return min(radius, math.sqrt(cap / min(self.variances)))
        return radius

    def energy_bound(self, radius: float, cap: float = math.inf) -> float:
        """The largest sum_j s_j theta_j^2 over |theta| <= radius and the cap: min(cap, s_max R^2)."""
        return min(cap, self.largest * radius * radius)


def column_noise(noise_var, n_features: int) -> ColumnNoise:
    """``noise_var`` (one variance, or one per feature) as a :class:`ColumnNoise` of n_features."""
    values = np.broadcast_to(np.asarray(noise_var, dtype=np.float64), (max(int(n_features), 1),))
    return ColumnNoise(tuple(float(v) for v in values))


@dataclass(frozen=True)
class GridPoint:
    alpha: float
    learning_rate: float

    @property
    def name(self) -> str:
        return f"alpha={self.alpha:.4g},lr={self.learning_rate:.4g}"


def step_scale(*, loss: str, alpha: float, bound: float, noise_var, label_keep_prob: float | None,
               n_features: int, radius: float, target_noise_var: float = 0.0,
               variance_cap: float = math.inf) -> float:
    """h = 1 / (kappa sqrt(L F G)): the centre of the "auto" step grid (docs/tuning.md).

    1 / kappa = p / (f''(0) B^2) is the loss-scale step: the inverse curvature of the risk at
    theta = 0 in a direction where features spread evenly over the bound (the noiseless step of
    a well-conditioned problem).  The release multiplies the gradient's second moment by
    L F G (the variance factors of ``iwpfast.planning``: the label factor 1/(2S-1)^2 or
    1 + sigma_y^2, the feature factor 1 + sum_j s_j / B^2, the exponential loss's score factor
    exp(min(cap, s_max R^2)));
    averaged SGD's step scales like one over the gradient's root mean square, hence the square
    root.  No worst-case curvature caps it: the grid spans decades around h and the hold-out
    judges them."""
    B = float(bound)
    record = loss_record(loss)
    kappa = record.f2_at_0 * B * B / max(int(n_features), 1)
    label = 1.0 if label_keep_prob is None else 1.0 / (2.0 * label_keep_prob - 1.0) ** 2
    if record.task == "regression":
        label = 1.0 + target_noise_var
    noise = column_noise(noise_var, n_features)
    feature = 1.0 + noise.total / (B * B)
    score = record.score_factor(noise.energy_bound(float(radius), variance_cap))
    return 1.0 / (kappa * math.sqrt(label * feature * score))


def default_grid(*, loss: str, n_rows: int | None, bound: float, batch_size: int, noise_var,
                 label_keep_prob: float | None, n_features: int, variance_cap: float,
                 radius_of: Callable[[float], float], alphas: Sequence[float] | None = None,
                 learning_rates: Sequence[float] | None = None,
                 target_noise_var: float = 0.0) -> list[GridPoint]:
    """The (alpha, learning rate) pairs tried by "auto" (derivation in docs/tuning.md).

    alphas (unless given): kappa x ALPHA_MULTIPLIERS with the curvature scale kappa = f''(0) B^2 / p
    (the Hessian of the risk at 0 for features spread evenly over the bound).  For each alpha, the
    steps (unless given): h x STEP_MULTIPLIERS, 3 decades around the noise-scaled step h
    (``step_scale``; R the reachable radius: the projection radius, or sqrt(cap / s_min) when
    every column is noised and the variance cap binds first).  ``noise_var``: one variance or one
    per feature (zeros for public columns, which add nothing to the feature factor; a label-only
    release has feature and score factors 1).  ``n_rows`` and ``batch_size`` do not move the
    steps: the grid is wide enough for the pass lengths one scan meets, and ``tuning_["edge"]``
    says when the choice sits on its edge.
    """
    del n_rows, batch_size          # the grid does not depend on them (kept for the signature)
    noise = column_noise(noise_var, n_features)
    if alphas is None:
        kappa = loss_record(loss).f2_at_0 * bound * bound / max(n_features, 1)
        alphas = [kappa * m for m in ALPHA_MULTIPLIERS]
    points = []
    for a in alphas:
        if learning_rates is not None:
            points += [GridPoint(float(a), float(g)) for g in learning_rates]
            continue
        R = noise.capped_radius(radius_of(float(a)), variance_cap)
        if not math.isfinite(R):
            R = bound / float(a)
        h = step_scale(loss=loss, alpha=float(a), bound=bound, noise_var=noise_var,
                       label_keep_prob=label_keep_prob, n_features=n_features, radius=R,
                       target_noise_var=target_noise_var, variance_cap=variance_cap)
        points += [GridPoint(float(a), h * m) for m in sorted(STEP_MULTIPLIERS)]
    return points


def grid_edge(points: Sequence[GridPoint], chosen: int) -> str | None:
    """"largest step" / "smallest step" when no step beyond the chosen one was tried at its
    alpha, else None.  alpha has no edge: at the largest alpha (kappa) the standard-error
    rule lands when the hold-out cannot tell the heads apart (a larger one would be chosen for
    the same reason), and below the smallest (kappa / 1000) the ridge is a thousandth of the
    data's own curvature: smaller values change little but the projection radius."""
    if not points or chosen is None or not 0 <= chosen < len(points):
        return None
    pt = points[chosen]
    steps = [q.learning_rate for q in points if q.alpha == pt.alpha]
    if len(steps) > 1 and pt.learning_rate >= max(steps):
        return "largest step"
    if len(steps) > 1 and pt.learning_rate <= min(steps):
        return "smallest step"
    return None


def edge_note(edge: str, point: GridPoint) -> str:
    """The warning of a choice on the grid's edge (``grid_edge``)."""
    return (f"the chosen head (alpha {point.alpha:.3g}, step {point.learning_rate:.3g}) sits on "
            f"the grid's edge ({edge}): the best value may lie beyond it; try a grid that extends "
            "past it (alpha=[...], learning_rate=[...]; CLI --alpha, --learning-rate)")


def grid_centre(points: Sequence[GridPoint]) -> GridPoint:
    """The derived grid's centre: the middle alpha and, for it, the middle step.  What "auto"
    runs without validating (too few rows to hold out; ``partial_fit``, which cannot)."""
    alphas = sorted({pt.alpha for pt in points})
    mid = alphas[len(alphas) // 2]
    steps = [pt for pt in points if pt.alpha == mid]
    return steps[len(steps) // 2]


def class_head_name(point: GridPoint, c: int) -> str:
    """The name of class c's one-vs-rest head at a grid point (``tune_stream_classes``)."""
    return f"{point.name},class={c}"
