"""Randomized response on labels: its probabilities and their inverse weights, defined once.

The release (``iwpfast.privacy``), the estimates and transforms (the NumPy spec) and the SGD
configuration (``iwpfast.sgd.state``) all take these numbers from here:

- binary randomized response keeps a ±1 label with probability ``S(eps) = 1 / (1 + e^-eps)``;
- the inverse-Bernoulli weight ``S~(eps) = 1 / (1 - e^-eps) = S / (2S - 1)`` makes
  ``S~ g(y~) + (1 - S~) g(-y~)`` unbiased for ``g(y)`` (docs/design.md section 2);
- k-ary randomized response keeps a class with ``q = e^eps / (e^eps + k - 1)`` and reports each
  other class with ``r = 1 / (e^eps + k - 1)``; a one-vs-rest head's weights of (F(z), F(-z))
  follow from (q, r) (docs/math.md), and k = 2 gives (S~, 1 - S~).

Public labels (``epsilon_y`` None or +inf) mean no label noise: S = 1, S~ = 1, weights (1, 0).

    >>> from iwpfast.label_noise import keep_probability, label_tilde, kary_probabilities
    >>> round(keep_probability(1.0), 6), round(label_tilde(1.0), 6), keep_probability(None)
    (0.731059, 1.581977, 1.0)
    >>> q, r = kary_probabilities(1.0, 3); round(q, 6), round(r, 6)
    (0.576117, 0.211942)
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

from .exceptions import InvalidInputError

__all__ = ["check_label_epsilon", "keep_probability", "label_tilde", "label_tilde_from_keep",
           "kary_probabilities", "label_weight_table", "check_classes", "debiased_class_shares",
           "balanced_class_weights", "class_weighted_table", "class_weighted_head_tables"]

MAX_CLASSES = 32767        # class indices are stored as int16


def check_label_epsilon(epsilon_y) -> float | None:
    """``epsilon_y`` as a float > 0, or None for public labels (None or +inf)."""
    if epsilon_y is None:
        return None
    fix = ("choose a label budget such as 1.0 (smaller = more private, noisier), or None for "
           "public labels (released without noise)")
    try:
        value = float(epsilon_y)
    except (TypeError, ValueError):
        raise InvalidInputError(f"epsilon_y must be a number, got {epsilon_y!r}; {fix}") from None
    if math.isinf(value) and value > 0:
        return None
    if not math.isfinite(value) or value <= 0.0:
        raise InvalidInputError(f"epsilon_y must be a finite number > 0, got {epsilon_y!r}; {fix}")
    return value


def keep_probability(epsilon_y) -> float:
    """S(eps_y) = 1 / (1 + e^-eps_y), the probability that randomized response keeps a label;
    1.0 for public labels."""
    epsilon_y = check_label_epsilon(epsilon_y)
    if epsilon_y is None:
        return 1.0
    return 1.0 / (1.0 + math.exp(-epsilon_y))


def label_tilde(epsilon_y) -> float:
    """S~(eps_y) = 1 / (1 - e^-eps_y), the inverse-Bernoulli weight; 1.0 for public labels."""
    epsilon_y = check_label_epsilon(epsilon_y)
    if epsilon_y is None:
        return 1.0
    return 1.0 / (-math.expm1(-epsilon_y))


def label_tilde_from_keep(keep_prob) -> float:
    """S~ = S / (2S - 1) from a keep probability S in (0.5, 1] (a release stores S); 1.0 for None."""
    if keep_prob is None:
        return 1.0
    s = float(keep_prob)
    if not 0.5 < s <= 1.0:
        raise InvalidInputError(f"label keep probability {keep_prob!r} must be in (0.5, 1] "
                                "(S(eps_y) = 1/(1+exp(-eps_y)) with eps_y > 0; None = public labels)")
    return s / (2.0 * s - 1.0)


def kary_probabilities(epsilon_y, n_classes: int) -> tuple[float, float]:
    """(q, r) of k-ary randomized response: keep with q = e^eps/(e^eps + k - 1), report each other
    class with r = 1/(e^eps + k - 1) (q + (k-1) r = 1).  Computed from e^-eps: no overflow.
    k = 2 gives the binary mechanism's (S, 1 - S) bit for bit."""
    epsilon_y = check_label_epsilon(epsilon_y)
    if epsilon_y is None:
        raise InvalidInputError("k-ary randomized response needs a finite epsilon_y > 0")
    k = int(n_classes)
    if k < 2:
        raise InvalidInputError(f"k-ary randomized response needs at least 2 classes, got {n_classes!r}")
    if k == 2:
        keep = keep_probability(epsilon_y)
        return keep, 1.0 - keep
    shrink = np.exp(-epsilon_y)                   # e^-eps in (0, 1)
    denominator = 1.0 + (k - 1) * shrink
    return float(1.0 / denominator), float(shrink / denominator)


def label_weight_table(epsilon_y, n_classes: int) -> tuple[float, float, float, float]:
    """Label weights of a one-vs-rest head under k-ary randomized response (docs/math.md):
    (match_z, match_minus_z, other_z, other_minus_z), the weights of (F(z), F(-z)) where the
    released class is the head's (z = u) and where it is not (z = -u):

        ((1 - r)/(q - r), -r (k - 1)/(q - r))   and   (q/(q - r), -r/(q - r)).

    k = 2 gives (S~, 1 - S~) twice, the binary inverse; public labels (1, 0) twice.
    """
    k = int(n_classes)
    if k < 2:
        raise InvalidInputError(f"n_classes={n_classes!r}: one-vs-rest needs at least 2 classes")
    if check_label_epsilon(epsilon_y) is None:
        return (1.0, 0.0, 1.0, 0.0)
    if k == 2:
        tilde = label_tilde(epsilon_y)
        return (tilde, 1.0 - tilde, tilde, 1.0 - tilde)
    q, r = kary_probabilities(epsilon_y, k)
    gap = q - r
    return ((1.0 - r) / gap, -r * (k - 1) / gap, q / gap, -r / gap)


def debiased_class_shares(counts, keep_prob=None) -> tuple[np.ndarray, np.ndarray]:
    """(shares, standard errors) of the true classes from the counts of the *released* classes.

    ``counts``: how many rows were released as each class (k >= 2, in class order; binary: the
    negative class first).  ``keep_prob``: the probability q that randomized response keeps a
    class (binary: S; k classes: q of ``kary_probabilities``); None for public labels.  With
    r = (1 - q)/(k - 1) the released shares o satisfy E[o] = (q - r) pi + r, so

        pi_hat = (o - r) / (q - r)        (binary: (mean(y~ == c) - (1 - S)) / (2S - 1))

    is unbiased: the inverse of the k x k randomized-response matrix (q - r) I + r 11^T applied
    to the observed shares (its rows sum to 1, so it maps the shares' sum 1 to 1).  Its standard
    error is that of a multinomial share divided by (q - r): sqrt(o (1 - o) / n) / (q - r).  An
    estimate may leave [0, 1] when a class is rare and the budget small; it is returned as is.
    """
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 1 or counts.size < 2 or np.any(counts < 0) or not counts.sum() > 0:
        raise InvalidInputError(f"counts={counts.tolist()!r}: pass the number of rows released as "
                                "each class (at least 2 classes, >= 0, not all 0)")
    n = float(counts.sum())
    k = counts.size
    observed = counts / n
    q = 1.0 if keep_prob is None else float(keep_prob)
    r = (1.0 - q) / (k - 1)
    if not q > r:
        raise InvalidInputError(f"keep probability {keep_prob!r} must exceed (1 - q)/(k - 1) = "
                                f"{r:g}: randomized response with eps_y > 0")
    shares = (observed - r) / (q - r)
    stderr = np.sqrt(observed * (1.0 - observed) / n) / (q - r)
    return shares, stderr


def balanced_class_weights(shares, classes=None) -> np.ndarray:
    """scikit-learn's 'balanced' weights n / (k n_c) = 1 / (k pi_c) from class shares pi (one
    per class); a share <= 0 (a class too rare for its randomized-response estimate to be
    positive) is an error naming the class."""
    shares = np.asarray(shares, dtype=np.float64)
    bad = np.flatnonzero(~(shares > 0))
    if bad.size:
        c = int(bad[0])
        name = classes[c] if classes is not None else c
        raise InvalidInputError(
            f"class_weight='balanced': the share of class {name!r} estimated from the released "
            f"labels is {shares[c]:.4g} (<= 0: the class is too rare for this label budget and "
            "number of rows); give the weights yourself, class_weight={class: weight, ...}")
    return 1.0 / (shares.size * shares)


def class_weighted_table(weights, keep_prob=None) -> tuple[float, float, float, float]:
    """The binary head's label weights (match_z, match_minus_z, other_z, other_minus_z) of the
    class-weighted risk w_+ [y = +1] f(u) + w_- [y = -1] f(-u) (``weights`` = (w_-, w_+)), from a
    released label with keep probability S (None: public labels): with S~ = S/(2S - 1),

        y~ = +1:  (w_+ S~, w_- (1 - S~)),        y~ = -1:  (w_- S~, w_+ (1 - S~)),

    each candidate true label's weight on the term f(y u) of that label (docs/math.md "Class
    weights").  Weights (1, 1) give the unweighted table (S~, 1 - S~) twice."""
    w_negative, w_positive = (float(w) for w in weights)
    tilde = label_tilde_from_keep(keep_prob)
    return (w_positive * tilde, w_negative * (1.0 - tilde),
            w_negative * tilde, w_positive * (1.0 - tilde))


def class_weighted_head_tables(table, weights) -> tuple[list, tuple]:
    """The k one-vs-rest heads' label weights of the class-weighted risk: (one 2 x 2 table per
    head, the per-class boost), from the heads' unweighted k-ary table (``label_weight_table``;
    public labels (1, 0, 1, 0)) and one weight per class.

    Head c's target w_y f(+-u_c) through the k-ary inverse gives the weight of F(z)
    w_{y~}/(q - r) - (r/(q - r)) W_same and of F(-z) -(r/(q - r)) W_other, W_same / W_other the
    weight of the candidate labels on the row's / the other side of c (docs/math.md "Class
    weights"): a per-class boost g w_{y~} (g = 1/(q - r) = table[0] - table[3]) added to the
    weight of F(z) of a row released as y~, and the table -h (w_c, W_rest, W_rest, w_c)
    (h = r/(q - r) = -table[3]).  Public labels: g = 1, h = 0."""
    gain = float(table[0] - table[3])           # 1/(q - r)
    share_weight = float(-table[3])             # r/(q - r)
    w = np.asarray(weights, dtype=np.float64)
    rest = float(w.sum()) - w
    boost = tuple(float(v) for v in gain * w)
    tables = [(-share_weight * w[c], -share_weight * rest[c],
               -share_weight * rest[c], -share_weight * w[c]) for c in range(w.size)]
    return tables, boost


def check_classes(classes) -> tuple:
    """The declared classes as a tuple of distinct Python numbers or of strings (>= 2 of them)."""
    if isinstance(classes, (str, bytes)) or not isinstance(classes, (Sequence, set, frozenset)) \
            and not hasattr(classes, "tolist"):
        raise InvalidInputError(f"classes must be a list of the label's values, got {classes!r}; "
                                "e.g. classes=['A', 'B', 'C'] (CLI: --classes A B C)")
    values = list(classes.tolist() if hasattr(classes, "tolist") else classes)
    out = []
    for value in values:
        if hasattr(value, "item") and not isinstance(value, str):
            value = value.item()                  # numpy scalars -> Python
        if isinstance(value, bool) or not isinstance(value, (str, numbers.Real)):
            raise InvalidInputError(f"classes holds {value!r} ({type(value).__name__}); classes are the "
                                    "label column's values: numbers or strings")
        if isinstance(value, numbers.Real) and not isinstance(value, str):
            if not math.isfinite(value):
                raise InvalidInputError(f"classes holds {value!r}; classes must be finite numbers or strings")
            if isinstance(value, numbers.Integral):
                value = int(value)
            else:
                number = float(value)
                value = int(number) if number.is_integer() else number
        out.append(value)
    if len(out) < 2:
        raise InvalidInputError(f"classes={out!r}: declare at least 2 classes")
    if len({type(v) is str for v in out}) > 1:
        raise InvalidInputError(f"classes={out!r} mixes numbers and strings; use the label column's type")
    if len(set(out)) != len(out):
        dup = next(v for v in out if out.count(v) > 1)
        raise InvalidInputError(f"classes={out!r} names {dup!r} twice; list each class once")
    if len(out) > MAX_CLASSES:
        raise InvalidInputError(f"{len(out)} classes: at most {MAX_CLASSES} are supported")
    return tuple(out)
