"""IWPClassifier: a binary linear classifier trained in one pass by IWP-SGD on a local-DP release."""
from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from types import MappingProxyType

import numpy as np

from ..exceptions import InvalidInputError, NumericalWarning
from ..label_noise import check_classes
from ..losses import CLASSIFICATION_LOSSES
from ._base import IWPBase
from ._checks import is_integral
from ._heads import OneVsRestHeads
from ._inputs import on_filesystem
from ._multiclass import NOT_K_CLASS, class_codes, k_class_encoder, k_class_mapper
from ._params import SAMPLE_WEIGHT_EQUIVALENCE
from ._units import resolve_scaled


def _two_classes(y: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``y`` when there are at most two (else its first three, enough
    for the error): numbers by one min/max pass, other labels (strings, ...) by np.unique."""
    if y.dtype.kind in "iuf":
        low, high = y.min(), y.max()
        if y.dtype.kind == "f" and not (np.isfinite(low) and np.isfinite(high)):
            bad = int(np.flatnonzero(~np.isfinite(y))[0])
            raise InvalidInputError(f"y has a non-finite value at row {bad}; drop or impute such rows "
                                    "before fitting")
        return np.array([low]) if low == high else np.array([low, high])
    return np.unique(y)


#: a moment model's probabilities are clipped to [floor, 1 - floor]: a linear score leaves
#: [-1, 1] at the edges of the data, and a log-loss of one row stays below -log(0.01) = 4.6
PROBABILITY_FLOOR = 0.01


class _Classifier(IWPBase):
    """IWPClassifier's label side (two classes as -1/+1 for one head; k > 2 classes as class
    indices for k one-vs-rest heads, ``_multiclass``) and its prediction, which asks the fitted
    heads (``_heads``) for labels, probabilities, accuracy and risk."""

    _task = "classification"
    _losses = CLASSIFICATION_LOSSES
    # (declared classes, epsilon_y, label_keep_prob) of the fit in progress; None outside fit
    _fit_request = None

    # ---- fitting: two classes or k ----------------------------------------------------------
    def fit(self, X, y=None, sample_weight=None, *, classes=None, **kwargs):
        """Fit in one pass (see ``IWPBase.fit``).  ``classes``: the label's declared classes, in
        the order that defines the heads (required with ``epsilon_y`` for k > 2: k-ary randomized
        response's q and r depend on k).  A release written with ``classes=[...]`` carries them."""
        declared = None if classes is None else check_classes(classes)
        self._fit_request = (declared, kwargs.get("epsilon_y"), kwargs.get("label_keep_prob"))
        try:
            return super().fit(X, y, sample_weight, **kwargs)
        finally:
            self._fit_request = None

    def partial_fit(self, X, y=None, sample_weight=None, *, classes=None, **kwargs):
        """``IWPBase.partial_fit``; k > 2 classes when all of them are given on the pass's first
        call (``classes=[...]``, as scikit-learn's SGDClassifier; with ``epsilon_y`` they set
        k-ary randomized response's weights) or read from a k-class release: k one-vs-rest heads
        updated from every batch, as ``fit`` trains them.  Later calls may repeat ``classes``
        (the same list) or leave it out; a label outside them is an error naming its row."""
        if self.class_weight is not None:
            raise InvalidInputError(
                "class_weight is applied by fit, which knows the classes and (for 'balanced') "
                "their shares before the first update; partial_fit cannot: use fit, or weigh the "
                "rows with sample_weight")
        ovr = None if self._pass is None else self._pass.ovr
        declared = None if classes is None else check_classes(classes)
        if ovr is not None and self._pass.started:
            if declared is not None and list(declared) != list(ovr.classes):
                raise InvalidInputError(
                    f"classes={list(declared)} but this pass learns the classes {list(ovr.classes)}; "
                    "give the same list (or none) on later calls, or call fit to start a new pass")
            return super().partial_fit(X, y, sample_weight, **kwargs)
        if declared is None or len(declared) <= 2:
            return super().partial_fit(X, y, sample_weight, classes=classes, **kwargs)
        if self._pass is not None and self._pass.started:
            raise InvalidInputError(
                f"classes={list(declared)} on a pass that started with two classes; k classes are "
                "declared on the first call of a pass (call fit, or start a new estimator)")
        self._fit_request = (declared, kwargs.get("epsilon_y"), kwargs.get("label_keep_prob"))
        try:
            return super().partial_fit(X, y, sample_weight, **kwargs)
        finally:
            self._fit_request = None

    def _start_one_vs_rest(self, classes, table) -> None:
        """The pass learns k > 2 classes: its heads are k one-vs-rest heads."""
        self._pass.heads = OneVsRestHeads(classes=np.asarray(classes), table=table)

    def _multiclass(self) -> bool:
        """Whether the fitted model has k > 2 one-vs-rest heads."""
        coef = getattr(self, "coef_", None)
        return coef is not None and np.ndim(coef) == 2 and np.shape(coef)[0] > 1

    def __init__(self, *, loss="exponential", correction="iwp", alpha="auto", learning_rate="auto",
                 schedule="constant", mu=None, batch_size=128, radius=None, variance_cap=None,
                 average="auto", fit_intercept=True, truncation=2, chunk_rows=None, shuffle=False,
                 random_state=None, progress=True, validation_fraction=0.1, class_weight=None,
                 solver="auto", release_spec=None):
        self._store_params(locals())

    # ---- class weights ----------------------------------------------------------------------
    def _prepare_class_weight(self, source, mapper, lab, noise) -> None:
        """``class_weight`` of a fit: the pass's (w_-, w_+), before its configs are made.

        'balanced' is scikit-learn's n / (k n_c) with the shares n_c / n estimated from the
        released labels by the unbiased inverse of randomized response (one read of the label
        column; ``label_noise.debiased_class_shares``), never from clean labels; a dict gives
        {class: weight} (classes it omits weigh 1).  The weights enter the label weights of the
        heads (two classes: ``label_noise.class_weighted_table``; k classes: each head's table
        and a per-class boost, ``OneVsRestHeads._weighted_head_configs``; docs/math.md "Class
        weights"): the gradient stays unbiased for the class-weighted clean risk."""
        self.class_weight_ = None
        self.class_shares_ = None
        cw = self.class_weight
        if cw is None:
            return
        if not (cw == "balanced" if isinstance(cw, str) else isinstance(cw, dict)):
            raise InvalidInputError(f"class_weight={cw!r}; use None, 'balanced' or a dict "
                                    "{class: weight} (CLI: --class-weight balanced)")
        ps = self._pass
        ovr = ps.ovr
        k = 2 if ovr is None else len(ovr.classes)
        # 'balanced' reads the label column for its counts; a dict only when the classes are not
        # known yet (a streamed label column of two classes finds them in its first batch)
        if cw == "balanced" or (ovr is None and ps.classes is None):
            counts = self._released_label_counts(source, mapper, lab, k, ovr is not None)
        if ovr is not None:
            found = np.asarray(ovr.classes)
            keep = ovr.keep_probability()
        else:
            found = ps.classes if ps.classes is not None else np.array([-1, 1])
            keep = noise.label_keep_prob
        classes = [c.item() if hasattr(c, "item") else c for c in found]
        if cw == "balanced":
            from ..label_noise import balanced_class_weights, debiased_class_shares
            shares, _ = debiased_class_shares(counts, keep)
            weights = balanced_class_weights(shares, classes)
            self.class_shares_ = shares
        else:
            weights = np.ones(len(classes))
            keys = {str(c): i for i, c in enumerate(classes)}
            given: dict[int, object] = {}
            for key, value in cw.items():
                where = keys.get(str(key.item() if hasattr(key, "item") else key))
                if where is None:
                    raise InvalidInputError(f"class_weight has the key {key!r}, not one of the "
                                            f"classes {classes!r}; name the classes of y")
                if where in given:
                    raise InvalidInputError(
                        f"class_weight gives class {classes[where]!r} twice (keys "
                        f"{given[where]!r} and {key!r}); give each class one weight "
                        "(CLI: --class-weight CLASS=WEIGHT,...)")
                given[where] = key
                if not (isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
                        and math.isfinite(value) and value >= 0):
                    raise InvalidInputError(f"class_weight[{key!r}] = {value!r} must be a finite "
                                            "number >= 0")
                weights[where] = float(value)
            if not weights.any():
                # every gradient would be 0: the fit would return its starting point as a model
                raise InvalidInputError(
                    f"class_weight {cw!r} gives every class ({classes!r}) the weight 0: nothing "
                    "would be learned; give at least one class a weight > 0 (CLI: "
                    "--class-weight CLASS=WEIGHT,...)")
        if ovr is not None:
            ovr.class_weights = tuple(float(w) for w in weights)
        else:
            ps.class_weights = (float(weights[0]), float(weights[1]))
        self.class_weight_ = np.asarray(weights, dtype=np.float64)

    @staticmethod
    def _released_label_counts(source, mapper, lab, k: int = 2, codes: bool = False) -> np.ndarray:
        """The rows released as each class: one read of the label column in the kernel's encoding
        (the same mapper as the pass): +-1 (negative first), or with ``codes`` the class indices
        0..k-1."""
        from ..io.sources import open_source
        from ..io.views import PartSource
        labels: Iterable
        if isinstance(source, dict):
            labels = [np.asarray(source[lab])]
        else:
            src = open_source(source)
            if not src.rereadable:
                # the counts are a read before the pass: a one-shot stream would be used up
                raise InvalidInputError(
                    f"class_weight reads the released labels once before training (the class "
                    f"shares), and {src.description} can be read only once: pass a file, a folder "
                    f"of parts or a Table, or give class_weight as a dict {{class: weight}} with "
                    f"the classes known (a release's label classes)")
            if mapper is not None:
                src = PartSource(src, mapper=mapper)
            labels = (batch.column(lab).to_numpy(zero_copy_only=False)
                      for batch in src.batches([lab]))
        counts = np.zeros(k)
        for y in labels:
            y = np.asarray(y)
            if codes:
                counts += np.bincount(y.astype(np.int64), minlength=k)[:k]
            else:
                positive = np.count_nonzero(y > 0)
                counts += (len(y) - positive, positive)
        return counts

    def _validated_truncation(self):
        t = self.truncation
        if t == "auto":
            return "auto"
        if not (is_integral(t) and not isinstance(t, bool) and 0 <= t <= 20):
            raise InvalidInputError(f"truncation must be an integer K in 0..20 or 'auto' (got {t!r})")
        return int(t)

    def _resolve_truncation(self, truncation, noise, radius, cap):
        """'auto' -> the MSE-optimal K at the largest tau the pass can reach; warn if K is above it."""
        from ..transforms import choose_truncation
        energy = float(np.max(noise.noise_var)) * radius ** 2 if math.isfinite(radius) else math.inf
        energy = min(energy, cap)
        if not math.isfinite(energy):
            # without a radius or a cap tau is unbounded; judge K at the noise of a unit-norm theta
            energy = float(np.max(noise.noise_var))
        tau = 0.5 * energy
        best = int(choose_truncation(tau, self.batch_size, loss=self.loss))
        if truncation == "auto":
            return best
        if truncation > best:
            warnings.warn(
                f"truncation={truncation} is too high for this noise level (tau up to {tau:.3g}): the "
                f"series' variance explodes; the MSE-optimal K is {best} (use truncation={best} or 'auto')",
                NumericalWarning, stacklevel=4)
        return truncation

    def _target_encoder(self, y: np.ndarray):
        """The chunk encoder of array labels: class indices for k > 2 classes (a fitted k-class
        model, or a fit whose labels or declared classes are k); else find the two classes of
        ``y`` (sorted; the second is the positive one) and encode to +-1, checking every value is
        one of them (in the reader's thread, in the pass).  Numeric labels need one min/max pass
        here, not a sort."""
        ps = self._pass
        if ps.ovr is not None:                  # a fitted k-class model reading arrays
            k_classes = list(ps.ovr.classes)
            return lambda values, first_row, dtype=None: class_codes(values, k_classes, first_row)
        if self._fit_request is not None:
            k_encode = k_class_encoder(self, y, self._fit_request, self._start_one_vs_rest)
            if k_encode is not None:
                return k_encode
        if ps.classes_hint is not None:
            classes = np.unique(ps.classes_hint)
            source = f"classes={classes.tolist()}"
        elif hasattr(self, "classes_") and ps.started:
            classes = np.asarray(self.classes_)
            source = f"the classes {classes.tolist()} of this pass"
        else:
            classes = _two_classes(y)
            source = None
        if classes.size > 2:
            raise InvalidInputError(
                f"y has {classes.size} classes {classes.tolist()[:10]}: declare all k classes on the "
                "pass's first call, partial_fit(X, y, classes=[...]) (or fit(X, y) in one pass)")
        if classes.size == 1:
            if set(classes.tolist()) <= {-1, 1}:
                classes = np.array([-1, 1])
            elif set(classes.tolist()) <= {0, 1}:
                classes = np.array([0, 1])
            else:
                raise InvalidInputError(
                    f"y has a single class {classes.tolist()}; pass classes=[negative, positive] to "
                    "partial_fit "
                    "or data with both classes")
        ps.classes = classes
        negative, positive = classes[0], classes[1]

        def encode(values, first_row, dtype=np.float64):
            # comparisons and counts only (np.where over a mask was 20x slower than the rest)
            is_positive = values == positive
            is_negative = values == negative
            if np.count_nonzero(is_positive) + np.count_nonzero(is_negative) != len(values):
                row = int(np.flatnonzero(~(is_positive | is_negative))[0])
                value = values[row]
                if source is None and isinstance(value, float | np.floating) and value != int(value):
                    raise InvalidInputError(
                        f"Unknown label type: continuous (y has {negative!r}, {positive!r} and "
                        f"{value!r} at row {first_row + row}): IWPClassifier needs class labels; "
                        "for a numeric target use IWPRegressor")
                if source is None:
                    raise InvalidInputError(
                        f"y has more than 2 classes: {negative!r}, {positive!r} and {value!r} (row "
                        f"{first_row + row}); k classes are declared on the pass's first call: "
                        "partial_fit(X, y, classes=[...]), or fit(X, y) (one-vs-rest heads)")
                raise InvalidInputError(f"y has label {value!r} at row {first_row + row}, not in {source}; "
                                        "pass classes=[...] naming both labels, or recode y")
            labels = is_positive.astype(dtype)
            labels *= 2
            labels -= 1
            return labels

        return encode

    def _label_mapper_for(self, source, lab):
        """A batch mapper (``iwpfast.io.views``) putting ``lab`` into the kernel's encoding, or
        None: class indices for k classes (``_multiclass.k_class_mapper``); released labels are
        +-1 already; other label columns ({0, 1}, two strings...) are mapped batch by batch."""
        mapper = k_class_mapper(source, lab, self._fit_request, self._pass.ovr,
                                self._start_one_vs_rest)
        if mapper is not NOT_K_CLASS:
            return mapper
        from ..privacy.spec_reading import release_label_classes
        released = release_label_classes(source, default=[-1, 1])
        if released is not None:
            # released labels are -1/+1; label_classes gives back the values the data owner had
            self._pass.classes = np.asarray(released)
            return None
        return self._label_mapper(lab)

    def _label_mapper(self, lab):
        """A batch mapper (``iwpfast.io.views``) recoding the label column to +-1."""
        from ..io.views import column_mapper
        first: dict = {}
        # +-1 as int8 (class indices of a fitted k-class model: float64): the kernels take the
        # labels in their own dtype, as a release's int8
        dtype = np.float64 if self._multiclass() else np.int8
        return column_mapper({lab: lambda yv: self._encode_targets_stream(
            yv, first, column=lab, dtype=dtype)}, dtype=dtype)

    def _encode_targets_stream(self, y, first=None, column=None, dtype=np.float64):
        """Map streamed labels to the kernel's encoding: class indices for a k-class model; else
        +-1 (as ``dtype``): {-1, 1} as is, {0, 1} with 0 -> -1 (or the fitted classes)."""
        if self._multiclass():
            return class_codes(np.asarray(y), list(self.classes_))
        y = np.asarray(y)
        classes = getattr(self, "classes_", None)
        if classes is None and self._pass is not None:
            classes = self._pass.classes
        vals = _distinct_values(y)
        if classes is not None and np.isin(vals, classes).all():
            if first is not None:
                first["classes"] = classes
            return _plus_minus_one(y == classes[1], dtype)
        if first is not None and "classes" in first:
            classes = first["classes"]
        elif np.isin(vals, [-1, 1]).all():
            classes = np.array([-1, 1])
        elif np.isin(vals, [0, 1]).all():
            classes = np.array([0, 1])
        elif vals.size == 2:
            classes = vals   # any two values (strings...): sorted, the second is the positive class
        else:
            where = f"label column {column!r}" if column is not None else "the labels"
            raise InvalidInputError(
                f"{where} has values {vals.tolist()[:10]} in its first batch: a streamed label needs "
                "two classes, {-1, 1}, {0, 1}, or two values seen in the first batch; recode it (e.g. "
                "1 for the positive class, 0 else), or fit on arrays, fit(X, y), which maps any two "
                "classes")
        if not np.isin(vals, classes).all():
            raise InvalidInputError(
                f"label values {vals.tolist()[:10]} mix encodings (classes so far {classes.tolist()}); "
                "use one encoding, {-1, 1} or {0, 1}, for the whole label column")
        if first is not None:
            first["classes"] = classes
        if self._pass is not None:
            self._pass.classes = classes
        return _plus_minus_one(y == classes[1], dtype)

    def _encode_clean_targets(self, y):
        """A fitted model's classes are the only labels it can be scored on: a value it never
        saw is an error naming it, never re-encoded (issue 18: labels 'a_rich'/'b_poor' scored
        against classes [0, 1] were sorted into a new pair and the accuracy silently inverted).
        The one exception is the release's convention: a model of +-1 labels reads {0, 1} with
        0 -> -1."""
        y = np.asarray(y)
        classes = getattr(self, "classes_", None)
        if classes is not None and getattr(self, "release_spec", None) is not None:
            from ._inputs import released_labels  # a release's labels (release_spec=)
            codes = released_labels(y, classes, self._multiclass())
            if codes is not None:
                return codes
        if classes is not None and not self._multiclass():
            classes = np.asarray(classes)
            vals = _distinct_values(y)
            known = np.isin(vals, classes)
            pm1_model = set(classes.tolist()) == {-1, 1}
            if not known.all() and not (pm1_model and np.isin(vals, [0, 1]).all()):
                unseen = vals[~known].tolist()
                released = (getattr(self, "release_spec_", None) is not None
                            and set(unseen) <= {-1, 1})
                raise InvalidInputError(
                    f"label value(s) {unseen[:10]!r} never seen by the model (its classes: "
                    f"{classes.tolist()!r}); " + (
                        "they look like a release's -1/+1 labels: to score rows of the release "
                        "(scikit-learn's folds), give the spec to the estimator, "
                        "IWPClassifier(release_spec=spec) (fit's release_spec= applies to fit "
                        "only), or score with iwpfast.metrics.private_scorer" if released else
                        "recode the labels to the model's classes, or fit a model on these "
                        "labels"))
        return self._encode_targets_stream(y)

    def _update_fitted(self, telemetry):
        super()._update_fitted(telemetry)
        if not hasattr(self, "classes_"):
            found = self._pass.classes
            self.classes_ = np.asarray(np.array([-1, 1]) if found is None else found)

    def predict(self, X, *, features=None, scaled=None, raw=None,
                filesystem=None) -> np.ndarray:
        """The predicted class of each row (``classes_[1]`` where the score is positive; for k > 2
        classes the argmax over the heads' scores), in the label values the model was fitted
        with.  X in raw units unless ``scaled=True``.
        ``filesystem``: the pyarrow or fsspec filesystem X's path lies on (as for ``fit``)."""
        u = self.decision_function(X, features=features, scaled=scaled, raw=raw,
                                   filesystem=filesystem)
        return self._fitted_heads().labels(u, self.classes_)

    def _check_probabilistic(self) -> None:
        if _log_odds_scale(self.loss) is None and not self._linear_probabilities():
            raise InvalidInputError(_no_probabilities(self.loss))

    def _linear_probabilities(self) -> bool:
        """A model solved from the release's moments: its score is the least-squares fit of the
        +-1 label, an estimate of E[y | x] = 2 P(y = +1 | x) - 1 (whatever ``loss`` says)."""
        return getattr(self, "solver_", "sgd") == "moments"

    def _positive_probability(self, u: np.ndarray) -> np.ndarray:
        """P(y = +1 | score u) = 1 / (1 + exp(-c u)): c = 1 for the logistic loss, 2 for the
        exponential (``_log_odds_scale``); the tanh form does not overflow.  A moment model's
        score is 2P - 1: P = (1 + u) / 2 clipped to [PROBABILITY_FLOOR, 1 - PROBABILITY_FLOOR]
        (a linear score leaves [-1, 1] at the edges of the data)."""
        if self._linear_probabilities():
            return np.clip(0.5 * (1.0 + np.asarray(u, np.float64)), PROBABILITY_FLOOR,
                           1.0 - PROBABILITY_FLOOR)
        scale = _log_odds_scale(self.loss)
        if scale is None:
            raise InvalidInputError(_no_probabilities(self.loss))
        return 0.5 * (1.0 + np.tanh(0.5 * scale * u))

    def predict_proba(self, X, *, features=None, scaled=None, raw=None,
                      filesystem=None) -> np.ndarray:
        """Class probabilities, for the losses whose risk minimizer is a function of the
        log-odds: logistic (u is the log-odds: sigma(u)) and exponential (u is half the log-odds:
        sigma(2u); docs/math.md "Probabilities"), and for a model solved from the release's
        moments (``solver_ == 'moments'``, the quadratic loss or the default's choice: u
        estimates 2P - 1, so P = (1 + u)/2 clipped to [0.01, 0.99]); for k > 2 classes the
        one-vs-rest probabilities normalized to sum to 1 over the classes.  ``filesystem``: the
        pyarrow or fsspec filesystem X's path lies on (as for ``fit``)."""
        self._check_probabilistic()
        u = self.decision_function(X, features=features, scaled=scaled, raw=raw,
                                   filesystem=filesystem)
        return self._fitted_heads().probabilities(self, u)

    def evaluate_report(self, X, y=None, *, features=None, label=None, scaled=None, raw=None,
                        filesystem=None):
        """The verdict on clean labelled data: an ``EvaluationReport`` with the accuracy beside
        the majority class's, the AUC (binary; macro one-vs-rest for k classes), each class's
        recall and share of the predictions, the risk (a model fitted with ``class_weight``:
        also the class-weighted risk it minimized, ``weighted_risk``), and ``warnings`` when the
        accuracy is below the majority class's, when 99% or more of the predictions are one
        class or when a class is never predicted (``iwpfast evaluate`` prints it).  X, y as for
        ``score``: arrays, or a source with the label column, in raw units unless
        ``scaled=True``.  The scores are held in memory (n x k floats).

        Examples
        --------
        >>> import numpy as np
        >>> from iwpfast import IWPClassifier
        >>> X = np.linspace(-1, 1, 400).reshape(-1, 1); y = (X[:, 0] > 0).astype(int)
        >>> m = IWPClassifier(alpha=0.01, learning_rate=0.5, progress=False).fit(X, y, noise_var=0.0)
        >>> r = m.evaluate_report(X, y)
        >>> r.auc > 0.99, r.majority_accuracy, r.warnings
        (True, 0.5, ())
        """
        from ._report import classification_report
        X = on_filesystem(X, filesystem)
        u, targets, _ = self._clean_xy(X, y, features, label, resolve_scaled(scaled, raw),
                                       "evaluate")
        codes = (targets > 0).astype(np.int64) if np.ndim(u) == 1 else targets.astype(np.int64)
        weights = getattr(self, "class_weight_", None)
        # the class-weighted risk is the plain one with the row weight w_{y_i}
        weighted = None if weights is None else self._risk_from(
            u, targets, np.asarray(weights, dtype=np.float64)[codes])
        proba = None
        if _log_odds_scale(self.loss) is not None or self._linear_probabilities():
            proba = self._fitted_heads().probabilities(self, u)
        return classification_report(u, codes, list(self.classes_),
                                     risk=self._risk_from(u, targets), loss=self.loss,
                                     class_weight=weights, weighted_risk=weighted,
                                     probabilities=proba)

    def _score_from(self, u, targets, sample_weight=None) -> float:
        """Accuracy against the targets in the kernel's encoding (weighted: sum s [correct] /
        sum s): the sign of one head, the argmax of k."""
        return self._fitted_heads().accuracy(u, targets, sample_weight)

    def _risk_from(self, u, targets, sample_weight=None) -> float:
        """Mean loss (weighted: (1/n) sum s_i loss_i, the risk a weighted fit minimizes); for k
        heads the one-vs-rest loss summed over the heads."""
        return self._fitted_heads().risk(self.loss, u, targets, sample_weight)


#: scikit-learn's class-weight check this one-pass estimator cannot pass (declared, with why)
CLASS_WEIGHT_EXTREME = (
    "check_class_weight_classifiers",
    "one pass over 50 unscaled rows (|x| ~ 40, fewer than a batch: one SGD update) with class "
    "weights 1000 and 0.0001: that update moves the coefficients as far as the intercept, so "
    "the test rows do not all get the heavy class as after the 1000 iterations the check gives "
    "other estimators")


def _distinct_values(y: np.ndarray) -> np.ndarray:
    """np.unique(y) for a batch of labels, without its sort in the usual case of numbers taking
    one or two values (min, max and two counts: ~20x cheaper per batch of the training reader)."""
    if y.dtype.kind in "iufb" and y.size:
        low, high = y.min(), y.max()
        n_low = np.count_nonzero(y == low)
        if n_low == y.size:
            return np.array([low])
        if n_low + np.count_nonzero(y == high) == y.size:
            return np.array([low, high])
    return np.unique(y)


def _plus_minus_one(positive: np.ndarray, dtype=np.float64) -> np.ndarray:
    """+1 where ``positive``, -1 elsewhere, as ``dtype`` (np.where over a mask is several times
    slower)."""
    out = positive.astype(dtype)
    out *= 2
    out -= 1
    return out


def _log_odds_scale(loss: str) -> float | None:
    """c of ``predict_proba`` = sigma(c u) (``iwpfast.losses.Loss.log_odds_scale``): 1 for the
    logistic loss (u* is the log-odds), 2 for the exponential (u* is half the log-odds, the
    minimizer of p e^{-u} + (1 - p) e^{u}); None for the quadratic loss (u* = 2p - 1)."""
    from ..losses import LOSS_RECORDS
    record = LOSS_RECORDS.get(loss)
    return None if record is None else record.log_odds_scale


def _no_probabilities(loss: str) -> str:
    return (f"predict_proba needs loss='logistic' or 'exponential' (this model uses {loss!r}, "
            "whose score is not a function of the log-odds) or a model solved from the "
            "release's moments (solver='moments'); use decision_function, or refit "
            "with loss='logistic' or 'exponential', or solver='moments'")


class _NoProbabilities(InvalidInputError, AttributeError):
    """predict_proba of a loss that is not a likelihood (an AttributeError, so hasattr is False)."""


class _OnlyForLogistic:
    """A method available only for the losses with a ``log_odds_scale`` (whose score is a
    multiple of the log-odds); otherwise reading the attribute raises ``_NoProbabilities``
    naming the fix.  (The name is historical: the exponential loss has probabilities too.)"""

    def __init__(self, method):
        self.method = method
        self.__doc__ = method.__doc__

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        if _log_odds_scale(obj.loss) is None and not obj._linear_probabilities():
            raise _NoProbabilities(_no_probabilities(obj.loss))
        return self.method.__get__(obj, owner)


class IWPClassifier(_Classifier):
    """Linear classifier trained in one pass by IWP-SGD on a local-DP release.

    Two classes, or k > 2 classes as k one-vs-rest heads trained in the same scan (a release
    written with ``classes=[...]``, or ``fit(X, y, classes=[...], epsilon_y=...)``; ``coef_`` is
    then (k, p), ``intercept_`` (k,), ``classes_`` the declared classes and ``predict`` the
    argmax).  ``fit(release_path)`` reads the noise from the release's metadata;
    ``fit(X, y, noise_var=..., epsilon_y=...)`` takes arrays and explicit noise.  Parameters are
    keyword-only, stored as given (scikit-learn convention) and validated by ``fit``: an illegal
    value raises ``InvalidInputError`` naming it and the legal range.

    Parameters
    ----------
    loss : {"exponential", "logistic", "quadratic"}, default "exponential"
        The GLM loss f(y u).  Exponential and quadratic have an exact correction; logistic uses
        the inverse-Weierstrass series truncated at ``truncation`` terms.
    correction : {"iwp", "none"}, default "iwp"
        "iwp": unbiased gradients of the clean loss; "none": naive SGD on the noisy data.
    alpha : float >= 0, list of floats > 0, or "auto", default "auto"
        L2 strength lambda (the regularized risk is alpha-strongly convex).  "auto" or a list:
        chosen by private validation together with ``learning_rate`` (fitted ``alpha_``).
    learning_rate : float > 0, list of floats > 0, or "auto", default "auto"
        The step gamma0.  "auto": a grid of (alpha, step) heads is trained in the same scan of
        (1 - validation_fraction) of the rows and scored by its unbiased private risk on the rest
        (the standard-error rule: the most regularized head within half a paired SE of the
        best; fitted ``learning_rate_``, ``alpha_``, ``tuning_``; without a
        ``variance_cap`` the IWP heads then run with sigma^2 |theta|^2 <= 2).  k > 2 classes:
        every class's one-vs-rest head chooses its own pair (``alpha_``, ``learning_rate_``
        arrays of k values; ``tuning_`` with a ``class`` column).  ``partial_fit``: the centre
        of the derived grid, from public quantities only (docs/tuning.md).
    schedule : {"constant", "inverse", "paper"}, default "constant"
        gamma_t = gamma0, gamma0 / (1 + mu gamma0 t), or the paper's constant step from the
        release size ("paper" needs alpha > 0).
    mu : float >= 0 or None, default None
        mu of the inverse schedule; None means alpha.
    batch_size : int >= 1, default 128
        Rows per SGD update (minibatch); the last partial minibatch is used.
    radius : float > 0 or None, default None
        Radius R of the projection of theta on the L2 ball; None: feature_bound * |f'(0)| / alpha
        (docs/design.md section 2), no projection when alpha = 0.
    variance_cap : float > 0 or None, default None
        Cap on the noise energy sigma^2 |theta|^2 (theta is scaled down above it); keeps large
        steps stable.  None: no cap.
    average : "auto", bool, "tail", float in [0, 1) or int >= 0, default "auto"
        Polyak averaging: False (last iterate), True (all iterates), "tail" (the last half), a
        start fraction of the pass or a start update number.  "auto": "tail" when alpha or
        learning_rate is chosen by private validation, else False.
    fit_intercept : bool, default True
        Learn a noise-free intercept b (score theta^T x + b).
    truncation : int in 0..20 or "auto", default 2
        K of the logistic loss's series; "auto": the K of least mean squared error at the noise
        level the pass can reach.  Ignored by the other losses.
    chunk_rows : int >= 1 or None, default None
        Rows per kernel call (None: about 16 MiB of columns); does not change the model.
    shuffle : bool, default False
        Permute in-memory arrays once before the pass (files are read in order).
    random_state : int, numpy Generator or None, default None
        Seed of that permutation.
    progress : bool, "force" or "log", default True
        A progress bar on a terminal, else progress lines through ``logging`` (False: never;
        "force": always a bar; "log": always the log lines; see ``iwpfast.progress``).
    validation_fraction : float in (0, 0.5], default 0.1
        Share of the rows held out (in blocks spread over the stream) when alpha or
        learning_rate is "auto"; or pass a separate release with ``fit(..., validation=...)``.
        Data of at most 400,000 rows that can be read again is cross-validated over
        1 / validation_fraction folds instead (every row scored once, the chosen head trained
        again on all rows; ``tuning_["folds"]``; docs/tuning.md step 6).
    class_weight : None, "balanced" or dict {class: weight}, default None
        Minimize the class-weighted risk (1/n) sum_i w_{y_i} loss_i (scikit-learn's meaning;
        "balanced": w_c = n / (k n_c) with the class shares estimated from the *released* labels
        by the unbiased inverse of randomized response).  The weight of the private true label
        enters the label inverse, so the gradient stays unbiased (docs/math.md "Class weights").
        ``fit`` only.
    solver : {"sgd", "moments"}, default "sgd"
        "sgd": one pass of IWP-SGD (every loss).  "moments": the exact minimizer of the quadratic
        loss from the release's debiased second moments (needs loss='quadratic'): one read,
        no step, alpha ("auto", a number or a list) chosen on 5 folds of the same pass with a
        positive-definite guard and the constant model as a candidate (docs/tuning.md "The
        moment learner"; ``solver_``, ``tuning_``, ``coef_stderr_``).  ``partial_fit`` adds
        each batch's moments to the pass's sums and solves again (any split of the rows: the
        statistics of one ``fit``); a loaded model holds no sums to continue.  Not with
        sample_weight or checkpoints yet.

    Attributes
    ----------
    coef_ : ndarray of shape (1, p) (two classes) or (k, p)
    intercept_ : ndarray of shape (1,) or (k,)
    classes_ : ndarray of the label values (the user's values, e.g. 0/1 or strings)
    n_rows_seen_ : int
    release_spec_ : ReleaseSpec or None (the release the model was trained on)
    telemetry_ : dict (projection and cap hits, largest noise energy, gradient-norm statistics)
    class_weight_, class_shares_ : ndarray (one per class, ``classes_`` order) or None
        The class weights the fit used, and the shares "balanced" estimated.

    Examples
    --------
    >>> import numpy as np, iwpfast
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, (2000, 2)); y = np.where(X[:, 0] > 0, 1, 0)
    >>> model = iwpfast.IWPClassifier(alpha=0.1, learning_rate=0.1, progress=False)
    >>> model = model.fit(X + rng.normal(0, 0.3, X.shape), y, noise_var=0.09, epsilon_y=None)
    >>> model.coef_.shape, model.classes_.tolist(), bool(model.coef_[0, 0] > 0)
    ((1, 2), [0, 1], True)
    """

    # scikit-learn's check_estimator passes except these (check -> reason); give them as its
    # expected_failed_checks: check_estimator(est,
    # expected_failed_checks=est.sklearn_expected_failed_checks)
    sklearn_expected_failed_checks: MappingProxyType = MappingProxyType(
        dict([SAMPLE_WEIGHT_EQUIVALENCE, CLASS_WEIGHT_EXTREME]))

    # predict_proba exists only where the loss defines probabilities (scikit-learn asks with
    # hasattr): see _OnlyForLogistic


IWPClassifier.predict_proba = _OnlyForLogistic(  # type: ignore[method-assign, assignment]
    _Classifier.predict_proba)
