"""The keyed row digest of a resumable multi-part release, compiled.

Twin: ``iwpfast.privacy.part_rows.digest_lanes_numpy`` (the formulas and why the digest is what a
resumed release compares: that module's docstring).  Only arrays and integers cross: ``words``
(m, n) uint64, one row of words per column (each value's 64 bits, as ``part_rows`` maps it),
``salts`` (m,) uint64 (each column's place), the two seeds drawn from the key.  Every operation
wraps modulo 2^64 (uint64 throughout: a mixed int64/uint64 operation would go through float64).
"""
from __future__ import annotations

import numpy as np

from ._options import jit

#: splitmix64's finalizer constants
MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
MIX_2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)


@jit
def digest_lanes(words, salts, seed1, seed2):
    """(lane 1, lane 2): the sums modulo 2^64 over the rows i of h_i and mix(h_i ^ seed2), where
    h_i = seed1 mixed with each column's word plus its salt in turn (mix: splitmix64's
    finalizer, written out in each loop).  Column by column over one n-vector of h, so that each
    loop is the same arithmetic on independent rows, which LLVM vectorizes (3x the row-by-row
    loop on AVX2, which has no 64-bit multiply: measured 2026-12-07, 65,536 rows x 5 columns)."""
    n = words.shape[1]
    h = np.empty(n, dtype=np.uint64)
    for i in range(n):
        h[i] = seed1
    for j in range(words.shape[0]):
        salt = salts[j]
        for i in range(n):
            z = h[i] ^ (words[j, i] + salt)
            z = (z ^ (z >> _S30)) * MIX_1
            z = (z ^ (z >> _S27)) * MIX_2
            h[i] = z ^ (z >> _S31)
    lane1 = np.uint64(0)
    lane2 = np.uint64(0)
    for i in range(n):
        lane1 += h[i]
        z = h[i] ^ seed2
        z = (z ^ (z >> _S30)) * MIX_1
        z = (z ^ (z >> _S27)) * MIX_2
        lane2 += z ^ (z >> _S31)
    return lane1, lane2
