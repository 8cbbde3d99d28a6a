"""The verdict on clean data: is a classifier better than predicting the majority class?

``IWPClassifier.evaluate_report(X, y)`` returns an ``EvaluationReport``; ``iwpfast evaluate``
prints it.  Accuracy alone hides a degenerate model (issue 18: 0.7639 against a majority rate of
0.7638 with 0-0.4% of the rows predicted positive), so the report sets the accuracy beside the
majority class's, gives the AUC (a ranking measure the class balance does not inflate) and the
recall of each class, and warns when the accuracy is below the majority class's (issue 33: 0.7523
against 0.7638, with 96.4% of the predictions one class, passed without a word) and when the
predictions are (nearly) one class.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

#: a share of the predictions at or above which the model is said to predict one class
ONE_CLASS_SHARE = 0.99


@dataclass(frozen=True)
class EvaluationReport:
    """A classifier's verdict on clean labelled data (``IWPClassifier.evaluate_report``).

    Attributes
    ----------
    n_rows : int
    accuracy : float
        Share of rows predicted right.
    risk : float
        Mean loss (the loss the model minimizes).
    loss : str
    classes : tuple
        The model's classes, in order.
    majority_class, majority_accuracy
        The most frequent class of these labels and the accuracy of always predicting it.
    auc : float
        Area under the ROC curve of the scores (two classes); k classes: the mean over the
        classes of the one-vs-rest AUC of each head's score (macro).  NaN when a class is
        absent from the labels (undefined).
    recall : tuple of float
        Per class (in ``classes`` order): the share of its rows predicted as it (NaN for a class
        absent from the labels).
    predicted_share, label_share : tuple of float
        Per class: the share of the predictions, and of the labels, that are that class.
    warnings : tuple of str
        One sentence per problem: the accuracy is below the majority class's; 99% or more of the
        predictions are one class; a class is never predicted.  Empty when none applies.
    class_weight : tuple of float or None
        The model's ``class_weight_`` (a model fitted with ``class_weight``), else None.
    weighted_risk : float or None
        With ``class_weight``: the class-weighted risk (1/n) sum_i w_{y_i} loss_i, the objective
        the model minimized (``risk`` stays the plain mean loss); else None.
    log_loss : float or None
        The mean of -log P(true class) of ``predict_proba`` (a model with probabilities: the
        logistic and exponential losses, a moment model), else None.
    """

    n_rows: int
    accuracy: float
    risk: float
    loss: str
    classes: tuple
    majority_class: object
    majority_accuracy: float
    auc: float
    recall: tuple
    predicted_share: tuple
    label_share: tuple
    warnings: tuple
    class_weight: tuple | None = None
    weighted_risk: float | None = None
    log_loss: float | None = None

    def to_dict(self) -> dict:
        """JSON-able: numbers as floats (NaN as None), classes as given."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float) and not math.isfinite(value):
                out[key] = None
            elif isinstance(value, tuple):
                out[key] = [None if isinstance(v, float) and not math.isfinite(v) else v
                            for v in value]
        return out

    def describe(self) -> str:
        """The verdict in lines (what ``iwpfast evaluate`` prints after its first line)."""
        names = [str(c) for c in self.classes]
        gain = self.accuracy - self.majority_accuracy
        lines = [f"majority class {self.majority_class!s}: accuracy {self.majority_accuracy:.4f} "
                 f"(the model: {self.accuracy:.4f}, {gain:+.4f})",
                 f"AUC {self.auc:.4f}" + (" (macro one-vs-rest)" if len(names) > 2 else "")
                 + "  (0.5: no better than chance at ranking the rows)"
                 + ("" if self.log_loss is None else
                    f"; log-loss {self.log_loss:.4f} (the label shares' "
                    f"{_base_log_loss(self.label_share):.4f})"),
                 "per class: " + ", ".join(
                     f"{n}: recall {r:.3f}, predicted {p:.1%} (labels {q:.1%})"
                     for n, r, p, q in zip(names, self.recall, self.predicted_share,
                                           self.label_share, strict=True))]
        if self.weighted_risk is not None and self.class_weight is not None:
            weights = ", ".join(f"{w:.4g}" for w in self.class_weight)
            lines.append(f"class-weighted {self.loss} risk {self.weighted_risk:.5f}: (1/n) sum w_y "
                         f"loss, the objective of the model's class_weight_ [{weights}] (the "
                         f"risk {self.risk:.5f} is unweighted)")
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _base_log_loss(shares) -> float:
    """The log-loss of predicting the label shares themselves (the constant model's)."""
    p = np.asarray(shares, np.float64)
    p = p[p > 0]
    return float(-np.sum(p * np.log(p)))


def log_loss(probabilities: np.ndarray, codes: np.ndarray) -> float:
    """Mean -log P(true class), probabilities clipped to 1e-15 (n, k) against codes 0..k-1."""
    p = np.asarray(probabilities, np.float64)[np.arange(len(codes)), np.asarray(codes)]
    return float(-np.mean(np.log(np.clip(p, 1e-15, 1.0)))) if len(codes) else math.nan


def binary_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """P(score of a positive row > score of a negative row) + half the ties (Mann-Whitney U over
    n_pos n_neg); NaN when one class is absent."""
    scores = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    n_pos = int(np.count_nonzero(positive))
    n_neg = positive.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return math.nan
    # average ranks (1-based) with ties sharing the mean of their ranks
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    mean_rank = ends - (counts - 1) / 2.0
    ranks = mean_rank[inverse]
    u = float(np.sum(ranks[positive])) - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def classification_report(scores: np.ndarray, codes: np.ndarray, classes, *, risk: float,
                          loss: str, class_weight=None, weighted_risk: float | None = None,
                          probabilities: np.ndarray | None = None) -> EvaluationReport:
    """The report of scores ``u`` ((n,) for two classes, (n, k) for k) against class codes
    (0..k-1, in ``classes`` order); ``class_weight``, ``weighted_risk``: a class-weighted
    model's weights and class-weighted risk; ``probabilities`` (n, k): the model's, for the
    log-loss."""
    classes = tuple(c.item() if hasattr(c, "item") else c for c in classes)
    k = len(classes)
    codes = np.asarray(codes, dtype=np.int64)
    n = int(codes.size)
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim == 1:
        predicted = (scores > 0).astype(np.int64)
        auc = binary_auc(scores, codes == 1)
    else:
        predicted = np.argmax(scores, axis=1)
        per_class = [binary_auc(scores[:, c], codes == c) for c in range(k)]
        auc = float(np.mean(per_class))   # NaN if some class is absent from the labels
    label_counts = np.bincount(codes, minlength=k)[:k]
    predicted_counts = np.bincount(predicted, minlength=k)[:k]
    hits = np.bincount(codes[predicted == codes], minlength=k)[:k]
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(label_counts > 0, hits / np.maximum(label_counts, 1), math.nan)
    majority = int(np.argmax(label_counts))
    share = predicted_counts / max(n, 1)
    warnings = []
    top = int(np.argmax(predicted_counts))
    if n and share[top] >= ONE_CLASS_SHARE:
        warnings.append(
            f"{share[top]:.1%} of the predictions are class {classes[top]!s}: the model is "
            f"(nearly) a constant; its accuracy {hits.sum() / n:.4f} against "
            f"{label_counts[majority] / n:.4f} for always predicting the majority class "
            f"{classes[majority]!s} says how much it learned. More rows, a larger budget or "
            "fewer private columns give the noise less weight (`iwpfast plan`)")
    accuracy = float(hits.sum() / n) if n else math.nan
    majority_accuracy = float(label_counts[majority] / n) if n else math.nan
    if n and accuracy < majority_accuracy:
        warnings.append(
            f"the model's accuracy {accuracy:.4f} is below the {majority_accuracy:.4f} of always "
            f"predicting the majority class {classes[majority]!s} ({accuracy - majority_accuracy:+.4f}"
            f" on {n:,} rows): on this data the model does worse than a constant. Look at the "
            "AUC and the recalls (it may still rank the rows), the chosen step (`tuning_`) and "
            "`evaluate --private`'s comparison with the best constant model")
    never = [classes[c] for c in range(k) if predicted_counts[c] == 0]
    # two classes: a class never predicted is the one-class case, said once above
    if n and never and not (k == 2 and warnings):
        warnings.append(f"class(es) {', '.join(map(str, never))} never predicted")
    return EvaluationReport(
        n_rows=n, accuracy=accuracy, risk=float(risk), loss=loss,
        classes=classes, majority_class=classes[majority],
        majority_accuracy=majority_accuracy, auc=float(auc),
        recall=tuple(float(r) for r in recall), predicted_share=tuple(float(s) for s in share),
        label_share=tuple(float(c / max(n, 1)) for c in label_counts), warnings=tuple(warnings),
        class_weight=None if class_weight is None else tuple(float(w) for w in class_weight),
        weighted_risk=None if weighted_risk is None else float(weighted_risk),
        log_loss=None if probabilities is None else log_loss(probabilities, codes))
