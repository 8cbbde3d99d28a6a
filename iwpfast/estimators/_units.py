"""One rule for units: data handed to a model is in raw units unless ``scaled=True``.

A model that knows its features' declared public ranges (fitted on a release, whose spec carries
them, or on raw data with ``fit(..., ranges=...)``) maps raw columns the way a release does:
each declared range [lo, hi] onto [-1, 1] (values outside clipped to it), then the private part of
each row clipped to the ball of the feature bound in the release's norm (L2; L1 for a discrete
Laplace release; public columns only to their ranges; none for a label-only release), by the
release's own function (``privacy.scaling.map_raw_columns``).  A model without a release (clean
data with ``ranges=``) clips in L2.  ``scaled=True`` (CLI ``--scaled``) says the data is already
in that space.  A model without ranges (fitted on arrays as given) has one space only: its
training units.

Two mistakes are caught, with a warning that names the fix (``UnitsCheck``):
- raw-unit data that looks already scaled: every value of every feature lies in [-1, 1] while
  some declared range is much wider (its half-width > ``SCALED_LOOKING_HALF_WIDTH``): scaling it
  again would squeeze it into a sliver around the range's midpoint;
- a share above ``OUT_OF_RANGE_SHARE`` of a feature's values outside its declared range (raw), or
  beyond [-1, 1] with ``scaled=True``: wrong units or wrong ranges (those values are clipped).
"""
from __future__ import annotations

import warnings

import numpy as np

from ..exceptions import InvalidInputError, UnitsWarning
from ..privacy.scaling import map_raw_columns

#: warn when more than this share of a feature's values lies outside its declared range
OUT_OF_RANGE_SHARE = 0.01
#: raw data inside [-1, 1] "looks scaled" when some declared range has a half-width above this
SCALED_LOOKING_HALF_WIDTH = 2.0


def resolve_scaled(scaled, raw) -> bool:
    """``scaled`` (new) and ``raw`` (kept from before: raw=True is scaled=False) -> scaled."""
    if raw is not None and scaled is not None and bool(raw) == bool(scaled):
        raise InvalidInputError(f"raw={raw!r} and scaled={scaled!r} contradict each other; pass "
                                "scaled=True for data already in the model's [-1, 1] space, nothing "
                                "(the default) for raw units")
    if scaled is not None:
        return bool(scaled)
    if raw is not None:
        return not bool(raw)
    return False


def scale_and_clip(cols: list[np.ndarray], lo: np.ndarray, hi: np.ndarray,
                   bound: float, private=None, norm: str = "L2") -> list[np.ndarray]:
    """Raw columns -> the release's feature space, exactly as the release maps them before its
    noise (``privacy.scaling.map_raw_columns``, the release's own code): [lo, hi] onto [-1, 1]
    (clipped), then each row clipped to the ball of radius ``bound`` in ``norm`` (the release's:
    "L2", or "L1" for a discrete Laplace release; an infinite bound clips nothing).  ``private``:
    a boolean per column, the columns the vector clip covers (a release's public columns are only
    clipped to their ranges); None: all."""
    if not cols or not len(cols[0]):
        return [np.asarray(c, dtype=np.float64) for c in cols]
    names = [str(j) for j in range(len(cols))]
    ranges = {n: (float(a), float(b)) for n, a, b in zip(names, lo, hi, strict=True)}
    return map_raw_columns([np.asarray(c) for c in cols], names, ranges, float(bound), norm,
                           private)


class UnitsCheck:
    """Streaming counts over the batches of one call; ``warn()`` once at the end."""

    def __init__(self, names: list[str], lo: np.ndarray | None, hi: np.ndarray | None,
                 scaled: bool, where: str):
        self.names = list(names)
        self.lo, self.hi = lo, hi
        self.scaled = scaled
        self.where = where
        p = len(self.names)
        self.n = 0
        self.outside = np.zeros(p, dtype=np.int64)
        self.inside_unit = np.ones(p, dtype=bool)

    def add(self, cols: list[np.ndarray]) -> None:
        lo, hi = self.lo, self.hi
        if lo is None or hi is None or not cols:
            return
        self.n += len(cols[0])
        for j, c in enumerate(cols):
            if not len(c):
                continue
            cmin, cmax = float(np.min(c)), float(np.max(c))
            if self.scaled:
                if cmin < -1.0 or cmax > 1.0:
                    self.outside[j] += int(np.count_nonzero(np.abs(c) > 1.0))
            else:
                if cmin < -1.0 or cmax > 1.0:
                    self.inside_unit[j] = False
                if cmin < lo[j] or cmax > hi[j]:
                    self.outside[j] += int(np.count_nonzero((c < lo[j]) | (c > hi[j])))

    def warn(self, stacklevel: int = 3) -> None:
        lo, hi = self.lo, self.hi
        if lo is None or hi is None or self.n == 0:
            return
        if self.scaled:
            bad = [(self.names[j], self.outside[j] / self.n) for j in range(len(self.names))
                   if self.outside[j] / self.n > OUT_OF_RANGE_SHARE]
            if bad:
                text = ", ".join(f"{name} {share:.1%}" for name, share in bad)
                warnings.warn(
                    f"{self.where}: scaled=True but values lie outside [-1, 1] (share per feature: "
                    f"{text}); is the data in raw units? Then drop scaled=True (CLI: --scaled), the "
                    "model scales raw data by its declared ranges itself.", UnitsWarning,
                    stacklevel=stacklevel)
            return
        half = 0.5 * (hi - lo)
        if self.inside_unit.all() and np.any(half > SCALED_LOOKING_HALF_WIDTH):
            wide = [f"{self.names[j]}={lo[j]:g}:{hi[j]:g}" for j in range(len(self.names))
                    if half[j] > SCALED_LOOKING_HALF_WIDTH]
            warnings.warn(
                f"{self.where}: the data look already scaled (every value in [-1, 1]) but are read as "
                f"raw units and scaled again by the declared ranges ({', '.join(wide[:4])}); if they "
                "are already scaled pass scaled=True (CLI: --scaled).", UnitsWarning,
                stacklevel=stacklevel)
            return
        outside = [(self.names[j], self.outside[j] / self.n, lo[j], hi[j])
                   for j in range(len(self.names)) if self.outside[j] / self.n > OUT_OF_RANGE_SHARE]
        if outside:
            text = ", ".join(f"{name} {share:.1%} outside {a:g}:{b:g}" for name, share, a, b in outside)
            warnings.warn(
                f"{self.where}: values outside the declared ranges ({text}); they are clipped to the "
                "range's edge. Check the units of the data and the ranges.", UnitsWarning,
                stacklevel=stacklevel)


def scaling_mapper(names: list[str], lo: np.ndarray, hi: np.ndarray, bound: float,
                   private=None, norm: str = "L2"):
    """A batch mapper (``iwpfast.io.views``) applying ``scale_and_clip`` to the named columns."""
    import pyarrow as pa

    def schema_fn(schema):
        for name in names:
            i = schema.get_field_index(name)
            schema = schema.set(i, pa.field(name, pa.float64()))
        return schema

    def batch_fn(batch):
        cols = [np.asarray(batch.column(n).to_numpy(zero_copy_only=False), dtype=np.float64)
                for n in names]
        for name, col in zip(names, scale_and_clip(cols, lo, hi, bound, private, norm), strict=True):
            i = batch.schema.get_field_index(name)
            batch = batch.set_column(i, name, pa.array(col))
        return batch

    return schema_fn, batch_fn


# ---- the target's units (regression) ---------------------------------------------------------
#: ``target_units=`` of a regressor's predict, decision_function, score, risk, evaluate_report and
#: private_risk: "target" (the default), the units of the target's declared range; "model", the
#: space the model was fitted in (a release maps the declared range [lo, hi] onto [-1, 1])
TARGET_UNITS = ("target", "model")


def check_target_units(value) -> str:
    """``value`` if it is one of ``TARGET_UNITS``, else an error that names them."""
    if isinstance(value, str) and value in TARGET_UNITS:
        return value
    raise InvalidInputError(
        f"target_units={value!r}; use 'target' (the default: the units of the target's declared "
        "range, e.g. dollars) or 'model' (the model's space, the release's [-1, 1] scale; CLI: "
        "--target-units model)")


def target_range_of(spec) -> tuple[float, float] | None:
    """The declared range of a regression release's target (the release maps it onto [-1, 1]),
    or None: no release, a classification release, or a target without a declared range."""
    if spec is None or getattr(spec, "task", None) != "regression":
        return None
    found = getattr(spec, "target_range", None)
    if found is None or getattr(spec, "label", None) is None:
        return None
    return float(found[0]), float(found[1])


def to_target_units(u: np.ndarray, target_range: tuple[float, float]) -> np.ndarray:
    """Model-space values -> the target's units: the inverse of the release's affine map of
    [lo, hi] onto [-1, 1] (``privacy.scaling.RangeScaler``), ``mid + half * u``."""
    lo, hi = target_range
    return 0.5 * (lo + hi) + 0.5 * (hi - lo) * np.asarray(u, dtype=np.float64)


def target_scale(target_range: tuple[float, float]) -> float:
    """The factor one unit of the model's space is in the target's units (half the range)."""
    return 0.5 * (target_range[1] - target_range[0])


def warn_targets_outside(y: np.ndarray, target_range: tuple[float, float], where: str,
                         stacklevel: int = 3, units: str = "target") -> None:
    """A ``UnitsWarning`` when clean targets ``y`` do not look like the units assumed: in the
    target's units, more than ``OUT_OF_RANGE_SHARE`` of them outside the declared range (the
    release clipped them to it; they are compared as given), or every one in [-1, 1] while the
    range is much wider (y in the model's space); in the model's space (``units='model'``), more
    than that share beyond [-1, 1]."""
    y = np.asarray(y, dtype=np.float64)
    if not y.size:
        return
    lo, hi = target_range
    text = f"{lo:g}:{hi:g}"
    if units == "model":
        share = float(np.count_nonzero(np.abs(y) > 1.0)) / y.size
        if share > OUT_OF_RANGE_SHARE:
            warnings.warn(
                f"{where}: target_units='model' but {share:.1%} of the targets lie outside [-1, 1] "
                f"(the release maps the declared range {text} onto it): are they in the target's "
                "units? Then drop target_units='model' (CLI: drop --target-units model).", UnitsWarning,
                stacklevel=stacklevel)
        return
    if 0.5 * (hi - lo) > SCALED_LOOKING_HALF_WIDTH and float(np.max(np.abs(y))) <= 1.0:
        warnings.warn(
            f"{where}: every target lies in [-1, 1] but the target's declared range is {text}: are "
            "they in the model's space? Then pass target_units='model' (CLI: --target-units model); "
            "by default targets and predictions are in the target's units.", UnitsWarning,
            stacklevel=stacklevel)
        return
    share = float(np.count_nonzero((y < lo) | (y > hi))) / y.size
    if share > OUT_OF_RANGE_SHARE:
        warnings.warn(
            f"{where}: {share:.1%} of the targets lie outside the declared range {text} (the release "
            "clipped the training targets to it); they are compared as given: clip them first "
            f"(np.clip(y, {lo:g}, {hi:g})) to score against what the model was trained on.",
            UnitsWarning, stacklevel=stacklevel)


def unscaled_hint(source, feats) -> str | None:
    """A sentence naming ranges=/--ranges when the first rows' features look unscaled (some
    |value| above 10, while a release's features lie within [-1, 1] plus noise)."""
    try:
        if isinstance(source, dict):
            big = {f: float(np.max(np.abs(source[f][:65536]))) for f in feats if len(source[f])}
        else:
            from ..io.sources import open_source
            batch = next(iter(open_source(source).batches(list(feats))), None)
            if batch is None:
                return None
            big = {f: float(np.max(np.abs(batch.column(f).to_numpy(zero_copy_only=False))))
                   for f in feats}
    except Exception:  # the hint is a courtesy: never hide the divergence behind another error
        return None
    large = [f"{f} up to {m:g}" for f, m in big.items() if m > 10.0]
    if not large:
        return None
    return ("The features look unscaled (" + ", ".join(large[:4]) + "): give their declared ranges "
            "so they are scaled into [-1, 1] and clipped as a release would: ranges={name: (lo, hi)} "
            "(CLI: --ranges NAME=LO:HI ...).")
