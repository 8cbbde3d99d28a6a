"""The privacy audit's confirmations, re-run at the audit's scale (slow-marked: run with -m slow).

An independent audit checked the written bits with its own code, not the library's.  These tests
do the same, so that a later change which breaks one of its findings fails here:

- the structured sensitivity of a release with one-hot blocks: hundreds of thousands of
  adversarial neighbour pairs, mapped and snapped to the grid by code written here from the
  formulas (and checked against the library's map on a sample), never farther apart than the
  ``sensitivity_grid_units`` that the release's metadata states;
- the discrete law's delta: its Gaussian term recomputed here from the metadata's own numbers
  (the analytic Gaussian mechanism's privacy profile, written with math.erfc), and the total
  at most the declared delta;
- k-ary randomized response on a written file: every (true, written) cell's frequency against the
  keep and flip probabilities the metadata states, with a Bonferroni bound over the cells.
"""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iwpfast.exceptions import PrivacyLeakWarning
from iwpfast.privacy import ReleaseSpec, release

pytestmark = pytest.mark.slow

RANGE = (0.0, 10.0)
NUMERIC = [f"x{j}" for j in range(4)]
CATEGORIES = {f"c{i}": ["u", "v", "w", "z"] for i in range(3)}


def _metadata(path) -> dict:
    return json.loads(pq.read_schema(path).metadata[b"iwpfast.release"])


def _release_small(tmp_path, bound: float, **spec_kw) -> dict:
    """A small seeded release of the spec under test; its metadata (the thing checked)."""
    rng = np.random.default_rng(0)
    n = 500
    table = pa.table({**{f: rng.uniform(*RANGE, n) for f in NUMERIC},
                      **{c: rng.choice(v, n) for c, v in CATEGORIES.items()},
                      "y": rng.integers(0, 2, n)})
    spec = ReleaseSpec(epsilon_x=3.0, epsilon_y=2.0, delta=1e-5, bound=bound,
                       ranges={f: RANGE for f in NUMERIC}, categories=CATEGORIES, **spec_kw)
    out = tmp_path / "rel.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)   # seeded: a simulation
        release(table, out, spec, features=[*NUMERIC, *CATEGORIES], label="y", seed=1)
    return _metadata(out)


#: the release clips 2^-20 inside the ball, against rounding (docs/release.md, step 2)
CLIP_INSIDE = 1.0 - 2.0**-20


def _own_snapped(raw: np.ndarray, codes: np.ndarray, bound: float, grid: float,
                 target: float = 1.0) -> np.ndarray:
    """Rows -> released clean coordinates in grid units, from the formulas: each numeric value
    scaled from its range into [-1, 1] (clipped), the numeric part clipped to the L2 ball of
    ``bound`` (onto radius ``target * bound``: 1, exactly on the bound, is the worst case a
    sensitivity check needs; the library aims ``CLIP_INSIDE``), each categorical column one-hot
    (0/1), every coordinate snapped to the nearest grid point (ties to even)."""
    lo, hi = RANGE
    s = np.clip((raw - lo) / (hi - lo) * 2.0 - 1.0, -1.0, 1.0)
    norm = np.linalg.norm(s, axis=1, keepdims=True)
    limit = bound * target
    s = np.where(norm > limit, s * (limit / np.maximum(norm, 1e-300)), s)
    width = len(next(iter(CATEGORIES.values())))
    onehot = np.zeros((len(codes), codes.shape[1] * width))
    for i in range(codes.shape[1]):
        onehot[np.arange(len(codes)), i * width + codes[:, i]] = 1.0
    return np.rint(np.hstack([s, onehot]) / grid)


def _adversarial_pairs(n: int, bound: float, grid: float, rng):
    """Pairs on opposite sides of the ball's edge, each coordinate a hair inside a half-grid
    point so that snapping pushes it outward (the snapping's worst case), near the diagonal
    directions where that push adds up, with every categorical column different."""
    k = len(NUMERIC)
    signs = rng.choice([-1.0, 1.0], size=(n, k))
    u = 1.0 / math.sqrt(k) + rng.normal(0.0, 0.02, size=(n, k))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    # each coordinate a hair (1e-3 grid units) beyond the half-grid point below N_j, so that
    # it snaps outward to N_j, with N_j as large as the ball allows (raised one coordinate at a
    # time while the pre-snap point stays inside the ball)
    target = np.abs(u) * bound / grid
    n_out = np.floor(target + 0.5 - 1e-3)
    for j in range(k):
        up = n_out.copy()
        up[:, j] += 1.0
        inside = np.linalg.norm((up - 0.5 + 1e-3) * grid, axis=1) <= bound * (1.0 - 1e-12)
        n_out[inside] = up[inside]
    x = signs * (n_out - 0.5 + 1e-3) * grid
    lo, hi = RANGE
    to_raw = lambda s: lo + (s + 1.0) * (hi - lo) / 2.0        # noqa: E731
    m = len(CATEGORIES)
    width = len(next(iter(CATEGORIES.values())))
    codes = rng.integers(0, width, size=(n, m))
    other = (codes + rng.integers(1, width, size=(n, m))) % width
    return (to_raw(x), codes), (to_raw(-x), other)


@pytest.mark.parametrize("bound", [1.0, 1.5])  # the 4 numeric columns reach the ball
def test_structured_sensitivity_holds_on_adversarial_pairs(tmp_path, bound):
    meta = _release_small(tmp_path, bound)
    noise = meta["noise"]
    grid, stated = noise["grid"], noise["delta_terms"]["sensitivity_grid_units"]
    rng = np.random.default_rng(2026)
    worst = 0.0
    for _ in range(6):                                      # 6 x 90,000 = 540,000 pairs
        (raw_a, codes_a), (raw_b, codes_b) = _adversarial_pairs(90_000, bound, grid, rng)
        a = _own_snapped(raw_a, codes_a, bound, grid)
        b = _own_snapped(raw_b, codes_b, bound, grid)
        worst = max(worst, float(np.linalg.norm(a - b, axis=1).max()))
    # nothing farther than the metadata says ...
    assert worst <= stated * (1 + 1e-12), (worst, stated)
    # ... and the construction does reach the bound's neighbourhood (else it tests nothing): the
    # continuous worst pair is sqrt(4 B^2 + 2 m) / grid, the snapping adds up to sqrt(k) on top
    continuous = math.sqrt(4 * bound**2 + 2 * len(CATEGORIES)) / grid
    assert worst > continuous + 0.5, (worst, continuous, stated)


def test_own_map_is_the_library_s(tmp_path):
    """The formulas above are the library's map: the same grid points on adversarial rows."""
    from iwpfast.privacy.feature_map import FeatureMap  # noqa: F401  (the map the spec builds)

    bound = 1.0
    spec = ReleaseSpec(epsilon_x=3.0, epsilon_y=2.0, delta=1e-5, bound=bound,
                       features=[*NUMERIC, *CATEGORIES], ranges={f: RANGE for f in NUMERIC},
                       categories=CATEGORIES)
    grid = spec.feature_mechanism.discrete.grid
    (raw, codes), _ = _adversarial_pairs(20_000, bound, grid, np.random.default_rng(7))
    cats = next(iter(CATEGORIES.values()))
    table = pa.table({**{f: raw[:, j] for j, f in enumerate(NUMERIC)},
                      **{c: np.asarray(cats)[codes[:, i]] for i, c in enumerate(CATEGORIES)}})
    library = np.rint(np.array(spec.feature_map.transform(table, bound)).T / grid)
    np.testing.assert_array_equal(library, _own_snapped(raw, codes, bound, grid, CLIP_INSIDE))


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


@pytest.mark.parametrize("bound", [1.0, 1.5])  # the 4 numeric columns reach the ball
def test_discrete_delta_recomputed_from_the_metadata(tmp_path, bound):
    meta = _release_small(tmp_path, bound)
    noise, eps = meta["noise"], meta["epsilon_x"]
    terms = noise["delta_terms"]
    s, d, eta = noise["scale_grid_units"], terms["sensitivity_grid_units"], terms["eta"]
    eps0 = eps - 2.0 * eta
    a, b = d / (2.0 * s), eps0 * s / d
    gaussian = math.exp(eta) * (_phi(a - b) - math.exp(eps0) * _phi(-a - b))
    assert gaussian == pytest.approx(terms["gaussian"], rel=1e-7)
    total = terms["gaussian"] + terms["sampler_edge"] + terms["gaussian_tail"]
    assert total == pytest.approx(terms["total"], rel=1e-12)
    assert total <= meta["delta_x"]
    assert meta["guarantee"]["delta"] == meta["delta_x"]
    assert meta["guarantee"]["epsilon"] == pytest.approx(eps + meta["epsilon_y"], rel=1e-15)


@pytest.mark.parametrize("k, eps", [(3, 1.0), (5, 2.0), (8, 0.5)])
def test_kary_rates_on_the_written_file_match_the_metadata(tmp_path, k, eps):
    n = 400_000
    rng = np.random.default_rng(k)
    truth = rng.integers(0, k, n)
    classes = [f"k{i}" for i in range(k)]
    table = pa.table({"a": rng.uniform(-1, 1, n), "y": np.asarray(classes)[truth]})
    spec = ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=eps,
                       ranges={"a": (-1, 1)}, classes=classes)
    out = tmp_path / "rel.parquet"
    release(table, out, spec, features=["a"], label="y")     # OS entropy, as a data holder would
    meta = _metadata(out)
    q, r = meta["label_keep_prob"], meta["label_other_prob"]
    assert q == pytest.approx(math.exp(eps) / (math.exp(eps) + k - 1), rel=1e-14)
    written = pq.read_table(out).column("y").to_numpy().astype(np.int64)
    counts = np.zeros((k, k))
    np.add.at(counts, (truth, written), 1.0)
    rows = counts.sum(axis=1, keepdims=True)
    p = np.full((k, k), r) + np.eye(k) * (q - r)
    z = (counts / rows - p) / np.sqrt(p * (1 - p) / rows)
    # Bonferroni over the k^2 cells: |z| <= 5.5 has a two-sided false-alarm probability of
    # 3.8e-8 per cell, under 3e-6 for the whole table at k = 8
    assert np.abs(z).max() <= 5.5, z
