"""A release's metadata checked on read against its mechanism's parameters.

Programs read the stored ``guarantee``, the noise scales and the delta terms as written
(docs/release.md "The file"), so a reader may not trust them: ``check_against_parameters``
recomputes every field that ``ReleaseSpec.to_metadata`` derives from the parameters (epsilon,
delta, bound, calibration, law, categories) and refuses a stored value that differs, naming the
field, the stored value and the recomputed one.  It runs once per metadata parsed (a file opened,
a model loaded), never per row: the spec's mechanisms are built already, so it costs a dict.

A field an older format version did not write is accepted (nothing to compare).  An edit that
changes the parameters and every derived field consistently is a different, valid-looking
release: only a signature could tell, which is out of scope (docs/release.md).  The row count is
checked against the footer or the manifest where the files are opened (``iwpfast.io.parts``).
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import NoReturn

from ..exceptions import ReleaseSpecError
from .metadata_fields import check_exact_noise_fields
from .rr_columns import check_rr_metadata

#: the fields ``to_metadata`` derives from the mechanism's parameters, compared on read
#: (``guarantee`` has its own comparison: ``_check_guarantee``)
DERIVED_FIELDS = ("feature_noise_scale", "feature_noise_variance", "label_keep_prob",
                  "label_other_prob", "target_noise_scale", "noise", "target_noise",
                  "feature_vector_bound", "public_features")
#: a float recomputed on another machine may differ in its last bits (libm), an edit does not
REL_TOL = 1e-9
#: the fix of every refusal: not a new release (a second noisy copy of the same rows)
EDITED = ("the metadata was edited or is corrupt; read the release as it was published (releasing "
          "the data again would publish a second noisy copy)")
#: the guarantee's keys added with ``holds_for`` (a release written before has neither)
_HOLDS_FOR_KEYS = ("holds_for", "caveat")


def _shown(value) -> str:
    text = json.dumps(value, default=repr, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _refuse(field: str, stored, want) -> NoReturn:
    raise ReleaseSpecError(
        f"the release's metadata field {field!r} says {_shown(stored)} but its mechanism's "
        f"parameters give {_shown(want)}: {EDITED}")


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _compare(field: str, stored, want) -> None:
    """``stored`` against ``want`` recursively: numbers to ``REL_TOL``, the rest exactly; a key
    of ``want`` missing from a stored object is a field an older version did not write."""
    if isinstance(want, Mapping):
        if not isinstance(stored, Mapping):
            _refuse(field, stored, want)
        for key, value in want.items():
            if key in stored:
                _compare(f"{field}.{key}", stored[key], value)
    elif isinstance(want, (list, tuple)):
        if not isinstance(stored, list) or len(stored) != len(want):
            _refuse(field, stored, list(want))
        for i, (s, w) in enumerate(zip(stored, want, strict=True)):
            _compare(f"{field}[{i}]", s, w)
    elif _is_number(want):
        if not (_is_number(stored) and math.isclose(stored, want, rel_tol=REL_TOL)):
            _refuse(field, stored, want)
    elif stored != want or type(stored) is not type(want):
        _refuse(field, stored, want)


def _check_guarantee(stored, want: Mapping) -> None:
    """The stored guarantee: epsilon and delta recomputed by composition, and its words
    (``holds_for``, ``caveat``, ``not_protected``) as the law and the public columns give them."""
    if stored is None:          # optional (a release written before it existed)
        return
    eps, delta = stored.get("epsilon"), stored.get("delta")
    if not (_is_number(eps) and _is_number(delta)
            and math.isclose(eps, want["epsilon"], rel_tol=REL_TOL)
            and math.isclose(delta, want["delta"], rel_tol=REL_TOL)):
        raise ReleaseSpecError(
            f"the release's metadata field 'guarantee' says ({eps:g}, {delta:g})-LDP but its "
            f"mechanism's parameters give ({want['epsilon']:g}, {want['delta']:g})-LDP: {EDITED}"
            if _is_number(eps) and _is_number(delta) else
            f"the release's metadata field 'guarantee' says epsilon {_shown(eps)}, delta "
            f"{_shown(delta)} but its mechanism's parameters give ({want['epsilon']:g}, "
            f"{want['delta']:g})-LDP: {EDITED}")
    # a missing caveat or not_protected would claim more than the release holds: absent only
    # where the version wrote none (no holds_for: before the law's words were stored)
    for key, value in want.items():
        if key in ("epsilon", "delta") or (key in _HOLDS_FOR_KEYS and "holds_for" not in stored):
            continue
        if key == "caveat":
            # its words may change from one version to the next (a release written by this one
            # must still read): present and non-empty is what keeps the claim qualified
            said = stored.get(key)
            if not (isinstance(said, str) and said.strip()):
                _refuse(f"guarantee.{key}", said, value)
            continue
        _compare(f"guarantee.{key}", stored.get(key), value)


def _check_noise_fields(spec, meta: Mapping) -> None:
    """The stored noise (sigma per feature, variances, keep probability, the law's grid and
    exact integers) against the parameters: what the data were noised with (0 for the public
    columns)."""
    if list(spec.released_features) != list(meta["features"]):
        raise ReleaseSpecError(
            f"release metadata is inconsistent: features {meta['features']!r} are not the "
            f"released columns {list(spec.released_features)!r} of its feature map; the file "
            "was edited or is corrupt")
    stored = meta.get("feature_noise_scale")
    want_scale = spec.feature_noise_scales()
    if not isinstance(stored, Sequence) or len(stored) != len(want_scale) or any(
        not math.isclose(float(s), w, rel_tol=REL_TOL)
        for s, w in zip(stored, want_scale, strict=True)
    ):
        raise ReleaseSpecError(
            f"release metadata is inconsistent: feature_noise_scale {stored!r} does not match "
            f"sigma={spec.sigma!r} recomputed from epsilon_x/delta/bound/calibration; "
            "the file was edited or is corrupt"
        )
    keep, spec_keep = meta.get("label_keep_prob"), spec.label_keep_prob
    if (keep is None) != (spec_keep is None) or (
        keep is not None and spec_keep is not None
        and not math.isclose(float(keep), spec_keep, rel_tol=1e-12)
    ):
        raise ReleaseSpecError(
            f"release metadata is inconsistent: label_keep_prob {keep!r} does not match "
            f"epsilon_y={spec.epsilon_y!r}; the file was edited or is corrupt"
        )
    variances = meta.get("feature_noise_variance")
    if variances is not None and (len(variances) != len(want_scale) or any(
            not math.isclose(float(v), w, rel_tol=REL_TOL)
            for v, w in zip(variances, spec.feature_noise_variances(), strict=True))):
        raise ReleaseSpecError(
            f"release metadata is inconsistent: feature_noise_variance {variances!r} does not "
            f"match {spec.feature_noise_variances()!r} recomputed from the parameters (0 for "
            "the public columns); the file was edited or is corrupt")
    check_rr_metadata(spec.rr_mechanisms, meta)
    noise_meta = meta.get("noise")
    mech = spec.feature_mechanism
    if noise_meta is not None and mech is not None:
        expected = mech.noise_metadata()
        for key in ("grid", "sigma", "variance", "scale"):
            stored_v, want = noise_meta.get(key), expected.get(key)
            if (stored_v is None) != (want is None) or (want is not None and not math.isclose(
                    float(stored_v), want, rel_tol=REL_TOL)):
                raise ReleaseSpecError(
                    f"release metadata is inconsistent: noise.{key} {stored_v!r} does not match "
                    f"{want!r} recomputed from the parameters; the file was edited or is corrupt")
        check_exact_noise_fields(noise_meta, expected)


def check_against_parameters(spec, meta: Mapping) -> None:
    """Raise ``ReleaseSpecError`` naming the first stored field of ``meta`` that differs from
    what ``spec`` (rebuilt from ``meta``'s parameters) derives: the noise, the guarantee, the
    delta terms, the label's probabilities, the feature map's bound and public coordinates."""
    _check_noise_fields(spec, meta)
    want = spec.to_metadata()
    _check_guarantee(meta.get("guarantee"), want["guarantee"])
    for name in DERIVED_FIELDS:
        # absent: written by a version without it; absent from ``want``: this spec writes none
        if name in meta and name in want:
            _compare(name, meta[name], want[name])
