"""Safe outputs: never overwrite a file silently, never write onto an input.

Every file iwpfast writes (a model, a checkpoint) goes through ``check_output_path`` before any
work starts, so a refused path costs nothing, and the write itself is atomic (a temporary file
renamed into place), so an interrupted job leaves no half-written output.
"""
from __future__ import annotations

import os
from collections.abc import Iterable

from ..exceptions import InvalidInputError, OutputNotCreatedError


def source_files(source) -> list[str]:
    """The local files a source reads (empty for in-memory data and streams)."""
    return [os.fspath(p) for p in (getattr(source, "paths", None) or ())]


OVERWRITE_FLAG = "overwrite=True (CLI: --overwrite)"


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def refuse_existing(display: str, kind: str | None, *, what: str, overwrite: bool,
                    remedy: str | None = None, example: str | None = None) -> None:
    """The refusals every output shares, local or remote: a folder (or prefix) where the file is to
    go, and an existing file unless ``overwrite``.  kind: "dir", "file" or None (nothing there).
    ``remedy``: what the refusal offers besides another path (default: the overwrite flag)."""
    if kind == "dir":
        such_as = f" such as {example}" if example else ""
        raise InvalidInputError(f"the {what} path {display!r} is a folder / prefix; give a file "
                                f"name{such_as}")
    if kind == "file" and not overwrite:
        raise InvalidInputError(
            f"the {what} file {display!r} exists already; choose another path, or "
            f"{remedy or f'pass {OVERWRITE_FLAG} to replace it'}")


def check_output_path(path, *, what: str, overwrite: bool, inputs: Iterable[str] = (),
                      remedy: str | None = None, filesystem=None) -> str:
    """Refuse ``path`` if it is one of ``inputs`` (always) or exists (unless ``overwrite``).

    what: what is written there ("model", "checkpoint"), for the message.  A URI (``s3://...``)
    or a path on ``filesystem`` is checked on its filesystem."""
    path = os.fspath(path)
    from .filesystem import is_uri, resolve

    if filesystem is not None or is_uri(path):
        loc = resolve(path, filesystem)
        if not loc.local:
            refuse_existing(loc.display, loc.kind(), what=what, overwrite=overwrite, remedy=remedy)
            return path
        path = loc.path
    for item in inputs:
        if _same_file(path, item):
            raise InvalidInputError(
                f"the {what} path {path!r} is an input file of this job; writing the {what} there "
                f"would destroy the data: choose another path")
    refuse_existing(path, local_kind(path), what=what, overwrite=overwrite, remedy=remedy)
    check_writable_folder(path, what=what)
    return path


#: the least free space an output's file system must have when its size is not known (a model,
#: a checkpoint): a few of them
MIN_FREE_BYTES = 1 << 20


def check_writable_folder(path, *, what: str, need_bytes: int | None = None) -> None:
    """Refuse, before any work, a local output ``path`` whose folder does not exist, cannot be
    written, or whose file system has less free space than ``need_bytes`` (``MIN_FREE_BYTES``
    when None) as ``statvfs`` reports it.  Each error names the path and the fix."""
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        refuse_file_in_the_way(path, what=what)
        raise OutputNotCreatedError(f"the folder {parent!r} of the {what} path {path!r} does not "
                                    f"exist; create it first (mkdir -p) or choose another path")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputNotCreatedError(f"the folder {parent!r} of the {what} path {path!r} is not "
                                f"writable (permission denied or a read-only file system); "
                                f"choose a path you can write to")
    need = MIN_FREE_BYTES if need_bytes is None else max(int(need_bytes), MIN_FREE_BYTES)
    try:
        stat = os.statvfs(parent)
    except (OSError, AttributeError):     # no statvfs here: the write itself will tell
        return
    free = stat.f_bavail * stat.f_frsize
    if stat.f_blocks and free < need:
        raise OutputNotCreatedError(
            f"the file system of the {what} path {path!r} has {_size(free)} free, and the "
            f"{what} needs about {_size(need)}; free space there or choose another path")


def refuse_file_in_the_way(path, *, what: str) -> None:
    """Refuse a local output ``path`` (a file, or a folder ending in /) that goes through a
    file where a folder must be: an error that says so (not "the folder does not exist")."""
    path = os.fspath(path)
    in_the_way = _file_in_the_way(os.path.dirname(os.path.abspath(path.rstrip(os.sep) or path)))
    if in_the_way is not None:
        raise OutputNotCreatedError(
            f"the {what} path {path!r} goes through {in_the_way!r}, which is a file, not a "
            f"folder; choose another path (or move that file away)")


def _file_in_the_way(folder: str) -> str | None:
    """The nearest existing ancestor of ``folder`` (itself included) when it is not a folder (a
    file where a folder must be), else None."""
    current = folder
    while current and not os.path.exists(current):
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
    return current if current and not os.path.isdir(current) else None


def _size(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"


def local_kind(path) -> str | None:
    """"dir", "file" or None (nothing there) for a local path: ``refuse_existing``'s kind."""
    if os.path.isdir(path):
        return "dir"
    return "file" if os.path.exists(path) else None


def refuse_writing_onto_inputs(destination, source, filesystem=None, *, what: str = "release",
                               files: list | None = None) -> None:
    """Refuse a destination that is one of the source's inputs, lies inside an input folder, or
    (a folder destination) holds an input file: a release never writes onto its inputs, with or
    without overwrite.  ``source``: a path, folder, glob or URI (in-memory data: nothing to check);
    ``destination``: a path, URI or ``Location``; ``files``: the source's files when the caller
    listed them already (``io.sources.expand_source``), so that the folder is listed once."""
    from .filesystem import Location, is_uri, resolve

    if not isinstance(source, (str, os.PathLike, Location)):
        return
    if not isinstance(destination, (str, os.PathLike, Location)):
        return

    def located(target):
        if isinstance(target, Location):
            return target
        text = os.fspath(target)
        return resolve(text, None if is_uri(text) else filesystem)

    src, dest = located(source), located(destination)
    inputs = [src] if src.is_glob else [src] + (_input_files(src) if files is None else list(files))
    dest_key = _path_key(dest)
    for item in inputs:
        key = _path_key(item)
        if key[0] != dest_key[0]:
            continue
        if key == dest_key:
            raise InvalidInputError(
                f"the {what} destination {dest.display!r} is its own input {item.display!r}; "
                f"writing there would destroy the data (overwrite=True does not change that): "
                f"choose another destination")
        if _inside(dest_key[1], key[1]):
            raise InvalidInputError(
                f"the {what} destination {dest.display!r} lies inside its input folder "
                f"{item.display!r}; write the {what} outside the input: choose another destination")
        if _inside(key[1], dest_key[1]):
            raise InvalidInputError(
                f"the {what} destination {dest.display!r} holds its input {item.display!r}; a "
                f"{what} never writes into the folder of its input: choose another destination")


def _input_files(loc) -> list:
    from .sources import _expand_path

    try:
        return list(_expand_path(loc)[0])
    except InvalidInputError:       # nothing readable there: open_source says why, later
        return []


def _path_key(loc) -> tuple[str, str]:
    """(filesystem, normalized path) of a location: real paths on the local disk."""
    if loc.local:
        return "local", os.path.realpath(loc.path)
    return str(getattr(loc.fs, "type_name", "fs")), loc.path.rstrip("/")


def _inside(path: str, folder: str) -> bool:
    sep = os.sep if os.path.isabs(folder) else "/"
    return path.startswith(folder.rstrip(sep) + sep)
