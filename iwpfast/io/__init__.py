"""Reading data in chunks: sources (every accepted input as a stream of Arrow batches) and the
chunked training reader (feature-major buffers, prefetch thread, exact positions).

The names below are resolved on first use, so that importing a pure-Python part of the package
(``iwpfast.io.formats``, e.g. from ``iwpfast.privacy``) does not import pyarrow.
"""
from __future__ import annotations

import importlib

_LAZY = {
    "open_source": "iwpfast.io.sources",
    "Source": "iwpfast.io.sources",
    "BatchOrigin": "iwpfast.io.sources",
    "RELEASE_METADATA_KEY": "iwpfast.io.sources",
}

__all__ = ["open_source", "Source", "BatchOrigin", "RELEASE_METADATA_KEY"]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'iwpfast.io' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
