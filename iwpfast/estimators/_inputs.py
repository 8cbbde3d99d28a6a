"""Input preparation: what ``fit``/``partial_fit``/``private_risk`` turn their data into.

Arrays and frames become a dict of feature-major columns, sources (files, tables, readers) are
opened with ``io.sources.open_source``; the noise model comes from the release metadata or from
explicit arguments.  Either way the driver gets the same kind of input and gives the same result.
"""
from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np

from ..exceptions import (
    DataConversionWarning,
    InvalidInputError,
    InvalidInputTypeError,
    sklearn_compatible,
)
from ._fields import EstimatorFields
from ._noise import (
    NoiseModel,
    check_same_noise,
    explicit_noise,
    noise_from_metadata,
    override_noise,
)
from ._state import ARRAY_LABEL, ARRAY_WEIGHT, PassPlan


def refuse_unsupported(X) -> None:
    """Sparse matrices are refused with the fix (the kernels read dense columns)."""
    if type(X).__module__.startswith("scipy.sparse") or hasattr(X, "tocsr"):
        raise InvalidInputError(
            f"sparse input is not supported (X is a {type(X).__name__}): the kernels read dense "
            "feature columns; pass X.toarray() (dense, float32 or float64)")


def on_filesystem(source, filesystem, name: str = "X", *, paths_only: bool = False):
    """``source`` (a path, folder, glob, or list of paths) opened on ``filesystem`` (a pyarrow or
    fsspec filesystem), or ``source`` unchanged when ``filesystem`` is None.

    Anything else (arrays, frames, tables, opened sources) already holds its data, so a filesystem
    for it is a mistake the message names."""
    if filesystem is None or source is None:
        return source
    is_path = isinstance(source, (str, os.PathLike)) or (
        isinstance(source, (list, tuple)) and len(source) > 0
        and all(isinstance(s, (str, os.PathLike)) for s in source))
    if not is_path:
        if paths_only:
            return source
        raise InvalidInputError(
            f"filesystem= applies to paths, but {name} is a {type(source).__name__} (in memory or "
            f"already opened): pass {name} as a path on that filesystem (e.g. 'bucket/release/'), "
            "or drop filesystem=")
    from ..io.sources import open_source
    return open_source(source, filesystem=filesystem)


def with_release(X, y, release_spec, release, filesystem=None):
    """``(X, y)`` of ``fit(X, y, release_spec=...)`` / ``fit(X, release=...)`` /
    ``fit(privatize(...))``: a source carrying the release metadata (and y None), so that rows
    whose schema metadata was dropped on the way (pandas, polars, DuckDB) or that never had one
    (``privatize``'s arrays) are fitted as the release they are.

    release_spec: a ``ReleaseSpec`` (``read_release``'s, ``privatize``'s ``.spec``).
    release: a path / URI of the release itself (its metadata is read, exactly as written), or
        a ``ReleaseSpec``.  Unchanged ``(X, y)`` when neither is given and X is no
    ``Privatized``."""
    from ..privacy.spec import ReleaseSpec
    from ..privacy.streams import Privatized, release_metadata_for

    if isinstance(X, Privatized):
        if y is not None:
            raise InvalidInputError("fit(privatize(...)) takes the pair as X: drop y")
        X, y, spec = X[0], X[1], X.spec
        if release_spec is None and release is None:
            release_spec = spec
    if release_spec is None and release is None:
        return X, y
    if release_spec is not None and release is not None:
        raise InvalidInputError("give either release_spec=... or release=..., not both")
    if release_spec is not None:
        meta = release_metadata_for(release_spec)
    elif isinstance(release, ReleaseSpec):
        meta = release_metadata_for(release)
    else:
        from ..io.sources import open_source
        found = open_source(release, filesystem=filesystem).release_metadata
        if found is None:
            raise InvalidInputError(f"release={release!r} is not an iwpfast release (no "
                                    "'iwpfast.release' metadata); pass the release's path or its "
                                    "ReleaseSpec (iwpfast.read_release)")
        meta = found
    if meta.get("categorical_rr"):
        raise InvalidInputError(
            "a release with randomized-response categorical columns is fitted from its files "
            "(fit('path/of/the/release')): its codes need their own learner, which reads them "
            "from there")
    source = _released_rows(X, y, meta)
    attach_release_metadata(source, meta)
    return source, None


def _released_rows(X, y, meta: dict):
    """The source of released rows: X itself (a table, frame, stream, path) when y is None, or
    the table of X's feature columns (the release's features, in order) and y as its label."""
    from ..io.sources import open_source

    if y is None:
        return open_source(X)
    import pyarrow as pa

    features = list(meta.get("features") or [])
    label = meta.get("label")
    if label is None:
        raise InvalidInputError("the release has no label column, but y was given; drop y")
    if is_tabular(X):
        cols = [np.asarray(column(X, f)) for f in features]
    else:
        Xa = dense_numeric(X)
        if Xa.ndim != 2 or Xa.shape[1] != len(features):
            raise InvalidInputError(
                f"X has shape {Xa.shape} but the release has {len(features)} features "
                f"({', '.join(features)}): pass X with those columns in that order")
        cols = [Xa[:, j] for j in range(Xa.shape[1])]
    ya = np.asarray(y).reshape(-1)
    if cols and ya.shape[0] != cols[0].shape[0]:
        raise InvalidInputError(f"X has {cols[0].shape[0]} rows but y has {ya.shape[0]}; pass "
                                "one label per row")
    arrays = [pa.array(np.ascontiguousarray(c)) for c in cols] + [pa.array(ya)]
    return open_source(pa.table(arrays, names=[*features, label]))


def attach_release_metadata(source, meta: dict) -> None:
    """Give ``source`` the release metadata ``meta`` (its own row count), as if it had been read
    with it; a source that has metadata must agree with it (ReleaseSpecError otherwise)."""
    import json

    from ..exceptions import ReleaseSpecError
    from ..io.formats import RELEASE_METADATA_KEY_BYTES
    from ..io.parts import PART_FIELDS

    own = source.release_metadata
    if own is not None:
        def shared(m):
            return {k: v for k, v in m.items() if k not in PART_FIELDS}
        if shared(own) != shared(meta):
            raise ReleaseSpecError(
                f"{source.description} carries release metadata that differs from the release "
                "given (release_spec= / release=): they are different releases; drop the argument "
                "(the data's own metadata is read) or pass the data's own release")
        return
    meta = dict(meta, row_count=source.num_rows)
    schema = source.full_schema
    source.full_schema = schema.with_metadata(
        {**(schema.metadata or {}),
         RELEASE_METADATA_KEY_BYTES: json.dumps(meta, sort_keys=True).encode()})
    source.release_metadata = meta


def is_array_like(obj) -> bool:
    """An in-memory matrix (NumPy array, or anything NumPy converts) rather than a source."""
    return (isinstance(obj, np.ndarray) or (hasattr(obj, "__array__") and not is_tabular(obj))
            or (isinstance(obj, (list, tuple)) and len(obj) > 0 and not isinstance(obj[0], str)))


def dense_numeric(X) -> np.ndarray:
    """``np.asarray(X)`` checked: numeric (object arrays of numbers are converted), not complex."""
    refuse_unsupported(X)
    Xa = np.asarray(X)
    if Xa.dtype == object:
        try:
            Xa = Xa.astype(np.float64)
        except TypeError as e:      # an object that is no number at all (a dict, None, ...)
            raise InvalidInputTypeError(
                f"X must be numeric (got dtype object holding a non-number: {e}); encode "
                "non-numeric columns as numbers first") from None
        except ValueError:
            raise InvalidInputError("X must be numeric (got dtype object with non-numbers); encode "
                                    "non-numeric columns as numbers first") from None
    if np.iscomplexobj(Xa):
        raise InvalidInputError("Complex data not supported: X holds complex numbers; pass its real "
                                "part (X.real) or split real and imaginary parts into two features")
    return Xa


def is_tabular(obj) -> bool:
    """pandas/polars DataFrame or pyarrow Table/RecordBatch: something with named columns.

    A pandas frame whose column labels are not all strings (``pd.DataFrame(array)``: 0, 1, ...) is
    a matrix, as in scikit-learn: its columns are not names (no ``feature_names_in_``)."""
    mod = type(obj).__module__
    if not ((mod.startswith("pandas") or mod.startswith("polars") or mod.startswith("pyarrow"))
            and hasattr(obj, "columns")):
        return False
    if mod.startswith("pandas"):
        return all(isinstance(c, str) for c in obj.columns)
    return True


def column_names(obj) -> list[str]:
    if hasattr(obj, "column_names"):          # pyarrow
        return list(obj.column_names)
    return [str(c) for c in obj.columns]       # pandas / polars


def column(obj, name) -> np.ndarray:
    if hasattr(obj, "column_names"):          # pyarrow Table / RecordBatch
        col = obj.column(name)
        if hasattr(col, "combine_chunks"):
            col = col.combine_chunks()
        return col.to_numpy(zero_copy_only=False)
    return np.asarray(obj[name])


class InputsMixin(EstimatorFields):
    """Turns (X, y) or a source into what the driver reads, with its feature/label names and noise."""

    def _prepare_source(self, X, y, *, noise_kw: dict, features, label, override: bool,
                        sample_weight=None):
        """Turn (X, y) or a source into the ``PassPlan`` the driver reads (no config yet).

        Arrays become an ``ArraySource`` of feature-major columns, so arrays and files go through
        the same driver and give the same result.  ``sample_weight``: an array (arrays) or a
        column name (a source), checked here; the plan names the column the driver reads.
        """
        from ._rr import rr_release_spec
        if y is None and rr_release_spec(X) is not None:
            # its code columns are category indices, not features: only fit() reads them right
            raise InvalidInputError(
                "a release with randomized-response categorical columns (categorical_mechanism="
                "'rr') is learned by IWPClassifier.fit or partial_fit; plan_pass and validation= "
                "do not read it (not supported yet)")
        if y is not None:
            return self._prepare_arrays(X, y, noise_kw=noise_kw, features=features,
                                        sample_weight=sample_weight)
        if is_array_like(X) or type(X).__module__.startswith("scipy.sparse"):
            raise InvalidInputError(
                f"{type(self).__name__} requires y to be passed, but the target y is None: pass "
                "fit(X, y), or a source (file, table) holding the label column")
        from ..io.sources import open_source
        src = open_source(X)
        if src.num_rows == 0:
            raise InvalidInputError(f"{src.description} holds no rows: nothing to fit; check the "
                                    "path (an empty file or folder)")
        meta = src.release_metadata
        names = list(src.full_schema.names)
        if meta is not None:
            feats = list(features) if features is not None else list(meta.get("features") or [])
            lab = label if label is not None else meta.get("label")
            noise = noise_from_metadata(meta, feats)
            check_same_noise(noise_kw, noise, override)
            if override:
                noise = override_noise(noise, noise_kw, self._task)
        else:
            if features is None:
                raise InvalidInputError(
                    f"the source has no release metadata (it is not an iwpfast release), so its feature "
                    f"and label columns are unknown: name them with features=[...], label=... (CLI: "
                    f"--features A B --label Y; columns: {', '.join(names)}), and if the data is private "
                    "give its noise with noise_var=..., epsilon_y=... (CLI: --noise-var, --epsilon-y)")
            feats = list(features)
            lab = label
            noise = explicit_noise(len(feats), task=self._task, **noise_kw)
        if lab is None:
            raise InvalidInputError(f"the label column is unknown: pass label=... (CLI: --label; "
                                    f"columns: {', '.join(names)})")
        missing = [c for c in feats if c not in names]
        if missing:
            raise InvalidInputError(
                f"feature column(s) {', '.join(map(repr, missing))} not in the source (its columns: "
                f"{', '.join(names)}); pass features=[...] naming existing columns (CLI: --features)")
        if lab not in names:
            raise InvalidInputError(
                f"label column {lab!r} not in the source (its columns: {', '.join(names)}); pass "
                "label=... naming the label column (CLI: --label)")
        _check_weight_column(sample_weight, src, feats, lab)
        return PassPlan(src, feats, lab, noise, src.num_rows,
                        sample_weight=self._sample_weight_column(src, sample_weight))

    def _prepare_arrays(self, X, y, *, noise_kw: dict, features, sample_weight=None,
                        whole_pass: bool = True):
        """The ``PassPlan`` of in-memory X and y (an ``ArraySource``; no config yet).

        X is not copied: its columns keep their dtype (float32/float64; the kernel runs in it) and
        are read as views when contiguous, else transposed one chunk at a time by the reader
        (``iwpfast.io.arrays``).  Only the checks that need no pass over the data run here; the
        finiteness of X and the label check run chunk by chunk in the reader's thread."""
        from ..io.arrays import ArraySource, check_feature_columns
        names_in = None
        data: Any
        if is_tabular(X):
            names_in = column_names(X)
            if isinstance(sample_weight, str):
                # a frame's own column of weights: read it, and it is no feature
                if sample_weight not in names_in:
                    raise InvalidInputError(
                        f"sample_weight column {sample_weight!r} not in X (its columns: "
                        f"{', '.join(names_in)}); name an existing column or pass an array")
                if features is not None and sample_weight in features:
                    raise InvalidInputError(f"sample_weight column {sample_weight!r} is also a "
                                            "feature; the weights must be a column of their own")
                names_in = [c for c in names_in if c != sample_weight]
                sample_weight = np.asarray(column(X, sample_weight))
            if features is not None:
                names_in = list(features)
            data = [np.asarray(column(X, c)) for c in names_in]
            check_feature_columns(data, names_in)
            n = len(data[0]) if data else 0
            p = len(data)
        else:
            data = dense_numeric(X)
            if data.ndim != 2:
                raise InvalidInputError(
                    f"X must be 2-D (rows, features), got shape {data.shape}; reshape with "
                    "X.reshape(-1, 1) for a single feature")
            if not np.issubdtype(data.dtype, np.number):
                raise InvalidInputError(f"X must be numeric (got dtype {data.dtype}); encode non-numeric "
                                        "columns as numbers first")
            n, p = data.shape
        if p == 0:
            raise InvalidInputError(f"X has 0 feature(s) (shape=({n}, 0)) while a minimum of 1 is "
                                    "required; pass at least one feature column")
        ya = np.asarray(y)
        if ya.ndim != 1 and not (ya.ndim == 2 and ya.shape[1] == 1):
            raise InvalidInputError(f"y must be 1-D with one value per row (got shape {ya.shape})")
        if ya.ndim == 2:
            warnings.warn(sklearn_compatible(DataConversionWarning)(
                "A column-vector y was passed when a 1d array was expected. Please change the "
                "shape of y to (n_samples,), for example using ravel()."), stacklevel=3)
        ya = ya.reshape(-1)
        if ya.shape[0] != n:
            raise InvalidInputError(f"X has {n} rows but y has {ya.shape[0]}; pass one label per row")
        if n == 0:
            raise InvalidInputError("X has 0 rows; fit needs at least one row")
        feats = list(names_in) if names_in is not None else [f"x{j}" for j in range(p)]
        noise = explicit_noise(p, task=self._task, **noise_kw)
        encode = self._target_encoder(ya)
        order = (np.random.default_rng(self.random_state).permutation(n) if self.shuffle else None)
        # classification labels are exactly +-1 as int8, as a release's (the kernel reads 1 byte a
        # row, and array and file fits share one specialization); regression targets stay float64
        label_dtype = np.dtype(np.int8) if self._task == "classification" else np.float64
        weights = (None if sample_weight is None
                   else sample_weight_array(sample_weight, n, whole_pass))
        if weights is not None and self._task == "classification" and (
                noise_kw.get("epsilon_y") is not None or noise_kw.get("label_keep_prob") is not None):
            warn_label_derived_weights(weights, ya)
        source = ArraySource(data, ya, feats, ARRAY_LABEL, encode=encode, label_dtype=label_dtype,
                             order=order, description="<(X, y) arrays>", weights=weights,
                             weight_name=ARRAY_WEIGHT)
        return PassPlan(source, feats, ARRAY_LABEL, noise, n, names_in,
                        sample_weight=self._sample_weight_column(source, weights))

    def _target_encoder(self, y: np.ndarray):
        """``encode(values, first_row, dtype)``: the kernel's targets of a chunk of ``y`` (checked)."""
        raise NotImplementedError

    @staticmethod
    def _sample_weight_column(source, sample_weight) -> str | None:
        """The column of the sample weights the driver reads from a prepared source, or None."""
        if sample_weight is None:
            return None
        from ..io.arrays import ArraySource
        if isinstance(source, ArraySource):
            return source.weight_name
        return str(sample_weight)


def released_labels(y: np.ndarray, classes, multiclass: bool) -> np.ndarray | None:
    """Labels as a release holds them, in the kernel's encoding (float64), or None when ``y``
    is not in that encoding: two classes are released as -1/+1 (the model's ``classes`` are the
    owner's values, e.g. 0/1 or strings), k classes as the class indices 0..k-1.  What a fold of
    a release's arrays holds (``release_spec=``, scikit-learn's model selection)."""
    y = np.asarray(y)
    if y.dtype.kind not in "iuf" or y.size == 0:
        return None
    if multiclass:
        k = len(classes)
        codes = y.astype(np.int64)
        if np.array_equal(codes, y) and codes.min() >= 0 and codes.max() < k:
            return codes.astype(np.float64)
        return None
    if np.isin(y, (-1, 1)).all():
        return np.where(y > 0, 1.0, -1.0)
    return None


def sample_weight_array(sample_weight, n: int, whole_pass: bool = True) -> np.ndarray:
    """``sample_weight`` for n rows of arrays, checked: one real number >= 0 per row (a scalar is
    the same weight for every row), finite, and for a whole pass (``fit``) not all 0 (a chunk of
    ``partial_fit`` may weigh nothing).  The error names the row and the fix."""
    if isinstance(sample_weight, str):
        raise InvalidInputError(
            f"sample_weight={sample_weight!r} names a column, but X is an in-memory array: pass one "
            "weight per row (an array of n numbers), or a source (file, table) holding that column")
    w = np.asarray(sample_weight)
    if w.ndim == 0 and w.dtype.kind in "fiub":
        w = np.full(n, w.item(), dtype=np.float64)
    if w.dtype == object:
        try:
            w = w.astype(np.float64)
        except (TypeError, ValueError):
            raise InvalidInputError("sample_weight must hold real numbers >= 0 (got dtype object "
                                    "with non-numbers)") from None
    if w.ndim != 1 or w.shape[0] != n:
        raise InvalidInputError(
            f"sample_weight.shape == {w.shape}, expected ({n},): pass one weight per row of X")
    if w.dtype.kind not in "fiub":
        raise InvalidInputError(f"sample_weight has dtype {w.dtype}; weights must be real numbers >= 0")
    from ..sgd.state import first_invalid_weight
    bad = first_invalid_weight(w)
    if bad >= 0:
        raise InvalidInputError(f"sample_weight[{bad}] = {w[bad].item()!r}: sample weights must be "
                                "finite and >= 0; fix or drop that row")
    if whole_pass and n and not np.any(w):
        raise InvalidInputError("sample_weight: every weight is zero, so there is nothing to fit "
                                "(the weighted risk is 0 for every model); give some row a weight > 0")
    return w


#: labels with more distinct values than this are not checked by ``warn_label_derived_weights``
MAX_CHECKED_CLASSES = 32


def warn_label_derived_weights(weights: np.ndarray, y: np.ndarray) -> bool:
    """Warn (PrivacyLeakWarning) when private labels come with weights that are a function of
    the label (one weight per label value, at least two different ones: class balancing, the usual
    way of deriving weights from the data).  Computed from the released labels they are correlated
    with the label noise, so the IWP correction no longer removes the bias; computed from the clean
    labels they leak them.  Returns whether it warned.  One pass per label value, only when the
    weights are not constant."""
    w = np.asarray(weights)
    if w.size < 2 or w.min() == w.max():
        return False
    y = np.asarray(y)
    values: Any = np.unique(y) if y.dtype.kind not in "iufb" else None
    if values is None:
        low, high = y.min(), y.max()
        values = [low, high] if bool(((y == low) | (y == high)).all()) else np.unique(y)
    if len(values) > MAX_CHECKED_CLASSES:
        return False
    for value in values:
        in_class = w[y == value]
        if in_class.size and in_class.min() != in_class.max():
            return False
    import warnings

    from ..exceptions import PrivacyLeakWarning
    warnings.warn(
        "sample_weight takes one value per label value (like class-balancing weights) while the "
        "labels are private (epsilon_y / label_keep_prob): weights computed from the released labels "
        "are correlated with their noise, so the model is biased again, and weights computed from "
        "the clean labels leak them. Use public weights fixed before the release (docs/usage.md "
        "\"Sample weights\").", PrivacyLeakWarning, stacklevel=4)
    return True


def _check_weight_column(sample_weight, src, feats, lab) -> None:
    """A source's sample weights are a column of it: numeric, not a feature or the label."""
    if sample_weight is None:
        return
    if not isinstance(sample_weight, str):
        raise InvalidInputError(
            "with a source X (file, folder, table), sample_weight names the column holding the "
            f"weights (e.g. sample_weight='w'); got a {type(sample_weight).__name__}")
    names = list(src.full_schema.names)
    if sample_weight not in names:
        raise InvalidInputError(
            f"sample_weight column {sample_weight!r} not in the source (its columns: "
            f"{', '.join(names)}); name an existing column (CLI: --sample-weight)")
    if sample_weight in feats or sample_weight == lab:
        role = "feature" if sample_weight in feats else "label"
        raise InvalidInputError(f"sample_weight column {sample_weight!r} is also the {role} column; "
                                "the weights must be a column of their own")
    import pyarrow as pa
    t = src.full_schema.field(sample_weight).type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        raise InvalidInputError(f"sample_weight column {sample_weight!r} has type {t}; weights must "
                                "be numbers >= 0")


__all__ = ["InputsMixin", "NoiseModel", "column", "column_names", "is_tabular"]
