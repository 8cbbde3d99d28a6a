"""k > 2 classes: IWPClassifier's one-vs-rest heads, trained in one scan (docs/math.md "k classes").

A k-class label (a release written with ``classes=[...]``: class indices 0..k-1 after k-ary
randomized response; or arrays with ``fit(X, y, classes=[...], epsilon_y=...)``) is learned as k
binary heads, head c for "class c against the rest", each with the label weights of k-ary
randomized response (``iwpfast.label_noise.label_weight_table``).  The driver runs the k heads as
one kernel call per chunk (``sgd.engine.run_chunk_heads``): every batch of rows is read once and
used by every head while it is in cache.  Two classes stay the binary estimator of
``classifier.py``, bit for bit.

This module holds the k-class side of the labels: class codes, the label weights of a k-class
release, the binary keep probability equivalent to them, the encoder and batch mapper that decide
between two classes and k (``IWPClassifier`` calls them), the tuning table of k classes and the
private risk summed over the heads.  The k heads themselves are ``_heads.OneVsRestHeads``.
"""
from __future__ import annotations

import numpy as np

from ..estimates import class_indices, noise_tau
from ..exceptions import InvalidInputError
from ..label_noise import class_weighted_head_tables, label_weight_table
from ..privacy.spec import ReleaseSpec
from ..privacy.spec_reading import release_spec_of, source_release_spec

PUBLIC_TABLE = (1.0, 0.0, 1.0, 0.0)


def class_codes(values, classes: list, first_row: int = 0) -> np.ndarray:
    """The index of each label in ``classes`` (int8 for up to 127 classes, which the kernels
    read in place, 1 byte a row; float64 beyond); a label outside them names its row
    (``first_row`` + its position in this chunk)."""
    values = np.asarray(values)
    try:
        codes = class_indices(values, classes)[0]
        return codes.astype(np.int8 if len(classes) <= 127 else np.float64)
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


def equivalent_keep_prob(table) -> float | None:
    """The binary keep probability S whose label factor 1/(2S - 1)^2 equals the largest
    (|w_z| + |w_-z|)^2 of a one-vs-rest head's label weights (the bound of the label's part of
    the IWP gradient's second moment; two classes: exactly S).  None for public labels.  The
    step grid of "auto" (``iwpfast.sgd.grid.step_scale``) reads the label noise through it."""
    factor = max((abs(table[0]) + abs(table[1])) ** 2, (abs(table[2]) + abs(table[3])) ** 2)
    if factor <= 1.0:
        return None
    return 0.5 * (1.0 + 1.0 / float(np.sqrt(factor)))


def release_table(spec: ReleaseSpec) -> tuple:
    """The label weights of a k-class release (its ``ReleaseSpec``), from its checked epsilon_y."""
    eps = spec.epsilon_y
    return PUBLIC_TABLE if eps is None else label_weight_table(eps, len(spec.class_values))


def _class_index_release(spec: ReleaseSpec | None) -> ReleaseSpec | None:
    """``spec`` when its release's label column holds class indices (k >= 3 declared classes),
    else None."""
    return spec if spec is not None and spec.label_encoding == "class_index" else None


def k_class_encoder(est, y: np.ndarray, request, start_one_vs_rest):
    """The chunk encoder of array labels when the fit may learn k classes (``request``: the
    declared classes, epsilon_y and label_keep_prob of the fit in progress), or None when the
    labels are two classes (the binary encoder applies).  ``start_one_vs_rest(classes, table)``
    makes the pass's heads k one-vs-rest heads."""
    declared, eps, keep = request
    if declared is None:
        if _at_most_two_values(y):
            return None
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
        est._pass.classes = np.asarray(values)
        return lambda chunk, first_row, dtype=None: np.where(
            class_codes(chunk, list(values), first_row) == 1, 1.0, -1.0)
    if keep is not None:
        raise InvalidInputError("label_keep_prob is the binary keep probability; for k classes "
                                "give epsilon_y (and classes=[...])")
    start_one_vs_rest(values, PUBLIC_TABLE if eps is None else label_weight_table(eps, len(values)))
    return lambda chunk, first_row, dtype=None: class_codes(chunk, list(values), first_row)


NOT_K_CLASS = object()


def k_class_mapper(source, lab, request, heads, start_one_vs_rest):
    """The batch mapper of a source's label column when the pass learns (or may learn) k
    classes: None for class indices already in the file, a mapper to class indices otherwise;
    ``NOT_K_CLASS`` when the labels are two classes (the binary mapper applies).  ``heads``: the
    pass's one-vs-rest heads if it has them."""
    spec = _class_index_release(source_release_spec(source))
    declared, eps, _ = request or (None, None, None)
    if heads is not None and heads.state is not None:
        # a later partial_fit call of a k-class pass: the same classes and label weights
        classes = list(heads.classes)
        if spec is not None:
            if list(spec.class_values) != classes or \
                    tuple(release_table(spec)) != tuple(heads.table):
                raise InvalidInputError(f"this release declares the classes "
                                        f"{list(spec.class_values)} (or another epsilon_y) but "
                                        f"the pass learns {classes}")
            return None
        from ..io.views import column_mapper
        return column_mapper({lab: lambda yv: class_codes(yv, classes)})
    if spec is not None:
        classes = list(spec.class_values)
        if declared is not None and list(declared) != classes:
            raise InvalidInputError(f"classes={list(declared)} but the release declares {classes}; "
                                    "drop classes= (the release's own are used)")
        start_one_vs_rest(classes, release_table(spec))
        return None                         # class indices already
    if declared is not None and len(declared) > 2:
        # a file of clean or explicitly-noised data holding the label's values
        from ..io.views import column_mapper
        start_one_vs_rest(declared, PUBLIC_TABLE if eps is None
                          else label_weight_table(eps, len(declared)))
        return column_mapper({lab: lambda yv: class_codes(yv, list(declared))})
    return NOT_K_CLASS


def class_tables(classes, tables, rules, notes, grid, first, edges=None) -> dict:
    """``tuning_`` of k classes (``iwpfast.sgd.choice.tuning_table``): the columns of the
    classes' tables (``tables``: each class's ``tuning_table``) one after the other, with a column
    ``class`` (the class each head learns: ``pandas.DataFrame`` of the list columns shows
    every head, filter by class for one class's table); ``rule`` the rule of every class
    (one string when they agree), notes prefixed by their class; ``edge`` the classes whose
    choice sits on the grid's edge, "class 'a': largest step; ...", or None."""
    from ..sgd.choice import entry_columns, tuning_table
    classes = [c.item() if hasattr(c, "item") else c for c in classes]
    merged: dict = {"class": [c for c, t in zip(classes, tables, strict=True)
                              for _ in t["alpha"]]}
    for key in entry_columns(tables[0]):
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
    edge = "; ".join(f"class {c!r}: {e}" for c, e in zip(classes, edges or [None] * len(classes),
                                                          strict=True) if e) or None
    learner = merged.pop("learner")
    return tuning_table(merged, learner=learner, rule=rule, n_train=first.n_train,
                        n_validation=first.n_validation, passes=first.passes, folds=first.folds,
                        edge=edge, notes=list(grid.notes) + per_class_notes,
                        heads=first.head_updates_per_row, variance_cap=grid.cap)


def check_validation_release(heads, meta: dict) -> None:
    """A separate validation release of a k-class pass (its metadata): the same classes and
    label budget."""
    spec = _class_index_release(release_spec_of(meta))
    if spec is None or \
            list(spec.class_values) != list(heads.classes) or \
            tuple(release_table(spec)) != tuple(heads.table):
        raise InvalidInputError(
            f"the validation release must be a k-class release of the same classes "
            f"{list(heads.classes)} and label budget as the training data (iwpfast release "
            "... --classes ...); its labels are scored one class against the rest")


def one_vs_rest_risk(est, plan, epsilon_y, class_weights=None):
    """``private_risk`` of k > 2 classes: the estimate of the one-vs-rest risk (the sum over the
    heads of f(y_c u_c), mean over rows), each head debiased with the k-ary label weights of the
    hold-out (a k-class release, or ``epsilon_y`` for arrays).

    ``class_weights`` (one per class): the estimate of the class-weighted risk, the sum over the
    heads of w_y f(y_c u_c), each head's loss with its weighted table and the per-class boost for
    the hold-out's budget (``label_noise.class_weighted_head_tables``: the per-row loss the heads
    were trained and scored on), its constant model chosen under the weights, and the plain
    estimate of the same rows beside it (``RiskEstimate.unweighted``)."""
    from ..estimates import ConstantBaseline, RiskAccumulator, glm_loss_values_table
    from ..holdout_verdict import PredictionTally, features_are_clean
    from ..io.arrays import ArraySource
    from ..sgd.state import first_invalid_weight
    theta, b = est._theta_b()
    k = theta.shape[0]
    source, feats, lab, noise, weight_column = (plan.source, plan.features, plan.label,
                                                plan.noise, plan.sample_weight)
    spec = _class_index_release(source_release_spec(source))
    codes_in_file = spec is not None
    # arrays are read through this model's encoder (class indices already)
    encoded = codes_in_file or isinstance(source, (ArraySource, dict))
    if codes_in_file and spec is not None:
        if list(spec.class_values) != list(est.classes_):
            raise InvalidInputError(f"the hold-out's classes {list(spec.class_values)} are not "
                                    f"the model's {est.classes_.tolist()}")
        table = release_table(spec)
    else:
        table = PUBLIC_TABLE if epsilon_y is None else label_weight_table(epsilon_y, k)
    law = None if noise.noise_law is None else noise.noise_law.broadcast(theta.shape[1])
    taus = np.array([noise_tau(est.loss, noise.noise_var, row, law)[0] for row in theta])
    truncation = int(getattr(est, "truncation_", 0))
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
            yield cols, (labels if encoded else class_codes(labels, list(est.classes_))), weights

    baseline = ConstantBaseline(est.loss, [table] * k, range(k), k)
    tally = PredictionTally(est.classes_, table, features_are_clean(noise))
    # the class-weighted risk: (each head's table, the per-class boost, its sums, its constant)
    weighted = None
    if class_weights is not None:
        head_tables, boost = class_weighted_head_tables(table, class_weights)
        weighted = (head_tables, np.asarray(boost), RiskAccumulator(1),
                    ConstantBaseline(est.loss, head_tables, range(k), k, boost=boost,
                                     class_weighted=True))
    for cols, codes, weights in batches():
        codes = np.asarray(codes)
        groups = codes.astype(np.int64)
        u = est._linear_scores(theta, b, cols)
        vals = np.zeros(u.shape[0])
        wvals = np.zeros(u.shape[0])
        for c in range(k):
            signs = np.where(codes == c, 1.0, -1.0)
            vals += glm_loss_values_table(est.loss, signs * u[:, c], signs, float(taus[c]), table,
                                          truncation)
            if weighted is not None:
                wvals += glm_loss_values_table(est.loss, signs * u[:, c], signs, float(taus[c]),
                                               weighted[0][c], truncation,
                                               weighted[1][groups])
        vals = vals if weights is None else vals * weights
        acc.add(vals)
        baseline.add(vals, groups, weights)
        tally.add(np.argmax(u, axis=1), groups)
        if weighted is not None:
            wvals = wvals if weights is None else wvals * weights
            weighted[2].add(wvals)
            weighted[3].add(wvals, groups, weights)
    energy = 2.0 * float(np.max(taus))
    estimate = acc.estimates(est.loss, energy)[0]
    estimate = estimate._replace(baseline=baseline.result(estimate), predictions=tally.result())
    if weighted is None or class_weights is None:
        return estimate
    weighted_estimate = weighted[2].estimates(est.loss, energy)[0]
    return weighted_estimate._replace(
        baseline=weighted[3].result(weighted_estimate),
        class_weight=tuple(float(w) for w in class_weights), unweighted=estimate,
        predictions=estimate.predictions)
