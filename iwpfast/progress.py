"""The progress bar of every long pass (training, release), with one meaning of ``progress=``:

- ``True`` (the default of the estimators and the CLI): a bar on stderr **when stderr is a
  terminal**; otherwise (batch jobs, pipes, CI) progress lines through the ``logging`` module
  (logger ``iwpfast.progress``, level INFO: rows, rows/s and the ETA every ``LOG_INTERVAL_S``
  seconds, and a last line at the end), shown wherever the job's logging configuration sends
  INFO records, nowhere by default;
- ``False``: never;
- ``"force"``: always, even when stderr is not a terminal;
- ``"log"``: never a bar, always the progress lines through ``logging`` (a batch job's choice,
  and the CLI's ``--progress log``).

Library calls also log what they did through the ``iwpfast`` logger (INFO: a release's rows,
rows/s and destination, a fit's rows and seconds; the progress lines under ``iwpfast.progress``),
with a ``NullHandler`` so that nothing is printed unless the application configures logging
(``logging.basicConfig(level=logging.INFO)``, or ``log_to_stderr()`` as the CLI does).

The CLI's ``--progress {auto,bar,log,none}`` maps to True, "force", "log" and False
(``cli_progress``); with ``auto`` or ``log`` it sends the ``iwpfast`` records to stderr, one line
every ``--progress-every`` seconds (``LOG_INTERVAL_S``).

``None`` is read as ``True`` (older releases used it for "on a terminal").  tqdm is imported only
when a bar is shown; a disabled bar is a no-op object with the same ``update``/``close``.

    >>> bar = progress_bar(False, total=10)
    >>> bar.update(5); bar.close()
"""
from __future__ import annotations

import logging
import sys
import time

__all__ = ["progress_bar", "shows_progress", "LOG_INTERVAL_S", "logger", "log_to_stderr",
           "cli_progress", "CLI_PROGRESS", "set_command"]

#: the library's logger; its records go nowhere until the application configures logging
logger = logging.getLogger("iwpfast")
logger.addHandler(logging.NullHandler())

#: seconds between two progress lines logged when stderr is not a terminal
LOG_INTERVAL_S = 5.0
_DEFAULT_LOG_INTERVAL_S = LOG_INTERVAL_S

PROGRESS_CHOICES = (True, False, "force", "log", None)
#: the CLI command being run ("release", "fit"...; None in a library call): progress lines and
#: log records then start with "iwpfast COMMAND:" (``set_command``)
COMMAND: str | None = None


def set_command(name: str | None) -> None:
    """Name the CLI command being run (None: a library call), for the prefix of its lines."""
    global COMMAND
    COMMAND = name


def line_prefix(desc: str = "iwpfast") -> str:
    """``iwpfast COMMAND`` (plus what ``desc`` adds: "(4 shards)"), or ``iwpfast`` and ``desc``
    in a library call: what a progress line or log record starts with, before its colon."""
    rest = desc.strip()
    if rest == "iwpfast" or rest.startswith("iwpfast "):
        rest = rest[len("iwpfast"):].strip()
    if COMMAND is None:
        return f"iwpfast {rest}".strip()
    if rest == COMMAND or not rest:
        return f"iwpfast {COMMAND}"
    return f"iwpfast {COMMAND} {rest}"
#: the CLI's --progress choices -> the library's progress= values
CLI_PROGRESS = {"auto": True, "bar": "force", "log": "log", "none": False}


class _NoBar:
    """What a disabled progress bar is: accepts updates, shows nothing."""

    def update(self, n=1) -> None:
        pass

    def close(self) -> None:
        pass


class _LogProgress:
    """Progress as log records (no terminal): one INFO line every LOG_INTERVAL_S seconds."""

    def __init__(self, total: int | None, initial: int, desc: str, unit: str = "rows"):
        self.logger = logging.getLogger("iwpfast.progress")
        self.total = total
        self.desc = desc
        self.unit = unit
        self.n = self.first = int(initial)
        self.started = self.last = time.monotonic()

    def update(self, n=1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self.last >= LOG_INTERVAL_S:
            self.last = now
            self._log(now, final=False)

    def _log(self, now: float, final: bool | str) -> None:
        if not self.logger.isEnabledFor(logging.INFO):
            return
        rate = (self.n - self.first) / max(now - self.started, 1e-9)
        text = f"{line_prefix(self.desc)}: {self.n:,} {self.unit}"
        if self.total:
            text += f" of {self.total:,} ({100.0 * self.n / self.total:.1f}%)"
        text += (f", {rate / 1e6:.3g} M rows/s" if self.unit == "rows"
                 else f", {rate:.3g} {self.unit}/s")
        if final == "stopped":
            text += f", stopped after {now - self.started:.1f} s"
        elif final:
            text += f", done in {now - self.started:.1f} s"
        elif self.total and rate > 0:
            text += f", ETA {max(self.total - self.n, 0) / rate:.0f} s"
        self.logger.info(text)

    def close(self) -> None:
        if self.n > self.first:
            # closed while an exception (an error, an interrupt) passes: the pass did not finish
            stopped = sys.exc_info()[1] is not None
            self._log(time.monotonic(), final="stopped" if stopped else True)
            self.first = self.n


def _on_terminal() -> bool:
    stream = sys.stderr
    return bool(hasattr(stream, "isatty") and stream.isatty())


def shows_progress(progress) -> bool:
    """Whether ``progress`` shows a bar here and now (see the module docstring)."""
    if progress not in PROGRESS_CHOICES:
        raise ValueError(f"progress={progress!r}; use True (a bar on a terminal), False (never), "
                         "'force' (always) or 'log' (log records, never a bar)")
    if progress is False or progress == "log":
        return False
    if progress == "force":
        return True
    return _on_terminal()


def progress_bar(progress, total: int | None = None, *, initial: int = 0, desc: str = "iwpfast",
                 unit: str = "rows"):
    """A tqdm bar counting rows (or ``unit``: "parts" of a cluster's release); log records
    instead when stderr is not a terminal and ``progress`` is True; a no-op bar for
    ``progress=False``."""
    if not shows_progress(progress):
        return _NoBar() if progress is False else _LogProgress(total, initial, desc, unit)
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, unit=unit, unit_scale=unit == "rows",
                dynamic_ncols=True, mininterval=0.5, smoothing=0.05, desc=desc)


class _StderrHandler(logging.StreamHandler):
    """The handler ``log_to_stderr`` installs (recognized so that it is installed once); it
    writes to the ``sys.stderr`` of the moment (the CLI's redacting stream)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


class _Prefixed(logging.Formatter):
    """``iwpfast COMMAND: message``, once (progress lines already start with their prefix)."""

    def format(self, record) -> str:
        text = super().format(record)
        return text if text.startswith("iwpfast") else f"{line_prefix()}: {text}"


def log_to_stderr(level: int = logging.INFO) -> None:
    """Send the ``iwpfast`` records (progress lines included) to stderr as ``iwpfast: ...``
    lines (what the CLI does with ``--progress auto|log``); idempotent."""
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(_Prefixed())
        logger.addHandler(handler)
    logger.setLevel(level)
    logging.getLogger("iwpfast.progress").setLevel(logging.NOTSET)


def stop_logging_to_stderr() -> None:
    """Undo ``log_to_stderr`` (the CLI's ``main`` does, when a command ends: a process that runs
    several commands, such as a test session, keeps its own logging)."""
    global LOG_INTERVAL_S
    for handler in [h for h in logger.handlers if isinstance(h, _StderrHandler)]:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
    LOG_INTERVAL_S = _DEFAULT_LOG_INTERVAL_S


def add_progress_arguments(parser) -> None:
    """``--progress {auto,bar,log,none}``, ``--progress-every S`` and the old ``--no-progress``."""
    import argparse

    parser.add_argument(
        "--progress", choices=list(CLI_PROGRESS), default="auto",
        help="auto (default): a bar on a terminal, else log lines on stderr; bar: always a bar; "
             "log: one line every --progress-every seconds on stderr (rows, rows/s, ETA); none")
    parser.add_argument("--progress-every", type=float, default=LOG_INTERVAL_S, metavar="S",
                        help=f"seconds between two progress log lines (default {LOG_INTERVAL_S:g})")
    parser.add_argument("--no-progress", dest="progress", action="store_const", const="none",
                        help=argparse.SUPPRESS)


def cli_progress(args):
    """The library's ``progress=`` value for a command's ``--progress``, with the logging the
    choice needs set up (stderr lines for auto/log, their interval)."""
    global LOG_INTERVAL_S
    choice = getattr(args, "progress", "auto") or "auto"
    every = getattr(args, "progress_every", None)
    if every is not None:
        if not every > 0:
            from .exceptions import InvalidInputError
            raise InvalidInputError(f"--progress-every {every}: give a number of seconds > 0")
        LOG_INTERVAL_S = float(every)
    if choice == "bar" and not _on_terminal():
        # a bar redrawn with carriage returns is unreadable in a file or pipe: lines instead
        choice = "log"
    if choice in ("auto", "log"):
        log_to_stderr()
    return CLI_PROGRESS[choice]
