"""What the learner layers read of a release, through its ``ReleaseSpec`` only.

A release's metadata dict (what a source decoded from its schema) is read once into its
validated spec (``release_spec_of``: the fields checked, the stored noise recomputed from the
parameters); everything a learner needs is then a question to the spec: the noise of some
released columns (``column_noise_variances``), the L2 bound of a released vector
(``release_vector_bound``), the label's encoding, classes and budget (the spec's own
attributes).  No module outside ``iwpfast.privacy`` reads a metadata field by its key
(tests/test_spec_reading.py checks the source); the one field that is not the spec's,
``label_classes`` (what -1/+1 stand for, ``writing.declared_label_classes``), is read here.
"""
from __future__ import annotations

import copy
import math
import threading
from collections.abc import Mapping, Sequence

import numpy as np

from ..exceptions import ReleaseSpecError
from .spec import ReleaseSpec

__all__ = ["column_noise_variances", "release_label_classes", "release_spec_of",
           "release_vector_bound", "source_release_spec"]

#: how many metadata dicts ``release_spec_of`` remembers (a fit holds its training release and
#: perhaps a validation release; a few more cost nothing)
MEMO_SIZE = 8
_memo: list[tuple[Mapping, Mapping, ReleaseSpec]] = []
_memo_lock = threading.Lock()


def release_spec_of(meta: Mapping | str | bytes | None) -> ReleaseSpec | None:
    """The validated spec of a release's metadata (``ReleaseSpec.from_metadata``), None for
    None.  The spec of a dict is remembered for that dict object while its content is unchanged,
    so the layers that read one source's release (its noise, its label classes, its hold-out
    checks) share one validation of it; a dict decoded again (another ``open_source``) is
    validated again."""
    if meta is None:
        return None
    if not isinstance(meta, Mapping):
        return ReleaseSpec.from_metadata(meta)
    with _memo_lock:
        for i, (held, snapshot, spec) in enumerate(_memo):
            if held is meta and snapshot == meta:
                _memo.insert(0, _memo.pop(i))
                return spec
    spec = ReleaseSpec.from_metadata(meta)
    with _memo_lock:
        _memo.insert(0, (meta, copy.deepcopy(dict(meta)), spec))
        del _memo[MEMO_SIZE:]
    return spec


def source_release_spec(source) -> ReleaseSpec | None:
    """The spec of a source's release metadata (None for a source without any, or an object
    that is no source: arrays, a dict of columns)."""
    return release_spec_of(getattr(source, "release_metadata", None))


def column_noise_variances(spec: ReleaseSpec, features: Sequence[str]) -> np.ndarray:
    """The exact noise variance of each of ``features`` (any subset or order of the released
    columns: each carries its own independent noise; 0 for a public column and for a
    randomized-response code), ``ReleaseSpecError`` naming a column the release does not have."""
    released = list(spec.released_features)
    unknown = [f for f in features if f not in released]
    if unknown:
        raise ReleaseSpecError(
            f"feature(s) {unknown} are not among the released (noised) features {released}; "
            f"train on released columns, or pass noise_var explicitly for a clean head.")
    variance = dict(zip(released, spec.feature_noise_variances(), strict=True))
    return np.array([float(variance[f]) for f in features], dtype=np.float64)


def release_vector_bound(spec: ReleaseSpec) -> float | None:
    """The L2 bound of a released (clean) feature vector: the release's ``bound`` B, which the
    private columns are clipped to, with each public column (scaled into [-1, 1]) adding at most
    1 to the squared norm: sqrt(B^2 + number of public columns); with categorical columns, one
    per one-hot block and per public numeric column (``FeatureMap.vector_bound``); a label-only
    release: sqrt(p); None without bound nor public column."""
    if spec.has_categorical:
        return float(spec.feature_map.vector_bound(spec.bound))
    public = spec.public_features
    if spec.bound is None and not public:
        return None
    return math.sqrt((0.0 if spec.bound is None else float(spec.bound)) ** 2 + len(public))


def release_label_classes(source, default: Sequence) -> list | None:
    """The binary classes a release's -1/+1 labels stand for (its ``label_classes``), ``default``
    for a release written before the field; None for a source without release metadata or
    whose label is not binary (k classes are written as class indices: the spec's ``classes``)."""
    meta = getattr(source, "release_metadata", None)
    if meta is None:
        return None
    spec = release_spec_of(meta)
    if spec is None or spec.label_encoding != "pm1":
        return None
    return list(meta.get("label_classes") or default)
