"""Spark DataFrames (optional extra: ``pip install iwpfast[spark]``): release one under local DP,
and fit an estimator on one, where the rows are -- on the executors.

- ``release_dataframe(df, destination, spec, *, features, label, overwrite=False, seed=None,
  resume=False, progress=False)``:
  each partition of ``df`` is released by ``mapInArrow`` on its executor into part
  ``part-<partition>`` of the multi-part release ``destination`` (iwpfast writes the part, with
  the release metadata Spark's own writer would drop; the partition's Arrow batches are gathered
  into row groups of ``record_batch_rows`` rows); the driver then writes the manifest, which
  publishes the release.  An existing release is refused (and left as it is, readable) unless
  ``overwrite=True``, which replaces it whole: its manifest is removed first, the new parts
  written, the old parts the new release does not have deleted, and the new manifest written.
  ``resume=True``: a failed or killed run keeps its finished parts (unpublished) and the next
  ``resume=True`` releases the other partitions, publishing only if each kept partition still
  holds the rows it was released from (row digests: ``iwpfast.privacy.part_rows``).
- ``fit_dataframe(df, estimator, *, rounds=1)``: ``estimator.fit`` with its passes run on the
  executors, one shard per partition (``iwpfast.distributed.ShardedStreams``: the step times the
  shards, merged by row-weighted averaging after each of ``rounds`` rounds); every setting of
  ``fit`` works, ``alpha``/``learning_rate='auto'`` and k classes included.  The release's
  metadata (its noise) comes from the files ``df`` was read from (``spark.read.parquet(
  "release/")``: ``df.inputFiles()``) or from ``release=`` (the release's path, or its metadata).

Progress (``progress=``, the estimator's for the fit): the rows of each finished partition, from
an accumulator each task adds its rows to (``_PartitionProgress``).  Where the time goes, and
what bounds it (Spark's hand-over of the rows to Python): docs/distributed.md "Spark".

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
import time

import numpy as np

from .exceptions import InvalidInputError
from .privacy.options import DEFAULT_BATCH_ROWS

__all__ = ["release_dataframe", "fit_dataframe", "release_partition"]

_SUMMARY_SCHEMA = "part long, rows long, digest string, kept boolean"
_PAYLOAD_SCHEMA = "shard long, rows long, payload binary"


#: SparkContexts whose workers were found able to run iwpfast (``check_workers_python``)
_CHECKED_CONTEXTS: set = set()


def check_workers_python(df_or_context) -> None:
    """Refuse, before anything is written, Spark workers whose Python cannot import pyarrow and
    iwpfast (a tiny job of one task; once per SparkContext): without it ``mapInArrow`` fails on the
    executors after the job has started.  The error names ``PYSPARK_PYTHON``."""
    from .exceptions import ServiceUnavailableError

    sc = getattr(df_or_context, "sparkSession", df_or_context)
    sc = getattr(sc, "sparkContext", sc)
    key = getattr(sc, "applicationId", None) or id(sc)
    if key in _CHECKED_CONTEXTS:
        return
    import sys

    def probe(_):
        """On a worker (pickled by value: it needs nothing but the standard library there):
        its Python, and what it cannot import (None: nothing)."""
        import sys

        for module in ("pyarrow", "iwpfast"):
            try:
                __import__(module)
            except ImportError as exc:
                return sys.executable, f"{module} ({type(exc).__name__}: {exc})"
        return sys.executable, None

    try:
        results = sc.parallelize([0], 1).map(probe).collect()
    except Exception as exc:            # the worker's Python did not even start
        results = [("?", f"anything: its job failed ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:300]})")]
    broken = [(exe, missing) for exe, missing in results if missing is not None]
    if broken:
        exe, missing = broken[0]
        raise ServiceUnavailableError(
            f"the Spark workers' Python ({exe}) cannot import {missing}; point PYSPARK_PYTHON at "
            f"a Python that has iwpfast and pyarrow (e.g. PYSPARK_PYTHON={sys.executable} in the "
            "environment before the SparkSession starts, or spark.pyspark.python), or install "
            "them on the workers; docs/usage.md \"Spark\"")
    _CHECKED_CONTEXTS.add(key)


def _partition_id(task_context) -> int:
    """The running Spark task's partition (``TaskContext.get()`` is None only off a task)."""
    context = task_context.get()
    if context is None:
        raise RuntimeError("iwpfast.spark: a partition function ran outside a Spark task")
    return context.partitionId()


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
                      seed=None, filesystem=None, record_batch_rows: int = DEFAULT_BATCH_ROWS,
                      resume: bool = False, progress=False) -> dict:
    """Release the Spark DataFrame ``df`` under local DP into the folder / prefix
    ``destination``: one part per partition, written on the executors, and the manifest last.

    spec: the ``ReleaseSpec`` (every feature's range declared: each partition is released on its
    own); ``features``, ``label`` (None: features only) override it.  ``overwrite``: replace an
    existing release whole (without it an existing release is refused and left readable).
    ``seed``: simulations only.  ``record_batch_rows``: rows per row group of the parts.
    ``resume``: a resumable run, which a failed or killed run leaves unpublished with its
    finished parts; ``resume=True`` again keeps those parts and releases the other partitions,
    publishing only if every kept partition still holds the rows it was released from
    (``iwpfast.privacy.part_rows``; docs/distributed.md "Spark").  ``progress``: as the
    release's (True, False, "force", "log"): the rows of each finished partition.
    Returns the manifest (``row_count``, ``parts``, ``release_id``, the release's metadata).
    """
    from .io.filesystem import is_uri, resolve
    from .privacy.options import resolve_spec
    from .privacy.randomness import NoiseKey

    spec = resolve_spec(spec, features, label)
    if spec.ranges_from_data:
        raise InvalidInputError("release_dataframe releases every partition on its own: declare "
                                "every feature's range (ranges_from_data cannot be used)")
    spec.scaler_ranges()                          # every range declared, or an error naming it
    if resume and overwrite:
        raise InvalidInputError("resume keeps the parts of an unfinished run and overwrite "
                                "replaces them: choose one")
    columns = list(spec.features) + ([spec.label] if spec.label is not None else [])
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InvalidInputError(f"the DataFrame has no column(s) {missing}; its columns are "
                                f"{list(df.columns)}")
    df = df.select(*columns)
    check_workers_python(df)                       # before anything is written
    schema = arrow_schema(df)
    text = os.fspath(destination)
    local_fs = None if is_uri(text) else filesystem
    folder = resolve(text, local_fs)
    if folder.local:
        text = os.path.abspath(folder.path)       # the executors' working folder may differ
        folder = resolve(text, local_fs)
    partitions = df.rdd.getNumPartitions()
    if resume:
        # the unfinished run's plan checked, its finished parts kept, everything else of it
        # (staging files, unfinished parts) removed before any noise is drawn
        run = _resumable_run(df, folder, spec, schema, partitions)
    else:
        from .privacy.multipart import new_release_id, prepare_release_folder

        # an existing release refused (left as it is) or, with overwrite, removed whole before
        # any partition runs; files of another run refused: old and new parts never mix
        prepare_release_folder(text, overwrite=overwrite, filesystem=local_fs)
        run = _Run(new_release_id())
    if seed is None:
        # one key for the release, drawn here: each partition derives its part's key from it, so
        # a retried or speculative task writes the same noise again (never a second noisy copy)
        seed = NoiseKey.from_os_entropy()
    _warn_speculation(df)
    task = _release_task(text, spec, run, schema, seed, filesystem, int(record_batch_rows))
    t0 = time.perf_counter()
    try:
        with _PartitionProgress(df, progress, run.rows, "release") as tracker:
            summary = df.mapInArrow(tracker.counting(task), _SUMMARY_SCHEMA).collect()
        manifest = _publish(folder, run, summary, partitions)
    except BaseException:
        _await_tasks(df)
        _discard(folder, run, partitions)
        raise
    seconds = time.perf_counter() - t0
    from .progress import logger
    logger.info("released %s rows in %d parts to %s in %.2f s (%.3g M rows/s)%s",
                f"{manifest['row_count']:,}", len(manifest["parts"]), folder.display, seconds,
                (manifest["row_count"] - run.kept_rows) / max(seconds, 1e-9) / 1e6,
                f"; {len(run.kept)} parts ({run.kept_rows:,} rows) kept from the unfinished run"
                if run.kept else "")
    return manifest


class _Run:
    """One run of ``release_dataframe``: its release id; resumable runs also the key of their row
    digests and the parts kept from the unfinished run ({index: {"rows", "digest"}})."""

    rows = None         # the DataFrame's rows are not counted before the job

    def __init__(self, release_id: str, digest_key: bytes | None = None, kept=None):
        self.release_id = release_id
        self.digest_key = digest_key
        self.kept = dict(kept or {})

    @property
    def resumable(self) -> bool:
        return self.digest_key is not None

    @property
    def kept_rows(self) -> int:
        return int(sum(v["rows"] for v in self.kept.values()))


def _warn_speculation(df) -> None:
    if str(df.sparkSession.conf.get("spark.speculation", "false")).lower() == "true":
        import warnings

        warnings.warn(
            "spark.speculation is on: a losing speculative attempt that Spark has not yet killed "
            "when the job ends can leave its owner-only staging file in the folder after the "
            "release is published (never a second published part: docs/release.md \"No second "
            "noisy copy\"); run releases with spark.speculation=false", UserWarning, stacklevel=3)


def _release_task(text: str, spec, run: _Run, schema, seed, filesystem, rows: int):
    """What each task runs: its partition released into its part (resumable runs: with the row
    digest written next to it), or, for a part kept from the unfinished run, only the digest of
    the partition's rows; yields the one-row summary (part, rows, digest)."""
    release_id, key, kept = run.release_id, run.digest_key, set(run.kept)

    def per_partition(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        from .io.filesystem import is_uri, resolve
        from .privacy.part_rows import RowDigest, digested, write_sidecar

        pid = _partition_id(TaskContext)
        digest = RowDigest(key) if key is not None else None
        if pid in kept:
            assert digest is not None       # parts are kept only by a resumable run (it has a key)
            for batch in batches:
                digest.update(batch)
            n = digest.value()["rows"]
        else:
            if digest is not None:
                batches = digested(batches, digest)
            n = next(iter(release_partition(pid, batches, text, spec, release_id, schema,
                                            seed=seed, filesystem=filesystem,
                                            record_batch_rows=rows)))["rows"][0].as_py()
            if digest is not None:
                # after the part: a part without its digest is not kept by a resumed run
                write_sidecar(resolve(text, None if is_uri(text) else filesystem), pid,
                              release_id, digest.value())
        value = digest.value()["digest"] if digest is not None else ""
        yield pa.RecordBatch.from_pydict({"part": [pid], "rows": [int(n)], "digest": [value],
                                          "kept": [pid in kept]})

    return per_partition


def _publish(folder, run: _Run, summary, partitions: int) -> dict:
    """Check the job's parts and write the manifest: every staging file removed first (a killed
    attempt's noisy copy), each kept partition's rows unchanged (resume), each part holding the
    rows its task released; then the plan and the row digests removed."""
    from .io.parts import PLAN_NAME, folder_manifest, write_manifest_document
    from .privacy.multipart import DELETE_PARTS_HINT
    from .privacy.part_rows import remove_sidecars

    released = _released_rows(summary, partitions)
    unsafe = _resume_unsafe(run, summary) if run.kept else None
    if unsafe is not None:
        for i in set(range(partitions)) - set(run.kept):   # this run's parts: never kept
            _delete_part(folder, i)
        raise InvalidInputError(
            f"resume: {unsafe}, so the other parts could release rows of the kept ones a second "
            f"time, with other noise. Nothing is published and this run's parts are deleted; "
            f"make the partitioning deterministic (e.g. read the same files without a shuffle) "
            f"and resume, or {DELETE_PARTS_HINT}")
    manifest = folder_manifest(folder)
    written = {int(p["index"]): int(p["rows"]) for p in manifest["parts"]}
    if written != released:
        differ = sorted(i for i in set(written) | set(released)
                        if written.get(i) != released.get(i))
        raise InvalidInputError(
            f"part(s) {differ[:5]} of {folder.display!r} hold other rows than their tasks "
            f"released (e.g. part {differ[0]}: {written.get(differ[0])} rows written, "
            f"{released.get(differ[0])} released): a part was written twice or changed while "
            f"the job ran; nothing is published: release again with overwrite=True (which "
            f"deletes these unpublished parts before any new part is written)")
    write_manifest_document(folder, manifest)
    folder.child(PLAN_NAME).delete()
    remove_sidecars(folder)
    return manifest


def _resume_unsafe(run: _Run, summary) -> str | None:
    """Why the parts kept from the unfinished run cannot be published with this run's (None:
    every kept partition holds the rows it was released from)."""
    now = {int(r["part"]): {"rows": int(r["rows"]), "digest": r["digest"]} for r in summary}
    changed = sorted(i for i in run.kept if now.get(i) != run.kept[i])
    if changed:
        first = changed[0]
        return (f"partition(s) {changed[:5]} of the DataFrame hold other rows than the parts kept "
                f"from the unfinished run (e.g. partition {first}: {run.kept[first]['rows']:,} "
                f"rows then, {now.get(first, {}).get('rows', 0):,} now, or other values): the "
                f"partitioning is not deterministic (a repartition or shuffle without a fixed "
                f"order) or the data changed")
    return None


def _delete_part(folder, index: int) -> None:
    from .io.parts import part_name
    from .privacy.part_rows import sidecar_name

    folder.child(part_name(index)).delete()
    folder.child(sidecar_name(index)).delete()


def _await_tasks(df, timeout_s: float = 10.0) -> None:
    """After a failed job, wait (up to ``timeout_s``) until Spark has no active stage: the job's
    other tasks are cancelled asynchronously, and one still writing would create its staging
    file after the cleanup (owner-only and hidden, then removed or refused by the next run)."""
    try:
        tracker = df.sparkSession.sparkContext.statusTracker()
        end = time.monotonic() + timeout_s
        while tracker.getActiveStageIds() and time.monotonic() < end:
            time.sleep(0.1)
    except Exception:                  # a stopped context: nothing is running any more
        pass


def _discard(folder, run: _Run, partitions: int) -> None:
    """A failed job publishes nothing: the manifest (if written) and every staging file are
    deleted, and the parts -- but a resumable run's finished parts, kept (unpublished) with
    their digests for the next ``resume=True``."""
    from .io.parts import MANIFEST_NAME, remove_temporaries

    folder.child(MANIFEST_NAME).delete()
    if not run.resumable:
        for i in range(partitions):
            _delete_part(folder, i)
    try:
        remove_temporaries(folder)
    except Exception:
        pass


def _resumable_run(df, folder, spec, schema, partitions: int) -> _Run:
    """The run of ``release_dataframe(..., resume=True)``: the unfinished run's (its plan file
    checked against this one: the same spec, columns, partition count and input files), with
    the parts it finished kept; or, with none in the folder, a new resumable run whose plan is
    written first."""
    import secrets

    from .io.parts import MANIFEST_NAME, PLAN_NAME, part_name, read_manifest
    from .privacy.multipart import (
        DELETE_PARTS_HINT,
        REPLACE_RELEASE_HINT,
        _leftovers_of_other_runs,
        new_release_id,
        parts_folder_kind,
    )
    from .privacy.part_rows import read_sidecars, remove_sidecars, write_private_atomic

    kind = parts_folder_kind(folder)
    if kind == "dir" and read_manifest(folder) is not None:
        raise InvalidInputError(
            f"{folder.display!r} holds a published release ({MANIFEST_NAME}): there is nothing "
            f"to resume; {REPLACE_RELEASE_HINT}")
    mine = _spark_plan(df, spec, schema, partitions)
    try:
        doc = json.loads(folder.child(PLAN_NAME).read_bytes())
    except (FileNotFoundError, OSError, ValueError):
        doc = None
    if doc is None or doc.get("engine") != "spark":
        if kind == "dir":
            # parts or staging files without a plan: a run that cannot be resumed
            _leftovers_of_other_runs(folder, False, False)
        mine.update(release_id=new_release_id(), digest_key=secrets.token_hex(16))
        write_private_atomic(folder.child(PLAN_NAME), json.dumps(mine, sort_keys=True).encode())
        return _Run(mine["release_id"], bytes.fromhex(mine["digest_key"]))
    differ = [k for k in mine if json.dumps(doc.get(k), sort_keys=True)
              != json.dumps(mine[k], sort_keys=True)]
    if differ:
        raise InvalidInputError(
            f"resume: the unfinished release in {folder.display!r} was started with other "
            f"{' and '.join(differ)}; resume with the same DataFrame and spec, or "
            f"{DELETE_PARTS_HINT}")
    run = _Run(str(doc["release_id"]), bytes.fromhex(doc["digest_key"]))
    digests = read_sidecars(folder, run.release_id)
    entries = folder.listdir()
    listed = {e.name for e in entries}
    for i, value in digests.items():
        if part_name(i) in listed and _part_rows(folder.child(part_name(i)), run.release_id, i) \
                == value["rows"]:
            run.kept[i] = value
    for entry in entries:                        # the killed run's unfinished parts
        if entry.name.startswith("part-") and entry.name not in {part_name(i) for i in run.kept}:
            entry.delete()
    remove_sidecars(folder, keep=run.kept)
    from .io.parts import remove_temporaries

    remove_temporaries(folder)
    return run


def _spark_plan(df, spec, schema, partitions: int) -> dict:
    """What makes two runs of ``release_dataframe`` the same release (the plan file's fields a
    resumed run compares): the spec, the columns, the partition count, the input files'
    fingerprints (``df.inputFiles()``, where readable)."""
    from .io.filesystem import resolve
    from .privacy.fingerprints import input_fingerprint

    inputs = []
    for name in sorted(df.inputFiles()):
        try:
            fp = input_fingerprint(resolve(name))
        except Exception:                    # a scheme this process cannot read: its name only
            fp = None
        inputs.append([name, fp])
    return {"engine": "spark", "spec": spec.to_metadata(), "schema": schema.to_string(),
            "partitions": int(partitions), "inputs": inputs}


def _part_rows(loc, release_id: str, index: int) -> int | None:
    """The rows of part file ``loc`` if it is part ``index`` of ``release_id``, else None."""
    from .exceptions import ReleaseSpecError
    from .io.format_readers import open_file
    from .io.parts import PART_KEY
    from .io.source_base import parse_release_metadata

    try:
        f = open_file(loc, 1 << 16)
        part = (parse_release_metadata(f.schema, f.path) or {}).get(PART_KEY) or {}
    except (InvalidInputError, ReleaseSpecError, OSError):
        return None
    if part.get("release_id") != release_id or int(part.get("index", -1)) != index:
        return None
    return int(f.num_rows)


class _PartitionProgress:
    """Progress of a Spark job as its partitions finish: each task adds its rows to an
    accumulator, which the driver polls (``iwpfast.progress`` modes: a bar, log lines through
    the ``iwpfast.progress`` logger, or nothing)."""

    POLL_S = 0.25

    def __init__(self, df, progress, total, desc: str, bar=None):
        from .progress import progress_bar

        self.sc = df.sparkSession.sparkContext
        self.own_bar = bar is None
        self.bar = progress_bar(progress, total, desc=desc) if bar is None else bar
        self.total = total
        self.accumulator = self.sc.accumulator(0) if progress is not False or bar else None
        self.shown = 0

    def counting(self, task):
        """``task`` (a ``mapInArrow`` function yielding summaries with a ``rows`` column) with
        each summary's rows added to the accumulator."""
        acc = self.accumulator
        if acc is None:
            return task

        def counted(batches):
            for out in task(batches):
                acc.add(int(sum(out.column("rows").to_pylist())))
                yield out

        return counted

    def _show(self) -> None:
        if self.accumulator is None:
            return
        value = int(self.accumulator.value)
        if self.total is not None:
            value = min(value, int(self.total))     # a retried task counts again
        if value > self.shown:
            self.bar.update(value - self.shown)
            self.shown = value

    def __enter__(self):
        import threading

        self.stop = threading.Event()
        if self.accumulator is not None:
            def poll():
                while not self.stop.wait(self.POLL_S):
                    self._show()
            self.thread = threading.Thread(target=poll, daemon=True, name="iwpfast-progress")
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        if self.accumulator is not None:
            self.thread.join()
            if exc[0] is None:
                self._show()
        if self.own_bar:
            self.bar.close()


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
    """The rows of each partition of ``df``: counted in the JVM (``spark_partition_id``: no row is
    handed to Python; on a file scan only the row-group counts are read -- a ``mapInArrow`` count
    handed every row over, which cost as much as a pass of the fit)."""
    from pyspark.sql.functions import spark_partition_id

    rows = [0] * df.rdd.getNumPartitions()
    for row in df.groupBy(spark_partition_id().alias("part")).count().collect():
        rows[int(row["part"])] = int(row["count"])
    return rows


def _rereads_the_same(df) -> bool:
    """Whether every job on ``df`` sees the same rows in the same partitions without persisting
    it: a deterministic plan over files, with no shuffle (whose fetch order is not fixed).  Then
    the passes read the files again instead of a cache built first (the count of each
    partition reads only row-group counts, and nothing is held in executor memory)."""
    try:
        execution = df._jdf.queryExecution()
        return (bool(df.inputFiles()) and bool(execution.optimizedPlan().deterministic())
                and "Exchange" not in execution.executedPlan().toString())
    except Exception:                    # another Spark's internals: persist, as is safe
        return False


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

        def _job(self, task, bar=None):
            """Run ``task(partition, table) -> (object, rows)`` on every partition; the objects
            by partition (pickled through a binary column); ``bar`` counts the rows of each
            finished partition."""
            import pyarrow as pa
            schema, metadata = self.schema, self.metadata

            def per_partition(batches):
                from pyspark import TaskContext

                pid = _partition_id(TaskContext)
                table = pa.Table.from_batches(list(batches), schema=schema)
                table = table.replace_schema_metadata(metadata)
                out, rows = task(pid, table)
                if out is not None:
                    yield pa.RecordBatch.from_pydict({"shard": [pid], "rows": [int(rows)],
                                                      "payload": [pickle.dumps(out)]})

            with _PartitionProgress(self.df, bar is not None, None, "fit", bar=bar) as tracker:
                rows = self.df.mapInArrow(tracker.counting(per_partition),
                                          _PAYLOAD_SCHEMA).collect()
            return {int(row["shard"]): pickle.loads(row["payload"]) for row in rows}

        def _run_round(self, layout, r, shard_heads, shard_states, kw, bar):
            from .distributed import run_piece, shard_bounds
            view, active = layout
            shard_of = {p: k for k, p in enumerate(active)}
            rounds, offsets = self.rounds, self.offsets

            def task(pid, table):
                if pid not in shard_of:
                    return None, 0
                k = shard_of[pid]
                lo, hi = shard_bounds(table.num_rows, rounds)[r]
                piece = _open_piece(table.slice(lo, hi - lo), view, offsets[pid] + lo)
                out = run_piece(piece, shard_heads[k], shard_states[k], kw)
                return out, (out[2] if isinstance(out, tuple) else 0)

            done = self._job(task, bar)
            return [done[p] for p in active]

        def moment_parts(self, source, layout, folds: int, block_rows: int, chunk_rows):
            """``solver='moments'``: each partition's fold moments on its executor (the whole
            DataFrame's folds: ``first_row`` its offset), added per fold in partition order."""
            from .moment_stats import accumulate_folds, layout_reader
            view, offsets = _view_of(source), self.offsets

            def task(pid, table):
                if table.num_rows == 0:
                    return None, 0
                reader = layout_reader(_open_piece(table, view, offsets[pid]), layout, chunk_rows)
                return (accumulate_folds(reader, layout, folds, block_rows, first_row=offsets[pid]),
                        table.num_rows)

            done = self._job(task)
            shards = [done[p] for p in sorted(done)]
            return [sum((s[f] for s in shards[1:]), shards[0][f]) for f in range(folds)]

        def _run_scores(self, layout, scorer):
            view, _ = layout
            offsets = self.offsets

            def task(pid, table):
                scorer.add_source(_open_piece(table, view, offsets[pid]))
                return scorer, table.num_rows

            return list(self._job(task).values())

    return SparkStreams


def fit_dataframe(df, estimator, *, rounds: int = 1, release=None, features=None, label=None,
                  sample_weight=None):
    """Fit ``estimator`` (an ``IWPClassifier``/``IWPRegressor``, refitted in place and returned)
    on the released rows of the Spark DataFrame ``df``, on the executors: one shard per
    partition, ``rounds`` merges (periodic averaging), as ``iwpfast.distributed.fit_files``.

    release: where the noise parameters come from -- the release's path (or its metadata dict);
    None: the files ``df`` was read from (``spark.read.parquet("release/")``).  The DataFrame is
    persisted while the passes run (every pass must see the same rows in the same partitions),
    unless it is a deterministic read of files with no shuffle, which every pass reads again.
    """
    import pyarrow as pa

    from .distributed import _average_fraction
    from .io.formats import RELEASE_METADATA_KEY_BYTES
    from .sgd.driver import streams_on

    if int(rounds) < 1:
        raise InvalidInputError(f"rounds={rounds}: use 1 (one merge at the end) or more")
    check_workers_python(df)
    meta = _release_metadata(df, release)
    schema = arrow_schema(df)
    persist = not df.is_cached and not _rereads_the_same(df)
    if persist:
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
        if persist:
            df.unpersist()
    estimator.telemetry_ = dict(estimator.telemetry_, shards=streams.shards, rounds=int(rounds))
    estimator.n_iter_ = int(estimator.telemetry_["batches"])
    return estimator
