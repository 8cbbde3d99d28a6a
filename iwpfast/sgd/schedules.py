"""Learning-rate schedules and the defaults that need the data (radius, the paper's step).

The kernels run two schedules (``HeadConfig.schedule``): ``constant`` gamma_t = gamma0 and
``inverse`` gamma_t = gamma0 / (1 + mu gamma0 t), t = updates done before.  The third, ``paper``,
is the step of the paper's Theorem 4.4 (proof in its Appendix, "Choosing the Step-size"):

    gamma = log(max(2, mu^2 R^2 n / A)) / (mu n),   capped at 1 / (2 K),

a constant step that needs the number of updates n, so the driver resolves it once the row count
is known (``resolve_paper_schedule``).  The symbols, as the proof uses them:

- mu: strong convexity of the regularized risk (we take ``HeadConfig.mu``, else lambda = alpha);
- R: ||theta_0 - theta*||; with theta_0 = 0 and theta* inside the projection ball of radius
  ``radius`` it is at most ``radius`` (we use ||theta_0|| + radius);
- n: number of SGD updates of the single pass = ceil(rows / batch_size) (the proof counts steps);
- A: the noise part of the bound on the gradient's second moment,
  E||g||^2 <= 2K (risk - risk*) + A, with A = C^2 (4e^{eps_y}/(e^{eps_y}-1)^2
  + sigma^2 (1 + 4e^{eps_y}/(e^{eps_y}-1)^2)) where C bounds the per-example gradient;
- K: smoothness (Lipschitz constant of the gradient) of the risk.

Defaults chosen here when the user gives no A / K (``paper_constants``), for features bounded by B
in L2 and theta in the ball of radius R (so |z| <= R B):
- C = B * max_{|z| <= RB} |f'(z)|: logistic B, quadratic B (RB + 1), exponential B e^{RB},
  squared error B (RB + B_y);
- K = B^2 max_{|z| <= RB} f''(z) + lambda: logistic B^2/4, quadratic and squared error B^2,
  exponential B^2 e^{RB};
- A as above plus C^2 (the sampling variance of the clean gradient, which the paper's A omits: with
  public labels and sigma = 0 its A is 0 and the step would be log(inf)), divided by the batch size
  (a minibatch mean of B independent estimates).  sigma^2 = the largest per-feature noise variance.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..exceptions import InvalidInputError
from ..losses import loss_record
from .state import HeadConfig


def default_radius(loss: str, feature_bound: float, alpha: float,
                   target_bound: float | None = None) -> float:
    """docs/design.md section 2: ||theta*|| <= ||grad R(0)|| / lambda <= B |f'(0)| / lambda.

    B/lambda for exponential and quadratic, B/(2 lambda) for logistic, B B_y / lambda for squared
    error (|f'(0)| = |y| <= B_y).  inf when alpha = 0 (no strong convexity, no bound)."""
    slope = loss_record(loss).slope_at_0            # |f'(0)|; None: the target bound |y|
    if alpha <= 0:
        return math.inf
    if slope is None:
        if target_bound is None:
            return math.inf
        slope = float(target_bound)
    return float(feature_bound) * slope / alpha


def paper_learning_rate(mu: float, radius: float, n: int, A: float, smoothness: float) -> float:
    """gamma = log(max(2, mu^2 R^2 n / A)) / (mu n), capped at 1/(2K) (paper, Theorem 4.4)."""
    if not (mu > 0):
        raise InvalidInputError(
            f"the 'paper' schedule needs strong convexity mu > 0 (got mu={mu}); set alpha (lambda) "
            f"or mu, or use schedule='constant'")
    if not (math.isfinite(radius) and radius > 0):
        raise InvalidInputError(
            f"the 'paper' schedule needs a finite projection radius (got {radius}); pass radius")
    if int(n) < 1:
        raise InvalidInputError(f"the 'paper' schedule needs n >= 1 updates (got {n})")
    if not (A > 0) or not (smoothness > 0):
        raise InvalidInputError(
            f"the 'paper' schedule needs A > 0 and smoothness K > 0 (got A={A}, K={smoothness})")
    n = int(n)
    gamma = math.log(max(2.0, mu * mu * radius * radius * n / A)) / (mu * n)
    return min(gamma, 1.0 / (2.0 * smoothness))


def paper_constants(cfg: HeadConfig, feature_bound: float, target_bound: float | None = None,
                    radius: float | None = None) -> tuple[float, float]:
    """Default (A, K) for ``paper_learning_rate`` (formulas in the module docstring)."""
    B = float(feature_bound)
    R = float(cfg.radius if radius is None else radius)
    if not math.isfinite(R):
        raise InvalidInputError("the 'paper' schedule needs a finite radius to bound the gradient")
    zmax = R * B
    fp, fpp = loss_record(cfg.loss).derivative_bounds(
        zmax, float(1.0 if target_bound is None else target_bound))
    C2 = (B * fp) ** 2
    sigma2 = float(np.max(cfg.noise_var)) if cfg.mode == "iwp" and cfg.n_features else 0.0
    label_term = 0.0
    if cfg.mode == "iwp" and cfg.label_keep_prob is not None:
        s = float(cfg.label_keep_prob)
        eps_y = math.log(s / (1.0 - s))
        label_term = 4.0 * math.exp(eps_y) / math.expm1(eps_y) ** 2
    A = C2 * (1.0 + label_term + sigma2 * (1.0 + label_term)) / max(1, int(cfg.batch_size))
    K = B * B * fpp + float(cfg.alpha)
    return A, K


def resolve_paper_schedule(cfg: HeadConfig, n_rows: int | None, *, feature_bound: float | None,
                           target_bound: float | None = None, A: float | None = None,
                           smoothness: float | None = None,
                           theta0_norm: float = 0.0) -> HeadConfig:
    """Turn ``schedule='paper'`` into a constant step for a pass over ``n_rows`` rows."""
    if cfg.schedule != "paper":
        return cfg
    if n_rows is None:
        raise InvalidInputError(
            "the 'paper' schedule needs the row count n, which this source does not know (CSV or "
            "a RecordBatchReader); convert the data to Parquet/IPC or use schedule='constant'")
    if A is None or smoothness is None:
        if feature_bound is None:
            raise InvalidInputError(
                "the 'paper' schedule needs the feature bound B to compute its constants A and K; "
                "read a release that records feature_bound or pass paper_A and paper_smoothness")
        A0, K0 = paper_constants(cfg, feature_bound, target_bound)
        A = A0 if A is None else A
        smoothness = K0 if smoothness is None else smoothness
    mu = float(cfg.mu) if cfg.mu > 0 else float(cfg.alpha)
    n_updates = -(-int(n_rows) // int(cfg.batch_size))
    gamma = paper_learning_rate(mu, float(cfg.radius) + float(theta0_norm), n_updates, A,
                                smoothness)
    return dataclasses.replace(cfg, schedule="constant", learning_rate=gamma)
