"""Writing a release into a stream: a writable file-like object or a ``pyarrow.NativeFile``
(``io.BytesIO``, ``pa.BufferOutputStream``, ``sys.stdout.buffer``, a socket or a pipe).

A stream cannot be written atomically (nothing can be taken back once a reader has it), so what
makes a half-written stream unreadable is what the format writes last: an Arrow IPC stream ends
with its end-of-stream marker and a Parquet file with its footer, and both are written only by
``commit``.  An interrupted or failed release leaves a stream without them: a Parquet stream is
then no readable file.  Every write goes through a gate that ``abort`` shuts, because pyarrow's
Parquet writer writes its footer when it is closed or garbage-collected, whatever happened before.

An IPC stream cannot be retracted: pyarrow reads a cut stream's complete batches as a whole stream
(the end marker is optional to it), so the rows sent before a failure are readable by whoever got
them; the caller must discard them (the CLI's error says so).

The schema of an Arrow IPC stream (the release metadata) goes first, before any batch: it says the
number of rows only when it is known before the release starts (a source with a row count and
``on_invalid="error"``), else ``row_count`` is null.  Parquet takes the final metadata at the end.
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..exceptions import InvalidInputError

__all__ = ["is_stream_destination", "StreamArrowWriter", "STREAM_FORMATS"]

#: format names a stream destination takes: "ipc" (the Arrow IPC stream format) or "parquet"
STREAM_FORMATS = ("ipc", "parquet")


def is_stream_destination(destination) -> bool:
    """Whether ``destination`` is a writable stream rather than a path, URI or folder."""
    import os

    if isinstance(destination, (str, os.PathLike)):
        return False
    return isinstance(destination, pa.NativeFile) or callable(getattr(destination, "write", None))


def stream_format(format: str | None) -> str:
    """The format of a stream destination: ``format``, default "ipc" (a stream has no suffix)."""
    if format is None:
        return "ipc"
    name = {"arrow": "ipc", "arrows": "ipc", "feather": "ipc"}.get(str(format), str(format))
    if name not in STREAM_FORMATS:
        raise InvalidInputError(f"format={format!r} for a stream destination; use 'ipc' (the "
                                "Arrow IPC stream format) or 'parquet'")
    return name


class StreamArrowWriter:
    """The interface of ``AtomicArrowWriter`` (``write_batch``, ``commit``, ``abort``, a context
    manager) for a stream destination; see the module docstring for what a failure leaves."""

    def __init__(self, sink, schema: pa.Schema, *, format: str | None = None,
                 compression: str | dict | None = None,
                 dictionary_columns: list[str] | None = None):
        self.format = stream_format(format)
        self.schema = schema
        self.sink = sink
        self._done = False
        self._writer: Any
        codec = None if compression in (None, "none", "uncompressed") else compression
        # positions counted here (a pipe such as stdout cannot tell() them, and the Parquet
        # writer asks for them); a NativeFile's own position is where its stream starts
        if isinstance(sink, pa.NativeFile) and (sink.closed or not sink.writable()):
            raise InvalidInputError(
                f"cannot write to the destination {type(sink).__name__}: it is closed or not "
                "opened for writing; pass a writable binary file-like object or a "
                "pyarrow.NativeFile opened for writing")
        self._gate = _Counted(sink, sink.tell() if isinstance(sink, pa.NativeFile) else 0)
        sink = pa.PythonFile(self._gate, mode="w")
        try:
            if self.format == "parquet":
                from .writer import ParquetFileWriter

                # the Parquet writer of a file release (FILE_FORMATS["parquet"]): the same
                # options, the metadata in the footer at commit
                self._writer = ParquetFileWriter(sink, schema, codec,
                                                 list(dictionary_columns or []))
            else:
                options = pa.ipc.IpcWriteOptions(
                    compression=codec if isinstance(codec, str) and codec in ("lz4", "zstd")
                    else None)
                self._writer = pa.ipc.new_stream(sink, schema, options=options)
        except (OSError, pa.ArrowException, TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"cannot write to the destination {type(self.sink).__name__}: "
                f"{' '.join(str(exc).split())}; pass a writable binary file-like object or a "
                "pyarrow.NativeFile opened for writing") from None

    @property
    def destination(self) -> str:
        return f"<{type(self.sink).__name__}>"

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def commit(self, metadata: dict | None = None) -> str:
        """Finish the stream: the Parquet footer with ``metadata``, or the IPC end-of-stream
        marker (an IPC stream's metadata went out with its schema, first)."""
        if self.format == "parquet":
            self._writer.close(dict(metadata or {}))
        else:
            self._writer.close()
        flush = getattr(self.sink, "flush", None)
        if callable(flush):
            flush()
        self._done = True
        return self.destination

    def abort(self) -> None:
        """Leave the stream unfinished: no footer / end-of-stream marker is written (a Parquet
        stream is then no readable file; an IPC stream's complete batches stay readable)."""
        writer, self._writer = self._writer, None
        self._gate.shut = True
        if writer is not None and not self._done:
            try:
                # closed now, behind the shut gate: its footer (which pyarrow writes at close,
                # also from a garbage-collected writer) goes nowhere
                writer.close(None) if self.format == "parquet" else writer.close()
            except (OSError, pa.ArrowException, ValueError):
                pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None or not self._done:
            self.abort()
        return False


class _Counted:
    """A Python binary stream that counts what was written (``tell``), is never closed by the
    Arrow writers (the caller owns it), and once ``shut`` passes nothing on (an aborted
    release's footer or end marker)."""

    def __init__(self, raw, start: int = 0):
        self.raw = raw
        self.position = start
        self.closed = False
        self.shut = False

    def write(self, data) -> int:
        view = memoryview(data)
        if self.shut:
            return view.nbytes
        written = self.raw.write(view)
        if written is not None and written != view.nbytes:     # a raw stream may write less
            self.raw.write(view[written:])
        self.position += view.nbytes
        return view.nbytes

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        flush = getattr(self.raw, "flush", None)
        if callable(flush):
            flush()

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        self.flush()
        self.closed = True
