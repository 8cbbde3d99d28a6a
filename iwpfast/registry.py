"""How a registry record names a piece that lives in a higher or heavier module.

The records of ``iwpfast.noise_registry`` (noise laws) and ``iwpfast.io.formats`` (file formats)
are read by light modules (the command line lists their choices without importing pyarrow) and
by the modules their pieces live in: a record names such a piece as ``"package.module:attribute"``
and ``resolve`` imports it on first use (a record made at run time may hold the object itself).
"""
from __future__ import annotations

import importlib


def resolve(ref):
    """The object a record names: ``"package.module:attribute"`` imported, anything else as is."""
    if isinstance(ref, str) and ":" in ref:
        module, attribute = ref.split(":", 1)
        return getattr(importlib.import_module(module), attribute)
    return ref
