"""Bit casts and raw column views: the few things plain Numba cannot express.

Each helper is a plain Python function (used as is under ``NUMBA_DISABLE_JIT=1``) with a Numba
``overload`` that replaces it in compiled code.

Columns cross into the kernels as their addresses (an int64 array): one compiled kernel then serves
a (p, n) array, p separate 1-D arrays (Arrow columns, read-only buffers) and the float64 carry
buffer alike, with no copy and no per-p specialization.  The caller keeps the arrays alive.
"""
from __future__ import annotations

import ctypes
import math
from fractions import Fraction

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


def borrowed(array):
    """``array`` itself, as an array that does not count references to its memory.

    Compiled, every view taken in a kernel (``a[j]``, ``a[i:k]``, an array passed to an inlined
    helper) increments and later decrements its array's reference count: atomic operations, each
    a full memory barrier (~100 per batch of a several-heads scan; 35-57 % of the SGD kernels'
    time measured by ``perf``).  The borrowed array has no owner (its meminfo is null, as a
    ``column_view``'s), so those updates become a test of a null pointer.  The caller keeps the
    memory alive: an argument of the kernel is, an array the kernel allocates is passed to
    ``keep_alive`` after its last use.  ``None`` is returned as is.
    """
    return array


def keep_alive(owners):
    """Nothing; compiled, a use of ``owners`` (a tuple of arrays) that keeps them alive until here
    (Numba frees an array after its last use, which a ``borrowed`` view of it does not count)."""
    return None


@intrinsic
def _borrowed_array(typingctx, array):
    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        source = context.make_array(array_type)(context, builder, args[0])
        view = context.make_array(array_type)(context, builder)
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        view.nitems = source.nitems
        view.itemsize = source.itemsize
        view.data = source.data
        view.shape = source.shape
        view.strides = source.strides
        return view._getvalue()
    return array(array), codegen


@intrinsic
def _keep_alive(typingctx, owners):
    def codegen(context, builder, signature, args):
        return context.get_dummy_value()
    return types.none(owners), codegen


@overload(borrowed, jit_options=dict(nogil=True), inline="always")
def _borrowed_impl(array):
    if isinstance(array, types.Array):
        def impl(array):
            return _borrowed_array(array)
        return impl
    if isinstance(array, types.NoneType):
        def none_impl(array):
            return array
        return none_impl


@overload(keep_alive, jit_options=dict(nogil=True), inline="always")
def _keep_alive_impl(owners):
    def impl(owners):
        _keep_alive(owners)
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
            for accumulator, value in zip(accumulators, updated, strict=True):
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



# ------------------------------------------------------------------------------------------
# multi-column blocks (the margins and the gradient of a batch, written in LLVM IR)
# ------------------------------------------------------------------------------------------

MARGIN_BLOCK = 32         # rows per margin block: four 8-wide accumulators kept in registers
GRADIENT_GROUP = 4        # columns per gradient pass: the row weights are loaded once for them


def margin_blocks(addresses, row, like, theta, n_blocks, margin):
    """margin[i] = sum_j theta[j] * float64(column_j[row + i]) for i < 32 * n_blocks, j in order.

    The sum for each row starts at +0.0 and adds the features j = 0, 1, ... in order (the same
    bits as one axpy pass per feature); compiled, a block of 32 rows stays in four vector
    registers while the loop runs over all the columns, instead of p loads and stores of the
    margins.
    """
    rows = MARGIN_BLOCK * int(n_blocks)
    margin[:rows] = 0.0
    for j in range(theta.shape[0]):
        column = column_view(addresses[j] + row * like.itemsize, rows, like)
        margin[:rows] += theta[j] * np.asarray(column, dtype=np.float64)


HEAD_GROUP = 4           # heads per pass of margin_blocks_heads: 4 x 4 accumulators in registers


def margin_blocks_heads(addresses, row, like, thetas_t, first_head, n_blocks, margins):
    """``margin_blocks`` of the HEAD_GROUP heads ``first_head``.. at once: ``thetas_t`` is (p, heads)
    (column h is head h's theta), ``margins`` (heads, rows); margins[h, i] = sum_j thetas_t[j, h] *
    float64(column_j[row + i]) for i < 32 * n_blocks, each sum from +0.0 over j in order (the
    bits of ``margin_blocks`` per head).  Compiled, a block of 32 rows of one feature is loaded
    (and widened) once for the HEAD_GROUP heads: a small matrix product whose 16 accumulators stay
    in registers over all the features.
    """
    for h in range(first_head, first_head + HEAD_GROUP):
        margin_blocks(addresses, row, like, np.ascontiguousarray(thetas_t[:, h]), n_blocks,
                      margins[h])


def lane_blocks_group(weight, addresses, first_column, row, like, n_blocks, lanes):
    """``lane_blocks`` for the GRADIENT_GROUP columns from ``first_column`` (rows from ``row``):
    lanes[LANES * g + k] is lane k of column first_column + g, with the bits of ``lane_blocks``."""
    rows = LANES * int(n_blocks)
    for g in range(GRADIENT_GROUP):
        column = column_view(addresses[first_column + g] + row * like.itemsize, rows, like)
        out = np.zeros(LANES)
        lane_blocks(weight, column, n_blocks, out)
        lanes[LANES * g:LANES * (g + 1)] = out


def lane_tree(lanes):
    """The fixed combine tree of ``_dot_lanes`` over 16 lanes (lane k + lane k + 8, then halves)."""
    return ((((lanes[0] + lanes[8]) + (lanes[4] + lanes[12]))
             + ((lanes[2] + lanes[10]) + (lanes[6] + lanes[14])))
            + (((lanes[1] + lanes[9]) + (lanes[5] + lanes[13]))
               + ((lanes[3] + lanes[11]) + (lanes[7] + lanes[15]))))


def gradient_blocks_heads(weights, addresses, row, like, n_blocks, gradient_t, first_head):
    """The gradient's column means of HEAD_GROUP heads at once, for a batch of m = 16 * n_blocks
    rows (no tail): gradient_t[j, first_head + g] = (sum_i weights[g, i] * float64(column_j[row +
    i])) / m for every feature j (``gradient_t`` is (p, heads)), each sum with the lane order and
    combine tree of ``_dot_lanes`` (the bits of ``_column_means`` per head).

    Compiled, a block of 16 rows of a column is loaded (and widened) once for the HEAD_GROUP heads
    and the tree runs on the two vector accumulators of each head in registers (three halving
    vector adds, then one scalar add): in a fused scan of several heads the per-head passes over
    the columns were 40 % of the time, most of it the float32 -> float64 conversions.
    """
    m = LANES * int(n_blocks)
    for j in range(gradient_t.shape[0]):
        column = column_view(addresses[j] + row * like.itemsize, m, like)
        for g in range(HEAD_GROUP):
            lanes = np.zeros(LANES)
            lane_blocks(weights[g], column, n_blocks, lanes)
            gradient_t[j, first_head + g] = lane_tree(lanes) / m


def _ir_types():
    """(i64, double, <8 x double>, its zero, i8*): the LLVM types the block routines below use."""
    f64 = ir.DoubleType()
    vector = ir.VectorType(f64, 8)
    return ir.IntType(64), f64, vector, ir.Constant(vector, [0.0] * 8), ir.IntType(8).as_pointer()


def _ir_loop(builder, count, carried, body):
    """Emit ``for i in range(count)`` carrying the LLVM values ``carried``; ``body(i, values)``
    returns the next values.  Returns the values after the loop."""
    i64 = ir.IntType(64)
    entry = builder.basic_block
    head = builder.append_basic_block("loop.head")
    block = builder.append_basic_block("loop.body")
    done = builder.append_basic_block("loop.done")
    builder.branch(head)
    builder.position_at_end(head)
    index = builder.phi(i64)
    index.add_incoming(ir.Constant(i64, 0), entry)
    phis = []
    for value in carried:
        phi = builder.phi(value.type)
        phi.add_incoming(value, entry)
        phis.append(phi)
    builder.cbranch(builder.icmp_signed("<", index, count), block, done)
    builder.position_at_end(block)
    updated = body(index, phis)
    end = builder.basic_block
    index.add_incoming(builder.add(index, ir.Constant(i64, 1)), end)
    for phi, value in zip(phis, updated, strict=True):
        phi.add_incoming(value, end)
    builder.branch(head)
    builder.position_at_end(done)
    return phis


def _load_f64x8(builder, context, element_type, pointer, element_index):
    """Eight consecutive elements from ``pointer`` (element type ``element_type``), as <8 x double>."""
    f64 = ir.DoubleType()
    llvm_element = context.get_value_type(element_type)
    vector_type = ir.VectorType(llvm_element, 8)
    address = builder.bitcast(builder.gep(builder.bitcast(pointer, llvm_element.as_pointer()),
                                          [element_index]), vector_type.as_pointer())
    value = builder.load(address, align=element_type.bitwidth // 8, typ=vector_type)
    if llvm_element != f64:
        value = builder.fpext(value, ir.VectorType(f64, 8))     # exact
    return value


def _splat(builder, scalar):
    vector_type = ir.VectorType(scalar.type, 8)
    single = builder.insert_element(ir.Constant(vector_type, ir.Undefined), scalar,
                                    ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(single, ir.Constant(vector_type, ir.Undefined),
                                  ir.Constant(ir.VectorType(ir.IntType(32), 8), [0] * 8))


@intrinsic
def _margin_blocks_ir(typingctx, addresses, row, like, theta, n_blocks, margin):
    def codegen(context, builder, signature, args):
        addresses_type, _, like_type, theta_type, _, margin_type = signature.args
        address_data = context.make_array(addresses_type)(context, builder, args[0]).data
        theta_array = context.make_array(theta_type)(context, builder, args[3])
        theta_data = theta_array.data
        n_features = builder.extract_value(theta_array.shape, 0)
        margin_data = context.make_array(margin_type)(context, builder, args[5]).data
        row_value, n_blocks_value = args[1], args[4]
        element = like_type.dtype
        i64, f64, vector, zero, byte_pointer = _ir_types()

        def block_body(block, _):
            first_row = builder.add(row_value, builder.mul(block, ir.Constant(i64, MARGIN_BLOCK)))

            def feature_body(j, accumulators):
                address = builder.load(builder.gep(address_data, [j]))
                column = builder.inttoptr(address, byte_pointer)
                t = _splat(builder, builder.load(builder.gep(theta_data, [j])))
                out = []
                for part, accumulator in enumerate(accumulators):
                    index = builder.add(first_row, ir.Constant(i64, 8 * part))
                    x = _load_f64x8(builder, context, element, column, index)
                    # fmul then fadd, no fast-math flags: never contracted into an FMA
                    out.append(builder.fadd(accumulator, builder.fmul(t, x)))
                return out
            sums = _ir_loop(builder, n_features, [zero] * (MARGIN_BLOCK // 8), feature_body)
            for part, value in enumerate(sums):
                index = builder.add(builder.mul(block, ir.Constant(i64, MARGIN_BLOCK)),
                                    ir.Constant(i64, 8 * part))
                target = builder.bitcast(builder.gep(margin_data, [index]), vector.as_pointer())
                builder.store(value, target, align=8)
            return []
        _ir_loop(builder, n_blocks_value, [], block_body)
        return context.get_dummy_value()
    return types.none(addresses, row, like, theta, n_blocks, margin), codegen


@intrinsic
def _margin_blocks_heads_ir(typingctx, addresses, row, like, thetas, first_head, n_blocks, margins):
    if thetas.layout != "C" or margins.layout != "C":
        return None           # the IR indexes rows as h * row length
    def codegen(context, builder, signature, args):
        addresses_type, _, like_type, thetas_type, _, _, margins_type = signature.args
        address_data = context.make_array(addresses_type)(context, builder, args[0]).data
        thetas_array = context.make_array(thetas_type)(context, builder, args[3])
        theta_data = thetas_array.data
        n_features = builder.extract_value(thetas_array.shape, 0)        # (p, heads), C order
        n_heads = builder.extract_value(thetas_array.shape, 1)
        margins_array = context.make_array(margins_type)(context, builder, args[6])
        margin_data = margins_array.data
        margin_stride = builder.extract_value(margins_array.shape, 1)    # C order: row length
        row_value, first_head_value, n_blocks_value = args[1], args[4], args[5]
        element = like_type.dtype
        i64, _, vector, zero, byte_pointer = _ir_types()
        margin_rows = [builder.mul(builder.add(first_head_value, ir.Constant(i64, h)), margin_stride)
                       for h in range(HEAD_GROUP)]
        parts = MARGIN_BLOCK // 8

        def block_body(block, _):
            block_row = builder.mul(block, ir.Constant(i64, MARGIN_BLOCK))
            first_row = builder.add(row_value, block_row)

            def feature_body(j, accumulators):
                column = builder.inttoptr(builder.load(builder.gep(address_data, [j])), byte_pointer)
                xs = [_load_f64x8(builder, context, element, column,
                                  builder.add(first_row, ir.Constant(i64, 8 * part)))
                      for part in range(parts)]
                out = []
                theta_row = builder.add(builder.mul(j, n_heads), first_head_value)
                for h in range(HEAD_GROUP):
                    t = _splat(builder, builder.load(
                        builder.gep(theta_data, [builder.add(theta_row, ir.Constant(i64, h))])))
                    for part in range(parts):
                        # fmul then fadd, no fast-math flags: never contracted into an FMA
                        out.append(builder.fadd(accumulators[h * parts + part],
                                                builder.fmul(t, xs[part])))
                return out
            sums = _ir_loop(builder, n_features, [zero] * (HEAD_GROUP * parts), feature_body)
            for h in range(HEAD_GROUP):
                for part in range(parts):
                    index = builder.add(builder.add(margin_rows[h], block_row),
                                        ir.Constant(i64, 8 * part))
                    target = builder.bitcast(builder.gep(margin_data, [index]), vector.as_pointer())
                    builder.store(sums[h * parts + part], target, align=8)
            return []
        _ir_loop(builder, n_blocks_value, [], block_body)
        return context.get_dummy_value()
    return types.none(addresses, row, like, thetas, first_head, n_blocks, margins), codegen


@intrinsic
def _lane_blocks_group_ir(typingctx, weight, addresses, first_column, row, like, n_blocks, lanes):
    def codegen(context, builder, signature, args):
        weight_type, addresses_type, _, _, like_type, _, lanes_type = signature.args
        weight_data = context.make_array(weight_type)(context, builder, args[0]).data
        address_data = context.make_array(addresses_type)(context, builder, args[1]).data
        lanes_data = context.make_array(lanes_type)(context, builder, args[6]).data
        first_column_value, row_value, n_blocks_value = args[2], args[3], args[5]
        element = like_type.dtype
        i64, f64, vector, zero, byte_pointer = _ir_types()
        columns = []
        for g in range(GRADIENT_GROUP):
            index = builder.add(first_column_value, ir.Constant(i64, g))
            columns.append(builder.inttoptr(builder.load(builder.gep(address_data, [index])),
                                            byte_pointer))

        def body(block, accumulators):
            first = builder.mul(block, ir.Constant(i64, LANES))
            out = []
            for half in range(LANES // 8):
                lane_row = builder.add(first, ir.Constant(i64, 8 * half))
                w = _load_f64x8(builder, context, weight_type.dtype, weight_data, lane_row)
                for g in range(GRADIENT_GROUP):
                    x = _load_f64x8(builder, context, element, columns[g],
                                    builder.add(row_value, lane_row))
                    accumulator = accumulators[g * (LANES // 8) + half]
                    out.append((g * (LANES // 8) + half,
                                builder.fadd(accumulator, builder.fmul(w, x))))
            return [value for _, value in sorted(out, key=lambda pair: pair[0])]
        sums = _ir_loop(builder, n_blocks_value, [zero] * (GRADIENT_GROUP * LANES // 8), body)
        for slot, value in enumerate(sums):
            target = builder.bitcast(builder.gep(lanes_data, [ir.Constant(i64, 8 * slot)]),
                                     vector.as_pointer())
            builder.store(value, target, align=8)
        return context.get_dummy_value()
    return (types.none(weight, addresses, first_column, row, like, n_blocks, lanes), codegen)


def _lane_tree_ir(builder, low, high):
    """``lane_tree`` of the lanes held in two <8 x double> (lanes 0-7 and 8-15), in registers:
    (l_k + l_k+8), then the halves 0-3 + 4-7, 0-1 + 2-3, 0 + 1: the same additions as the
    scalar tree, in the same order (no fast-math flags)."""
    i32 = ir.IntType(32)
    level = builder.fadd(low, high)
    for width in (4, 2):
        undefined = ir.Constant(level.type, ir.Undefined)
        first = builder.shuffle_vector(level, undefined,
                                       ir.Constant(ir.VectorType(i32, width), list(range(width))))
        second = builder.shuffle_vector(level, undefined, ir.Constant(
            ir.VectorType(i32, width), list(range(width, 2 * width))))
        level = builder.fadd(first, second)
    return builder.fadd(builder.extract_element(level, ir.Constant(i32, 0)),
                        builder.extract_element(level, ir.Constant(i32, 1)))


@intrinsic
def _gradient_blocks_heads_ir(typingctx, weights, addresses, row, like, n_blocks, gradient_t,
                              first_head):
    if weights.layout != "C" or gradient_t.layout != "C":
        return None           # the IR indexes rows as index * row length
    def codegen(context, builder, signature, args):
        weights_type, addresses_type, _, like_type, _, gradient_type, _ = signature.args
        weights_array = context.make_array(weights_type)(context, builder, args[0])
        weight_data = weights_array.data
        weight_stride = builder.extract_value(weights_array.shape, 1)    # C order: row length
        address_data = context.make_array(addresses_type)(context, builder, args[1]).data
        gradient_array = context.make_array(gradient_type)(context, builder, args[5])
        gradient_data = gradient_array.data
        n_features = builder.extract_value(gradient_array.shape, 0)      # (p, heads), C order
        n_heads = builder.extract_value(gradient_array.shape, 1)
        row_value, n_blocks_value, first_head_value = args[2], args[4], args[6]
        element = like_type.dtype
        i64, f64, vector, zero, byte_pointer = _ir_types()
        rows = builder.sitofp(builder.mul(n_blocks_value, ir.Constant(i64, LANES)), f64)
        weight_rows = [builder.mul(ir.Constant(i64, g), weight_stride) for g in range(HEAD_GROUP)]

        def feature_body(j, _):
            column = builder.inttoptr(builder.load(builder.gep(address_data, [j])), byte_pointer)

            def block_body(block, accumulators):
                first = builder.mul(block, ir.Constant(i64, LANES))
                out = list(accumulators)
                for half in range(LANES // 8):
                    lane_row = builder.add(first, ir.Constant(i64, 8 * half))
                    x = _load_f64x8(builder, context, element, column,
                                    builder.add(row_value, lane_row))
                    for g in range(HEAD_GROUP):
                        w = _load_f64x8(builder, context, weights_type.dtype, weight_data,
                                        builder.add(weight_rows[g], lane_row))
                        slot = 2 * g + half
                        # fmul then fadd, no fast-math flags: never contracted into an FMA
                        out[slot] = builder.fadd(accumulators[slot], builder.fmul(w, x))
                return out
            sums = _ir_loop(builder, n_blocks_value, [zero] * (2 * HEAD_GROUP), block_body)
            out_row = builder.add(builder.mul(j, n_heads), first_head_value)
            for g in range(HEAD_GROUP):
                total = _lane_tree_ir(builder, sums[2 * g], sums[2 * g + 1])
                target = builder.gep(gradient_data, [builder.add(out_row, ir.Constant(i64, g))])
                builder.store(builder.fdiv(total, rows), target)
            return []
        _ir_loop(builder, n_features, [], feature_body)
        return context.get_dummy_value()
    return (types.none(weights, addresses, row, like, n_blocks, gradient_t, first_head), codegen)


@overload(gradient_blocks_heads, jit_options=dict(nogil=True))
def _gradient_blocks_heads_impl(weights, addresses, row, like, n_blocks, gradient_t, first_head):
    def impl(weights, addresses, row, like, n_blocks, gradient_t, first_head):
        _gradient_blocks_heads_ir(weights, addresses, np.int64(row), like, np.int64(n_blocks),
                                  gradient_t, np.int64(first_head))
    return impl


@overload(margin_blocks, jit_options=dict(nogil=True))
def _margin_blocks_impl(addresses, row, like, theta, n_blocks, margin):
    def impl(addresses, row, like, theta, n_blocks, margin):
        _margin_blocks_ir(addresses, np.int64(row), like, theta, np.int64(n_blocks), margin)
    return impl


@overload(margin_blocks_heads, jit_options=dict(nogil=True))
def _margin_blocks_heads_impl(addresses, row, like, thetas, first_head, n_blocks, margins):
    def impl(addresses, row, like, thetas, first_head, n_blocks, margins):
        _margin_blocks_heads_ir(addresses, np.int64(row), like, thetas, np.int64(first_head),
                                np.int64(n_blocks), margins)
    return impl


@overload(lane_blocks_group, jit_options=dict(nogil=True))
def _lane_blocks_group_impl(weight, addresses, first_column, row, like, n_blocks, lanes):
    def impl(weight, addresses, first_column, row, like, n_blocks, lanes):
        _lane_blocks_group_ir(weight, addresses, np.int64(first_column), np.int64(row), like,
                              np.int64(n_blocks), lanes)
    return impl


# ------------------------------------------------------------------------------------------
# software prefetch (the next batches' rows while a batch computes)
# ------------------------------------------------------------------------------------------

CACHE_LINE = 64          # bytes per prefetch


def prefetch_bytes(address, n_bytes):
    """Ask the cache for the memory [address, address + n_bytes) (one prefetch per 64-byte line).

    A hint only: no value changes, so plain Python does nothing.  Compiled, it is
    ``llvm.prefetch`` (read, high locality): the SGD loops ask for the rows of the batch after
    next while a batch computes.  Each update waits on the one before it, so a batch's memory
    reads do not overlap the arithmetic by themselves, and p columns read in short runs are more
    streams than the hardware prefetcher runs far ahead on (docs/performance-kernels.md).
    """


@intrinsic
def _prefetch_ir(typingctx, address):
    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        byte_pointer = ir.IntType(8).as_pointer()
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]),
            "llvm.prefetch.p0i8")
        pointer = builder.inttoptr(args[0], byte_pointer)
        # read (0), high temporal locality (3), data cache (1)
        builder.call(function, [pointer, ir.Constant(i32, 0), ir.Constant(i32, 3),
                                ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return types.none(types.int64), codegen


@overload(prefetch_bytes, jit_options=dict(nogil=True))
def _prefetch_bytes_impl(address, n_bytes):
    def impl(address, n_bytes):
        for offset in range(0, n_bytes, CACHE_LINE):
            _prefetch_ir(np.int64(address + offset))
    return impl


def fma(a, b, c):
    """a * b + c with one rounding.  Compiled, it is ``llvm.fma.f64``: one instruction on FMA
    hardware, the same bits everywhere, and vectorizable (unlike contraction, which the kernels
    leave off so that bits do not depend on what LLVM chose to fuse).  In plain Python (3.11 has
    no math.fma; used under NUMBA_DISABLE_JIT) the product is split exactly into p + e (Dekker)
    and ``math.fsum`` rounds p + e + c once; exact rational arithmetic where that could overflow
    or underflow."""
    a, b, c = float(a), float(b), float(c)
    product = a * b
    if not (math.isfinite(a) and math.isfinite(b)):
        return product + c                    # IEEE fma of an infinite or NaN factor
    if not math.isfinite(c):
        return c                              # the exact product is finite, even if a * b is not
    if abs(a) < 2.0 ** 500 and abs(b) < 2.0 ** 500 and (product == 0.0 or abs(product) > 2.0 ** -900):
        error = _product_error(a, b, product)
        result = math.fsum((product, error, c))
    else:
        exact = Fraction(a) * Fraction(b) + Fraction(c)
        try:
            result = float(exact)               # correctly rounded
        except OverflowError:
            return math.copysign(math.inf, exact)
    return result if result != 0.0 else product + c   # an exact zero takes IEEE's sign


def _split(x):
    """Veltkamp: x = high + low with each half fitting in 26 bits (exact)."""
    t = 134217729.0 * x                       # 2^27 + 1
    high = t - (t - x)
    return high, x - high


def _product_error(a, b, product):
    """a * b - product, exactly (Dekker's two-product)."""
    a_high, a_low = _split(a)
    b_high, b_low = _split(b)
    return ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low


@intrinsic
def _fma_ir(typingctx, a, b, c):
    def codegen(context, builder, signature, args):
        f64 = ir.DoubleType()
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(f64, [f64, f64, f64]), "llvm.fma.f64")
        return builder.call(function, list(args))
    return types.float64(types.float64, types.float64, types.float64), codegen


@overload(fma, jit_options=dict(nogil=True))
def _fma_impl(a, b, c):
    def impl(a, b, c):
        return _fma_ir(np.float64(a), np.float64(b), np.float64(c))
    return impl
