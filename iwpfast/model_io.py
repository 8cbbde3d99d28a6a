"""Model files: one small self-describing JSON document per fitted estimator.

Layout (``format_version`` 1; version 2 adds ``"solver": "moments"`` to ``fitted`` and
``params``, written only for a model of that solver)::

    {"format": "iwpfast.model", "format_version": 1, "library_version": "0.1.0",
     "numpy_version": "...", "estimator": "IWPClassifier", "params": {...},
     "fitted": {"coef": [...], "intercept": b, "features": [...], "label": "y" | null,
                "feature_names_in": [...] | null, "classes": [...] | null, "n_rows_seen": n,
                "noise_var": [...], "label_keep_prob": .. | null, "target_noise_var": ..,
                "radius": .., "truncation": K, "mode": "iwp", "average_start": t0,
                "schedule": "constant", "learning_rate": step, "telemetry": {...},
                "sample_weight": "w" | null  (the weight column of a weighted pass),
                "feature_map": {...}  (categorical columns: the release's feature map),
                "categorical_mechanism": "rr", "block_cap": c  (a model learned from
                randomized-response codes: the coefficients are those of the feature map's
                one-hot coordinates, "release" its spec, "state" null)},
     "release": {...the release metadata...} | null,
     "state": {"theta": [...], ...} | null,
     "sha256": "..."}

Floats are written with ``repr`` precision (JSON round-trips them exactly), so a loaded model
predicts bit for bit what the saved one did.  ``state`` is the streaming state of the pass (a
few vectors), so ``partial_fit`` can continue after a load.  ``sha256`` covers the canonical dump
of everything else: an edited or truncated file is reported as corrupt instead of silently
predicting something else.

This module is the file format only (the envelope, its version and checksum, the atomic write and
the checked read); each estimator writes and reads its own part of the document
(``IWPBase._to_document`` / ``_from_document`` in ``iwpfast.estimators``), and ``iwpfast.load``
picks the estimator class the document names.
"""
from __future__ import annotations

import hashlib
import json
import math

import numpy as np

from ._version import __version__
from .exceptions import InvalidInputError

FORMAT = "iwpfast.model"
FORMAT_VERSION = 2


def jsonable(value):
    """Hyper-parameters and telemetry as JSON (inf/nan become strings, NumPy scalars plain)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else repr(v)  # "inf", "-inf", "nan"
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, str):
        return value
    raise InvalidInputError(f"cannot store {value!r} ({type(value).__name__}) in a model file; use plain "
                            "numbers and strings for hyper-parameters")


def parse_float(value) -> float:
    """A float written by ``jsonable`` (float("inf") / float("nan") parse its strings)."""
    return float(value)


def _digest(doc: dict) -> str:
    body = {k: v for k, v in doc.items() if k != "sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def seal(body: dict) -> dict:
    """The model document of an estimator's own part ``body`` (estimator, params, fitted,
    release, state: ``IWPBase._to_document``): the format envelope and the checksum around it.
    A model of ``solver='moments'`` is version 2 (an older iwpfast says to upgrade instead of
    failing on the parameter it does not know); every other model stays version 1, the file an
    older iwpfast reads."""
    version = 2 if body.get("fitted", {}).get("solver", "sgd") != "sgd" else 1
    doc = {"format": FORMAT, "format_version": version, "library_version": __version__,
           "numpy_version": np.__version__, **body}
    doc["sha256"] = _digest(doc)
    return doc


def write_document(body: dict, path, filesystem=None) -> None:
    """Write the sealed document of ``body`` to ``path`` atomically: a temporary file renamed into
    place, or on another filesystem (a URI such as ``s3://bucket/model.json``, or ``filesystem=``)
    a temporary key moved into place."""
    from .io.filesystem import resolve, write_bytes_atomic

    data = (json.dumps(seal(body), indent=1, allow_nan=False) + "\n").encode("utf-8")
    write_bytes_atomic(resolve(path, filesystem), data)


def read_model_document(path, filesystem=None) -> dict:
    """Read and check a model file (a path or URI): format, version, checksum.  Raises
    InvalidInputError."""
    from .io.filesystem import resolve

    loc = resolve(path, filesystem)
    path = loc.display
    try:
        doc = json.loads(loc.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise InvalidInputError(f"model file {path!r} does not exist; save one with model.save(path) or "
                             "`iwpfast fit ... --out model.json`") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"model file {path!r} is corrupt (not valid JSON: {exc}); re-create it with "
                             "model.save(path) or `iwpfast fit`") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InvalidInputError(f"{path!r} is not an iwpfast model file (no \"format\": \"{FORMAT}\"); "
                             "`iwpfast info FILE` tells what it is")
    version = doc.get("format_version")
    if not isinstance(version, int):
        raise InvalidInputError(f"model file {path!r} is corrupt (format_version={version!r})")
    if version > FORMAT_VERSION:
        raise InvalidInputError(
            f"model file {path!r} has format version {version}, written by iwpfast "
            f"{doc.get('library_version', '?')}; this iwpfast {__version__} reads versions up to "
            f"{FORMAT_VERSION}: upgrade iwpfast (pip install -U iwpfast)")
    if doc.get("sha256") != _digest(doc):
        raise InvalidInputError(f"model file {path!r} is corrupt: its checksum does not match its content "
                             "(edited or truncated); re-create it with model.save(path) or `iwpfast fit`")
    return doc
