"""Streaming local-DP release of a dataset (the data holder's side): the front door.

``release(source, destination, spec, ...)`` reads any Arrow source chunk by chunk, scales each
feature from its declared public range into [-1, 1], clips each feature vector to the L2 ball of
radius ``bound``, adds the noise of the spec's law, applies randomized response to binary labels (or
the Gaussian mechanism to a bounded regression target) and writes Parquet or Arrow IPC atomically,
with the spec as JSON in the schema metadata (key ``iwpfast.release``).  ``privatize`` does the same
in memory.

The modules behind it, by responsibility:

- ``options``: :class:`~iwpfast.privacy.options.ReleaseOptions`, resolved once from the keywords;
  the spec's column overrides;
- ``run_release`` (here): the one front door, a single file or a multi-part release
  (``iwpfast.privacy.multipart``, serial or with a parts runner such as Dask's);
- ``file_release``: one source into one file; ``privatizer``: scaling, clipping, threads;
  ``noise_laws``: the noise law as a strategy; ``batches``: the input checks; ``writing``: schema
  and metadata; ``report``: the result and its warnings; ``shuffle``: the optional row shuffle.
"""
from __future__ import annotations

import os
from dataclasses import replace

import numpy as np

from ..exceptions import InvalidInputError, ReleaseSpecError
from .file_release import release_file
from .noise_laws import DISCRETE_FUSED_MIN_ROWS, FUSED_MIN_ROWS, FUSED_WARM_MIN_ROWS
from .options import (
    _UNSET,
    DEFAULT_BATCH_ROWS,
    ON_INVALID,
    RELEASE_ENGINES,
    ReleaseOptions,
    release_options,
    resolve_options_spec,
    resolve_spec,
)
from .privatizer import _Privatizer
from .report import LABEL_ORDER_Z, ReleaseResult, label_order_z
from .shuffle import SHUFFLE_MEMORY_BYTES
from .spec import METADATA_KEY, ReleaseSpec
from .streams import Privatized, read_release, release_stream
from .writing import label_dtype

__all__ = ["release", "run_release", "privatize", "release_stream", "read_release", "Privatized",
           "read_release_spec", "ReleaseResult",
           "ReleaseOptions", "release_options", "DEFAULT_BATCH_ROWS", "RELEASE_ENGINES",
           "ON_INVALID", "FUSED_MIN_ROWS", "FUSED_WARM_MIN_ROWS", "DISCRETE_FUSED_MIN_ROWS",
           "SHUFFLE_MEMORY_BYTES", "LABEL_ORDER_Z", "label_order_z", "METADATA_KEY"]


def release(source, destination, spec: ReleaseSpec, features=None, label=_UNSET, *, ranges=None,
            seed=None, overwrite: bool = False, on_invalid: str = "error", format: str | None = None,
            compression: str | None = "auto", record_batch_rows: int = DEFAULT_BATCH_ROWS,
            threads: int | None = None, progress: bool | None = False,
            engine: str | None = None, filesystem=None, part: dict | None = None,
            shuffle: bool = False, kernel: str | None = None,
            batch_rows: int | None = None, max_part_rows: int | None = None,
            resume: bool = False, part_retries: int | None = None) -> ReleaseResult:
    """Release ``source`` under local DP into ``destination`` (Parquet, or Arrow IPC).

    Every record is scaled by the declared ranges, clipped, noised and written; the parameters go
    into the file's schema metadata (never the seed).  Written to a temporary file and renamed on
    success: a failed or interrupted release leaves nothing.

    Parameters
    ----------
    source : path, folder, glob, URI, pyarrow Dataset/RecordBatchReader/Table, DataFrame, dict of
        arrays, or (X, y)
        Anything :func:`iwpfast.io.sources.open_source` reads; read record batch by record batch
        (memory stays bounded).
    destination : path or URI
        The output file; the format comes from its suffix (``iwpfast.io.formats``: ``.parquet``;
        ``.arrow``, ``.arrows``, ``.feather``, ``.ipc``) or ``format``.  A folder / prefix (a
        trailing ``/``, or an existing folder) makes a multi-part release: one part per input
        file and a manifest written last (:func:`iwpfast.privacy.multipart.release_parts`).
    spec : ReleaseSpec
        The privacy parameters; ``features``, ``label`` and ``ranges`` given here override it.
    features : sequence of str, optional
    label : str or None, optional
        None releases the features only.
    ranges : dict {name: (lo, hi)} or str, optional
    seed : int or None, default None
        None draws fresh randomness from the OS: what a real release must do.  An integer makes
        the noise reproducible, **for simulations only** (whoever knows it can remove the noise);
        never written to the file.  Reproducible for the same source, ``batch_rows`` and
        ``threads``.
    overwrite : bool, default False
        Replace an existing destination (refused otherwise).
    on_invalid : {"error", "drop"}, default "error"
        A null/NaN/inf value stops the release naming column and row, or its row is dropped and
        counted.
    format : {"parquet", "ipc"} or None, default None (from the destination's suffix)
    compression : "auto", a codec name or None, default "auto"
        "auto": Parquet features uncompressed (noisy floats do not compress: snappy saved 0.01% of
        the size for 15% more write time), labels snappy; or one codec for every column
        ("snappy", "zstd", "lz4", None).  IPC: "lz4"/"zstd" or none.
    record_batch_rows : int >= 1, default 2**18
        Rows per Arrow record batch read from the source and written (a memory bound; unrelated
        to the learner's minibatches).  ``batch_rows=`` is its deprecated name.
    threads : int >= 1 or None, default None
        Noise threads (None: min(2, cores)).
    progress : bool or "force", default False
        A progress bar on a terminal (True), never (False) or always ("force").
    engine : {"auto", "numba", "numpy"}, default "auto"
        "auto": the fused Numba kernels for float32 features from ``FUSED_MIN_ROWS`` (2**24) rows
        on, or when the row count is unknown, or from ``FUSED_WARM_MIN_ROWS`` (2**16) once this
        process has loaded them; NumPy otherwise (the first Numba call of a process costs
        ~0.5 s).  "numba" or "numpy" force one; both give the same bits for the same seed.
        ``kernel=`` (values "auto", "fused", "numpy") is its deprecated name.
    filesystem : pyarrow.fs.FileSystem or fsspec filesystem, optional
        For source and destination paths that are not URIs (URIs such as
        ``s3://bucket/key?endpoint_override=...`` name their own filesystem).  Remote outputs are
        written to a temporary key and moved into place.
    part : dict, optional
        ``{"release_id": id, "index": i}``: set by ``release_parts`` and the Dask release, not by
        hand.
    max_part_rows : int >= 1 or None, default None
        A multi-part release whose Parquet/IPC inputs larger than this are split into parts of
        whole row groups (:func:`iwpfast.privacy.multipart.plan_parts`); the destination is then
        a folder / prefix.
    resume : bool, default False
        Multi-part releases: continue an unfinished run into the same folder (killed, or failed
        with ``resume=True``): the parts it finished are kept byte for byte and only the missing
        ones are released (the plan -- inputs, their split into parts, spec, format -- must be
        the same; each row is still released exactly once).  A run with ``resume=True`` that
        fails keeps its finished parts, unpublished, for the next resumed run.
    part_retries : int >= 0 or None, default None (2)
        Multi-part releases: how often a part is tried again after a transient (I/O) error;
        other errors stop the release at once.
    shuffle : bool, default False
        Write the rows in a uniformly random order (from the release's key).  The order of the
        rows is not protected by the noise: a source sorted or clustered by the label leaks the
        label through position.  In memory when the source fits in ``SHUFFLE_MEMORY_BYTES``,
        else a two-pass bucket shuffle through temporary files (deleted at the end).  Without
        it, a runs test over the label stream warns when the labels look sorted or clustered.

    Returns
    -------
    ReleaseResult
        Rows read/written, dropped and clipped counts (about the private data: do not publish)
        and the spec with its guarantee.

    Raises
    ------
    InvalidInputError
        Bad parameter, missing column or range, invalid value (names column, row and the fix).
    """
    options = release_options(
        seed=seed, overwrite=overwrite, on_invalid=on_invalid, format=format,
        compression=compression, record_batch_rows=record_batch_rows, batch_rows=batch_rows,
        threads=threads, progress=progress, engine=engine, kernel=kernel, filesystem=filesystem,
        shuffle=shuffle, max_part_rows=max_part_rows, features=features, label=label, ranges=ranges,
        resume=resume, part_retries=part_retries)
    if part is not None:
        return release_file(source, destination, resolve_options_spec(spec, options), options, part)
    return run_release(source, destination, spec, options)


def run_release(source, destination, spec: ReleaseSpec, options: ReleaseOptions, *,
                parts_runner=None) -> ReleaseResult:
    """The front door of every release: one file, or a multi-part release when the destination is
    a folder / prefix (a trailing ``/`` or an existing folder), ``options.max_part_rows`` is set
    or a ``parts_runner`` is given (``iwpfast.privacy.multipart.run_parts_serially`` by default;
    ``iwpfast.distributed`` passes one that runs the parts as Dask tasks)."""
    from ..io.stream_writer import is_stream_destination

    if is_stream_destination(destination) and (parts_runner is not None or options.resume
                                               or options.max_part_rows is not None):
        raise InvalidInputError(
            "a stream destination (file-like, NativeFile, stdout) takes one release: a multi-part "
            "release (max_part_rows, resume, a cluster) writes a folder of parts; give a folder "
            "path instead")
    if parts_runner is not None or options.max_part_rows is not None or _is_folder(destination, options):
        from .multipart import release_parts_with

        if options.shuffle:
            raise InvalidInputError(
                "shuffle=True is for a single output file; a multi-part release writes one "
                "part per input file: shuffle the inputs first, or release into one file")
        return release_parts_with(source, destination, spec, options, parts_runner)
    return release_file(source, destination, resolve_options_spec(spec, options), options)


def _is_folder(destination, options: ReleaseOptions) -> bool:
    from ..io.filesystem import is_uri, resolve

    if not isinstance(destination, (str, os.PathLike)):
        return False
    loc = resolve(destination, None if is_uri(os.fspath(destination)) else options.filesystem)
    return loc.trailing_slash or loc.kind() == "dir"


def privatize(X, y=None, spec: ReleaseSpec | None = None, *, seed=None, threads: int | None = None,
              on_invalid: str = "error", engine: str | None = None, kernel: str | None = None):
    """Release in memory: the noisy ``(X_tilde, y_tilde)`` of raw ``X`` and labels ``y``.

    Parameters
    ----------
    X : array of shape (n, p), dict {name: 1-D array}, or a table / stream
        Raw features; an array's columns are ``spec.features`` in order.  A pyarrow Table or
        RecordBatchReader, a pandas/polars DataFrame, a polars LazyFrame, a DuckDB relation, an
        object exporting ``__arrow_c_stream__`` or an iterable of RecordBatches (with ``y``
        None) is read whole, its columns ``spec.features`` and the label ``spec.label`` (when it
        holds that column).
    y : array of shape (n,) or None, default None
        Labels (binary, or the declared classes) or regression targets; None: features only.
    spec : ReleaseSpec
        The privacy parameters, with its features and declared ranges.
    seed : int or None, default None
        As in :func:`release`: None (fresh OS randomness) for a real release, an integer for
        simulations only.
    threads : int >= 1 or None, default None
    on_invalid : {"error", "drop"}, default "error"
    engine : {"auto", "numba", "numpy"}, default "auto"
        As in :func:`release` (``kernel=`` is its deprecated name).

    Returns
    -------
    Privatized
        The pair ``(X_tilde, y_tilde)`` (it unpacks as before) with ``.spec``, the release's
        spec (``row_count`` set): ``IWPClassifier().fit(result)`` debiases for it, as
        ``fit(X_tilde, y_tilde, release_spec=result.spec)`` does; ``result.to_arrow()`` is the
        table a release file would hold.
    X_tilde : ndarray of shape (n, p)
        One column per released coordinate (``spec.released_features``: a categorical feature,
        given as strings or codes, is its one-hot block).  A transposed view of a feature-major
        (p, n) array (``X_tilde.T`` is C-contiguous, the layout the kernels read), in
        ``spec.feature_dtype``.
    y_tilde : ndarray of shape (n,) or None
        int8 in {-1, +1} (class indices with >= 3 classes, float for regression); None when ``y``
        is None.
    """
    import pyarrow as pa

    from ..io.sources import BatchOrigin

    if spec is None:
        raise InvalidInputError("privatize needs a ReleaseSpec: privatize(X, y, spec)")
    if y is None and _is_table_like(X):
        X, y = _columns_of(X, spec)
    if isinstance(X, dict):
        names = list(X)
        spec = resolve_spec(spec, spec.features or names,
                             spec.label or ("y" if y is not None else None), None)
        cols = {f: np.asarray(X[f]) for f in spec.feature_names}
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise InvalidInputError(f"X has shape {X.shape}; expected (n_rows, n_features)")
        if spec.features is None or len(spec.features) != X.shape[1]:
            raise InvalidInputError(
                f"X has {X.shape[1]} columns but the spec names {len(spec.features or ())} features; "
                "give spec.features in X's column order"
            )
        cols = {f: X[:, j] for j, f in enumerate(spec.features)}
        spec = resolve_spec(spec, spec.features, spec.label or ("y" if y is not None else None), None)
    if y is None:
        spec = replace(spec, label=None, epsilon_y=None, delta_y=None, target_range=None)
    if spec.ranges_from_data:
        spec.scaler_ranges()  # in memory: pass declared ranges (from_data is for release())
    n_rows = len(cols[spec.features[0]]) if spec.features else 0
    options = release_options(seed=seed, threads=threads, on_invalid=on_invalid, engine=engine,
                              kernel=kernel)
    privatizer = _Privatizer(spec, seed, threads, options.engine, n_rows)
    try:
        arrays = [pa.array(np.ascontiguousarray(cols[f])) for f in spec.feature_names]
        names = list(spec.feature_names)
        if y is not None:
            arrays.append(pa.array(np.ascontiguousarray(np.asarray(y))))
            names.append(spec.label)
        batch = pa.RecordBatch.from_arrays(arrays, names=names)
        origin = BatchOrigin(0, "<arrays>", -1, 0, 0)
        feats, label_values, dropped = privatizer.prepare(origin, batch, on_invalid)
        n = batch.num_rows - dropped
        out = np.empty((privatizer.p, n), dtype=privatizer.dtype)
        label_out = None
        if y is not None:
            label_out = np.empty(n, dtype=label_dtype(spec))
        privatizer.run(feats, label_values, out, label_out)
    finally:
        privatizer.close()
    from .streams import Privatized
    return Privatized(out.T, label_out, spec.with_counts(row_count=n, seeded=seed is not None))


def _is_table_like(X) -> bool:
    """A table or stream ``privatize`` reads through ``open_source`` (not arrays or a dict)."""
    import pyarrow as pa

    if isinstance(X, (np.ndarray, dict, list)):
        return False
    mod = type(X).__module__ or ""
    return (isinstance(X, (pa.Table, pa.RecordBatch, pa.RecordBatchReader))
            or hasattr(X, "__arrow_c_stream__") or hasattr(X, "__next__")
            or mod.startswith(("pandas", "polars", "duckdb")))


def _columns_of(X, spec: ReleaseSpec):
    """({feature: array}, label array or None) of a table or stream, read whole."""
    from ..io.sources import open_source

    if spec.features is None:
        raise InvalidInputError("privatize of a table needs spec.features (the columns to release)")
    src = open_source(X)
    label = spec.label if spec.label is not None and spec.label in src.full_schema.names else None
    columns = list(spec.features) + ([label] if label is not None else [])
    import pyarrow as pa

    table = pa.Table.from_batches(list(src.batches(columns)), schema=src.schema)
    arrays = {c: table.column(c).to_numpy() for c in columns}
    y = arrays.pop(label) if label is not None else None
    return arrays, y


def read_release_spec(path) -> ReleaseSpec:
    """The :class:`ReleaseSpec` stored in a released file's schema metadata.

    Raises ``ReleaseSpecError`` when the file is not an iwpfast release or its metadata is corrupt.
    """
    from ..io.sources import open_source

    src = open_source(path)
    if src.release_metadata is None:
        raise ReleaseSpecError(
            f"{os.fspath(path)!r} has no '{METADATA_KEY}' metadata: it is not an iwpfast release; "
            "create one with `iwpfast release` or iwpfast.release()"
        )
    return ReleaseSpec.from_metadata(src.release_metadata)
