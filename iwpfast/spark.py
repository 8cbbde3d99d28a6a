"""Spark DataFrames (optional extra: ``pip install iwpfast[spark]``): release one under local DP,
and fit an estimator on one, where the rows are -- on the executors.

- ``release_dataframe(df, destination, spec, *, features, label, overwrite=False, seed=None)``:
  each partition of ``df`` is released by ``mapInArrow`` on its executor into part
  ``part-<partition>`` of the multi-part release ``destination`` (iwpfast writes the part, with
  the release metadata Spark's own writer would drop; the partition's Arrow batches are gathered
  into row groups of ``record_batch_rows`` rows); the driver then writes the manifest, which
  publishes the release.  An existing release is refused (and left as it is, readable) unless
  ``overwrite=True``, which replaces it whole: its manifest is removed first, the new parts
  written, the old parts the new release does not have deleted, and the new manifest written.
- ``fit_dataframe(df, estimator, *, rounds=1)``: ``estimator.fit`` with its passes run on the
  executors, one shard per partition (``iwpfast.distributed.ShardedStreams``: the step times the
  shards, merged by row-weighted averaging after each of ``rounds`` rounds); every setting of
  ``fit`` works, ``alpha``/``learning_rate='auto'`` and k classes included.  The release's
  metadata (its noise) comes from the files ``df`` was read from (``spark.read.parquet(
  "release/")``: ``df.inputFiles()``) or from ``release=`` (the release's path, or its metadata).

Keys: one key is drawn for the release on the driver (``NoiseKey.from_os_entropy()``, never
written or logged; with a seed -- simulations only -- ``NoiseKey.from_seed(seed)``), and partition
i's task derives its part's key from it (``root.derive("part", i)``), so a retried task draws the
same keystream.  Each attempt writes its part to an owner-only staging file and renames it onto
``part-<i>``: one name per partition, so at most one published copy of its rows; the driver
removes every staging file (a killed attempt's) before it writes the manifest, and refuses to
publish when the parts' rows differ from what the tasks reported.  Speculative execution
(``spark.speculation``): docs/release.md "No second noisy copy".  PySpark is imported only inside
these functions: ``import iwpfast`` never imports it.
"""
from __future__ import annotations

import json
import os
import pickle

import numpy as np

from .exceptions import InvalidInputError
from .privacy.options import DEFAULT_BATCH_ROWS

__all__ = ["release_dataframe", "fit_dataframe", "release_partition"]

_SUMMARY_SCHEMA = "part long, rows long"
_PAYLOAD_SCHEMA = "shard long, payload binary"


def arrow_schema(df):
    """The Arrow schema of the record batches ``mapInArrow`` hands out for ``df``'s columns (also
    for an empty partition)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    to_arrow = {T.DoubleType: pa.float64(), T.FloatType: pa.float32(), T.LongType: pa.int64(),
                T.IntegerType: pa.int32(), T.ShortType: pa.int16(), T.ByteType: pa.int8(),
                T.BooleanType: pa.bool_(), T.StringType: pa.string()}
    fields = []
    for f in df.schema.fields:
        arrow_type = to_arrow.get(type(f.dataType))
        if arrow_type is None:
            raise InvalidInputError(f"column {f.name!r} has Spark type {f.dataType}; cast it to a "
                                    f"number (or a string label) first")
        fields.append(pa.field(f.name, arrow_type))
    return pa.schema(fields)


# ------------------------------------------------------------------------------------ release
def release_partition(index: int, batches, destination: str, spec, release_id: str, schema, *,
                      seed=None, filesystem=None, record_batch_rows: int = DEFAULT_BATCH_ROWS):
    """Release the record batches of one partition as part ``index`` of the release
    ``release_id`` in ``destination``; yield its one-row summary (part, rows).  What each task of
    ``release_dataframe`` runs; Spark-free (any engine's per-partition function can call it)."""
    import pyarrow as pa

    from .privacy.multipart import release_batches
    result = release_batches(batches, destination, spec, index=index, release_id=release_id,
                             schema=schema, seed=seed, filesystem=filesystem,
                             record_batch_rows=record_batch_rows)
    yield pa.RecordBatch.from_pydict({"part": [index], "rows": [result.rows_written]})


def release_dataframe(df, destination, spec, *, features, label, overwrite: bool = False,
                      seed=None, filesystem=None,
                      record_batch_rows: int = DEFAULT_BATCH_ROWS) -> dict:
    """Release the Spark DataFrame ``df`` under local DP into the folder / prefix
    ``destination``: one part per partition, written on the executors, and the manifest last.

    spec: the ``ReleaseSpec`` (every feature's range declared: each partition is released on its
    own); ``features``, ``label`` (None: features only) override it.  ``overwrite``: replace an
    existing release whole (without it an existing release is refused and left readable).
    ``seed``: simulations only.  ``record_batch_rows``: rows per row group of the parts.
    Returns the manifest (``row_count``, ``parts``, ``release_id``, the release's metadata).
    """
    from .io.filesystem import is_uri, resolve
    from .io.parts import folder_manifest, part_name, write_manifest_document
    from .privacy.multipart import new_release_id, prepare_release_folder
    from .privacy.options import resolve_spec
    from .privacy.randomness import NoiseKey

    spec = resolve_spec(spec, features, label)
    if spec.ranges_from_data:
        raise InvalidInputError("release_dataframe releases every partition on its own: declare "
                                "every feature's range (ranges_from_data cannot be used)")
    spec.scaler_ranges()                          # every range declared, or an error naming it
    columns = list(spec.features) + ([spec.label] if spec.label is not None else [])
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InvalidInputError(f"the DataFrame has no column(s) {missing}; its columns are "
                                f"{list(df.columns)}")
    df = df.select(*columns)
    schema = arrow_schema(df)
    text = os.fspath(destination)
    folder = resolve(text, None if is_uri(text) else filesystem)
    if folder.local:
        text = os.path.abspath(folder.path)       # the executors' working folder may differ
    # an existing release refused (left as it is) or, with overwrite, removed whole before any
    # partition runs; files of another run refused: old and new parts never mix
    prepare_release_folder(text, overwrite=overwrite, filesystem=None if is_uri(text) else filesystem)
    if seed is None:
        # one key for the release, drawn here: each partition derives its part's key from it, so
        # a retried or speculative task writes the same noise again (never a second noisy copy)
        seed = NoiseKey.from_os_entropy()
    release_id = new_release_id()
    rows = int(record_batch_rows)

    def per_partition(batches):
        from pyspark import TaskContext

        yield from release_partition(TaskContext.get().partitionId(), batches, text, spec,
                                     release_id, schema, seed=seed, filesystem=filesystem,
                                     record_batch_rows=rows)

    partitions = df.rdd.getNumPartitions()
    if str(df.sparkSession.conf.get("spark.speculation", "false")).lower() == "true":
        import warnings

        warnings.warn(
            "spark.speculation is on: a losing speculative attempt that Spark has not yet killed "
            "when the job ends can leave its owner-only staging file in the folder after the "
            "release is published (never a second published part: docs/release.md \"No second "
            "noisy copy\"); run releases with spark.speculation=false", UserWarning, stacklevel=2)
    try:
        summary = df.mapInArrow(per_partition, _SUMMARY_SCHEMA).collect()
        released = _released_rows(summary, partitions)
        # every staging file removed first (a killed attempt's noisy copy), then the parts'
        # rows checked against the tasks' before anything is published
        manifest = folder_manifest(folder)
        written = {int(p["index"]): int(p["rows"]) for p in manifest["parts"]}
        if written != released:
            differ = sorted(i for i in set(written) | set(released)
                            if written.get(i) != released.get(i))
            raise InvalidInputError(
                f"part(s) {differ[:5]} of {folder.display!r} hold other rows than their tasks "
                f"released (e.g. part {differ[0]}: {written.get(differ[0])} rows written, "
                f"{released.get(differ[0])} released): a part was written twice or changed while "
                f"the job ran; nothing is published: release again with overwrite=True")
        write_manifest_document(folder, manifest)
    except BaseException:
        # nothing is published: the manifest (if written), the parts and every staging file of
        # this job are deleted
        from .io.parts import MANIFEST_NAME, remove_temporaries

        folder.child(MANIFEST_NAME).delete()
        for i in range(partitions):
            folder.child(part_name(i)).delete()
        try:
            remove_temporaries(folder)
        except Exception:
            pass
        raise
    return manifest


def _released_rows(summary, partitions: int) -> dict:
    """{part: rows} of the tasks' summaries; a part reported twice is refused (its rows would be
    in the release twice)."""
    released: dict = {}
    for row in summary:
        part = int(row["part"])
        if part in released or not 0 <= part < partitions:
            raise InvalidInputError(
                f"part {part} was reported {'twice' if part in released else 'out of range'} by "
                f"the job's tasks: its rows may have been written twice; nothing is published")
        released[part] = int(row["rows"])
    return released


# ------------------------------------------------------------------------------------ training
def _release_metadata(df, release) -> dict:
    """The metadata of the release ``df`` holds: ``release`` (a path, or a metadata dict), else
    that of the files ``df`` was read from."""
    from .io.filesystem import resolve
    from .io.sources import FileSource, open_source

    if isinstance(release, dict):
        return dict(release)
    if release is not None:
        meta = open_source(release).release_metadata
    else:
        files = [f for f in df.inputFiles() if not os.path.basename(f).startswith(("_", "."))]
        if not files:
            raise InvalidInputError(
                "fit_dataframe needs the release's noise: this DataFrame was not read from release "
                "files; pass release='path/of/the/release/' (or its metadata)")
        try:
            meta = FileSource([resolve(f) for f in sorted(files)], None, 1 << 16).release_metadata
        except (InvalidInputError, OSError, ValueError) as exc:
            raise InvalidInputError(
                f"cannot read the release metadata of the DataFrame's files ({exc}); pass "
                f"release='path/of/the/release/'") from None
    if meta is None:
        raise InvalidInputError("the DataFrame's files are not an iwpfast release (no release "
                                "metadata); release the data first (release_dataframe)")
    return meta


def _partition_rows(df) -> list[int]:
    """The rows of each partition of ``df`` (one Spark job)."""
    import pyarrow as pa

    def count(batches):
        from pyspark import TaskContext

        n = sum(b.num_rows for b in batches)
        yield pa.RecordBatch.from_pydict({"part": [TaskContext.get().partitionId()], "rows": [n]})

    rows = [0] * df.rdd.getNumPartitions()
    for row in df.mapInArrow(count, _SUMMARY_SCHEMA).collect():
        rows[int(row["part"])] = int(row["rows"])
    return rows


def _dataframe_source(schema, meta: dict, n_rows: int):
    """The driver's view of the DataFrame: its schema and the release metadata (what ``fit``
    plans with); its rows are read on the executors only."""
    from .io.formats import RELEASE_METADATA_KEY_BYTES
    from .io.source_base import DEFAULT_BATCH_ROWS as SOURCE_BATCH_ROWS
    from .io.source_base import Source

    class DataFrameSource(Source):
        description = "<Spark DataFrame>"
        rereadable = True
        cheap_decode = False

        def group_ends(self):
            return None

        def _located(self, columns, start_row, batch_rows):
            raise InvalidInputError("a Spark DataFrame is read on its executors "
                                    "(iwpfast.spark.fit_dataframe), not on the driver")

    meta = dict(meta, row_count=int(n_rows))
    schema = schema.with_metadata({RELEASE_METADATA_KEY_BYTES: json.dumps(meta, sort_keys=True)})
    return DataFrameSource(schema, None, SOURCE_BATCH_ROWS, int(n_rows))


def _view_of(source):
    """(period, block, validation, mapper, view) of the part of the DataFrame ``source`` is."""
    from .io.views import PartSource
    if isinstance(source, PartSource):
        if source.row_offset:
            raise InvalidInputError("a shard of a shard cannot be split again")
        return source.period, source.block, source.validation, source.mapper, True
    return None, 1, False, None, False


def _open_piece(table, view, offset: int):
    """A partition's rows (a Table with the release metadata) as the source a task reads."""
    from .io.sources import TableSource
    from .io.views import PartSource
    period, block, validation, mapper, is_view = view
    src = TableSource(table, None, 1 << 16, description="<Spark partition>")
    if not is_view:
        return src
    return PartSource(src, period=period, block=block, validation=validation, mapper=mapper,
                      row_offset=offset)


def _make_streams():
    from .distributed import ShardedStreams

    class SparkStreams(ShardedStreams):
        """``ShardedStreams`` on Spark: one shard per non-empty partition of the DataFrame, each
        task reading its own partition (``mapInArrow``)."""

        def __init__(self, df, schema, metadata: bytes, rows: list, rounds: int,
                     average_fraction):
            self.df = df
            self.schema = schema
            self.metadata = metadata
            self.rows = list(rows)
            self.offsets = [int(x) for x in np.concatenate([[0], np.cumsum(self.rows)])[:-1]]
            self.rounds = int(rounds)
            self.average_fraction = average_fraction
            self.shards = sum(1 for n in self.rows if n > 0)

        def _view_rows(self, view, a: int, b: int) -> int:
            from .io.views import part_rows
            period, block, validation, _, _ = view
            return part_rows(a, b, period, block, validation)

        def _layout(self, source):
            view = _view_of(source)
            active = [p for p, n in enumerate(self.rows) if n >= self.rounds]
            if not active:
                raise InvalidInputError(f"no partition has {self.rounds} rows: use fewer rounds")
            self.shards = len(active)
            weights = [self._view_rows(view, self.offsets[p], self.offsets[p] + self.rows[p])
                       for p in active]
            return (view, active), weights

        def _job(self, task):
            """Run ``task(partition, table) -> object`` on every partition; the objects by
            partition (pickled through a binary column)."""
            import pyarrow as pa
            schema, metadata = self.schema, self.metadata

            def per_partition(batches):
                from pyspark import TaskContext

                pid = TaskContext.get().partitionId()
                table = pa.Table.from_batches(list(batches), schema=schema)
                table = table.replace_schema_metadata(metadata)
                out = task(pid, table)
                if out is not None:
                    yield pa.RecordBatch.from_pydict({"shard": [pid],
                                                      "payload": [pickle.dumps(out)]})

            return {int(row["shard"]): pickle.loads(row["payload"])
                    for row in self.df.mapInArrow(per_partition, _PAYLOAD_SCHEMA).collect()}

        def _run_round(self, layout, r, shard_heads, shard_states, kw, bar):
            from .distributed import run_piece, shard_bounds
            view, active = layout
            shard_of = {p: k for k, p in enumerate(active)}
            rounds, offsets = self.rounds, self.offsets

            def task(pid, table):
                if pid not in shard_of:
                    return None
                k = shard_of[pid]
                lo, hi = shard_bounds(table.num_rows, rounds)[r]
                piece = _open_piece(table.slice(lo, hi - lo), view, offsets[pid] + lo)
                return run_piece(piece, shard_heads[k], shard_states[k], kw)

            done = self._job(task)
            if bar is not None:
                bar.update(sum(d[2] for d in done.values() if isinstance(d, tuple)))
            return [done[p] for p in active]

        def _run_scores(self, layout, scorer):
            view, _ = layout
            offsets = self.offsets

            def task(pid, table):
                scorer.add_source(_open_piece(table, view, offsets[pid]))
                return scorer

            return list(self._job(task).values())

    return SparkStreams


def fit_dataframe(df, estimator, *, rounds: int = 1, release=None, features=None, label=None,
                  sample_weight=None):
    """Fit ``estimator`` (an ``IWPClassifier``/``IWPRegressor``, refitted in place and returned)
    on the released rows of the Spark DataFrame ``df``, on the executors: one shard per
    partition, ``rounds`` merges (periodic averaging), as ``iwpfast.distributed.fit_files``.

    release: where the noise parameters come from -- the release's path (or its metadata dict);
    None: the files ``df`` was read from (``spark.read.parquet("release/")``).  The DataFrame is
    persisted while the passes run (every pass must see the same rows in the same partitions).
    """
    import pyarrow as pa

    from .distributed import _average_fraction
    from .io.formats import RELEASE_METADATA_KEY_BYTES
    from .sgd.driver import streams_on

    if int(rounds) < 1:
        raise InvalidInputError(f"rounds={rounds}: use 1 (one merge at the end) or more")
    meta = _release_metadata(df, release)
    schema = arrow_schema(df)
    df = df.persist()
    try:
        rows = _partition_rows(df)
        total = int(sum(rows))
        if total == 0:
            raise InvalidInputError("the DataFrame has no rows")
        src = _dataframe_source(schema, meta, total)
        metadata = {RELEASE_METADATA_KEY_BYTES: src.full_schema.metadata[RELEASE_METADATA_KEY_BYTES]}
        streams = _make_streams()(df, pa.schema(schema), metadata, rows, int(rounds),
                                  _average_fraction(estimator))
        with streams_on(streams):
            estimator.fit(src, sample_weight=sample_weight, features=features, label=label)
    finally:
        df.unpersist()
    estimator.telemetry_ = dict(estimator.telemetry_, shards=streams.shards, rounds=int(rounds))
    estimator.n_iter_ = int(estimator.telemetry_["batches"])
    return estimator
