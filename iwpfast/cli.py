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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="iwpfast",
        description="Unbiased learning of linear models from local-DP releases (IWP-SGD).",
        epilog="Run 'iwpfast COMMAND --help' for the options and examples of a command.",
    )
    parser.add_argument("--version", action="version", version=f"iwpfast {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv=None) -> int:
    """Entry point of the console script; returns the exit status.  Everything it prints (results,
    warnings, progress, errors, argparse's messages) goes through ``redact_credentials``.

    A Ctrl-C (SIGINT) ends the command with status 130 and nothing published, wherever it lands
    until the command's output is published; from then on it is let pass (the command finishes
    and exits 0: its output is complete).  See ``filesystem.FINAL_OUTPUT_PUBLISHED``."""
    import signal
    import threading

    from .io.filesystem import FINAL_OUTPUT_PUBLISHED

    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Redacting(out), _Redacting(err)
    FINAL_OUTPUT_PUBLISHED.clear()

    def interrupted(signum, frame):
        if not FINAL_OUTPUT_PUBLISHED.is_set():
            raise KeyboardInterrupt

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, interrupted) if main_thread else None
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("iwpfast: interrupted", file=sys.stderr)
        return 130
    finally:
        # once the output is published, a Ctrl-C while the process exits is let pass too: as
        # SIG_IGN, which the interpreter's shutdown keeps (it resets a Python handler to the
        # default action, so a late Ctrl-C killed a finished release with -2); otherwise the
        # caller's handler comes back
        if main_thread:
            signal.signal(signal.SIGINT, signal.SIG_IGN if FINAL_OUTPUT_PUBLISHED.is_set()
                          else previous)
        from .progress import stop_logging_to_stderr

        stop_logging_to_stderr()
        sys.stdout, sys.stderr = out, err


def _main(argv) -> int:
    from .exceptions import IWPError

    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        status = handler(args)
    except IWPError as exc:
        # Our errors already say what is wrong and how to fix it: one line, no traceback.
        print(f"iwpfast: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        # the network or the storage (an unreachable S3 endpoint after its bounded retries, a
        # full disk...): one line, no traceback
        # (redacted by main's _Redacting stderr, as every line printed)
        import errno

        text = " ".join(str(exc).split())
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            fix = "free space on that file system (or raise the quota), or write elsewhere"
        elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            fix = "choose a path you can write to"
        else:
            fix = "check the path or URI, the network and the credentials"
        print(f"iwpfast: error: {text}; {fix}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("iwpfast: interrupted", file=sys.stderr)
        return 130
    return 0 if status is None else int(status)


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
