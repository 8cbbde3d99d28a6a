"""The noise model an estimator debiases for: from a release's metadata or from explicit arguments.

A release's metadata is read once into its validated ``ReleaseSpec`` (fields checked, stored
noise verified against its calibration) and the ``NoiseModel`` the learner layers take is derived
from the spec alone, carrying it: nothing reads the metadata's fields (the spec is their only
reader, ``iwpfast.privacy.spec_reading``).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..exceptions import InvalidInputError, ReleaseSpecError
from ..sgd.driver import NoiseModel
from ._checks import is_real

__all__ = ["NoiseModel", "check_same_noise", "explicit_noise", "noise_from_metadata",
           "override_noise"]


def check_same_noise(given: dict, meta_noise: NoiseModel, override: bool) -> None:
    """Error when explicit noise parameters contradict a file's release metadata (unless override)."""
    if override:
        return
    problems = []
    if given.get("noise_var") is not None:
        g = np.broadcast_to(np.asarray(given["noise_var"], dtype=np.float64), meta_noise.noise_var.shape)
        if not np.allclose(g, meta_noise.noise_var, rtol=1e-9, atol=0.0):
            problems.append(f"noise_var={np.asarray(given['noise_var']).tolist()} but the release has "
                            f"{meta_noise.noise_var.tolist()}")
    if given.get("label_keep_prob") is not None:
        if meta_noise.label_keep_prob is None or not math.isclose(
                given["label_keep_prob"], meta_noise.label_keep_prob, rel_tol=1e-9):
            problems.append(f"label keep probability {given['label_keep_prob']} (from epsilon_y / "
                            f"label_keep_prob) but the release has {meta_noise.label_keep_prob}")
    spec = meta_noise.release_spec()
    if given.get("epsilon_y") is not None and spec is not None:
        released = spec.epsilon_y
        if released is None or not math.isclose(float(given["epsilon_y"]), float(released),
                                                 rel_tol=1e-9):
            problems.append(f"epsilon_y={given['epsilon_y']} but the release has "
                            f"{'public labels (no epsilon_y)' if released is None else released}")
    if given.get("target_noise_var") is not None:
        if not math.isclose(given["target_noise_var"], meta_noise.target_noise_var, rel_tol=1e-9):
            problems.append(f"target_noise_var={given['target_noise_var']} but the release has "
                            f"{meta_noise.target_noise_var}")
    if given.get("feature_bound") is not None and meta_noise.feature_bound is not None:
        if not math.isclose(given["feature_bound"], meta_noise.feature_bound, rel_tol=1e-9):
            problems.append(f"feature_bound={given['feature_bound']} but the release has "
                            f"{meta_noise.feature_bound}")
    if problems:
        raise ReleaseSpecError(
            "the noise parameters given contradict the file's release metadata: "
            + "; ".join(problems)
            + ". Drop them (the metadata is read automatically) or pass override=True if you are sure.")


def noise_from_metadata(meta: dict, features: list[str]) -> NoiseModel:
    """The noise of ``features`` (any subset or order of the released columns: each carries its
    own independent noise) from a release's metadata, with the release's spec: the metadata read
    and validated once into its ``ReleaseSpec`` (``privacy.spec_reading.release_spec_of``: its
    fields, and the stored noise against the calibration of its parameters), the noise model
    derived from the spec alone (``driver.noise_from_release``)."""
    from ..sgd import driver
    return driver.noise_from_release(meta, features)


def explicit_noise(p: int, *, noise_var, epsilon_y, label_keep_prob, target_noise_var,
                   feature_bound, task: str) -> NoiseModel:
    """Noise model from explicit arguments (arrays); validates each one."""
    if noise_var is None:
        s = np.zeros(p)
    else:
        s = np.asarray(noise_var, dtype=np.float64)
        if s.ndim == 0:
            s = np.full(p, float(s))
        if s.shape != (p,) or not np.all(np.isfinite(s)) or np.any(s < 0):
            raise InvalidInputError(
                f"noise_var must be a non-negative number or a length-{p} vector of per-feature "
                f"variances sigma_j^2 (got {np.asarray(noise_var).tolist()!r}); pass the release's "
                "feature_noise_scale squared")
    keep = None
    if epsilon_y is not None and label_keep_prob is not None:
        raise InvalidInputError("give either epsilon_y or label_keep_prob, not both")
    if epsilon_y is not None:
        if not (is_real(epsilon_y) and epsilon_y > 0 and math.isfinite(epsilon_y)):
            raise InvalidInputError(f"epsilon_y must be a positive finite number (got {epsilon_y!r})")
        from ..privacy.calibration import label_keep_probability
        keep = label_keep_probability(epsilon_y)
    elif label_keep_prob is not None:
        if not (is_real(label_keep_prob) and 0.5 < label_keep_prob <= 1.0):
            raise InvalidInputError(
                f"label_keep_prob must be in (0.5, 1] (got {label_keep_prob!r}): below 1/2 the labels "
                "carry no usable signal")
        keep = None if label_keep_prob == 1.0 else float(label_keep_prob)
    if task == "regression" and keep is not None:
        raise InvalidInputError("epsilon_y / label_keep_prob are for classification; regression "
                                "targets use target_noise_var")
    tvar = 0.0
    if target_noise_var is not None:
        if not (is_real(target_noise_var) and target_noise_var >= 0):
            raise InvalidInputError(f"target_noise_var must be >= 0 (got {target_noise_var!r})")
        tvar = float(target_noise_var)
    if feature_bound is not None and not (is_real(feature_bound) and feature_bound > 0):
        raise InvalidInputError(f"feature_bound must be a positive number (got {feature_bound!r})")
    return NoiseModel(s, keep, tvar, None if feature_bound is None else float(feature_bound), None)


def override_noise(noise: NoiseModel, kw: dict, task: str) -> NoiseModel:
    """``noise`` (from a release) with the explicitly given parameters of ``kw`` put in its place."""
    p = len(noise.noise_var)
    given = explicit_noise(p, task=task, **kw)
    return replace(
        noise,
        noise_var=given.noise_var if kw.get("noise_var") is not None else noise.noise_var,
        label_keep_prob=(given.label_keep_prob if (kw.get("epsilon_y") is not None
                                                   or kw.get("label_keep_prob") is not None)
                         else noise.label_keep_prob),
        target_noise_var=(given.target_noise_var if kw.get("target_noise_var") is not None
                          else noise.target_noise_var),
        feature_bound=given.feature_bound or noise.feature_bound,
        # an explicit noise_var replaces the release's law by Gaussian noise of that variance
        noise_law=None if kw.get("noise_var") is not None else noise.noise_law)
