"""The kernels' loops update no reference counts (``_kernels/_lowlevel.borrowed``).

Compiled, a view of an array (``a[j]``, ``a[i:k]``, an array handed to an inlined helper)
increments and later decrements the reference count of the array's memory: an atomic operation
and a full memory barrier each.  Measured with ``perf``, those took 35 % of the single-head SGD
kernel's time and 37-57 % of the several-heads one's (bench/README.md, "Sixth round").  The
kernels therefore borrow every array they use in their loops; these tests check what that
promises: the values are unchanged, and the optimized code of a kernel increments the count of
nothing but its arguments (once, on entry).
"""
import os
import re

import numpy as np
import pytest

from iwpfast._kernels._lowlevel import borrowed, keep_alive
from iwpfast._kernels._options import jit

JIT_OFF = os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")


@jit
def _rows_through_views(a, n_rounds):
    """sum over rounds and rows of a[i] . scratch, through views of a borrowed argument and of a
    borrowed array allocated here (kept alive to the end)."""
    scratch = np.empty(a.shape[1])
    owned = (scratch,)
    a, scratch = borrowed(a), borrowed(scratch)
    total = 0.0
    for r in range(n_rounds):
        for i in range(a.shape[0]):
            row = a[i]
            for j in range(row.shape[0]):
                scratch[j] = row[j] * (r + 1)
            head = scratch[0:2]
            total += head[0] + head[1]
    keep_alive(owned)
    return total


def test_borrowed_views_read_and_write_the_same_memory():
    a = np.arange(12.0).reshape(4, 3)
    expected = sum((r + 1) * float(a[:, :2].sum()) for r in range(5))
    assert _rows_through_views(a, 5) == expected
    assert borrowed(None) is None       # a None argument (a pruned branch's type) passes through


@jit
def _write_borrowed(a, value):
    view = borrowed(a)
    for i in range(view.shape[0]):
        view[i] = value
    return view[0]


def test_a_borrowed_argument_is_the_callers_memory():
    a = np.zeros(7)
    assert _write_borrowed(a, 2.5) == 2.5
    assert (a == 2.5).all()


def _increments(dispatcher):
    """The operands of every NRT_incref call in the optimized LLVM IR of the kernel's body."""
    import numba

    from iwpfast._kernels._options import JIT_OPTIONS

    (signature,) = dispatcher.signatures[:1]
    fresh = numba.njit(**dict(JIT_OPTIONS, cache=False))(dispatcher.py_func)
    fresh.compile(signature)
    llvm_ir = fresh.inspect_llvm(signature)
    body = llvm_ir.split("\ndefine ")[1]         # the kernel itself (then its Python wrapper)
    return re.findall(r"call void @NRT_incref\(ptr (?:nonnull )?(%[\w.]+)\)", body)


# compiles kernels afresh to read their code (seconds of compiling on a warm cache too): run on
# purpose with -m slow, and by CI's kernel step
@pytest.mark.slow
@pytest.mark.skipif(JIT_OFF, reason="NUMBA_DISABLE_JIT: nothing is compiled")
def test_the_scoring_kernel_counts_references_of_its_arguments_only():
    from iwpfast._kernels import score

    rng = np.random.default_rng(0)
    p, n, heads = 3, 600, 4
    X = np.ascontiguousarray(rng.standard_normal((p, n)))
    addresses = np.array([X[j].ctypes.data for j in range(p)], dtype=np.int64)
    sums = [np.zeros(heads) for _ in range(6)]
    score.score_block_heads(addresses, np.empty(0), n, np.sign(rng.standard_normal(n)),
                            np.empty(0), rng.standard_normal((p, heads)), np.zeros(heads),
                            np.zeros(heads), 0, np.array([1.0, 0.0, 1.0, 0.0]), -1.0, 0.0,
                            sums[0], sums[1], np.zeros((heads, heads)), sums[2], sums[3], sums[4],
                            0)
    operands = _increments(score.score_block_heads)
    assert operands, "no reference count at all: the test no longer reads the kernel"
    assert all(o.startswith("%arg.") for o in operands), (
        f"the scoring kernel increments reference counts of views or of its own arrays: {operands}")


# compiles kernels afresh to read their code (seconds of compiling on a warm cache too): run on
# purpose with -m slow, and by CI's kernel step
@pytest.mark.slow
@pytest.mark.skipif(JIT_OFF, reason="NUMBA_DISABLE_JIT: nothing is compiled")
@pytest.mark.parametrize("heads", [1, 3])
def test_the_sgd_kernels_count_references_of_their_arguments_only(heads):
    from iwpfast._kernels import sgd
    from iwpfast.sgd.engine import run_chunk, run_chunk_heads
    from iwpfast.sgd.state import HeadState
    from tests.conftest import make_head_config

    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 1000))             # feature-major, as the engine takes it
    y = np.where(X[0] > 0, 1.0, -1.0)
    cfgs = [make_head_config(n_features=3, learning_rate=0.01 * (k + 1)) for k in range(heads)]
    states = [HeadState.new(cfg) for cfg in cfgs]
    if heads == 1:
        run_chunk(cfgs[0], states[0], X, y)
        kernel = sgd.sgd_chunk
    else:
        run_chunk_heads(cfgs, states, X, y)
        kernel = sgd.sgd_chunk_heads
    operands = _increments(kernel)
    assert operands, "no reference count at all: the test no longer reads the kernel"
    inner = [o for o in operands if not o.startswith("%arg.")]
    assert len(inner) <= 2, (
        f"{kernel.__name__} increments reference counts of views or of its own arrays: {inner}")
