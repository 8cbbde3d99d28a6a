"""SGD over streams: head config/state, the kernel wrapper, its NumPy twin, the streaming driver,
schedules and checkpoints.  Names are imported lazily (nothing compiles at import)."""
from __future__ import annotations

import importlib

_LAZY = {
    "HeadConfig": "iwpfast.sgd.state",
    "HeadState": "iwpfast.sgd.state",
    "Head": "iwpfast.sgd.driver",
    "StreamResult": "iwpfast.sgd.driver",
    "fit_stream": "iwpfast.sgd.driver",
    "noise_from_release": "iwpfast.sgd.driver",
    "NoiseModel": "iwpfast.sgd.driver",
    "NoiseParameters": "iwpfast.sgd.driver",       # NoiseModel's former name
    "paper_learning_rate": "iwpfast.sgd.schedules",
    "default_radius": "iwpfast.sgd.schedules",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'iwpfast.sgd' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
