"""The release of one source into one output file: read, check, privatize and write, atomically.

:func:`release_file` is what every release path ends in (a single file, each part of a multi-part
release, a Spark partition): it takes a resolved spec and one :class:`ReleaseOptions`.
"""
from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..exceptions import InvalidInputError
from ..progress import progress_bar
from .options import ReleaseOptions, fill_ranges_from_data
from .privatizer import _Privatizer
from .report import ReleaseResult, finish_counts, is_seeded, warn_seeded
from .spec import METADATA_KEY, ReleaseSpec
from .writing import (
    declared_label_classes,
    label_dtype,
    metadata_text,
    output_schema,
    record_batch,
    release_metadata,
    with_rows,
)


def release_file(source, destination, spec: ReleaseSpec, options: ReleaseOptions,
                 part: dict | None = None, digest=None) -> ReleaseResult:
    """Release ``source`` into the file ``destination`` with the resolved ``spec`` (see
    :func:`iwpfast.privacy.release.release`); ``part``: ``{"release_id", "index"}`` of a part
    (written owner-only: its release's manifest publishes it); ``digest``: a
    ``part_rows.RowDigest`` that every row read is added to."""
    from ..io.filesystem import is_uri
    from ..io.outputs import refuse_writing_onto_inputs
    from ..io.sources import expand_source, open_files, open_source
    from ..io.writer import check_destination

    def local_fs(target):
        return None if not isinstance(target, (str, os.PathLike)) or is_uri(os.fspath(target)) \
            else options.filesystem

    from ..io.stream_writer import is_stream_destination

    # a folder / glob source listed once: for the check below and for reading
    expanded = expand_source(source, local_fs(source))
    if is_stream_destination(destination):
        pass                           # a file-like object or NativeFile: nothing to check
    else:
        if part is None:
            # a killed run's staging files (noisy copies under another key, never published)
            # never outlive this run: removed first, also when this run is then refused (the
            # destination exists, the input is bad...); a part's runner cleans its folder
            _remove_leftovers(destination, local_fs(destination))
            # (a part's plan checked the whole release's inputs)
            refuse_writing_onto_inputs(destination, source, options.filesystem,
                                       files=None if expanded is None else expanded[0])
        destination = check_destination(destination, options.overwrite, local_fs(destination))
    columns = list(spec.feature_names) + ([spec.label] if spec.label is not None else [])
    src = open_source(source, columns=columns, record_batch_rows=options.batch_rows,
                      filesystem=local_fs(source)) if expanded is None else \
        open_files(expanded, columns, record_batch_rows=options.batch_rows)
    if src.release_metadata is not None:
        raise InvalidInputError(
            f"{src.description} is already an iwpfast release (it has '{METADATA_KEY}' metadata); "
            "releasing it again would add noise twice. Release the original data instead"
        )
    if src.num_rows == 0 and part is None:   # a part may be empty (a Spark partition)
        raise InvalidInputError(f"{src.description} holds no rows: nothing to release; check the "
                                "path (an empty file or folder)")
    spec = _complete_spec(spec, src, options.seed)
    if isinstance(destination, Path) and src.num_rows:
        from ..io.outputs import check_writable_folder

        # the space the file will take (noisy features do not compress), from the row count the
        # footers give: a full disk is found before the data are read, not at the end
        bytes_per_row = len(spec.feature_names) * (4 if spec.feature_dtype == "float32" else 8) + 8
        check_writable_folder(destination, what="destination",
                              need_bytes=int(src.num_rows) * bytes_per_row)
    from ..io.source_base import load_lazy_imports

    load_lazy_imports()                 # before the first batch: a Ctrl-C ends the run cleanly
    shuffle_tmp = None
    if options.shuffle:
        from .shuffle import shuffled_source

        src, shuffle_tmp = shuffled_source(src, columns, options.batch_rows, options.seed)
    if digest is not None:
        from .fingerprints import digested_source

        src = digested_source(src, digest)
    privatizer = _Privatizer(spec, options.seed, options.threads, options.engine, src.num_rows)
    result = ReleaseResult(destination=destination if isinstance(destination, Path)
                           else getattr(destination, "display", None) or _stream_name(destination),
                           spec=spec)
    t0 = time.perf_counter()
    bar = progress_bar(options.progress, src.num_rows, desc="release")
    try:
        _write(src, destination, spec, options, part, privatizer, result, bar)
    finally:
        bar.close()
        privatizer.close()
        if shuffle_tmp is not None:
            shuffle_tmp.cleanup()
    result.elapsed_s = time.perf_counter() - t0
    finish_counts(result, privatizer)
    from ..progress import logger
    logger.log(logging.DEBUG if part is not None else logging.INFO,
               "released %s rows to %s in %.2f s (%.3g M rows/s)", f"{result.rows_written:,}",
               result.destination, result.elapsed_s, result.rows_per_s / 1e6)
    return result


def _remove_leftovers(destination, filesystem=None) -> None:
    """Remove the staging files (and incomplete uploads of staging keys) that earlier runs into
    ``destination`` left, saying so."""
    import warnings

    from ..io.filesystem import Location, remove_staging_leftovers, resolve

    loc = destination if isinstance(destination, Location) else \
        resolve(os.fspath(destination), filesystem)
    removed = remove_staging_leftovers(loc)
    if removed:
        shown = ", ".join(repr(n) for n in removed[:3]) + (" ..." if len(removed) > 3 else "")
        warnings.warn(f"removed {len(removed)} staging file(s) that an earlier release into "
                      f"{loc.display!r} left unpublished (a killed run: {shown})", UserWarning,
                      stacklevel=5)


def _stream_name(stream) -> str:
    """How a stream destination is named in the result: its file name (``<stdout>``) if any."""
    name = getattr(stream, "name", None)
    return name if isinstance(name, str) else f"<{type(stream).__name__}>"


def _complete_spec(spec: ReleaseSpec, src, seed) -> ReleaseSpec:
    """The spec with its ranges known (declared, or from the data when asked) and ``seeded`` set
    (with the seeded-release warning)."""
    if spec.ranges_from_data:
        spec = fill_ranges_from_data(spec, src)
    else:
        spec.scaler_ranges()
        if spec.task == "regression" and spec.label is not None and spec.target_range is None:
            raise InvalidInputError(
                f"regression needs the declared public range of the target {spec.label!r}; "
                "give target_range=(lo, hi) (CLI: --target-range LO:HI)"
            )
    seeded = is_seeded(seed)
    if seeded != spec.seeded:
        spec = spec.with_counts(seeded=seeded)
    if seeded:
        warn_seeded(stacklevel=6)  # the caller of release()
    return spec


def _public_one_hot(spec: ReleaseSpec) -> list[str]:
    """The released columns of the public categorical features (0/1, no noise) and the
    randomized-response codes (k values each): small dictionaries that compress."""
    if not spec.has_categorical:
        return []
    fm = spec.feature_map
    return [n for c in fm.categorical if c.public for n in c.coordinate_names()] \
        + [c.name for c in fm.rr_columns]


def _codecs(spec: ReleaseSpec, compression):
    """Per-column codecs: "auto" leaves the noisy features uncompressed (they do not compress)."""
    if compression != "auto":
        return compression
    codecs = {f: "none" for f in spec.released_features}
    for f in _public_one_hot(spec):
        codecs[f] = "snappy"
    if spec.label is not None:
        codecs[spec.label] = "snappy" if spec.task == "classification" else "none"
    return codecs


def _write(src, destination, spec: ReleaseSpec, options: ReleaseOptions, part, privatizer,
           result: ReleaseResult, bar) -> None:
    """Privatize chunk by chunk into an atomic writer; the metadata is final at the commit."""
    # With on_invalid="error" every row read is written, so a known row count is final now;
    # otherwise the writer fixes the metadata at the end (free for Parquet, a rewrite for IPC).
    expected_rows = src.num_rows if options.on_invalid == "error" else None
    # the spec's metadata, built once: the commit only sets the rows written
    meta = release_metadata(spec, expected_rows, part, declared_label_classes(spec))
    schema = output_schema(spec, {METADATA_KEY: metadata_text(meta)})
    dictionary = [spec.label] if spec.label is not None and spec.task == "classification" else []
    # public one-hot columns hold only 0 and 1, randomized-response codes k values:
    # dictionary-encoded they take bits, not bytes
    dictionary += _public_one_hot(spec)
    # The encoder of chunk k runs in a background thread (pyarrow releases the GIL) while chunk
    # k+1 is read and noised; two output buffers alternate so that the one being written is never
    # overwritten.
    write_pool = ThreadPoolExecutor(1)
    try:
        with _writer(destination, schema, options, _codecs(spec, options.compression),
                     dictionary, final=part is None) as writer:
            # with dropped rows, the output is cut into batches (Parquet row groups, IPC record
            # batches) of exactly batch_rows rows: their sizes would otherwise say how many rows
            # were dropped, and where
            fixed = _FixedBatches(options.batch_rows) if options.on_invalid == "drop" else None
            _write_chunks(src, writer, schema, spec, options.on_invalid, privatizer, result, bar,
                          write_pool, fixed)
            if result.rows_written == 0 and part is None:   # nothing published: the writer aborts
                raise InvalidInputError(
                    f"{src.description} holds no rows: nothing to release; check the path"
                    if result.rows_read == 0 else
                    f"all {result.rows_read:,} rows of {src.description} were dropped (missing or "
                    "invalid values): nothing to release")
            # the rows written complete the spec (built and calibrated once, at the start)
            spec = spec.with_counts(row_count=result.rows_written)
            writer.commit({METADATA_KEY: metadata_text(with_rows(meta, result.rows_written))})
    finally:
        write_pool.shutdown(wait=True)
    result.spec = spec


def _writer(destination, schema, options: ReleaseOptions, compression, dictionary, *,
            final: bool = True):
    """The atomic file writer, or for a stream destination (file-like, NativeFile) the stream
    writer (``iwpfast.io.stream_writer``: no end marker / footer unless the release finishes)."""
    from ..io.stream_writer import StreamArrowWriter, is_stream_destination
    from ..io.writer import AtomicArrowWriter

    if is_stream_destination(destination):
        return StreamArrowWriter(destination, schema, format=options.format,
                                 compression=compression, dictionary_columns=dictionary)
    # release_file checked the destination (check_destination) before reading anything
    # a part (not final) stays owner-only until its release's manifest publishes it
    return AtomicArrowWriter(destination, schema, format=options.format,
                             overwrite=options.overwrite, compression=compression,
                             dictionary_columns=dictionary, final=final, checked=True,
                             private=not final)


class _FixedBatches:
    """Re-cuts the written rows into batches of exactly ``rows`` rows (the last one shorter), so
    that the output's layout depends on the number of rows written only."""

    def __init__(self, rows: int):
        self.rows = int(rows)
        self.held: list = []
        self.count = 0

    def add(self, batch) -> list:
        """The full batches that ``batch`` completes (copied: the privatizer reuses its buffers)."""
        import pyarrow as pa

        self.held.append(pa.RecordBatch.from_arrays(
            [pa.array(np.array(c.to_numpy(zero_copy_only=False), copy=True)) for c in batch.columns],
            schema=batch.schema))
        self.count += batch.num_rows
        if self.count < self.rows:
            return []
        table = pa.Table.from_batches(self.held)
        full = (table.num_rows // self.rows) * self.rows
        out = [table.slice(i, self.rows).combine_chunks().to_batches()[0]
               for i in range(0, full, self.rows)]
        rest = table.slice(full)
        self.held = rest.to_batches() if rest.num_rows else []
        self.count = rest.num_rows
        return out

    def finish(self) -> list:
        import pyarrow as pa

        if not self.count:
            return []
        return pa.Table.from_batches(self.held).combine_chunks().to_batches()


def _write_chunks(src, writer, schema, spec: ReleaseSpec, on_invalid: str, privatizer, result,
                  bar, write_pool, fixed: _FixedBatches | None = None) -> None:
    buffers: list[list[np.ndarray | None]] = [[None, None], [None, None]]
    turn = 0
    pending = None
    try:
        for origin, batch in src.located_batches():
            n_in = batch.num_rows
            feats, label_values, dropped = privatizer.prepare(origin, batch, on_invalid)
            n = n_in - dropped
            slot = buffers[turn]
            features_buffer = slot[0]
            if features_buffer is None or features_buffer.shape[1] < n:
                features_buffer = slot[0] = np.empty((privatizer.p, max(n, 1)), dtype=privatizer.dtype)
                if spec.label is not None:
                    slot[1] = np.empty(max(n, 1), dtype=label_dtype(spec))
            out = features_buffer[:, :n]
            label_buffer = slot[1]
            label_out = label_buffer[:n] if label_buffer is not None else None
            if n:
                privatizer.run(feats, label_values, out, label_out)
                if pending is not None:
                    pending.result()  # the other buffer is free again; errors surface here
                batch = record_batch(schema, out, label_out)
                if fixed is None:
                    pending = write_pool.submit(writer.write_batch, batch)
                else:
                    pending = write_pool.submit(_write_all, writer, fixed.add(batch))
                turn = 1 - turn
            result.rows_read += n_in
            result.rows_written += n
            result.rows_dropped += dropped
            bar.update(n_in)
        if pending is not None:
            pending.result()
        if fixed is not None:
            _write_all(writer, fixed.finish())
    finally:
        # never let the writer be closed/aborted while the thread still writes to it
        if pending is not None:
            try:
                pending.result()
            except BaseException:
                pass


def _write_all(writer, batches) -> None:
    for batch in batches:
        writer.write_batch(batch)
