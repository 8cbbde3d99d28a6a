"""A branch-free exp that LLVM vectorizes (Numba's ``math.exp`` is a libm call: no SVML here).

On this project's machine (AMD EPYC, AVX-512) a loop of ``fast_exp`` compiles to 8-wide zmm code.

exp(x) = 2^k * exp(r) with k = round(x / ln 2) and r = x - k ln 2 computed in two pieces
(Cody-Waite: ``LN2_HI`` has trailing zero bits, so ``k * LN2_HI`` is exact), |r| <= ln2 / 2.
exp(r) is a degree-11 near-minimax polynomial (relative error 1.6e-17; the Taylor polynomial
needs degree 13 for that: 2 FMAs more, ~10% slower exp), evaluated by Horner with explicit fused
multiply-adds (``_lowlevel.fma`` = ``llvm.fma.f64``: same bits in every compiled kernel, half the
floating-point instructions of mul + add; ~30% faster in the kernel).  k is read from the bits of
``x / ln2 + 1.5 * 2^52`` (no float -> int conversion, which does not vectorize without
AVX-512), and 2^k is built in the exponent bits as 2^k1 * 2^(k-k1) with integer operations, so
that gradual underflow and overflow come out as libm's.  Measured error against ``np.exp``:
at most 1 ulp over [-745, 709.7] (tests/test_kernels.py); NaN in gives NaN out.
"""
from __future__ import annotations

import numpy as np

from ._lowlevel import bits_float, float_bits, fma
from ._options import jit

LOG2E = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01    # 0x3fe62e42fee00000: k * LN2_HI exact for |k| < 2^20
LN2_LO = 1.90821492927058770002e-10
ROUND_SHIFT = 6755399441055744.0       # 1.5 * 2^52: adding it rounds to an integer in the low bits
ROUND_SHIFT_BITS = 0x4338000000000000
_OFFSET_K_BIAS = ROUND_SHIFT_BITS - 2048   # bits(k + ROUND_SHIFT) - this = k + 2048
EXP_MAX_ARG = 709.79                   # above: +inf (2^1024 after the split scaling)
EXP_MIN_ARG = -745.2                   # below: 0 (rounds below half the smallest subnormal)

# exp(r) ~ sum_k P_k r^k on |r| <= ln2 / 2: the degree-11 Chebyshev (near-minimax) fit,
# computed with mpmath.chebyfit (40 digits) and rounded to float64.  Relative error of the
# polynomial with these float64 coefficients, in exact arithmetic: 1.6e-17 (0.07 ulp near 1;
# degree 10 would be 3.3e-16, too much).  P_0 = P_1 = 1 exactly.
_P11 = 2.5110049204818658e-08
_P10 = 2.763265472252779e-07
_P9 = 2.755724088722987e-06
_P8 = 2.4801485441561313e-05
_P7 = 0.00019841269890076403
_P6 = 0.0013888888952352863
_P5 = 0.008333333333319589
_P4 = 0.04166666666648795
_P3 = 0.1666666666666668
_P2 = 0.5000000000000019


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
    poly = fma(_P11, r, _P10)
    poly = fma(poly, r, _P9)
    poly = fma(poly, r, _P8)
    poly = fma(poly, r, _P7)
    poly = fma(poly, r, _P6)
    poly = fma(poly, r, _P5)
    poly = fma(poly, r, _P4)
    poly = fma(poly, r, _P3)
    poly = fma(poly, r, _P2)
    poly = fma(poly, r, 1.0)
    poly = fma(poly, r, 1.0)
    # 2^k = 2^k1 * 2^(k-k1) with k1 = floor(k/2), both in the normal range for every k used
    # (|k| <= 1078).  Integer vector operations only: the floating-point pipes, which the
    # polynomial keeps busy, stay free.  offset_k = k + 2048 >= 0, so the logical (unsigned)
    # shift, which vectorizes without AVX-512, floors k / 2.  poly * 2^k1 is exact, so the
    # result is round(poly * 2^k) whatever the split: the bits of any split.
    offset_k = np.uint64(float_bits(shifted) - _OFFSET_K_BIAS)
    half_offset = offset_k >> np.uint64(1)                   # k1 + 1024
    scale_1 = bits_float((half_offset - np.uint64(1)) << np.uint64(52))                # k1 + 1023
    scale_2 = bits_float((offset_k - half_offset - np.uint64(1)) << np.uint64(52))     # k - k1 + 1023
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
