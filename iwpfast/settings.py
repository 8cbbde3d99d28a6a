"""One home for the settings that are not estimator parameters: how 'auto' searches, which
update engine the estimators run, and how local files are read.

Nothing here is a module switch to assign to.  ``SearchOptions`` is a frozen record that the
tuning scan takes as ``options=`` (``iwpfast.sgd.tuning.tune_stream``); ``Settings`` bundles it
with the engine and the memory map; ``current()`` builds them from the defaults and the
``IWPFAST_*`` environment variables, read at each call (so a job script, a Dask worker started
by the command and a test all switch them the same way):

==============================  ===========================================================
``IWPFAST_ENGINE``              the estimators' update engine: ``numba`` (default, the fused
                                kernels) or ``numpy`` (their NumPy twin; no compilation)
``IWPFAST_MEMORY_MAP``          ``1``: read local Parquet and Arrow IPC files through a memory
                                map (less CPU; the mapped pages count in VmRSS up to the file's
                                size).  Default ``0``: buffered reads, resident memory bounded
                                by the chunk (CLI: ``--memory-map``; docs/streaming.md)
``IWPFAST_<FIELD>``             any field of ``SearchOptions`` in upper case, e.g.
                                ``IWPFAST_CROSS_VALIDATE=0``, ``IWPFAST_PRUNE_AT=0.125,0.5``
                                (an empty value: no halving rungs)
==============================  ===========================================================

    >>> SearchOptions().cross_validate
    True
    >>> current({"IWPFAST_CROSS_VALIDATE": "0", "IWPFAST_PRUNE_AT": ""}).search.prune_at
    ()
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from .exceptions import InvalidInputError

__all__ = ["SearchOptions", "Settings", "current", "current_engine", "ENV_PREFIX"]

#: the prefix of every environment variable read here
ENV_PREFIX = "IWPFAST_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class SearchOptions:
    """How 'auto' searches its grid (docs/tuning.md, "What auto does").

    prune_at:                  the shares of the training rows after which successive halving
                               prunes heads (its rungs); empty: every head trains to the end
    prune_min_rows:            a rung is taken only with at least this many validation rows
                               behind it
    halving_keep:              the share of a class's live heads a rung keeps ...
    halving_min:               ... and at least this many
    hold_validation:           hold the validation rows the training scan passes over in memory
                               (the rungs score them; the final scoring needs no second read)
    held_validation_bytes:     the most memory those held rows use (a larger hold-out is read
                               again)
    cross_validate:            small data is cross-validated (``iwpfast.sgd.crossval``) ...
    cross_validate_max_rows:   ... when it has at most this many rows (training + validation)
    cross_validate_held_bytes: the most memory the folds hold the data's columns in
    """

    prune_at: tuple[float, ...] = (1 / 32, 1 / 16, 1 / 8, 1 / 4)
    prune_min_rows: int = 8192
    halving_keep: float = 1 / 3
    halving_min: int = 2
    hold_validation: bool = True
    held_validation_bytes: int = 256 << 20
    cross_validate: bool = True
    cross_validate_max_rows: int = 400_000
    cross_validate_held_bytes: int = 256 << 20

    def on_cluster(self) -> SearchOptions:
        """The options a search whose passes run on a cluster's runner can follow
        (``iwpfast.sgd.driver.streams_on``): the shards' passes are not raced, their rows are
        not held here and not cross-validated (each fold would be a cluster job)."""
        return dataclasses.replace(self, prune_at=(), hold_validation=False, cross_validate=False)


@dataclass(frozen=True)
class Settings:
    """Everything ``current()`` resolves: the update engine, the memory map, the search."""

    engine: str = "numba"
    memory_map: bool = False
    search: SearchOptions = field(default_factory=SearchOptions)


def _parse(name: str, raw: str, default):
    """The value of environment variable ``name`` as the type of its ``default``."""
    text = raw.strip()
    try:
        if isinstance(default, bool):
            if text.lower() in _TRUE | _FALSE:
                return text.lower() in _TRUE
            raise ValueError(text)
        if isinstance(default, int):
            return int(text.replace("_", ""))
        if isinstance(default, float):
            return float(text)
        if isinstance(default, tuple):
            return tuple(float(v) for v in text.replace(",", " ").split())
    except ValueError:
        pass
    kind = ("1 or 0" if isinstance(default, bool) else
            "numbers separated by commas (empty: none)" if isinstance(default, tuple) else
            type(default).__name__)
    raise InvalidInputError(f"{name}={raw!r}; use {kind}")


def current(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings now: the defaults with the ``IWPFAST_*`` variables of ``environ`` (default:
    ``os.environ``) applied (module docstring)."""
    env = os.environ if environ is None else environ
    search = {}
    for f in dataclasses.fields(SearchOptions):
        name = ENV_PREFIX + f.name.upper()
        if name in env:
            search[f.name] = _parse(name, env[name], getattr(SearchOptions, f.name))
    memory_map = _parse(ENV_PREFIX + "MEMORY_MAP", env.get(ENV_PREFIX + "MEMORY_MAP", "0"), False)
    engine = env.get(ENV_PREFIX + "ENGINE", "numba").strip().lower() or "numba"
    from .engines import resolve_engine
    engine = resolve_engine(engine, allowed=("numba", "numpy"), parameter=ENV_PREFIX + "ENGINE")
    return Settings(engine=engine, memory_map=memory_map, search=SearchOptions(**search))


def current_engine() -> str:
    """The estimators' update engine now (``IWPFAST_ENGINE``; default "numba")."""
    return current().engine
