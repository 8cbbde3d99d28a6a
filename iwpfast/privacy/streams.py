"""Releases between Arrow-speaking steps: a lazy released stream, a release read back with its
spec, and what ``privatize`` hands to ``fit``.

- :func:`release_stream`: ``release`` as a ``pyarrow.RecordBatchReader`` that privatizes each
  batch when it is pulled (no file; the schema carries the release metadata), for an ETL step to
  hand on (DuckDB, polars, a Flight server, ``pa.ipc`` to a socket).
- :func:`read_release`: a release (file, folder of parts, URI) as ``(Table or reader, spec)``; the
  spec is what DataFrame libraries drop with the schema metadata, and ``fit(df,
  release_spec=spec)`` takes it back.
- :class:`Privatized`: what ``privatize`` returns, ``(X_tilde, y_tilde)`` as before plus its spec:
  ``IWPClassifier().fit(privatize(X, y, spec))``.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from ..exceptions import InvalidInputError, ReleaseSpecError
from .options import _UNSET, DEFAULT_BATCH_ROWS, release_options, resolve_options_spec
from .spec import METADATA_KEY, ReleaseSpec

__all__ = ["release_stream", "read_release", "Privatized", "release_metadata_for"]


def release_metadata_for(spec: ReleaseSpec, rows: int | None = None) -> dict:
    """The release metadata (the ``iwpfast.release`` dict) a release with ``spec`` writes for
    ``rows`` rows: the spec, the row count and the binary label classes (as
    ``iwpfast.privacy.writing.metadata_json``)."""
    from .writing import declared_label_classes, metadata_json

    if not isinstance(spec, ReleaseSpec):
        raise InvalidInputError(f"release_spec must be an iwpfast.ReleaseSpec (from read_release "
                                f"or privatize), got {type(spec).__name__}")
    return json.loads(metadata_json(spec, rows, None, declared_label_classes(spec)))


class Privatized(tuple):
    """``(X_tilde, y_tilde)``, what :func:`~iwpfast.privacy.privatize` returns, with the spec
    of the release (``spec``: sigma, the label keep probability, the bound, the public columns,
    the features' names and ``row_count``).  Unpacks as the pair it always was; ``fit`` takes the
    whole object: ``IWPClassifier().fit(privatize(X, y, spec))``, the same as ``fit(X_tilde,
    y_tilde, release_spec=result.spec)``."""

    spec: ReleaseSpec

    def __new__(cls, X, y, spec: ReleaseSpec):
        obj = super().__new__(cls, (X, y))
        obj.spec = spec
        return obj

    def __getnewargs__(self):
        return (self[0], self[1], self.spec)

    @property
    def X(self) -> np.ndarray:
        return self[0]

    @property
    def y(self):
        return self[1]

    def fit_params(self) -> dict:
        """The keywords ``fit`` takes with ``(X, y)``: ``{"release_spec": spec}``."""
        return {"release_spec": self.spec}

    def to_arrow(self) -> pa.Table:
        """The released rows as a Table with the release metadata, as a release file holds them."""
        names = list(self.spec.released_features)     # a categorical column's one-hot block
        X = np.asarray(self[0])
        arrays = [pa.array(np.ascontiguousarray(X[:, j])) for j in range(X.shape[1])]
        if self[1] is not None:
            arrays.append(pa.array(np.asarray(self[1])))
            names.append(str(self.spec.label))
        meta = release_metadata_for(self.spec, X.shape[0])
        return pa.table(arrays, names=names).replace_schema_metadata(
            {METADATA_KEY: json.dumps(meta, sort_keys=True)})


def read_release(path, *, stream: bool = False, columns=None, filesystem=None):
    """A release and its spec: ``(table, spec)``, or ``(reader, spec)`` with ``stream=True``.

    path: a release file, a folder of parts (its manifest), a glob or a URI (``s3://...``;
        ``filesystem=`` for paths on another filesystem), or an open source (a RecordBatchReader
        of a released stream).
    stream: False reads every row into a ``pyarrow.Table``; True returns a
        ``RecordBatchReader`` read part by part, row group by row group (bounded memory).
    Either keeps the release metadata in its schema; the :class:`ReleaseSpec` is returned
    besides, because pandas, polars and DuckDB drop schema metadata: pass it back with
    ``fit(df, release_spec=spec)``.  Raises ReleaseSpecError when ``path`` is no release."""
    from ..io.sources import open_source

    src = open_source(path, columns, filesystem=filesystem)
    meta = src.release_metadata
    if meta is None:
        raise ReleaseSpecError(
            f"{src.description} has no '{METADATA_KEY}' metadata: it is not an iwpfast release; "
            "create one with `iwpfast release` or iwpfast.release()")
    spec = ReleaseSpec.from_metadata(meta)
    schema = src.schema
    reader = pa.RecordBatchReader.from_batches(schema, _with_schema(src.batches(), schema))
    if stream:
        return reader, spec
    return reader.read_all(), spec


def _with_schema(batches, schema: pa.Schema):
    for batch in batches:
        yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)


def release_stream(source, spec: ReleaseSpec, features=None, label=_UNSET, *, ranges=None,
                   seed=None, on_invalid: str = "error",
                   record_batch_rows: int = DEFAULT_BATCH_ROWS, threads: int | None = None,
                   engine: str | None = None, filesystem=None) -> pa.RecordBatchReader:
    """The release of ``source`` as a lazy ``pyarrow.RecordBatchReader``.

    Arguments as :func:`iwpfast.release` (no destination: the caller consumes the reader).
    Nothing is read or noised until batches are pulled: each pull reads the next record batch of
    ``source``, checks it, scales, clips and noises it (the noise is drawn then) and hands it on;
    memory stays at a batch or two.  The schema carries the release metadata (key
    ``iwpfast.release``; ``row_count`` is the source's rows when known before the release and
    ``on_invalid="error"``, else null).  For the same source, seed and ``record_batch_rows``, the
    rows are those :func:`iwpfast.release` writes.  A reader not read to its end drew noise for
    the rows it gave only; read once (a second pass would be another release)."""
    from ..io.sources import open_source
    from .file_release import _complete_spec
    from .writing import declared_label_classes, metadata_json, output_schema

    options = release_options(seed=seed, on_invalid=on_invalid, record_batch_rows=record_batch_rows,
                              threads=threads, engine=engine, filesystem=filesystem,
                              features=features, label=label, ranges=ranges)
    spec = resolve_options_spec(spec, options)
    columns = list(spec.feature_names) + ([spec.label] if spec.label is not None else [])
    src = open_source(source, columns=columns, record_batch_rows=options.batch_rows,
                      filesystem=filesystem)
    if src.release_metadata is not None:
        raise InvalidInputError(
            f"{src.description} is already an iwpfast release (it has '{METADATA_KEY}' metadata); "
            "releasing it again would add noise twice. Release the original data instead")
    spec = _complete_spec(spec, src, options.seed)
    expected_rows = src.num_rows if options.on_invalid == "error" else None
    schema = output_schema(spec, {METADATA_KEY: metadata_json(spec, expected_rows, None,
                                                              declared_label_classes(spec))})
    return pa.RecordBatchReader.from_batches(schema, _released(src, spec, options, schema))


def _released(src, spec: ReleaseSpec, options, schema):
    """The released batches, privatized as they are pulled (a generator: the privatizer's
    threads are closed when it ends or is closed)."""
    from .file_release import _FixedBatches
    from .privatizer import _Privatizer
    from .writing import label_dtype, record_batch

    privatizer = _Privatizer(spec, options.seed, options.threads, options.engine, src.num_rows)
    fixed = _FixedBatches(options.batch_rows) if options.on_invalid == "drop" else None
    written = 0
    try:
        for origin, batch in src.located_batches():
            feats, label_values, dropped = privatizer.prepare(origin, batch, options.on_invalid)
            n = batch.num_rows - dropped
            if not n:
                continue
            # fresh buffers per batch: the consumer keeps the batches it was handed
            out = np.empty((privatizer.p, n), dtype=privatizer.dtype)
            label_out = None if spec.label is None else np.empty(n, dtype=label_dtype(spec))
            privatizer.run(feats, label_values, out, label_out)
            written += n
            released = record_batch(schema, out, label_out)
            yield from ([released] if fixed is None else fixed.add(released))
        if fixed is not None:
            yield from fixed.finish()
        if written == 0:
            raise InvalidInputError(f"{src.description} holds no rows to release (all dropped, "
                                    "or none): nothing to release")
        # the warnings a release gives at its end (labels in sorted order, values clipped to
        # their ranges...), once the whole stream was read
        from .report import ReleaseResult, finish_counts
        finish_counts(ReleaseResult(destination=None, spec=spec), privatizer)
    finally:
        privatizer.close()
