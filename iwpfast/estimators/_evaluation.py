"""Prediction and evaluation of a fitted estimator: scores, clean-data score and risk, and the
private risk on a released hold-out.

``EvaluationMixin`` is the part of ``IWPBase`` that reads data with a fitted model: every read
goes through the training reader (``_read``), raw units are scaled as the release did
(``_in_model_units``), and the heads (``_heads``) answer what depends on one head or k.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..estimates import RiskEstimate
from ..exceptions import InvalidInputError, NumericalWarning
from ._fields import EstimatorFields
from ._heads import Heads, SingleHead
from ._inputs import (
    column_names,
    dense_numeric,
    is_array_like,
    is_tabular,
    on_filesystem,
    refuse_unsupported,
)
from ._state import PassPlan
from ._units import UnitsCheck, resolve_scaled, scale_and_clip


class EvaluationMixin(EstimatorFields):
    """The prediction and evaluation side of ``IWPBase``."""

    # ---- prediction ----------------------------------------------------------------------------
    def _theta_b(self):
        """(theta, b) of the fitted model: (p,) and a float, or (k, p) and (k,) for k heads."""
        self._check_fitted()
        return self._fitted_heads().theta_b(self)

    def _fitted_heads(self) -> Heads:
        """The heads of the fitted model (one head when it came without a pass)."""
        ps = self._pass
        return ps.heads if ps is not None and ps.heads is not None else SingleHead(task=self._task)

    def _read(self, source, features, label=None):
        """Yield (feature columns, labels or None) chunk by chunk: the one read path of every
        estimator call, the training reader (``ChunkReader``: only these columns decoded, in a
        background thread; a null or non-finite value raises the error ``fit`` gives, naming the
        file, row group and row)."""
        from ..io.reader import ChunkReader
        reader = ChunkReader(source, [list(features)], [] if label is None else [label],
                             chunk_rows=None if self.chunk_rows is None else int(self.chunk_rows))
        for chunk in reader:
            yield list(chunk.features[0]), (None if label is None else chunk.labels[label])

    def _feature_columns(self, X, features=None):
        """Yield lists of feature columns of X (chunk by chunk, the model's feature order), checked
        against the fit: values must be finite, as in ``fit``.

        X: an (n, p) array (read without a copy when its columns are contiguous), or anything with
        named columns (DataFrame, pyarrow Table, a file path or any source open_source accepts).
        ``features``: the columns of X to use, in the model's feature order (default: the model's
        feature names).
        """
        self._check_fitted()
        p = self.n_features_in_
        model_names = list(self.features_)
        refuse_unsupported(X)
        if is_array_like(X):
            from ..io.arrays import ArraySource
            Xa = dense_numeric(X)
            if Xa.ndim != 2:
                raise InvalidInputError(
                    f"Expected a 2-D array (rows, features), got shape {Xa.shape}. Reshape your data "
                    "with X.reshape(-1, 1) for a single feature or X.reshape(1, -1) for a single row")
            if Xa.shape[1] != p:
                raise InvalidInputError(
                    f"X has {Xa.shape[1]} features, but {type(self).__name__} is expecting {p} features "
                    f"as input (the model's features, in order: {model_names}); "
                    f"pass an (n, {p}) array with the columns in that order")
            if not np.issubdtype(Xa.dtype, np.number):
                raise InvalidInputError(f"X must be numeric (got dtype {Xa.dtype}); encode non-numeric "
                                        "columns as numbers first")
            if Xa.shape[0] == 0:
                return
            names = [f"x{j}" for j in range(p)]
            source = ArraySource(Xa, None, names, None, description="<X array>")
            for cols, _ in self._read(source, names):
                yield cols
            return
        wanted = self._wanted_features(features)
        from ..io.sources import open_source
        src = self._raw_view(open_source(X), wanted)
        self._check_names(list(src.full_schema.names), wanted, model_names)
        for cols, _ in self._read(src, wanted):
            yield cols

    def _raw_view(self, src, wanted):
        """``src`` as the model reads it: a model fitted on a release with categorical columns
        (``feature_map_``) maps a raw table -- its input columns, strings included -- to the
        released coordinates exactly as the release did (``FeatureMapSource``); a source that
        already holds the coordinates (a release, or data mapped before) is read as it is."""
        fmap = getattr(self, "feature_map_", None)
        names = set(src.full_schema.names)
        if fmap is None or all(c in names for c in wanted):
            return src
        from ..io.views import FeatureMapSource
        bound, norm, _ = self._release_clip()
        return FeatureMapSource(src, fmap.with_clip_norm(norm), bound)

    @property
    def coef_by_feature_(self) -> dict:
        """The coefficients grouped by input column: ``{column: {category: coef}}`` for a
        categorical column of a model with a ``feature_map_``, ``{column: coef}`` for a numeric
        one (one head; k heads: arrays of k).  ``coef_`` itself stays flat over the released
        coordinates (``features_``)."""
        self._check_fitted()
        coef = np.asarray(self.coef_, dtype=np.float64)
        flat = coef.reshape(-1) if coef.ndim == 1 or coef.shape[0] == 1 else None
        index = {n: j for j, n in enumerate(self.features_)}

        def value(name):
            j = index[name]
            return float(flat[j]) if flat is not None else coef[:, j].copy()

        fmap = getattr(self, "feature_map_", None)
        if fmap is None:
            return {n: value(n) for n in self.features_}
        out: dict = {}
        for c in fmap.inputs:
            if c.kind == "numeric":
                out[c.name] = value(c.name)
            else:
                out[c.name] = {cat: value(coord) for cat, coord in
                               zip(c.categories or (), c.coordinate_names(), strict=True)}
        return out

    def _model_ranges(self):
        """(lo, hi, bound) of the model's features in the model's order, or None when the model
        has no declared ranges (then raw units are its training units)."""
        ranges = getattr(self, "feature_ranges_", None)
        if not ranges:
            return None
        names = list(self.features_)
        lo = np.array([float(ranges[n][0]) for n in names])
        hi = np.array([float(ranges[n][1]) for n in names])
        # mapped as the release did (``_release_clip``): its public columns clipped to their
        # ranges only, the others to the release's ball (L2; Laplace: L1)
        bound, _, public = self._release_clip()
        private = None if not public else np.array([n not in public for n in names])
        return lo, hi, bound, private

    def _release_clip(self) -> tuple[float, str, set]:
        """(radius, norm, public columns) of the vector clip of raw rows: the release's
        (``release_spec_``: ``privacy.scaling``'s ``clip_bound_of`` and ``clip_norm_of``), or
        without a release (clean data with ``ranges=``) the model's ``feature_bound_`` in L2."""
        spec = getattr(self, "release_spec_", None)
        if spec is None or not hasattr(spec, "label_only"):
            return float(getattr(self, "feature_bound_", np.inf)), "L2", set()
        from ..privacy.scaling import clip_bound_of, clip_norm_of
        return clip_bound_of(spec), clip_norm_of(spec), set(spec.public_features)

    def _in_model_units(self, batches, scaled: bool, where: str, stacklevel: int = 4):
        """Yield the feature columns of ``batches`` in the model's space (``_units``), then warn
        once if the data did not look like the units assumed."""
        ranges = self._model_ranges()
        norm = self._release_clip()[1]
        check = UnitsCheck(list(self.features_), None if ranges is None else ranges[0],
                           None if ranges is None else ranges[1], scaled, where)
        for cols in batches:
            check.add(cols)
            if ranges is not None and not scaled:
                lo, hi, bound, private = ranges
                cols = scale_and_clip(cols, lo, hi, bound, private, norm)
            yield cols
        check.warn(stacklevel=stacklevel)

    def _wanted_features(self, features) -> list[str]:
        """The columns to read for the model's features: ``features`` (one per model feature, in
        the model's order) or the model's own names."""
        model_names = list(self.features_)
        wanted = list(features) if features is not None else model_names
        if len(wanted) != len(model_names):
            raise InvalidInputError(
                f"features={wanted} names {len(wanted)} columns but the model has {len(model_names)}: "
                f"{model_names}; name one column per model feature, in that order (CLI: --features)")
        return wanted

    @staticmethod
    def _check_names(names, wanted, model_names):
        missing = [c for c in wanted if c not in names]
        if missing:
            extra = [c for c in names if c not in wanted]
            raise InvalidInputError(
                f"the data lacks the model's feature columns {missing} (model features: {model_names}; "
                f"data columns not used: {extra}); rename the columns or pass features=[...] mapping "
                "them in the model's order (CLI: --features)")

    @staticmethod
    def _linear_scores(theta, b, cols) -> np.ndarray:
        """``b + sum_j theta_j * cols[j]``: one vectorized pass per feature column; with (k, p)
        coefficients and k intercepts (one-vs-rest heads) the (n, k) scores."""
        if np.ndim(theta) == 2:
            return np.column_stack([EvaluationMixin._linear_scores(t, bb, cols)
                                    for t, bb in zip(theta, b, strict=True)])
        u = np.full(len(cols[0]), b)
        for t, c in zip(theta, cols, strict=True):
            u += t * c
        return u

    def decision_function(self, X, *, features=None, scaled=None, raw=None,
                          filesystem=None) -> np.ndarray:
        """The linear score ``u = theta^T x + b`` for every row of X.

        X is in raw units by default: a model with declared ranges (fitted on a release, or with
        ``fit(..., ranges=...)``) scales and clips it as the release did.  ``scaled=True``: X is
        already in the model's [-1, 1] space.  (``raw=True`` is the older spelling of the default.)
        ``filesystem``: the pyarrow or fsspec filesystem X's path lies on (as for ``fit``).
        """
        X = on_filesystem(X, filesystem)
        return self._model_scores(X, features, resolve_scaled(scaled, raw), "decision_function")

    def _model_scores(self, X, features, scaled: bool, where: str, stacklevel: int = 5) -> np.ndarray:
        """``theta^T x + b`` of every row of X in the model's space (``decision_function`` of a
        classifier; a regressor's maps it to the target's units)."""
        theta, b = self._theta_b()
        out = []
        for cols in self._in_model_units(self._feature_columns(X, features), scaled, where,
                                         stacklevel):
            out.append(self._linear_scores(theta, b, cols))
        return np.concatenate(out) if out else np.zeros(0)

    def _clean_xy(self, X, y, features, label, scaled, where="score", sample_weight=None):
        """(scores in the model's space, targets in the kernel's encoding, weights or None) on
        clean data: arrays or a source with a label; ``sample_weight`` an array, or a column of
        the source / DataFrame."""
        if y is not None:
            u = self._model_scores(X, features, scaled, where)
            targets = self._encode_clean_targets(np.asarray(y).reshape(-1))
            if sample_weight is None:
                return u, targets, None
            from ._inputs import column, sample_weight_array
            if isinstance(sample_weight, str) and is_tabular(X):
                if sample_weight not in column_names(X):
                    raise InvalidInputError(
                        f"sample_weight column {sample_weight!r} not in X (its columns: "
                        f"{', '.join(column_names(X))}); name an existing column or pass an array")
                sample_weight = np.asarray(column(X, sample_weight))
            return u, targets, sample_weight_array(sample_weight, u.shape[0])
        self._check_fitted()
        from ..io.sources import open_source
        src = self._raw_view(open_source(X), self._wanted_features(features))
        names = list(src.full_schema.names)
        lab = label or self.label_
        if lab is None or lab not in names:
            what = ("which column is the label is unknown" if lab is None
                    else f"the data has no label column {lab!r}")
            raise InvalidInputError(f"{what}: pass label=... naming it (CLI: --label; columns: "
                                    f"{', '.join(names)})")
        wanted = self._wanted_features(features)
        self._check_names(names, wanted, list(self.features_))
        from ._inputs import _check_weight_column
        _check_weight_column(sample_weight, src, wanted, lab)
        theta, b = self._theta_b()
        us, ys, ws = [], [], []
        source = self._targets_view(src, lab, clean=True)
        # the weight column is read with the features, then split off
        extra = [] if sample_weight is None else [sample_weight]

        def batches():
            for cols, labels in self._read(source, wanted + extra, lab):
                ys.append(np.asarray(labels, dtype=np.float64))
                if extra:
                    ws.append(np.asarray(cols[-1], dtype=np.float64))
                    cols = cols[:-1]
                yield cols

        for cols in self._in_model_units(batches(), scaled, where):
            us.append(self._linear_scores(theta, b, cols))
        weights = None
        if extra:
            from ..sgd.state import first_invalid_weight
            weights = np.concatenate(ws)
            bad = first_invalid_weight(weights)
            if bad >= 0:
                raise InvalidInputError(f"sample weight {weights[bad]!r} in column {sample_weight!r} "
                                        f"at row {bad}: sample weights must be finite and >= 0")
        return np.concatenate(us), np.concatenate(ys), weights

    def score_and_risk(self, X, y=None, *, features=None, label=None, scaled=None, raw=None,
                       filesystem=None) -> tuple[float, float]:
        """``(score(...), risk(...))`` on clean data from one pass over X (the CLI's ``evaluate``);
        arguments as for ``score``."""
        X = on_filesystem(X, filesystem)
        u, yv, _ = self._clean_xy(X, y, features, label, resolve_scaled(scaled, raw), "evaluate")
        return self._score_from(u, yv), self._risk_from(u, yv)

    def score(self, X, y=None, sample_weight=None, *, features=None, label=None, scaled=None,
              raw=None, filesystem=None) -> float:
        """Accuracy (classifier) or R^2 (regressor) on clean data: arrays ``(X, y)`` or a source
        with the label column.  X in raw units unless ``scaled=True`` (see decision_function).
        ``sample_weight`` (an array, or a column of a source or DataFrame): the weighted accuracy
        sum_i s_i [correct_i] / sum_i s_i, or the weighted R^2 (scikit-learn's definitions).
        ``filesystem``: the pyarrow or fsspec filesystem X's path lies on (as for ``fit``)."""
        X = on_filesystem(X, filesystem)
        return self._score_from(*self._clean_xy(X, y, features, label, resolve_scaled(scaled, raw),
                                                sample_weight=sample_weight))

    def risk(self, X, y=None, sample_weight=None, *, features=None, label=None, scaled=None,
             raw=None, filesystem=None) -> float:
        """Mean (unregularized) loss on clean data, the loss the model minimizes.  X in raw units
        unless ``scaled=True`` (see decision_function).  ``sample_weight`` (an array, or a column
        of a source or DataFrame): the weighted risk (1/n) sum_i s_i loss_i that a weighted fit
        minimizes (divided by n, not by the sum of the weights).  ``filesystem``: the pyarrow or
        fsspec filesystem X's path lies on (as for ``fit``)."""
        X = on_filesystem(X, filesystem)
        return self._risk_from(*self._clean_xy(X, y, features, label, resolve_scaled(scaled, raw),
                                               "risk", sample_weight=sample_weight))

    # ---- private validation --------------------------------------------------------------------
    def _holdout(self, X, y, noise_kw: dict, *, features, label, override,
                 sample_weight=None) -> PassPlan:
        """The hold-out of ``private_risk``, its features checked against the model's."""
        plan = self._prepare_source(X, y, noise_kw=noise_kw, features=features, label=label,
                                    override=override, sample_weight=sample_weight)
        if len(plan.features) != self.n_features_in_:
            raise InvalidInputError(
                f"the hold-out has {len(plan.features)} features {plan.features}, the model "
                f"{self.n_features_in_} {self.features_}; pass features=[...] in the model's order")
        return plan

    def private_risk(self, X, y=None, sample_weight=None, *, noise_var=None, epsilon_y=None,
                     label_keep_prob=None, target_noise_var=None, features=None, label=None,
                     override=False, filesystem=None, class_weighted=None) -> RiskEstimate:
        """Unbiased estimate of the *clean* risk from a *private* hold-out, with its standard error
        and whether to believe them.

        Each row contributes the IWP loss at the fitted (theta, b), whose expectation over the
        release noise is the clean loss; the estimate is their mean and the standard error is their
        sample sd / sqrt(n) (rows are independent).  For a release file the noise parameters come
        from its metadata.  The logistic loss uses the fitted truncation K (its estimate is then
        unbiased up to the K-term truncation bias).

        The returned ``RiskEstimate`` also carries reliability diagnostics (the rows that
        effectively carry the sum, the largest row's share, sigma^2 |theta|^2 and the variance
        factor it implies); when they show that a few rows dominate, or that the noise makes the
        per-row values too heavy-tailed for this many rows, ``reliable`` is False, ``ci95`` is None
        and a NumericalWarning says why (``iwpfast.estimates``: the thresholds).

        ``sample_weight`` (public row weights: an array, or a column of the hold-out): the
        estimate of the weighted risk (1/n) sum_i s_i loss_i, the mean of s_i times each row's IWP
        loss (unbiased for it, as for the training gradient; docs/math.md "Sample weights").

        ``class_weighted``: which risk.  None (default): the model's own objective, the
        class-weighted risk (1/n) sum_i w_{y_i} loss_i when it was fitted with ``class_weight``
        (weights ``class_weight_``), the plain risk otherwise; False: the plain risk (the yardstick
        to compare a class-weighted model with an unweighted one); True: the class-weighted risk
        (an error for a model without class weights).  The weighted estimate applies the label
        inverse to y -> w_y loss(u, y), the per-row loss the model was trained on and that
        'auto' scored its heads by, so it is unbiased for the clean weighted risk; its
        ``class_weight`` field holds the weights, its ``baseline`` is the best constant model
        under the same weights, and ``unweighted`` the plain estimate of the same rows (one
        read).  A plain estimate has ``class_weight`` None.

        ``filesystem``: the pyarrow or fsspec filesystem X's path lies on (as for ``fit``).
        """
        X = on_filesystem(X, filesystem)
        self._check_fitted()
        class_weights = self._risk_class_weights(class_weighted)
        from ._rr import rr_private_risk, rr_release_spec
        rr_spec = rr_release_spec(X) if y is None else None
        if rr_spec is not None and class_weights is not None:
            raise InvalidInputError(
                "the class-weighted private risk is not implemented on a hold-out with "
                "randomized-response categorical columns (their learner refuses class_weight); "
                "pass class_weighted=False for the plain risk")
        if rr_spec is not None:
            # a hold-out with randomized-response codes: the exponential loss's exact inverse
            # (its noise is the file's; explicit noise arguments do not apply)
            est = rr_private_risk(self, X, rr_spec)
        else:
            plan = self._holdout(
                X, y, dict(noise_var=noise_var, epsilon_y=epsilon_y,
                           label_keep_prob=label_keep_prob, target_noise_var=target_noise_var,
                           feature_bound=None),
                features=features, label=label, override=override, sample_weight=sample_weight)
            # one head: the mean of the rows' IWP losses; k heads: the sum over the heads, each
            # debiased with the hold-out's k-ary label weights
            est = self._fitted_heads().risk_estimate(self, plan, epsilon_y, class_weights)
        if not est.reliable:
            warnings.warn("private_risk: the estimate is not reliable: " + " ".join(est.warnings),
                          NumericalWarning, stacklevel=2)
        return est

    def _risk_class_weights(self, class_weighted) -> np.ndarray | None:
        """The class weights of the risk ``class_weighted`` asks for (``private_risk``), or None
        for the plain risk."""
        if class_weighted is not None and not isinstance(class_weighted, (bool, np.bool_)):
            raise InvalidInputError(
                f"class_weighted={class_weighted!r}; use None (the model's own objective), True "
                "(the class-weighted risk) or False (the plain risk)")
        weights = getattr(self, "class_weight_", None)
        if class_weighted is False:
            return None
        if weights is None:
            if class_weighted:
                raise InvalidInputError(
                    f"class_weighted=True but this {type(self).__name__} was fitted without "
                    "class_weight (class_weight_ is None): there are no class weights to weigh "
                    "the risk by; pass class_weighted=None or False for the plain risk, or fit "
                    "with class_weight='balanced' or {class: weight}")
            return None
        return np.asarray(weights, dtype=np.float64)

    def _iter_xy(self, source, feats, lab, weight_column=None):
        """Yield (feature columns, targets in the kernel's encoding, sample weights or None) per
        chunk of a prepared source (the weights read with the features and checked)."""
        from ..io.arrays import ArraySource
        from ..sgd.state import first_invalid_weight
        if not isinstance(source, ArraySource):       # arrays: labels encoded by the source
            source = self._targets_view(source, lab)
        extra = [] if weight_column is None else [weight_column]
        row = 0
        for cols, labels in self._read(source, list(feats) + extra, lab):
            weights = None
            if extra:
                weights = np.asarray(cols[-1], dtype=np.float64)
                cols = cols[:-1]
                bad = first_invalid_weight(weights)
                if bad >= 0:
                    raise InvalidInputError(
                        f"sample weight {weights[bad]!r} in column {weight_column!r} at row "
                        f"{row + bad}: sample weights must be finite and >= 0")
            row += len(labels)
            yield cols, np.asarray(labels, dtype=np.float64), weights

    def _targets_view(self, source, lab, clean: bool = False):
        """``source`` with the label column in the kernel's encoding of this fitted model
        (``_encode_targets_stream``, one call per batch), for the evaluation reads; ``clean``:
        the labels are the user's values (``_encode_clean_targets``: none the model never saw)."""
        from ..io.sources import open_source
        from ..io.views import PartSource, column_mapper
        encode = self._encode_clean_targets if clean else self._encode_targets_stream
        return PartSource(open_source(source), mapper=column_mapper({lab: encode}))

    def _encode_targets_stream(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(y, dtype=np.float64)

    def _encode_clean_targets(self, y: np.ndarray) -> np.ndarray:
        """Clean labels (score, risk, evaluate) in the kernel's encoding; classifiers refuse
        values the model never saw."""
        return self._encode_targets_stream(y)
