"""Bit casts and raw column views: the few things plain Numba cannot express.

Each helper is a plain Python function (used as is under ``NUMBA_DISABLE_JIT=1``) with a Numba
``overload`` that replaces it in compiled code.

Columns cross into the kernels as their addresses (an int64 array): one compiled kernel then serves
a (p, n) array, p separate 1-D arrays (Arrow columns, read-only buffers) and the float64 carry
buffer alike, with no copy and no per-p specialization.  The caller keeps the arrays alive.
"""
from __future__ import annotations

import ctypes

import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload


def column_view(address, n, like):
    """The 1-D array of ``n`` elements of ``like.dtype`` starting at memory ``address``."""
    dtype = like.dtype
    buffer = (ctypes.c_char * (int(n) * dtype.itemsize)).from_address(int(address))
    return np.frombuffer(buffer, dtype=dtype)


def float_bits(x):
    """The IEEE-754 bits of float64 ``x`` as an int64."""
    return np.array(x, dtype=np.float64).view(np.int64)[()]


def bits_float(i):
    """The float64 whose IEEE-754 bits are the int64 ``i``."""
    return np.array(i, dtype=np.int64).view(np.float64)[()]


@intrinsic
def _address_to_voidptr(typingctx, address):
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)
    return types.voidptr(address), codegen


@intrinsic
def _bitcast_f64_i64(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))
    return types.int64(types.float64), codegen


@intrinsic
def _bitcast_i64_f64(typingctx, i):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))
    return types.float64(types.int64), codegen


@overload(column_view, jit_options=dict(nogil=True))
def _column_view_impl(address, n, like):
    import numba

    def impl(address, n, like):
        return numba.carray(_address_to_voidptr(address), (n,), like.dtype)
    return impl


@overload(float_bits)
def _float_bits_impl(x):
    if isinstance(x, types.Float):
        def impl(x):
            return _bitcast_f64_i64(np.float64(x))
        return impl


@overload(bits_float)
def _bits_float_impl(i):
    if isinstance(i, types.Integer):
        def impl(i):
            return _bitcast_i64_f64(np.int64(i))
        return impl
