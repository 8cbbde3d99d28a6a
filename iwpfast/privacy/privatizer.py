"""The per-release engine room: scale, clip and noise chunks on threads, with the law's randomness.

Each chunk is split into one contiguous part per thread, each part processed in cache-sized
sub-blocks by its own random source (the noise law's: ``iwpfast.privacy.noise_laws``).  Two paths
give the same bits for the same seed:

- fused (``iwpfast._kernels.release``, float32 features): per block, row norms (only when
  bound < sqrt(p)), clip factors, then per column the law finishes the output row (noise and the
  clipped value in one nogil kernel pass); no temporaries;
- NumPy: scale into the output, clip, then the law adds its noise.

NumPy and the kernels release the GIL, so threads run in parallel.  Python loops only over
chunks, parts, sub-blocks and columns.

Public columns (``spec.public_features``) are scaled by their declared ranges and clipped to them,
never noised; the clipping to the L2 ball and the noise cover the private columns only.  A release
without public columns runs exactly as before (same streams, same bits).
"""
from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..engines import resolve_engine
from ..exceptions import InvalidInputError
from .batches import BatchChecker
from .mechanisms import _CLIP_SAFETY, GaussianTargetMechanism, KaryRandomizedResponse, RandomizedResponse
from .noise_laws import _MAX_THREADS, FUSED_WARM_MIN_ROWS, FloatGaussianLaw, NoiseLaw, law_class
from .options import RELEASE_ENGINES
from .scaling import RangeScaler, clip_bound_of, clip_norm_of, clip_vectors_, scale_clip_into
from .spec import ReleaseSpec

# Values per sub-block: 2^18 (1 MiB of float32) stay in the L2 cache between the noise generation
# and the addition (measured: 32k rows at p = 10 ~10% faster than 4k-8k rows, flat above).
_SUB_VALUES = 1 << 18
# Raw column types the kernels take (others, e.g. float16, go through NumPy: same result, since
# the paths consume the streams identically).
_FUSED_RAW_DTYPES = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float32, np.float64))
# Below this many rows per chunk a second thread costs more than it saves.
_MIN_ROWS_PER_THREAD = 1 << 15


class _Privatizer:
    """Per-release state: the checks, the noise law (one random source per thread), scratch
    buffers, the thread pool and the counters."""

    def __init__(self, spec: ReleaseSpec, seed, threads: int | None, engine: str = "auto",
                 expected_rows: int | None = None):
        self.spec = spec
        names = list(spec.feature_names)
        coords = list(spec.released_features)
        #: rows of the output (every released column, in order)
        self.p = len(coords)
        self.dtype = np.dtype(spec.feature_dtype)
        private = list(spec.private_features)
        #: the numeric ones' checks and range counts (a categorical column has no range)
        all_scaler = RangeScaler(list(spec.numeric_features), spec.ranges)
        #: None, or the feature map of a release with categorical columns (``_run_categorical``)
        self.fmap = spec.feature_map if spec.has_categorical else None
        #: whether the L2 (Laplace: L1) clip of the noised block runs in ``_run``: not when the
        #: block holds one-hot coordinates (only the numeric part is clipped, beforehand)
        self.clip_in_run = True
        self.pre_clip: list[int] = []
        #: the vector clip (``scaling.clip_vectors_``): its norm (L2; Laplace: L1) and radius
        self.clip_norm = clip_norm_of(spec)
        self.clip_bound = clip_bound_of(spec)
        if self.fmap is None:
            self.private_rows = [names.index(f) for f in private]
            self.public_rows = [names.index(f) for f in spec.public_features]
            #: the clipped and noised features (the private ones)
            self.p_private = len(private)
            self.scaler = RangeScaler(private, spec.ranges) if self.public_rows else all_scaler
        else:
            fm = self.fmap
            # rows of the output: released columns (a randomized-response column: one code row)
            self.private_rows = [i for c in fm.inputs if not c.public and not c.is_rr
                                 for i in range(*fm.released_slices[c.name])]
            self.public_rows = [i for c in fm.inputs if c.public
                                for i in range(*fm.released_slices[c.name])]
            self.p_private = len(self.private_rows)
            private_numeric = [c.name for c in fm.inputs if not c.public and c.kind == "numeric"]
            #: (column, output row, its KaryRandomizedResponse): the randomized-response codes
            self.rr_rows = [(c.name, fm.released_slices[c.name][0], spec.rr_mechanisms[c.name])
                            for c in fm.rr_columns]
            if fm.private_blocks():
                # numeric part scaled and clipped to the bound beforehand (``numeric_scaler``),
                # one-hot rows 0/1; the noise path then sees coordinates already in [-1, 1]
                # (identity scaling) and clips nothing (docs/release.md "Categorical columns")
                self.clip_in_run = False
                private_coords = [coords[i] for i in self.private_rows]
                self.scaler = RangeScaler(private_coords, {c: (-1.0, 1.0) for c in private_coords})
                self.numeric_scaler = RangeScaler(private_numeric, spec.ranges)
                self.pre_clip = [private_coords.index(f) for f in private_numeric]
            else:
                # only public categorical columns: the private (numeric) ones run as before
                self.scaler = RangeScaler(private_numeric, spec.ranges)
        public_numeric = [f for f in spec.public_features if f not in spec.categories]
        self.public_scaler = RangeScaler(public_numeric, spec.ranges)
        self.target_scaler = (
            RangeScaler([spec.label], {spec.label: spec.target_range})
            if spec.task == "regression" and spec.label is not None and spec.target_range is not None
            else None
        )
        self.n_threads = max(1, int(threads if threads is not None else min(2, os.cpu_count() or 1)))
        if self.n_threads > _MAX_THREADS:
            raise InvalidInputError(f"threads={threads}: at most {_MAX_THREADS} noise threads")
        # Default: fresh OS entropy.  A seed is for simulations only (a known seed makes the noise
        # reproducible, i.e. removable, by anyone who knows it).
        self.chunk_index = 0
        law_type = law_class(spec)
        self.fused = law_type.has_fused and _use_fused_kernels(engine, self.dtype, expected_rows,
                                                               law_type)
        self.law: NoiseLaw = law_type(spec, seed, self.n_threads, self.fused)
        self.sub_rows = max(1024, _SUB_VALUES // max(self.p_private, 1))
        self.scratch = [np.empty(self.p_private * self.sub_rows, dtype=self.dtype)
                        for _ in range(self.n_threads)]
        self.pool = ThreadPoolExecutor(self.n_threads - 1) if self.n_threads > 1 else None
        # a law without float32 kernels (the discrete law at float64): NumPy scaling and clipping,
        # the kernel for the noise
        numpy_only = resolve_engine(engine, allowed=RELEASE_ENGINES) == "numpy"
        self.noise_kernels = not law_type.kernels_need_float32 and not numpy_only and (
            self.fused or not law_type.has_fused
            or _use_fused_kernels(engine, np.dtype(np.float32), expected_rows, law_type))
        self.kernels: Any = None
        if self.fused or self.noise_kernels:
            from .._kernels import release as kernels  # imports Numba: only when the kernels run

            self.kernels = kernels
        if self.fused:
            # the NumPy path's blocks: each block's noise is the same stretch of the stream
            self.fused_rows = self.sub_rows
            # per thread: float64 row norms, float32 clip factors
            self.norm2 = [np.empty(self.fused_rows, dtype=np.float64) for _ in range(self.n_threads)]
            self.factor = [np.empty(self.fused_rows, dtype=np.float32) for _ in range(self.n_threads)]
            # the scalars exactly as RangeScaler.scale_into rounds them (see _kernels/release.py)
            self.inv_half = [np.float32(1.0 / h) for h in self.scaler.half]
            self.mid64 = [float(m) for m in self.scaler.mid]
            self.mid32 = [np.float32(m) for m in self.scaler.mid]
        self.checker = BatchChecker(spec, all_scaler, self.target_scaler)
        self.checker.pool = self.pool
        self.checker.parallel_min_rows = _MIN_ROWS_PER_THREAD
        self.rows_clipped = 0
        self.targets_clipped = 0

    def close(self):
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None

    def prepare(self, origin, batch, on_invalid: str):
        """Check one record batch; return (feature arrays, label array or None, rows dropped)."""
        return self.checker.prepare(origin, batch, on_invalid)

    @property
    def label_encoding(self) -> str | None:
        return self.checker.label_encoding

    # ---- noise (threads) -------------------------------------------------------------------------
    def run(self, features: list[np.ndarray], label, out: np.ndarray, label_out) -> None:
        """Privatize ``n`` rows into ``out`` (p, n) and ``label_out`` (n,)."""
        if self.fmap is not None:
            self._run_categorical(features, label, out, label_out)
            return
        if not self.public_rows:
            self._run(features, label, out, label_out)
            return
        # the private columns through the usual path into a buffer of their own, then in place
        private = np.empty((self.p_private, out.shape[1]), dtype=out.dtype)
        self._run([features[i] for i in self.private_rows], label, private, label_out)
        for j, i in enumerate(self.private_rows):
            out[i] = private[j]
        for j, i in enumerate(self.public_rows):
            self.public_scaler.scale_into(j, features[i], out[i])   # scaled, clipped, no noise

    def _run_categorical(self, features: list[np.ndarray], label, out: np.ndarray,
                         label_out) -> None:
        """A release with categorical columns: ``features`` holds one array per input column
        (a categorical one: its codes); ``out`` one row per released coordinate."""
        fm = self.fmap
        assert fm is not None
        spec = self.spec
        n = out.shape[1]
        by_name = dict(zip(spec.feature_names, features, strict=True))
        private = np.empty((self.p_private, n), dtype=out.dtype)
        if self.clip_in_run:
            self._run([by_name[c.name] for c in fm.inputs if not c.public and not c.is_rr], label,
                      private, label_out)
        else:
            # a buffer of its own: the float law's fused path draws its normals into the output
            # row before it reads the input row
            pre = np.empty_like(private)
            row, numeric = 0, 0
            for c in fm.inputs:
                if c.public or c.is_rr:
                    continue
                if c.kind == "numeric":
                    self.numeric_scaler.scale_into(numeric, by_name[c.name], pre[row])
                    numeric += 1
                    row += 1
                else:
                    fm.one_hot_into(by_name[c.name], pre[row:row + c.width])
                    row += c.width
            if self.pre_clip:
                self.rows_clipped += self._clip_numeric(pre)
            self._run(list(pre), label, private, label_out)
        for j, i in enumerate(self.private_rows):
            out[i] = private[j]
        if self.rr_rows:
            self._randomize_codes(by_name, out)
        numeric = 0
        for c in fm.inputs:
            if not c.public:
                continue
            a, b = fm.released_slices[c.name]
            if c.kind == "numeric":
                self.public_scaler.scale_into(numeric, by_name[c.name], out[a])
                numeric += 1
            else:
                fm.one_hot_into(by_name[c.name], out[a:b])

    def _randomize_codes(self, by_name: dict, out: np.ndarray) -> None:
        """Each randomized-response column: its codes through k-ary randomized response, one
        uniform per row and column (the label's audited sampler, ``KaryRandomizedResponse.apply``),
        drawn after the chunk's other noise from a stream of its own part (part 0 of a
        one-part chunk), so no randomness is shared with the numeric noise or the label."""
        n = out.shape[1]
        self.law.start_chunk(self.chunk_index, 1)
        self.chunk_index += 1
        uniforms = self.law.uniforms(0)
        for name, row, mech in self.rr_rows:
            codes = np.asarray(by_name[name]).astype(np.int64, copy=False)
            out[row] = mech.apply(codes, uniforms, out=np.empty(n, np.int64))

    def _clip_numeric(self, private: np.ndarray) -> int:
        """Clip the numeric rows of the private block to the bound (L2; Laplace: L1) in place."""
        block = private[self.pre_clip]
        count = clip_vectors_(block, self.clip_bound, self.clip_norm, coords_in_unit=True)
        if count:
            private[self.pre_clip] = block
        return count

    def _run(self, features: list[np.ndarray], label, out: np.ndarray, label_out) -> None:
        n = out.shape[1]
        parts = self.n_threads if n >= self.n_threads * _MIN_ROWS_PER_THREAD else 1
        bounds = np.linspace(0, n, parts + 1).astype(np.int64)
        self.law.start_chunk(self.chunk_index, parts)
        self.chunk_index += 1
        # Part k always uses stream k, so a seeded release is reproducible for a given chunking.
        futures = []
        if parts > 1:
            pool = self.pool
            assert pool is not None                     # parts > 1 needs threads > 1: a pool
            futures = [pool.submit(self._part, k, features, label, int(bounds[k]), int(bounds[k + 1]),
                                   out, label_out)
                       for k in range(1, parts)]
        counts = [self._part(0, features, label, int(bounds[0]), int(bounds[1]), out, label_out)]
        counts += [f.result() for f in futures]
        for clipped, targets in counts:
            self.rows_clipped += clipped
            self.targets_clipped += targets

    def _part(self, k, features, label, r0, r1, out, label_out):
        if not self.p_private:
            clipped = 0                      # label-only: nothing to clip or noise
        elif self.fused and all(f.dtype in _FUSED_RAW_DTYPES for f in features):
            clipped = self._features_fused(k, features, r0, r1, out)
        else:
            clipped = self._features_numpy(k, features, r0, r1, out)
        targets = 0
        if label is not None:
            targets = self._labels(k, label[r0:r1], label_out[r0:r1])
        return clipped, targets

    def _features_numpy(self, k, features, r0, r1, out) -> int:
        mech = self._mechanism()
        kernels = self.kernels if self.noise_kernels else None
        clipped = 0
        sub = self.sub_rows
        for s in range(r0, r1, sub):
            e = min(s + sub, r1)
            X = out[:, s:e]
            # the release's map of raw rows (``scaling.scale_clip_into``, shared with the models)
            clipped += scale_clip_into([f[s:e] for f in features], self.scaler, X,
                                       self.clip_bound if self.clip_in_run else math.inf,
                                       self.clip_norm)
            self.law.add_numpy(k, X, mech, self.scratch[k], kernels)
        return clipped

    def _labels(self, k, y, y_out) -> int:
        """The label mechanism on rows of part ``k``; returns the count of clipped targets."""
        spec = self.spec
        lm = spec.label_mechanism
        law = self.law
        if spec.label_encoding == "class_index":
            np.copyto(y_out, y, casting="unsafe")         # class indices 0..k-1
            if isinstance(lm, KaryRandomizedResponse):
                lm.apply(y_out, law.uniforms(k), out=y_out)
        elif (spec.task == "classification" and self.fused and isinstance(lm, RandomizedResponse)
                and y.dtype in _FUSED_RAW_DTYPES):
            law.randomized_response_fused(self.kernels, k, y, self.label_encoding != "pm1", y_out, lm)
        elif spec.task == "classification":
            if self.label_encoding == "pm1":
                np.copyto(y_out, y, casting="unsafe")
            else:  # {0, 1} or bool (an all-ones chunk maps to +1 either way)
                np.multiply(y, 2, out=y_out, casting="unsafe")
                np.subtract(y_out, 1, out=y_out)
            if isinstance(lm, RandomizedResponse):
                law.randomized_response(k, y_out, lm)
        else:
            assert self.target_scaler is not None       # a regression target has its range
            self.target_scaler.scale_into(0, y, y_out)
            if isinstance(lm, GaussianTargetMechanism):
                return lm.apply_(y_out, law.stream(k))
        return 0

    def _features_fused(self, k, features, r0, r1, out) -> int:
        """The fused twin of ``_features_numpy``: same random stream use, same bits.

        Per block: row norms (only when clipping is possible), clip factors, then the law
        finishes every column (noise straight into the output row, plus the clipped value).
        """
        K = self.kernels
        mech = self._mechanism()
        p = self.p_private
        # |scaled coordinate| <= 1, so no vector can exceed the ball when bound**2 >= p.
        need_norm = self.clip_in_run and mech.bound * mech.bound < p
        limit = mech.bound * _CLIP_SAFETY
        norm2_all, factor_all = self.norm2[k], self.factor[k]
        mids = [self.mid32[j] if features[j].dtype == np.float32 else self.mid64[j] for j in range(p)]
        clipped = 0
        sub = self.fused_rows
        for s in range(r0, r1, sub):
            e = min(s + sub, r1)
            m = e - s
            norm2, factor = norm2_all[:m], factor_all[:m]
            count = 0
            if need_norm:
                for j in range(p):
                    K.scaled_norm2_f32(features[j][s:e], mids[j], self.inv_half[j], norm2, j > 0)
                count = K.clip_factors_f32(norm2, limit, factor)
                clipped += count
            self.law.finish_fused(K, k, features, s, e, mids, self.inv_half, factor, count > 0,
                                  out, mech)
        return clipped


    def _mechanism(self):
        mech = self.spec.feature_mechanism
        if mech is None:
            raise InvalidInputError("a label-only release has no features to noise")
        return mech


def _use_fused_kernels(engine: str, dtype, expected_rows,
                       law: type[NoiseLaw] = FloatGaussianLaw) -> bool:
    """Whether the release runs the fused kernels (``engine`` resolved, the law's thresholds)."""
    engine = resolve_engine(engine, allowed=RELEASE_ENGINES)
    if engine == "numpy":
        return False
    if dtype != np.float32:
        if engine == "numba" and law.kernels_need_float32:
            raise InvalidInputError(
                f"engine='numba' supports feature_dtype float32 only, got {dtype}; use engine='auto'"
            )
        return False
    if engine == "numba":
        return True
    if expected_rows is None:  # a stream of unknown length: large ones are what streams are for
        return True
    return expected_rows >= (FUSED_WARM_MIN_ROWS if _kernels_loaded() else law.cold_min_rows)


def _kernels_loaded() -> bool:
    """Whether this process has already dispatched the fused kernels (no set-up cost left)."""
    import sys

    module = sys.modules.get("iwpfast._kernels.release")
    return module is not None and any(
        bool(getattr(getattr(module, name), "signatures", ()))
        for name in ("finish_f32", "discrete_finish_f32", "discrete_snap_add"))
