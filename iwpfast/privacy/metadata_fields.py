"""The release metadata's fields as a contract: the legal value of each field, checked one by one
before a spec is rebuilt from a file (``check_metadata_fields``), and the noise law's name.

A file written by another tool or an older version is read field by field against this table first,
so that a missing, null or mistyped field is one error naming it, never a traceback from deeper
down.  The fields themselves are listed in docs/internals.md "Release metadata"; ``ReleaseSpec``
(``spec.py``) writes them and checks that the stored noise matches its parameters.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from ..exceptions import ReleaseSpecError
from ..noise_registry import mechanism_choices, record_of_law

TASKS = ("classification", "regression")
#: the built-in feature mechanisms: Gaussian-type ((epsilon, delta), L2 bound) or discrete Laplace
#: (pure epsilon, L1 bound; docs/math.md "Pure epsilon"); the legal values are those of the
#: registered noise laws (``iwpfast.noise_registry.mechanism_choices``)
MECHANISMS = mechanism_choices()
FEATURE_DTYPES = ("float32", "float64")


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_pair(v) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(_is_number(x) for x in v)


def _is_noise_law(v) -> bool:
    return (isinstance(v, Mapping) and isinstance(v.get("law"), str)
            and all(v.get(k) is None or _is_number(v.get(k)) for k in ("grid", "sigma", "variance")))


# the contract's fields (docs/internals.md "Release metadata"): name -> (required, what the
# value must be, the check of a value that is there)
_METADATA_FIELDS: dict[str, tuple[bool, str, Callable[[Any], bool]]] = {
    "features": (True, "a non-empty list of column names",
                 lambda v: isinstance(v, list) and bool(v) and all(isinstance(x, str) for x in v)),
    "feature_bound": (True, "a positive number", lambda v: _is_number(v) and v > 0),
    "feature_ranges": (True, "an object {feature: [lo, hi]}",
                       lambda v: isinstance(v, Mapping) and all(_is_pair(x) for x in v.values())),
    "feature_noise_scale": (True, "a list of numbers, one sigma per feature",
                            lambda v: isinstance(v, list) and all(_is_number(x) for x in v)),
    "epsilon_x": (True, "a positive number", lambda v: _is_number(v) and v > 0),
    "delta_x": (True, "a number in [0, 1) (0: the pure-epsilon Laplace mechanism)",
                lambda v: _is_number(v) and 0 <= v < 1),
    "calibration": (True, "a string", lambda v: isinstance(v, str)),
    "library_version": (False, "a string", lambda v: isinstance(v, str)),
    "task": (False, f"one of {TASKS}", lambda v: v in TASKS),
    "label": (False, "a column name", lambda v: isinstance(v, str)),
    "ranges_from_data": (False, "true or false", lambda v: isinstance(v, bool)),
    "categories_from_data": (False, "a list of column names",
                             lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "feature_dtype": (False, f"one of {FEATURE_DTYPES}", lambda v: v in FEATURE_DTYPES),
    "epsilon_y": (False, "a positive number", lambda v: _is_number(v) and v > 0),
    "label_keep_prob": (False, "a probability", lambda v: _is_number(v) and 0 <= v <= 1),
    "label_other_prob": (False, "a probability", lambda v: _is_number(v) and 0 <= v <= 1),
    "classes": (False, "a list of class values (numbers or strings)",
                lambda v: isinstance(v, list) and all(
                    isinstance(x, str) or _is_number(x) for x in v)),
    "label_encoding": (False, "a string", lambda v: isinstance(v, str)),
    "target_bound": (False, "a positive number", lambda v: _is_number(v) and v > 0),
    "target_range": (False, "a pair [lo, hi]", _is_pair),
    "target_noise_scale": (False, "a number", _is_number),
    "delta_y": (False, "a number in (0, 1)", lambda v: _is_number(v) and 0 < v < 1),
    "guarantee": (False, "an object", lambda v: isinstance(v, Mapping)),
    "noise": (False, "an object with a string 'law' and numbers grid/sigma/variance", _is_noise_law),
    "target_noise": (False, "an object with a string 'law' and numbers grid/sigma/variance",
                     _is_noise_law),
    "seeded": (False, "true or false", lambda v: isinstance(v, bool)),
    "mechanism": (False, f"one of {MECHANISMS}", lambda v: v in mechanism_choices()),
    "public_features": (False, "a list of column names (a subset of features)",
                        lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "feature_noise_variance": (False, "a list of numbers >= 0, one per feature",
                               lambda v: isinstance(v, list) and all(
                                   _is_number(x) and x >= 0 for x in v)),
    "feature_map": (False, "an object with the input columns ('inputs') and the released "
                    "coordinates ('coordinates')",
                    lambda v: isinstance(v, Mapping) and isinstance(v.get("inputs"), list)),
    "feature_vector_bound": (False, "a positive number", lambda v: _is_number(v) and v > 0),
    "categorical_mechanism": (False, "'rr' (or absent: one-hot blocks)", lambda v: v == "rr"),
    "categorical_rr": (False, "an object {column: {k, epsilon, keep_prob, other_prob}}",
                       lambda v: isinstance(v, Mapping) and all(
                           isinstance(x, Mapping) and isinstance(x.get("k"), int)
                           and all(_is_number(x.get(key)) for key in
                                   ("epsilon", "keep_prob", "other_prob"))
                           for x in v.values())),
    "row_count": (False, "a non-negative integer",
                  lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
}


_FEATURE_MECHANISM_FIELDS = ("epsilon_x", "delta_x", "feature_bound")


def check_metadata_fields(meta: Mapping) -> None:
    """Raise ``ReleaseSpecError`` naming the first field of the release metadata that is missing
    (when required), null (when required) or of the wrong type.

    Optional fields may be absent or null (releases written before they existed); a label-only
    release (every feature in ``public_features``) has no feature mechanism, so its epsilon_x,
    delta_x and feature_bound are null."""
    features, public = meta.get("features"), meta.get("public_features")
    label_only = (isinstance(features, list) and isinstance(public, list) and bool(features)
                  and set(map(str, features)) <= set(map(str, public)))
    for name, (required, what, ok) in _METADATA_FIELDS.items():
        value = meta.get(name)
        if value is None:
            if required and not (label_only and name in _FEATURE_MECHANISM_FIELDS):
                state = "missing" if name not in meta else "null"
                raise ReleaseSpecError(
                    f"release metadata field {name!r} is {state}; it must be {what}. The file was "
                    "not written by `iwpfast release` (or was edited): re-create the release with "
                    "`iwpfast release` / iwpfast.release()")
            continue
        if not ok(value):
            raise ReleaseSpecError(
                f"release metadata field {name!r} is {json.dumps(value, default=repr)[:80]}; it must "
                f"be {what}. The file was not written by `iwpfast release` (or was edited): "
                "re-create the release with `iwpfast release` / iwpfast.release()")


def noise_from_law(law: str) -> str:
    """The spec's ``noise`` for the metadata's noise law name (its record in
    ``iwpfast.noise_registry``; releases written before the discrete law carry no law: they were
    float)."""
    return record_of_law(law).noise


def check_exact_noise_fields(noise_meta: dict, expected: dict) -> None:
    """The exact integers of a noise law (the discrete Laplace rate, its denominator and L1
    clip), its name and ``epsilon_effective``, stored against those recomputed from the
    parameters: equal, not close (a doubled ``rate_numerator`` is half the noise claimed)."""
    import math

    from ..exceptions import ReleaseSpecError

    for key in ("law", "rate_numerator", "rate_log2_denominator", "l1_bound_grid_units",
                "epsilon_effective"):
        if key not in expected:
            continue
        stored, want = noise_meta.get(key), expected[key]
        same = (stored == want if key != "epsilon_effective" else
                isinstance(stored, (int, float)) and math.isclose(stored, want, rel_tol=1e-12))
        if not same:
            raise ReleaseSpecError(
                f"release metadata is inconsistent: noise.{key} {stored!r} does not match "
                f"{want!r} recomputed from the parameters; the file was edited or is corrupt")
