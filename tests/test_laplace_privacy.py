"""The discrete Laplace mechanism (iwpfast.privacy.laplace, _kernels.release.laplace_add): the exact
sampler against its pmf, kernel against twin, grid and integer L1 clip, and the privacy ratio on the
lattice.  Statistical checks use fixed seeds; chi-square bounds are the 5-sigma upper point of the
chi-square law (Wilson-Hilferty), correlations 4 / sqrt(n) (4 standard errors of a correlation
under independence).  Small sizes: CI reruns this file with NUMBA_DISABLE_JIT=1.
"""
import math
from fractions import Fraction

import numpy as np
import pytest

from iwpfast._kernels import release as kernels
from iwpfast.exceptions import InvalidInputError
from iwpfast.privacy.discrete import WordBuffer
from iwpfast.privacy.laplace import (
    LaplaceLaw,
    LaplaceNoise,
    calibrate_laplace,
    sample_python,
    snap_clip,
)
from iwpfast.privacy.randomness import NoiseKey

TWO62 = 1 << 62


def clip_l1(v: np.ndarray, bound: float) -> np.ndarray:
    """Rows of ``v`` (n, p) scaled onto the L1 ball: v * min(1, bound / |v|_1) (float64): rows inside
    the float L1 ball, for the snap-and-clip tests."""
    v = np.asarray(v, dtype=np.float64)
    norm = np.abs(v).sum(axis=1)
    factor = np.where(norm > bound, bound / np.where(norm > 0, norm, 1.0), 1.0)
    return v * factor[:, None]


def chi2_limit(df, z=5.0):
    """Upper z-sigma point of chi-square(df), Wilson-Hilferty (accurate to <1% for df >= 10)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def law_with(lam, grid=0.25, n_max=4, p=2):
    """A law of rate ~lam per grid unit (the tests' noise, not a calibrated one)."""
    return LaplaceLaw(grid, int(lam * TWO62), n_max, 2 * n_max * lam, p, "float64")


def draws(law, n, seed, size=1 << 15):
    k = np.zeros(n, np.int64)
    LaplaceNoise(law).add(k, WordBuffer(NoiseKey.from_seed(seed).stream(0), size=size), kernels)
    return k


RELEASE_LAW = calibrate_laplace(8.0, 1.5, 3)        # the goal's setting: alpha = 1 - 5e-6


@pytest.mark.parametrize("law", [law_with(0.35), law_with(0.9), RELEASE_LAW])
def test_kernel_equals_twin_and_values_do_not_depend_on_the_buffer(law):
    words = NoiseKey.from_seed(11).stream(2).words(6000)
    twin, pos = sample_python(words, 0, law.rate, law.m_log2, 300)
    out = np.zeros(300, np.int64)
    done, kpos = kernels.laplace_add(out, 0, words, 0, np.int64(law.rate), np.int64(law.m_log2))
    assert (done, kpos) == (300, pos)
    np.testing.assert_array_equal(out, twin)
    # a short buffer (many refills, draws restarted after running out) gives the same integers
    assert np.array_equal(draws(law, 2000, 5, size=16), draws(law, 2000, 5))
    k = np.zeros(2000, np.int64)
    LaplaceNoise(law).add(k, WordBuffer(NoiseKey.from_seed(5).stream(0), size=16), None)  # twin
    np.testing.assert_array_equal(k, draws(law, 2000, 5))
    # running out mid-draw: no partial draw is written, the position is the last complete one
    short = np.zeros(300, np.int64)
    done, kpos = kernels.laplace_add(short, 0, words[:40], 0, np.int64(law.rate), np.int64(law.m_log2))
    partial, ppos = sample_python(words[:40], 0, law.rate, law.m_log2, 300)
    assert done == len(partial) < 300 and kpos == ppos
    np.testing.assert_array_equal(short[:done], partial)
    assert np.all(short[done:] == 0)


@pytest.mark.parametrize("law", [law_with(0.35), law_with(0.9), RELEASE_LAW])
def test_chi_square_against_the_exact_pmf(law):
    n = 60_000
    z = draws(law, n, 7)
    alpha = math.exp(-law.rate / TWO62)
    # bins in |Z| with exact masses: P(|Z| >= t) = 2 alpha^t / (1 + alpha) for t >= 1; the sign
    # splits each bin in two halves, and 0 is its own bin
    scale = 1.0 / -math.log(alpha)
    edges = sorted({1} | {max(1, int(round(q))) for q in scale * np.linspace(0.0, 6.0, 16)[1:]})
    tail = [2 * alpha**t / (1 + alpha) for t in edges]
    expected, observed = [n * -math.expm1(-law.rate / TWO62) / (1 + alpha)], [np.count_nonzero(z == 0)]
    for i, t in enumerate(edges):
        hi = edges[i + 1] if i + 1 < len(edges) else None
        mass = tail[i] - (tail[i + 1] if hi is not None else 0.0)
        a = np.abs(z)
        inside = (a >= t) & ((a < hi) if hi is not None else True)
        for sign in (1, -1):
            expected.append(n * mass / 2)
            observed.append(np.count_nonzero(inside & (np.sign(z) == sign)))
    expected, observed = np.array(expected), np.array(observed)
    assert math.isclose(expected.sum(), n, rel_tol=1e-9)
    stat = float(((observed - expected) ** 2 / expected).sum())
    assert stat < chi2_limit(len(expected) - 1), (stat, observed, expected)


def test_draws_are_independent():
    law = law_with(0.35)
    n = 60_000
    z = draws(law, n, 13).astype(np.float64)
    r = np.corrcoef(z[:-1], z[1:])[0, 1]
    assert abs(r) < 4 / math.sqrt(n)
    r_abs = np.corrcoef(np.abs(z[:-1]), np.abs(z[1:]))[0, 1]
    assert abs(r_abs) < 4 / math.sqrt(n)
    # consecutive pairs in a 3 x 3 table (negative, 0, positive): chi-square of independence
    cls = np.sign(z).astype(int) + 1
    table = np.zeros((3, 3))
    np.add.at(table, (cls[:-1:2], cls[1::2]), 1)
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    assert ((table - expected) ** 2 / expected).sum() < chi2_limit(4)
    # distinct streams and keys give different noise
    assert not np.array_equal(draws(law, 64, 13), draws(law, 64, 14))


def test_calibration_is_pure_epsilon_exactly():
    for eps, bound, p, dtype in [(8.0, 1.5, 3, "float32"), (1.0, 1.0, 10, "float32"),
                                 (0.3, 2.0, 4, "float64"), (50.0, 1.0, 2, "float32")]:
        law = calibrate_laplace(eps, bound, p, dtype)
        # 2 N lambda <= epsilon exactly, and no more than 2^-20 below it
        assert Fraction(2 * law.n_max * law.rate, TWO62) <= Fraction(eps)
        assert Fraction(2 * law.n_max * (law.rate + 1), TWO62) > Fraction(eps)
        assert law.epsilon_effective <= eps * (1 + 1e-15)
        assert law.n_max == math.floor(bound / law.grid)
        assert 2 * law.rate << law.m_log2 >= TWO62 > law.rate << law.m_log2     # lambda M in [1/2, 1)
        assert math.log2(law.grid) == int(math.log2(law.grid))
        # outputs stay exact in the dtype unless |Z| L > 40 b
        mantissa = 24 if dtype == "float32" else 53
        assert bound + 40 * law.scale <= 2.0**mantissa * law.grid * (1 + 1e-9)
        assert law.metadata()["law"] == "discrete_laplace"
    with pytest.raises(InvalidInputError, match="epsilon_x"):
        calibrate_laplace(0.0, 1.0, 2)
    with pytest.raises(InvalidInputError, match="bound"):
        calibrate_laplace(1.0, -1.0, 2)


def test_integer_l1_clip_bounds_the_snapped_vector():
    law = calibrate_laplace(1.0, 1.0, 6)
    rng = np.random.default_rng(0)
    v = clip_l1(rng.normal(size=(2000, 6)), 1.0)
    # adversarial rows: every coordinate just above a half grid point (nearest snapping rounds up)
    half = (np.floor(1.0 / 6 / law.grid) + 0.5 + 1e-3) * law.grid
    v = np.vstack([v, clip_l1(np.full((3, 6), half), 1.0), np.full((1, 6), half)])
    k = snap_clip(v, law)
    assert np.all(np.abs(k).sum(axis=1) <= law.n_max)
    assert np.abs(np.rint(v[-1] / law.grid)).sum() > law.n_max      # the clip had work to do
    # a row of the float ball moves by at most one grid unit per coordinate (rint, then at most
    # p/2 steps), and rows whose snapped point is inside the integer ball only by rint
    assert np.all(np.abs(k[:-1] * law.grid - v[:-1]) <= law.grid * (1 + 1e-9))
    inside = np.abs(np.rint(v / law.grid)).sum(axis=1) <= law.n_max
    np.testing.assert_array_equal(k[inside], np.rint(v[inside] / law.grid))
    # outputs are grid points: L (k + Z) in float32 is an integer multiple of L
    noisy = k[:, 0].copy()
    LaplaceNoise(law).add(noisy, WordBuffer(NoiseKey.from_seed(3).stream(0)), kernels)
    out = (noisy.astype(np.float32) * np.float32(law.grid)).astype(np.float64)
    np.testing.assert_array_equal(out / law.grid, np.rint(out / law.grid))


def test_privacy_ratio_on_the_lattice_for_the_worst_neighbours():
    # a tiny lattice: p = 2, N = 4; every pair of records in the integer L1 ball and every output
    # in a window around it (outside it the ratio only repeats values met inside)
    eps = 1.2
    law = LaplaceLaw(0.25, math.floor(Fraction(eps) * TWO62 / 8), 4, eps, 2, "float64")
    lam = Fraction(law.rate, TWO62)
    ball = [(a, b) for a in range(-4, 5) for b in range(-4, 5) if abs(a) + abs(b) <= 4]
    window = range(-7, 8)
    worst = Fraction(0)
    for k in ball:
        for k2 in ball:
            for o1 in window:
                for o2 in window:
                    # log P(o | k) - log P(o | k') = lambda (|o - k'|_1 - |o - k|_1), exactly
                    d = (abs(o1 - k2[0]) + abs(o2 - k2[1])) - (abs(o1 - k[0]) + abs(o2 - k[1]))
                    worst = max(worst, lam * d)
    assert worst == lam * 8 <= Fraction(eps)             # 2 N lambda, attained, and <= epsilon
    # the same with the law's float pmf at the worst neighbours k = (4, 0), k' = (-4, 0), o = k
    pmf = law.noise_law().pmf(np.arange(0, 9))[0]
    ratio = (pmf[0] * pmf[0]) / (pmf[8] * pmf[0])
    assert ratio == pytest.approx(math.exp(float(8 * lam)), rel=1e-12)
    assert math.log(ratio) <= eps * (1 + 1e-12)
