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
from llvmlite import ir
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


# ------------------------------------------------------------------------------------------
# fixed-order lane sums (the reductions of the SGD kernel)
# ------------------------------------------------------------------------------------------

LANES = 16   # row i of a batch is summed into lane i % LANES (two 8-wide AVX-512 registers)


def lane_blocks(weight, column, n_blocks, lanes):
    """lanes[k] = sum over b < n_blocks of weight[16b + k] * float64(column[16b + k]), in order of b.

    Compiled, this is one loop over two ``<8 x double>`` accumulators written directly in LLVM
    IR: Numba leaves the SLP vectorizer off and the loop vectorizer only vectorizes a reduction
    under ``fastmath`` (with a vector width that it chooses per dtype, which would change the
    bits between a float32 batch and the same rows from the float64 carry buffer).  Here the
    order is fixed by construction: lane k adds its products b = 0, 1, ... starting from +0.0.
    """
    lanes[:LANES] = 0.0
    for b in range(int(n_blocks)):
        rows = slice(LANES * b, LANES * (b + 1))
        lanes[:LANES] += weight[rows] * np.asarray(column[rows], dtype=np.float64)


@intrinsic
def _lane_blocks_ir(typingctx, weight, column, n_blocks, lanes):
    def codegen(context, builder, signature, args):
        weight_type, column_type, _, lanes_type = signature.args
        weight_data = context.make_array(weight_type)(context, builder, args[0]).data
        column_data = context.make_array(column_type)(context, builder, args[1]).data
        lanes_data = context.make_array(lanes_type)(context, builder, args[3]).data
        n_blocks_value = args[2]
        f64 = ir.DoubleType()
        vector = ir.VectorType(f64, 8)
        column_element = context.get_value_type(column_type.dtype)
        column_vector = ir.VectorType(column_element, 8)
        i64 = ir.IntType(64)
        zero = ir.Constant(vector, [0.0] * 8)
        entry = builder.basic_block
        head = builder.append_basic_block("lanes.head")
        body = builder.append_basic_block("lanes.body")
        done = builder.append_basic_block("lanes.done")
        builder.branch(head)
        with builder.goto_block(head):
            block = builder.phi(i64)
            accumulators = [builder.phi(vector), builder.phi(vector)]
            block.add_incoming(ir.Constant(i64, 0), entry)
            for accumulator in accumulators:
                accumulator.add_incoming(zero, entry)
            builder.cbranch(builder.icmp_signed("<", block, n_blocks_value), body, done)
        with builder.goto_block(body):
            first_row = builder.mul(block, ir.Constant(i64, LANES))
            updated = []
            for half, accumulator in enumerate(accumulators):
                row = builder.add(first_row, ir.Constant(i64, 8 * half))
                w = builder.load(builder.bitcast(builder.gep(weight_data, [row]),
                                                 vector.as_pointer()), align=8, typ=vector)
                x = builder.load(builder.bitcast(builder.gep(column_data, [row]),
                                                 column_vector.as_pointer()),
                                 align=column_type.dtype.bitwidth // 8, typ=column_vector)
                if column_element != f64:
                    x = builder.fpext(x, vector)      # exact, like np.float64(column[i])
                # separate fmul and fadd without fast-math flags: never contracted into an FMA
                updated.append(builder.fadd(accumulator, builder.fmul(w, x)))
            block.add_incoming(builder.add(block, ir.Constant(i64, 1)), body)
            for accumulator, value in zip(accumulators, updated):
                accumulator.add_incoming(value, body)
            builder.branch(head)
        builder.position_at_end(done)
        for half, accumulator in enumerate(accumulators):
            target = builder.gep(lanes_data, [ir.Constant(i64, 8 * half)])
            builder.store(accumulator, builder.bitcast(target, vector.as_pointer()), align=8)
        return context.get_dummy_value()
    return types.none(weight, column, n_blocks, lanes), codegen


@overload(lane_blocks, jit_options=dict(nogil=True))
def _lane_blocks_impl(weight, column, n_blocks, lanes):
    def impl(weight, column, n_blocks, lanes):
        _lane_blocks_ir(weight, column, np.int64(n_blocks), lanes)
    return impl


def prefetch(address):
    """Hint the CPU to bring the cache line at ``address`` into cache (no-op in plain Python).

    A prefetch never faults, whatever the address.  Used for many columns at once: the hardware
    prefetcher follows a few dozen sequential streams, not the p = 100 columns that a batch of a
    feature-major chunk reads side by side.
    """
    return None


@intrinsic
def _prefetch_ir(typingctx, address):
    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        function_type = ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t, i32, i32, i32])
        function = cgutils.get_or_insert_function(builder.module, function_type, "llvm.prefetch.p0")
        # read access, keep in all cache levels (locality 3), data cache
        builder.call(function, [builder.inttoptr(args[0], cgutils.voidptr_t), ir.Constant(i32, 0),
                                ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return types.none(address), codegen


@overload(prefetch, jit_options=dict(nogil=True))
def _prefetch_impl(address):
    def impl(address):
        _prefetch_ir(np.int64(address))
    return impl
