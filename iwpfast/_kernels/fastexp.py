"""A branch-free exp that LLVM vectorizes (Numba's ``math.exp`` is a libm call: no SVML here).

On this project's machine (AMD EPYC, AVX-512) a loop of ``fast_exp`` compiles to 8-wide zmm code.

exp(x) = 2^k * exp(r) with k = round(x / ln 2) and r = x - k ln 2 computed in two pieces
(Cody-Waite: ``LN2_HI`` has trailing zero bits, so ``k * LN2_HI`` is exact), |r| <= ln2 / 2.
exp(r) is its Taylor polynomial of degree 13 (truncation error r^14 / 14! < 5e-18), evaluated by
Horner with explicit fused multiply-adds (``_lowlevel.fma`` = ``llvm.fma.f64``: same bits in every
compiled kernel, half the floating-point instructions of mul + add; ~30% faster in the kernel).  k is read from the bits of ``x / ln2 + 1.5 * 2^52`` (no float -> int conversion, which
does not vectorize without AVX-512), and 2^k is built in the exponent bits as 2^k1 * 2^(k-k1)
so that gradual underflow and overflow come out as libm's.  Measured error against ``np.exp``:
at most 1-2 ulp over [-745, 709.7] (tests/test_kernels.py); NaN in gives NaN out.
"""
from __future__ import annotations

from ._lowlevel import bits_float, fma, float_bits
from ._options import jit

LOG2E = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01    # 0x3fe62e42fee00000: k * LN2_HI exact for |k| < 2^20
LN2_LO = 1.90821492927058770002e-10
ROUND_SHIFT = 6755399441055744.0       # 1.5 * 2^52: adding it rounds to an integer in the low bits
ROUND_SHIFT_BITS = 0x4338000000000000
_EXPONENT_BIAS = 1023 - ROUND_SHIFT_BITS   # bits(k + ROUND_SHIFT) + this = k + 1023
EXP_MAX_ARG = 709.79                   # above: +inf (2^1024 after the split scaling)
EXP_MIN_ARG = -745.2                   # below: 0 (rounds below half the smallest subnormal)

# 1/k! for k = 0..13
_C2 = 1.0 / 2.0
_C3 = 1.0 / 6.0
_C4 = 1.0 / 24.0
_C5 = 1.0 / 120.0
_C6 = 1.0 / 720.0
_C7 = 1.0 / 5040.0
_C8 = 1.0 / 40320.0
_C9 = 1.0 / 362880.0
_C10 = 1.0 / 3628800.0
_C11 = 1.0 / 39916800.0
_C12 = 1.0 / 479001600.0
_C13 = 1.0 / 6227020800.0


@jit
def fast_exp(x):
    """exp(x) for a float64 x, within 1 ulp of libm, branch-free (vectorizable in a loop)."""
    # min/max, not chained conditionals: LLVM turns these into vector min/max, not branches
    xc = min(max(x, EXP_MIN_ARG - 1.0), EXP_MAX_ARG + 1.0)
    shifted = fma(xc, LOG2E, ROUND_SHIFT)       # k = round(x / ln2) sits in the low bits
    kf = shifted - ROUND_SHIFT
    r = fma(-kf, LN2_LO, fma(-kf, LN2_HI, xc))
    # Horner with fused multiply-adds: half the floating-point operations of mul + add, and
    # one rounding per step instead of two
    poly = fma(_C13, r, _C12)
    poly = fma(poly, r, _C11)
    poly = fma(poly, r, _C10)
    poly = fma(poly, r, _C9)
    poly = fma(poly, r, _C8)
    poly = fma(poly, r, _C7)
    poly = fma(poly, r, _C6)
    poly = fma(poly, r, _C5)
    poly = fma(poly, r, _C4)
    poly = fma(poly, r, _C3)
    poly = fma(poly, r, _C2)
    poly = fma(poly, r, 1.0)
    poly = fma(poly, r, 1.0)
    # 2^k = 2^k1 * 2^(k-k1) with k1 = round(k/2), both in the normal range for every k used.
    # k1 is found in floating point because a 64-bit arithmetic shift does not vectorize on AVX.
    half = fma(kf, 0.5, ROUND_SHIFT)
    rest = (kf - (half - ROUND_SHIFT)) + ROUND_SHIFT
    scale_1 = bits_float((float_bits(half) + _EXPONENT_BIAS) << 52)
    scale_2 = bits_float((float_bits(rest) + _EXPONENT_BIAS) << 52)
    result = poly * scale_1 * scale_2
    return result if x == x else x


@jit
def exp_array(x, out):
    """out[i] = fast_exp(x[i]) (a vectorized loop; used by the tests and the benchmark)."""
    for i in range(x.shape[0]):
        out[i] = fast_exp(x[i])


@jit
def fma_array(a, b, c, out):
    """out[i] = fma(a[i], b[i], c[i]) (for the tests: one rounding, compiled or not)."""
    for i in range(a.shape[0]):
        out[i] = fma(a[i], b[i], c[i])
