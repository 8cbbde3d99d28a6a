"""Type guards for the parameter checks: ``isinstance(value, numbers.Real)`` told to the type
checker as ``float`` (it cannot compare a ``numbers.Real`` with a number)."""
from __future__ import annotations

import numbers
from typing import TypeGuard


def is_real(value) -> TypeGuard[float]:
    """``isinstance(value, numbers.Real)``, told to the type checker (which cannot compare a
    ``numbers.Real`` with a float)."""
    return isinstance(value, numbers.Real)


def is_integral(value) -> TypeGuard[int]:
    """``isinstance(value, numbers.Integral)``, told to the type checker."""
    return isinstance(value, numbers.Integral)
