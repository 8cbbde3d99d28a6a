"""Safe outputs: never overwrite a file silently, never write onto an input.

Every file iwpfast writes (a model, a checkpoint) goes through ``check_output_path`` before any
work starts, so a refused path costs nothing, and the write itself is atomic (a temporary file
renamed into place), so an interrupted job leaves no half-written output.
"""
from __future__ import annotations

import os
from collections.abc import Iterable

from ..exceptions import InvalidInputError


def source_files(source) -> list[str]:
    """The local files a source reads (empty for in-memory data and streams)."""
    return [os.fspath(p) for p in (getattr(source, "paths", None) or ())]


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def check_output_path(path, *, what: str, overwrite: bool, inputs: Iterable[str] = (),
                      flag: str = "overwrite=True (CLI: --overwrite)", filesystem=None) -> str:
    """Refuse ``path`` if it is one of ``inputs`` (always) or exists (unless ``overwrite``).

    what: what is written there ("model", "checkpoint"), for the message.  A URI (``s3://...``)
    or a path on ``filesystem`` is checked on its filesystem."""
    path = os.fspath(path)
    from .filesystem import is_uri, resolve

    if filesystem is not None or is_uri(path):
        loc = resolve(path, filesystem)
        if not loc.local:
            kind = loc.kind()
            if kind == "dir":
                raise InvalidInputError(f"the {what} path {loc.display!r} is a folder / prefix; "
                                        f"give a file name")
            if kind == "file" and not overwrite:
                raise InvalidInputError(
                    f"the {what} file {loc.display!r} exists already; choose another path, or "
                    f"pass {flag} to replace it")
            return path
        path = loc.path
    for item in inputs:
        if _same_file(path, item):
            raise InvalidInputError(
                f"the {what} path {path!r} is an input file of this job; writing the {what} there "
                f"would destroy the data: choose another path")
    if os.path.isdir(path):
        raise InvalidInputError(f"the {what} path {path!r} is a directory; give a file name")
    if os.path.exists(path) and not overwrite:
        raise InvalidInputError(
            f"the {what} file {path!r} exists already; choose another path, or pass {flag} to "
            f"replace it")
    return path
