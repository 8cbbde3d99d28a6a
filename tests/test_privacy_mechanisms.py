import math

import numpy as np
import pytest

from iwpfast.exceptions import InvalidInputError, ReleaseSpecError
from iwpfast.privacy import (
    GaussianFeatureMechanism,
    GaussianTargetMechanism,
    RandomizedResponse,
    ReleaseSpec,
    parse_ranges,
)
from iwpfast.privacy.discrete import WordBuffer
from iwpfast.privacy.randomness import NoiseKey

# Statistical checks below compare an estimate with its expectation and allow 5 standard errors
# (two-sided probability of a false alarm ~6e-7 per check); seeds are fixed.
Z = 5.0


def rng(seed=0):
    return np.random.Generator(np.random.SFC64(seed))


def source(noise, seed):
    """The randomness each law draws from: SFC64 (float) or an AES-CTR keystream (discrete)."""
    if noise == "float":
        return rng(seed)
    return WordBuffer(NoiseKey.from_seed(seed).stream(0))


def test_mechanism_validation_names_the_fix():
    with pytest.raises(InvalidInputError, match="epsilon_x"):
        GaussianFeatureMechanism(0, 1e-5, 1)
    with pytest.raises(InvalidInputError, match="delta"):
        GaussianFeatureMechanism(1, 2.0, 1)
    with pytest.raises(InvalidInputError, match="bound"):
        GaussianFeatureMechanism(1, 1e-5, 0)
    with pytest.raises(InvalidInputError, match="calibration"):
        GaussianFeatureMechanism(1, 1e-5, 1, calibration="nope")
    with pytest.raises(InvalidInputError, match="epsilon_y"):
        RandomizedResponse(-1)
    with pytest.raises(InvalidInputError, match="target_bound"):
        GaussianTargetMechanism(1, 1e-5, bound=-1)


@pytest.mark.parametrize("bound", [0.7, 2.05])  # most rows clipped (dense path) / few (gather path)
def test_clipping_never_exceeds_bound_and_keeps_short_vectors(bound):
    mech = GaussianFeatureMechanism(1.0, 1e-5, bound=bound)
    X = rng(1).uniform(-1, 1, size=(5, 20000)).astype(np.float32)
    X[:, :100] *= 0.01  # short vectors: untouched
    before = X.copy()
    clipped = mech.clip_(X)
    norms = np.sqrt((X.astype(np.float64) ** 2).sum(axis=0))
    assert norms.max() <= bound
    orig_norms = np.sqrt((before.astype(np.float64) ** 2).sum(axis=0))
    assert clipped == int((orig_norms > bound * (1 - 2**-20)).sum()) > 0
    np.testing.assert_array_equal(X[:, :100], before[:, :100])
    # clipping is a rescaling: direction kept
    long = orig_norms > bound
    cos = (X[:, long] * before[:, long]).sum(axis=0) / (norms[long] * orig_norms[long])
    assert np.all(cos > 1 - 1e-6)


def test_clip_shortcut_when_bound_covers_the_cube():
    mech = GaussianFeatureMechanism(1.0, 1e-5, bound=2.0)  # sqrt(4) = 2: the cube [-1,1]^4 fits
    X = np.ones((4, 10), dtype=np.float32)
    assert mech.clip_(X, coords_in_unit=True) == 0
    assert mech.clip_(X * 1.5) == 10  # without the promise the norm is checked


@pytest.mark.parametrize("noise", ["discrete", "float"])
def test_feature_noise_sd_and_mean(noise):
    mech = GaussianFeatureMechanism(1.0, 1e-5, bound=1.0, noise=noise, dims=3)
    n, p = 200_000, 3
    X = np.zeros((p, n), dtype=np.float32)
    X[0] = 0.5
    mech.add_noise_(X, source(noise, 2), np.empty_like(X))
    noise = X.astype(np.float64)
    noise[0] -= 0.5
    var = noise.var(axis=1)
    # sample variance SE: sigma^2 * sqrt(2/(n-1)); sample mean SE: sigma/sqrt(n)
    assert np.all(np.abs(var / mech.sigma**2 - 1) < Z * math.sqrt(2 / (n - 1)))
    assert np.all(np.abs(noise.mean(axis=1)) < Z * mech.sigma / math.sqrt(n))
    # independent coordinates
    corr = np.corrcoef(noise)[0, 1]
    assert abs(corr) < Z / math.sqrt(n)


def test_randomized_response_flip_rate():
    rr = RandomizedResponse(1.0)
    n = 400_000
    y = np.where(rng(3).random(n) < 0.3, 1, -1).astype(np.int8)
    out = rr.apply(y, rng(4))
    assert set(np.unique(out)) <= {-1, 1}
    q = 1 - rr.keep_probability
    flip = float(np.mean(out != y))
    assert abs(flip - q) < Z * math.sqrt(q * (1 - q) / n)  # binomial SE


def test_randomized_response_neighbour_probability_ratio():
    # diffprivlib's test_neighbors_prob idea: for neighbours y=+1 and y'=-1 and the output set
    # {+1}, P[out=+1 | +1] / P[out=+1 | -1] must be <= e^eps (and equals it for RR).
    eps = 1.3
    rr = RandomizedResponse(eps)
    n = 400_000
    p1 = np.mean(rr.apply(np.ones(n, np.int8), rng(5)) == 1)
    p0 = np.mean(rr.apply(-np.ones(n, np.int8), rng(6)) == 1)
    ratio = p1 / p0
    # delta method: relative SE of the ratio = sqrt(SE1^2/p1^2 + SE0^2/p0^2)
    rel_se = math.sqrt((1 - p1) / (n * p1) + (1 - p0) / (n * p0))
    assert ratio <= math.exp(eps) * (1 + Z * rel_se)
    assert ratio >= math.exp(eps) * (1 - Z * rel_se)


@pytest.mark.parametrize("noise", ["discrete", "float"])
def test_gaussian_neighbour_probability_on_half_spaces(noise):
    # Empirical neighbour check: x and x' at opposite ends of the ball (distance 2B); for the
    # half-spaces C = {t > c} along x - x', P[M(x) in C] <= e^eps P[M(x') in C] + delta must hold
    # up to sampling error (5 SE of the difference; the binomial SEs add).
    eps, delta, bound = 1.0, 1e-5, 1.0
    mech = GaussianFeatureMechanism(eps, delta, bound, noise=noise)
    n = 400_000
    a = np.full((1, n), bound, np.float32)
    b = np.full((1, n), -bound, np.float32)
    mech.add_noise_(a, source(noise, 7), np.empty_like(a))
    mech.add_noise_(b, source(noise, 8), np.empty_like(b))
    for c in np.linspace(-2 * mech.sigma, 3 * mech.sigma, 11):
        pa, pb = np.mean(a > c), np.mean(b > c)
        se = math.sqrt(pa * (1 - pa) / n + math.exp(2 * eps) * pb * (1 - pb) / n)
        assert pa <= math.exp(eps) * pb + delta + Z * se


@pytest.mark.parametrize("noise", ["discrete", "float"])
def test_target_mechanism_clips_and_noises(noise):
    mech = GaussianTargetMechanism(1.0, 1e-5, bound=0.5, noise=noise)
    n = 200_000
    t = np.full(n, 0.9)
    clipped = mech.apply_(t, source(noise, 9))
    assert clipped == n
    assert abs(t.mean() - 0.5) < Z * mech.sigma / math.sqrt(n)
    assert abs(t.var() / mech.sigma**2 - 1) < Z * math.sqrt(2 / (n - 1))


def test_parse_ranges_forms_and_errors():
    assert parse_ranges("AGEP=0:99,SCHL=1:24") == {"AGEP": (0.0, 99.0), "SCHL": (1.0, 24.0)}
    assert parse_ranges(["A=-1.5:2", "B=1e3:2e3"]) == {"A": (-1.5, 2.0), "B": (1000.0, 2000.0)}
    assert parse_ranges({"A": (0, 1)}) == {"A": (0.0, 1.0)}
    with pytest.raises(InvalidInputError, match="NAME=LO:HI"):
        parse_ranges("AGEP:0:99")
    with pytest.raises(InvalidInputError, match="lo < hi"):
        parse_ranges("AGEP=5:5")
    with pytest.raises(InvalidInputError, match="twice"):
        parse_ranges("A=0:1 A=0:2")


def test_spec_guarantee_composes_budgets():
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=0.5, features=("a", "b"),
                       ranges="a=0:1,b=0:1", label="y")
    g = spec.guarantee()
    assert (g.epsilon, g.delta) == (1.5, 1e-5)
    assert "(1.5, 1e-05)" in g.statement and "randomized response" in g.statement
    assert "\n" not in g.statement
    public = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, features=("a",), ranges="a=0:1", label="y")
    assert public.guarantee().epsilon == 1.0 and "WITHOUT noise" in public.guarantee().statement
    reg = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, delta_y=1e-6, task="regression",
                      features=("a",), ranges="a=0:1", label="t", target_range=(0, 10))
    assert (reg.guarantee().epsilon, reg.guarantee().delta) == (2.0, pytest.approx(1.1e-5))


def test_spec_metadata_round_trip_and_no_seed():
    spec = ReleaseSpec(epsilon_x=0.7, delta=1e-6, bound=1.5, epsilon_y=1.1, features=("a", "b"),
                       ranges="a=0:99,b=-1:1", label="y", calibration="classic")
    meta = spec.to_metadata(row_count=42)
    assert "seed" not in meta
    back = ReleaseSpec.from_metadata(spec.to_json(42))
    assert back == spec and back.row_count == 42
    assert back.sigma == spec.sigma and back.label_keep_prob == spec.label_keep_prob
    assert meta["feature_noise_scale"] == [spec.sigma, spec.sigma]


def test_spec_metadata_tampering_detected():
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=("a",),
                       ranges="a=0:1", label="y")
    meta = spec.to_metadata(10)
    meta["feature_noise_scale"] = [1.0]
    with pytest.raises(ReleaseSpecError, match="inconsistent"):
        ReleaseSpec.from_metadata(meta)
    meta = spec.to_metadata(10)
    del meta["epsilon_x"]
    with pytest.raises(ReleaseSpecError, match="epsilon_x"):
        ReleaseSpec.from_metadata(meta)
    with pytest.raises(ReleaseSpecError, match="JSON"):
        ReleaseSpec.from_metadata("{not json")


def test_spec_missing_ranges_names_them():
    with pytest.raises(InvalidInputError, match=r"SCHL.*SCHL=LO:HI"):
        ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, features=("AGEP", "SCHL"), ranges="AGEP=0:99")
    with pytest.raises(InvalidInputError, match="target_range"):
        ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1, task="regression",
                    features=("a",), ranges="a=0:1", label="t")


def test_discrete_mechanism_refuses_more_coordinates_than_calibrated():
    # the snapping term sqrt(p) of the sensitivity depends on the number of coordinates
    mech = GaussianFeatureMechanism(1.0, 1e-5, bound=1.0, dims=2)
    with pytest.raises(InvalidInputError, match="dims=3"):
        mech.add_noise_(np.zeros((3, 10)), NoiseKey.from_seed(1))
    assert GaussianFeatureMechanism(1.0, 1e-5, bound=1.0, dims=10).sigma > mech.sigma
