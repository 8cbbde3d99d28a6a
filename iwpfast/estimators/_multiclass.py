"""k > 2 classes: IWPClassifier's one-vs-rest heads, trained in one scan (docs/math.md "k classes").

A k-class label (a release written with ``classes=[...]``: class indices 0..k-1 after k-ary
randomized response; or arrays with ``fit(X, y, classes=[...], epsilon_y=...)``) is learned as k
binary heads, head c for "class c against the rest", each with the label weights of k-ary
randomized response (``iwpfast.label_noise.label_weight_table``).  The driver runs the k heads as
one kernel call per chunk (``sgd.engine.run_chunk_heads``): every batch of rows is read once and
used by every head while it is in cache.  Two classes stay the binary estimator of
``classifier.py``, bit for bit.

``OneVsRestMixin`` adds to the classifier what differs: the label encoding (class indices), the
pass over k heads, the fitted (k, p) coefficients, the argmax prediction, the normalized
one-vs-rest probabilities and the private risk summed over the heads.  The pass's k configs and
states live in ``PassState.ovr`` (``OneVsRest``).
"""
from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..estimates import class_indices
from ..exceptions import InvalidInputError, NumericalWarning
from ..label_noise import check_classes, label_weight_table
from ._inputs import on_filesystem

PUBLIC_TABLE = (1.0, 0.0, 1.0, 0.0)


def class_codes(values, classes: list, first_row: int = 0) -> np.ndarray:
    """The index of each label in ``classes`` (float64); a label outside them names its row
    (``first_row`` + its position in this chunk)."""
    values = np.asarray(values)
    try:
        return class_indices(values, classes)[0].astype(np.float64)
    except InvalidInputError:
        if first_row == 0:
            raise
    codes = np.full(values.shape[0], -1)
    for c, value in enumerate(classes):
        codes[values == value] = c
    row = int(np.flatnonzero(codes < 0)[0])
    raise InvalidInputError(f"y[{first_row + row}] = {values[row]!r} is not one of the classes "
                            f"{list(classes)!r}; declare every class")


def _at_most_two_values(y: np.ndarray) -> bool:
    """Whether y holds at most two distinct values (numbers: min/max and one comparison pass)."""
    y = np.asarray(y)
    if y.dtype.kind == "b":
        return True
    if y.dtype.kind in "iuf" and y.size:
        low, high = y.min(), y.max()
        if y.dtype.kind in "iu" and int(high) - int(low) <= 1:
            return True     # integers: no value lies between (the common {0, 1} labels: 2 passes, not 6)
        return bool(((y == low) | (y == high)).all())
    return np.unique(y).size <= 2


@dataclass
class OneVsRest:
    """The one-vs-rest side of a pass: the declared classes (head c is classes[c]), the label
    weights of k-ary randomized response, and the k heads' configs and SGD states."""

    classes: np.ndarray
    table: tuple = PUBLIC_TABLE
    configs: list = field(default_factory=list)
    states: list | None = None

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def head_names(self) -> list[str]:
        return [f"class_{c}" for c in range(self.n_classes)]

    def head_configs(self, base) -> list:
        """k configs from the pass's base config: head c reads class index c; mode iwp uses the
        k-ary label weights (the binary keep probability of the base config does not apply)."""
        weights = self.table if base.mode == "iwp" else None
        return [dataclasses.replace(base, label_keep_prob=None, label_class=c, label_weights=weights)
                for c in range(self.n_classes)]


def equivalent_keep_prob(table) -> float | None:
    """The binary keep probability S whose label factor 1/(2S - 1)^2 equals the largest
    (|w_z| + |w_-z|)^2 of a one-vs-rest head's label weights (the bound of the label's part of
    the IWP gradient's second moment; two classes: exactly S).  None for public labels.  The
    derived step of "auto" (``tuning.derived_step``) reads the label noise through it."""
    factor = max((abs(table[0]) + abs(table[1])) ** 2, (abs(table[2]) + abs(table[3])) ** 2)
    if factor <= 1.0:
        return None
    return 0.5 * (1.0 + 1.0 / float(np.sqrt(factor)))


def release_table(meta: dict) -> tuple:
    """The label weights of a k-class release, recomputed from its (checked) epsilon_y."""
    eps = meta.get("epsilon_y")
    return PUBLIC_TABLE if eps is None else label_weight_table(eps, len(meta["classes"]))


class OneVsRestMixin:
    """The k > 2 class side of IWPClassifier (used only when the pass has ``PassState.ovr``)."""

    # (declared classes, epsilon_y) of the fit in progress; None outside fit
    _fit_request = None

    def _ovr(self) -> OneVsRest | None:
        ps = self._pass
        return None if ps is None else ps.ovr

    # ---- fitting -----------------------------------------------------------------------------
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

    def _start_ovr(self, classes, table) -> None:
        self._pass.ovr = OneVsRest(classes=np.asarray(classes), table=table)

    def _target_encoder(self, y: np.ndarray):
        ovr = self._ovr()
        if ovr is not None:                     # a fitted k-class model reading arrays
            classes = list(ovr.classes)
            return lambda values, first_row, dtype=None: class_codes(values, classes, first_row)
        if self._fit_request is None:
            return super()._target_encoder(y)
        declared, eps, keep = self._fit_request
        if declared is None:
            if _at_most_two_values(y):
                return super()._target_encoder(y)
            if y.dtype.kind == "f" and not np.array_equal(y, np.round(y)):
                raise InvalidInputError(
                    "Unknown label type: continuous (y has non-integer values, e.g. "
                    f"{y[np.flatnonzero(y != np.round(y))[0]]!r}): IWPClassifier needs class labels; "
                    "for a numeric target use IWPRegressor")
            values = tuple(np.unique(y).tolist())
            if eps is not None or keep is not None:
                raise InvalidInputError(
                    f"y has {len(values)} classes and epsilon_y is given: declare the classes of the "
                    "k-ary randomized response with classes=[...] (its q and r depend on k, and the "
                    "classes seen in y need not be all of them)")
        else:
            values = declared
        if len(values) == 2:
            # two declared classes: the binary head, classes[1] the positive one (as a release)
            self._pass.classes = np.asarray(values)
            return lambda chunk, first_row, dtype=None: np.where(
                class_codes(chunk, list(values), first_row) == 1, 1.0, -1.0)
        if keep is not None:
            raise InvalidInputError("label_keep_prob is the binary keep probability; for k classes "
                                    "give epsilon_y (and classes=[...])")
        self._start_ovr(values, PUBLIC_TABLE if eps is None else label_weight_table(eps, len(values)))
        return lambda chunk, first_row, dtype=None: class_codes(chunk, list(values), first_row)

    def _label_mapper_for(self, source, lab):
        meta = source.release_metadata if hasattr(source, "release_metadata") else None
        declared, eps, _ = self._fit_request or (None, None, None)
        ovr = self._ovr()
        if ovr is not None and self._pass.started:
            # a later partial_fit call of a k-class pass: the same classes and label weights
            classes = list(ovr.classes)
            if meta is not None and meta.get("label_encoding") == "class_index":
                if list(meta["classes"]) != classes or tuple(release_table(meta)) != tuple(ovr.table):
                    raise InvalidInputError(f"this release declares the classes {meta['classes']} "
                                            f"(or another epsilon_y) but the pass learns {classes}")
                return None
            from ..io.views import column_mapper
            return column_mapper({lab: lambda yv: class_codes(yv, classes)})
        if meta is not None and meta.get("label_encoding") == "class_index":
            classes = list(meta["classes"])
            if declared is not None and list(declared) != classes:
                raise InvalidInputError(f"classes={list(declared)} but the release declares {classes}; "
                                        "drop classes= (the release's own are used)")
            self._start_ovr(classes, release_table(meta))
            return None                         # class indices already
        if declared is not None and len(declared) > 2:
            # a file of clean or explicitly-noised data holding the label's values
            from ..io.views import column_mapper
            self._start_ovr(declared, PUBLIC_TABLE if eps is None
                            else label_weight_table(eps, len(declared)))
            return column_mapper({lab: lambda yv: class_codes(yv, list(declared))})
        return super()._label_mapper_for(source, lab)

    # ---- "auto" hyper-parameters for k classes ----------------------------------------------
    def _grid_label_keep_prob(self, noise):
        ovr = self._ovr()
        if ovr is None:
            return super()._grid_label_keep_prob(noise)
        return equivalent_keep_prob(ovr.table)

    def _tune(self, plan, grid, kw, scaling):
        """k classes: every (grid point, class) pair is a head of the same scan, scored on the
        same hold-out, and each class chooses its own point by the same rule
        (``tuning.tune_stream_classes``; docs/tuning.md "k classes")."""
        ovr = self._ovr()
        if ovr is None:
            return super()._tune(plan, grid, kw, scaling)
        from ..sgd import driver, tuning
        table = ovr.table if grid.mode != "clean" else PUBLIC_TABLE
        results = tuning.tune_stream_classes(
            plan.source, plan.features, plan.label, grid.points,
            lambda pt, rows: ovr.head_configs(grid.make_config(pt, rows)),
            ovr.n_classes, label_table=table, **kw)
        chosen = [r.points[r.chosen].name for r in results]
        configs = [r.configs[name] for r, name in zip(results, chosen, strict=True)]
        plan.config = configs[0]
        self._start_pass(plan)
        self._set_scaling(scaling, plan.features)
        ps = self._pass
        ovr.configs = configs
        ovr.states = [r.states[name] for r, name in zip(results, chosen, strict=True)]
        ps.config, ps.head = ovr.configs[0], ovr.states[0]
        names = ovr.head_names()
        self._update_fitted(ps.head, {n: dict(r.telemetry.get(c, {}))
                                      for n, r, c in zip(names, results, chosen, strict=True)})
        self.alpha_ = np.array([cfg.alpha for cfg in configs])
        self.learning_rate_ = np.array([cfg.learning_rate for cfg in configs])
        self.tuning_ = self._class_tables([r.table() for r in results], [r.rule for r in results],
                                          [r.notes for r in results], grid, results[0])
        for note in self.tuning_["notes"][len(grid.notes):]:
            warnings.warn(f"auto hyper-parameters: {note}", NumericalWarning, stacklevel=4)
        for name, cfg, tel in zip(names, configs, self.telemetry_per_class_, strict=True):
            driver._warn_telemetry(name, cfg, dict(tel), chosen=self.variance_cap is None)

    def _class_tables(self, tables, rules, notes, grid, first) -> dict:
        """``tuning_`` of k classes: the classes' tables one after the other, with a column
        ``class`` (the class each head learns: ``pandas.DataFrame`` of the list columns shows
        every head, filter by class for one class's table); ``rule`` the rule of every class
        (one string when they agree), notes prefixed by their class."""
        classes = [c.item() if hasattr(c, "item") else c for c in self._ovr().classes]
        merged: dict = {"class": [c for c, t in zip(classes, tables, strict=True)
                                  for _ in t["alpha"]]}
        for key in tables[0]:
            merged[key] = [v for t in tables for v in t[key]]
        rule = rules[0] if len(set(rules)) == 1 else "; ".join(
            f"class {c!r}: {r}" for c, r in zip(classes, rules, strict=True))
        # a note several classes share is said once, naming them (a grid point dropped for
        # every class would otherwise be k identical lines)
        by_text: dict = {}
        for c, ns in zip(classes, notes, strict=True):
            for n in ns:
                by_text.setdefault(n, []).append(c)
        per_class_notes = [
            (f"every class: {n}" if len(cs) == len(classes) and len(cs) > 1 else
             ("class " if len(cs) == 1 else "classes ") + ", ".join(map(repr, cs)) + f": {n}")
            for n, cs in by_text.items()]
        return dict(merged, rule=rule, n_train=first.n_train, n_validation=first.n_validation,
                    passes=first.passes, heads=first.head_updates_per_row, variance_cap=grid.cap,
                    notes=list(grid.notes) + per_class_notes)

    def _fit_untuned_centre(self, plan, mapper, grid, scaling):
        super()._fit_untuned_centre(plan, mapper, grid, scaling)
        ovr = self._ovr()
        if ovr is None:
            return
        # the same centre for every class's head: the per-class attributes and table say so
        k = ovr.n_classes
        t = self.tuning_
        table = {key: t[key] * k for key in ("alpha", "learning_rate", "risk", "stderr", "reliable",
                                             "effective_rows", "noise_energy", "chosen")}
        table["capped"] = [bool(tel.get("capped")) for tel in self.telemetry_per_class_]
        table["on_sphere"] = [bool(tel.get("on_sphere")) for tel in self.telemetry_per_class_]
        table["class"] = [c.item() if hasattr(c, "item") else c for c in ovr.classes]
        self.tuning_ = dict(t, **table, heads=k)
        self.alpha_ = np.full(k, float(self.alpha_))
        self.learning_rate_ = np.full(k, float(self.learning_rate_))

    def _validation_source(self, validation, feats, lab, noise):
        src = super()._validation_source(validation, feats, lab, noise)
        ovr = self._ovr()
        if ovr is not None:
            meta = src.release_metadata
            if meta.get("label_encoding") != "class_index" or \
                    list(meta.get("classes", [])) != list(ovr.classes) or \
                    tuple(release_table(meta)) != tuple(ovr.table):
                raise InvalidInputError(
                    f"the validation release must be a k-class release of the same classes "
                    f"{list(ovr.classes)} and label budget as the training data (iwpfast release "
                    "... --classes ...); its labels are scored one class against the rest")
        return src

    def partial_fit(self, X, y=None, sample_weight=None, *, classes=None, **kwargs):
        """``IWPBase.partial_fit``; k > 2 classes when all of them are given on the pass's first
        call (``classes=[...]``, as scikit-learn's SGDClassifier; with ``epsilon_y`` they set
        k-ary randomized response's weights) or read from a k-class release: k one-vs-rest heads
        updated from every batch, as ``fit`` trains them.  Later calls may repeat ``classes``
        (the same list) or leave it out; a label outside them is an error naming its row."""
        ovr = self._ovr()
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

    def finalize(self):
        """Run the rows the k heads carry (fewer than a batch) as the pass's final partial batch."""
        ovr = self._ovr()
        if ovr is None or ovr.states is None:
            return super().finalize()
        self._check_fitted()
        if ovr.states[0].carry_n:
            from ..sgd import driver
            from ._base import _ENGINE
            names = ovr.head_names()
            configs = dict(zip(names, ovr.configs, strict=True))
            states = dict(zip(names, ovr.states, strict=True))
            driver.finish_states(configs, states, engine=_ENGINE, features=self._pass.features)
            self._update_fitted(ovr.states[0], {n: driver.head_telemetry(configs[n], states[n])
                                                for n in names})
        return self

    def _run(self, source, kwargs):
        ovr = self._ovr()
        if ovr is None:
            return super()._run(source, kwargs)
        from ..sgd import driver
        from ._base import _ENGINE
        ps = self._pass
        if not ovr.configs:
            ovr.configs = ovr.head_configs(ps.config)
        names = ovr.head_names()
        heads = [driver.Head(n, c, list(ps.features), ps.label, sample_weight=ps.sample_weight)
                 for n, c in zip(names, ovr.configs, strict=True)]
        kw = dict(progress=self.progress, engine=_ENGINE, **kwargs)
        if self.chunk_rows is not None:
            kw["chunk_rows"] = int(self.chunk_rows)
        if ovr.states is not None:
            kw["states"] = dict(zip(names, ovr.states, strict=True))
        if ps.noise.feature_bound is not None:
            kw["feature_bound"] = ps.noise.feature_bound
        result = driver.fit_stream(source, heads, **kw)
        ovr.configs = [result.configs.get(n, c) for n, c in zip(names, ovr.configs, strict=True)]
        ovr.states = [result.states[n] for n in names]
        ps.config = ovr.configs[0]
        ps.head = ovr.states[0]
        self._update_fitted(ps.head, {n: dict(result.telemetry.get(n, {})) for n in names})

    def _update_fitted(self, state, telemetry):
        ovr = self._ovr()
        if ovr is None:
            return super()._update_fitted(state, telemetry)
        averaged = self._pass.config.average_start >= 0
        coefs = [st.coef(averaged) for st in ovr.states]
        self.coef_ = np.stack([theta for theta, _ in coefs])
        self.intercept_ = (np.array([b for _, b in coefs]) if self.fit_intercept
                           else np.zeros(ovr.n_classes))
        self.classes_ = np.asarray(ovr.classes)
        per_class = []
        for name, st in zip(ovr.head_names(), ovr.states, strict=True):
            base = self._telemetry_from_state(st)
            base.update(telemetry.get(name, {}) if isinstance(telemetry, dict) else {})
            per_class.append(base)
        merged = dict(per_class[0])
        for key in ("projection_hits", "cap_hits"):
            merged[key] = sum(t.get(key, 0) for t in per_class)
        for key in ("max_noise_energy", "grad_norm_mean", "theta_norm"):
            if key in merged:
                merged[key] = max(t.get(key, 0.0) for t in per_class)
        for key in ("on_sphere", "capped"):
            if key in merged:
                merged[key] = any(t.get(key, False) for t in per_class)
        self.telemetry_ = merged
        self.telemetry_per_class_ = per_class
        self.n_rows_seen_ = int(merged["rows_seen"]) + ovr.states[0].carry_n
        self.n_iter_ = ovr.states[0].step

    # ---- prediction ----------------------------------------------------------------------------
    def _multiclass(self) -> bool:
        return np.ndim(getattr(self, "coef_", None)) == 2 and np.shape(self.coef_)[0] > 1

    def _theta_b(self):
        if not self._multiclass():
            return super()._theta_b()
        return np.asarray(self.coef_, dtype=np.float64), np.asarray(self.intercept_, dtype=np.float64)

    def decision_function(self, X, *, features=None, scaled=None, raw=None,
                          filesystem=None) -> np.ndarray:
        """The linear score ``theta^T x + b``: shape (n,) for two classes, (n, k) for k > 2 (column
        c: head c, classes_[c] against the rest).  Units and ``filesystem`` as in
        ``IWPBase.decision_function``."""
        return super().decision_function(X, features=features, scaled=scaled, raw=raw,
                                         filesystem=filesystem)

    def predict(self, X, *, features=None, scaled=None, raw=None,
                filesystem=None) -> np.ndarray:
        """The predicted class of each row: for k > 2 classes the argmax over the heads' scores.
        ``filesystem``: the pyarrow or fsspec filesystem X's path lies on (as for ``fit``)."""
        if not self._multiclass():
            return super().predict(X, features=features, scaled=scaled, raw=raw,
                                   filesystem=filesystem)
        u = self.decision_function(X, features=features, scaled=scaled, raw=raw,
                                   filesystem=filesystem)
        return self.classes_[np.argmax(u, axis=1)]

    def predict_proba(self, X, *, features=None, scaled=None, raw=None,
                      filesystem=None) -> np.ndarray:
        """Class probabilities (logistic loss: sigma(u); exponential: sigma(2u), see the binary
        predict_proba); for k > 2 classes the one-vs-rest probabilities of the heads normalized
        to sum to 1 over the classes.  ``filesystem``: the pyarrow or fsspec filesystem X's path
        lies on (as for ``fit``)."""
        if not self._multiclass():
            return super().predict_proba(X, features=features, scaled=scaled, raw=raw,
                                         filesystem=filesystem)
        self._check_probabilistic()
        u = self.decision_function(X, features=features, scaled=scaled, raw=raw,
                                   filesystem=filesystem)
        p = self._positive_probability(u)     # each head's one-vs-rest probability
        return p / p.sum(axis=1, keepdims=True)

    def _encode_targets_stream(self, y, first=None, column=None):
        if self._multiclass():
            return class_codes(np.asarray(y), list(self.classes_))
        return super()._encode_targets_stream(y, first, column)

    def _score_from(self, u, y, sample_weight=None) -> float:
        if np.ndim(u) == 2:                   # accuracy of the argmax against class indices
            return float(np.average(np.argmax(u, axis=1) == y, weights=sample_weight))
        return super()._score_from(u, y, sample_weight)

    def _risk_from(self, u, y, sample_weight=None) -> float:
        if np.ndim(u) == 2:                   # the one-vs-rest loss: sum over the heads, mean over rows
            from ..losses import derivative
            signs = np.where(np.asarray(y)[:, None] == np.arange(u.shape[1]), 1.0, -1.0)
            loss = np.sum(derivative(self.loss, 0, signs * u), axis=1)
            return float(np.mean(loss if sample_weight is None else loss * sample_weight))
        return super()._risk_from(u, y, sample_weight)

    def private_risk(self, X, y=None, sample_weight=None, *, noise_var=None, epsilon_y=None,
                     label_keep_prob=None, target_noise_var=None, features=None, label=None,
                     override=False, filesystem=None):
        """``IWPBase.private_risk``; for k > 2 classes the estimate of the one-vs-rest risk
        (the sum over the heads of f(y_c u_c), mean over rows), each head debiased with the
        k-ary label weights of the hold-out (a k-class release, or ``epsilon_y`` for arrays).
        ``filesystem``: the pyarrow or fsspec filesystem X's path lies on (as for ``fit``)."""
        X = on_filesystem(X, filesystem)
        if not self._multiclass():
            return super().private_risk(X, y, sample_weight, noise_var=noise_var,
                                        epsilon_y=epsilon_y,
                                        label_keep_prob=label_keep_prob,
                                        target_noise_var=target_noise_var, features=features,
                                        label=label, override=override)
        from ..estimates import RiskAccumulator, glm_loss_values_table
        from ..sgd.state import first_invalid_weight
        theta, b = self._theta_b()
        k = theta.shape[0]
        plan = self._holdout(
            X, y, dict(noise_var=noise_var, epsilon_y=epsilon_y, label_keep_prob=label_keep_prob,
                       target_noise_var=target_noise_var, feature_bound=None),
            features=features, label=label, override=override, sample_weight=sample_weight)
        source, feats, lab, noise, weight_column = (plan.source, plan.features, plan.label,
                                                    plan.noise, plan.sample_weight)
        from ..io.arrays import ArraySource
        meta = getattr(source, "release_metadata", None)
        codes_in_file = meta is not None and meta.get("label_encoding") == "class_index"
        # arrays are read through this model's encoder (class indices already)
        encoded = codes_in_file or isinstance(source, (ArraySource, dict))
        if codes_in_file:
            if list(meta["classes"]) != list(self.classes_):
                raise InvalidInputError(f"the hold-out's classes {meta['classes']} are not the model's "
                                        f"{self.classes_.tolist()}")
            table = release_table(meta)
        else:
            table = PUBLIC_TABLE if epsilon_y is None else label_weight_table(epsilon_y, k)
        s = noise.noise_var
        taus = 0.5 * np.sum(s * theta * theta, axis=1)
        truncation = int(getattr(self, "truncation_", 0))
        acc = RiskAccumulator(1)

        extra = [] if weight_column is None else [weight_column]

        def batches():
            if isinstance(source, dict):
                yield ([np.asarray(source[f], dtype=np.float64) for f in feats],
                       np.asarray(source[lab]), None)
                return
            for batch in source.batches([*feats, lab, *extra]):
                cols = [np.asarray(batch.column(f).to_numpy(zero_copy_only=False), dtype=np.float64)
                        for f in feats]
                labels = batch.column(lab).to_numpy(zero_copy_only=False)
                weights = (None if not extra else np.asarray(
                    batch.column(weight_column).to_numpy(zero_copy_only=False), dtype=np.float64))
                if weights is not None and first_invalid_weight(weights) >= 0:
                    raise InvalidInputError(f"sample weight {weights[first_invalid_weight(weights)]!r}"
                                            f" in column {weight_column!r}: sample weights must be "
                                            "finite and >= 0")
                yield cols, (labels if encoded else class_codes(labels, list(self.classes_))), weights

        for cols, codes, weights in batches():
            codes = np.asarray(codes)
            u = self._linear_scores(theta, b, cols)
            vals = np.zeros(u.shape[0])
            for c in range(k):
                signs = np.where(codes == c, 1.0, -1.0)
                vals += glm_loss_values_table(self.loss, signs * u[:, c], signs, float(taus[c]), table,
                                              truncation)
            acc.add(vals if weights is None else vals * weights)
        est = acc.estimates(self.loss, 2.0 * float(np.max(taus)))[0]
        if not est.reliable:
            warnings.warn("private_risk: the estimate is not reliable: " + " ".join(est.warnings),
                          NumericalWarning, stacklevel=2)
        return est
