"""Scaling raw feature columns into [-1, 1] from declared public ranges.

The ranges must be public (declared by the data holder from domain knowledge, e.g. age 0..99):
ranges computed from the private data leak it, so that is only possible with an explicit flag and
a ``PrivacyLeakWarning`` (:func:`ranges_from_data`).
"""
from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterable, Mapping

import numpy as np

from ..exceptions import InvalidInputError, PrivacyLeakWarning

_RANGE_RE = re.compile(r"^\s*([^=\s]+)\s*=\s*(.+?)\s*:\s*(.+?)\s*$")


def parse_ranges(text: str | Iterable[str] | Mapping | None) -> dict[str, tuple[float, float]]:
    """Parse declared ranges such as ``"AGEP=0:99,SCHL=1:24"`` into ``{"AGEP": (0.0, 99.0), ...}``.

    Accepts one string (items separated by commas or spaces), an iterable of such strings, or a
    mapping ``name -> (lo, hi)`` (validated and returned as floats).
    """
    if text is None:
        return {}
    if isinstance(text, Mapping):
        return {str(k): check_range(str(k), v) for k, v in text.items()}
    items = [text] if isinstance(text, str) else list(text)
    ranges: dict[str, tuple[float, float]] = {}
    for item in items:
        for token in re.split(r"[,\s]+", str(item).strip()):
            if not token:
                continue
            match = _RANGE_RE.match(token)
            if match is None:
                raise InvalidInputError(
                    f"cannot parse range {token!r}; write NAME=LO:HI, e.g. AGEP=0:99"
                )
            name, lo, hi = match.groups()
            if name in ranges:
                raise InvalidInputError(f"range for {name!r} given twice; give each feature once")
            ranges[name] = check_range(name, (lo, hi))
    return ranges


def check_range(name: str, value) -> tuple[float, float]:
    try:
        lo, hi = value
        lo, hi = float(lo), float(hi)
    except (TypeError, ValueError):
        raise InvalidInputError(
            f"range of {name!r} must be a pair (lo, hi) of numbers, got {value!r}; e.g. {name}=0:99"
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or not lo < hi:
        raise InvalidInputError(
            f"range of {name!r} must be finite with lo < hi, got ({lo:g}, {hi:g}); e.g. {name}=0:99"
        )
    return (lo, hi)


def ranges_from_data(columns: Mapping[str, np.ndarray]) -> dict[str, tuple[float, float]]:
    """Min/max of each column (used only with an explicit opt-in): it leaks the private extremes.

    A constant column gets ``(v - 0.5, v + 0.5)`` so that its scale is finite.
    """
    warnings.warn(
        "feature ranges computed from the private data leak it (the minimum and maximum are "
        "released without noise): the release is not differentially private in the ranges; "
        "declare public ranges instead (e.g. AGEP=0:99)",
        PrivacyLeakWarning,
        stacklevel=3,
    )
    out = {}
    for name, values in columns.items():
        lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        out[name] = (lo, hi)
    return out


class RangeScaler:
    """Affine map of each declared range ``[lo, hi]`` onto ``[-1, 1]``, values outside clipped.

    Values outside the declared range are clipped to it (and counted by the caller): the range
    is part of the public spec, so a value beyond it is treated as at its edge.
    """

    def __init__(self, names: list[str], ranges: Mapping[str, tuple[float, float]]):
        missing = [n for n in names if n not in ranges]
        if missing:
            raise InvalidInputError(
                f"no declared range for feature(s) {', '.join(missing)}; give public ranges, e.g. "
                + ",".join(f"{n}=LO:HI" for n in missing)
                + " (or compute them from the data with ranges_from_data=True, which leaks privacy)"
            )
        self.names = list(names)
        self.lo = np.array([ranges[n][0] for n in names], dtype=np.float64)
        self.hi = np.array([ranges[n][1] for n in names], dtype=np.float64)
        self.mid = 0.5 * (self.lo + self.hi)
        self.half = 0.5 * (self.hi - self.lo)

    def scale_into(self, j: int, raw: np.ndarray, out: np.ndarray) -> None:
        """Write the scaled column ``j`` into ``out`` (any float dtype), clipped to [-1, 1].

        The clip also absorbs the last-ulp rounding of the affine map, so |out| <= 1 exactly
        (the feature-clipping shortcut for bound >= sqrt(p) relies on it).
        """
        # Python-float / output-dtype scalars keep the loops in the output dtype (a NumPy float64
        # scalar would force a float64 loop plus a cast: 3x slower for float32 output).
        if raw.dtype == np.float16:
            # float16 arithmetic overflows at 65504 (range 0:200000 turned 30000 into -1) and has
            # 11 bits: scale it in float64
            raw = raw.astype(np.float64)
        np.subtract(raw, float(self.mid[j]), out=out, casting="unsafe")
        np.multiply(out, out.dtype.type(1.0 / self.half[j]), out=out)
        np.clip(out, -1.0, 1.0, out=out)

    def count_out_of_range(self, j: int, raw: np.ndarray, extremes=None) -> int:
        """Values of column ``j`` outside its range; ``extremes`` = (min, max) if already known."""
        lo, hi = self.lo[j], self.hi[j]
        if raw.size == 0:
            return 0
        vmin, vmax = extremes if extremes is not None else (raw.min(), raw.max())
        if vmin >= lo and vmax <= hi:  # two fast reductions; the count is rarely needed
            return 0
        return int(np.count_nonzero((raw < lo) | (raw > hi)))


# ---- the release's map of a raw row (before any noise) -----------------------------------------
#: the norms of a release's vector clip: "L2" (the Gaussian mechanisms), "L1" (discrete Laplace)
CLIP_NORMS = ("L2", "L1")


def clip_norm_of(spec) -> str:
    """The norm of the vector clip of the release ``spec`` (a ``ReleaseSpec``): the noise law's
    (``iwpfast.noise_registry``: "L1" for the discrete Laplace mechanism, "L2" otherwise)."""
    from ..noise_registry import law_record

    return law_record(spec.mechanism, spec.noise).norm


def clip_bound_of(spec) -> float:
    """The radius of the vector clip of the release ``spec``: its ``bound``, or infinity for a
    label-only release (every feature public: nothing is clipped but to the ranges)."""
    if spec.label_only or spec.bound is None:
        return math.inf
    return float(spec.bound)


def clip_vectors_(X: np.ndarray, bound: float, norm: str = "L2", *,
                  coords_in_unit: bool = False) -> int:
    """The release's vector clip: each row of feature-major ``X`` (p, n) scaled in place into the
    ball of radius ``bound`` in ``norm`` ("L2": ``mechanisms.clip_l2_``, aiming a hair inside;
    "L1": ``laplace.clip_l1_``); returns how many rows were scaled.  An infinite ``bound`` clips
    nothing.  Every release and every model reading raw data clips through here."""
    if norm not in CLIP_NORMS:
        raise InvalidInputError(f"clip norm must be one of {CLIP_NORMS}, got {norm!r}")
    if not math.isfinite(bound) or X.shape[0] == 0:
        return 0
    if norm == "L1":
        from .laplace import clip_l1_

        return clip_l1_(X, bound, coords_in_unit=coords_in_unit)
    from .mechanisms import clip_l2_

    return clip_l2_(X, bound, coords_in_unit=coords_in_unit)


def scale_clip_into(raw: list[np.ndarray], scaler: RangeScaler, out: np.ndarray, bound: float,
                    norm: str = "L2", clipped=None) -> int:
    """The release's map of raw numeric columns, before any noise: column ``j`` of ``raw`` scaled
    by ``scaler``'s range ``j`` onto [-1, 1] (clipped to it) into row ``j`` of the feature-major
    ``out`` (p, n; any float dtype), then the rows of the columns ``clipped`` marks (a boolean per
    column; None: all) clipped to the ``norm`` ball of ``bound`` (``clip_vectors_``).  The other
    columns (a release's public ones) are only clipped to their ranges.  Returns how many rows
    the vector clip scaled.  The release (``privatizer``) and the models' raw-input mapping
    (``map_raw_columns``) both run it."""
    for j, col in enumerate(raw):
        scaler.scale_into(j, np.asarray(col), out[j])
    if clipped is None:
        return clip_vectors_(out, bound, norm, coords_in_unit=True)
    rows = np.flatnonzero(np.asarray(clipped, dtype=bool))
    if not rows.size or not math.isfinite(bound):
        return 0
    if rows.size == out.shape[0]:
        return clip_vectors_(out, bound, norm, coords_in_unit=True)
    block = out[rows]
    count = clip_vectors_(block, bound, norm, coords_in_unit=True)
    if count:
        out[rows] = block
    return count


def map_raw_columns(cols: list[np.ndarray], names: list[str], ranges: Mapping[str, tuple[float, float]],
                    bound: float, norm: str = "L2", clipped=None) -> list[np.ndarray]:
    """Raw numeric columns ``cols`` (named ``names``, each with its declared range in ``ranges``)
    -> the release's clean coordinates, float64: ``scale_clip_into`` (what a release does before
    adding noise).  ``bound``: the vector clip's radius (infinite: none), ``norm`` its norm (the
    release's: ``clip_norm_of``), ``clipped`` the columns it covers (None: all; a release's
    public columns are only clipped to their ranges)."""
    n = len(cols[0]) if cols else 0
    out = np.empty((len(cols), n), dtype=np.float64)
    if n:
        scale_clip_into(cols, RangeScaler(list(names), ranges), out, bound, norm, clipped)
    return list(out)
