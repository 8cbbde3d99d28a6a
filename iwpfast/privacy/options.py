"""The release's options, resolved once: one frozen :class:`ReleaseOptions` for every release path.

The public functions (``release``, ``release_parts``, ``release_part``, ``release_batches``,
``iwpfast.distributed.release_files``) keep their keyword arguments; each builds one
``ReleaseOptions`` with :func:`release_options` (deprecated aliases resolved here, with their
warnings and errors) and hands it down.  A new option is a field here plus the code that reads it.

The spec (``ReleaseSpec``) says *what* is released and with which guarantee (it is written into the
metadata); the options say *how* this run reads, noises and writes (never written).  The column
keywords (``features``, ``label``, ``ranges``) override the spec and are applied once, by
:func:`resolve_spec`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..deprecation import renamed_keyword
from ..engines import engine_from_keywords
from ..exceptions import InvalidInputError
from .scaling import ranges_from_data as _ranges_from_data_warned
from .spec import ReleaseSpec

DEFAULT_BATCH_ROWS = 1 << 18
# engine= values of the release (iwpfast.engines; "fused" is accepted for "numba")
RELEASE_ENGINES = ("auto", "numba", "numpy")
ON_INVALID = ("error", "drop")
#: "not given" for ``label=`` (None means: release no label)
_UNSET: Any = object()


@dataclass(frozen=True)
class ReleaseOptions:
    """How one release runs (resolved: no deprecated alias, no unchecked value).

    Build it with :func:`release_options`; derive a part's options with ``dataclasses.replace``.
    """

    seed: Any = None                   # None, int, SeedSequence or NoiseKey (never written)
    overwrite: bool = False
    on_invalid: str = "error"
    format: str | None = None
    compression: Any = "auto"
    batch_rows: int = DEFAULT_BATCH_ROWS      # record_batch_rows
    threads: int | None = None
    progress: Any = False
    engine: str = "auto"               # resolved: "auto", "numba" or "numpy"
    filesystem: Any = None
    shuffle: bool = False
    #: multi-part releases: split Parquet/IPC inputs into parts of about this many rows
    max_part_rows: int | None = None
    #: multi-part releases: keep the parts an unfinished run of the same plan published, release
    #: only the missing ones, and keep the finished parts if this run fails too
    resume: bool = False
    #: multi-part releases: how often a part is tried again after a transient (I/O) error
    part_retries: int = 2
    # column overrides of the spec (applied once by resolve_spec)
    features: Any = None
    label: Any = _UNSET
    ranges: Any = None

    def __post_init__(self):
        if self.on_invalid not in ON_INVALID:
            raise InvalidInputError(f"on_invalid must be 'error' or 'drop', got {self.on_invalid!r}")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(
                self.threads, (int, np.integer)) or self.threads < 1):
            raise InvalidInputError(f"threads={self.threads!r}: give a number of noise threads >= 1 "
                                    "(CLI: --threads N), or None for min(2, cores)")

    def for_part(self, seed) -> ReleaseOptions:
        """The options of one part of a multi-part release: its own key, no progress bar, the
        part file replaced when a retried task writes it again (nothing is published before the
        manifest)."""
        return replace(self, seed=seed, overwrite=True, progress=False, shuffle=False,
                       max_part_rows=None, filesystem=None)


def release_options(*, seed=None, overwrite: bool = False, on_invalid: str = "error",
                    format: str | None = None, compression: Any = "auto",
                    record_batch_rows: int = DEFAULT_BATCH_ROWS, batch_rows: int | None = None,
                    threads: int | None = None, progress: Any = False, engine: str | None = None,
                    kernel: str | None = None, filesystem=None, shuffle: bool = False,
                    max_part_rows: int | None = None, features=None, label=_UNSET, ranges=None,
                    stacklevel: int = 4, resume: bool = False,
                    part_retries: int | None = None) -> ReleaseOptions:
    """The :class:`ReleaseOptions` of the public keywords, aliases resolved once: ``kernel=``
    (deprecated name of ``engine=``) and ``batch_rows=`` (of ``record_batch_rows=``) warn with a
    DeprecationWarning pointing at the caller of the public function (``stacklevel``), and are
    refused when they disagree with the new name."""
    engine = engine_from_keywords(engine, kernel, "kernel", default="auto", allowed=RELEASE_ENGINES,
                                  stacklevel=stacklevel)
    rows = renamed_keyword(record_batch_rows, batch_rows, new_name="record_batch_rows",
                           old_name="batch_rows", default=DEFAULT_BATCH_ROWS, stacklevel=stacklevel)
    if max_part_rows is not None and int(max_part_rows) < 1:
        raise InvalidInputError(f"max_part_rows={max_part_rows}: give a number of rows >= 1")
    if part_retries is None:
        part_retries = ReleaseOptions.part_retries
    if int(part_retries) < 0:
        raise InvalidInputError(f"part_retries={part_retries}: give 0 (no retry) or more")
    return ReleaseOptions(
        seed=seed, overwrite=bool(overwrite), on_invalid=on_invalid, format=format,
        compression=compression, batch_rows=int(rows), threads=threads, progress=progress,
        engine=engine, filesystem=filesystem, shuffle=bool(shuffle),
        max_part_rows=None if max_part_rows is None else int(max_part_rows),
        features=features, label=label, ranges=ranges, resume=bool(resume),
        part_retries=int(part_retries))


def resolve_spec(spec: ReleaseSpec, features=None, label=_UNSET, ranges=None) -> ReleaseSpec:
    """The spec with the column keywords applied (a features string split at commas; ``label=None``
    drops the label and its budget) and checked: features named, the label not a feature."""
    if not isinstance(spec, ReleaseSpec):
        raise InvalidInputError(
            f"spec must be an iwpfast.ReleaseSpec, got {type(spec).__name__}; build one with "
            "ReleaseSpec(epsilon_x=..., delta=..., bound=..., epsilon_y=..., ranges=...)"
        )
    if isinstance(features, str):
        features = [f.strip() for f in features.split(",") if f.strip()]
    spec = spec.with_columns(
        features=tuple(features) if features is not None else None,
        label=None if label is _UNSET else label,
        ranges=ranges,
    )
    if label is None and (spec.label is not None or spec.epsilon_y is not None):
        spec = replace(spec, label=None, epsilon_y=None, delta_y=None, target_range=None)
    if spec.features is None:
        raise InvalidInputError("no features named; pass features=[...] (CLI: --features) or set them "
                                "in the spec")
    if spec.label is not None and spec.label in spec.features:
        raise InvalidInputError(f"column {spec.label!r} is both a feature and the label; name it once")
    return spec


def resolve_options_spec(spec: ReleaseSpec, options: ReleaseOptions) -> ReleaseSpec:
    """:func:`resolve_spec` with the options' column overrides."""
    return resolve_spec(spec, options.features, options.label, options.ranges)


def fill_ranges_from_data(spec: ReleaseSpec, src) -> ReleaseSpec:
    """The spec with every undeclared range computed from ``src`` (``ranges_from_data``: warns,
    since such ranges are a function of the private data)."""
    need = [f for f in spec.numeric_features if f not in spec.ranges]
    need_target = spec.task == "regression" and spec.label is not None and spec.target_range is None
    if not need and not need_target:
        return spec
    if not getattr(src, "rereadable", True):
        raise InvalidInputError(
            "ranges_from_data needs a source that can be read twice (a file, Table, DataFrame or "
            "arrays), not a RecordBatchReader; declare the ranges instead"
        )
    cols = need + ([spec.label] if need_target and spec.label is not None else [])
    lo = {c: math.inf for c in cols}
    hi = {c: -math.inf for c in cols}
    import pyarrow as pa

    for batch in src.batches(columns=cols):
        for c in cols:
            t = batch.column(c).type
            if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
                    or pa.types.is_decimal(t)):
                raise InvalidInputError(
                    f"column {c!r} has type {t}: a range is for a numeric column; declare it "
                    f"categorical with its categories (categories={{{c!r}: [...]}}; CLI: "
                    f"--categories {c}=A,B,C, or --categories-from-data {c}, which leaks them)")
            v = batch.column(c).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
            v = v[np.isfinite(v)]
            if v.size:
                lo[c], hi[c] = min(lo[c], float(v.min())), max(hi[c], float(v.max()))
    for c in cols:
        if not math.isfinite(lo[c]):
            raise InvalidInputError(f"column {c!r} has no finite value to compute a range from")
    found = _ranges_from_data_warned({c: np.array([lo[c], hi[c]]) for c in cols})
    ranges = {**spec.ranges, **{c: found[c] for c in need}}
    target_range = found[spec.label] if need_target and spec.label is not None else spec.target_range
    return replace(spec, ranges=ranges, target_range=target_range)
