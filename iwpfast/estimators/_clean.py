"""The clean baseline of a raw table with categorical columns: ``fit(X, y, categories=...)``.

A raw, un-noised table is mapped exactly as a release with the same declared ranges and
categories would map it before adding noise: the release's own ``FeatureMap`` (numeric columns
scaled from their ranges onto [-1, 1] and clipped to them, the numeric part of each row clipped
to the L2 ball of ``feature_bound`` (default 1), each categorical column one-hot over its declared
categories, values outside them sent to the catch-all ``unknown_category`` or refused).  The
ordinary fit then runs on the released coordinates without noise, and the model keeps the map
(``feature_map_``, ``feature_bound_``): ``predict`` & co. read raw tables, strings included, and
the model saves and loads with it, as a model fitted on such a release does.
"""
from __future__ import annotations

import math

from ..exceptions import InvalidInputError
from ._inputs import column, column_names, is_tabular, on_filesystem

#: fit's arguments a clean baseline cannot take (they describe a release or its noise)
_NOT_CLEAN = ("noise_var", "epsilon_y", "label_keep_prob", "target_noise_var", "release_spec",
              "release")


def clean_feature_map(inputs, ranges, categories, unknown_category):
    """The ``FeatureMap`` a release of the raw columns ``inputs`` with these declared ranges
    (``{name: (lo, hi)}`` or ``"A=0:99,B=1:24"``), categories (``{name: [value, ...]}``) and
    catch-all would use (every column private: the vector clip covers the numeric part)."""
    from ..privacy.feature_map import FeatureMap, check_categories, check_unknown, with_catch_all
    from ..privacy.scaling import parse_ranges

    cats = check_categories(categories)
    unknown = check_unknown(unknown_category, cats)
    cats = with_catch_all(cats, unknown)
    if isinstance(ranges, (list, tuple)) and ranges and not isinstance(ranges[0], str):
        raise InvalidInputError(
            "with categories=..., give ranges by name: ranges={'AGEP': (0, 99), ...} or "
            "'AGEP=0:99,SCHL=1:24' (a categorical column takes no range)")
    parsed = parse_ranges(ranges)
    extra = [c for c in cats if c not in inputs]
    if extra:
        raise InvalidInputError(
            f"categories name column(s) {extra} that are not features ({list(inputs)}); add them to "
            "features=[...] (CLI: --features) or drop their categories")
    both = [c for c in cats if c in parsed]
    if both:
        raise InvalidInputError(
            f"column(s) {both} have both a declared range and categories; a categorical column is "
            "one-hot over its categories (no range): give one of the two")
    missing = [f for f in inputs if f not in cats and f not in parsed]
    if missing:
        raise InvalidInputError(
            f"no declared range for feature(s) {', '.join(missing)}; give every numeric feature's "
            "public range, e.g. ranges={" + ", ".join(f"'{m}': (lo, hi)" for m in missing[:3])
            + "} (CLI: --ranges " + " ".join(f"{m}=LO:HI" for m in missing[:3]) + "), or declare "
            "a categorical one's categories (categories={'" + missing[0] + "': [...]}; CLI: "
            f"--categories {missing[0]}=A,B)")
    return FeatureMap.build(list(inputs), parsed, cats, unknown=unknown)


def fit_categorical(est, **kw):
    """``fit(X, y, categories=..., ...)``: ``X`` (a raw table: a DataFrame / pyarrow Table with
    ``y``, or a file / folder / source holding the label column) mapped by its clean
    ``FeatureMap``, then the ordinary fit on the coordinates (no noise); the model keeps the map.
    ``kw``: fit's arguments."""
    from ..io.sources import open_source
    from ..io.views import FeatureMapSource

    given = [k for k in _NOT_CLEAN if kw.get(k) is not None]
    if given:
        raise InvalidInputError(
            f"categories=... maps a raw clean table as a release would (the clean baseline); it "
            f"cannot be combined with {', '.join(given)}: release the data instead (iwpfast "
            "release ... --categories), then fit the release")
    X, y, sample_weight = kw.pop("X"), kw.get("y"), kw.get("sample_weight")
    X = on_filesystem(X, kw.get("filesystem"))
    validation = on_filesystem(kw.get("validation"), kw.get("filesystem"), "validation",
                               paths_only=True)
    bound = kw.get("feature_bound")
    bound = 1.0 if bound is None else bound
    if not (isinstance(bound, (int, float)) and math.isfinite(bound) and bound > 0):
        raise InvalidInputError(f"feature_bound={bound!r} must be a positive number: the L2 bound "
                                "the numeric part of a row is clipped to (default 1, a release's)")
    inputs = kw.get("features")
    in_memory = y is not None
    if in_memory and not is_tabular(X):
        raise InvalidInputError(
            f"categories=... reads columns by name, but X is a {type(X).__name__}: pass a pandas / "
            "polars DataFrame or a pyarrow Table (the categorical columns as strings or integer "
            "codes), or a file with label=...")
    if inputs is None:
        if not in_memory:
            raise InvalidInputError(
                "name the feature columns of the raw source: features=[...] (CLI: --features), "
                "with label=... (CLI: --label)")
        inputs = [c for c in column_names(X) if c != sample_weight]
    inputs = [str(f) for f in inputs]
    fmap = clean_feature_map(inputs, kw.get("ranges"), kw.get("categories"),
                             kw.get("unknown_category"))
    if in_memory:
        X = _mapped_table(X, fmap, bound, sample_weight)
    else:
        src = open_source(X)
        if src.release_metadata is not None:
            raise InvalidInputError(
                f"categories=... is for a raw, un-noised table; {src.description} is a release "
                "(already mapped and noised): drop categories (its feature map is read from it)")
        X = FeatureMapSource(src, fmap, bound)
    if validation is not None:
        validation = FeatureMapSource(open_source(validation), fmap, bound)
    kw.update(features=list(fmap.coordinates), feature_bound=fmap.vector_bound(bound),
              ranges=None, categories=None, unknown_category=None, validation=validation,
              filesystem=None)
    est.fit(X, **kw)
    est.feature_map_ = fmap
    est.feature_bound_ = float(bound)
    # the model reads the input columns, not one column per coordinate
    vars(est).pop("feature_names_in_", None)
    return est


def _mapped_table(X, fmap, bound: float, sample_weight):
    """The pyarrow Table of the clean coordinates of the in-memory table ``X`` (and its
    ``sample_weight`` column when that names one)."""
    import numpy as np
    import pyarrow as pa

    cols = fmap.transform(X, bound)
    arrays = [pa.array(np.ascontiguousarray(c)) for c in cols]
    names = list(fmap.coordinates)
    if isinstance(sample_weight, str):
        if sample_weight not in column_names(X):
            raise InvalidInputError(
                f"sample_weight column {sample_weight!r} not in X (its columns: "
                f"{', '.join(column_names(X))}); name an existing column or pass an array")
        arrays.append(pa.array(np.asarray(column(X, sample_weight))))
        names.append(sample_weight)
    return pa.table(arrays, names=names)
