"""Renamed keywords keep working: the old name warns with a DeprecationWarning and is honoured.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     renamed_keyword(65536, 1000, new_name="record_batch_rows", old_name="batch_rows",
    ...                     default=65536)
    1000
    >>> caught[0].category.__name__
    'DeprecationWarning'
"""
from __future__ import annotations

import warnings

from .exceptions import InvalidInputError

__all__ = ["renamed_keyword"]


def renamed_keyword(new_value, old_value, *, new_name: str, old_name: str, default,
                    stacklevel: int = 3):
    """The value of a keyword renamed from ``old_name`` to ``new_name``: ``old_value`` (with a
    DeprecationWarning) when given, else ``new_value``.  Both given and different: an error."""
    if old_value is None:
        return new_value
    warnings.warn(f"{old_name}= is deprecated; use {new_name}= (same meaning)", DeprecationWarning,
                  stacklevel=stacklevel)
    if new_value != default and new_value != old_value:
        raise InvalidInputError(f"{new_name}={new_value!r} and {old_name}={old_value!r} disagree; pass "
                                f"{new_name}= only")
    return old_value
