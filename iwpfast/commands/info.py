"""``iwpfast info FILE``: what a file is and what it promises.

Dispatch on the file type: ``INFO_HANDLERS`` is a list of functions ``handler(path, args)`` that
return the text to print, or ``None`` when the file is not theirs; the first that answers wins.
Add a handler (e.g. for model files) by appending to the list or calling ``register_handler``.
"""
from __future__ import annotations

from . import add_subparser

EXAMPLES = """\
  iwpfast info acs_ldp.parquet          # spec, sigma, keep probability, guarantee
  iwpfast info acs_ldp.parquet --json   # the raw metadata
"""


def register(subparsers) -> None:
    p = add_subparser(
        subparsers, "info",
        help="show the privacy spec and guarantee stored in a release (or what a file is)",
        description="Print the parameters stored in an iwpfast file and what they guarantee.",
        examples=EXAMPLES,
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true", help="print the stored metadata as JSON")
    p.set_defaults(handler=run)


def file_magic(path, size: int = 8) -> bytes:
    with open(path, "rb") as f:
        return f.read(size)


def release_info(path, args) -> str | None:
    """Parquet or Arrow IPC file with ``iwpfast.release`` metadata."""
    import json

    magic = file_magic(path)
    if not (magic.startswith(b"PAR1") or magic.startswith(b"ARROW1") or magic[:4] == b"\xff\xff\xff\xff"):
        return None
    from ..io.sources import open_source
    from ..privacy import ReleaseSpec

    src = open_source(path)
    if src.release_metadata is None:
        kind = "Parquet" if magic.startswith(b"PAR1") else "Arrow IPC"
        return (f"{path}: {kind} file with {src.num_rows} rows and columns {src.schema.names}; "
                "not an iwpfast release (no 'iwpfast.release' metadata)")
    if getattr(args, "json", False):
        return json.dumps(src.release_metadata, indent=2, sort_keys=True)
    spec = ReleaseSpec.from_metadata(src.release_metadata)
    return f"{path}: iwpfast release (format version {src.release_metadata['format_version']}, " \
           f"written by iwpfast {src.release_metadata.get('library_version')})\n" + spec.describe()


INFO_HANDLERS = [release_info]


def register_handler(handler, first: bool = False) -> None:
    """Add ``handler(path, args) -> str | None`` (first=True: try it before the others)."""
    if first:
        INFO_HANDLERS.insert(0, handler)
    else:
        INFO_HANDLERS.append(handler)


def run(args) -> int:
    import os

    from ..exceptions import InvalidInputError

    path = args.file
    if not os.path.isfile(path):
        raise InvalidInputError(f"{path!r} does not exist or is not a file")
    for handler in INFO_HANDLERS:
        text = handler(path, args)
        if text is not None:
            print(text)
            return 0
    raise InvalidInputError(
        f"{path!r} is not a file iwpfast knows (an iwpfast release in Parquet/Arrow IPC)"
    )
