"""File formats: the one place that knows the release metadata key, the file suffixes and how a
format is told from a path.

Reading (``iwpfast.io.sources``) and writing (``iwpfast.io.writer``, ``iwpfast.privacy``) both use
these, so a suffix the reader accepts is one the writer accepts, and the key the release writes is
the key the learner reads.  Each format is one record (``FileFormat``: suffixes, reader, writer,
extension) of ``FILE_FORMATS``; ``register_format`` adds one.  Pure Python (no pyarrow import:
the readers and writers are imported when a file is opened).

    >>> from iwpfast.io.formats import input_format, output_format, RELEASE_METADATA_KEY
    >>> input_format("data/part-0.PARQUET"), input_format("x.csv.gz"), output_format("out.arrows")
    ('parquet', 'csv', 'ipc')
    >>> RELEASE_METADATA_KEY
    'iwpfast.release'
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..exceptions import InvalidInputError
from ..registry import check_refs, resolve

#: schema metadata key of a release's parameters (JSON); ``RELEASE_METADATA_KEY_BYTES`` is the
#: same key as pyarrow returns it in ``schema.metadata``
RELEASE_METADATA_KEY = "iwpfast.release"
RELEASE_METADATA_KEY_BYTES = RELEASE_METADATA_KEY.encode()

PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")
#: Arrow IPC: the file format (``.arrow``, ``.feather``, ``.ipc``) or the stream format
#: (``.arrows``); the reader accepts either format under any of these suffixes, the writer
#: writes the file format (random access, row counts in the footer)
IPC_SUFFIXES = (".arrow", ".feather", ".ipc", ".arrows")
CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.zst", ".tsv")


@dataclass(frozen=True)
class FileFormat:
    """One file format, the one record the reader, the writer, the multi-part release and the
    command line read (docs/extending.md "A file format").

    name:      the format's name (``format=`` of a release, ``--format`` of the command line).
    suffixes:  the lower-case suffixes a file of the format has (a folder listing keeps these).
    reader:    ``(location, batch_rows, whole=False) -> reader`` of one file (a class of
               ``iwpfast.io.format_readers``: ``schema``, ``num_rows``, ``group_rows``,
               ``located(...)``; ``whole``: a remote file read at once, where the format can).
    writer:    ``(sink, schema, compression, dictionary_columns) -> writer`` with
               ``write_batch(batch)``, ``close(metadata) -> dict | None`` (the metadata the file
               still lacks: it is then rewritten by ``rewrite``),
               ``rewrite(source, sink, metadata)`` and ``abort()`` (a failed write: the staging
               file is then removed) (``iwpfast.io.writer``); None: read only.
    extension: the suffix of a file the writer makes (a multi-part release's parts).
    aliases:   other names ``format=`` accepts for it.

    ``reader`` and ``writer`` may be named ``"package.module:attribute"`` (the built-in ones are:
    this module stays free of pyarrow); ``open_reader`` and ``open_writer`` resolve them.
    """

    name: str
    suffixes: tuple[str, ...]
    reader: Callable[..., Any] | str
    writer: Callable[..., Any] | str | None = None
    extension: str | None = None
    aliases: tuple[str, ...] = ()


#: format name -> record, in the order a path's suffix is tried
FILE_FORMATS: dict[str, FileFormat] = {}


def register_format(record: FileFormat) -> FileFormat:
    """Add a format; its name, aliases and suffixes must be new, and a reader or writer named by
    a string must be named as ``"module:attribute"``."""
    check_refs(record, ("reader", "writer"), f"file format {record.name!r}")
    taken = {n for f in FILE_FORMATS.values() for n in (f.name, *f.aliases)}
    if taken & {record.name, *record.aliases}:
        raise InvalidInputError(f"format name {record.name!r} (or an alias) is already registered")
    if any(s != s.lower() for s in record.suffixes) or set(record.suffixes) & set(data_suffixes()):
        raise InvalidInputError(f"suffixes {record.suffixes} must be lower case and new")
    FILE_FORMATS[record.name] = record
    return record


def unregister_format(name: str) -> None:
    """Remove a format (a test's toy format; the built-in ones are a contract)."""
    FILE_FORMATS.pop(name, None)


def open_reader(name: str, loc, batch_rows: int, whole: bool = False):
    """The format ``name``'s reader of one file (``iwpfast.io.format_readers.open_file``)."""
    return resolve(FILE_FORMATS[name].reader)(loc, batch_rows, whole=whole)


def open_writer(name: str, sink, schema, compression, dictionary_columns: list[str]):
    """The format ``name``'s writer into the output stream ``sink`` (``AtomicArrowWriter``)."""
    return resolve(FILE_FORMATS[name].writer)(sink, schema, compression, dictionary_columns)


def data_suffixes() -> tuple[str, ...]:
    """What the reader takes from a folder listing."""
    return tuple(s for f in FILE_FORMATS.values() for s in f.suffixes)


def output_formats() -> tuple[str, ...]:
    """The formats a release can be written in (``format=``, ``--format``)."""
    return tuple(f.name for f in FILE_FORMATS.values() if f.writer is not None)


def output_extension(fmt: str) -> str:
    """The suffix of a file written in ``fmt`` (a multi-part release's parts)."""
    extension = FILE_FORMATS[fmt].extension
    assert extension is not None, fmt       # every format with a writer names its extension
    return extension


for _format in (
    FileFormat("parquet", PARQUET_SUFFIXES, "iwpfast.io.format_readers:open_parquet",
               "iwpfast.io.writer:ParquetFileWriter", ".parquet"),
    FileFormat("ipc", IPC_SUFFIXES, "iwpfast.io.format_readers:open_ipc",
               "iwpfast.io.writer:IpcFileWriter", ".arrow", ("arrow", "feather")),
    FileFormat("csv", CSV_SUFFIXES, "iwpfast.io.format_readers:open_csv"),
):
    register_format(_format)


def _name(path) -> str:
    """The path's name without a URI query (``s3://b/k.parquet?region=x`` -> ``s3://b/k.parquet``)."""
    text = getattr(path, "path", None)             # an iwpfast.io.filesystem.Location
    text = os.fspath(path) if text is None else text
    return str(text).split("?", 1)[0]


def has_data_suffix(path) -> bool:
    """Whether ``path`` ends with a suffix of a format the reader knows."""
    return _name(path).lower().endswith(data_suffixes())


def file_format(path) -> str | None:
    """The registered format of the path's suffix ("parquet", "ipc", "csv"; case-insensitive),
    or None."""
    low = _name(path).lower()
    for record in FILE_FORMATS.values():
        if low.endswith(record.suffixes):
            return record.name
    return None


def input_format(path) -> str:
    """The format to read ``path`` as; ``InvalidInputError`` naming the known suffixes if none."""
    fmt = file_format(path)
    if fmt is None:
        raise InvalidInputError(
            f"{_name(path)!r}: unknown file type; use one of {data_suffixes()} or open the data "
            "yourself and pass a pyarrow Table/Dataset")
    return fmt


def output_format(destination, format: str | None = None) -> str:
    """A registered output format ("parquet", "ipc"): ``format`` (or an alias: 'arrow',
    'feather') or the destination's suffix."""
    writable = {n: f.name for f in FILE_FORMATS.values() if f.writer is not None
                for n in (f.name, *f.aliases)}
    if format is not None:
        fmt = writable.get(format)
        if fmt is None:
            aliases = "/".join(repr(a) for f in FILE_FORMATS.values() if f.writer is not None
                               for a in f.aliases)
            raise InvalidInputError(
                f"format must be {' or '.join(repr(f) for f in output_formats())}"
                + (f" (alias {aliases})" if aliases else "") + f", got {format!r}")
        return fmt
    detected = file_format(destination)
    if detected is not None and detected in writable:
        return detected
    suffixes = "/".join("*" + s for f in FILE_FORMATS.values() if f.writer is not None
                        for s in f.suffixes if s != ".arrows")
    raise InvalidInputError(
        f"cannot tell the output format of {_name(destination)!r} from its extension; name it "
        f"{suffixes}, or pass format={'|'.join(repr(f) for f in output_formats())} (CLI: --format)")
