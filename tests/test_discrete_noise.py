"""The default noise law: exact discrete Gaussian on a power-of-two grid from an AES-CTR keystream.

Statistical checks use fixed seeds and bounds derived from standard errors (said at each test).
Small sizes: CI reruns this file with NUMBA_DISABLE_JIT=1.
"""
import math

import numpy as np
import pytest

from iwpfast.estimates import iwp_gradient
from iwpfast.exceptions import InvalidInputError
from iwpfast.privacy import ReleaseSpec, privatize
from iwpfast.privacy.calibration import analytic_gaussian_delta, gaussian_noise_scale
from iwpfast.privacy.discrete import (
    _COIN_BITS,
    _LOG_SQRT_2PI,
    DiscreteLaw,
    DiscreteNoise,
    SamplerTables,
    WordBuffer,
    discrete_delta_grid,
    discrete_gaussian_variance,
    log_theta_excess,
    sample_numpy,
    sampler_shape,
    sampler_tables,
)
from iwpfast.privacy.randomness import KeyStream, NoiseKey


def exact_pmf(s: float, zmax: int) -> np.ndarray:
    """P(Z = z) for z = -zmax..zmax of the exact discrete Gaussian (normalized over all of Z): the
    reference the sampler's draws are tested against."""
    z = np.arange(-zmax, zmax + 1, dtype=np.float64)
    log_w = -(z * z) / (2.0 * s * s)
    log_theta = log_theta_excess(s) + _LOG_SQRT_2PI + math.log(s)
    return np.exp(log_w - log_theta)


def table_probabilities(tables: SamplerTables) -> np.ndarray:
    """The probability that the alias level proposes each bin (float64)."""
    n_bins = tables.thresholds.size
    unit = float(1 << _COIN_BITS)
    prob = tables.thresholds.astype(np.float64) / unit
    np.add.at(prob, tables.aliases, (unit - tables.thresholds.astype(np.float64)) / unit)
    return prob / n_bins


def law_for(grid, s):
    """A law with an arbitrary grid and scale (the tests' noise, not a calibrated one)."""
    return DiscreteLaw(grid, s * grid, s, discrete_gaussian_variance(s) * grid * grid, None, 1, 1.0,
                       "float64")


def words(seed, n, stream=0):
    return NoiseKey.from_seed(seed).stream(stream).words(n)


def chi2_limit(df, z=5.0):
    """Upper z-sigma point of chi-square(df), Wilson-Hilferty (accurate to <1% for df >= 10)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


# ------------------------------------------------------------------------------ keystream
def test_keystream_is_sequential_and_streams_keys_are_independent():
    key = NoiseKey.from_seed(1)
    whole = key.stream(3).words(1001)
    s = key.stream(3)
    pieces = np.concatenate([s.words(1), s.words(500), s.words(2), s.words(498)])
    np.testing.assert_array_equal(whole, pieces)  # any read pattern: the same stream
    assert not np.array_equal(whole[:64], key.stream(4).words(64))
    assert not np.array_equal(whole[:64], key.derive("part", 1).stream(3).words(64))
    assert not np.array_equal(key.derive("part", 1).stream(0).words(8),
                              key.derive("part", 2).stream(0).words(8))
    np.testing.assert_array_equal(NoiseKey.from_seed(1).stream(3).words(8), whole[:8])
    assert NoiseKey.from_seed(1).seeded and not NoiseKey.from_os_entropy().seeded
    assert NoiseKey.from_seed(1).derive("x").seeded
    assert not np.array_equal(NoiseKey.from_os_entropy().stream(0).words(4),
                              NoiseKey.from_os_entropy().stream(0).words(4))
    assert "seeded" in repr(key) and "0x" not in repr(key)
    # the bits are uniform: each of the 64 bit positions is set half the time (SE 0.5/sqrt(n))
    w = key.stream(9).words(40_000)
    ones = np.array([np.mean((w >> np.uint64(b)) & np.uint64(1)) for b in range(64)])
    assert np.all(np.abs(ones - 0.5) < 5 * 0.5 / math.sqrt(w.size))
    with pytest.raises(InvalidInputError):
        KeyStream(b"k" * 32, -1)
    with pytest.raises(InvalidInputError):
        NoiseKey.from_seed(-3)


# ------------------------------------------------------------------------------ sampler
@pytest.mark.parametrize("s", [0.6, 3.0, 40.0, 7000.0])
def test_sampler_matches_the_exact_pmf_chi_square(s):
    n = 200_000
    z, used = sample_numpy(words(int(s * 10), int(2.5 * n) + 64), sampler_tables(s), n)
    assert z.size == n
    zmax = int(math.ceil(7 * s)) + 2
    pmf = exact_pmf(s, zmax)
    support = np.arange(-zmax, zmax + 1)
    # cells of at least ~50 expected counts (pooled), tails pooled into the end cells
    edges = [0]
    acc = 0.0
    for i, q in enumerate(pmf):
        acc += q
        if acc * n >= 50:
            edges.append(i + 1)
            acc = 0.0
    edges[-1] = len(pmf)
    expected = np.array([pmf[a:b].sum() for a, b in zip(edges[:-1], edges[1:], strict=True)])
    expected[0] += (1 - pmf.sum()) / 2
    expected[-1] += (1 - pmf.sum()) / 2
    idx = np.searchsorted(support[np.array(edges[1:-1])], z, side="right")
    counts = np.bincount(idx, minlength=expected.size)
    stat = float(((counts - n * expected) ** 2 / (n * expected)).sum())
    df = expected.size - 1
    assert stat < chi2_limit(df), (stat, df)
    # the first two moments against the exact ones (SE of the mean s/sqrt(n), of the variance
    # sqrt(2) s^2 / sqrt(n))
    assert abs(z.mean()) < 5 * s / math.sqrt(n)
    assert abs(z.var() / discrete_gaussian_variance(s) - 1) < 5 * math.sqrt(2 / n)


def test_alias_tables_propose_the_envelope_exactly():
    t = sampler_tables(5000.0)
    prob = table_probabilities(t)
    used = 2 * t.shape.half_bins
    # the alias level proposes bin i with probability c_i / (n_bins 2^53): proportional to the
    # envelope weight exp(-z*^2/(2 s^2)) / rho_i, and the rest of the mass goes to empty bins
    weight = np.exp(-(t.near_abs[:used].astype(float) ** 2) * t.inv_two_s2) / t.correction[:used]
    np.testing.assert_allclose(prob[:used] / prob[:used].sum(), weight / weight.sum(), rtol=1e-12)
    assert 0.5 <= t.correction[:used].min() and t.correction[:used].max() <= 1.0
    assert prob.sum() == pytest.approx(1.0, abs=1e-15)


def test_kernel_gives_the_numpy_twin_bits_across_refills():
    from iwpfast._kernels import release as kernels

    law = law_for(2.0**-17, 9.8e5)
    noiser = DiscreteNoise(law)
    x = np.random.default_rng(0).uniform(-1, 1, 5000).astype(np.float32)
    a, b = x.copy(), x.copy()
    noiser.snap_add_numpy(a, WordBuffer(NoiseKey.from_seed(2).stream(0), 2 * 997))
    noiser.snap_add_kernel(kernels, b, WordBuffer(NoiseKey.from_seed(2).stream(0), 300))
    np.testing.assert_array_equal(a, b)


def test_outputs_are_exact_grid_points():
    p = 10
    names = tuple(f"x{j}" for j in range(p))
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, features=names,
                       ranges={f: (0.0, 1.0) for f in names})
    law = spec.feature_mechanism.discrete
    assert law.grid == 2.0**law.grid_log2 and law.grid / 2 <= 4e-6  # snapping moves <= 1.9e-6 * B
    X = np.random.default_rng(1).uniform(-0.2, 1.2, (20_000, p))
    Xt, _ = privatize(X, None, spec, seed=1)
    k = Xt.astype(np.float64) / law.grid
    np.testing.assert_array_equal(k, np.rint(k))           # every output on the grid
    assert np.abs(k).max() < 2**24                          # ... and exact in float32
    # float32 holds every grid point inside the sampler's support exactly
    assert (1 / law.grid + sampler_shape(law.s).support) <= 2**24


# ------------------------------------------------------------------------------ privacy
def _exact_profile(s, mu, epsilon, support=None):
    """delta(eps) = sum_z max(0, P(z) - e^eps P(z - mu)) by summation over the lattice."""
    zmax = int(math.ceil(10 * s)) + mu + 2 if support is None else support + mu + 2
    z = np.arange(-zmax, zmax + 1)
    log_theta = math.log(exact_pmf(s, 0)[0]) * -1  # P(0) = 1/Theta
    logp = -(z.astype(float) ** 2) / (2 * s * s) - log_theta
    logq = -((z - mu).astype(float) ** 2) / (2 * s * s) - log_theta
    if support is not None:  # the sampler's truncated law, renormalized
        inside = (z >= -support) & (z < support)
        insq = ((z - mu) >= -support) & ((z - mu) < support)
        norm = np.log(np.exp(logp[inside]).sum())
        logp = np.where(inside, logp - norm, -np.inf)
        logq = np.where(insq, logq - norm, -np.inf)
    diff = np.exp(logp) - np.exp(np.minimum(epsilon + logq, 700))
    return float(np.clip(diff, 0, None).sum())


@pytest.mark.parametrize("s, sens, eps", [(300.0, 600, 1.0), (2000.0, 1000, 0.5), (50.0, 400, 4.0)])
def test_exact_privacy_profile_is_bounded_by_the_accounting(s, sens, eps):
    printed = discrete_delta_grid(s, sens, eps, 1).total
    shape = sampler_shape(s)
    for mu in (sens, sens - 1, sens // 2):
        exact = _exact_profile(s, mu, eps)
        truncated = _exact_profile(s, mu, eps, support=shape.support)
        assert exact <= printed and truncated <= printed, (mu, exact, truncated, printed)
    # and the bound is tight at the largest shift (same order as the exact delta)
    assert printed < 1.5 * _exact_profile(s, sens, eps) + 1e-12


def test_exact_profile_of_a_released_coordinate_meets_the_printed_delta():
    # One feature, bound 1: the spec's grid and sigma; the worst neighbours differ by the
    # sensitivity after snapping, D = floor(2 B / grid) + 1 grid points.  The lattice sum runs
    # over ~2e7 points around the decision boundary in chunks.
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, features=("a",), ranges={"a": (0, 1)})
    law = spec.feature_mechanism.discrete
    s, mu, eps = law.s, int(2 / law.grid) + 1, 1.0
    # P(z) - e^eps P(z - mu) > 0 iff z < mu / 2 - eps s^2 / mu: sum the pmf difference there
    z_hi = int(math.floor(mu / 2 - eps * s * s / mu)) + 1
    start = z_hi - int(12 * s)
    log_theta = 0.5 * math.log(2 * math.pi) + math.log(s)  # exact to 1e-300 at this s
    total = 0.0
    for a in range(start, z_hi, 1 << 22):
        z = np.arange(a, min(a + (1 << 22), z_hi), dtype=np.float64)
        total += float(np.clip(np.exp(-z * z / (2 * s * s) - log_theta)
                               - np.exp(eps - (z - mu) ** 2 / (2 * s * s) - log_theta), 0, None).sum())
    assert total <= spec.delta
    assert total > 0.9 * spec.delta  # the accounting costs little: sigma is not much larger
    assert law.sigma / gaussian_noise_scale(1.0, 1e-5, 1.0) - 1 < 1e-3


def test_mironov_low_bits_attack_finds_nothing_on_the_discrete_release():
    # Single feature, eps = 1, bound 1, 1e5 rows per input value.  Event E = {|y| < 0.25 and y has
    # a bit finer than the float32 spacing of [0.5, 1) (2^-24)}.  On the float law E reveals
    # |v| < 0.5 (P(E | 0.3) ~ 0.014, P(E | 0.75) = 0); on the discrete law P(E | v) must agree for
    # the neighbours within 4 standard errors (binomial SEs added in quadrature).
    n = 100_000

    def release_constant(v, noise, seed):
        spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, features=("a",),
                           ranges={"a": (-1.0, 1.0)}, noise=noise)
        out, _ = privatize(np.full((n, 1), v), None, spec, seed=seed, engine="numpy")
        return out[:, 0].astype(np.float64)

    def event(y):
        fine = (y * 2.0**24) != np.rint(y * 2.0**24)
        return np.mean((np.abs(y) < 0.25) & fine)

    for noise in ("discrete", "float"):
        p_far, p_near = event(release_constant(0.75, noise, 1)), event(release_constant(0.3, noise, 2))
        se = math.sqrt(p_far * (1 - p_far) / n + p_near * (1 - p_near) / n) + 1 / n
        if noise == "discrete":
            assert abs(p_far - p_near) <= 4 * se, (p_far, p_near)
        else:  # the attack works on the float law: the test can fail
            assert p_near - p_far > 20 * se, (p_far, p_near)


def test_classic_calibration_refused_with_the_true_delta(tmp_path):
    for noise in ("discrete", "float"):
        with pytest.raises(InvalidInputError, match=r"delta=0\.0015.*--calibration analytic"):
            ReleaseSpec(epsilon_x=20.0, delta=1e-5, bound=1.0, calibration="classic", noise=noise)
    # where it holds (the exact condition), classic is accepted, with its own sigma
    with pytest.warns(UserWarning, match="proven only"):
        spec = ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.0, calibration="classic")
    assert spec.sigma >= math.sqrt(8 * math.log(1.25e5)) / 2.0
    assert analytic_gaussian_delta(20 * 0 + math.sqrt(2 * math.log(1.25e5)) * 2 / 20.0, 20.0, 2.0) \
        == pytest.approx(1.53e-3, rel=0.01)


def test_noise_metadata_and_learner_variance():
    from iwpfast.sgd.driver import noise_from_release

    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, features=("a", "b"),
                       ranges={"a": (0, 1), "b": (0, 1)})
    meta = spec.to_metadata(10)
    noise = meta["noise"]
    assert noise["law"] == "discrete_gaussian" and noise["grid"] == spec.feature_mechanism.grid
    assert noise["sigma"] == spec.sigma and noise["variance"] == pytest.approx(spec.sigma**2, rel=1e-12)
    assert meta["seeded"] is False
    found = noise_from_release(meta, ["b"])
    assert found.noise_var[0] == noise["variance"]
    fl = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, features=("a",), ranges={"a": (0, 1)},
                     noise="float").to_metadata(1)
    assert fl["noise"] == {"law": "float_gaussian", "grid": None, "sigma": fl["feature_noise_scale"][0],
                           "variance": fl["feature_noise_scale"][0] ** 2}
    assert "leaks low-order bits" in ReleaseSpec.from_metadata(fl).guarantee().statement
    # an old release (no "noise" key) was float noise
    old = dict(fl)
    del old["noise"]
    assert ReleaseSpec.from_metadata(old).noise == "float"
    edited = dict(meta, noise=dict(noise, variance=noise["variance"] * 1.01))
    with pytest.raises(Exception, match="noise.variance"):
        ReleaseSpec.from_metadata(edited)


# ------------------------------------------------------------------------------ independence
def test_noise_independent_across_threads_and_chunks(tmp_path):
    import pyarrow.parquet as pq

    from iwpfast.privacy import release

    n = 120_000
    X = np.full(n, 0.5)
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, features=("a",), ranges={"a": (0, 1)})
    out = tmp_path / "r.parquet"
    with pytest.warns(UserWarning, match="seeded"):
        release({"a": X}, out, spec, label=None, seed=4, record_batch_rows=40_000, threads=2)
    noise = pq.read_table(out)["a"].to_numpy().astype(np.float64)
    # 3 chunks x 2 thread parts of 20,000 rows: every pair of parts uncorrelated (SE 1/sqrt(m))
    parts = noise.reshape(6, 20_000)
    corr = np.corrcoef(parts)
    off = corr[~np.eye(6, dtype=bool)]
    assert np.all(np.abs(off) < 5 / math.sqrt(20_000))
    # no part repeats another's noise (identical streams would give identical values)
    assert len({p.tobytes() for p in parts}) == 6


# ------------------------------------------------------------------------------ IWP unbiased
@pytest.mark.parametrize("loss, theta, x, y, var, eps_y", [
    ("exponential", [0.4, -0.3, 0.2], [0.5, -0.25, 0.75], 1.0, 0.8, 1.0),
    ("quadratic", [0.6, -0.8], [0.5, -0.625], -1.0, 1.5, 0.5),
])
def test_monte_carlo_unbiasedness_on_discrete_releases(loss, theta, x, y, var, eps_y):
    # x on the grid 2^-10 (snapping is the identity); 100,000 discrete releases of one example;
    # |mean IWP gradient - clean gradient| <= 4 SE per coordinate (SE from the same draws).
    n = 100_000
    grid = 2.0**-10
    law = law_for(grid, math.sqrt(var) / grid)
    theta, x = np.array(theta), np.array(x)
    noiser = DiscreteNoise(law)
    buf = WordBuffer(NoiseKey.from_seed(17).stream(0))
    Xt = np.repeat(x[None, :], n, axis=0).T.copy()
    for row in Xt:
        noiser.snap_add_numpy(row, buf)
    Xt = Xt.T
    r = np.random.default_rng(5)
    yt = np.where(r.random(n) < 1 / (1 + math.exp(-eps_y)), y, -y)
    g = iwp_gradient(theta, Xt, yt, loss=loss, noise_var=law.variance, epsilon_y=eps_y)
    clean = iwp_gradient(theta, x[None, :], np.array([y]), loss=loss, noise_var=0.0,
                         correction="none")[0]
    se = g.std(axis=0, ddof=1) / math.sqrt(n)
    assert np.all(np.abs(g.mean(axis=0) - clean) <= 4 * se), (g.mean(axis=0), clean, se)
    # and the law's variance is sigma^2 to double precision at this scale
    assert law.variance == pytest.approx(var, rel=1e-15)
