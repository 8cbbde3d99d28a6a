"""What a release writes besides the noisy values: the output schema, the metadata, the batches.

The metadata (schema key ``iwpfast.release``) holds the spec, the row count, a part's fields
(multi-part releases) and ``label_classes``; nothing else about the data.
"""
from __future__ import annotations

import numpy as np

from .batches import class_dtype
from .spec import ReleaseSpec


def output_schema(spec: ReleaseSpec, metadata: dict | None = None):
    import pyarrow as pa

    ftype = pa.float32() if spec.feature_dtype == "float32" else pa.float64()
    codes = rr_code_types(spec)
    fields = [pa.field(f, pa.from_numpy_dtype(codes[f]) if f in codes else ftype, nullable=False)
              for f in spec.released_features]
    if spec.label is not None:
        ltype = pa.from_numpy_dtype(label_dtype(spec))
        fields.append(pa.field(spec.label, ltype, nullable=False))
    return pa.schema(fields, metadata=metadata)


def rr_code_types(spec: ReleaseSpec) -> dict:
    """{released column: dtype} of the randomized-response codes: the narrowest unsigned integer
    holding the category index (uint8 for k <= 256, else uint16)."""
    return {c: np.dtype(np.uint8 if m.n_classes <= 256 else np.uint16)
            for c, m in spec.rr_mechanisms.items()}


def label_dtype(spec: ReleaseSpec):
    """dtype of the released label column: int8 -1/+1, the class index, or the feature dtype."""
    if spec.task != "classification":
        return np.dtype(spec.feature_dtype)
    if spec.label_encoding == "class_index":
        return class_dtype(len(spec.class_values))
    return np.dtype(np.int8)

#: the binary label classes a release records when none are declared (``classes=``): a fixed
#: rule, never read from the data (the released column holds -1/+1; -1 stands for 0, +1 for 1)
DEFAULT_BINARY_CLASSES = (0, 1)


def declared_label_classes(spec: ReleaseSpec) -> list | None:
    """The ``label_classes`` a release records: the declared classes of a binary label (-1/+1
    stand for classes[0]/[1]), else the fixed rule ``DEFAULT_BINARY_CLASSES`` for a binary
    classification label, else None (k >= 3 classes are in the spec; regression; no label).

    Never computed from the label values: on a small file or part they would be the raw labels
    (a one-row file with y = 1 once recorded null, with y = 0 [0, 1], with y = -1 [-1, 1])."""
    if spec.label is None or spec.task != "classification":
        return None
    if spec.classes is not None:
        return list(spec.classes) if len(spec.classes) == 2 else None
    return list(DEFAULT_BINARY_CLASSES)


def metadata_json(spec: ReleaseSpec, rows, part: dict | None, label_classes=None) -> str:
    """The release metadata as stored (``release_metadata``, as JSON text)."""
    return metadata_text(release_metadata(spec, rows, part, label_classes))


def release_metadata(spec: ReleaseSpec, rows, part: dict | None, label_classes=None) -> dict:
    """The release metadata dict: the spec (``ReleaseSpec.to_metadata``), the row count, a
    part's fields (multi-part releases: release id, part index, the part's rows; see
    iwpfast/io/parts.py), and ``label_classes``: the binary classes (declared, or
    ``DEFAULT_BINARY_CLASSES``; the released column holds -1/+1 and a learner maps them back)."""
    meta = spec.to_metadata(rows)
    if label_classes is not None:
        meta["label_classes"] = list(label_classes)
    if part is not None:
        meta["part"] = {"release_id": str(part["release_id"]), "index": int(part["index"]),
                        "rows": None if rows is None else int(rows)}
    return meta


def with_rows(meta: dict, rows) -> dict:
    """``meta`` (``release_metadata``) for ``rows`` rows: the row count is its only field that
    depends on them, so the spec's metadata is built once per release write."""
    out = dict(meta, row_count=None if rows is None else int(rows))
    if out.get("part") is not None:
        out["part"] = dict(out["part"], rows=None if rows is None else int(rows))
    return out


def metadata_text(meta: dict) -> str:
    """The stored form of the metadata: sorted-key JSON, no NaN."""
    import json

    return json.dumps(meta, sort_keys=True, allow_nan=False)


def record_batch(schema, out: np.ndarray, label_out):
    import pyarrow as pa

    # Each row of the feature-major buffer is contiguous: pa.array wraps it without a copy, and
    # the writer has encoded the batch before the buffer is reused for the next chunk.
    # a randomized-response code is held as an exact small integer in the float buffer and
    # written in its column's integer type
    arrays = [pa.array(out[j]) if pa.types.is_floating(schema.field(j).type)
              else pa.array(out[j].astype(schema.field(j).type.to_pandas_dtype()))
              for j in range(out.shape[0])]
    if label_out is not None:
        arrays.append(pa.array(label_out))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
