"""The private verdict beside the risk (``estimates.RiskEstimate``): the best constant model's
record and whether the difference model - constant may be read, and, where the hold-out's
features are clean, the predicted-class shares and the debiased accuracy.

A difference of two estimates is only as good as the worse of them: the model's private risk of
a diverged model can read 0.00000 +- 0.00000 (the rows that carry its mean are missing from the
sample; issue 42 item 7), and a difference taken against it would claim the model beats the
constant by 89 standard errors.  ``judge_difference`` marks the difference unreliable, with the
reason, whenever either estimate is; ``ConstantRisk.describe`` then prints no number.

With clean features (a label-only release, or every column the model reads public) the
prediction of each row is exact, so the share of rows predicted as each class is too, and the
accuracy is the mean of the indicator 1{y = p(x)}, a function of the label: the inverse of
randomized response is linear in any function of y (``label_noise.label_weight_table``), so the
mean of its per-row inverse is unbiased for the clean accuracy (docs/math.md "The best constant
model").  With noisy features p(x~) is not p(x) and nothing here applies.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = ["ConstantRisk", "judge_difference", "PredictedClasses", "PredictionTally",
           "features_are_clean"]

#: a share of the predictions at or above which the model is said to predict one class
#: (the clean verdict's ``estimators._report.ONE_CLASS_SHARE``, which this layer cannot import)
ONE_CLASS_SHARE = 0.99


class ConstantRisk(NamedTuple):
    """The best constant model's private risk beside a model's (``RiskEstimate.baseline``).

    The constant model is the intercept-only model (theta = 0, one b per head) that minimizes the
    private risk of the same hold-out: each head's b is the loss's link of its class's debiased
    share (docs/math.md "The best constant model").  ``risk`` +- ``stderr``: its private risk;
    ``difference`` = the model's risk minus it, ``difference_stderr`` the standard error of the
    per-row differences (paired: both models score the same released rows).  ``class_weighted``:
    b minimizes the class-weighted risk; ``shares`` are the weighted w_c pi_c / sum_y w_y pi_y.
    ``difference_reliable``: False when the model's or the constant's estimate is unreliable
    (``judge_difference``); the difference is then no verdict, ``warnings`` says why and
    ``describe()`` leaves it out (the numbers stay, for scripts, flagged).
    """

    intercept: tuple            # b of each head
    shares: tuple               # each head's class share, debiased from the released labels
    risk: float
    stderr: float
    difference: float
    difference_stderr: float
    warnings: tuple = ()
    class_weighted: bool = False
    difference_reliable: bool = True

    def describe(self) -> str:
        b = ", ".join(f"{v:.4g}" for v in self.intercept)
        b += ", under the same class weights" if self.class_weighted else ""
        line = f"best constant model (intercept only, b = {b}): risk {self.risk:.5f} +- " \
               f"{self.stderr:.5f}"
        if self.difference_reliable:
            line += (f"; the model minus it: {self.difference:+.5f} +- "
                     f"{self.difference_stderr:.5f} (paired standard error)")
        return "\n".join([line] + [f"warning: {w}" for w in self.warnings])


def judge_difference(constant: ConstantRisk, model=None) -> ConstantRisk:
    """``constant`` with ``difference_reliable`` set: True only when the model's estimate
    (``model``, a ``RiskEstimate``; None: not known here) is reliable, the constant's is (finite,
    its 95% interval not below 0, impossible for a non-negative loss: the rule of the model's own
    judge) and the difference is finite.  Otherwise the warnings say which estimate fails and
    replace the comparison's warning, which would read the unreliable numbers as a verdict."""
    problems = []
    if model is not None and not model.reliable:
        problems.append("the model's private risk estimate is unreliable (its reasons above)")
    if not (math.isfinite(constant.risk) and math.isfinite(constant.stderr)) \
            or constant.risk - 1.96 * constant.stderr < 0:
        problems.append(f"the constant model's estimate {constant.risk:.5g} +- "
                        f"{constant.stderr:.3g} is unreliable (not finite, or its 95% interval "
                        "reaches below 0)")
    if not (math.isfinite(constant.difference) and math.isfinite(constant.difference_stderr)):
        problems.append("the per-row differences overflowed")
    if not problems:
        return constant._replace(difference_reliable=True)
    why = ("no comparison with the best constant model: " + "; ".join(problems) + ". The "
           "difference model - constant and its paired standard error do not say which model is "
           "better here; score a model whose estimate is reliable, or use a larger hold-out")
    return constant._replace(difference_reliable=False, warnings=(why,))


def features_are_clean(noise) -> bool:
    """Whether the hold-out's columns the model reads carry no noise (``NoiseModel``: a
    label-only release, public columns, or arrays given noise_var=0): then every prediction on
    it is the prediction on the clean row."""
    law = getattr(noise, "noise_law", None)
    return not np.any(np.asarray(noise.noise_var) > 0) and (
        law is None or not np.any(np.asarray(law.variance) > 0))


class PredictedClasses(NamedTuple):
    """What a private hold-out with clean features says of the predictions (``RiskEstimate.
    predictions``).

    ``shares``: per class (``classes`` order) the share of the rows predicted as it: exact,
    the features being clean.  ``accuracy`` +- ``accuracy_stderr``: the mean of the per-row
    unbiased estimates of 1{y = p(x)} (the label inverse applied to that function of y) and
    their sample sd / sqrt(n).  ``label_shares``: the debiased class shares of the same rows,
    ``majority_class`` the largest, and ``accuracy_gain`` +- ``accuracy_gain_stderr`` the
    accuracy minus always predicting it (paired, per row).  Rows count once each (sample
    weights do not enter).  With noisy features all of these are None and ``note`` says so.
    """

    classes: tuple
    n_rows: int
    shares: tuple | None = None
    accuracy: float | None = None
    accuracy_stderr: float | None = None
    label_shares: tuple | None = None
    majority_class: object = None
    accuracy_gain: float | None = None
    accuracy_gain_stderr: float | None = None
    warnings: tuple = ()
    note: str = ""

    def describe(self) -> str:
        if self.shares is None or self.accuracy is None or self.label_shares is None:
            return self.note
        names = [str(c) for c in self.classes]
        return "\n".join(
            ["predicted classes (exact: the hold-out's features are clean): " + ", ".join(
                f"{c}: {s:.1%}" for c, s in zip(names, self.shares, strict=True)),
             f"debiased accuracy {self.accuracy:.4f} +- {self.accuracy_stderr:.4f} (standard "
             f"error); always predicting the majority class {self.majority_class!s} (debiased "
             f"share {max(self.label_shares):.4f}): the model {self.accuracy_gain:+.4f} +- "
             f"{self.accuracy_gain_stderr:.4f} (paired)"]
            + [f"warning: {w}" for w in self.warnings])

    def to_dict(self) -> dict:
        """The JSON fields of ``iwpfast evaluate --private`` (None where not estimated)."""
        def plain(value):            # numpy scalars -> Python, for json
            return value.item() if hasattr(value, "item") else value

        return dict(classes=[plain(c) for c in self.classes],
                    predicted_share=None if self.shares is None else list(self.shares),
                    accuracy=self.accuracy, accuracy_stderr=self.accuracy_stderr,
                    label_share=None if self.label_shares is None else list(self.label_shares),
                    majority_class=plain(self.majority_class), accuracy_gain=self.accuracy_gain,
                    accuracy_gain_stderr=self.accuracy_gain_stderr,
                    prediction_warnings=list(self.warnings), prediction_note=self.note or None)


#: what ``PredictedClasses.note`` says of a hold-out with noisy features
NOISY_FEATURES_NOTE = ("predicted-class shares and accuracy: not estimated (they need clean "
                       "features, and this hold-out's features are noised; the risk above is "
                       "debiased)")


class PredictionTally:
    """Streaming counts for ``PredictedClasses``: per class the rows predicted as it, the rows
    released as it, and the rows whose released class is their prediction (per released class).

    ``table``: the hold-out's one-vs-rest label weights (``label_noise.label_weight_table``, or
    a k-class release's; public labels (1, 0, 1, 0)).  A row's unbiased estimate of 1{y = c} is
    table[0] where its released class is c and table[3] elsewhere (the weights of "y is the
    head's class" in the two rows of the table): binary (1{y~ = c} - (1 - S)) / (2S - 1), k-ary
    (1{y~ = c} - r) / (q - r).  So every mean and variance here follows from the counts.
    ``clean``: the features are clean (``features_are_clean``); otherwise nothing is counted.
    """

    def __init__(self, classes, table, clean: bool):
        self.classes = tuple(c.item() if hasattr(c, "item") else c for c in classes)
        self.k = len(self.classes)
        self.match, self.other = float(table[0]), float(table[3])
        self.clean = bool(clean)
        self.n = 0
        self.predicted = np.zeros(self.k, np.int64)
        self.released = np.zeros(self.k, np.int64)
        self.hits = np.zeros(self.k, np.int64)

    def add(self, predicted, released) -> None:
        """One batch: each row's predicted and released class index (0..k-1)."""
        if not self.clean:
            return
        predicted = np.asarray(predicted, dtype=np.int64)
        released = np.asarray(released, dtype=np.int64)
        k = self.k
        self.n += int(predicted.size)
        self.predicted += np.bincount(predicted, minlength=k)[:k]
        self.released += np.bincount(released, minlength=k)[:k]
        self.hits += np.bincount(released[predicted == released], minlength=k)[:k]

    def result(self) -> PredictedClasses:
        if not self.clean or self.n < 2:
            return PredictedClasses(self.classes, self.n, note=NOISY_FEATURES_NOTE if not self.clean
                                    else "predicted-class shares and accuracy: fewer than 2 rows")
        n, gap = self.n, self.match - self.other
        # a row's term is `other + gap * [y~ = p]`: with o the share of rows where y~ = p, its
        # mean is other + gap o and its sample variance gap^2 o (1 - o) n / (n - 1)
        o = float(self.hits.sum()) / n
        accuracy = self.other + gap * o
        stderr = abs(gap) * math.sqrt(o * (1.0 - o) / (n - 1))
        label_shares = self.other + gap * self.released / n
        m = int(np.argmax(label_shares))
        # minus always predicting m, per row: gap ([y~ = p] - [y~ = m]) in {-gap, 0, +gap}
        up = float(self.hits.sum() - self.hits[m]) / n
        down = float(self.released[m] - self.hits[m]) / n
        gain = gap * (up - down)
        gain_se = abs(gap) * math.sqrt(max(up + down - (up - down) ** 2, 0.0) / (n - 1))
        shares = self.predicted / n
        return PredictedClasses(
            self.classes, n, tuple(float(s) for s in shares), float(accuracy), float(stderr),
            tuple(float(s) for s in label_shares), self.classes[m], float(gain), float(gain_se),
            self._warnings(shares, gain, gain_se))

    def _warnings(self, shares, gain, gain_se) -> tuple:
        why = []
        top = int(np.argmax(shares))
        if shares[top] >= ONE_CLASS_SHARE:
            why.append(f"{shares[top]:.1%} of the predictions are class {self.classes[top]!s}: "
                       "the model is (nearly) a constant, whatever its risk says")
        never = [str(self.classes[c]) for c in range(self.k) if self.predicted[c] == 0]
        if never and not (self.k == 2 and why):   # two classes: the one-class line says it
            why.append(f"class(es) {', '.join(never)} never predicted")
        if gain + 1.96 * gain_se < 0:
            why.append(f"the debiased accuracy is below always predicting the majority class by "
                       f"more than 1.96 standard errors ({gain:+.4f} +- {gain_se:.4f})")
        return tuple(why)
