"""The progress bar of every long pass (training, release), with one meaning of ``progress=``:

- ``True`` (the default of the estimators and the CLI): a bar on stderr **when stderr is a
  terminal**; otherwise (batch jobs, pipes, CI) progress lines through the ``logging`` module
  (logger ``iwpfast.progress``, level INFO: rows, rows/s and the ETA every ``LOG_INTERVAL_S``
  seconds, and a last line at the end), shown wherever the job's logging configuration sends
  INFO records, nowhere by default;
- ``False``: never;
- ``"force"``: always, even when stderr is not a terminal.

``None`` is read as ``True`` (older releases used it for "on a terminal").  tqdm is imported only
when a bar is shown; a disabled bar is a no-op object with the same ``update``/``close``.

    >>> bar = progress_bar(False, total=10)
    >>> bar.update(5); bar.close()
"""
from __future__ import annotations

import logging
import sys
import time

__all__ = ["progress_bar", "shows_progress", "LOG_INTERVAL_S"]

#: seconds between two progress lines logged when stderr is not a terminal
LOG_INTERVAL_S = 5.0

PROGRESS_CHOICES = (True, False, "force", None)


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

    def _log(self, now: float, final: bool) -> None:
        if not self.logger.isEnabledFor(logging.INFO):
            return
        rate = (self.n - self.first) / max(now - self.started, 1e-9)
        text = f"{self.desc}: {self.n:,} {self.unit}"
        if self.total:
            text += f" of {self.total:,} ({100.0 * self.n / self.total:.1f}%)"
        text += (f", {rate / 1e6:.3g} M rows/s" if self.unit == "rows"
                 else f", {rate:.3g} {self.unit}/s")
        if final:
            text += f", done in {now - self.started:.1f} s"
        elif self.total and rate > 0:
            text += f", ETA {max(self.total - self.n, 0) / rate:.0f} s"
        self.logger.info(text)

    def close(self) -> None:
        if self.n > self.first:
            self._log(time.monotonic(), final=True)
            self.first = self.n


def _on_terminal() -> bool:
    stream = sys.stderr
    return bool(hasattr(stream, "isatty") and stream.isatty())


def shows_progress(progress) -> bool:
    """Whether ``progress`` shows a bar here and now (see the module docstring)."""
    if progress not in PROGRESS_CHOICES:
        raise ValueError(f"progress={progress!r}; use True (a bar on a terminal), False (never) or "
                         "'force' (always)")
    if progress is False:
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
