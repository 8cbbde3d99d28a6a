"""The one place where Numba compilation options are chosen (every kernel uses ``jit`` from here).

- ``nogil=True``: the driver decodes the next Arrow chunk on another thread while a kernel runs.
- ``cache=True``: a second process loads the machine code from ``__pycache__`` instead of compiling.
- ``fastmath=False``: no reassociation.  Results must not depend on how the stream is chunked, so a
  batch computed from the float64 carry buffer must give the same bits as the same rows computed in
  place; reductions are vectorized by hand (fixed lane order, see ``sgd._dot_lanes``) instead.
  No ``contract`` either: an FMA in one compiled specialization but not another changes bits.
- ``error_model="numpy"``: division by zero gives inf/nan (caught as divergence) instead of
  raising inside the kernel, and lets LLVM vectorize divisions.
- ``boundscheck=False``: the wrapper (``iwpfast.sgd.engine``) validates every shape beforehand.
"""
from __future__ import annotations

import numba

JIT_OPTIONS = dict(nogil=True, cache=True, fastmath=False, error_model="numpy", boundscheck=False)


def jit(function):
    """Compile ``function`` lazily (at its first call) with the project's options."""
    return numba.njit(**JIT_OPTIONS)(function)


def jit_inline(function):
    """Like ``jit``, but inlined into its callers at the Numba IR level.

    For the per-batch step: a call of a compiled function that takes arrays increments and
    decrements each array's reference count (atomic operations, ~20 of them per batch), which
    costs as much as the arithmetic of a small batch; inlined, the refcount pruning removes them.
    """
    return numba.njit(inline="always", **JIT_OPTIONS)(function)
