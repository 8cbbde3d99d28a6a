"""The progress bar of every long pass (training, release), with one meaning of ``progress=``:

- ``True`` (the default of the estimators and the CLI): a bar on stderr **when stderr is a
  terminal**; nothing in logs, pipes, notebooks' captured output or CI;
- ``False``: never;
- ``"force"``: always, even when stderr is not a terminal.

``None`` is read as ``True`` (older releases used it for "on a terminal").  tqdm is imported only
when a bar is shown; a disabled bar is a no-op object with the same ``update``/``close``.

    >>> bar = progress_bar(False, total=10)
    >>> bar.update(5); bar.close()
"""
from __future__ import annotations

import sys

__all__ = ["progress_bar", "shows_progress"]

PROGRESS_CHOICES = (True, False, "force", None)


class _NoBar:
    """What a disabled progress bar is: accepts updates, shows nothing."""

    def update(self, n=1) -> None:
        pass

    def close(self) -> None:
        pass


def shows_progress(progress) -> bool:
    """Whether ``progress`` shows a bar here and now (see the module docstring)."""
    if progress not in PROGRESS_CHOICES:
        raise ValueError(f"progress={progress!r}; use True (a bar on a terminal), False (never) or "
                         "'force' (always)")
    if progress is False:
        return False
    if progress == "force":
        return True
    stream = sys.stderr
    return bool(hasattr(stream, "isatty") and stream.isatty())


def progress_bar(progress, total: int | None = None, *, initial: int = 0, desc: str = "iwpfast"):
    """A tqdm bar counting rows (or a no-op bar when ``progress`` shows nothing)."""
    if not shows_progress(progress):
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, unit="rows", unit_scale=True, dynamic_ncols=True,
                mininterval=0.5, smoothing=0.05, desc=desc)
