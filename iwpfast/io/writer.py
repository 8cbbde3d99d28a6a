"""Atomic Parquet / Arrow IPC writing.

Batches go to a hidden staging file (``filesystem.staging_name``, created owner-only: 0600) in
the destination's directory (same file system, so the final rename is atomic; the file gets the
mode of any new file just before it); the file appears under its name only when ``commit``
succeeds.  Any exception (KeyboardInterrupt included) inside the ``with`` block removes the
staging file, so a failed or interrupted write never leaves a partial file at the destination; a
killed process's staging file is removed by the next release into the same destination.

On other filesystems (``s3://...``, any pyarrow or fsspec filesystem, see ``filesystem.py``) the
temporary file is a hidden key next to the destination, moved into place by ``commit`` (on S3 a
server-side copy then a delete: the destination key appears whole or not at all).  That is needed
because an S3 output stream publishes what it got when it is closed, even when the writer failed
(apache/arrow#40502): a failed write closes its stream on the temporary key, which is then deleted.

Schema metadata that is only known at the end (e.g. a row count) is passed to ``commit``:
Parquet stores it as footer key/value metadata (written without the embedded Arrow schema, so the
footer's key/values are the schema metadata readers see); an IPC file is rewritten once in the
rare case where the final metadata differs from the one it was opened with.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

import pyarrow as pa

from ..exceptions import InvalidInputError
from .filesystem import (
    FINAL_OUTPUT_PUBLISHED,
    Location,
    create_private_file,
    make_public_mode,
    publish,
    resolve,
    staging_name,
)
from .formats import open_writer, output_format
from .outputs import check_writable_folder, local_kind, refuse_existing

# re-exported: callers import the output format from here
__all__ = ["output_format", "check_destination", "AtomicArrowWriter", "ParquetFileWriter",
           "IpcFileWriter"]


def check_destination(destination, overwrite: bool = False, filesystem=None,
                      need_bytes: int | None = None) -> Path | Location:
    """Fail early (before any work) when the destination cannot be written: a folder that does
    not exist or cannot be written, or (``need_bytes``, where ``statvfs`` says) too little space.

    Returns the local ``Path``, or the ``Location`` of a destination on another filesystem."""
    loc = destination if isinstance(destination, Location) else resolve(destination, filesystem)
    if not loc.local:
        refuse_existing(loc.display, loc.kind(), what="destination", overwrite=overwrite,
                        example=loc.child("release.parquet").display)
        return loc
    path = Path(loc.path)
    refuse_existing(str(path), local_kind(path), what="destination", overwrite=overwrite,
                    example=str(path / "release.parquet"))
    check_writable_folder(path, what="destination", need_bytes=need_bytes)
    return path


class AtomicArrowWriter:
    """Write record batches to ``destination`` atomically.

    >>> with AtomicArrowWriter("out.parquet", schema) as w:   # doctest: +SKIP
    ...     w.write_batch(batch)
    ...     w.commit({"key": "value"})
    """

    def __init__(self, destination, schema: pa.Schema, *, format: str | None = None,
                 overwrite: bool = False, compression: str | dict | None = "snappy",
                 dictionary_columns: list[str] | None = None, filesystem=None,
                 final: bool = False, checked: bool = False, private: bool = False):
        # a local Path, or a Location on another filesystem (self.remote): each branch below uses
        # one of them, which a flag cannot tell the type checker (hence Any); same for _tmp.
        # ``checked``: ``destination`` is what check_destination returned to the caller already
        self.destination: Any = cast(Any, destination if checked else
                                     check_destination(destination, overwrite, filesystem))
        self.format = output_format(self.destination, format)
        self.overwrite = overwrite
        #: the command's final output (``filesystem.FINAL_OUTPUT_PUBLISHED`` once it is in place)
        self.final = final
        #: a part of a multi-part release: it stays owner-only (0600) under its name until the
        #: release's manifest publishes it (``io.parts.write_manifest_document``)
        self.private = private
        self.schema = schema
        # A dict {column: codec} sets Parquet compression per column (IPC: no compression).
        self.compression = None if compression in (None, "none", "uncompressed") else compression
        self.remote = isinstance(self.destination, Location)
        self._tmp: Any
        if self.remote:
            self._tmp_loc = self.destination.temporary_sibling()
            self._tmp = self._tmp_loc.path
        else:
            self._tmp = self.destination.parent / staging_name(self.destination.name)
        self._writer: Any = None               # pyarrow writer and output stream (no stubs)
        self._sink: Any = None
        self._done = False
        try:
            if not self.remote:
                # owner-only (0600) until published: the staged rows are noisy copies that
                # nobody else may read (an object store has no mode to set: its policy decides)
                create_private_file(str(self._tmp))
            self._sink = (self.destination.fs.open_output_stream(self._tmp) if self.remote
                          else pa.OSFile(str(self._tmp), "wb"))
            self._writer = open_writer(self.format, self._sink, schema, self.compression,
                                       list(dictionary_columns or []))
        except OSError as exc:  # e.g. permission denied, read-only file system
            self.abort()
            raise InvalidInputError(
                f"cannot write the destination {str(self.destination)!r}: "
                f"{' '.join(str(exc).split())}; choose a destination you can write to") from None
        except BaseException:
            self.abort()
            raise

    def write_batch(self, batch: pa.RecordBatch) -> None:
        try:
            self._writer.write_batch(batch)
        except OSError as exc:
            raise self._named(exc) from None

    def _named(self, exc: OSError) -> OSError:
        """``exc`` with the destination in its message (a full disk says which one)."""
        text = " ".join(str(exc.strerror or exc).split())
        return OSError(exc.errno, f"cannot write {str(self.destination)!r}: {text}")

    def commit(self, metadata: dict | None = None) -> Path | Location:
        """Finish the file with schema ``metadata`` (str/bytes -> str/bytes) and move it into place."""
        try:
            return self._commit(metadata)
        except OSError as exc:
            raise self._named(exc) from None

    def _commit(self, metadata: dict | None) -> Path | Location:
        metadata = {_b(k): _b(v) for k, v in (metadata or {}).items()}
        writer, self._writer = self._writer, None
        missing = writer.close(metadata)
        self._sink.close()          # the stream is ours to close (remote: uploads the rest)
        self._sink = None
        if missing is not None:
            self._rewrite(writer.rewrite, missing)
        self._publish()
        self._done = True
        return self.destination

    def _rewrite(self, rewrite, metadata: dict) -> None:
        """The closed staging file copied by ``rewrite`` (the format writer's) with the schema
        ``metadata`` it could not take at its close, then put in its place."""
        if self.remote:
            fs = self.destination.fs
            rewritten = self._tmp_loc.parent().child(self._tmp_loc.name + "2")
            try:
                with fs.open_input_file(self._tmp) as source, \
                        fs.open_output_stream(rewritten.path) as sink:
                    rewrite(source, sink, metadata)
                self._tmp_loc.delete()
                self._tmp_loc, self._tmp = rewritten, rewritten.path
            except BaseException:
                rewritten.delete()
                raise
            return

        rewritten = self._tmp.with_suffix(".tmp2")
        try:
            create_private_file(str(rewritten))
            with pa.memory_map(str(self._tmp)) as source, pa.OSFile(str(rewritten), "wb") as sink:
                rewrite(source, sink, metadata)
            os.replace(rewritten, self._tmp)
        finally:
            if rewritten.exists():
                rewritten.unlink()

    def _publish(self) -> None:
        if self.remote:
            publish(self._tmp_loc, self.destination, overwrite=self.overwrite)
            self._published()
            return
        if not self.private:
            make_public_mode(str(self._tmp))
        if self.overwrite:
            os.replace(self._tmp, self.destination)
            self._published()
            return
        # Without overwrite, a file that appeared meanwhile must not be replaced: link() fails
        # if the name exists, atomically.
        try:
            os.link(self._tmp, self.destination)
            self._published()
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
            self._published()
            return
        self._tmp.unlink()

    def _published(self) -> None:
        if self.final:
            FINAL_OUTPUT_PUBLISHED.set()

    def abort(self) -> None:
        """Close and delete the temporary file (idempotent)."""
        for closer in (self._writer, self._sink):
            if closer is not None:
                try:
                    closer.abort() if closer is self._writer else closer.close()
                except Exception:
                    pass
        self._writer = self._sink = None
        if self.remote:
            # closing the stream above published the temporary key (apache/arrow#40502): delete it
            try:
                self._tmp_loc.delete()
                from .filesystem import drop_empty_marker

                drop_empty_marker(self._tmp_loc.parent())
            except Exception:   # best effort: the write's own error is what is raised
                pass
            return
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


class ParquetFileWriter:
    """The Parquet writer of ``FILE_FORMATS["parquet"]`` (and of a Parquet stream release,
    ``io.stream_writer``): the schema metadata goes into the footer at close (written without the
    embedded Arrow schema, so the footer's key/values are the schema metadata readers see)."""

    def __init__(self, sink, schema: pa.Schema, compression, dictionary_columns: list[str]):
        import pyarrow.parquet as pq

        # Dictionary encoding is tried only where it can pay (labels): on noisy floats it is
        # wasted work.  A dict compression sets the codec per column.
        self._writer = pq.ParquetWriter(
            sink, schema.remove_metadata(), compression=compression or "none",
            use_dictionary=dictionary_columns, store_schema=False,
            # CRC32 of every page: readers (iwpfast verifies them) detect flipped bytes
            write_page_checksum=True)

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def close(self, metadata: dict) -> dict | None:
        if metadata:
            self._writer.add_key_value_metadata({_text(k): _text(v) for k, v in metadata.items()})
        self._writer.close()
        return None

    def abort(self) -> None:
        self._writer.close()

    @staticmethod
    def rewrite(source, sink, metadata: dict) -> None:
        raise AssertionError("a Parquet file takes its metadata at close")


class IpcFileWriter:
    """The Arrow IPC file-format writer of ``FILE_FORMATS["ipc"]`` (lz4/zstd or no compression):
    the schema is written first, so metadata only known at the end is added by a rewrite (rare:
    a release knows its metadata up front but for the row count of a stream)."""

    def __init__(self, sink, schema: pa.Schema, compression, dictionary_columns: list[str]):
        import pyarrow.ipc as ipc

        self.schema = schema
        codec = compression if isinstance(compression, str) else None
        options = ipc.IpcWriteOptions(compression=codec if codec in ("lz4", "zstd") else None)
        self._writer = ipc.new_file(sink, schema, options=options)

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def close(self, metadata: dict) -> dict | None:
        self._writer.close()
        current = dict(self.schema.metadata or {})
        wanted = {**current, **metadata}
        return None if wanted == current else wanted

    def abort(self) -> None:
        self._writer.close()

    @staticmethod
    def rewrite(source, sink, metadata: dict) -> None:
        import pyarrow.ipc as ipc

        reader = ipc.open_file(source)
        schema = reader.schema.with_metadata(metadata)
        with ipc.new_file(sink, schema) as writer:
            for i in range(reader.num_record_batches):
                writer.write_batch(reader.get_batch(i).replace_schema_metadata(metadata))


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _b(value) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()
