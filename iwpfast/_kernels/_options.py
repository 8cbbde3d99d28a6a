"""The one place where Numba compilation options are chosen (every kernel uses ``jit`` from here).

- ``nogil=True``: the driver decodes the next Arrow chunk on another thread while a kernel runs.
- caching: a second process loads the machine code from an on-disk cache instead of compiling
  (see "Where the compiled kernels are cached" below).
- ``fastmath=False``: no reassociation.  Results must not depend on how the stream is chunked, so a
  batch computed from the float64 carry buffer must give the same bits as the same rows computed in
  place; reductions are vectorized by hand (fixed lane order, see ``sgd._dot_lanes``) instead.
  No ``contract`` either: an FMA in one compiled specialization but not another changes bits.
- ``error_model="numpy"``: division by zero gives inf/nan (caught as divergence) instead of
  raising inside the kernel, and lets LLVM vectorize divisions.
- ``boundscheck=False``: the wrapper (``iwpfast.sgd.engine``) validates every shape beforehand.

Where the compiled kernels are cached
-------------------------------------
Never in the installed package: Numba's default writes ``__pycache__/*.nbi`` next to the sources,
i.e. into ``site-packages/iwpfast/_kernels``; left there by one install, those files turn a later
install's ``iwpfast`` into an empty namespace package.  The cache lives in a per-user folder,
``$IWPFAST_CACHE_DIR`` if set, else the platform's user cache folder (``~/.cache/iwpfast`` on
Linux), in a sub-folder named after a hash of *all* the sources of ``iwpfast/_kernels/`` (and the
Numba and Python versions).  Numba's own check looks at the kernel's file only, so an edit of a
helper module (``_lowlevel.py``) would otherwise load stale machine code; with the hash every edit
compiles afresh.  An unwritable folder falls back to one in the temporary directory, and if that
is unwritable too the kernels run uncached: quietly, since caching only saves time.

A regular install ships kernels compiled by its build (setup.py runs ``iwpfast warmup`` with the
cache folder set to ``iwpfast/_kernels/prebuilt/`` inside the build, so they are files of the
wheel, listed in its RECORD, removed by an uninstall).  The package folder is still never a cache:
when this module is first imported (the first kernel call of a process, never ``import iwpfast``),
``seed_from_prebuilt`` copies each prebuilt function that the user's folder lacks into it, and
Numba loads it from there.  They are keyed like the user's folder (the sources, Numba and Python),
and Numba's index keys each compiled entry by the CPU's name and features, so kernels built on
another machine are ignored and compile as before.

Several processes may compile into one cache folder at once (fits running side by side,
``iwpfast warmup --jobs``).  Numba's save of a compiled function is a read-modify-write of the
function's index (load it, pick the first unused data-file number, write both), not atomic across
processes: two processes saving different signatures of one kernel at the same moment can both pick
the same data file, and the index may then send one signature to the other's machine code.  Every
save here holds an exclusive lock on ``CACHE_FOLDER/.lock`` (``fcntl.flock``; none where
``fcntl`` is missing, i.e. on Windows), which makes it atomic; loads need none (Numba writes each
file to a temporary name and renames it).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
from pathlib import Path

import numba

JIT_OPTIONS = dict(nogil=True, fastmath=False, error_model="numpy", boundscheck=False)

CACHE_ENV = "IWPFAST_CACHE_DIR"
_KERNEL_SOURCES = Path(__file__).resolve().parent


def kernel_source_hash() -> str:
    """A hash of every source file of ``iwpfast/_kernels/`` (names and contents) and the versions
    of Numba and Python: the key of the kernel cache."""
    digest = hashlib.sha256()
    digest.update(f"numba {numba.__version__} python {sys.version_info[:3]}".encode())
    for path in sorted(_KERNEL_SOURCES.glob("*.py")):
        digest.update(path.name.encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


#: this kernel version's folder name, in the per-user cache and in an install's prebuilt kernels
#: (hashed once per process: the folder choice, the cache's source stamp and the seeding use it)
SOURCE_HASH = kernel_source_hash()
CACHE_NAME = f"kernels-{SOURCE_HASH}"


def build_record() -> dict:
    """The versions compiled kernels are for (besides the sources): what a build records next to
    its prebuilt kernels (setup.py), and what ``_prebuilt_mismatch`` compares."""
    return {"numba": numba.__version__, "python": ".".join(map(str, sys.version_info[:3]))}


def user_cache_root() -> Path:
    """The per-user cache folder: ``$IWPFAST_CACHE_DIR``, else the platform's user cache folder."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
        return base / "iwpfast" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "iwpfast"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "iwpfast"


def _writable_folder(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
        return True
    except OSError:
        return False


def _choose_cache_folder() -> Path | None:
    """The folder of this kernel version's cache, or None when no location is writable."""
    name = CACHE_NAME
    try:
        preferred = user_cache_root() / name
    except (RuntimeError, OSError):          # no home folder to expand
        preferred = None
    if preferred is not None and _writable_folder(preferred):
        return preferred
    user = os.getuid() if hasattr(os, "getuid") else (os.environ.get("USERNAME") or "user")
    fallback = Path(tempfile.gettempdir()) / f"iwpfast-cache-{user}" / name
    if _writable_folder(fallback):
        return fallback
    return None


CACHE_FOLDER = _choose_cache_folder()

#: kernels compiled when the package was built (``setup.py``'s ``build_py``, a regular install):
#: one sub-folder per kernel version, as in the per-user cache; read here, never written
PREBUILT_ROOT = _KERNEL_SOURCES / "prebuilt"


def cache_is_empty() -> bool:
    """True when no compiled kernel is cached yet for this kernel version (the next kernel call
    compiles): no cache folder, or no Numba index file in it."""
    if CACHE_FOLDER is None:
        return True
    try:
        return not any(CACHE_FOLDER.glob("*.nbi"))
    except OSError:
        return True


_ANNOUNCED = False


def announce_first_compile() -> None:
    """Say once per process, on stderr (also when it is not a terminal), that the kernels are about
    to compile because nothing is cached: the first fit of an installation is otherwise silent for
    seconds."""
    global _ANNOUNCED
    if _ANNOUNCED or os.environ.get("NUMBA_DISABLE_JIT") == "1":
        return
    _ANNOUNCED = True
    if cache_is_empty():
        where = "uncached" if CACHE_FOLDER is None else f"cached in {CACHE_FOLDER}"
        sys.stderr.write(f"iwpfast: compiling kernels, first run only ({where}){_prebuilt_mismatch()}\n")
        sys.stderr.flush()


def _prebuilt_mismatch() -> str:
    """Why an install's prebuilt kernels were not used, when it has some (else ""): the build
    records its Numba and Python versions in ``PREBUILT_ROOT/built-with.json`` (setup.py)."""
    import json

    try:
        built = json.loads((PREBUILT_ROOT / "built-with.json").read_text())
    except (OSError, ValueError):
        return ""
    here = build_record()
    differ = [f"{k} {built.get(k)} (this is {v})" for k, v in here.items() if built.get(k) != v]
    reason = ("they were built with " + " and ".join(differ) if differ
              else "they were built from other kernel sources")
    return (f"; the install's prebuilt kernels are not used: {reason}. Reinstall iwpfast "
            f"(not -e) in this environment to rebuild them")


def _make_cache_class():
    """A Numba function cache whose only locator is ``CACHE_FOLDER`` (Numba's own locators would
    fall back to the package's ``__pycache__``)."""
    from numba.core.caching import (
        CompileResultCacheImpl,
        FunctionCache,
        _CacheLocator,
        _SourceFileBackedLocatorMixin,
    )

    source_stamp = SOURCE_HASH

    class KernelCacheLocator(_SourceFileBackedLocatorMixin, _CacheLocator):
        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno

        def get_cache_path(self):
            return str(CACHE_FOLDER)

        def get_source_stamp(self):
            # the folder is keyed by the sources' content already; a stamp from the content (not
            # the file's mtime) lets two installs of the same sources share the cache
            return source_stamp

    class KernelCacheImpl(CompileResultCacheImpl):
        _locator_classes = [KernelCacheLocator]

    class KernelCache(FunctionCache):
        _impl_class = KernelCacheImpl

        def save_overload(self, sig, data):
            with save_lock():
                super().save_overload(sig, data)

    return KernelCache


@contextlib.contextmanager
def save_lock(folder: Path | None = None):
    """Hold the cache folder's exclusive lock (see "Where the compiled kernels are cached"); no
    lock without ``fcntl`` or when the lock file cannot be opened (caching only saves time)."""
    try:
        import fcntl
    except ImportError:             # Windows
        yield
        return
    folder = CACHE_FOLDER if folder is None else folder
    if folder is None:              # no cache folder
        yield
        return
    try:
        handle = open(folder / ".lock", "a")
    except OSError:
        yield
        return
    with handle:                    # closing releases the lock
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield


def seed_from_prebuilt(folder: Path | None = None, prebuilt: Path | None = None) -> list[str]:
    """Copy the install's prebuilt kernels of this kernel version into the per-user cache
    ``folder`` (default ``CACHE_FOLDER``): every function whose index the folder lacks gets the
    prebuilt index and its data files, under the folder's lock (a function already there keeps
    its own).  Returns the names of the index files copied.

    The package itself is never a cache (the module notes): a regular install builds the kernels
    into ``iwpfast/_kernels/prebuilt/`` (listed in the wheel's RECORD, so an uninstall removes
    them), and a process copies them into its user cache once, before any kernel is loaded.
    Nothing happens when they were built for another Numba or Python (another folder name) and
    Numba's own check compiles afresh where they were built for another CPU (its index keys
    each entry by the CPU name and features).  Quiet, like the cache itself: a failed copy only
    costs a compile."""
    import shutil

    folder = CACHE_FOLDER if folder is None else folder
    source = (PREBUILT_ROOT if prebuilt is None else prebuilt) / CACHE_NAME
    copied: list[str] = []
    try:
        if folder is None or not source.is_dir() or source.resolve() == folder.resolve():
            return copied
        indexes = sorted(source.glob("*.nbi"))
        if not indexes or all((folder / index.name).exists() for index in indexes):
            return copied
        with save_lock(folder):
            for index in indexes:
                if (folder / index.name).exists():
                    continue
                base = index.name[:-len(".nbi")]
                # data files first, the index last (each via a temporary name and a rename): a
                # process that reads the index finds its data files in place
                for part in [*sorted(source.glob(f"{base}.*.nbc")), index]:
                    temporary = folder / f".{part.name}.{os.getpid()}.tmp"
                    shutil.copyfile(part, temporary)
                    os.replace(temporary, folder / part.name)
                copied.append(index.name)
    except OSError:
        pass
    return copied


_CACHE_CLASS = None if CACHE_FOLDER is None else _make_cache_class()
if _CACHE_CLASS is not None and os.environ.get("NUMBA_DISABLE_JIT") != "1":
    seed_from_prebuilt()


def _cached(dispatcher):
    """Give a compiled function the project's on-disk cache (none if no folder is writable)."""
    if _CACHE_CLASS is not None and hasattr(dispatcher, "enable_caching"):  # not with NUMBA_DISABLE_JIT
        try:
            dispatcher._cache = _CACHE_CLASS(dispatcher.py_func)
        except RuntimeError:        # no locator after all (the folder vanished): run uncached
            pass
    return dispatcher


def jit(function):
    """Compile ``function`` lazily (at its first call) with the project's options."""
    return _cached(numba.njit(**JIT_OPTIONS)(function))


def jit_inline(function):
    """Like ``jit``, but inlined into its callers at the Numba IR level.

    For the small helpers of the per-batch step: a call of a compiled function that takes arrays
    increments and decrements each array's reference count (atomic operations), which costs as
    much as the arithmetic of a small batch; inlined, the refcount pruning removes them.  The
    per-batch step itself uses ``jit_forceinline`` (its IR is large: copying it costs seconds).
    """
    return _cached(numba.njit(inline="always", **JIT_OPTIONS)(function))


def jit_forceinline(function):
    """Like ``jit``, but marked ``alwaysinline`` for LLVM, for the per-batch step: typed and lowered
    once per argument types as a function of its own, then inlined by LLVM into each caller, before
    the reference-count pruning (which then removes the atomic increments and decrements of its
    array arguments, as ``jit_inline`` does).  Unlike ``jit_inline`` its Numba IR is not copied
    into the caller (Numba's IR inlining copies the callee's whole scope per block: seconds for a
    large function), which is most of a first fit's compile time saved."""
    return _cached(numba.njit(forceinline=True, **JIT_OPTIONS)(function))
