"""The choice across learners: the SGD search's model, the moment learner's and the constant,
scored on the same private rows (docs/tuning.md "The choice across learners").

Two criteria, by what the release allows to be estimated without bias and with finite variance:

- **Clean features** (clean data, label-only and public-feature releases): the debiased accuracy
  of each candidate's own model, (1/n) sum_i [w+_i 1{m_i > 0} + w-_i 1{m_i <= 0}] with m_i the
  model's margin (its intercept included) and w+- = (1 +- s y~_i)/2 the randomized-response
  inverses of 1{y = +-1} (s = 1/(2q - 1)): exact in expectation, since the label inverse is
  linear in any function of y (``accuracy_sums``, one pass).
- **Noisy features**: no function of a noisy margin estimates the clean accuracy (the indicator
  has no inverse transform; the noisy margin's accuracy is the clean one smoothed by the margin's
  noise, and it ranked the models wrongly on 6 of 6 ACS releases), and the exponential loss's
  private risk after fitting scale and intercept either has the variance e^{a^2 theta^T Sigma
  theta} (its minimum over scales picks the most underestimated) or, capped, ranked wrongly on
  2 of 2 (docs/tuning.md).  What the release does estimate exactly is a polynomial risk: each
  candidate's direction theta is scored by the quadratic risk after its margin's scale and
  intercept are fitted, 1 - E[y]^2 - Cov(y, m)^2 / Var(m) (m = theta^T x on *clean* features),
  from the debiased moments of each of the pass's groups (``calibrated_quadratic``: no pass of
  its own).  It is the margin's squared correlation with the label, so it prefers the
  least-squares direction in the population, and it scores a model fitted on every row (the
  SGD search's) in-sample: the estimator (``estimators/_across.py``) uses it only to weigh the
  SGD model against the constant where the moment search returned its constant; where that
  search found a model, the moment model is the default's on noisy features.

Standard errors are of the paired difference to the chosen candidate, by batch means (20 batches
of blocks for the accuracy, the pass's 20 groups for the quadratic risk).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: groups of blocks for the accuracy's batch-means standard errors (a multiple of the folds)
BATCHES = 20


@dataclass
class LearnerScore:
    """One candidate's ``score`` (higher is better: the debiased accuracy, or minus the
    calibrated quadratic risk), its batch values, and ``stderr``: of its difference to the
    chosen candidate's (0 for the chosen one)."""

    name: str
    score: float
    batches: np.ndarray
    stderr: float = 0.0


def accuracy_sums(runs, directions: np.ndarray, intercepts: np.ndarray, label_scale: float,
                  block_rows: int, batches: int = BATCHES,
                  max_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One pass over ``runs`` (``moment_stats._block_runs`` from row 0: fold, columns, codes,
    labels, a, b per run of a chunk's rows inside one block of ``block_rows``): per candidate
    and batch (block k in batch k % ``batches``) the sums of w+ 1{m > 0} + w- 1{m <= 0}, and the
    rows per batch.  directions (C, folds, p), intercepts (C, folds): candidate c's model for
    the rows of fold f.  Labels are +-1.  ``max_rows``: stop after about this many rows."""
    directions = np.asarray(directions, np.float64)
    intercepts = np.asarray(intercepts, np.float64)
    C = directions.shape[0]
    hits = np.zeros((C, batches))
    rows = np.zeros(batches, np.int64)
    seen = 0
    for f, columns, _codes, y, a, b in runs:
        g = (seen // int(block_rows)) % batches
        X = np.column_stack([c[a:b] for c in columns]) if columns else np.zeros((b - a, 0))
        lab = np.asarray(y[a:b], np.float64)
        m = X @ directions[:, f, :].T + intercepts[None, :, f]         # (rows, C)
        w_plus = 0.5 * (1.0 + label_scale * lab)
        w_minus = 0.5 * (1.0 - label_scale * lab)
        hits[:, g] += np.where(m > 0, w_plus[:, None], w_minus[:, None]).sum(axis=0)
        rows[g] += b - a
        seen += b - a
        if max_rows is not None and seen >= max_rows:
            break
    return hits, rows


def calibrated_quadratic(parts: list, directions: np.ndarray) -> np.ndarray:
    """(C, G): minus the quadratic risk E_g[(y - a m - b)^2] of each candidate's direction
    theta (m = theta^T x) on part g's debiased moments (``moment_stats.Moments``: z = (x, 1),
    one +-1 label), where part g lies in fold g % F and is scored with the candidate's fold
    direction ``directions[c, g % F]`` (C, F, p); the scale a and intercept b are fitted on all
    the parts' moments together (a = Cov(y, m) / Var(m), b = E[y] - a E[m]: two parameters
    fitted on every row against ratios of one part's noisy moments).  At fixed (a, b) each
    part's risk is linear in its moments, so unbiased; the pass's 20 groups give the paired
    standard errors 19 degrees of freedom.  A direction whose debiased margin variance is not
    positive on all the rows scores -inf; theta = 0 is the constant, a = 0, b = E[y]."""
    directions = np.asarray(directions, np.float64)
    C, F = directions.shape[:2]
    n_parts = len(parts)
    total = parts[0]
    for mo in parts[1:]:
        total = total + mo
    G, b = total.G, np.asarray(total.b).reshape(-1)
    out = np.empty((C, n_parts))
    for c in range(C):
        theta_all = directions[c].mean(axis=0)
        mean_m = float(theta_all @ G[-1, :-1])
        var_m = float(theta_all @ G[:-1, :-1] @ theta_all) - mean_m * mean_m
        if np.any(theta_all) and not var_m > 0:
            out[c] = -math.inf
            continue
        scale = (float(theta_all @ b[:-1]) - b[-1] * mean_m) / var_m if np.any(theta_all) else 0.0
        shift = b[-1] - scale * mean_m
        for g, mo in enumerate(parts):
            Gg, bg = mo.G, np.asarray(mo.b).reshape(-1)
            beta = np.append(scale * directions[c, g % F], shift)    # the margin a m + b over z
            out[c, g] = -(1.0 - 2.0 * float(beta @ bg) + float(beta @ Gg @ beta))
    return out


def choose(names, batch_scores: np.ndarray, weights: np.ndarray) -> tuple[int, list[LearnerScore]]:
    """(index of the chosen candidate, every candidate's ``LearnerScore``): batch_scores (C, G)
    with rows-``weights`` (G,) (batches without rows are left out); the highest weighted mean
    is chosen; each other candidate's ``stderr`` is the batch-means standard error of its
    difference to the chosen one."""
    used = np.asarray(weights) > 0
    w = np.asarray(weights, np.float64)[used]
    vals = np.asarray(batch_scores, np.float64)[:, used]
    means = np.array([float(np.dot(w, v) / w.sum()) if np.all(np.isfinite(v)) else -math.inf
                      for v in vals])
    chosen = int(np.argmax(means))
    scores = [LearnerScore(n, float(means[c]), vals[c]) for c, n in enumerate(names)]
    for c, sc in enumerate(scores):
        if c != chosen:
            d = vals[c] - vals[chosen]
            sc.stderr = (float(np.std(d, ddof=1) / math.sqrt(d.size))
                         if d.size > 1 and np.all(np.isfinite(d)) else math.nan)
    return chosen, scores
