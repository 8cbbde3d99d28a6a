"""Multi-part releases: one part per input file, written by one process or by many workers.

``release_parts(source, "out/", spec, ...)`` (also what ``release`` does when the destination is a
folder / prefix) releases each input file of ``source`` (a file, folder, glob or prefix, on any
filesystem) into its own part ``out/part-000000.parquet``..., then writes the manifest
``out/_iwpfast_manifest.json`` last: the release is published when the manifest appears, and
reads back as one release (``iwpfast.io.parts``).  The Dask release (``iwpfast.distributed``) runs
the same ``release_part`` calls as tasks and writes the same manifest, so with a seed both give the
same bits.

Keys: each part draws its own noise from its own key, derived from the release's key:
``root.derive("part", i)``.  Without a seed the root is drawn from OS entropy once, where the
release starts, so a retried part draws the same noise (a copy an interrupted attempt left adds
nothing); it is never written or logged (the Dask release sends each task its part's key only).
With a seed (simulations only) the root is ``NoiseKey.from_seed(seed)``: independent keys, the same
whoever writes the part.  Temporaries and incomplete uploads of interrupted attempts are removed
before the manifest is written; another run's leftovers are refused (saying: resume it, or delete
its parts), or removed with overwrite before any part is written.  Parts stay owner-only until the
manifest publishes them; a resumed run checks that the inputs of the parts it keeps are unchanged
(``iwpfast.privacy.fingerprints``) (docs/release.md, "No second noisy copy").
"""
from __future__ import annotations

import os
import time
import uuid
import warnings
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..exceptions import InvalidInputError, ReleaseSpecError
from .file_release import release_file
from .options import (
    _UNSET,
    DEFAULT_BATCH_ROWS,
    ReleaseOptions,
    fill_ranges_from_data,
    release_options,
    resolve_options_spec,
    resolve_spec,
)
from .part_folder import (  # noqa: F401  (re-exported: the Spark path and tests import them)
    DELETE_PARTS_HINT,
    REPLACE_RELEASE_HINT,
    _leftovers_of_other_runs,
    _take_folder_lock,
    parts_folder_kind,
    prepare_release_folder,
)
from .report import ReleaseResult
from .spec import ReleaseSpec

if TYPE_CHECKING:                    # io.filesystem imports pyarrow: not at import time
    from ..io.filesystem import FolderLock, Location


@dataclass
class MultiPartResult(ReleaseResult):
    """What a multi-part release did: the sums over its parts, and each part's result."""

    parts: list = field(default_factory=list)
    manifest: str | None = None
    #: resume: the rows and parts kept from the unfinished run (released by it, not by this run)
    rows_kept: int = 0
    parts_kept: int = 0

    @property
    def rows_per_s(self) -> float:
        """The rate of this run: the rows it released itself (kept parts not counted)."""
        done = self.rows_read - self.rows_kept
        return done / self.elapsed_s if self.elapsed_s > 0 else float("nan")

    def summary(self) -> str:
        head, _, rest = super().summary().partition("\n")
        n = len(self.parts)
        if self.parts_kept:
            now = n - self.parts_kept
            head = (f"released {self.rows_written - self.rows_kept:,} rows in {now} "
                    f"part{'' if now == 1 else 's'} to {self.destination} in "
                    f"{self.elapsed_s:.2f} s ({self.rows_per_s / 1e6:.2f} M rows/s); kept "
                    f"{self.rows_kept:,} rows in {self.parts_kept} part"
                    f"{'' if self.parts_kept == 1 else 's'} of the unfinished run: "
                    f"{self.rows_written:,} rows in {n} parts published")
        else:
            head = head.replace(" rows", f" rows in {n} part{'' if n == 1 else 's'}", 1)
        return head + (("\n" + rest) if rest else "")


@dataclass(frozen=True)
class PartPlan:
    """Everything a part's task needs (picklable: sent to Dask workers)."""

    inputs: list            # Location of each part's input file, in part order
    folder: Location        # the destination folder / prefix
    spec: ReleaseSpec       # resolved: features, label and every range known
    release_id: str
    extension: str          # the format's (``io.formats.output_extension``): ".parquet", ".arrow"
    #: each part's rows of its input file, (start, stop) on row-group boundaries; None: all
    row_ranges: list | None = None
    #: the release created the (local) destination folder: a failed release removes it again
    created_folder: bool = False
    #: resume: the parts an unfinished run of this plan published, index -> rows (kept as they are)
    kept: dict = field(default_factory=dict)
    #: a failed run keeps its finished parts (unpublished) for the next resumed run
    resumable: bool = False
    #: the run's key (16 bytes) of the inputs' sampled fingerprints and the parts' row digests
    #: (``iwpfast.privacy.fingerprints``); kept in the owner-only plan file only
    digest_key: bytes | None = None
    #: the destination folder's lock (``io.filesystem.FolderLock``), held by this process while
    #: it releases into a local folder; arrives inert in a worker
    lock: FolderLock | None = field(default=None, compare=False, repr=False)

    def todo(self) -> list[int]:
        """The indices of the parts this run releases (all but the kept ones)."""
        return [i for i in range(len(self.inputs)) if i not in self.kept]

    def kept_result(self, index: int) -> ReleaseResult:
        """The result of a part kept from an unfinished run: its rows, as its metadata says (the
        clipping counts of that run are not known)."""
        rows = int(self.kept[index])
        return ReleaseResult(destination=self.part_location(index).display, spec=self.spec,
                             rows_read=rows, rows_written=rows)

    def part_source(self, index: int, batch_rows: int):
        """What part ``index`` releases: its input file, or a row range of it."""
        rows = None if self.row_ranges is None else self.row_ranges[index]
        if rows is None:
            return self.inputs[index]
        from ..io.sources import FileSource, RowRangeSource

        return RowRangeSource(FileSource([self.inputs[index]], None, batch_rows), *rows)

    def part_location(self, index: int):
        from ..io.parts import part_name

        return self.folder.child(part_name(index, self.extension))


def part_seed(seed, index: int):
    """The key of part ``index``: None (fresh OS entropy, drawn where the part is written) when
    ``seed`` is None; else the child key ``root.derive("part", index)`` of the release's key
    (``seed`` itself when a ``NoiseKey``, else ``NoiseKey.from_seed(seed)``): an independent key
    per part, the same whichever worker writes the part, or a retry of it."""
    from .randomness import NoiseKey

    if seed is None:
        return None
    root = seed if isinstance(seed, NoiseKey) else NoiseKey.from_seed(seed)
    return root.derive("part", int(index))


def plan_parts(source, destination, spec, features=None, label=_UNSET, *, ranges=None,
               overwrite: bool = False, format: str | None = None, filesystem=None,
               batch_rows: int = DEFAULT_BATCH_ROWS, max_part_rows: int | None = None) -> PartPlan:
    """Check the inputs and the destination folder before any work; resolve the spec once.

    ``max_part_rows``: split the Parquet/IPC inputs larger than this into parts of whole row
    groups (a part holds at least one row group, so it may be larger); None: one part per file."""
    options = release_options(overwrite=overwrite, format=format, filesystem=filesystem,
                              record_batch_rows=batch_rows, max_part_rows=max_part_rows,
                              features=features, label=label, ranges=ranges)
    return plan_parts_with(source, destination, spec, options)


def plan_parts_with(source, destination, spec: ReleaseSpec, options: ReleaseOptions) -> PartPlan:
    """:func:`plan_parts` with resolved options."""
    from ..io.filesystem import is_uri, resolve
    from ..io.formats import output_extension, output_format
    from ..io.outputs import refuse_writing_onto_inputs
    from ..io.parts import MANIFEST_NAME, read_manifest
    from ..io.sources import _expand_path

    if not isinstance(source, (str, os.PathLike)):
        raise InvalidInputError(
            f"a folder destination writes one part per input file: give the source as a file, "
            f"folder, glob or prefix (got a {type(source).__name__}); or give a file destination")
    src_text, dest_text = os.fspath(source), os.fspath(destination)
    src_loc = resolve(src_text, None if is_uri(src_text) else options.filesystem)
    folder = resolve(dest_text, None if is_uri(dest_text) else options.filesystem)
    refuse_writing_onto_inputs(folder, src_loc)
    inputs, _ = _expand_path(src_loc)
    spec = resolve_options_spec(spec, options)
    extension = output_extension(output_format("x.parquet", options.format))
    kind = folder.kind()
    if kind == "file":
        raise InvalidInputError(f"destination {folder.display!r} is a file; a multi-part release "
                                f"needs a folder / prefix (or give a file name without '/')")
    if folder.local and kind == "missing":
        parent = os.path.dirname(os.path.abspath(folder.path.rstrip(os.sep)))
        if not os.path.isdir(parent):
            raise InvalidInputError(f"directory {parent!r} of the destination does not exist; "
                                    f"create it first")
    if folder.local:
        from ..io.outputs import check_writable_folder

        # the folder (or where it is to be made) writable before any data are read (each part's
        # own space is checked when it starts: release_file)
        inside = folder.path if kind == "dir" else folder.path.rstrip(os.sep)
        check_writable_folder(os.path.join(inside, "part-000000") if kind == "dir" else inside,
                              what="destination")
    published = kind == "dir" and read_manifest(folder) is not None
    if published and not options.overwrite:
        if options.resume:
            raise InvalidInputError(
                f"{folder.display!r} holds a published release ({MANIFEST_NAME}): there is nothing "
                f"to resume; {REPLACE_RELEASE_HINT}")
        raise InvalidInputError(
            f"{folder.display!r} already holds a release ({MANIFEST_NAME}); choose another "
            f"folder, or {REPLACE_RELEASE_HINT}")
    if options.resume and options.overwrite:
        raise InvalidInputError("resume keeps the parts of an unfinished run and overwrite "
                                "replaces them: choose one")
    lock = _take_folder_lock(folder) if folder.local and kind == "dir" else None
    try:
        if (kind == "dir" or not folder.local) and not options.resume:
            # (a resumed run keeps the unfinished run's parts and removes its temporaries)
            _leftovers_of_other_runs(folder, published, options.overwrite,
                                     no_run_alive=lock is not None)
        if spec.ranges_from_data:
            # one range for every part, computed over all the inputs (parts must share the spec)
            spec = fill_ranges_from_data(spec, _all_inputs(inputs, spec, options.batch_rows))
        else:
            spec.scaler_ranges()
        row_ranges = None
        if options.max_part_rows is not None:
            inputs, row_ranges = _split_inputs(inputs, options.max_part_rows, options.batch_rows)
    except BaseException:
        # a refusal frees the folder at once (a traceback kept by the caller would hold it)
        if lock is not None:
            lock.release()
        raise
    created = folder.local and kind == "missing"
    if created:                         # last: a refused release leaves nothing behind
        os.makedirs(folder.path, exist_ok=True)
        lock = _take_folder_lock(folder)
    return PartPlan(inputs, folder, spec, new_release_id(), extension, row_ranges, created,
                    lock=lock)




def _split_inputs(inputs, max_rows: int, batch_rows: int):
    """(part inputs, part row ranges): each file's row groups gathered into ranges of about
    ``max_rows`` rows (row-group boundaries: every part seeks straight to its first group)."""
    from ..io.sources import FileSource

    parts: list = []
    ranges: list[tuple[int, int] | None] = []   # None: the whole file
    for loc in inputs:
        f = FileSource([loc], None, batch_rows).files[0]
        groups = getattr(f, "group_rows", None)
        if not groups or f.num_rows is None or f.num_rows <= max_rows:
            parts.append(loc)
            ranges.append(None)
            continue
        start = row = 0
        for n in groups:
            row += n
            if row - start >= max_rows:
                parts.append(loc)
                ranges.append((start, row))
                start = row
        if row > start:
            parts.append(loc)
            ranges.append((start, row))
    return parts, ranges


def _all_inputs(inputs, spec, batch_rows):
    from ..io.sources import FileSource

    columns = list(spec.features) + ([spec.label] if spec.label is not None else [])
    return FileSource(inputs, columns, batch_rows, description=f"{len(inputs)} input files")


def release_part(plan: PartPlan, index: int, *, seed=None, on_invalid: str = "error",
                 format: str | None = None, compression="auto", batch_rows: int = DEFAULT_BATCH_ROWS,
                 threads: int | None = None, engine: str = "auto") -> ReleaseResult:
    """Release input ``index`` of ``plan`` into its part (replacing an earlier attempt: a
    retried task simply writes the part again; nothing is published before the manifest)."""
    options = release_options(seed=seed, on_invalid=on_invalid, format=format,
                              compression=compression, record_batch_rows=batch_rows,
                              threads=threads, engine=engine)
    return release_part_with(plan, index, options)


def release_part_with(plan: PartPlan, index: int, options: ReleaseOptions,
                      key=None) -> ReleaseResult:
    """:func:`release_part` with resolved options: ``key`` is the part's own key (a runner that
    sends each task only its part's key), else it is derived from ``options.seed``.

    A transient error (``OSError``: a network or storage failure) is retried up to
    ``options.part_retries`` times, after 0.5 s, 1 s, 2 s..., with the part's same key (the
    attempt's temporary output is gone: nothing was published) and the part is written again.
    Any other error (bad data, a wrong spec) is raised at once: trying again would fail again."""
    from .part_rows import RowDigest, write_sidecar

    key = part_seed(options.seed, index) if key is None else key
    attempt = 0
    while True:
        try:
            # the keyed digest of every row the part reads, for a resumed run to check that
            # the part's input is unchanged (``iwpfast.privacy.fingerprints``)
            digest = None if plan.digest_key is None else RowDigest(plan.digest_key)
            with warnings.catch_warnings():
                # the range counts are reported once for the whole release, by the caller
                warnings.simplefilter("ignore", UserWarning)
                result = release_file(plan.part_source(index, options.batch_rows),
                                      plan.part_location(index), plan.spec, options.for_part(key),
                                      part={"release_id": plan.release_id, "index": index},
                                      digest=digest)
            if digest is not None:
                # after the part: a part without its sidecar is released again by a resume
                write_sidecar(plan.folder, index, plan.release_id, digest.value())
            return result
        except OSError:
            if attempt >= options.part_retries:
                raise
            time.sleep(0.5 * 2 ** attempt)
            attempt += 1


def finish_parts(plan: PartPlan, results: list[ReleaseResult], elapsed_s: float,
                 overwrite: bool) -> MultiPartResult:
    """Write the manifest (publishing the release), clear parts of an overwritten release, and
    sum the parts' results."""
    from ..io.parts import manifest_document, remove_temporaries, write_manifest_document
    from ..io.sources import FileSource

    parts = [{"path": plan.part_location(i).name, "index": i, "rows": r.rows_written}
             for i, r in enumerate(results)]
    try:
        remove_temporaries(plan.folder)
        if sum(r.rows_written for r in results) == 0:
            raise InvalidInputError(
                f"the {len(results)} input file(s) of the release hold no rows"
                + (" left after dropping invalid ones" if sum(r.rows_read for r in results) else "")
                + ": nothing to release; check the path")
        _check_label_encodings(plan, results)
        # the parts' footers, read back: checks that they belong together and gives the
        # release's metadata
        written = FileSource([plan.part_location(i) for i in range(len(results))], None, 1 << 16)
        metadata = written.release_metadata
        if metadata is None:            # the parts were just written as releases: never
            raise ReleaseSpecError("the written parts carry no release metadata; release again")
        doc = manifest_document(plan.release_id, parts, metadata)
        manifest = write_manifest_document(plan.folder, doc, overwrite=True)
    except BaseException:
        discard_parts(plan)
        raise
    # published: nothing left to resume; the key and the digests of raw rows go with the plan
    from .part_rows import remove_sidecars

    plan.folder.child(PLAN_NAME).delete()
    remove_sidecars(plan.folder)
    if overwrite:  # parts of the release this one replaced, beyond the new part count
        keep = {p["path"] for p in parts}
        for entry in plan.folder.listdir():
            if entry.name.startswith("part-") and entry.name not in keep:
                entry.delete()
    out = MultiPartResult(destination=plan.folder.display, spec=results[0].spec, parts=results,
                          manifest=manifest.display, rows_kept=int(sum(plan.kept.values())),
                          parts_kept=len(plan.kept))
    for r in results:
        out.rows_read += r.rows_read
        out.rows_written += r.rows_written
        out.rows_dropped += r.rows_dropped
        out.rows_clipped += r.rows_clipped
        out.targets_clipped += r.targets_clipped
        for k, v in r.values_out_of_range.items():
            out.values_out_of_range[k] = out.values_out_of_range.get(k, 0) + v
    out.spec = out.spec.with_counts(row_count=out.rows_written)
    out.elapsed_s = elapsed_s
    if out.values_out_of_range:
        detail = ", ".join(f"{k}: {v:,}" for k, v in out.values_out_of_range.items())
        warnings.warn(f"values outside the declared ranges were clipped to them ({detail}); "
                      "widen the ranges if that is not intended", UserWarning, stacklevel=3)
    return out


def _check_label_encodings(plan: PartPlan, results: list[ReleaseResult]) -> None:
    """Binary labels written {0, 1} in one input and {-1, 1} in another are refused, as within one
    file.  Checked here, in the process that runs the release, from the parts' results: the
    encoding a part saw is never written into its metadata (it is a function of its raw labels)."""
    first = None
    for i, r in enumerate(results):
        if r.label_encoding is None:
            continue
        if first is None:
            first = (i, r.label_encoding)
        elif r.label_encoding != first[1]:
            def shown(e):
                return "{0, 1}" if e == "01" else "{-1, 1}"
            raise ReleaseSpecError(
                f"the label of part {i} ({plan.inputs[i].display!r} -> "
                f"{plan.part_location(i).name!r}) is written {shown(r.label_encoding)} but "
                f"{shown(first[1])} in part {first[0]}; recode the labels to one encoding")


def discard_parts(plan: PartPlan) -> None:
    """Delete the parts a failed release may have written (best effort; nothing was published),
    and the destination folder when the release created it and it is empty again.  A resumable
    run (``resume=True``) keeps them instead, unpublished: the next run with ``resume=True``
    releases only the missing ones."""
    from .part_rows import sidecar_name

    if plan.resumable:
        return
    plan.folder.child(PLAN_NAME).delete()
    for i in range(len(plan.inputs)):
        try:
            plan.part_location(i).delete()
            plan.folder.child(sidecar_name(i)).delete()
        except OSError:
            pass
    if plan.created_folder:
        try:
            os.rmdir(plan.folder.path)  # only when empty: someone else's file keeps it
        except OSError:
            pass
    if not plan.folder.local:
        from ..io.filesystem import drop_empty_marker

        try:
            drop_empty_marker(plan.folder)  # the 0-byte prefix/ object the deletes left
        except Exception:               # best effort: the release's own error is raised
            pass


def unpublish(plan: PartPlan) -> None:
    """Remove the manifest of the release being overwritten before its parts are replaced."""
    from ..io.parts import MANIFEST_NAME

    plan.folder.child(MANIFEST_NAME).delete()


from ..io.parts import PLAN_NAME  # noqa: E402  (re-exported: the plan file's name)


def _plan_document(plan: PartPlan, fingerprints: list | None = None) -> dict:
    """What makes two runs the same release: the inputs, their split into parts, the spec (its
    metadata, which holds no seed) and the part format; the release id the parts carry; and
    each input's fingerprint (``input_fingerprint``)."""
    doc = {"release_id": plan.release_id, "extension": plan.extension,
           "inputs": [loc.display for loc in plan.inputs],
           "row_ranges": None if plan.row_ranges is None else
           [None if r is None else [int(r[0]), int(r[1])] for r in plan.row_ranges],
           "spec": plan.spec.to_metadata()}
    if fingerprints is not None:
        doc["fingerprints"] = fingerprints
    return doc


# the fingerprints of the inputs, in their own module (names kept importable from here)
from .fingerprints import (  # noqa: E402, F401
    FINGERPRINT_FOOTER_MAX,
    FINGERPRINT_TAIL_BYTES,
    input_fingerprint,
)
from .fingerprints import changed_input as _changed_input  # noqa: E402


def _stored_plan(folder) -> dict | None:
    """The plan file an unfinished run left in ``folder`` (None: none, or unreadable)."""
    import json

    try:
        doc = json.loads(folder.child(PLAN_NAME).read_bytes())
    except (FileNotFoundError, OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _stored_key(doc: dict | None) -> bytes | None:
    """The digest key of a stored plan (None: no plan, or one written by an older iwpfast)."""
    try:
        key = bytes.fromhex(str((doc or {})["digest_key"]))
    except (KeyError, ValueError):
        return None
    return key if len(key) == 16 else None


def _resumed(plan: PartPlan, fingerprints: list, doc: dict | None,
             batch_rows: int) -> PartPlan:
    """The plan of a resumed run: the release id of the unfinished run whose plan file ``doc``
    lies in the folder (refused if that run had other inputs, split or spec, or if an input
    changed since), and its finished parts kept (a part is there only once it was written
    whole: parts are renamed into place atomically) when their input rows are unchanged."""
    import json

    from ..io.parts import remove_temporaries
    from .fingerprints import verified_parts

    if doc is None:
        warnings.warn(f"resume: {plan.folder.display!r} holds no unfinished release "
                      f"({PLAN_NAME}); releasing every part", UserWarning, stacklevel=4)
        return replace(plan, resumable=True)
    mine = _plan_document(plan)
    differ = [k for k in ("extension", "inputs", "row_ranges", "spec")
              if json.dumps(doc.get(k), sort_keys=True) != json.dumps(mine[k], sort_keys=True)]
    if differ:
        raise InvalidInputError(
            f"resume: the unfinished release in {plan.folder.display!r} was started with other "
            f"{' and '.join(differ)}; resume with the same inputs, options and spec, or "
            f"{DELETE_PARTS_HINT}")
    # the temporary files (and incomplete uploads) of the parts the killed run was writing:
    # never published, never to be; removed also when the checks below refuse the resume
    remove_temporaries(plan.folder)
    changed = ("the unfinished run's plan records no key for the content of its inputs "
               "(written by an older iwpfast), so they cannot be checked"
               if _stored_key(doc) is None else
               _changed_input(doc.get("fingerprints"), fingerprints))
    if changed is not None:
        # the kept parts hold noisy copies of the inputs as they were: releasing changed (e.g.
        # swapped) inputs next to them would publish rows twice, under independent noise
        raise InvalidInputError(
            f"resume: {changed}; the kept parts were released from the inputs as they were, and "
            f"resuming could release their rows twice. Restore the inputs and resume, or "
            f"{DELETE_PARTS_HINT}")
    plan = replace(plan, release_id=str(doc["release_id"]), resumable=True)
    # each kept part's input rows read again and compared with the digest its run stored: a
    # change the sampled fingerprint missed is refused, naming the input and the part
    return replace(plan, kept=verified_parts(plan, _finished_parts(plan), batch_rows))


def _finished_parts(plan: PartPlan) -> dict:
    """{index: rows} of the parts of ``plan``'s release id that lie whole in its folder."""
    from ..io.filesystem import map_bounded
    from ..io.format_readers import open_file
    from ..io.parts import PART_KEY
    from ..io.source_base import parse_release_metadata

    listed = {e.name for e in plan.folder.listdir()}

    def finished(i):
        loc = plan.part_location(i)
        if loc.name not in listed:
            return None
        try:
            f = open_file(loc, 1 << 16)
            meta = parse_release_metadata(f.schema, f.path) or {}
        except (InvalidInputError, ReleaseSpecError, OSError):
            return None             # unreadable: released again
        part = meta.get(PART_KEY) or {}
        if part.get("release_id") != plan.release_id or int(part.get("index", -1)) != i:
            return None
        return int(f.num_rows)

    rows = map_bounded(finished, range(len(plan.inputs)))
    return {i: n for i, n in enumerate(rows) if n is not None}


def start_parts(source, destination, spec, options: ReleaseOptions) -> PartPlan:
    """What a multi-part release (serial or on Dask) does before its first part: plan the parts,
    (``overwrite``) unpublish the release being replaced or (``resume``) keep the finished parts
    of the unfinished one, and write the plan file that a resumed run checks."""
    plan = plan_parts_with(source, destination, spec, options)
    try:
        return _started(plan, options)
    except BaseException:
        # a refused resume frees the folder at once (a traceback kept by the caller would not)
        if plan.lock is not None:
            plan.lock.release()
        raise


def _started(plan: PartPlan, options: ReleaseOptions) -> PartPlan:
    import json
    import secrets

    from .fingerprints import fingerprints as fingerprints_of
    from .part_rows import write_private_atomic

    doc = _stored_plan(plan.folder) if options.resume else None
    # the key of the inputs' sampled fingerprints and of the parts' row digests: the unfinished
    # run's (to compare with what it stored), else drawn for this run; it lives in the
    # owner-only plan file only
    key = _stored_key(doc) or secrets.token_bytes(16)
    plan = replace(plan, digest_key=key)
    try:
        fingerprints = fingerprints_of(plan.inputs, key)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot read the inputs of {plan.folder.display!r}: "
                                 f"{exc.strerror or exc}") from None
    if options.resume:
        plan = _resumed(plan, fingerprints, doc, options.batch_rows)
    elif options.overwrite:
        unpublish(plan)
    document = {**_plan_document(plan, fingerprints), "digest_key": key.hex()}
    # owner-only for good (it holds the key and digests of raw data); removed at publication
    write_private_atomic(plan.folder.child(PLAN_NAME),
                         json.dumps(document, sort_keys=True).encode())
    return plan


def run_parts_serially(plan: PartPlan, options: ReleaseOptions) -> list[ReleaseResult]:
    """The default parts runner: every part in this process, in order; a failed or interrupted
    part deletes every part written."""
    results: list[ReleaseResult] = []
    try:
        for i in range(len(plan.inputs)):
            results.append(plan.kept_result(i) if i in plan.kept
                           else release_part_with(plan, i, options))
    finally:
        if len(results) < len(plan.inputs):  # a part failed or was interrupted
            discard_parts(plan)
    return results


def release_parts_with(source, destination, spec: ReleaseSpec, options: ReleaseOptions,
                       runner=None) -> MultiPartResult:
    """Plan the parts, run them with ``runner(plan, options) -> [ReleaseResult]`` (default
    :func:`run_parts_serially`), then write the manifest."""
    plan = start_parts(source, destination, spec, options)
    try:
        return _run_and_publish(plan, options, runner)
    finally:
        if plan.lock is not None:
            plan.lock.release()


def _run_and_publish(plan: PartPlan, options: ReleaseOptions, runner) -> MultiPartResult:
    if options.seed is None:
        # one key for the whole release, drawn here: part i's key is derived from it, so a
        # retried part draws the same noise as its first attempt (a leftover copy adds nothing)
        from .randomness import NoiseKey

        options = replace(options, seed=NoiseKey.from_os_entropy())
    t0 = time.perf_counter()
    results = (runner or run_parts_serially)(plan, options)
    return finish_parts(plan, list(results), time.perf_counter() - t0, options.overwrite)


def release_parts(source, destination, spec: ReleaseSpec, features=None, label=_UNSET, *,
                  ranges=None, seed=None, overwrite: bool = False, on_invalid: str = "error",
                  format: str | None = None, compression="auto",
                  record_batch_rows: int = DEFAULT_BATCH_ROWS, threads: int | None = None,
                  progress: bool | None = False, engine: str | None = None,
                  filesystem=None, kernel: str | None = None,
                  max_part_rows: int | None = None, batch_rows: int | None = None) -> MultiPartResult:
    """Release each input file of ``source`` into one part of the folder ``destination``, in this
    process, then write the manifest.  Arguments as :func:`iwpfast.release`; ``max_part_rows``
    splits large Parquet/IPC files into parts of whole row groups (see :func:`plan_parts`)."""
    options = release_options(
        seed=seed, overwrite=overwrite, on_invalid=on_invalid, format=format,
        compression=compression, record_batch_rows=record_batch_rows, batch_rows=batch_rows,
        threads=threads, progress=progress, engine=engine, kernel=kernel, filesystem=filesystem,
        max_part_rows=max_part_rows, features=features, label=label, ranges=ranges)
    return release_parts_with(source, destination, spec, options)


def new_release_id() -> str:
    """A fresh random release id (128 bits, hex): names the parts of one multi-part release."""
    return uuid.uuid4().hex


def release_batches(batches, destination, spec: ReleaseSpec, *, index: int, release_id: str,
                    schema=None, seed=None, features=None, label=_UNSET, ranges=None,
                    on_invalid: str = "error", format: str | None = None, compression="auto",
                    record_batch_rows: int = DEFAULT_BATCH_ROWS, threads: int | None = 1,
                    engine: str = "auto", filesystem=None,
                    batch_rows: int | None = None) -> ReleaseResult:
    """Release an iterable of Arrow record batches as part ``index`` of the multi-part release
    ``release_id`` in the folder ``destination``: what an engine's per-partition function calls
    (Spark's ``mapInArrow``, see examples/spark_release.py).  Writes ``part-<index>`` (replacing
    an earlier attempt of the same part) and returns its :class:`ReleaseResult`; once every part
    is written, :func:`iwpfast.io.parts.write_manifest` publishes the release.

    ``seed``: the release's key (a ``NoiseKey`` drawn once, e.g. ``NoiseKey.from_os_entropy()``
    on the driver: part ``index`` derives its own from it, so a retried partition draws the same
    noise), an integer (simulations only), or None (fresh OS entropy for this part alone: a retry
    would write other noise).  Prepare the folder first with :func:`prepare_release_folder`.
    ``spec`` must be complete (features, label and every range declared): each part is released
    on its own."""
    import itertools

    import pyarrow as pa

    from ..io.filesystem import is_uri, resolve
    from ..io.formats import output_extension, output_format
    from ..io.parts import part_name

    options = release_options(seed=seed, on_invalid=on_invalid, format=format,
                              compression=compression, record_batch_rows=record_batch_rows,
                              batch_rows=batch_rows, threads=threads, engine=engine)
    spec = resolve_spec(spec, features, label, ranges)
    if spec.ranges_from_data:
        raise InvalidInputError(
            "ranges_from_data cannot be used part by part (every part must share the ranges): "
            "declare the ranges")
    iterator = iter(batches)
    if schema is None:
        first = next(iterator, None)
        if first is None:
            raise InvalidInputError(f"part {index}: no record batch to release")
        schema = first.schema
        iterator = itertools.chain([first], iterator)
    # an engine's batches are small (Spark's Arrow batches: 10^4 rows): gathered into batches
    # of record_batch_rows, so the part's row groups are too (10^4-row groups made a fit on the
    # part 1.6x slower)
    reader = pa.RecordBatchReader.from_batches(schema, _rebatched(iterator, options.batch_rows))
    text = os.fspath(destination)
    folder = resolve(text, None if is_uri(text) else filesystem)
    extension = output_extension(output_format("x.parquet", format))
    return release_file(reader, folder.child(part_name(index, extension)), spec,
                        options.for_part(part_seed(seed, index)),
                        part={"release_id": release_id, "index": int(index)})


def _rebatched(batches, rows: int):
    """The rows of ``batches`` in record batches of ``rows`` rows (the last one shorter)."""
    import pyarrow as pa

    pending: list = []
    held = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        held += batch.num_rows
        if held >= rows:
            table = pa.Table.from_batches(pending).combine_chunks()
            full = (held // rows) * rows
            yield from table.slice(0, full).to_batches(max_chunksize=rows)
            pending = table.slice(full).to_batches()
            held -= full
    if held:
        yield from pa.Table.from_batches(pending).combine_chunks().to_batches(max_chunksize=rows)
