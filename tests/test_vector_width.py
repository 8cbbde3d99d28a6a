"""The vector width the fast paths promise, read from the machine code Numba generates.

``fast_exp`` and the per-row loops of the SGD kernel are written without data-dependent branches
so that LLVM vectorizes them, and the reductions are 8-wide vectors written in LLVM IR
(``_kernels/_lowlevel.py``): on a CPU with AVX-512 the loops must use 8-wide ``zmm`` packed
instructions, with AVX2 4-wide ``ymm`` ones.  A change that silently scalarizes a loop (a branch,
a libm call, an option) keeps every result and loses most of the speed; these tests catch it.

Each function is compiled afresh from its Python source with the project's options minus the
on-disk cache (a cached function has no assembly to inspect).  Where the hardware has neither
AVX-512 nor AVX2, or the JIT is off, the tests skip: there is no promise to check there.
"""
import os
import re

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"),
                                reason="NUMBA_DISABLE_JIT: nothing is compiled")


def _target_width():
    """('zmm', 8) with AVX-512, ('ymm', 4) with AVX2 + FMA, else skip."""
    import numba
    from llvmlite import binding

    if numba.config.CPU_NAME not in (None, "host"):
        pytest.skip(f"NUMBA_CPU_NAME={numba.config.CPU_NAME}: not compiling for this host")
    features = binding.get_host_cpu_features()
    if features.get("avx512f"):
        return "zmm", 8
    if features.get("avx2") and features.get("fma"):
        return "ymm", 4
    pytest.skip("the CPU has neither AVX-512 nor AVX2+FMA; the kernels promise no vector width")


def _fresh(function):
    """``function`` (a Numba dispatcher of the project) recompiled without the on-disk cache."""
    import numba

    from iwpfast._kernels._options import JIT_OPTIONS

    options = dict(JIT_OPTIONS, cache=False)
    return numba.njit(**options)(function.py_func)


def _asm(dispatcher) -> str:
    (signature,) = dispatcher.signatures
    return dispatcher.inspect_asm(signature)


def _packed(asm: str, mnemonic: str, register: str) -> int:
    """Number of packed-double instructions ``mnemonic``...pd on ``register`` (zmm/ymm) operands."""
    return len(re.findall(rf"\b{mnemonic}\w*pd\s+[^\n]*%{register}", asm))


def test_fast_exp_loop_uses_full_width_fma():
    # exp_array is fast_exp in a loop: the degree-11 Horner polynomial must run as packed
    # fused multiply-adds (11 per vector of 8 or 4 values), not as scalar sd ones
    register, width = _target_width()
    from iwpfast._kernels import fastexp

    exp_array = _fresh(fastexp.exp_array)
    x = np.linspace(-5.0, 5.0, 4 * width + 3)
    out = np.empty_like(x)
    exp_array(x, out)
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-15)
    assert _packed(_asm(exp_array), "vfmadd", register) >= 11, (
        f"fast_exp's loop is not vectorized {width}-wide on {register}")


def test_row_scalars_exponential_loop_vectorized():
    # the per-row scalars of the exponential loss (two fast_exp per row with private labels) are
    # the hot loop of an IWP pass: they must be packed on the full width too
    register, width = _target_width()
    from iwpfast._kernels import sgd

    row_scalars = _fresh(sgd._row_scalars)
    m = 8 * width
    rng = np.random.default_rng(0)
    y = np.where(rng.random(m) < 0.5, -1.0, 1.0)
    margin = rng.standard_normal(m)
    weight, curvature = np.empty(m), np.empty(m)
    label_tilde = 1.5
    # a binary head: the 2 x 2 label-weight table has two equal rows (S~, 1 - S~)
    fparams = np.zeros(9)
    fparams[[0, 6, 7, 8]] = label_tilde, 1 - label_tilde, label_tilde, 1 - label_tilde
    # table_form None: the binary form only, as a binary fit compiles it
    row_scalars(sgd.LOSS_EXPONENTIAL, None, True, y, m, margin, 0.1, fparams, 0,
                np.zeros((1, 1)), weight, curvature, None)
    z = y * margin
    e_z, e_minus_z = np.exp(-0.1 - z), np.exp(-0.1 + z)
    np.testing.assert_allclose(curvature, label_tilde * e_z + (1 - label_tilde) * e_minus_z,
                               rtol=1e-13)
    assert _packed(_asm(row_scalars), "vfmadd", register) >= 22, (
        f"the exponential loss's row loop is not vectorized {width}-wide on {register}")


def test_one_vs_rest_row_scalars_exponential_loop_vectorized():
    # a k-class head picks its label weights per row (a select on y = +-1): still packed
    register, width = _target_width()
    from iwpfast._kernels import sgd

    row_scalars = _fresh(sgd._table_row_scalars)
    m = 8 * width
    rng = np.random.default_rng(0)
    y = np.where(rng.random(m) < 0.5, -1.0, 1.0)
    margin = rng.standard_normal(m)
    weight, curvature = np.empty(m), np.empty(m)
    table = (1.6, -0.6, 1.3, -0.3)
    row_scalars(sgd.LOSS_EXPONENTIAL, y, m, margin, 0.1, *table, 0, np.zeros((1, 1)), weight,
                curvature, None)    # boost None: no class weights, as a plain k-class fit
    z = y * margin
    w_z = np.where(y > 0, table[0], table[2])
    w_minus_z = np.where(y > 0, table[1], table[3])
    np.testing.assert_allclose(curvature, w_z * np.exp(-0.1 - z) + w_minus_z * np.exp(-0.1 + z),
                               rtol=1e-13)
    assert _packed(_asm(row_scalars), "vfmadd", register) >= 22, (
        f"the one-vs-rest row loop is not vectorized {width}-wide on {register}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reduction_blocks_are_8_wide(dtype):
    # the fixed-order reductions are <8 x double> vectors in LLVM IR (hardware independent), and
    # with AVX-512 each is one zmm register (two ymm with AVX2)
    register, _ = _target_width()
    from iwpfast._kernels import _lowlevel, sgd

    blocks = _fresh(sgd.reduction_blocks)
    rng = np.random.default_rng(1)
    p, m = 6, 96            # reduction_blocks reads columns 1..4 from row 16: p >= 5
    X = np.ascontiguousarray(rng.standard_normal((p, m)).astype(dtype))
    addresses = np.array([X[j].ctypes.data for j in range(p)], dtype=np.int64)
    lanes = np.empty(_lowlevel.LANES)
    group = np.empty(_lowlevel.GRADIENT_GROUP * _lowlevel.LANES)
    margin = np.empty(m)
    blocks(rng.standard_normal(m), X[2], addresses, np.empty(0, dtype), rng.standard_normal(p),
           lanes, group, margin)
    (signature,) = blocks.signatures
    llvm_ir = blocks.inspect_llvm(signature)
    assert re.search(r"fadd <8 x double>", llvm_ir), "the lane sums are not <8 x double> in the IR"
    assert re.search(r"fmul <8 x double>", llvm_ir)
    asm = _asm(blocks)
    assert _packed(asm, "vadd", register) >= 2 and _packed(asm, "vmul", register) >= 2, (
        f"the 8-wide reductions are not packed on {register}")


def test_batches_in_place_prefetch_the_rows_ahead():
    # the SGD loops ask the cache for the batch PREFETCH_AHEAD batches on (prefetch_bytes, a
    # hint with no value of its own): in the compiled code that must be one prefetch instruction
    # per 64-byte line, on any x86-64 CPU (no vector width needed)
    import numba

    from iwpfast._kernels import _lowlevel
    from iwpfast._kernels._options import JIT_OPTIONS

    def ask(column, first, count):
        _lowlevel.prefetch_bytes(column.ctypes.data + first * column.itemsize,
                                 count * column.itemsize)
        return column[first]

    compiled = numba.njit(**dict(JIT_OPTIONS, cache=False))(ask)
    column = np.arange(1024, dtype=np.float32)
    assert compiled(column, 128, 128) == 128.0          # a hint: the values are untouched
    (signature,) = compiled.signatures
    assert "llvm.prefetch" in compiled.inspect_llvm(signature)
    if numba.config.CPU_NAME in (None, "host") and os.uname().machine == "x86_64":
        assert re.search(r"\bprefetcht0\b", compiled.inspect_asm(signature)), (
            "prefetch_bytes did not become a prefetch instruction")
