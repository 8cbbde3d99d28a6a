"""The noise law of a release as a strategy: where its randomness comes from and how it is added.

The privatizer (``iwpfast.privacy.privatizer``) scales, clips and hands each block to the law;
the law owns one random source per thread part and knows how to

- add its noise to a clipped block in NumPy (``add_numpy``) or finish a block with the fused
  kernels (``finish_fused``: noise plus the clipped value straight into the output row),
- draw the label randomness: binary randomized response (NumPy and fused), the uniforms of k-ary
  randomized response, the stream of a regression target's noise.

Three laws today, chosen by ``spec.mechanism`` and ``spec.noise`` through their records in
``iwpfast.noise_registry`` (``law_class``):

- :class:`FloatGaussianLaw` (``noise="float"``): ``Generator(SFC64)`` per thread part, seeded by
  ``SeedSequence.spawn``;
- :class:`DiscreteGaussianLaw` (``noise="discrete"``): the exact discrete Gaussian on a
  power-of-two grid, from AES-CTR keystreams ``key.stream(chunk * MAX_THREADS + part)``.

- :class:`DiscreteLaplaceLaw` (``mechanism="laplace"``): the exact discrete Laplace sampler
  (``iwpfast.privacy.laplace``, pure epsilon), on the same keystreams.

A new law is one more class here (or an existing one reused) named by its record in
``iwpfast.noise_registry``, which also holds its calibration (``iwpfast.privacy.mechanisms`` for
the Gaussian variants; ``iwpfast.privacy.laplace`` calibrates its own mechanism).  Every law consumes
its streams in the same order on the NumPy and the kernel paths, so both give the same bits for
the same seed.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..noise_registry import law_record, resolve
from .discrete import DiscreteNoise, WordBuffer
from .randomness import NoiseKey

# Keystream words per thread buffer (256 KiB: refilled by AES-CTR in place, read while in L2).
_WORD_BUFFER = 1 << 15
# Stream ids of the discrete law are chunk * _MAX_THREADS + thread part.
_MAX_THREADS = 1 << 10
_LABEL_SUB_ROWS = 1 << 15
# engine="auto" uses the NumPy path below FUSED_MIN_ROWS rows in a process whose release kernels
# are not loaded yet: the first Numba dispatch in a process (LLVM set-up, loading the cached
# machine code) takes ~0.4-0.8 s, and the fused path saves ~40 ns of CPU (~20 ns wall on 2
# threads) per row at p = 10, so it pays for itself from ~10-25 M rows (docs/release.md "Speed").
# Once loaded (a second release in the same process), the kernels run from FUSED_WARM_MIN_ROWS.
FUSED_MIN_ROWS = 1 << 24
FUSED_WARM_MIN_ROWS = 1 << 16
# The discrete law's NumPy twin costs ~45 ns a value against ~10 ns for its kernel: at p = 10 the
# kernels save ~0.35 us a row and pay for their set-up from ~2 M rows.
DISCRETE_FUSED_MIN_ROWS = 1 << 21


class NoiseLaw:
    """One release's noise: a random source per thread part and the ways to add it."""

    #: engine="auto": rows from which the kernels pay for their set-up in a fresh process
    cold_min_rows: ClassVar[int] = FUSED_MIN_ROWS
    #: whether engine="numba" requires float32 output (else float64 falls back to NumPy scaling)
    kernels_need_float32: ClassVar[bool] = True
    #: whether the law has fused (scale, clip and noise in one pass) float32 kernels
    has_fused: ClassVar[bool] = True

    def __init__(self, spec, seed, n_threads: int, fused: bool):
        self.spec = spec
        self.n_threads = n_threads
        self.fused = fused

    def start_chunk(self, chunk_index: int, parts: int) -> None:
        """Called once per chunk before its parts run (a law may key its streams by chunk)."""

    def stream(self, k: int) -> Any:
        """The random source of thread part ``k`` (what a mechanism's ``apply_`` draws from)."""
        raise NotImplementedError

    def uniforms(self, k: int) -> Any:
        """An object with ``random(n)`` (float64 uniforms) for thread part ``k``."""
        raise NotImplementedError

    def add_numpy(self, k: int, X: np.ndarray, mech, scratch: np.ndarray, kernels) -> None:
        """Add the noise to the clipped block ``X`` (p, m) in place."""
        raise NotImplementedError

    def finish_fused(self, K, k: int, features, s: int, e: int, mids, inv_half, factor,
                     clip: bool, out: np.ndarray, mech) -> None:
        """Rows ``s:e`` of every column: noise and the scaled, clipped value into ``out``."""
        raise NotImplementedError

    def randomized_response(self, k: int, y_out: np.ndarray, lm) -> None:
        """Binary randomized response of the -1/+1 labels ``y_out`` in place (NumPy)."""
        raise NotImplementedError

    def randomized_response_fused(self, K, k: int, y: np.ndarray, zero_one: bool,
                                  y_out: np.ndarray, lm) -> None:
        """Binary randomized response of the raw labels ``y`` into ``y_out`` (kernel)."""
        raise NotImplementedError


class FloatGaussianLaw(NoiseLaw):
    """Float Gaussian noise from one ``Generator(SFC64)`` per thread part."""

    def __init__(self, spec, seed, n_threads: int, fused: bool):
        super().__init__(spec, seed, n_threads, fused)
        if isinstance(seed, NoiseKey):  # a derived key for a float release: its first words seed SFC64
            seed = np.random.SeedSequence([int(w) for w in seed.stream(0).words(4)])
        seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
        self.rngs = [np.random.Generator(np.random.SFC64(s)) for s in seq.spawn(n_threads)]
        # per thread: float64 uniforms for the fused labels
        self.label_uniforms = ([np.empty(_LABEL_SUB_ROWS, dtype=np.float64) for _ in range(n_threads)]
                               if fused else [])

    def stream(self, k):
        return self.rngs[k]

    def uniforms(self, k):
        return self.rngs[k]

    def add_numpy(self, k, X, mech, scratch, kernels):
        p, m = X.shape
        mech.add_noise_(X, self.rngs[k], scratch[: p * m].reshape(p, m))

    def finish_fused(self, K, k, features, s, e, mids, inv_half, factor, clip, out, mech):
        rng = self.rngs[k]
        sigma = np.float32(mech.sigma)
        for j in range(out.shape[0]):
            row = out[j, s:e]
            rng.standard_normal(dtype=np.float32, out=row)
            K.finish_f32(features[j][s:e], mids[j], inv_half[j], factor, clip, sigma, row)

    def randomized_response(self, k, y_out, lm):
        lm.apply(y_out, self.rngs[k], out=y_out)

    def randomized_response_fused(self, K, k, y, zero_one, y_out, lm):
        # the same float64 uniforms as RandomizedResponse.apply
        keep_probability = lm.keep_probability
        uniforms = self.label_uniforms[k]
        rng = self.rngs[k]
        for s in range(0, y.shape[0], _LABEL_SUB_ROWS):
            e = min(s + _LABEL_SUB_ROWS, y.shape[0])
            u = uniforms[: e - s]
            rng.random(out=u)
            K.randomized_response(y[s:e], zero_one, u, keep_probability, y_out[s:e])


class _KeystreamLaw(NoiseLaw):
    """A law whose randomness (features and labels) is AES-CTR keystreams, fresh ones for every
    chunk: ``key.stream(chunk * MAX_THREADS + part)``, read through one ``WordBuffer`` per part."""

    kernels_need_float32 = False

    def __init__(self, spec, seed, n_threads: int, fused: bool):
        super().__init__(spec, seed, n_threads, fused)
        self.key = NoiseKey.coerce(seed)
        self.word_store = [np.empty(_WORD_BUFFER, dtype=np.uint64) for _ in range(n_threads)]
        self.buffers: list[WordBuffer] = []

    def start_chunk(self, chunk_index, parts):
        # fresh keystreams for this chunk: independent of every other chunk's
        base = chunk_index * _MAX_THREADS
        self.buffers = [WordBuffer(self.key.stream(base + k), storage=self.word_store[k])
                        for k in range(parts)]

    def stream(self, k):
        return self.buffers[k]

    def uniforms(self, k):
        return _KeystreamUniforms(self.buffers[k])

    def randomized_response(self, k, y_out, lm):
        rng = self.buffers[k]
        for s in range(0, y_out.shape[0], _LABEL_SUB_ROWS):
            e = min(s + _LABEL_SUB_ROWS, y_out.shape[0])
            lm.apply_words(y_out[s:e], rng.take(e - s))

    def randomized_response_fused(self, K, k, y, zero_one, y_out, lm):
        # the same keystream words as RandomizedResponse.apply_words
        buf = self.buffers[k]
        threshold = np.uint64(lm.keep_threshold)
        for s in range(0, y.shape[0], _LABEL_SUB_ROWS):
            e = min(s + _LABEL_SUB_ROWS, y.shape[0])
            K.randomized_response_words(y[s:e], zero_one, buf.take(e - s), threshold, y_out[s:e])


class DiscreteLaplaceLaw(_KeystreamLaw):
    """The exact discrete Laplace sampler (``iwpfast.privacy.laplace``): pure epsilon.  No fused
    path: the privatizer scales and L1-clips in NumPy, the law snaps, clips in integers and adds
    the noise with the kernel ``laplace_add`` (its twin, plain Python, with engine='numpy')."""

    has_fused = False
    cold_min_rows = 0                       # the twin is slow (Python per value): kernels always

    def add_numpy(self, k, X, mech, scratch, kernels):
        mech.add_noise_(X, self.buffers[k], kernels)


class DiscreteGaussianLaw(_KeystreamLaw):
    """The exact discrete Gaussian from AES-CTR keystreams, fresh ones for every chunk."""

    cold_min_rows = DISCRETE_FUSED_MIN_ROWS

    def __init__(self, spec, seed, n_threads: int, fused: bool):
        super().__init__(spec, seed, n_threads, fused)
        mech = spec.feature_mechanism
        # a label-only release draws only its labels' randomness from the keystreams
        law = None if mech is None else mech.discrete
        assert law is not None or mech is None      # noise == "discrete" calibrates one
        self.noiser: Any = None if law is None else DiscreteNoise(law)

    def add_numpy(self, k, X, mech, scratch, kernels):
        rng = self.buffers[k]
        if kernels is not None:
            for j in range(X.shape[0]):
                self.noiser.snap_add_kernel(kernels, X[j], rng)
        else:
            for j in range(X.shape[0]):
                self.noiser.snap_add_numpy(X[j], rng)

    def finish_fused(self, K, k, features, s, e, mids, inv_half, factor, clip, out, mech):
        buf = self.buffers[k]
        noiser = self.noiser
        grid = np.float32(noiser.grid)
        m = e - s
        for j in range(out.shape[0]):
            row = out[j, s:e]
            buf.align()
            i = 0
            while True:
                if buf.pos >= buf.words.size:
                    buf.refill()
                i, buf.pos = K.discrete_finish_f32(
                    features[j][s:e], mids[j], inv_half[j], factor, clip,
                    noiser.inv_grid, grid, i, row, buf.words, buf.pos, *noiser.kernel_args)
                if i >= m:
                    break
                buf.pos = buf.words.size


def law_class(spec) -> type[NoiseLaw]:
    """The sampler of the law the spec selects (its record in ``iwpfast.noise_registry``)."""
    return resolve(law_record(getattr(spec, "mechanism", "gaussian"), spec.noise).sampler)


class _KeystreamUniforms:
    """``random(n)``: float64 uniforms on the 2^-53 grid from keystream words (the discrete law's
    label randomness for mechanisms written against ``numpy.random.Generator.random``)."""

    def __init__(self, buf: WordBuffer):
        self.buf = buf

    def random(self, n: int) -> np.ndarray:
        return (self.buf.take(int(n)) >> np.uint64(11)).astype(np.float64) * 2.0**-53
