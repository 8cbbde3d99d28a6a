"""Regenerate the polynomial coefficients of ``iwpfast._kernels.fastexp.fast_exp``.

``fast_exp`` computes exp(x) = 2^k exp(r) with |r| <= ln2 / 2 and exp(r) ~ sum_k P_k r^k, a
degree-11 near-minimax (Chebyshev) fit.  This script recomputes that fit with mpmath (40 digits),
rounds it to float64 and measures, in 40-digit arithmetic on a dense grid of the reduced range,
the largest relative error |p(r) - e^r| / e^r of

- the coefficients committed in ``iwpfast/_kernels/fastexp.py``, and
- the freshly regenerated ones,

then prints the regenerated ones as Python lines to paste into fastexp.py.

    python tools/fastexp_coefficients.py            # print both, and the new lines
    python tools/fastexp_coefficients.py --check    # exit 1 unless both are within --tolerance

What it reproduces: P_0 = P_1 = 1, P_2 and P_3 bit for bit; P_4 .. P_11 of the committed set
differ from mpmath.chebyfit's by up to ~5e-7 relative (the original fit's exact procedure, e.g.
the node set or a Remez refinement, was not recorded).  Both sets are within 1.7e-17 relative in
exact arithmetic, far below the 1.1e-16 of one float64 rounding, which is what ``fast_exp``'s
1-ulp contract needs; tests/test_kernels.py measures the compiled function against ``np.exp``.
If you change the coefficients, the kernels' bits change by up to an ulp: rerun the whole suite.
Needs ``mpmath`` (in the dev extra).
"""
from __future__ import annotations

import argparse
import sys

DEGREE = 11
DIGITS = 40
GRID = 4000
TOLERANCE = 2e-17


def regenerate(degree: int = DEGREE, digits: int = DIGITS) -> list[float]:
    """[P_0, ..., P_degree] of the Chebyshev fit of exp on [-ln2/2, ln2/2], rounded to float64."""
    import mpmath as mp

    with mp.workdps(digits):
        half = mp.log(2) / 2
        poly = mp.chebyfit(mp.exp, [-half, half], degree + 1)   # highest degree first
        return [float(c) for c in reversed(poly)]


def max_relative_error(coefficients: list[float], digits: int = DIGITS, grid: int = GRID) -> float:
    """max |p(r) - e^r| / e^r over ``grid + 1`` points of [-ln2/2, ln2/2], p evaluated exactly."""
    import mpmath as mp

    with mp.workdps(digits):
        half = mp.log(2) / 2
        worst = mp.mpf(0)
        exact_coefficients = [mp.mpf(c) for c in coefficients]      # float64 values, exactly
        for i in range(grid + 1):
            r = -half + 2 * half * i / grid
            value = mp.mpf(0)
            for c in reversed(exact_coefficients):
                value = value * r + c
            worst = max(worst, abs(value / mp.exp(r) - 1))
        return float(worst)


def committed() -> list[float]:
    """The coefficients in iwpfast/_kernels/fastexp.py (importing it compiles nothing)."""
    from iwpfast._kernels import fastexp

    return [1.0, 1.0] + [getattr(fastexp, f"_P{k}") for k in range(2, DEGREE + 1)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit with status 1 unless both sets are within --tolerance")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE,
                        help=f"largest relative error accepted (default {TOLERANCE:g})")
    args = parser.parse_args(argv)

    new = regenerate()
    old = committed()
    old_error, new_error = max_relative_error(old), max_relative_error(new)
    print(f"{'k':>3} {'committed':>24} {'regenerated':>24} {'relative difference':>20}")
    for k, (a, b) in enumerate(zip(old, new, strict=True)):
        print(f"{k:>3} {a!r:>24} {b!r:>24} {abs(b / a - 1):>20.2e}")
    print(f"max relative error on |r| <= ln2/2: committed {old_error:.3g}, regenerated {new_error:.3g}")
    print("\n# lines for iwpfast/_kernels/fastexp.py (P_0 = P_1 = 1 are the literal 1.0 in fast_exp)")
    for k in range(DEGREE, 1, -1):
        print(f"_P{k} = {new[k]!r}")
    if new[0] != 1.0 or new[1] != 1.0:
        print("regenerated P_0/P_1 are not exactly 1: fast_exp assumes they are", file=sys.stderr)
        return 1
    if args.check and max(old_error, new_error) > args.tolerance:
        print(f"error above the tolerance {args.tolerance:g}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
