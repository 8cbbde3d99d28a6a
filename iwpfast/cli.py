"""The ``iwpfast`` command line: ``iwpfast <command> ...``.

Each command lives in its own module under ``iwpfast.commands`` exposing
``register(subparsers)`` (adds its parser with examples in the help epilog and sets
``handler=<function(args) -> int | None>`` as a default).  Add a command by appending its module
name to ``COMMANDS``.  Command modules import the heavy libraries (numba, pyarrow) inside their
handlers, so ``iwpfast --help`` stays fast.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from ._version import __version__

#: command modules, in the order they appear in ``iwpfast --help``
COMMANDS = [
    "iwpfast.commands.plan",
    "iwpfast.commands.release",
    "iwpfast.commands.info",
    "iwpfast.commands.fit",
    "iwpfast.commands.tune",
    "iwpfast.commands.evaluate",
    "iwpfast.commands.demo",
    "iwpfast.commands.experiment",
    "iwpfast.commands.bench",
    "iwpfast.commands.warmup",
]


#: the exit status of each class of failure (sysexits.h; ``exit_status`` maps an exception to
#: its class, the one place that does): shown in ``iwpfast --help`` and docs/usage.md
EXIT_STATUS_TABLE = (
    (0, "success (also a report whose reader closed the pipe early, e.g. `| head -1`: 141)"),
    (2, "usage: a bad option or parameter, or a refusal that names the option to add"),
    (65, "bad data (EX_DATAERR): a null/NaN, a value or label outside its declaration in a row, "
         "a corrupt file, release metadata or checkpoint, a fit that diverged on the data"),
    (66, "missing input (EX_NOINPUT): no such file, folder, object or glob match"),
    (69, "service unavailable (EX_UNAVAILABLE): an unreachable store, scheduler or workers"),
    (70, "internal error (EX_SOFTWARE): a bug of iwpfast; the traceback is printed"),
    (73, "cannot create output (EX_CANTCREAT): its folder is missing or a file, not writable, "
         "no space left or the file too large"),
    (74, "other input/output error (EX_IOERR)"),
    (75, "temporary failure (EX_TEMPFAIL): a timeout or a throttling store; run again later"),
    (77, "permission denied (EX_NOPERM)"),
    ("128+n", "stopped by signal n, nothing published: 130 SIGINT, 143 SIGTERM, 129 SIGHUP"),
)
#: the signals a command stops on as on Ctrl-C (exit status 128 + n, nothing published)
STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
#: commands whose output is a report on stdout (a reader that stops early ends them quietly)
REPORT_COMMANDS = frozenset({"info", "evaluate", "plan"})
#: the exit status of a report whose reader closed the pipe (128 + SIGPIPE, as a shell shows a
#: process killed by SIGPIPE)
BROKEN_PIPE_STATUS = 141


def exit_status_epilog() -> str:
    lines = ["exit status:"]
    for code, what in EXIT_STATUS_TABLE:
        lines.append(f"  {code!s:>5}  {what}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="iwpfast",
        description="Unbiased learning of linear models from local-DP releases (IWP-SGD).",
        epilog="Run 'iwpfast COMMAND --help' for the options and examples of a command.\n\n"
               + exit_status_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"iwpfast {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv=None) -> int:
    """Entry point of the console script; returns the exit status (``EXIT_STATUS_TABLE``).
    Everything it prints (results, warnings, progress, errors, argparse's messages) goes through
    ``redact_credentials``.

    SIGINT (Ctrl-C), SIGTERM (what Kubernetes, Slurm and YARN send) and SIGHUP end the command
    with status 128 + n and nothing published (staging files removed), wherever they land until
    the command's output is published; from then on they are let pass (the command finishes and
    exits 0: its output is complete).  See ``filesystem.FINAL_OUTPUT_PUBLISHED``."""
    import signal
    import threading

    from .io.filesystem import FINAL_OUTPUT_PUBLISHED

    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Redacting(out), _Redacting(err)
    FINAL_OUTPUT_PUBLISHED.clear()
    from .commands import COMMAND_LINE

    COMMAND_LINE[:] = list(sys.argv[1:] if argv is None else argv)
    signals = [getattr(signal, name) for name in STOP_SIGNALS if hasattr(signal, name)]

    def interrupted(signum, frame):
        if FINAL_OUTPUT_PUBLISHED.is_set():
            return
        term = signal.getsignal(signal.SIGTERM)
        if signum != signal.SIGTERM and callable(term) and hasattr(
                getattr(term, "__self__", None), "deliver_pending"):
            # a pass that defers SIGINT/SIGTERM to the end of its chunk and checkpoints there
            # (sgd.scan's guard) holds SIGTERM: SIGHUP goes the same way
            term(signum, frame)
            return
        from .exceptions import Interrupted

        raise Interrupted(signum)

    main_thread = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, interrupted) for sig in signals} if main_thread else {}
    try:
        return _main(argv)
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    finally:
        # once the output is published, a signal while the process exits is let pass too: as
        # SIG_IGN, which the interpreter's shutdown keeps (it resets a Python handler to the
        # default action, so a late Ctrl-C killed a finished release with -2); otherwise the
        # caller's handlers come back
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_IGN if FINAL_OUTPUT_PUBLISHED.is_set() else handler)
        from .progress import set_command, stop_logging_to_stderr

        stop_logging_to_stderr()
        set_command(None)
        sys.stdout, sys.stderr = out, err


def _interrupted(exc: BaseException) -> int:
    print("iwpfast: interrupted", file=sys.stderr)
    return exit_status(exc)


def _main(argv) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    from .progress import set_command

    set_command(args.command)
    try:
        status = handler(args)
        sys.stdout.flush()          # a closed pipe is found here, not at the interpreter's exit
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    except SystemExit as exc:
        # a pass that deferred a signal to the end of its chunk re-raises it as SystemExit(128+n)
        if isinstance(exc.code, int) and exc.code - 128 in _signal_numbers():
            return _interrupted(exc)
        raise
    except BrokenPipeError as exc:
        return _broken_pipe(args, exc)
    except Exception as exc:
        code = exit_status(exc)
        if code == 70:
            import traceback

            traceback.print_exc(file=sys.stderr)
            print(f"iwpfast: internal error ({type(exc).__name__}: {exc}); this is a bug of "
                  "iwpfast: please report it with the traceback above", file=sys.stderr)
            return code
        # our errors and the storage's say what is wrong and how to fix it: one line, no traceback
        # (redacted by main's _Redacting stderr, as every line printed)
        print(f"iwpfast: error: {error_text(exc)}", file=sys.stderr)
        return code
    return 0 if status is None else int(status)


def _signal_numbers() -> set[int]:
    import signal

    return {int(getattr(signal, name)) for name in STOP_SIGNALS if hasattr(signal, name)}


def _broken_pipe(args, exc: OSError) -> int:
    """stdout closed by its reader (``iwpfast info ... | head -1``): a report, or a command whose
    output was published already, ends quietly with status 141; anything else is an error."""
    import os

    from .io.filesystem import FINAL_OUTPUT_PUBLISHED

    try:                   # the interpreter flushes stdout at exit: into the void, not the pipe
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())       # type: ignore[union-attr]
    except (OSError, ValueError, AttributeError):
        pass
    if args.command in REPORT_COMMANDS or FINAL_OUTPUT_PUBLISHED.is_set():
        return BROKEN_PIPE_STATUS
    print(f"iwpfast: error: stdout was closed by its reader (broken pipe) before {args.command} "
          "finished", file=sys.stderr)
    return 74


#: OSError errnos of each class (names: those missing on a platform are skipped)
_ERRNO_CLASSES = {
    66: ("ENOENT", "ENOTDIR"),
    73: ("ENOSPC", "EDQUOT", "EFBIG", "EROFS"),
    77: ("EACCES", "EPERM"),
    69: ("ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EHOSTDOWN", "ENETDOWN", "ECONNRESET",
         "ECONNABORTED"),
    75: ("ETIMEDOUT", "EAGAIN", "EBUSY", "EINTR"),
}
#: words of an object store's error (pyarrow's S3/GCS errors carry no errno) and their class
_MESSAGE_CLASSES = (
    (75, ("curlcode: 28", "timed out", "timeout", "slowdown", "slow_down", "slow down", "throttl",
          "too many requests", "service unavailable", "503", "requesttimeout")),
    (69, ("couldn't connect", "could not connect", "connection refused", "curlcode: 6,",
          "curlcode: 7,", "could not resolve", "couldn't resolve", "network_connection",
          "name or service not known", "no route to host")),
)


def exit_status(exc: BaseException) -> int:
    """The exit status of a command that ended with ``exc`` (``EXIT_STATUS_TABLE``): the one
    place that maps a class of failure to its status."""
    import errno

    from . import exceptions as e

    if isinstance(exc, KeyboardInterrupt):
        return 128 + int(getattr(exc, "signum", 2))
    if isinstance(exc, SystemExit):
        return int(exc.code) if isinstance(exc.code, int) else 1
    by_class = ((e.BadDataError, 65), (e.ReleaseSpecError, 65), (e.CheckpointError, 65),
                (e.DivergenceError, 65), (e.MissingInputError, 66),
                (e.OutputNotCreatedError, 73), (e.ServiceUnavailableError, 69),
                (e.TemporaryFailureError, 75), (e.InternalError, 70), (e.IWPError, 2))
    for cls, code in by_class:
        if isinstance(exc, cls):
            return code
    if isinstance(exc, TimeoutError):
        return 75
    if isinstance(exc, ConnectionError):
        return 69
    if isinstance(exc, OSError):
        number = exc.errno
        for code, names in _ERRNO_CLASSES.items():
            if number is not None and number in {getattr(errno, n) for n in names
                                                 if hasattr(errno, n)}:
                return code
        text = str(exc).lower()
        for code, words in _MESSAGE_CLASSES:
            if any(w in text for w in words):
                return code
        import socket

        return 69 if isinstance(exc, socket.gaierror) else 74
    return 70


def error_text(exc: BaseException) -> str:
    """The one-line message of a command's error: ours as they are; the storage's (an
    ``OSError``) with the fix its class calls for."""
    from .exceptions import IWPError

    text = " ".join(str(exc).split())
    if isinstance(exc, IWPError) or not isinstance(exc, OSError):
        return text
    import errno

    code = exit_status(exc)
    if exc.errno == errno.EFBIG:
        fix = ("the file grew larger than its file system or the process's file-size limit "
               "(ulimit -f) allows: write to a file system that takes files this large, raise "
               "the limit, or write a multi-part release (a folder OUT/, with --part-rows N)")
    elif code == 73 and exc.errno == getattr(errno, "EROFS", None):
        fix = "the file system is read-only: choose a path you can write to"
    elif code == 73:
        fix = "free space on that file system (or raise the quota), or write elsewhere"
    elif code == 77:
        fix = "permission denied: choose a path you can read (input) or write (output)"
    elif code == 66:
        fix = "check the path"
    elif code == 75:
        fix = "a temporary failure of the storage or the network: run the command again later"
    elif code == 69:
        fix = "check the URI, the network (endpoint, proxy, DNS) and the credentials"
    else:
        fix = "check the path or URI, the storage and the network"
    return f"{text}; {fix}"


class _Redacting:
    """A text stream that writes through ``redact_credentials`` (line by line as written)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        from .exceptions import redact_credentials

        self._stream.write(redact_credentials(text))
        return len(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
