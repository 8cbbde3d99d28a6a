"""iwpfast: unbiased learning of linear models from local-DP releases (IWP-SGD).

Public names are resolved lazily so that ``import iwpfast`` stays fast and compiles nothing.
"""
from __future__ import annotations

import importlib

from ._version import __version__

# public name -> module that defines it
_LAZY = {
    # privacy / release (data-holder side)
    "gaussian_noise_scale": "iwpfast.privacy",
    "label_keep_probability": "iwpfast.privacy",
    "ReleaseSpec": "iwpfast.privacy",
    "release": "iwpfast.privacy",
    "read_release_spec": "iwpfast.privacy",
    "read_release": "iwpfast.privacy",
    "release_stream": "iwpfast.privacy",
    # the math
    "iwp_loss": "iwpfast.estimates",
    "iwp_gradient": "iwpfast.estimates",
    # learning
    "IWPClassifier": "iwpfast.estimators",
    "IWPRegressor": "iwpfast.estimators",
    "load": "iwpfast.estimators",
    "EvaluationReport": "iwpfast.estimators",
    # errors and warnings
    "IWPError": "iwpfast.exceptions",
    "InvalidInputError": "iwpfast.exceptions",
    "ReleaseSpecError": "iwpfast.exceptions",
    "DivergenceError": "iwpfast.exceptions",
    "CheckpointError": "iwpfast.exceptions",
    "NotFittedError": "iwpfast.exceptions",
    "InvalidInputTypeError": "iwpfast.exceptions",
    "DataConversionWarning": "iwpfast.exceptions",
    "PrivacyLeakWarning": "iwpfast.exceptions",
    "PrivacyCalibrationWarning": "iwpfast.exceptions",
    "NumericalWarning": "iwpfast.exceptions",
    "UnitsWarning": "iwpfast.exceptions",
    # the release's debiased second moments (the coming moment learner's statistics)
    "moments": "iwpfast.moment_stats",
    "Moments": "iwpfast.moment_stats",
    "solve_ridge": "iwpfast.moment_stats",
    # planning a release, tuning without clean data
    "plan_release": "iwpfast.planning",
}

# submodules reachable as attributes (``iwpfast.metrics.private_scorer``), imported on first use
_SUBMODULES = ("metrics",)

__all__ = ["__version__", *sorted(_LAZY), *_SUBMODULES]


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"iwpfast.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'iwpfast' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
