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
    fields = [pa.field(f, ftype, nullable=False) for f in spec.feature_names]
    if spec.label is not None:
        ltype = pa.from_numpy_dtype(label_dtype(spec))
        fields.append(pa.field(spec.label, ltype, nullable=False))
    return pa.schema(fields, metadata=metadata)

def label_dtype(spec: ReleaseSpec):
    """dtype of the released label column: int8 -1/+1, the class index, or the feature dtype."""
    if spec.task != "classification":
        return np.dtype(spec.feature_dtype)
    if spec.label_encoding == "class_index":
        return class_dtype(len(spec.class_values))
    return np.dtype(np.int8)

def peek_label_classes(spec: ReleaseSpec, src) -> list | None:
    """The source's binary label values, [0, 1] or [-1, 1], from its first batch (so the schema
    written first already carries them: no IPC rewrite at the end), or None if unknown yet."""
    if spec.classes is not None:       # declared: -1/+1 stand for classes[0]/[1] (k = 2)
        return list(spec.classes) if len(spec.classes) == 2 else None
    if spec.label is None or spec.task != "classification" or not src.rereadable:
        return None
    for batch in src.batches([spec.label]):
        values = batch.column(0).drop_null().to_numpy(zero_copy_only=False)
        if values.size == 0:
            continue
        if values.dtype == np.bool_ or (values == 0).any():
            return [0, 1]
        if (values == -1).any():
            return [-1, 1]
        return None
    return None


def metadata_json(spec: ReleaseSpec, rows, part: dict | None, label_classes=None) -> str:
    """The release metadata as stored: the spec, the row count, a part's fields (multi-part
    releases: release id, part index, the part's rows; see iwpfast/io/parts.py), and
    ``label_classes``: the label values of the source (the released column holds -1/+1; a learner
    maps them back, so a model predicts the user's own values)."""
    if part is None and label_classes is None:
        return spec.to_json(rows)
    import json

    meta = spec.to_metadata(rows)
    if label_classes is not None:
        meta["label_classes"] = list(label_classes)
    if part is not None:
        meta["part"] = {"release_id": str(part["release_id"]), "index": int(part["index"]),
                        "rows": None if rows is None else int(rows)}
    return json.dumps(meta, sort_keys=True, allow_nan=False)

def record_batch(schema, out: np.ndarray, label_out):
    import pyarrow as pa

    # Each row of the feature-major buffer is contiguous: pa.array wraps it without a copy, and
    # the writer has encoded the batch before the buffer is reused for the next chunk.
    arrays = [pa.array(out[j]) for j in range(out.shape[0])]
    if label_out is not None:
        arrays.append(pa.array(label_out))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
