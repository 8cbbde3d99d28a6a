"""File formats: the one place that knows the release metadata key, the file suffixes and how a
format is told from a path.

Reading (``iwpfast.io.sources``) and writing (``iwpfast.io.writer``, ``iwpfast.privacy``) both use
these, so a suffix the reader accepts is one the writer accepts, and the key the release writes is
the key the learner reads.  Pure Python (no pyarrow import).

    >>> from iwpfast.io.formats import input_format, output_format, RELEASE_METADATA_KEY
    >>> input_format("data/part-0.PARQUET"), input_format("x.csv.gz"), output_format("out.arrows")
    ('parquet', 'csv', 'ipc')
    >>> RELEASE_METADATA_KEY
    'iwpfast.release'
"""
from __future__ import annotations

import os

from ..exceptions import InvalidInputError

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
#: what the reader takes from a folder listing
DATA_SUFFIXES = PARQUET_SUFFIXES + IPC_SUFFIXES + CSV_SUFFIXES
#: formats a release can be written in, and the names accepted for them by ``format=``
OUTPUT_FORMATS = ("parquet", "ipc")
FORMAT_ALIASES = {"arrow": "ipc", "feather": "ipc"}


def _name(path) -> str:
    """The path's name without a URI query (``s3://b/k.parquet?region=x`` -> ``s3://b/k.parquet``)."""
    text = getattr(path, "path", None)             # an iwpfast.io.filesystem.Location
    text = os.fspath(path) if text is None else text
    return str(text).split("?", 1)[0]


def has_data_suffix(path) -> bool:
    """Whether ``path`` ends with a suffix of a format the reader knows."""
    return _name(path).lower().endswith(DATA_SUFFIXES)


def file_format(path) -> str | None:
    """"parquet", "ipc", "csv" from the path's suffix (case-insensitive), or None."""
    low = _name(path).lower()
    if low.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if low.endswith(IPC_SUFFIXES):
        return "ipc"
    if low.endswith(CSV_SUFFIXES):
        return "csv"
    return None


def input_format(path) -> str:
    """The format to read ``path`` as; ``InvalidInputError`` naming the known suffixes if none."""
    fmt = file_format(path)
    if fmt is None:
        raise InvalidInputError(
            f"{_name(path)!r}: unknown file type; use one of {DATA_SUFFIXES} or open the data "
            "yourself and pass a pyarrow Table/Dataset")
    return fmt


def output_format(destination, format: str | None = None) -> str:
    """"parquet" or "ipc": ``format`` (aliases 'arrow'/'feather') or the destination's suffix."""
    if format is not None:
        fmt = FORMAT_ALIASES.get(format, format)
        if fmt not in OUTPUT_FORMATS:
            raise InvalidInputError(
                f"format must be 'parquet' or 'ipc' (alias 'arrow'/'feather'), got {format!r}")
        return fmt
    detected = file_format(destination)
    if detected is not None and detected in OUTPUT_FORMATS:
        return detected
    raise InvalidInputError(
        f"cannot tell the output format of {_name(destination)!r} from its extension; name it "
        f"*.parquet or *.arrow/*.feather/*.ipc, or pass format='parquet'|'ipc' (CLI: --format)")
