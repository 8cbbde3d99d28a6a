"""Atomic Parquet / Arrow IPC writing.

Batches go to a hidden temporary file in the destination's directory (same file system, so the
final rename is atomic); the file appears under its name only when ``commit`` succeeds.  Any
exception (KeyboardInterrupt included) inside the ``with`` block removes the temporary file, so a
failed or interrupted write never leaves a partial file at the destination.

Schema metadata that is only known at the end (e.g. a row count) is passed to ``commit``:
Parquet stores it as footer key/value metadata (written without the embedded Arrow schema, so the
footer's key/values are the schema metadata readers see); an IPC file is rewritten once in the
rare case where the final metadata differs from the one it was opened with.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pyarrow as pa

from ..exceptions import InvalidInputError

PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")
IPC_SUFFIXES = (".arrow", ".feather", ".ipc")
FORMATS = ("parquet", "ipc")


def output_format(destination, format: str | None = None) -> str:
    """"parquet" or "ipc" from ``format`` or the destination's extension."""
    if format is not None:
        fmt = {"feather": "ipc", "arrow": "ipc"}.get(format, format)
        if fmt not in FORMATS:
            raise InvalidInputError(
                f"format must be 'parquet' or 'ipc' (alias 'arrow'/'feather'), got {format!r}"
            )
        return fmt
    suffix = Path(destination).suffix.lower()
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    if suffix in IPC_SUFFIXES:
        return "ipc"
    raise InvalidInputError(
        f"cannot tell the output format of {str(destination)!r} from its extension; name it "
        f"*.parquet or *.arrow/*.feather/*.ipc, or pass format='parquet'|'ipc' (CLI: --format)"
    )


def check_destination(destination, overwrite: bool = False) -> Path:
    """Fail early (before any work) when the destination cannot be written."""
    path = Path(destination)
    if path.is_dir():
        raise InvalidInputError(f"destination {str(path)!r} is a directory; give a file name such as {path / 'release.parquet'}")
    if path.exists() and not overwrite:
        raise InvalidInputError(
            f"destination {str(path)!r} already exists; pass overwrite=True (CLI: --overwrite) "
            "or choose another path"
        )
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InvalidInputError(f"directory {str(parent)!r} of the destination does not exist; create it first")
    return path


class AtomicArrowWriter:
    """Write record batches to ``destination`` atomically.

    >>> with AtomicArrowWriter("out.parquet", schema) as w:   # doctest: +SKIP
    ...     w.write_batch(batch)
    ...     w.commit({"key": "value"})
    """

    def __init__(self, destination, schema: pa.Schema, *, format: str | None = None,
                 overwrite: bool = False, compression: str | dict | None = "snappy",
                 dictionary_columns: list[str] | None = None):
        self.destination = check_destination(destination, overwrite)
        self.format = output_format(destination, format)
        self.overwrite = overwrite
        self.schema = schema
        # A dict {column: codec} sets Parquet compression per column (IPC: no compression).
        self.compression = None if compression in (None, "none", "uncompressed") else compression
        self._tmp = self.destination.parent / f".{self.destination.name}.{uuid.uuid4().hex[:12]}.tmp"
        self._writer = None
        self._sink = None
        self._done = False
        try:
            if self.format == "parquet":
                import pyarrow.parquet as pq

                # store_schema=False: the footer key/values become the schema metadata readers see,
                # and those can still be added at close (add_key_value_metadata).  Dictionary
                # encoding is tried only where it can pay (labels): on noisy floats it is wasted work.
                self._writer = pq.ParquetWriter(
                    str(self._tmp), schema.remove_metadata(), compression=self.compression or "none",
                    use_dictionary=list(dictionary_columns or []), store_schema=False,
                )
            else:
                import pyarrow.ipc as ipc

                self._sink = pa.OSFile(str(self._tmp), "wb")
                codec = self.compression if isinstance(self.compression, str) else None
                options = ipc.IpcWriteOptions(compression=codec if codec in ("lz4", "zstd") else None)
                self._writer = ipc.new_file(self._sink, schema, options=options)
        except BaseException:
            self.abort()
            raise

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def commit(self, metadata: dict | None = None) -> Path:
        """Finish the file with schema ``metadata`` (str/bytes -> str/bytes) and move it into place."""
        metadata = {_b(k): _b(v) for k, v in (metadata or {}).items()}
        if self.format == "parquet":
            if metadata:
                self._writer.add_key_value_metadata({k.decode(): v.decode() for k, v in metadata.items()})
            self._writer.close()
            self._writer = None
        else:
            self._writer.close()
            self._writer = None
            self._sink.close()
            self._sink = None
            current = dict(self.schema.metadata or {})
            wanted = {**current, **metadata}
            if wanted != current:
                self._rewrite_ipc(wanted)
        self._publish()
        self._done = True
        return self.destination

    def _rewrite_ipc(self, metadata: dict) -> None:
        import pyarrow.ipc as ipc

        rewritten = self._tmp.with_suffix(".tmp2")
        try:
            with pa.memory_map(str(self._tmp)) as source:
                reader = ipc.open_file(source)
                schema = reader.schema.with_metadata(metadata)
                with pa.OSFile(str(rewritten), "wb") as sink, ipc.new_file(sink, schema) as writer:
                    for i in range(reader.num_record_batches):
                        writer.write_batch(reader.get_batch(i).replace_schema_metadata(metadata))
            os.replace(rewritten, self._tmp)
        finally:
            if rewritten.exists():
                rewritten.unlink()

    def _publish(self) -> None:
        if self.overwrite:
            os.replace(self._tmp, self.destination)
            return
        # Without overwrite, a file that appeared meanwhile must not be replaced: link() fails
        # if the name exists, atomically.
        try:
            os.link(self._tmp, self.destination)
        except FileExistsError:
            raise InvalidInputError(
                f"destination {str(self.destination)!r} appeared while writing; pass overwrite=True "
                "(CLI: --overwrite) or choose another path"
            ) from None
        except OSError:  # file systems without hard links
            if self.destination.exists():
                raise InvalidInputError(
                    f"destination {str(self.destination)!r} already exists; pass overwrite=True"
                ) from None
            os.replace(self._tmp, self.destination)
            return
        self._tmp.unlink()

    def abort(self) -> None:
        """Close and delete the temporary file (idempotent)."""
        for closer in (self._writer, self._sink):
            if closer is not None:
                try:
                    closer.close()
                except Exception:
                    pass
        self._writer = self._sink = None
        try:
            self._tmp.unlink()
        except FileNotFoundError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None or not self._done:
            self.abort()
        return False


def _b(value) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()
