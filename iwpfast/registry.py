"""How a registry record names a piece that lives in a higher or heavier module.

The records of ``iwpfast.noise_registry`` (noise laws) and ``iwpfast.io.formats`` (file formats)
are read by light modules (the command line lists their choices without importing pyarrow) and
by the modules their pieces live in: a record names such a piece as ``"package.module:attribute"``
and ``resolve`` imports it on first use (a record made at run time may hold the object itself).
A misspelt name is refused where it can be told without importing it (``check_refs``, when the
record is registered: a name without its ``:``) and otherwise where it is first used, with an
error naming it rather than a failure far from the record.
"""
from __future__ import annotations

import importlib

from .exceptions import InvalidInputError


def _is_ref(text: str) -> bool:
    module, colon, attribute = text.partition(":")
    return bool(colon and module and attribute and ":" not in attribute)


def check_refs(record, fields: tuple[str, ...], what: str) -> None:
    """Refuse a record whose ``fields`` hold a string that is not ``"package.module:attribute"``
    (checked without importing anything: the built-in records are registered at import)."""
    for name in fields:
        ref = getattr(record, name)
        if isinstance(ref, str) and not _is_ref(ref):
            raise InvalidInputError(
                f"{what}: {name}={ref!r} names no piece; give the object itself or its name as "
                "'package.module:attribute' (a colon before the attribute)")


def resolve(ref):
    """The object a record names: ``"package.module:attribute"`` imported, anything else as is;
    ``ImportError`` naming ``ref`` when it cannot be imported."""
    if not isinstance(ref, str):
        return ref
    if not _is_ref(ref):
        raise ImportError(f"{ref!r} is not a 'package.module:attribute' name of a registry piece")
    module, _, attribute = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"the registry piece {ref!r} cannot be imported ({type(exc).__name__}: "
                          f"{exc}); correct the record that names it") from exc
