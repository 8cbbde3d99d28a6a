"""The fused release kernels (iwpfast/_kernels/release.py) against their NumPy twin.

The fused path consumes the random streams exactly as the NumPy path does and rounds the same way,
so for the same seed both must give the same bits.  Small sizes: CI runs these again with
NUMBA_DISABLE_JIT=1, where the kernels are plain Python loops.
"""
import importlib
import math
import subprocess
import sys

import numpy as np
import pytest

from iwpfast.exceptions import InvalidInputError
from iwpfast.privacy import ReleaseSpec, privatize, release

# the modules of the release (``iwpfast.privacy.release`` the attribute is the function)
release_module = importlib.import_module("iwpfast.privacy.release")
privatizer_module = importlib.import_module("iwpfast.privacy.privatizer")
noise_laws_module = importlib.import_module("iwpfast.privacy.noise_laws")

pytestmark = pytest.mark.kernels

RANGES = {"a": (0.0, 100.0), "b": (-5.0, 5.0), "c": (17.0, 95.0), "d": (0.0, 1.0), "e": (1.0, 2.0)}


@pytest.fixture
def small_blocks(monkeypatch):
    # Blocks of 1024 rows, two threads from 2000 rows, label blocks of 700: a few thousand rows
    # then cover several blocks per part, ragged last blocks and both streams.
    monkeypatch.setattr(privatizer_module, "_SUB_VALUES", 4096)
    monkeypatch.setattr(privatizer_module, "_MIN_ROWS_PER_THREAD", 1000)
    monkeypatch.setattr(noise_laws_module, "_LABEL_SUB_ROWS", 700)
    # keystream buffers of 300 words: the discrete sampler refills in the middle of columns
    monkeypatch.setattr(noise_laws_module, "_WORD_BUFFER", 300)


def mixed_columns(n, seed=0):
    """One column per raw dtype the kernels compile for, some values outside their ranges."""
    r = np.random.default_rng(seed)
    return {
        "a": r.uniform(-10, 110, n).astype(np.float32),
        "b": r.normal(0, 4, n),  # float64
        "c": r.integers(10, 99, n),  # int64
        "d": r.integers(0, 2, n).astype(bool),
        "e": r.integers(1, 3, n).astype(np.int8),
    }


def make_spec(bound, names, noise="discrete"):
    return ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=bound, epsilon_y=1.0,
                       ranges={k: RANGES[k] for k in names}, features=tuple(names), label="y",
                       noise=noise)


# bound 0.5 clips almost every vector, 1.2 some, 3 none (>= sqrt(5): the norm pass is skipped)
@pytest.mark.parametrize("bound", [0.5, 1.2, 3.0])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("labels", ["01", "pm1", "bool"])
@pytest.mark.parametrize("noise", ["discrete", "float"])
@pytest.mark.filterwarnings("ignore:values outside the declared ranges")
def test_fused_gives_the_numpy_bits(small_blocks, bound, threads, labels, noise):
    n = 4321
    X = mixed_columns(n)
    r = np.random.default_rng(1)
    y = r.integers(0, 2, n)
    y = {"01": y, "pm1": 2 * y - 1, "bool": y.astype(bool)}[labels]
    spec = make_spec(bound, list(X), noise)
    fused_X, fused_y = privatize(X, y, spec, seed=5, threads=threads, engine="numba")
    numpy_X, numpy_y = privatize(X, y, spec, seed=5, threads=threads, engine="numpy")
    np.testing.assert_array_equal(fused_X, numpy_X)
    np.testing.assert_array_equal(fused_y, numpy_y)
    # the labels were really randomized (a fused path that skipped the flip would still be
    # {-1, +1}): the flip rate q = 0.269 at eps_y = 1, n = 4321 has a standard error of 0.0067
    flips = np.mean(fused_y != (2 * np.asarray(y, dtype=np.int64) - 1 if labels != "pm1" else y))
    q = 1 - spec.label_keep_prob
    assert abs(flips - q) < 5 * math.sqrt(q * (1 - q) / n)


@pytest.mark.filterwarnings("ignore:values outside the declared ranges")
def test_fused_release_counts_match_numpy(small_blocks, tmp_path):
    import pyarrow.parquet as pq

    X = mixed_columns(3000, seed=2)
    X["y"] = np.random.default_rng(3).integers(0, 2, 3000)
    spec = make_spec(0.7, [k for k in X if k != "y"])
    results = {}
    for kernel in ("fused", "numpy"):
        out = tmp_path / f"{kernel}.parquet"
        res = release(X, out, spec, seed=8, threads=2, record_batch_rows=1500, engine=kernel)
        results[kernel] = (res, pq.read_table(out))
    (fr, ft), (nr, nt) = results["fused"], results["numpy"]
    assert ft.equals(nt)
    assert fr.rows_clipped == nr.rows_clipped > 0
    assert fr.values_out_of_range == nr.values_out_of_range


def test_fused_pre_noise_vectors_within_bound(small_blocks, monkeypatch):
    # sigma = 0 in the final pass: the output is exactly the clipped pre-noise vector
    from iwpfast._kernels import release as kernels

    real_finish = kernels.finish_f32
    monkeypatch.setattr(kernels, "finish_f32",
                        lambda raw, mid, inv_half, factor, use, sigma, out:
                        real_finish(raw, mid, inv_half, factor, use, np.float32(0.0), out))
    n = 3000
    r = np.random.default_rng(4)
    X = {"a": r.uniform(0, 100, n).astype(np.float32), "c": r.integers(17, 96, n),
         "e": r.integers(1, 3, n).astype(np.int8)}
    bound = 0.8
    released, _ = privatize(X, None, make_spec(bound, list(X), "float"), seed=1, threads=2,
                            engine="numba")
    ref = np.array([np.clip((X[k] - np.mean(RANGES[k])) / (np.diff(RANGES[k])[0] / 2), -1, 1)
                    for k in X])
    norms = np.sqrt((ref**2).sum(axis=0))
    ref *= np.minimum(1.0, bound / norms)
    got = released.T.astype(np.float64)
    assert np.sqrt((got**2).sum(axis=0)).max() <= bound
    np.testing.assert_allclose(got, ref, atol=2e-6)
    assert (norms > bound).sum() > n // 2  # the clipping branch really ran


def test_clip_factors_kernel():
    from iwpfast._kernels import release as kernels

    norm2 = np.array([0.0, 0.25, 1.0, 4.0, 100.0])
    factor = np.empty(5, dtype=np.float32)
    count = kernels.clip_factors_f32(norm2, 1.0, factor)
    assert count == 2
    np.testing.assert_array_equal(factor, np.array([1, 1, 1, 0.5, 0.1], dtype=np.float32))


def test_kernel_choice():
    choose = privatizer_module._use_fused_kernels
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    assert choose("auto", f32, release_module.FUSED_MIN_ROWS)
    # below the cold threshold: only once the kernels are loaded in this process
    assert not choose("auto", f32, release_module.FUSED_WARM_MIN_ROWS - 1)
    from iwpfast._kernels import release as kernels

    X = {"a": np.linspace(0, 100, 50, dtype=np.float32)}
    privatize(X, None, make_spec(1.0, ["a"]), seed=0, engine="numba")
    compiled = hasattr(kernels.finish_f32, "signatures")  # False with NUMBA_DISABLE_JIT=1
    assert privatizer_module._kernels_loaded() == compiled
    assert choose("auto", f32, release_module.FUSED_WARM_MIN_ROWS) == compiled
    assert choose("auto", f32, None)  # unknown length (a stream): large is likely
    assert not choose("auto", f64, None)
    assert choose("numba", f32, 10) and choose("fused", f32, 10) and not choose("numpy", f32, None)
    with pytest.raises(InvalidInputError, match="float32 only"):
        choose("numba", f64, 10)
    with pytest.raises(InvalidInputError, match="engine='gpu'; use one of 'auto', 'numba', 'numpy'"):
        choose("gpu", f32, 10)


def test_import_does_not_load_the_kernels():
    code = ("import sys, iwpfast, iwpfast.privacy; "
            "print('iwpfast._kernels.release' in sys.modules, 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split()[0] == "False"


def test_unsupported_raw_dtype_falls_back_to_numpy(small_blocks):
    # float16 columns are not compiled for: that part takes the NumPy path, with the same bits
    n = 3000
    r = np.random.default_rng(6)
    X = {"a": r.uniform(0, 100, n).astype(np.float16), "c": r.integers(17, 96, n)}
    y = r.integers(0, 2, n)
    spec = make_spec(0.9, list(X))
    fused_X, fused_y = privatize(X, y, spec, seed=2, threads=2, engine="numba")
    numpy_X, numpy_y = privatize(X, y, spec, seed=2, threads=2, engine="numpy")
    np.testing.assert_array_equal(fused_X, numpy_X)
    np.testing.assert_array_equal(fused_y, numpy_y)
