"""Checkpoints of a streaming pass: heads' state + stream position + hashes, written atomically.

Format: one ``.npz`` file (NumPy arrays only, loaded with ``allow_pickle=False``) holding, for
head i, the arrays of ``HeadState.arrays()`` under ``"{i}/{name}"``, and a JSON document (as a uint8
array under ``"meta"``) with the head names, the position in the stream (epoch, global row, file
index, row group, row in the group), the configuration hash and the dataset hash.

Writes go to a temporary file in the same directory, are fsync'ed, then ``os.replace``d over the
target: a crash at any moment leaves either the previous checkpoint or the new one, never a torn
file.  A checkpoint path may also be a URI (``s3://bucket/fit.ckpt``...): it is then written to a
temporary key and moved into place (``iwpfast.io.filesystem.write_bytes_atomic``).
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import os
import tempfile
from dataclasses import fields
from typing import Any

import numpy as np

from ..exceptions import CheckpointError
from .state import HeadState

CHECKPOINT_FORMAT = "iwpfast.checkpoint"
CHECKPOINT_VERSION = 1
STATE_KEYS = ("theta", "theta_avg", "intercept", "intercept_avg", "carry_X", "carry_y",
              "telemetry", "trace", "trace_steps", "counters")
# fields that do not change the model (so changing them does not invalidate a checkpoint)
_NEUTRAL_FIELDS = {"trace_every"}


def _canon(value):
    """JSON-able, exact representation (floats as hex so the hash sees every bit)."""
    if isinstance(value, np.ndarray):
        return {"dtype": str(value.dtype), "shape": list(value.shape),
                "data": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()}
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v.hex() if math.isfinite(v) else repr(v)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (list, tuple)):
        return [_canon(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canon(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if value is None or isinstance(value, str):
        return value
    return repr(value)            # e.g. datetime statistics of a Parquet footer


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(_canon(obj), sort_keys=True).encode()).hexdigest()


def config_hash(heads, epochs: int) -> str:
    """Hash of everything that determines the model: per head its name, resolved HeadConfig
    (all fields but trace_every), feature, label and sample-weight columns, theta0 and
    intercept0; and epochs."""
    desc = []
    for h in heads:
        cfg = {f.name: getattr(h.config, f.name) for f in fields(h.config)
               if f.name not in _NEUTRAL_FIELDS}
        cfg["noise_var"] = np.asarray(cfg["noise_var"], dtype=np.float64)
        theta0 = None if h.theta0 is None else np.asarray(h.theta0, dtype=np.float64)
        entry = {"name": h.name, "config": cfg, "features": list(h.features),
                 "label": h.label, "theta0": theta0, "intercept0": float(h.intercept0)}
        # unweighted heads hash as before sample weights existed: their checkpoints still resume
        if not cfg.get("weighted"):
            cfg.pop("weighted", None)
        if getattr(h, "sample_weight", None) is not None:
            entry["sample_weight"] = h.sample_weight
        desc.append(entry)
    return _digest({"heads": desc, "epochs": int(epochs)})


#: bytes hashed at each end of a file whose format has no footer with statistics (IPC, CSV)
EDGE_BYTES = 1 << 20


def _file_identity(f) -> dict:
    """What identifies one file's content cheaply (nothing is read beyond the footer for Parquet):
    its size, and for Parquet the footer -- row count and byte size of every row group and, per
    column chunk, its statistics (min, max, null count), value count, encoding sizes and offset;
    two Parquet files with the same schema and row count but other values differ in these
    statistics (and almost always in the compressed sizes).  IPC/CSV have no such footer: the
    SHA-256 of the first and last ``EDGE_BYTES`` of the file stands in."""
    path = f.path
    try:
        size = os.path.getsize(path)
    except (OSError, TypeError):
        size = None
    ident: dict = {"size": size}
    pf = getattr(f, "pf", None)
    if pf is not None:
        ident["parquet_footer"] = pf.metadata.to_dict()
    elif size is not None:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            digest.update(fh.read(EDGE_BYTES))
            if size > EDGE_BYTES:
                fh.seek(max(EDGE_BYTES, size - EDGE_BYTES))
                digest.update(fh.read(EDGE_BYTES))
        ident["edges_sha256"] = digest.hexdigest()
    return ident


def _content_identity(source, columns) -> dict | None:
    """The content part of ``dataset_hash``: per file ``_file_identity`` for file sources; for an
    in-memory table the SHA-256 of the used columns' values (one pass over them, ~1 GB/s);
    None for a one-shot stream (a RecordBatchReader cannot be read twice, nor resumed)."""
    files = getattr(source, "files", None)
    if files is not None:
        return {"files": [_file_identity(f) for f in files]}
    table = getattr(source, "table", None)
    if table is not None:
        digest = hashlib.sha256()
        for c in columns:
            for chunk in table.column(c).chunks:
                for buf in chunk.buffers():
                    if buf is not None:
                        digest.update(memoryview(buf))
        return {"columns_sha256": digest.hexdigest()}
    return None


def dataset_hash(source, columns) -> str:
    """Hash of the data's identity: release metadata, names and types of the used columns, row
    count, and the content (``_content_identity``: Parquet footers with their row-group statistics
    and the file sizes; cost: the footers are already read to open the files, ~1 ms per 100 row
    groups to serialize).  File paths are left out: moving the files does not change the data."""
    schema = source.full_schema
    return _digest({
        "release": source.release_metadata,
        "columns": [[c, str(schema.field(c).type)] for c in columns],
        "num_rows": source.num_rows,
        "content": _content_identity(source, columns),
    })


def write_checkpoint(path: str, states: dict[str, HeadState], meta: dict) -> None:
    """Write the heads' states and ``meta`` (JSON-able) to ``path`` atomically."""
    path = os.fspath(path)
    names = list(states)
    payload = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "heads": names, **meta}
    arrays: dict[str, Any] = {"meta": np.frombuffer(json.dumps(payload).encode(), dtype=np.uint8)}
    for i, name in enumerate(names):
        for key, arr in states[name].arrays().items():
            arrays[f"{i}/{key}"] = arr
    from ..io.filesystem import is_uri, resolve, write_bytes_atomic

    if is_uri(path):
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        write_bytes_atomic(resolve(path), buf.getvalue())
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            buf = io.BytesIO()
            np.savez(buf, **arrays)
            f.write(buf.getbuffer())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def checkpoint_exists(path) -> bool:
    """Whether a checkpoint file is at ``path`` (a local path or a URI)."""
    from ..io.filesystem import resolve

    return resolve(os.fspath(path)).kind() == "file"


def read_checkpoint(path: str) -> tuple[dict[str, HeadState], dict]:
    """(states by head name, meta) from a checkpoint written by ``write_checkpoint``."""
    from ..io.filesystem import is_uri, resolve

    path = os.fspath(path)
    try:
        where = io.BytesIO(resolve(path).read_bytes()) if is_uri(path) else path
        with np.load(where, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            if meta.get("format") != CHECKPOINT_FORMAT:
                raise CheckpointError(f"{path!r} is not an iwpfast checkpoint")
            if meta.get("version") != CHECKPOINT_VERSION:
                raise CheckpointError(
                    f"{path!r} has checkpoint version {meta.get('version')}; this iwpfast reads "
                    f"version {CHECKPOINT_VERSION}. Restart the pass without resume.")
            states = {}
            for i, name in enumerate(meta["heads"]):
                states[name] = HeadState.from_arrays({k: z[f"{i}/{k}"] for k in STATE_KEYS})
    except CheckpointError:
        raise
    except (OSError, ValueError, KeyError, EOFError) as exc:
        raise CheckpointError(
            f"cannot read checkpoint {path!r} ({type(exc).__name__}: {exc}); it is corrupt or not "
            f"a checkpoint. Delete it and restart the pass without resume.") from exc
    return states, meta
