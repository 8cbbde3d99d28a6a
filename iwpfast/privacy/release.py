"""Streaming local-DP release of a dataset (the data holder's side).

``release(source, destination, spec, ...)`` reads any Arrow source chunk by chunk, scales each
feature from its declared public range into [-1, 1], clips each feature vector to the L2 ball of
radius ``bound``, adds Gaussian noise, applies randomized response to binary labels (or the
Gaussian mechanism to a bounded regression target) and writes Parquet or Arrow IPC atomically,
with the spec as JSON in the schema metadata (key ``iwpfast.release``).  ``privatize`` does the same
in memory.

Speed: the Gaussian noise dominates.  Each chunk is split into one contiguous part per thread,
each part processed in cache-sized sub-blocks by its own ``Generator(SFC64)`` stream.  Two paths
give the same bits for the same seed:

- fused (``iwpfast._kernels.release``, float32 features): per block, row norms (only when
  bound < sqrt(p)), clip factors, then per column ``standard_normal(float32, out=<output row>)``
  and one nogil kernel pass ``out = clip(scale(raw)) * factor + sigma * out``; no temporaries;
- NumPy: scale into the output, clip, ``standard_normal`` into a scratch block, add.

NumPy and the kernels release the GIL, so threads run in parallel.  Python loops only over
chunks, parts, sub-blocks and columns.
"""
from __future__ import annotations

import math
import os
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..deprecation import renamed_keyword
from ..engines import engine_from_keywords, resolve_engine
from ..exceptions import InvalidInputError, PrivacyLeakWarning, ReleaseSpecError
from ..progress import progress_bar
from .discrete import DiscreteNoise, WordBuffer
from .mechanisms import _CLIP_SAFETY, GaussianTargetMechanism, KaryRandomizedResponse, RandomizedResponse
from .randomness import NoiseKey
from .scaling import RangeScaler
from .scaling import ranges_from_data as _ranges_from_data_warned
from .spec import METADATA_KEY, ReleaseSpec

DEFAULT_BATCH_ROWS = 1 << 18
# Values per sub-block: 2^18 (1 MiB of float32) stay in the L2 cache between the noise generation
# and the addition (measured: 32k rows at p = 10 ~10% faster than 4k-8k rows, flat above).
_SUB_VALUES = 1 << 18
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
# Keystream words per thread buffer (256 KiB: refilled by AES-CTR in place, read while in L2).
_WORD_BUFFER = 1 << 15
# Stream ids are chunk * _MAX_THREADS + thread part.
_MAX_THREADS = 1 << 10
# engine= values of the release (iwpfast.engines; "fused" is accepted for "numba")
RELEASE_ENGINES = ("auto", "numba", "numpy")
# Raw column types the kernels take (others, e.g. float16, go through NumPy: same result, since
# the paths consume the streams identically).
_FUSED_RAW_DTYPES = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float32, np.float64))
# Below this many rows per chunk a second thread costs more than it saves.
_MIN_ROWS_PER_THREAD = 1 << 15
ON_INVALID = ("error", "drop")
_UNSET = object()


@dataclass
class ReleaseResult:
    """What a release did.  The counts are about the private data: keep them to yourself."""

    destination: Path | str | None   # a local Path, or the URI / display name of a remote one
    spec: ReleaseSpec
    rows_read: int = 0
    rows_written: int = 0
    rows_dropped: int = 0
    rows_clipped: int = 0  # feature vectors scaled down to the L2 bound
    values_out_of_range: dict = field(default_factory=dict)  # per feature: values clipped to the range
    targets_clipped: int = 0  # scaled targets clipped to +-target_bound
    targets_out_of_range: int = 0  # raw targets outside the declared target_range (clipped to it)
    elapsed_s: float = 0.0

    @property
    def rows_per_s(self) -> float:
        return self.rows_read / self.elapsed_s if self.elapsed_s > 0 else float("nan")

    def summary(self) -> str:
        lines = [f"released {self.rows_written:,} rows"
                 + (f" to {self.destination}" if self.destination else "")
                 + f" in {self.elapsed_s:.2f} s ({self.rows_per_s / 1e6:.2f} M rows/s)"]
        if self.rows_dropped:
            what = "missing or non-finite values" + (
                " or a label outside the declared classes" if self.spec is not None
                and self.spec.classes is not None else "")
            lines.append(f"dropped {self.rows_dropped:,} rows with {what}")
        if self.rows_clipped:
            lines.append(f"clipped {self.rows_clipped:,} feature vectors to the L2 bound {self.spec.bound:g}")
        for name, count in self.values_out_of_range.items():
            if count:
                lo, hi = self.spec.ranges[name]
                lines.append(f"{count:,} values of {name} lay outside the declared range {lo:g}:{hi:g} "
                             "and were clipped to it")
        if self.targets_out_of_range:
            assert self.spec.target_range is not None   # targets out of range: a regression
            lo, hi = self.spec.target_range
            lines.append(f"{self.targets_out_of_range:,} targets lay outside the declared range "
                         f"{lo:g}:{hi:g} and were clipped to it")
        if self.targets_clipped:
            lines.append(f"clipped {self.targets_clipped:,} targets to +-{self.spec.target_bound:g}")
        return "\n".join(lines)


def _numeric_kind(arrow_type) -> str | None:
    import pyarrow as pa

    if pa.types.is_boolean(arrow_type):
        return "bool"
    if pa.types.is_integer(arrow_type):
        return "int"
    if pa.types.is_floating(arrow_type):
        return "float"
    if pa.types.is_decimal(arrow_type):
        return "decimal"
    return None


class _Privatizer:
    """Per-release state: mechanisms, one random stream and scratch buffer per thread, counters."""

    def __init__(self, spec: ReleaseSpec, seed, threads: int | None, engine: str = "auto",
                 expected_rows: int | None = None):
        self.spec = spec
        self.p = len(spec.feature_names)
        self.dtype = np.dtype(spec.feature_dtype)
        self.scaler = RangeScaler(list(spec.feature_names), spec.ranges)
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
        self.seeded = seed is not None and not (isinstance(seed, NoiseKey) and not seed.seeded)
        self.discrete = spec.noise == "discrete"
        self.chunk_index = 0
        if self.discrete:
            # AES-CTR keystreams: one per (chunk, thread part), ids chunk * _MAX_THREADS + part
            self.key = NoiseKey.coerce(seed)
            law = spec.feature_mechanism.discrete
            assert law is not None                      # noise == "discrete" calibrates one
            self.noiser = DiscreteNoise(law)
            lm = spec.label_mechanism
            self.target_noiser = (DiscreteNoise(lm.discrete)
                                  if isinstance(lm, GaussianTargetMechanism) and lm.discrete is not None
                                  else None)
            self.word_store = [np.empty(_WORD_BUFFER, dtype=np.uint64) for _ in range(self.n_threads)]
            self.rngs = None
        else:
            if isinstance(seed, NoiseKey):  # a derived key for a float release: its first words seed SFC64
                seed = np.random.SeedSequence([int(w) for w in seed.stream(0).words(4)])
            seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
            self.rngs = [np.random.Generator(np.random.SFC64(s)) for s in seq.spawn(self.n_threads)]
        self.sub_rows = max(1024, _SUB_VALUES // self.p)
        self.scratch = [np.empty(self.p * self.sub_rows, dtype=self.dtype) for _ in range(self.n_threads)]
        self.pool = ThreadPoolExecutor(self.n_threads - 1) if self.n_threads > 1 else None
        self.fused = _use_fused_kernels(engine, self.dtype, expected_rows, self.discrete)
        # discrete law, float64 output: NumPy scaling and clipping, the kernel for the noise
        numpy_only = resolve_engine(engine, allowed=RELEASE_ENGINES) == "numpy"
        self.noise_kernels = self.discrete and not numpy_only and (
            self.fused or _use_fused_kernels(engine, np.dtype(np.float32), expected_rows, True))
        if self.fused or self.noise_kernels:
            from .._kernels import release as kernels  # imports Numba: only when the kernels run

            self.kernels = kernels
        if self.fused:
            from .._kernels import release as kernels  # imports Numba: only when the kernels run

            self.kernels = kernels
            # the NumPy path's blocks: each block's noise is the same stretch of the stream
            self.fused_rows = self.sub_rows
            # per thread: float64 row norms, float32 clip factors, float64 uniforms for the labels
            self.norm2 = [np.empty(self.fused_rows, dtype=np.float64) for _ in range(self.n_threads)]
            self.factor = [np.empty(self.fused_rows, dtype=np.float32) for _ in range(self.n_threads)]
            self.uniforms = [np.empty(_LABEL_SUB_ROWS, dtype=np.float64) for _ in range(self.n_threads)]
            # the scalars exactly as RangeScaler.scale_into rounds them (see _kernels/release.py)
            self.inv_half = [np.float32(1.0 / h) for h in self.scaler.half]
            self.mid64 = [float(m) for m in self.scaler.mid]
            self.mid32 = [np.float32(m) for m in self.scaler.mid]
        self.label_encoding: str | None = None  # "01" or "pm1" once seen; bools are "01"
        self.rows_clipped = 0
        self.targets_clipped = 0
        self.targets_out_of_range = 0
        # runs test over the binary label stream: positives, rows and label changes seen
        self.label_runs = [0, 0, 0]
        self.label_last = None
        self.out_of_range = {f: 0 for f in spec.feature_names}

    def close(self):
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None

    # ---- validation (main thread) ------------------------------------------------------------
    def prepare(self, origin, batch, on_invalid: str):
        """Check one record batch; return (feature arrays, label array or None, rows dropped)."""
        import pyarrow as pa

        spec = self.spec
        names = list(spec.feature_names) + ([spec.label] if spec.label is not None else [])
        invalid = None
        arrays = {}
        extremes = {}
        known = self._float_extremes(batch, names)
        for name in names:
            arr = batch.column(name)
            kind = _numeric_kind(arr.type)
            is_label = name == spec.label
            if is_label and spec.classes is not None:
                arrays[name], bad = self._class_codes(origin, arr, on_invalid)
                if bad is not None:
                    invalid = bad if invalid is None else (invalid | bad)
                continue
            if kind is None:
                if is_label and spec.task == "classification":
                    self._label_error(origin, arr, f"has type {arr.type}")
                raise InvalidInputError(
                    f"column {name!r} has type {arr.type}; {'the target' if is_label else 'features'} "
                    f"must be numeric: cast or encode it before the release"
                )
            if kind == "decimal":
                arr = arr.cast(pa.float64())
                kind = "float"
            bad = None
            if arr.null_count:
                bad = np.asarray(arr.is_null(), dtype=bool)
                what = "a missing value (null)"
                arr_filled = arr.fill_null(False if kind == "bool" else 0)
            else:
                arr_filled = arr
            values = arr_filled.to_numpy(zero_copy_only=False)
            if kind == "float" and values.size:
                if name in known and not arr.null_count:
                    lo, hi = known[name]
                else:
                    with np.errstate(invalid="ignore"):
                        lo, hi = values.min(), values.max()
                extremes[name] = (lo, hi)  # reused by the range count below
                if not (math.isfinite(lo) and math.isfinite(hi)):
                    nonfinite = ~np.isfinite(values)
                    if bad is None:
                        first = int(np.argmax(nonfinite))
                        what = f"a non-finite value ({values[first]!r})"
                    bad = nonfinite if bad is None else (bad | nonfinite)
            if bad is not None:
                if on_invalid == "error":
                    row = int(np.argmax(bad))
                    raise InvalidInputError(
                        f"column {name!r} has {what} at {origin.describe(row)}; clean the data, or "
                        f"drop such rows with on_invalid='drop' (CLI: --on-invalid drop)"
                    )
                invalid = bad if invalid is None else (invalid | bad)
            arrays[name] = values
        dropped = 0
        if invalid is not None and invalid.any():
            keep = ~invalid
            dropped = int(invalid.sum())
            arrays = {k: v[keep] for k, v in arrays.items()}
            extremes = {}
        features = [arrays[f] for f in spec.feature_names]
        for j, f in enumerate(spec.feature_names):
            self.out_of_range[f] += self.scaler.count_out_of_range(j, features[j], extremes.get(f))
        label = None
        if spec.label is not None:
            label = arrays[spec.label]
            if spec.task == "classification" and spec.classes is None:
                self._check_binary(origin, label)
                self._count_runs(label)
            elif spec.task == "regression" and self.target_scaler is not None:
                self.targets_out_of_range += self.target_scaler.count_out_of_range(
                    0, label, extremes.get(spec.label))
        return features, label, dropped

    def _count_runs(self, y: np.ndarray) -> None:
        """Label changes between consecutive rows (for the runs test of ``label_order_warning``)."""
        if y.size == 0:
            return
        runs = self.label_runs
        runs[0] += int(np.count_nonzero(y == 1))
        runs[1] += int(y.size)
        runs[2] += int(np.count_nonzero(y[1:] != y[:-1]))
        if self.label_last is not None and self.label_last != y[0]:
            runs[2] += 1
        self.label_last = y[-1]

    def _float_extremes(self, batch, names) -> dict:
        """(min, max) of the null-free float columns, half of them on the pool's thread.

        The finiteness check needs them before any noise; computed serially they cost ~3% of
        the in-memory release at p = 10, and 2 threads halve that.
        """
        import pyarrow as pa

        if self.pool is None or batch.num_rows < 2 * _MIN_ROWS_PER_THREAD:
            return {}
        columns = [
            (name, batch.column(name)) for name in names
            if pa.types.is_floating(batch.column(name).type) and not batch.column(name).null_count
        ]
        if len(columns) < 2:
            return {}

        def extremes(items):
            with np.errstate(invalid="ignore"):
                return {n: (v.min(), v.max()) for n, v in
                        ((n, a.to_numpy(zero_copy_only=False)) for n, a in items)}

        other = self.pool.submit(extremes, columns[1::2])
        found = extremes(columns[0::2])
        found.update(other.result())
        return found

    def _label_error(self, origin, values, reason: str):
        import pyarrow as pa

        if isinstance(values, (pa.Array, pa.ChunkedArray)):
            seen = values.unique().to_pylist()
        else:
            seen = np.unique(values).tolist()
        shown = ", ".join(repr(v) for v in sorted(seen, key=repr)[:12]) + (" ..." if len(seen) > 12 else "")
        raise InvalidInputError(
            f"label column {self.spec.label!r} {reason}: binary labels must be in {{0, 1}}, {{-1, 1}} "
            f"or bool; values seen in the batch starting at {origin.describe(0)}: {shown}. Recode the "
            f"labels, or use task='regression' for a continuous target"
        )

    def _class_codes(self, origin, arr, on_invalid: str):
        """(index of each label in ``spec.classes``, mask of rows whose label is not a declared
        class or None): numbers or strings, matched by value with the column's type."""
        import pyarrow as pa
        import pyarrow.compute as pc

        spec = self.spec
        try:
            value_set = pa.array(list(spec.class_values)).cast(arr.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            raise InvalidInputError(
                f"label column {spec.label!r} has type {arr.type} but the declared classes "
                f"{list(spec.class_values)!r} are not of that type; declare the column's own values"
            ) from None
        index = pc.index_in(arr, value_set=value_set)
        codes = index.fill_null(0).to_numpy(zero_copy_only=False).astype(_class_dtype(len(spec.class_values)))
        if not index.null_count:
            return codes, None
        bad = np.asarray(index.is_null(), dtype=bool)
        if on_invalid == "error":
            row = int(np.argmax(bad))
            value = arr[row].as_py()
            raise InvalidInputError(
                f"label column {spec.label!r} has {value!r} at {origin.describe(row)}, which is not "
                f"one of the declared classes {list(spec.class_values)!r}; declare every class, or drop "
                f"such rows with on_invalid='drop' (CLI: --on-invalid drop)"
            )
        return codes, bad

    def _check_binary(self, origin, y: np.ndarray):
        if y.dtype == np.bool_ or y.size == 0:
            encoding = "01" if y.size else None
        else:
            lo, hi = y.min(), y.max()
            if lo >= 0 and hi <= 1:
                encoding = "01" if lo == 0 else None  # all ones: fits both encodings
                # integers in [0, 1] are 0 or 1; floats may lie in between
                if y.dtype.kind == "f" and not ((y == 0) | (y == 1)).all():
                    self._label_error(origin, y, "is not binary")
            elif lo == -1 and hi <= 1:
                encoding = "pm1"
                if not ((y == -1) | (y == 1)).all():
                    self._label_error(origin, y, "is not binary")
            else:
                self._label_error(origin, y, "is not binary")
        if encoding is not None:
            if self.label_encoding is None:
                self.label_encoding = encoding
            elif encoding != self.label_encoding:
                raise InvalidInputError(
                    f"label column {self.spec.label!r} mixes encodings: earlier rows used "
                    f"{'{0, 1}' if self.label_encoding == '01' else '{-1, 1}'} and the batch starting at "
                    f"{origin.describe(0)} uses {'{0, 1}' if encoding == '01' else '{-1, 1}'}; "
                    "recode the labels"
                )

    # ---- noise (threads) -------------------------------------------------------------------------
    def run(self, features: list[np.ndarray], label, out: np.ndarray, label_out) -> None:
        """Privatize ``n`` rows into ``out`` (p, n) and ``label_out`` (n,)."""
        n = out.shape[1]
        parts = self.n_threads if n >= self.n_threads * _MIN_ROWS_PER_THREAD else 1
        bounds = np.linspace(0, n, parts + 1).astype(np.int64)
        if self.discrete:  # fresh keystreams for this chunk: independent of every other chunk's
            base = self.chunk_index * _MAX_THREADS
            self.buffers = [WordBuffer(self.key.stream(base + k), storage=self.word_store[k])
                            for k in range(parts)]
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
        spec = self.spec
        mech = spec.feature_mechanism
        rng = self.buffers[k] if self.discrete else self.rngs[k]
        p = self.p
        clipped = 0
        if self.fused and all(f.dtype in _FUSED_RAW_DTYPES for f in features):
            clipped = self._features_fused(k, features, r0, r1, out)
        else:
            sub = self.sub_rows
            for s in range(r0, r1, sub):
                e = min(s + sub, r1)
                X = out[:, s:e]
                for j in range(p):
                    self.scaler.scale_into(j, features[j][s:e], X[j])
                clipped += mech.clip_(X, coords_in_unit=True)
                if not self.discrete:
                    mech.add_noise_(X, rng, self.scratch[k][: p * (e - s)].reshape(p, e - s))
                elif self.noise_kernels:
                    for j in range(p):
                        self.noiser.snap_add_kernel(self.kernels, X[j], rng)
                else:
                    for j in range(p):
                        self.noiser.snap_add_numpy(X[j], rng)
        targets = 0
        if label is not None:
            y = label[r0:r1]
            y_out = label_out[r0:r1]
            lm = spec.label_mechanism
            if spec.label_encoding == "class_index":
                np.copyto(y_out, y, casting="unsafe")         # class indices 0..k-1
                if isinstance(lm, KaryRandomizedResponse):
                    lm.apply(y_out, _KeystreamUniforms(rng) if self.discrete else rng, out=y_out)
            elif (spec.task == "classification" and self.fused and isinstance(lm, RandomizedResponse)
                    and y.dtype in _FUSED_RAW_DTYPES):
                self._labels_fused(k, y, y_out, lm)
            elif spec.task == "classification":
                if self.label_encoding == "pm1":
                    np.copyto(y_out, y, casting="unsafe")
                else:  # {0, 1} or bool (an all-ones chunk maps to +1 either way)
                    np.multiply(y, 2, out=y_out, casting="unsafe")
                    np.subtract(y_out, 1, out=y_out)
                if isinstance(lm, RandomizedResponse):
                    if self.discrete:
                        for s in range(0, y_out.shape[0], _LABEL_SUB_ROWS):
                            e = min(s + _LABEL_SUB_ROWS, y_out.shape[0])
                            lm.apply_words(y_out[s:e], rng.take(e - s))
                    else:
                        lm.apply(y_out, rng, out=y_out)
            else:
                self.target_scaler.scale_into(0, y, y_out)
                if isinstance(lm, GaussianTargetMechanism):
                    targets = lm.apply_(y_out, rng)
        return clipped, targets


    def _features_fused(self, k, features, r0, r1, out) -> int:
        """The fused twin of the NumPy loop in ``_part``: same random stream use, same bits.

        Per block: row norms (only when clipping is possible), clip factors, then per column the
        noise straight into the output row and one kernel pass that adds the clipped value.
        """
        K = self.kernels
        mech = self.spec.feature_mechanism
        p = self.p
        # |scaled coordinate| <= 1, so no vector can exceed the ball when bound**2 >= p.
        need_norm = mech.bound * mech.bound < p
        limit = mech.bound * _CLIP_SAFETY
        sigma = np.float32(mech.sigma)
        norm2_all, factor_all = self.norm2[k], self.factor[k]
        mids = [self.mid32[j] if features[j].dtype == np.float32 else self.mid64[j] for j in range(p)]
        inv_half = self.inv_half
        clipped = 0
        sub = self.fused_rows
        for s in range(r0, r1, sub):
            e = min(s + sub, r1)
            m = e - s
            norm2, factor = norm2_all[:m], factor_all[:m]
            count = 0
            if need_norm:
                for j in range(p):
                    K.scaled_norm2_f32(features[j][s:e], mids[j], inv_half[j], norm2, j > 0)
                count = K.clip_factors_f32(norm2, limit, factor)
                clipped += count
            if self.discrete:
                buf = self.buffers[k]
                noiser = self.noiser
                grid = np.float32(noiser.grid)
                for j in range(p):
                    row = out[j, s:e]
                    buf.align()
                    i = 0
                    while True:
                        if buf.pos >= buf.words.size:
                            buf.refill()
                        i, buf.pos = K.discrete_finish_f32(
                            features[j][s:e], mids[j], inv_half[j], factor, count > 0,
                            noiser.inv_grid, grid, i, row, buf.words, buf.pos, *noiser.kernel_args)
                        if i >= m:
                            break
                        buf.pos = buf.words.size
                continue
            assert self.rngs is not None                # the float law's generators
            rng = self.rngs[k]
            for j in range(p):
                row = out[j, s:e]
                rng.standard_normal(dtype=np.float32, out=row)
                K.finish_f32(features[j][s:e], mids[j], inv_half[j], factor, count > 0, sigma, row)
        return clipped

    def _labels_fused(self, k, y, y_out, lm) -> None:
        """Randomized response in blocks: the same float64 uniforms as ``RandomizedResponse.apply``
        (float law), or the same keystream words as ``RandomizedResponse.apply_words`` (discrete)."""
        zero_one = self.label_encoding != "pm1"
        if self.discrete:
            buf = self.buffers[k]
            threshold = np.uint64(lm.keep_threshold)
            for s in range(0, y.shape[0], _LABEL_SUB_ROWS):
                e = min(s + _LABEL_SUB_ROWS, y.shape[0])
                self.kernels.randomized_response_words(y[s:e], zero_one, buf.take(e - s), threshold,
                                                       y_out[s:e])
            return
        keep_probability = lm.keep_probability
        uniforms = self.uniforms[k]
        assert self.rngs is not None                    # the float law's generators
        rng = self.rngs[k]
        for s in range(0, y.shape[0], _LABEL_SUB_ROWS):
            e = min(s + _LABEL_SUB_ROWS, y.shape[0])
            u = uniforms[: e - s]
            rng.random(out=u)
            self.kernels.randomized_response(y[s:e], zero_one, u, keep_probability, y_out[s:e])


def _use_fused_kernels(engine: str, dtype, expected_rows, discrete: bool = False) -> bool:
    engine = resolve_engine(engine, allowed=RELEASE_ENGINES)
    if engine == "numpy":
        return False
    if dtype != np.float32:
        if engine == "numba" and not discrete:
            raise InvalidInputError(
                f"engine='numba' supports feature_dtype float32 only, got {dtype}; use engine='auto'"
            )
        return False
    if engine == "numba":
        return True
    if expected_rows is None:  # a stream of unknown length: large ones are what streams are for
        return True
    cold = DISCRETE_FUSED_MIN_ROWS if discrete else FUSED_MIN_ROWS
    return expected_rows >= (FUSED_WARM_MIN_ROWS if _kernels_loaded() else cold)


def _kernels_loaded() -> bool:
    """Whether this process has already dispatched the fused kernels (no set-up cost left)."""
    import sys

    module = sys.modules.get("iwpfast._kernels.release")
    return module is not None and any(
        bool(getattr(getattr(module, name), "signatures", ()))
        for name in ("finish_f32", "discrete_finish_f32", "discrete_snap_add"))


def _output_schema(spec: ReleaseSpec, metadata: dict | None = None):
    import pyarrow as pa

    ftype = pa.float32() if spec.feature_dtype == "float32" else pa.float64()
    fields = [pa.field(f, ftype, nullable=False) for f in spec.feature_names]
    if spec.label is not None:
        ltype = pa.from_numpy_dtype(_label_dtype(spec))
        fields.append(pa.field(spec.label, ltype, nullable=False))
    return pa.schema(fields, metadata=metadata)


def _class_dtype(n_classes: int):
    return np.dtype(np.int8) if n_classes <= 127 else np.dtype(np.int16)


def _label_dtype(spec: ReleaseSpec):
    """dtype of the released label column: int8 -1/+1, the class index, or the feature dtype."""
    if spec.task != "classification":
        return np.dtype(spec.feature_dtype)
    if spec.label_encoding == "class_index":
        return _class_dtype(len(spec.class_values))
    return np.dtype(np.int8)


def _resolve_spec(spec: ReleaseSpec, features, label, ranges) -> ReleaseSpec:
    if not isinstance(spec, ReleaseSpec):
        raise InvalidInputError(
            f"spec must be an iwpfast.ReleaseSpec, got {type(spec).__name__}; build one with "
            "ReleaseSpec(epsilon_x=..., delta=..., bound=..., epsilon_y=..., ranges=...)"
        )
    if isinstance(features, str):
        features = [f.strip() for f in features.split(",") if f.strip()]
    spec = spec.with_columns(
        features=tuple(features) if features is not None else None,
        label=None if label is _UNSET else label,
        ranges=ranges,
    )
    if label is None and (spec.label is not None or spec.epsilon_y is not None):
        from dataclasses import replace

        spec = replace(spec, label=None, epsilon_y=None, delta_y=None, target_range=None)
    if spec.features is None:
        raise InvalidInputError("no features named; pass features=[...] (CLI: --features) or set them "
                                "in the spec")
    if spec.label is not None and spec.label in spec.features:
        raise InvalidInputError(f"column {spec.label!r} is both a feature and the label; name it once")
    return spec


def _fill_ranges_from_data(spec: ReleaseSpec, src) -> ReleaseSpec:
    from dataclasses import replace

    need = [f for f in spec.feature_names if f not in spec.ranges]
    need_target = spec.task == "regression" and spec.label is not None and spec.target_range is None
    if not need and not need_target:
        return spec
    if not getattr(src, "rereadable", True):
        raise InvalidInputError(
            "ranges_from_data needs a source that can be read twice (a file, Table, DataFrame or "
            "arrays), not a RecordBatchReader; declare the ranges instead"
        )
    cols = need + ([spec.label] if need_target and spec.label is not None else [])
    lo = {c: math.inf for c in cols}
    hi = {c: -math.inf for c in cols}
    for batch in src.batches(columns=cols):
        for c in cols:
            v = batch.column(c).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
            v = v[np.isfinite(v)]
            if v.size:
                lo[c], hi[c] = min(lo[c], float(v.min())), max(hi[c], float(v.max()))
    for c in cols:
        if not math.isfinite(lo[c]):
            raise InvalidInputError(f"column {c!r} has no finite value to compute a range from")
    found = _ranges_from_data_warned({c: np.array([lo[c], hi[c]]) for c in cols})
    ranges = {**spec.ranges, **{c: found[c] for c in need}}
    target_range = found[spec.label] if need_target and spec.label is not None else spec.target_range
    return replace(spec, ranges=ranges, target_range=target_range)


def release(source, destination, spec: ReleaseSpec, features=None, label=_UNSET, *, ranges=None,
            seed=None, overwrite: bool = False, on_invalid: str = "error", format: str | None = None,
            compression: str | None = "auto", record_batch_rows: int = DEFAULT_BATCH_ROWS,
            threads: int | None = None, progress: bool | None = False,
            engine: str | None = None, filesystem=None, part: dict | None = None,
            shuffle: bool = False, kernel: str | None = None,
            batch_rows: int | None = None) -> ReleaseResult:
    """Release ``source`` under local DP into ``destination`` (Parquet, or Arrow IPC).

    Every record is scaled by the declared ranges, clipped, noised and written; the parameters go
    into the file's schema metadata (never the seed).  Written to a temporary file and renamed on
    success: a failed or interrupted release leaves nothing.

    Parameters
    ----------
    source : path, folder, glob, URI, pyarrow Dataset/RecordBatchReader/Table, DataFrame, dict of
        arrays, or (X, y)
        Anything :func:`iwpfast.io.sources.open_source` reads; read record batch by record batch
        (memory stays bounded).
    destination : path or URI
        The output file; the format comes from its suffix (``iwpfast.io.formats``: ``.parquet``;
        ``.arrow``, ``.arrows``, ``.feather``, ``.ipc``) or ``format``.  A folder / prefix (a
        trailing ``/``, or an existing folder) makes a multi-part release: one part per input
        file and a manifest written last (:func:`iwpfast.privacy.multipart.release_parts`).
    spec : ReleaseSpec
        The privacy parameters; ``features``, ``label`` and ``ranges`` given here override it.
    features : sequence of str, optional
    label : str or None, optional
        None releases the features only.
    ranges : dict {name: (lo, hi)} or str, optional
    seed : int or None, default None
        None draws fresh randomness from the OS: what a real release must do.  An integer makes
        the noise reproducible, **for simulations only** (whoever knows it can remove the noise);
        never written to the file.  Reproducible for the same source, ``batch_rows`` and
        ``threads``.
    overwrite : bool, default False
        Replace an existing destination (refused otherwise).
    on_invalid : {"error", "drop"}, default "error"
        A null/NaN/inf value stops the release naming column and row, or its row is dropped and
        counted.
    format : {"parquet", "ipc"} or None, default None (from the destination's suffix)
    compression : "auto", a codec name or None, default "auto"
        "auto": Parquet features uncompressed (noisy floats do not compress: snappy saved 0.01% of
        the size for 15% more write time), labels snappy; or one codec for every column
        ("snappy", "zstd", "lz4", None).  IPC: "lz4"/"zstd" or none.
    record_batch_rows : int >= 1, default 2**18
        Rows per Arrow record batch read from the source and written (a memory bound; unrelated
        to the learner's minibatches).  ``batch_rows=`` is its deprecated name.
    threads : int >= 1 or None, default None
        Noise threads (None: min(2, cores)).
    progress : bool or "force", default False
        A progress bar on a terminal (True), never (False) or always ("force").
    engine : {"auto", "numba", "numpy"}, default "auto"
        "auto": the fused Numba kernels for float32 features from ``FUSED_MIN_ROWS`` (2**24) rows
        on, or when the row count is unknown, or from ``FUSED_WARM_MIN_ROWS`` (2**16) once this
        process has loaded them; NumPy otherwise (the first Numba call of a process costs
        ~0.5 s).  "numba" or "numpy" force one; both give the same bits for the same seed.
        ``kernel=`` (values "auto", "fused", "numpy") is its deprecated name.
    filesystem : pyarrow.fs.FileSystem or fsspec filesystem, optional
        For source and destination paths that are not URIs (URIs such as
        ``s3://bucket/key?endpoint_override=...`` name their own filesystem).  Remote outputs are
        written to a temporary key and moved into place.
    part : dict, optional
        ``{"release_id": id, "index": i}``: set by ``release_parts`` and the Dask release, not by
        hand.
    shuffle : bool, default False
        Write the rows in a uniformly random order (from the release's key).  The order of the
        rows is not protected by the noise: a source sorted or clustered by the label leaks the
        label through position.  In memory when the source fits in ``SHUFFLE_MEMORY_BYTES``,
        else a two-pass bucket shuffle through temporary files (deleted at the end).  Without
        it, a runs test over the label stream warns when the labels look sorted or clustered.

    Returns
    -------
    ReleaseResult
        Rows read/written, dropped and clipped counts (about the private data: do not publish)
        and the spec with its guarantee.

    Raises
    ------
    InvalidInputError
        Bad parameter, missing column or range, invalid value (names column, row and the fix).
    """
    from ..io.filesystem import is_uri, resolve
    from ..io.sources import open_source
    from ..io.writer import AtomicArrowWriter, check_destination

    engine = engine_from_keywords(engine, kernel, "kernel", default="auto", allowed=RELEASE_ENGINES)
    batch_rows = renamed_keyword(record_batch_rows, batch_rows, new_name="record_batch_rows",
                                 old_name="batch_rows", default=DEFAULT_BATCH_ROWS)
    if on_invalid not in ON_INVALID:
        raise InvalidInputError(f"on_invalid must be 'error' or 'drop', got {on_invalid!r}")
    if isinstance(destination, (str, os.PathLike)) and part is None:
        dest_loc = resolve(destination, None if is_uri(os.fspath(destination)) else filesystem)
        if dest_loc.trailing_slash or dest_loc.kind() == "dir":
            from .multipart import release_parts

            if shuffle:
                raise InvalidInputError(
                    "shuffle=True is for a single output file; a multi-part release writes one "
                    "part per input file: shuffle the inputs first, or release into one file")
            return release_parts(
                source, destination, spec, features, label, ranges=ranges, seed=seed,
                overwrite=overwrite, on_invalid=on_invalid, format=format, compression=compression,
                record_batch_rows=batch_rows, threads=threads, progress=progress, engine=engine,
                filesystem=filesystem)
    spec = _resolve_spec(spec, features, label, ranges)
    dest_fs = None if not isinstance(destination, (str, os.PathLike)) or is_uri(os.fspath(destination)) \
        else filesystem
    destination = check_destination(destination, overwrite, dest_fs)
    columns = list(spec.feature_names) + ([spec.label] if spec.label is not None else [])
    src_fs = None if not isinstance(source, (str, os.PathLike)) or is_uri(os.fspath(source)) \
        else filesystem
    src = open_source(source, columns=columns, record_batch_rows=int(batch_rows), filesystem=src_fs)
    if src.release_metadata is not None:
        raise InvalidInputError(
            f"{src.description} is already an iwpfast release (it has '{METADATA_KEY}' metadata); "
            "releasing it again would add noise twice. Release the original data instead"
        )
    if spec.ranges_from_data:
        spec = _fill_ranges_from_data(spec, src)
    else:
        spec.scaler_ranges()
        if spec.task == "regression" and spec.label is not None and spec.target_range is None:
            raise InvalidInputError(
                f"regression needs the declared public range of the target {spec.label!r}; "
                "give target_range=(lo, hi) (CLI: --target-range LO:HI)"
            )
    seeded = _is_seeded(seed)
    if seeded != spec.seeded:
        from dataclasses import replace

        spec = replace(spec, seeded=seeded)
    if seeded:
        _warn_seeded(stacklevel=3)
    shuffle_tmp = None
    if shuffle:
        src, shuffle_tmp = _shuffled_source(src, columns, int(batch_rows), seed)
    # With on_invalid="error" every row read is written, so a known row count is final now;
    # otherwise the writer fixes the metadata at the end (free for Parquet, a rewrite for IPC).
    expected_rows = src.num_rows if on_invalid == "error" else None
    label_classes = _peek_label_classes(spec, src)
    schema = _output_schema(spec, {METADATA_KEY: _metadata_json(spec, expected_rows, part,
                                                                label_classes)})
    privatizer = _Privatizer(spec, seed, threads, engine, src.num_rows)
    result = ReleaseResult(destination=destination if isinstance(destination, Path)
                           else destination.display, spec=spec)
    t0 = time.perf_counter()
    bar = progress_bar(progress, src.num_rows, desc="release")
    # The encoder of chunk k runs in a background thread (pyarrow releases the GIL) while chunk
    # k+1 is read and noised; two output buffers alternate so that the one being written is never
    # overwritten.
    write_pool = ThreadPoolExecutor(1)
    pending = None
    try:
        dictionary = [spec.label] if spec.label is not None and spec.task == "classification" else []
        codecs: str | dict[str, str] | None = compression
        if compression == "auto":
            codecs = {f: "none" for f in spec.feature_names}
            if spec.label is not None:
                codecs[spec.label] = "snappy" if spec.task == "classification" else "none"
        with AtomicArrowWriter(destination, schema, format=format, overwrite=overwrite,
                               compression=codecs, dictionary_columns=dictionary) as writer:
            buffers: list[list[np.ndarray | None]] = [[None, None], [None, None]]
            turn = 0
            try:
                for origin, batch in src.located_batches():
                    n_in = batch.num_rows
                    feats, label_values, dropped = privatizer.prepare(origin, batch, on_invalid)
                    n = n_in - dropped
                    slot = buffers[turn]
                    features_buffer = slot[0]
                    if features_buffer is None or features_buffer.shape[1] < n:
                        features_buffer = slot[0] = np.empty((privatizer.p, max(n, 1)),
                                                             dtype=privatizer.dtype)
                        if spec.label is not None:
                            slot[1] = np.empty(max(n, 1), dtype=_label_dtype(spec))
                    out = features_buffer[:, :n]
                    label_out = slot[1][:n] if slot[1] is not None else None
                    if n:
                        privatizer.run(feats, label_values, out, label_out)
                        if pending is not None:
                            pending.result()  # the other buffer is free again; errors surface here
                        pending = write_pool.submit(writer.write_batch, _record_batch(schema, out, label_out))
                        turn = 1 - turn
                    result.rows_read += n_in
                    result.rows_written += n
                    result.rows_dropped += dropped
                    bar.update(n_in)
                if pending is not None:
                    pending.result()
            finally:
                # never let the writer be closed/aborted while the thread still writes to it
                if pending is not None:
                    try:
                        pending.result()
                    except BaseException:
                        pass
            spec = ReleaseSpec.from_metadata(spec.to_metadata(result.rows_written))
            if privatizer.label_encoding is not None:
                label_classes = [0, 1] if privatizer.label_encoding == "01" else [-1, 1]
            writer.commit({METADATA_KEY: _metadata_json(spec, result.rows_written, part,
                                                        label_classes)})
    finally:
        write_pool.shutdown(wait=True)
        bar.close()
        privatizer.close()
        if shuffle_tmp is not None:
            shuffle_tmp.cleanup()
    result.spec = spec
    result.elapsed_s = time.perf_counter() - t0
    _finish_counts(result, privatizer)
    return result


def _peek_label_classes(spec: ReleaseSpec, src) -> list | None:
    """The source's binary label values, [0, 1] or [-1, 1], from its first batch (so the schema
    written first already carries them: no IPC rewrite at the end), or None if unknown yet."""
    if spec.classes is not None:       # declared: -1/+1 stand for classes[0]/[1] (k = 2)
        return list(spec.classes) if len(spec.classes) == 2 else None
    if spec.label is None or spec.task != "classification" or not src.rereadable:
        return None
    for batch in src.batches([spec.label]):
        values = batch.column(0).drop_null().to_numpy(zero_copy_only=False)
        if values.size == 0:
            continue
        if values.dtype == np.bool_ or (values == 0).any():
            return [0, 1]
        if (values == -1).any():
            return [-1, 1]
        return None
    return None


def _metadata_json(spec: ReleaseSpec, rows, part: dict | None, label_classes=None) -> str:
    """The release metadata as stored: the spec, the row count, a part's fields (multi-part
    releases: release id, part index, the part's rows; see iwpfast/io/parts.py), and
    ``label_classes``: the label values of the source (the released column holds -1/+1; a learner
    maps them back, so a model predicts the user's own values)."""
    if part is None and label_classes is None:
        return spec.to_json(rows)
    import json

    meta = spec.to_metadata(rows)
    if label_classes is not None:
        meta["label_classes"] = list(label_classes)
    if part is not None:
        meta["part"] = {"release_id": str(part["release_id"]), "index": int(part["index"]),
                        "rows": None if rows is None else int(rows)}
    return json.dumps(meta, sort_keys=True, allow_nan=False)


#: a source up to this size (rows x columns x 8 bytes, estimated) is shuffled in memory
SHUFFLE_MEMORY_BYTES = 2 << 30


def _shuffled_source(src, columns, batch_rows: int, seed):
    """The source's rows in a uniformly random order: (new source, temporary folder or None).

    The permutation comes from the release's key (``derive("shuffle")``: independent of the
    noise's keystreams): sorting uniform 64-bit keys gives a uniform permutation (ties, with
    probability < n^2 / 2^65, keep the input order).
    """
    import tempfile

    import pyarrow as pa

    from ..io.sources import open_source

    key = (seed if isinstance(seed, NoiseKey) else NoiseKey.coerce(seed)).derive("shuffle")
    schema = src.schema
    width = 8 * max(1, len(columns))
    if src.num_rows is not None and src.num_rows * width <= SHUFFLE_MEMORY_BYTES:
        table = pa.Table.from_batches(list(src.batches(columns=columns)), schema=schema)
        order = np.argsort(key.stream(0).words(table.num_rows), kind="stable")
        shuffled = table.take(pa.array(order)).replace_schema_metadata(schema.metadata)
        return open_source(shuffled, columns=columns, record_batch_rows=batch_rows), None
    # two passes: each row to one of k buckets at random, then each bucket permuted in memory
    import pyarrow.ipc as ipc

    estimate = (src.num_rows or 0) * width
    buckets = max(2, -(-estimate // (SHUFFLE_MEMORY_BYTES // 2))) if estimate else 64
    tmp = tempfile.TemporaryDirectory(prefix="iwpfast-shuffle-")
    try:
        paths = [os.path.join(tmp.name, f"bucket-{b:05d}.arrows") for b in range(buckets)]
        sinks = [pa.OSFile(p, "wb") for p in paths]
        writers = [ipc.new_stream(sink, schema) for sink in sinks]
        stream = key.stream(0)
        for batch in src.batches(columns=columns):
            words = stream.words(batch.num_rows)
            # multiply-shift: a uniform bucket from the top bits (bias < buckets / 2^64)
            bucket = ((words >> np.uint64(32)) * np.uint64(buckets)) >> np.uint64(32)
            for b in range(buckets):
                mask = bucket == b
                if mask.any():
                    writers[b].write_batch(batch.filter(pa.array(mask)))
        for w, sink in zip(writers, sinks, strict=True):
            w.close()
            sink.close()
    except BaseException:
        tmp.cleanup()
        raise

    def batches():
        for b, path in enumerate(paths):
            with pa.memory_map(path) as mm:
                table = ipc.open_stream(mm).read_all()
            order = np.argsort(key.stream(1 + b).words(table.num_rows), kind="stable")
            yield from table.take(pa.array(order)).to_batches(max_chunksize=batch_rows)

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    return open_source(reader, columns=columns, record_batch_rows=batch_rows), tmp


class _KeystreamUniforms:
    """``random(n)``: float64 uniforms on the 2^-53 grid from keystream words (the discrete law's
    label randomness for mechanisms written against ``numpy.random.Generator.random``)."""

    def __init__(self, buf: WordBuffer):
        self.buf = buf

    def random(self, n: int) -> np.ndarray:
        return (self.buf.take(int(n)) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _is_seeded(seed) -> bool:
    if seed is None:
        return False
    return seed.seeded if isinstance(seed, NoiseKey) else True


def _warn_seeded(stacklevel: int) -> None:
    warnings.warn(
        "seeded release: the noise is reproducible from the seed (and removable by whoever knows "
        "it); for simulations only -- a real release must use seed=None (fresh OS entropy). The "
        "file records \"seeded\": true (never the seed)",
        PrivacyLeakWarning, stacklevel=stacklevel)


def label_order_z(positives: int, rows: int, changes: int) -> float:
    """Runs test: z-score of the number of label changes against a uniformly random row order.

    For n1 positives among n rows in random order, E[changes] = 2 n1 n0 / n and
    Var = 2 n1 n0 (2 n1 n0 - n) / (n^2 (n - 1)) (Wald & Wolfowitz).  Very negative z: far fewer
    changes than chance, i.e. the labels are sorted or clustered.
    """
    n1, n = positives, rows
    n0 = n - n1
    if n < 3 or n1 == 0 or n0 == 0:
        return 0.0
    mean = 2.0 * n1 * n0 / n
    var = 2.0 * n1 * n0 * (2.0 * n1 * n0 - n) / (n * n * (n - 1.0))
    return (changes - mean) / math.sqrt(var) if var > 0 else 0.0


#: the runs test warns below this z (a false alarm on a random order: probability ~1e-9)
LABEL_ORDER_Z = -6.0


def _finish_counts(result: ReleaseResult, privatizer: _Privatizer) -> None:
    positives, rows, changes = privatizer.label_runs
    z = label_order_z(positives, rows, changes)
    if z < LABEL_ORDER_Z:
        warnings.warn(
            f"the label column {result.spec.label!r} looks sorted or clustered in the row order "
            f"({changes:,} label changes between consecutive rows where a random order gives about "
            f"{2.0 * positives * (rows - positives) / rows:,.0f}; runs test z = {z:.1f}): the "
            "position of a row can reveal its label, which the noise does not protect. Release "
            "with shuffle=True (CLI: --shuffle)",
            PrivacyLeakWarning, stacklevel=3)
    result.rows_clipped = privatizer.rows_clipped
    result.targets_clipped = privatizer.targets_clipped
    result.targets_out_of_range = privatizer.targets_out_of_range
    if result.targets_out_of_range:
        assert result.spec.target_range is not None   # targets out of range: a regression
        lo, hi = result.spec.target_range
        warnings.warn(
            f"{result.targets_out_of_range:,} regression targets lay outside the declared range "
            f"{lo:g}:{hi:g} and were clipped to it; widen --target-range if that is not intended",
            UserWarning, stacklevel=3)
    result.values_out_of_range = {k: v for k, v in privatizer.out_of_range.items() if v}
    if result.values_out_of_range:
        detail = ", ".join(f"{k}: {v:,}" for k, v in result.values_out_of_range.items())
        warnings.warn(
            f"values outside the declared ranges were clipped to them ({detail}); "
            "widen the ranges if that is not intended",
            UserWarning,
            stacklevel=3,
        )


def _record_batch(schema, out: np.ndarray, label_out):
    import pyarrow as pa

    # Each row of the feature-major buffer is contiguous: pa.array wraps it without a copy, and
    # the writer has encoded the batch before the buffer is reused for the next chunk.
    arrays = [pa.array(out[j]) for j in range(out.shape[0])]
    if label_out is not None:
        arrays.append(pa.array(label_out))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def privatize(X, y=None, spec: ReleaseSpec | None = None, *, seed=None, threads: int | None = None,
              on_invalid: str = "error", engine: str | None = None, kernel: str | None = None):
    """Release in memory: the noisy ``(X_tilde, y_tilde)`` of raw ``X`` and labels ``y``.

    Parameters
    ----------
    X : array of shape (n, p) or dict {name: 1-D array}
        Raw features; an array's columns are ``spec.features`` in order.
    y : array of shape (n,) or None, default None
        Labels (binary, or the declared classes) or regression targets; None: features only.
    spec : ReleaseSpec
        The privacy parameters, with its features and declared ranges.
    seed : int or None, default None
        As in :func:`release`: None (fresh OS randomness) for a real release, an integer for
        simulations only.
    threads : int >= 1 or None, default None
    on_invalid : {"error", "drop"}, default "error"
    engine : {"auto", "numba", "numpy"}, default "auto"
        As in :func:`release` (``kernel=`` is its deprecated name).

    Returns
    -------
    X_tilde : ndarray of shape (n, p)
        A transposed view of a feature-major (p, n) array (``X_tilde.T`` is C-contiguous, the
        layout the kernels read), in ``spec.feature_dtype``.
    y_tilde : ndarray of shape (n,) or None
        int8 in {-1, +1} (class indices with >= 3 classes, float for regression); None when ``y``
        is None.
    """
    import pyarrow as pa

    from ..io.sources import BatchOrigin

    if spec is None:
        raise InvalidInputError("privatize needs a ReleaseSpec: privatize(X, y, spec)")
    if isinstance(X, dict):
        names = list(X)
        spec = _resolve_spec(spec, spec.features or names,
                             spec.label or ("y" if y is not None else None), None)
        cols = {f: np.asarray(X[f]) for f in spec.feature_names}
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise InvalidInputError(f"X has shape {X.shape}; expected (n_rows, n_features)")
        if spec.features is None or len(spec.features) != X.shape[1]:
            raise InvalidInputError(
                f"X has {X.shape[1]} columns but the spec names {len(spec.features or ())} features; "
                "give spec.features in X's column order"
            )
        cols = {f: X[:, j] for j, f in enumerate(spec.features)}
        spec = _resolve_spec(spec, spec.features, spec.label or ("y" if y is not None else None), None)
    if y is None:
        from dataclasses import replace

        spec = replace(spec, label=None, epsilon_y=None, delta_y=None, target_range=None)
    if spec.ranges_from_data:
        spec.scaler_ranges()  # in memory: pass declared ranges (from_data is for release())
    n_rows = len(cols[spec.features[0]]) if spec.features else 0
    engine = engine_from_keywords(engine, kernel, "kernel", default="auto", allowed=RELEASE_ENGINES)
    privatizer = _Privatizer(spec, seed, threads, engine, n_rows)
    try:
        arrays = [pa.array(np.ascontiguousarray(cols[f])) for f in spec.feature_names]
        names = list(spec.feature_names)
        if y is not None:
            arrays.append(pa.array(np.ascontiguousarray(np.asarray(y))))
            names.append(spec.label)
        batch = pa.RecordBatch.from_arrays(arrays, names=names)
        origin = BatchOrigin(0, "<arrays>", -1, 0, 0)
        feats, label_values, dropped = privatizer.prepare(origin, batch, on_invalid)
        n = batch.num_rows - dropped
        out = np.empty((privatizer.p, n), dtype=privatizer.dtype)
        label_out = None
        if y is not None:
            label_out = np.empty(n, dtype=_label_dtype(spec))
        privatizer.run(feats, label_values, out, label_out)
    finally:
        privatizer.close()
    return out.T, label_out


def read_release_spec(path) -> ReleaseSpec:
    """The :class:`ReleaseSpec` stored in a released file's schema metadata.

    Raises ``ReleaseSpecError`` when the file is not an iwpfast release or its metadata is corrupt.
    """
    from ..io.sources import open_source

    src = open_source(path)
    if src.release_metadata is None:
        raise ReleaseSpecError(
            f"{os.fspath(path)!r} has no '{METADATA_KEY}' metadata: it is not an iwpfast release; "
            "create one with `iwpfast release` or iwpfast.release()"
        )
    return ReleaseSpec.from_metadata(src.release_metadata)
