"""The checks of each input batch before any noise: types, missing and non-finite values, labels.

:class:`BatchChecker` turns a record batch into NumPy columns (or refuses it, naming column, row
and fix; with ``on_invalid="drop"`` it drops the bad rows and counts them), and keeps the counts
the release reports: values outside the declared ranges, targets outside the target range, the
binary label encoding seen and the label runs of the order test.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..exceptions import BadDataError, InvalidInputError
from ..io.reader import numeric_kind
from .scaling import RangeScaler
from .spec import ReleaseSpec


def class_dtype(n_classes: int):
    return np.dtype(np.int8) if n_classes <= 127 else np.dtype(np.int16)


class BatchChecker:
    """Validation of the input batches of one release (main thread) and the counts it keeps."""

    def __init__(self, spec: ReleaseSpec, scaler: RangeScaler, target_scaler: RangeScaler | None):
        self.spec = spec
        self.scaler = scaler
        self.target_scaler = target_scaler
        # the privatizer's thread pool (for _float_extremes) and the rows from which it is used
        self.pool: Any = None
        self.parallel_min_rows = 0
        self.label_encoding: str | None = None  # "01" or "pm1" once seen; bools are "01"
        self.targets_out_of_range = 0
        # runs test over the binary label stream: positives, rows and label changes seen
        self.label_runs = [0, 0, 0]
        self.label_last = None
        self.out_of_range = {f: 0 for f in spec.numeric_features}
        self.feature_map = spec.feature_map if spec.has_categorical else None

    def prepare(self, origin, batch, on_invalid: str):
        """Check one record batch; return (feature arrays, label array or None, rows dropped)."""
        import pyarrow as pa

        spec = self.spec
        names = list(spec.feature_names) + ([spec.label] if spec.label is not None else [])
        invalid = None
        arrays = {}
        extremes = {}
        known = self._float_extremes(batch, names)
        for name in names:
            arr = batch.column(name)
            kind = numeric_kind(arr.type)
            is_label = name == spec.label
            if is_label and spec.classes is not None:
                arrays[name], bad = self._class_codes(origin, arr, on_invalid)
                if bad is not None:
                    invalid = bad if invalid is None else (invalid | bad)
                continue
            if not is_label and name in spec.categories and self.feature_map is not None:
                # a categorical column: the index of each value in its declared categories
                arrays[name], bad = self.feature_map.codes(name, arr, origin.describe, on_invalid)
                if bad is not None:
                    invalid = bad if invalid is None else (invalid | bad)
                continue
            if kind is None:
                if is_label and spec.task == "classification":
                    self._label_error(origin, arr, f"has type {arr.type}")
                raise InvalidInputError(
                    f"column {name!r} has type {arr.type}; {'the target' if is_label else 'features'} "
                    f"must be numeric: cast or encode it before the release"
                    + ("" if is_label else
                       f", or declare it categorical with its categories (categories={{{name!r}: "
                       f"[...]}}; CLI: --categories {name}=A,B,C)")
                )
            if kind == "decimal":
                arr = arr.cast(pa.float64())
                kind = "float"
            bad = None
            if arr.null_count:
                bad = np.asarray(arr.is_null(), dtype=bool)
                what = "a missing value (null)"
                arr_filled = arr.fill_null(False if kind == "bool" else 0)
            else:
                arr_filled = arr
            values = arr_filled.to_numpy(zero_copy_only=False)
            if kind == "float" and values.size:
                if name in known and not arr.null_count:
                    lo, hi = known[name]
                else:
                    with np.errstate(invalid="ignore"):
                        lo, hi = values.min(), values.max()
                extremes[name] = (lo, hi)  # reused by the range count below
                if not (math.isfinite(lo) and math.isfinite(hi)):
                    nonfinite = ~np.isfinite(values)
                    if bad is None:
                        first = int(np.argmax(nonfinite))
                        what = f"a non-finite value ({float(values[first])})"
                    bad = nonfinite if bad is None else (bad | nonfinite)
            if bad is not None:
                if on_invalid == "error":
                    row = int(np.argmax(bad))
                    raise BadDataError(
                        f"column {name!r} has {what} at {origin.describe(row)}; clean the data, or "
                        f"drop such rows with on_invalid='drop' (CLI: --on-invalid drop)"
                    )
                invalid = bad if invalid is None else (invalid | bad)
            arrays[name] = values
        dropped = 0
        if invalid is not None and invalid.any():
            keep = ~invalid
            dropped = int(invalid.sum())
            arrays = {k: v[keep] for k, v in arrays.items()}
            extremes = {}
        features = [arrays[f] for f in spec.feature_names]
        for j, f in enumerate(spec.numeric_features):
            self.out_of_range[f] += self.scaler.count_out_of_range(j, arrays[f], extremes.get(f))
        label = None
        if spec.label is not None:
            label = arrays[spec.label]
            if spec.task == "classification" and spec.classes is None:
                self._check_binary(origin, label)
                self._count_runs(label)
            elif spec.task == "regression" and self.target_scaler is not None:
                self.targets_out_of_range += self.target_scaler.count_out_of_range(
                    0, label, extremes.get(spec.label))
        return features, label, dropped

    def _count_runs(self, y: np.ndarray) -> None:
        """Label changes between consecutive rows (for the runs test of ``label_order_warning``)."""
        if y.size == 0:
            return
        runs = self.label_runs
        runs[0] += int(np.count_nonzero(y == 1))
        runs[1] += int(y.size)
        runs[2] += int(np.count_nonzero(y[1:] != y[:-1]))
        if self.label_last is not None and self.label_last != y[0]:
            runs[2] += 1
        self.label_last = y[-1]

    def _float_extremes(self, batch, names) -> dict:
        """(min, max) of the null-free float columns, half of them on the pool's thread.

        The finiteness check needs them before any noise; computed serially they cost ~3% of
        the in-memory release at p = 10, and 2 threads halve that.
        """
        import pyarrow as pa

        if self.pool is None or batch.num_rows < 2 * self.parallel_min_rows:
            return {}
        columns = [
            (name, batch.column(name)) for name in names
            if pa.types.is_floating(batch.column(name).type) and not batch.column(name).null_count
        ]
        if len(columns) < 2:
            return {}

        def extremes(items):
            with np.errstate(invalid="ignore"):
                return {n: (v.min(), v.max()) for n, v in
                        ((n, a.to_numpy(zero_copy_only=False)) for n, a in items)}

        other = self.pool.submit(extremes, columns[1::2])
        found = extremes(columns[0::2])
        found.update(other.result())
        return found

    def _label_error(self, origin, values, reason: str):
        import pyarrow as pa

        if isinstance(values, (pa.Array, pa.ChunkedArray)):
            seen = values.unique().to_pylist()
        else:
            seen = np.unique(values).tolist()
        shown = ", ".join(repr(v) for v in sorted(seen, key=repr)[:12]) + (" ..." if len(seen) > 12 else "")
        raise BadDataError(
            f"label column {self.spec.label!r} {reason}: binary labels must be in {{0, 1}}, {{-1, 1}} "
            f"or bool; values seen in the batch starting at {origin.describe(0)}: {shown}. Declare "
            f"the label's classes in order, classes=[negative, positive] (CLI: --classes NEG POS; "
            f"k >= 3 classes: k-ary randomized response), recode the labels, or use "
            f"task='regression' for a continuous target"
        )

    def _class_codes(self, origin, arr, on_invalid: str):
        """(index of each label in ``spec.classes``, mask of rows whose label is not a declared
        class or None): numbers or strings, matched by value with the column's type."""
        import pyarrow as pa
        import pyarrow.compute as pc

        spec = self.spec
        try:
            value_set = pa.array(list(spec.class_values)).cast(arr.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            raise InvalidInputError(
                f"label column {spec.label!r} has type {arr.type} but the declared classes "
                f"{list(spec.class_values)!r} are not of that type; declare the column's own values"
            ) from None
        index = pc.index_in(arr, value_set=value_set)
        codes = index.fill_null(0).to_numpy(zero_copy_only=False).astype(class_dtype(len(spec.class_values)))
        if not index.null_count:
            return codes, None
        bad = np.asarray(index.is_null(), dtype=bool)
        if on_invalid == "error":
            row = int(np.argmax(bad))
            value = arr[row].as_py()
            raise BadDataError(
                f"label column {spec.label!r} has {value!r} at {origin.describe(row)}, which is not "
                f"one of the declared classes {list(spec.class_values)!r}; declare every class, or drop "
                f"such rows with on_invalid='drop' (CLI: --on-invalid drop)"
            )
        return codes, bad

    def _check_binary(self, origin, y: np.ndarray):
        if y.dtype == np.bool_ or y.size == 0:
            encoding = "01" if y.size else None
        else:
            lo, hi = y.min(), y.max()
            if lo >= 0 and hi <= 1:
                encoding = "01" if lo == 0 else None  # all ones: fits both encodings
                # integers in [0, 1] are 0 or 1; floats may lie in between
                if y.dtype.kind == "f" and not ((y == 0) | (y == 1)).all():
                    self._label_error(origin, y, "is not binary")
            elif lo == -1 and hi <= 1:
                encoding = "pm1"
                if not ((y == -1) | (y == 1)).all():
                    self._label_error(origin, y, "is not binary")
            else:
                self._label_error(origin, y, "is not binary")
        if encoding is not None:
            if self.label_encoding is None:
                self.label_encoding = encoding
            elif encoding != self.label_encoding:
                raise BadDataError(
                    f"label column {self.spec.label!r} mixes encodings: earlier rows used "
                    f"{'{0, 1}' if self.label_encoding == '01' else '{-1, 1}'} and the batch starting at "
                    f"{origin.describe(0)} uses {'{0, 1}' if encoding == '01' else '{-1, 1}'}; "
                    "recode the labels"
                )
