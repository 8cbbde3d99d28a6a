"""Multi-part releases: one release written as several files, read back as one.

A part is an ordinary release file whose metadata (``iwpfast.release``) also holds::

    "part": {"release_id": "<32 hex digits>", "index": i, "rows": n}

and ``row_count`` = n, the part's own rows.  The parts of one release live in one folder / prefix
(``part-00000.parquet``, ``part-00001.parquet``...) next to a small manifest, written last::

    _iwpfast_manifest.json
    {"format": "iwpfast.manifest", "format_version": 1, "release_id": "...",
     "parts": [{"path": "part-00000.parquet", "index": 0, "rows": n0}, ...],
     "row_count": n0 + n1 + ..., "release": {...the release metadata without the part fields...}}

Reading the folder reads the parts the manifest lists, in index order, as one release whose row
count is the sum.  Until the manifest is there the release is not published: a folder of parts
without it is refused (a release still being written, or one that failed), and a part written again
by a retried task simply replaces the earlier attempt under the same name.  Parts of another
release (another release id) or with other parameters are refused with an error naming the part.
"""
from __future__ import annotations

import json
import os
import re

from ..exceptions import InvalidInputError, ReleaseSpecError
from .filesystem import Location, map_bounded, resolve, write_bytes_atomic
from .format_readers import _file_format, _is_known, open_file
from .source_base import parse_release_metadata

MANIFEST_NAME = "_iwpfast_manifest.json"
MANIFEST_FORMAT = "iwpfast.manifest"
MANIFEST_VERSION = 1
PART_KEY = "part"
#: metadata fields that differ from part to part of one release
PART_FIELDS = (PART_KEY, "row_count")
#: fields a part learns from its own rows (the label values it saw): parts that saw none leave
#: them out, the others must agree
DATA_FIELDS = ("label_classes",)


def is_release_temporary(name: str) -> bool:
    """Whether ``name`` is the staging file of a part, the manifest or the plan being written
    (``iwpfast.io.filesystem.staging_name``: hidden, ``.<name>.<12 hex>.tmp``)."""
    match = _STAGED.fullmatch(name)
    return match is not None and (match.group(1).startswith("part-")
                                  or match.group(1) in (MANIFEST_NAME, PLAN_NAME))


_STAGED = re.compile(r"\.(.+)\.[0-9a-f]{12}\.tmp2?")
#: a multi-part release's plan, written before its first part (skipped by readers: "_")
PLAN_NAME = "_iwpfast_plan.json"


def part_name(index: int, extension: str = ".parquet") -> str:
    """File name of part ``index`` (sorts in index order up to 10^6 parts)."""
    return f"part-{int(index):06d}{extension}"


def release_metadata_of(meta: dict) -> dict:
    """The metadata shared by all parts of a release (the part fields removed)."""
    return {k: v for k, v in meta.items() if k not in PART_FIELDS}


def _shared(meta: dict) -> dict:
    return {k: v for k, v in meta.items() if k not in PART_FIELDS + DATA_FIELDS}


def combine_part_metadata(metas: list, names: list[str], rows: list) -> dict | None:
    """The release metadata of files read together, or an error naming the file that differs.

    Files without part fields must carry identical metadata (as before multi-part releases).
    Parts must share the release id and the parameters, have distinct indices, and hold the rows
    their metadata states.  The result has the summed ``row_count`` (None if a count is unknown)
    and no part fields."""
    first = metas[0]
    if first is None:
        for meta, name in zip(metas[1:], names[1:], strict=True):
            if meta is not None:
                raise ReleaseSpecError(
                    f"{name!r} is an iwpfast release but {names[0]!r} is not: these files are not "
                    f"parts of one release. Read them separately.")
        return None
    if len(metas) == 1 and PART_KEY not in first:
        check_row_count(first, names[0], rows[0])
        return first
    shared = _shared(first)
    release_id = _part(first, names[0]).get("release_id") if PART_KEY in first else None
    seen: dict[int, str] = {}
    data: dict = {}
    for meta, name, n in zip(metas, names, rows, strict=True):
        for key in DATA_FIELDS:
            value = (meta or {}).get(key)
            if value is None:
                continue
            if key in data and data[key][0] != value:
                raise ReleaseSpecError(
                    f"{name!r} has {key} {value} but {data[key][1]!r} has {data[key][0]}: the "
                    f"parts were released from data with different label values; recode the "
                    f"labels the same way and release again.")
            data.setdefault(key, (value, name))
        if meta is None or _shared(meta) != shared:
            raise ReleaseSpecError(
                f"{name!r} carries other release metadata than {names[0]!r}: these files are not "
                f"parts of one release (other parameters or spec). Read them separately, or "
                f"remove {name!r}.")
        if PART_KEY not in meta:
            if release_id is not None or meta != first:
                raise ReleaseSpecError(
                    f"{name!r} is not a part of the multi-part release of {names[0]!r} (no part "
                    f"metadata); remove it from the folder or read the files separately.")
            continue
        part = _part(meta, name)
        check_row_count(meta, name, n)
        if part.get("release_id") != release_id:
            raise ReleaseSpecError(
                f"{name!r} is part of another release (release id {part.get('release_id')!r}, not "
                f"{release_id!r} as {names[0]!r}); remove it, or read the releases separately.")
        index = int(part.get("index", -1))
        if index in seen:
            raise ReleaseSpecError(
                f"{name!r} and {seen[index]!r} are both part {index} of release {release_id}; one "
                f"of them is a stray copy: remove it.")
        seen[index] = name
        if n is not None and part.get("rows") is not None and int(part["rows"]) != n:
            raise ReleaseSpecError(
                f"{name!r} holds {n} rows but its part metadata says {part['rows']}; the part is "
                f"damaged. Release it again.")
    total = None if any(n is None for n in rows) else int(sum(rows))
    return {**shared, **{k: v for k, (v, _) in data.items()}, "row_count": total}


def check_row_count(meta: dict, name: str, rows: int | None) -> None:
    """A file's stored ``row_count`` against the rows its footer holds (programs read the count:
    an edited one is refused, naming the field); None on either side: nothing to compare."""
    stored = meta.get("row_count")
    if stored is not None and rows is not None and stored != rows:
        raise ReleaseSpecError(
            f"{name!r}: the release's metadata field 'row_count' says {stored!r} but the file "
            f"holds {rows} rows: the metadata was edited, or another tool wrote some of a "
            f"release's rows with its metadata (set row_count to {rows} there); read the release "
            "as it was published (releasing the data again would publish a second noisy copy)")


def _part(meta: dict, name: str) -> dict:
    part = meta.get(PART_KEY)
    if not isinstance(part, dict):
        raise ReleaseSpecError(f"{name!r}: the part metadata is {part!r}, not an object; the file "
                               f"is damaged. Release it again.")
    return part


# ------------------------------------------------------------------------------- manifest
def manifest_document(release_id: str, parts: list[dict], release_meta: dict) -> dict:
    parts = sorted(parts, key=lambda p: p["index"])
    return {
        "format": MANIFEST_FORMAT,
        "format_version": MANIFEST_VERSION,
        "release_id": release_id,
        "parts": [{"path": p["path"], "index": int(p["index"]), "rows": int(p["rows"])}
                  for p in parts],
        "row_count": int(sum(int(p["rows"]) for p in parts)),
        "release": release_metadata_of(release_meta),
    }


def temporary_uploads(folder: Location) -> list:
    """The keys of the incomplete S3 multipart uploads of staging files in ``folder``
    (``is_release_temporary``; none elsewhere, or without boto3)."""
    from .filesystem import incomplete_uploads

    return [k for k in incomplete_uploads(folder) if is_release_temporary(k.rsplit("/", 1)[-1])]


def remove_temporaries(folder: Location) -> None:
    """Remove the staging files of parts, manifest and plan in ``folder`` (``is_release_temporary``)
    and, on S3 with boto3, abort the incomplete multipart uploads of such keys: what killed or
    retried attempts left.  Then check that none is left: a release is never published next to a
    noisy copy of its rows (an error names what could not be removed)."""
    from .filesystem import abort_uploads

    for entry in folder.listdir():
        if is_release_temporary(entry.name):
            entry.delete()
    uploads = temporary_uploads(folder)
    if uploads:
        abort_uploads(folder, uploads)
    left = [e.name for e in folder.listdir() if is_release_temporary(e.name)]
    if left:
        raise ReleaseSpecError(
            f"{folder.display!r} still holds staging file(s) {left[:3]} after removing them (a "
            f"task may still be writing there): the release is not published; wait for every "
            f"task to end, then write the manifest again (iwpfast.io.parts.write_manifest)")


def write_manifest_document(folder: Location, doc: dict, *, overwrite: bool = True) -> Location:
    """Publish ``doc`` as the manifest of ``folder``, after ``remove_temporaries``; then make
    the parts it lists readable as any new file (``publish_parts``)."""
    remove_temporaries(folder)
    loc = folder.child(MANIFEST_NAME)
    data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")
    write_bytes_atomic(loc, data, overwrite=overwrite)
    from .filesystem import FINAL_OUTPUT_PUBLISHED

    FINAL_OUTPUT_PUBLISHED.set()
    publish_parts(folder, [str(p["path"]) for p in doc.get("parts", [])])
    return loc


def publish_parts(folder: Location, names: list[str]) -> None:
    """Give the parts ``names`` of ``folder`` the mode of any new file (0666 less the umask).

    Parts are written owner-only (0600) and stay so until their manifest is written: before it,
    nobody else can read a part (a killed run's finished parts included), so a part that is
    later deleted or released again was never a readable noisy copy.  The manifest comes first,
    the modes after it: a kill in between leaves a published release whose parts only their
    owner reads (safe; ``write_manifest(folder)`` or a chmod finishes it), never a readable part
    of an unpublished one.  An object store has no modes: its bucket policy decides who reads
    the parts (docs/release.md, "No second noisy copy")."""
    if not folder.local:
        return
    from . import filesystem

    for name in names:
        path = folder.child(name).path
        if os.path.isfile(path):
            filesystem.make_public_mode(path)


def read_manifest(folder: Location) -> dict | None:
    """The manifest document of ``folder``, or None when there is none."""
    loc = folder.child(MANIFEST_NAME)
    if loc.kind() != "file":
        return None
    try:
        doc = json.loads(loc.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ReleaseSpecError(f"{loc.display!r} is not valid JSON ({exc}); write it again with "
                               f"iwpfast.io.parts.write_manifest(folder)") from None
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise ReleaseSpecError(f"{loc.display!r} is not an iwpfast manifest; remove it or write it "
                               f"again with iwpfast.io.parts.write_manifest(folder)")
    if doc.get("format_version") != MANIFEST_VERSION:
        raise ReleaseSpecError(f"{loc.display!r} has manifest version {doc.get('format_version')!r};"
                               f" this iwpfast reads version {MANIFEST_VERSION}: upgrade iwpfast")
    return doc


class ManifestParts(list):
    """The part locations a manifest lists, with what it says about them: each part's rows, the
    release's metadata and id.  ``FileSource`` then reads one footer when it opens the release
    and each other part's footer (and its checks) when the part is read."""

    def __init__(self, locations, rows: list[int], release: dict, release_id):
        super().__init__(locations)
        self.rows = list(rows)
        self.release = dict(release)
        self.release_id = release_id


def read_manifest_parts(folder: Location, listing: list[Location] | None = None
                        ) -> list[Location] | None:
    """The part files a folder's manifest lists, in index order (None: no manifest, and no part
    files either; an error when part files lie there without a manifest).  ``listing``: the
    folder's entries, when the caller listed it already (the folder is then not listed again)."""
    doc = read_manifest(folder)
    if doc is None:
        entries = folder.listdir() if listing is None else listing
        candidates = [e for e in entries if e.name.startswith("part-")]
        stray = [e.name for e in candidates[:1] if _has_part_metadata(e)]
        if stray:
            raise ReleaseSpecError(
                f"{folder.display!r} holds parts of a multi-part release ({stray[0]!r}...) but no "
                f"{MANIFEST_NAME}: the release is still being written, or failed before it was "
                f"published. Run the release again with --resume (resume=True): it keeps the "
                f"finished parts and releases only the others; or delete the parts first "
                f"(--overwrite, overwrite=True, deletes them before any new part is written; a "
                f"copy someone already read cannot be retracted).")
        return None
    try:
        parts = sorted(doc["parts"], key=lambda p: int(p["index"]))
        names = [str(p["path"]) for p in parts]
    except (KeyError, TypeError, ValueError):
        raise ReleaseSpecError(f"{folder.child(MANIFEST_NAME).display!r} is damaged (bad parts "
                               f"list); write it again with iwpfast.io.parts.write_manifest"
                               f"(folder)") from None
    if [int(p["index"]) for p in parts] != list(range(len(parts))):
        raise ReleaseSpecError(f"{folder.child(MANIFEST_NAME).display!r} lists part indices "
                               f"{[p['index'] for p in parts]}, not 0..{len(parts) - 1}; the "
                               f"manifest is damaged.")
    locations = [folder.child(n) for n in names]
    if all("/" not in n and "\\" not in n for n in names):
        # one listing of the folder, not one request per part
        listed = {e.name for e in (folder.listdir() if listing is None else listing)}
        present = [loc.name in listed for loc in locations]
    else:
        present = map_bounded(lambda loc: loc.kind() == "file", locations)
    for loc, part, here in zip(locations, parts, present, strict=True):
        if not here:
            raise ReleaseSpecError(
                f"part {part['index']} ({loc.display!r}) of the release in {folder.display!r} is "
                f"missing; copy it back or release the data again.")
    rows = [p.get("rows") for p in parts]
    counted = all(isinstance(n, int) and n >= 0 for n in rows)
    if counted and doc.get("row_count") is not None and doc["row_count"] != sum(rows):
        raise ReleaseSpecError(
            f"{folder.child(MANIFEST_NAME).display!r}: the manifest's field 'row_count' says "
            f"{doc['row_count']!r} but its parts list {sum(rows)} rows: the manifest was edited or "
            "is corrupt; read the release as it was published (or write the manifest again: "
            "iwpfast.io.parts.write_manifest)")
    if counted and isinstance(doc.get("release"), dict):
        return ManifestParts(locations, rows, doc["release"], doc.get("release_id"))
    return locations


def _has_part_metadata(loc: Location) -> bool:
    if not _is_known(loc.path):
        return False
    try:
        f = open_file(loc, 1 << 16)
        meta = parse_release_metadata(f.schema, f.path)
    except (InvalidInputError, ReleaseSpecError):
        return False
    return meta is not None and PART_KEY in meta


def write_manifest(folder, *, filesystem=None) -> dict:
    """Write (or rewrite) the manifest of a folder of parts from the parts' own metadata.

    For parts written by other tools (the Spark recipe) or to publish a release whose manifest
    was lost; checks that the parts belong together and that no index is missing, and removes
    every staging file first (``remove_temporaries``: a killed attempt's noisy copy is never
    left next to the published release)."""
    loc = resolve(folder, filesystem)
    doc = folder_manifest(loc)
    write_manifest_document(loc, doc)
    return doc


def folder_manifest(loc: Location) -> dict:
    """The manifest document of the parts in ``loc`` (checked as ``write_manifest`` says),
    after removing the staging files there; nothing is written."""
    remove_temporaries(loc)
    files = [e for e in loc.listdir() if e.name.startswith("part-")]
    if not files:
        raise InvalidInputError(f"{loc.display!r} holds no part-* file; nothing to list")
    formats = {_file_format(f.path) for f in files}
    if len(formats) > 1:
        raise InvalidInputError(
            f"{loc.display!r}: mixes file formats {sorted(formats)}; put one format per directory")
    readers = [open_file(f, 1 << 16) for f in files]
    metas = [parse_release_metadata(f.schema, f.path) for f in readers]
    if metas[0] is None or PART_KEY not in metas[0]:
        raise InvalidInputError(f"{files[0].display!r} is not a part of a multi-part release (no "
                                f"part metadata)")
    parts: list[dict] = []
    for f, m, sf in zip(files, metas, readers, strict=True):
        if m is None or PART_KEY not in m:
            raise InvalidInputError(f"{f.display!r} is not a part of a multi-part release (no "
                                    f"part metadata)")
        parts.append({"path": f.name, "index": int(m[PART_KEY]["index"]), "rows": int(sf.num_rows)})
    # the parts belong together (one release id, the same parameters): the release's metadata
    release_metadata = combine_part_metadata(metas, [f.path for f in readers],
                                             [f.num_rows for f in readers])
    indices: list[int] = sorted(p["index"] for p in parts)
    if indices != list(range(len(parts))):
        missing = sorted(set(range(max(indices) + 1)) - set(indices))
        raise ReleaseSpecError(f"{loc.display!r}: part(s) {missing} are missing; release them "
                               f"(again) before writing the manifest")
    if release_metadata is None:                 # the parts' metadata were read just above
        raise InvalidInputError(f"{loc.display!r}: the parts carry no release metadata")
    return manifest_document(metas[0][PART_KEY]["release_id"], parts, release_metadata)
