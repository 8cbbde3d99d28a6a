"""The release's rules for the parameters a caller may leave out: when a release is label-only, and
which deltas and bound its spec then takes.

One home for the rules that ``iwpfast release`` (``commands/release.py``) and ``plan_release``
(``iwpfast/planning.py``) apply before they build a ``ReleaseSpec``, so that a plan describes the
release the command would write:

- **label-only**: every feature public and no ``epsilon_x``; the spec then has no feature
  mechanism, so no feature delta and no bound;
- **the feature delta**: the one given, else the feature mechanism's default
  (``iwpfast.noise_registry``: 1e-5 for the Gaussian mechanism, 0 for pure-epsilon Laplace);
- **the regression target's delta**: ``delta_y`` when given; in a label-only release the delta
  given (its only delta) or, without one, the Gaussian mechanism's default, as features get
  theirs; otherwise None (the spec takes the features' delta).
"""
from __future__ import annotations

from collections.abc import Iterable

from ..noise_registry import mechanism_record

__all__ = ["is_label_only", "release_deltas"]


def is_label_only(features: Iterable[str], public_features: Iterable[str],
                  epsilon_x: float | None) -> bool:
    """Every feature public and no ``epsilon_x``: a release that protects the label only."""
    public = set(public_features)
    return bool(public) and set(features) <= public and epsilon_x is None


def release_deltas(*, epsilon_x: float | None, features: Iterable[str],
                   public_features: Iterable[str], task: str, delta: float | None,
                   bound: float | None, delta_y: float | None = None,
                   mechanism: str = "gaussian") -> dict:
    """``{"delta", "bound", "delta_y"}``, the spec's arguments for these parameters (module
    docstring): ``delta`` and ``delta_y`` as given (None: not given) are completed by the
    defaults; a label-only release has neither feature delta nor bound."""
    label_only = is_label_only(features, public_features, epsilon_x)
    if label_only:
        feature_delta, feature_bound = None, None
    else:
        feature_delta = mechanism_record(mechanism).default_delta if delta is None else delta
        feature_bound = bound
    target_delta = delta_y
    if task == "regression" and delta_y is None and label_only:
        target_delta = mechanism_record("gaussian").default_delta if delta is None else delta
    return {"delta": feature_delta, "bound": feature_bound, "delta_y": target_delta}
