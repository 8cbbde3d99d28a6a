"""Where data lives: local paths, URIs of any pyarrow filesystem, fsspec URLs and filesystems.

``resolve(target, filesystem=None)`` turns what a user wrote into a ``Location``: a pyarrow
filesystem and a path on it, plus the text to show in messages.

- a plain path (``"data/release.parquet"``) or a ``file://`` URI: the local disk, read through the
  operating system (memory maps and all the local fast paths stay as they are);
- a URI that ``pyarrow.fs.FileSystem.from_uri`` understands: ``s3://``, ``gs://``/``gcs://``,
  ``abfs://``, ``hdfs://``..., with its query options (``s3://bucket/key?endpoint_override=
  HOST:PORT&scheme=http&region=...``);
- any other URL that fsspec knows (``memory://``, ``az://``, ``http://``...) when fsspec is
  installed (``pip install iwpfast[fsspec]``), wrapped into a pyarrow filesystem;
- an explicit ``filesystem=`` (a ``pyarrow.fs.FileSystem`` or an fsspec ``AbstractFileSystem``,
  wrapped) with a path on it.

Object stores have no directories and no atomic rename: see ``AtomicArrowWriter`` and
``write_bytes_atomic`` for how outputs are published there (a temporary key, then a move).
"""
from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from ..exceptions import InvalidInputError, ServiceUnavailableError

_GLOB_CHARS = "*?["
#: set the moment a command's final output is published (a single-file release renamed into
#: place, a multi-part release's manifest written, a model saved): from then on the CLI lets a
#: Ctrl-C pass, so that exit status 130 always means "nothing published" (``iwpfast.cli``)
FINAL_OUTPUT_PUBLISHED = threading.Event()
#: concurrent metadata requests (footers, part checks) of one call: an object store answers each
#: in milliseconds, so the footers of 10^4 parts read one after the other cost minutes
METADATA_THREADS = 16


def map_bounded(fn, items, threads: int | None = None) -> list:
    """``[fn(x) for x in items]`` through at most ``threads`` (default ``METADATA_THREADS``)
    threads, in order; the first failing item's exception (in item order) is raised."""
    items = list(items)
    n = min(len(items), int(threads or METADATA_THREADS))
    if n <= 1:
        return [fn(x) for x in items]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(n, thread_name_prefix="iwpfast-metadata") as pool:
        return list(pool.map(fn, items))


def map_ahead(fn, items, depth: int, name: str = "iwpfast-ahead"):
    """``fn(x) for x in items``, lazily and in order: the calls for up to ``depth`` items after
    the one handed out run in a pool of threads meanwhile (a request to an object store waits a
    round trip).  An item's exception is raised when its result is due; no reference to a
    result is kept once it is handed out; closing the generator cancels the calls not started
    and waits for those running.  Use it in ``contextlib.closing`` so that this happens when the
    caller stops."""
    from concurrent.futures import ThreadPoolExecutor

    items = list(items)
    pool = ThreadPoolExecutor(min(depth, len(items)) or 1, thread_name_prefix=name)
    try:
        futures: list = [pool.submit(fn, x) for x in items[:depth]]
        for k in range(len(items)):
            result = futures[k].result()
            futures[k] = None        # the pool keeps no reference to a consumed result
            if k + depth < len(items):
                futures.append(pool.submit(fn, items[k + depth]))
            yield result
            del result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True)
class Location:
    """A path on a filesystem.  ``fs`` is None for the local disk (``path`` is then an OS path)."""

    #: a pyarrow.fs.FileSystem (pyarrow has no type stubs: Any), or None for the local disk
    fs: Any
    path: str
    #: what to call it in messages (the user's URI, or ``scheme://path``)
    display: str
    #: the user wrote a trailing separator: a folder / prefix was meant
    trailing_slash: bool = False

    @property
    def local(self) -> bool:
        return self.fs is None

    def child(self, name: str) -> Location:
        if self.local:
            path = os.path.join(self.path, name)
            return Location(None, path, path)
        path = f"{self.path.rstrip('/')}/{name}"
        return Location(self.fs, path, _display(self.fs, path))

    def parent(self) -> Location:
        if self.local:
            parent = os.path.dirname(self.path) or "."
            return Location(None, parent, parent)
        parent = posixpath.dirname(self.path.rstrip("/"))
        return Location(self.fs, parent, _display(self.fs, parent))

    @property
    def name(self) -> str:
        return os.path.basename(self.path) if self.local else posixpath.basename(self.path.rstrip("/"))

    # ---- queries -------------------------------------------------------------------------------
    def kind(self) -> str:
        """"file", "dir" or "missing" (a prefix with objects under it counts as "dir")."""
        if self.local:
            if os.path.isdir(self.path):
                return "dir"
            return "file" if os.path.exists(self.path) else "missing"
        import pyarrow.fs as pafs

        info = self.fs.get_file_info(self.path)
        if info.type == pafs.FileType.File:
            return "file"
        if info.type == pafs.FileType.Directory:
            return "dir"
        return "missing"

    def exists(self) -> bool:
        return self.kind() != "missing"

    def listdir(self) -> list[Location]:
        """Files directly inside this folder / prefix, sorted by name."""
        if self.local:
            return [self.child(n) for n in sorted(os.listdir(self.path))
                    if os.path.isfile(os.path.join(self.path, n))]
        import pyarrow.fs as pafs

        infos = self.fs.get_file_info(pafs.FileSelector(self.path.rstrip("/"), recursive=False,
                                                        allow_not_found=True))
        return sorted((Location(self.fs, i.path, _display(self.fs, i.path)) for i in infos
                       if i.type == pafs.FileType.File), key=lambda loc: loc.path)

    def glob(self) -> list[Location]:
        """Files matching this location's glob pattern, sorted."""
        if self.local:
            import glob as _glob

            return [Location(None, p, p) for p in sorted(_glob.glob(self.path)) if os.path.isfile(p)]
        import pyarrow.fs as pafs

        first = min(self.path.index(c) for c in _GLOB_CHARS if c in self.path)
        base = self.path[:first].rsplit("/", 1)[0] if "/" in self.path[:first] else ""
        recursive = "/" in self.path[first:]
        infos = self.fs.get_file_info(pafs.FileSelector(base, recursive=recursive,
                                                        allow_not_found=True))
        return sorted((Location(self.fs, i.path, _display(self.fs, i.path)) for i in infos
                       if i.type == pafs.FileType.File and fnmatch.fnmatchcase(i.path, self.path)),
                      key=lambda loc: loc.path)

    @property
    def is_glob(self) -> bool:
        return any(c in self.path for c in _GLOB_CHARS)

    # ---- bytes -----------------------------------------------------------------------------------
    def read_bytes(self, size: int | None = None) -> bytes:
        if self.local:
            with open(self.path, "rb") as fh:
                return fh.read() if size is None else fh.read(size)
        with self.fs.open_input_stream(self.path) as fh:
            return fh.read() if size is None else fh.read(size)

    def open_input_file(self):
        """A random-access pyarrow file (buffered remote reads; never memory-mapped)."""
        return self.fs.open_input_file(self.path)

    def delete(self) -> None:
        """Delete the file if it is there (no error when it is not)."""
        if self.local:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            return
        try:
            self.fs.delete_file(self.path)
        except FileNotFoundError:
            pass
        except OSError:
            if self.kind() == "file":
                raise

    def temporary_sibling(self) -> Location:
        """A staging name next to this one (``staging_name``: hidden, so no reader lists it)."""
        return self.parent().child(staging_name(self.name))

    def __str__(self) -> str:
        return self.display


# ------------------------------------------------------------------------------- staging names
#: the random part of a staging name: 12 hex digits
_STAGING_ID = re.compile(r"[0-9a-f]{12}")


def staging_name(name: str) -> str:
    """The staging (temporary) name of an output called ``name``: ``.NAME.<12 hex>.tmp``.  Hidden
    (a leading '.': iwpfast's readers, Spark, Dask and pyarrow datasets skip such names, and a
    shell glob ``*`` does not match them) and recognisable (``is_staging_of``), so that the next
    run into the same destination finds and removes what a killed run left."""
    return f".{name}.{uuid.uuid4().hex[:12]}.tmp"


def is_staging_of(name: str, candidate: str) -> bool:
    """Whether ``candidate`` is a staging name of the output ``name`` (``staging_name``, and the
    ``.tmp2`` of an IPC file rewritten with its final metadata)."""
    head = f".{name}."
    if not candidate.startswith(head):
        return False
    rest = candidate[len(head):]
    for tail in (".tmp", ".tmp2"):
        if rest.endswith(tail) and _STAGING_ID.fullmatch(rest[:-len(tail)]):
            return True
    return False


def create_private_file(path: str) -> None:
    """Create the empty file ``path`` readable and writable by its owner only (0600; it must not
    exist): a staging file holds noisy rows that must not be read before they are published.
    The writer then opens it (truncating keeps the mode).  Local disk only: an object store has
    no permissions to set (its bucket policy decides who reads a staging key)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)


def make_public_mode(path: str) -> None:
    """Give a staged file the permissions of any new file (0666 less the umask) just before it is
    published under its final name."""
    os.chmod(path, 0o666 & ~_umask())


class FolderLock:
    """An exclusive advisory lock (``flock``) on a local destination folder, held by the process
    that runs a multi-part release into it, until the release publishes or fails (or the process
    dies: the kernel drops the lock of a killed process).  So a later run that takes the lock
    knows that the files it finds there were left by a run that is no longer running (on this
    host), and removes that run's staging files even when it refuses to go on; one that cannot
    take it knows that a release is running there now.

    ``FolderLock.take(path)``: the held lock, ``BUSY`` when another process holds it, or None
    where it cannot be known (no ``fcntl``, a filesystem without ``flock``).  A pickled lock (a
    plan sent to a worker) arrives inert: the lock stays with the process that took it."""

    def __init__(self, fd: int | None):
        self.fd = fd

    @classmethod
    def take(cls, path: str):
        try:
            import fcntl
        except ImportError:                      # not POSIX
            return None
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return BUSY
        except OSError:                          # no flock here (some network filesystems)
            os.close(fd)
            return None
        return cls(fd)

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)                         # closing the descriptor drops the flock

    def __del__(self):
        self.release()

    def __reduce__(self):
        return (FolderLock, (None,))


#: what ``FolderLock.take`` returns when another process holds the folder's lock
BUSY = "busy"


def staging_leftovers(loc: Location) -> list[Location]:
    """The staging files of ``loc`` that earlier runs left next to it (a run killed mid-write):
    its own staging names only (``is_staging_of``), never another file."""
    parent = loc.parent()
    try:
        if parent.local:
            names = os.listdir(parent.path or ".")
            return [parent.child(n) for n in sorted(names) if is_staging_of(loc.name, n)]
        return [e for e in parent.listdir() if is_staging_of(loc.name, e.name)]
    except (FileNotFoundError, NotADirectoryError):
        return []


def remove_staging_leftovers(loc: Location) -> list[str]:
    """Remove what earlier runs left at ``loc``: its staging files and (S3, with boto3) the
    incomplete multipart uploads of its staging keys.  Returns the names removed."""
    removed = []
    for entry in staging_leftovers(loc):
        entry.delete()
        removed.append(entry.name)
    if not loc.local:
        parent = loc.parent()
        keys = [k for k in incomplete_uploads(parent) if is_staging_of(loc.name, k.rsplit("/", 1)[-1])]
        if keys:
            abort_uploads(parent, keys)
            removed += [k.rsplit("/", 1)[-1] + " (incomplete upload)" for k in keys]
    return removed


def _display(fs, path: str) -> str:
    scheme = getattr(fs, "type_name", "fs")
    if scheme.startswith("py::fsspec+"):
        scheme = scheme[len("py::fsspec+"):].split("+")[0].strip("()'\"") or "fsspec"
    return f"{scheme}://{path}"


#: S3 requests are bounded (a dead or unreachable endpoint ends in one error, not a hang): at
#: most S3_MAX_ATTEMPTS attempts of S3_CONNECT_TIMEOUT_S seconds to connect each (plus the
#: standard retry backoff, under a second) -- about 15 s; S3_REQUEST_TIMEOUT_S bounds a stalled
#: socket read.  A URI's own ``connect_timeout=``/``request_timeout=`` options are kept.
S3_CONNECT_TIMEOUT_S = 5.0
S3_REQUEST_TIMEOUT_S = 60.0
S3_MAX_ATTEMPTS = 3


def _bounded(fs):
    """An S3 filesystem with bounded timeouts and retries (others unchanged)."""
    if getattr(fs, "type_name", "") != "s3":
        return fs
    import pyarrow.fs as pafs

    settings = dict(fs.__reduce__()[1][0])     # the filesystem's own options (pickle form)
    if (settings.get("connect_timeout") or -1) < 0:
        settings["connect_timeout"] = S3_CONNECT_TIMEOUT_S
    if (settings.get("request_timeout") or -1) < 0:
        settings["request_timeout"] = S3_REQUEST_TIMEOUT_S
    return pafs.S3FileSystem(**settings,
                             retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=S3_MAX_ATTEMPTS))


def wrap_filesystem(filesystem):
    """A ``pyarrow.fs.FileSystem`` for ``filesystem`` (pyarrow's own, or an fsspec one wrapped)."""
    import pyarrow.fs as pafs

    if isinstance(filesystem, pafs.FileSystem):
        return filesystem
    try:
        from fsspec import AbstractFileSystem
    except ImportError:  # pragma: no cover - fsspec absent
        AbstractFileSystem = None
    if AbstractFileSystem is not None and isinstance(filesystem, AbstractFileSystem):
        return pafs.PyFileSystem(pafs.FSSpecHandler(filesystem))
    raise InvalidInputError(
        f"filesystem must be a pyarrow.fs.FileSystem or an fsspec filesystem, got "
        f"{type(filesystem).__module__}.{type(filesystem).__name__}")


def is_uri(text: str) -> bool:
    """``scheme://...`` with a scheme of two or more letters (not a Windows drive such as C:)."""
    head, sep, _ = text.partition("://")
    return bool(sep) and len(head) > 1 and head.replace("+", "").replace("-", "").replace(".", "").isalnum()


def _is_local_fs(fs) -> bool:
    import pyarrow.fs as pafs

    return isinstance(fs, pafs.LocalFileSystem)


def resolve(target, filesystem=None) -> Location:
    """The ``Location`` of ``target`` (a path or URI), on ``filesystem`` when one is given."""
    text = os.fspath(target)
    trailing = (text.split("?", 1)[0] if is_uri(text) else text).endswith(("/", os.sep))
    if filesystem is not None:
        fs = wrap_filesystem(filesystem)
        if is_uri(text):
            raise InvalidInputError(
                f"{text!r}: give either a URI or filesystem= with a path on it, not both")
        if _is_local_fs(fs):
            return Location(None, text, text, trailing)
        path = text.rstrip("/") if len(text) > 1 else text
        return Location(fs, path, _display(fs, path), trailing)
    if not is_uri(text):
        return Location(None, text, text, trailing)
    import pyarrow as pa
    import pyarrow.fs as pafs

    scheme = text.split("://", 1)[0].lower()
    body, sep, query = text.partition("?")
    # glob characters are not valid in a URI: percent-encode them (pyarrow decodes the path)
    quoted = body.replace("[", "%5B").replace("]", "%5D").replace("*", "%2A") + sep + query
    try:
        fs, path = pafs.FileSystem.from_uri(quoted)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
        fs, path = _fsspec_filesystem(text, scheme, exc)
    except OSError as exc:
        raise ServiceUnavailableError(
            f"cannot reach the filesystem of {text!r}: {' '.join(str(exc).split())}. Check the "
            f"credentials, the network, and for S3-compatible servers the query options, e.g. "
            f"?endpoint_override=HOST:PORT&scheme=http&region=REGION") from exc
    if _is_local_fs(fs):
        return Location(None, path, path, trailing)
    return Location(_bounded(fs), path.rstrip("/") or path, _redacted(text.split("?", 1)[0]),
                    trailing)


def remove_file(target) -> bool:
    """Delete the file ``target`` (a path or URI) if it is there; True when one was deleted."""
    text = os.fspath(target)
    if not is_uri(text):
        try:
            os.remove(text)
            return True
        except FileNotFoundError:
            return False
    loc = resolve(text)
    if loc.kind() != "file":
        return False
    loc.delete()
    return True


def _redacted(uri: str) -> str:
    """``uri`` without credentials written into it (``s3://KEY:SECRET@bucket/...``): the text
    shown in messages and results."""
    from ..exceptions import redact_credentials
    return redact_credentials(uri)


def _fsspec_filesystem(text: str, scheme: str, arrow_error: Exception):
    rejected = re.search(r"Unexpected query parameter in (\w+) URI: '([^']*)'", str(arrow_error))
    if rejected:
        # pyarrow knows the scheme but not the option: fsspec's advice (install s3fs) would mislead
        kind, name = rejected.groups()
        where = (" Credentials go in the environment (AWS_ACCESS_KEY_ID, "
                 "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) or the URI's user part "
                 "(KEY:SECRET@ before the bucket), never in its query." if kind == "S3" else "")
        raise InvalidInputError(
            f"{text!r}: pyarrow does not take the query parameter {name!r} in a {scheme}:// URI "
            f"({kind} URIs take options such as region, scheme and endpoint_override).{where} "
            f"Remove it, or pass filesystem=... built with it") from None
    try:
        import fsspec
        import fsspec.core
    except ImportError:
        raise InvalidInputError(
            f"{text!r}: pyarrow cannot open {scheme}:// URIs ({arrow_error}); install fsspec "
            f"(pip install iwpfast[fsspec]) and the fsspec package for {scheme}://, or pass "
            f"filesystem=...") from None
    if scheme not in fsspec.available_protocols():
        raise InvalidInputError(
            f"{text!r}: neither pyarrow ({arrow_error}) nor fsspec knows the scheme {scheme!r}; "
            f"check the URI or pass filesystem=...") from None
    try:
        fs, path = fsspec.core.url_to_fs(text)
    except (ImportError, ValueError) as exc:
        raise InvalidInputError(
            f"{text!r}: fsspec cannot open {scheme}:// ({type(exc).__name__}: {exc}); install the "
            f"package fsspec names, or pass filesystem=...") from None
    return wrap_filesystem(fs), path


def write_bytes_atomic(loc: Location, data: bytes, *, overwrite: bool = True,
                       private: bool = False) -> None:
    """Write ``data`` so that ``loc`` holds either its old content or all of ``data``.

    Local: a temporary file in the same directory, fsync'ed and renamed.  Elsewhere: a temporary
    key next to the destination, then a move (on S3 a server-side copy and a delete: readers see
    the whole object or nothing); the temporary key is deleted when anything fails (an S3 output
    stream publishes whatever it got when it is closed, even after an error:
    apache/arrow#40502).  ``private``: on a local disk the file stays owner-only (0600) once
    published (a plan's digest key, the row digests)."""
    if loc.local:
        directory = os.path.dirname(os.path.abspath(loc.path))
        tmp_path = os.path.join(directory, staging_name(os.path.basename(loc.path)))
        fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            # written owner-only (0600); the file gets the permissions of any other new file
            # (the umask's), like the release's parts next to it, only when it is published
            with os.fdopen(fd, "wb") as fh:
                try:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                except OSError as exc:
                    raise OSError(exc.errno, f"cannot write {loc.display!r}: "
                                             f"{exc.strerror or exc}") from None
            if not overwrite and os.path.exists(loc.path):
                raise InvalidInputError(f"{loc.display!r} already exists")
            if not private:
                make_public_mode(tmp_path)
            os.replace(tmp_path, loc.path)
        except BaseException:
            try:
                os.unlink(tmp_path)
            except OSError:
                pass
            raise
        return
    tmp = loc.temporary_sibling()
    try:
        with loc.fs.open_output_stream(tmp.path) as fh:
            fh.write(data)
        publish(tmp, loc, overwrite=overwrite)
    except BaseException:
        tmp.delete()
        raise


def _umask() -> int:
    """The process's umask (read from /proc where it can be: setting it to read it is racy)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def publish(tmp: Location, dest: Location, *, overwrite: bool) -> None:
    """Move a fully written temporary object to its final name (remote filesystems)."""
    if not overwrite and dest.kind() != "missing":
        # Object stores have no create-if-absent rename: this check and the move are two
        # requests, so two writers racing for one new name may both succeed (the last wins).
        raise InvalidInputError(
            f"destination {dest.display!r} appeared while writing; pass overwrite=True (CLI: "
            f"--overwrite) or choose another path")
    dest.fs.move(tmp.path, dest.path)


# ----------------------------------------------------------- incomplete S3 multipart uploads
def incomplete_uploads(folder: Location) -> list[str]:
    """Keys (``bucket/key``) of the incomplete S3 multipart uploads directly under ``folder``:
    what a writer killed in the middle of a large object leaves (invisible to listings, but kept
    and billed by the bucket).  Empty for other filesystems, or without boto3 (then a bucket
    lifecycle rule ``AbortIncompleteMultipartUpload`` is the remedy: docs/release.md)."""
    client = _s3_client(folder)
    if client is None:
        return []
    bucket, _, prefix = folder.path.partition("/")
    prefix = prefix.rstrip("/") + "/" if prefix else ""
    keys = []
    for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket,
                                                                          Prefix=prefix):
        for upload in page.get("Uploads", []):
            key = upload["Key"]
            if "/" not in key[len(prefix):]:
                keys.append(f"{bucket}/{key}")
    return sorted(set(keys))


def abort_uploads(folder: Location, keys: list[str]) -> None:
    """Abort every incomplete multipart upload of ``keys`` (``bucket/key``)."""
    client = _s3_client(folder)
    if client is None:
        return
    for full in keys:
        bucket, _, key = full.partition("/")
        for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket,
                                                                              Prefix=key):
            for upload in page.get("Uploads", []):
                if upload["Key"] == key:
                    client.abort_multipart_upload(Bucket=bucket, Key=key,
                                                  UploadId=upload["UploadId"])


def drop_empty_marker(folder: Location) -> None:
    """Delete the 0-byte ``prefix/`` marker object that pyarrow's S3 filesystem leaves when the
    last object under a prefix is deleted (it "keeps the directory"), when nothing else lies
    under the prefix: a failed release leaves nothing behind.  With boto3 only (pyarrow's own
    ``delete_dir`` would create the parent's marker in turn); elsewhere nothing to do."""
    client = _s3_client(folder)
    if client is None:
        return
    bucket, _, prefix = folder.path.rstrip("/").partition("/")
    if not prefix:
        return
    marker = prefix + "/"
    listed = client.list_objects_v2(Bucket=bucket, Prefix=marker, MaxKeys=2).get("Contents", [])
    if [(o["Key"], o["Size"]) for o in listed] == [(marker, 0)]:
        client.delete_object(Bucket=bucket, Key=marker)


def _s3_client(folder: Location):
    """A boto3 S3 client with the connection settings of ``folder``'s pyarrow S3FileSystem, or
    None (not S3, or boto3 not installed)."""
    if folder.local or getattr(folder.fs, "type_name", "") != "s3":
        return None
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        return None
    settings = folder.fs.__reduce__()[1][0]     # the filesystem's own options (pickle form)
    endpoint = settings.get("endpoint_override") or None
    if endpoint and "://" not in endpoint:
        endpoint = f"{settings.get('scheme') or 'https'}://{endpoint}"
    return boto3.client(
        "s3", endpoint_url=endpoint, region_name=settings.get("region") or None,
        aws_access_key_id=settings.get("access_key") or None,
        aws_secret_access_key=settings.get("secret_key") or None,
        aws_session_token=settings.get("session_token") or None,
        config=Config(connect_timeout=S3_CONNECT_TIMEOUT_S, read_timeout=S3_REQUEST_TIMEOUT_S,
                      retries={"max_attempts": S3_MAX_ATTEMPTS, "mode": "standard"}))
