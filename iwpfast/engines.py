"""One word for the implementation choice across the API: ``engine=``.

Every function that can run either the compiled Numba kernels or their plain NumPy twin takes
``engine=`` with the same values:

- ``"numba"``: the fused kernels of ``iwpfast/_kernels/`` (compiled on first use, cached on disk);
- ``"numpy"``: the NumPy twin written from the formulas (no compilation; the tests' reference);
- ``"auto"`` (where offered, e.g. the release): the library picks (see that function's docs).

Older spellings keep working: the keywords ``kernel=`` (release, privatize) and ``backend=``
(experiments) warn with a ``DeprecationWarning``; the values ``"fused"`` (= ``"numba"``) and
``"reference"`` (= ``"numpy"``) are accepted as synonyms.

    >>> resolve_engine("reference")
    'numpy'
    >>> resolve_engine("numba", allowed=("numba", "numpy"))
    'numba'
"""
from __future__ import annotations

import warnings

from .exceptions import InvalidInputError

__all__ = ["ENGINES", "resolve_engine", "engine_from_keywords"]

ENGINES = ("numba", "numpy", "auto")
ENGINE_SYNONYMS = {"fused": "numba", "reference": "numpy"}


def resolve_engine(engine, *, allowed: tuple[str, ...] = ENGINES, parameter: str = "engine") -> str:
    """``engine`` as one of ``allowed`` (synonyms mapped); ``InvalidInputError`` naming the choices."""
    name = ENGINE_SYNONYMS.get(engine, engine) if isinstance(engine, str) else engine
    if name not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise InvalidInputError(f"{parameter}={engine!r}; use one of {choices} ('numba': the compiled "
                                "kernels, 'numpy': the NumPy twin)")
    return name


def engine_from_keywords(engine, old_value, old_name: str, *, default: str,
                         allowed: tuple[str, ...] = ENGINES, stacklevel: int = 3) -> str:
    """The engine from ``engine=`` or from a deprecated keyword (``kernel=``, ``backend=``),
    with a DeprecationWarning for the latter; both given and different is an error."""
    if old_value is not None:
        warnings.warn(f"{old_name}= is deprecated; use engine= (same values: 'numba', 'numpy'"
                      f"{', ' + repr('auto') if 'auto' in allowed else ''})", DeprecationWarning,
                      stacklevel=stacklevel)
        old = resolve_engine(old_value, allowed=allowed, parameter=old_name)
        if engine is not None and resolve_engine(engine, allowed=allowed) != old:
            raise InvalidInputError(f"engine={engine!r} and {old_name}={old_value!r} disagree; pass "
                                    "engine= only")
        return old
    return resolve_engine(default if engine is None else engine, allowed=allowed)
