"""The streaming driver: one pass over a source, several heads trained in the same scan.

    >>> from iwpfast.sgd.driver import Head, fit_stream
    >>> result = fit_stream("release.parquet", [Head("iwp", cfg, features, "y")])  # doctest: +SKIP
    >>> theta, b = result.states["iwp"].coef(averaged=False)                      # doctest: +SKIP

Per chunk of the stream (``iwpfast.io.reader.ChunkReader``, decoded one chunk ahead in a
background thread) the driver makes exactly one kernel call per *unit* of heads (``_units``): a
head alone (``run_chunk``), or the heads that read the same columns and share batch size, loss and
truncation (a tuning grid; the one-vs-rest heads of a class-index label) in one call of the
several-heads kernel (``run_chunk_heads``: every batch is used by all of them while it is in
cache, with each head's single-head bits); Python never loops per row or per minibatch.
``finish`` runs each head's last partial batch at the end of the stream.  Because the kernels
carry the incomplete batch between calls, the model does not depend on the chunk size or on how
the data is split into files: bit for bit.

Around that loop: the tqdm progress bar, the trace callback (the kernel records (theta, b) every k
updates into a buffer the driver sizes before and drains after each chunk), periodic checkpoints
and checkpoint-on-signal (SIGINT/SIGTERM: the chunk in progress is finished for every head, the
checkpoint written, then the signal's usual effect happens), resume, and the per-head telemetry
with its warnings.

The theory (the paper's Theorem 4.4) is for a single pass: every example is seen once, so the
gradients are unbiased for the population risk.  ``epochs > 1`` re-reads the data and is offered
only for experiments; its iterates are no longer covered by that guarantee.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..engines import resolve_engine
from ..exceptions import (
    CheckpointError,
    DivergenceError,
    InvalidInputError,
    NumericalWarning,
    ReleaseSpecError,
)
from ..io.format_readers import usable_cores
from ..io.reader import ChunkReader
from ..io.source_base import load_lazy_imports
from ..io.sources import Source, open_source
from ..noise_registry import LearnerLaw, record_of_law, resolve
from ..progress import progress_bar
from .checkpoint import checkpoint_exists, config_hash, dataset_hash, read_checkpoint
from .scan import (
    Checkpoints,
    Scan,
    _ensure_trace,
    _locate_non_finite_carry,
    _SignalGuard,
)
from .schedules import resolve_paper_schedule
from .state import TELEMETRY_INDEX, HeadConfig, HeadState

if TYPE_CHECKING:
    from ..privacy.spec import ReleaseSpec

#: warn when sigma^2 |theta|^2 exceeded this: the IWP gradient variance grows like
#: exp(sigma^2 |theta|^2) (exponential loss), e^8 ~ 3000 times the noiseless variance.
NOISE_ENERGY_WARN = 8.0
#: default rows between periodic checkpoints (a few seconds of a fast pass)
DEFAULT_CHECKPOINT_ROWS = 50_000_000


@dataclass
class Head:
    """One model trained during the scan.

    name: unique name (key of the result dicts).  config: its HeadConfig.  features: the p feature
    columns in the order of ``config.noise_var``.  label: the label/target column.  theta0,
    intercept0: starting point.  paper_A, paper_smoothness: constants of the 'paper' schedule
    (defaults: ``schedules.paper_constants`` from the release's feature bound).  sample_weight: the
    column of public per-row weights s_i >= 0 (the head then minimizes the weighted risk; its
    config is made ``weighted``); None: unweighted.
    """

    name: str
    config: HeadConfig
    features: Sequence[str]
    label: str
    theta0: np.ndarray | None = None
    intercept0: float = 0.0
    paper_A: float | None = None
    paper_smoothness: float | None = None
    sample_weight: str | None = None


@dataclass
class StreamResult:
    """What a pass produced.  states: final HeadState per head.  n_rows: rows of one pass over the
    source.  telemetry: per-head dict (see ``head_telemetry``).  configs: the configs actually run
    ('paper' resolved to its constant step, trace_every as used)."""

    states: dict[str, HeadState]
    n_rows: int
    release_metadata: dict | None
    telemetry: dict[str, dict]
    elapsed_s: float
    rows_per_s: float
    configs: dict[str, HeadConfig] = field(default_factory=dict)
    reader_stats: dict = field(default_factory=dict)
    resumed_from_row: int = 0
    #: with ``drop_diverged``: the heads that diverged, each with the end row of the chunk in
    #: which it did (their states hold the non-finite update)
    diverged: dict[str, int] = field(default_factory=dict)
    #: with ``race``: the heads it stopped, each with the row after which it did (their states
    #: are the models at that row, not finished)
    pruned: dict[str, int] = field(default_factory=dict)


# ------------------------------------------------------------------------------ noise parameters
@dataclass(frozen=True)
class NoiseModel:
    """The noise a dataset went through, in the one shape every learner layer takes (the
    estimators' passes, "auto"'s grid, the configs): per-feature noise variances sigma_j^2, the
    label keep probability S(eps_y) (None: public labels), the target noise variance
    (regression); read from a release, also its feature bound, its metadata and its spec, the
    metadata validated once (``estimators._noise.noise_from_metadata``)."""

    noise_var: np.ndarray
    label_keep_prob: float | None
    target_noise_var: float
    #: B of the release (the default radius); None when unknown
    feature_bound: float | None = None
    #: the release metadata dict, when read from a release
    metadata: dict | None = None
    #: the learner's law (``noise_registry.LearnerLaw``) of a law with an inverse of its own (the
    #: discrete Laplace law of a pure-epsilon release), else None: Gaussian, the variances only
    noise_law: LearnerLaw | None = None
    #: the release's ReleaseSpec, validated once from ``metadata`` (None for explicit noise)
    spec: ReleaseSpec | None = None
    #: where the parameters came from: "release" or "explicit"
    origin: str = "explicit"

    @property
    def is_clean(self) -> bool:
        return (not np.any(self.noise_var > 0) and self.label_keep_prob is None
                and self.target_noise_var == 0.0)

    def release_spec(self) -> ReleaseSpec | None:
        """The release's spec: the one validated with the metadata (else, for a model built by
        hand with metadata only, read from it now)."""
        if self.spec is None and self.metadata is not None:
            from ..privacy.spec import ReleaseSpec
            return ReleaseSpec.from_metadata(self.metadata)
        return self.spec


#: the former name of ``NoiseModel`` (``noise_from_release``'s result before the noise took one
#: shape), kept working
NoiseParameters = NoiseModel


def noise_from_release(metadata: ReleaseSpec | dict | None, features: Sequence[str], *,
                       noise_var=None, label_keep_prob=None, target_noise_var=None,
                       rtol: float = 1e-9) -> NoiseModel:
    """The noise parameters of ``features`` from a release: its ``ReleaseSpec``, or its metadata
    dict, read into its spec first (``privacy.spec_reading.release_spec_of``: the fields
    validated, the stored noise checked against the parameters).  Everything comes from the
    spec: each feature's exact noise variance (0 for a public column and a randomized-response
    code), the label keep probability, the target's noise variance, the law and the L2 bound of
    a released vector; nothing is read from the metadata's fields.

    Without a release, the parameters must be given explicitly (``noise_var`` at least); that
    works with a warning, since nothing then ties the correction to the noise actually added.
    With a release, explicit values must agree with it (else ReleaseSpecError)."""
    features = list(features)
    if metadata is None:
        if noise_var is None:
            raise ReleaseSpecError(
                "the data carries no release metadata (schema key 'iwpfast.release'), so the "
                "feature noise is unknown: read a file written by iwpfast.release(...), or pass "
                "the noise explicitly (noise_var=sigma^2 per feature, label_keep_prob=S(eps_y)).")
        nv = np.broadcast_to(np.asarray(noise_var, dtype=np.float64), (len(features),)).copy()
        warnings.warn(
            "no release metadata: using the noise parameters given explicitly "
            f"(noise_var={nv.tolist()}, label_keep_prob={label_keep_prob}); if they differ from "
            "the noise actually added, the model is biased.", UserWarning, stacklevel=2)
        return NoiseModel(nv, None if label_keep_prob is None else float(label_keep_prob),
                          float(target_noise_var or 0.0), origin="explicit")
    from ..privacy.spec import ReleaseSpec
    from ..privacy.spec_reading import (
        column_noise_variances,
        release_spec_of,
        release_vector_bound,
    )
    meta = None if isinstance(metadata, ReleaseSpec) else metadata
    spec = metadata if isinstance(metadata, ReleaseSpec) else release_spec_of(metadata)
    assert spec is not None
    nv = column_noise_variances(spec, features)
    keep = spec.label_keep_prob
    if noise_var is not None:
        given = np.broadcast_to(np.asarray(noise_var, dtype=np.float64), nv.shape)
        if not np.allclose(given, nv, rtol=rtol, atol=0):
            raise ReleaseSpecError(
                f"noise_var={given.tolist()} contradicts the release metadata "
                f"(sigma^2 = {nv.tolist()} for {features}); drop the explicit value.")
    if label_keep_prob is not None and (keep is None or not math.isclose(
            float(label_keep_prob), keep, rel_tol=rtol)):
        raise ReleaseSpecError(
            f"label_keep_prob={label_keep_prob} contradicts the release metadata ({keep}); drop "
            f"the explicit value.")
    return NoiseModel(nv, keep, spec.target_noise_variance, feature_bound=release_vector_bound(spec),
                      metadata=meta,
                      noise_law=laplace_law_of(spec.feature_noise_record(), len(features), nv),
                      spec=spec, origin="release")


def laplace_law_of(law: dict | None, p: int, noised=None) -> LearnerLaw | None:
    """The learner's law object (its tau: a ``LearnerLaw``, e.g. a DiscreteLaplace) from a
    release's ``noise`` field, by the law's record in ``iwpfast.noise_registry``
    (``learner_law``; ``noised``: the features' noise variances, 0 for a public one, or None
    when every feature is noised), or None for a
    law whose inverse reads the variances only (Gaussian) and for a release that names no law
    (float noise, before the laws were named); ``ReleaseSpecError`` for a law this iwpfast lacks
    (its inverse is unknown: debiasing it as Gaussian noise would be wrong)."""
    if not isinstance(law, dict) or law.get("law") is None:
        return None
    record = record_of_law(str(law["law"]))
    if record.learner_law is None:
        return None
    return resolve(record.learner_law)(law, p, noised)


#: a bar on a terminal moves at least this many times a pass (the model does not depend on the
#: chunking, bit for bit, so smaller chunks only cost their per-call overhead)
BAR_UPDATES = 20
BAR_MIN_CHUNK_ROWS = 4096


def bar_chunk_rows(chunk_rows: int | None, progress, n_rows: int | None) -> int | None:
    """The chunk size of a pass: the caller's, else, when a bar is shown on a terminal and the
    row count is known, at most n / BAR_UPDATES rows (not below BAR_MIN_CHUNK_ROWS), so that a
    pass of a few seconds on a file that fits one default chunk (~16 MiB) still shows progress
    instead of 0% until its end; None leaves the reader's default."""
    from ..progress import shows_progress

    if chunk_rows is not None or n_rows is None or progress is False or not shows_progress(progress):
        return chunk_rows
    from ..io.reader import default_chunk_rows
    # a power of two, as the default: it divides Parquet's row groups, so chunks stay views
    wanted = max(BAR_MIN_CHUNK_ROWS, 1 << max(0, (-(-int(n_rows) // BAR_UPDATES) - 1).bit_length()))
    return wanted if wanted < default_chunk_rows(8) else None


# ------------------------------------------------------------------------------ telemetry
def head_telemetry(cfg: HeadConfig, state: HeadState) -> dict:
    """Telemetry of one head as a dict: rows_seen, batches, projection_hits, cap_hits,
    grad_norm_mean, grad_norm_var, max_noise_energy (largest sigma^2 |theta|^2), theta_norm,
    on_sphere (the last update left theta on the projection sphere), capped (same for the cap)."""
    t = state.telemetry
    batches = int(t[TELEMETRY_INDEX["batches"]])
    m2 = float(t[TELEMETRY_INDEX["grad_norm_m2"]])
    theta_norm = float(np.linalg.norm(state.theta))
    s = np.asarray(cfg.noise_var, dtype=np.float64) if cfg.mode == "iwp" else 0.0
    energy = float(np.sum(s * state.theta ** 2))
    return {
        "rows_seen": int(t[TELEMETRY_INDEX["rows_seen"]]),
        "batches": batches,
        "projection_hits": int(t[TELEMETRY_INDEX["projection_hits"]]),
        "cap_hits": int(t[TELEMETRY_INDEX["cap_hits"]]),
        "grad_norm_mean": float(t[TELEMETRY_INDEX["grad_norm_mean"]]),
        "grad_norm_var": m2 / (batches - 1) if batches > 1 else 0.0,
        "max_noise_energy": float(t[TELEMETRY_INDEX["max_noise_energy"]]),
        "theta_norm": theta_norm,
        # a projection puts theta exactly on the sphere (up to rounding)
        "on_sphere": bool(math.isfinite(cfg.radius) and batches > 0
                          and theta_norm >= cfg.radius * (1 - 1e-9)),
        "capped": bool(math.isfinite(cfg.variance_cap) and batches > 0
                       and energy >= cfg.variance_cap * (1 - 1e-9)),
    }


def _warn_telemetry(name: str, cfg: HeadConfig, tel: dict, chosen: bool = False) -> None:
    """The pass's warnings (noisy run, ending on the sphere or the cap); ``chosen``: the head was
    picked by the automatic tuning (the fix then is more signal, not another setting)."""
    if cfg.mode == "iwp" and tel["max_noise_energy"] > NOISE_ENERGY_WARN:
        e = tel["max_noise_energy"]
        warnings.warn(
            f"head {name!r}: sigma^2 |theta|^2 reached {e:.3g}; the IWP gradient variance grows "
            f"like exp(sigma^2 |theta|^2) = {math.exp(min(e, 700)):.3g}, so this run is very "
            f"noisy. Use a smaller radius, "
            + (f"a smaller variance_cap (now {cfg.variance_cap:g})" if math.isfinite(cfg.variance_cap)
               else "a variance_cap (e.g. 2)") + ", or a smaller learning rate.",
            NumericalWarning, stacklevel=3)
    if tel["on_sphere"]:
        warnings.warn(
            f"head {name!r}: the pass ended on the projection sphere |theta| = R = "
            f"{cfg.radius:.4g} ({tel['projection_hits']} projections in {tel['batches']} "
            f"updates); theta may be biased toward the sphere. Use a larger radius or a smaller "
            f"learning rate.", NumericalWarning, stacklevel=3)
    if tel["capped"]:
        fix = ("more rows, a larger epsilon_x or fewer private (noised) columns allow a larger "
               "theta (`iwpfast plan` shows the limit)" if chosen else
               "raise variance_cap or lower the learning rate")
        warnings.warn(
            f"head {name!r}: the pass ended with the variance cap active (sigma^2 |theta|^2 = cap "
            f"= {cfg.variance_cap:.4g}, {tel['cap_hits']} cap hits): the noise, not the data, "
            "limited |theta|, so the scores are shrunk toward 0 (predictions may lean to the "
            f"majority class) and theta may be biased; {fix}.", NumericalWarning, stacklevel=3)


# ------------------------------------------------------------------------------ engines
def _engine(name: str, heads_kernel: bool = False):
    """(run, finish) of a *unit* of heads (``_units``): ``run(cfgs, states, X, y)``.
    ``heads_kernel``: a unit of one head runs in the several-heads kernel too (the same bits)."""
    if resolve_engine(name) in ("numba", "auto"):
        from . import engine as eng
        one, one_finish, many, many_finish = (eng.run_chunk, eng.finish, eng.run_chunk_heads,
                                              eng.finish_heads)
    else:                               # "numpy" (alias "reference"): the NumPy twin
        from . import reference as ref
        one, one_finish, many, many_finish = (ref.reference_run_chunk, ref.reference_finish,
                                              ref.reference_run_chunk_heads,
                                              ref.reference_finish_heads)

    def run(cfgs, states, X, y, sample_weight=None, drop=False):
        """The unit's kernel call; ``drop``: the indices of heads that diverged are returned
        (the others went on) instead of a DivergenceError (one head: always raised)."""
        if len(cfgs) == 1 and not heads_kernel:
            one(cfgs[0], states[0], X, y, sample_weight)
            return []
        if drop:
            return many(cfgs, states, X, y, sample_weight, drop_diverged=True)
        many(cfgs, states, X, y, sample_weight)
        return []

    def finish(cfgs, states, drop=False):
        if len(cfgs) == 1 and not heads_kernel:
            one_finish(cfgs[0], states[0])
            return []
        if drop:
            return many_finish(cfgs, states, drop_diverged=True)
        many_finish(cfgs, states)
        return []
    return run, finish


def _units(heads, parts: int = 1) -> list[list]:
    """The heads grouped into kernel calls: heads that read the same features, label and sample
    weights and share batch size, loss and truncation run as one call of the several-heads
    kernel (``run_chunk_heads``: every batch is read once and used by every head while in cache,
    their margins one small matrix product), the one-vs-rest heads of a class-index label
    (``HeadConfig.label_class`` set) and the heads of the labels as they are (a tuning grid,
    clean/naive/IWP heads) in separate calls.  Each such group is cut into up to ``parts``
    consecutive units (one per thread of ``_HeadPool``).  Each head's model has the bits of its
    single-head run either way.  Order: the heads' order, unit by unit."""
    groups: list[list] = []
    together: dict[tuple, list] = {}
    for h in heads:
        c = h.config
        key = (tuple(h.features), h.label, h.sample_weight, c.label_class is None, c.batch_size,
               c.loss, c.truncation, c.n_features, c.weighted)
        if key not in together:
            together[key] = []
            groups.append(together[key])
        together[key].append(h)
    units: list[list] = []
    for group in groups:
        k = max(1, min(int(parts), len(group)))
        bounds = [round(i * len(group) / k) for i in range(k + 1)]
        units += [group[bounds[i]:bounds[i + 1]] for i in range(k)]
    return units


def finish_states(configs: dict[str, HeadConfig], states: dict[str, HeadState], *,
                  engine: str = "numba", features: Sequence[str] | None = None) -> None:
    """Run each head's carried partial batch as its last update (after ``fit_stream(...,
    finish=False)``: the end of a pass made of several calls)."""
    _, finish_unit = _engine(engine)
    units: dict = {}
    for name, cfg in configs.items():
        _ensure_trace(cfg, states[name], 0)
        # one-vs-rest heads share their carried rows: finished together (as fit_stream does)
        key = name if cfg.label_class is None else ("ovr", cfg.batch_size, cfg.loss, cfg.truncation)
        units.setdefault(key, []).append(name)
    for names in units.values():
        try:
            finish_unit([configs[n] for n in names], [states[n] for n in names])
        except DivergenceError:
            if features is not None:
                _locate_non_finite_carry([Head(names[0], configs[names[0]], features, "")],
                                         states[names[0]], None)
            raise


#: from this many heads in a scan, their kernels take every core (the decoder shares one)
MANY_HEADS = 8


def default_head_threads(n_heads: int, source: Source, n_groups: int | None = None) -> int:
    """Threads for the heads' kernels when ``head_threads=None``; ``n_groups``: the units the
    heads form before they are cut per thread (``_units(heads)``; default: one per head).

    When at least 2 cores are left for kernels (counting one core for decoding unless the source
    decodes for free -- in-memory, memory-mapped IPC -- or the scan has MANY_HEADS heads or more,
    whose kernels' work per chunk is many times the decode's): one thread per unit (the OS then
    balances e.g. 3 single heads over 2 cores), and at least one per core, up to one per head (a
    group of heads fused into one unit is then cut into one unit per thread); else 1
    (sequential).  Measured on 2 cores (bench/README.md): 3 separate heads from IPC 1.5x faster
    in parallel, from Parquet 10-20% slower (the kernels starve the decoder, and a 2-core pass is
    CPU-bound either way)."""
    if n_heads <= 1:
        return 1
    busy = 0 if source.cheap_decode or n_heads >= MANY_HEADS else 1
    free = usable_cores() - busy
    if free < 2:
        return 1
    return max(n_heads if n_groups is None else n_groups, min(n_heads, free))


# ------------------------------------------------------------------------------ the pass, in phases
# fit_stream runs: _check_heads -> _resolve_configs -> _column_plan -> _starting_point -> the scan
# (chunks through every unit of heads, checkpoints, signals) -> finish -> _pass_result.

def _check_heads(heads, epochs):
    """The heads as a list, their names, and epochs as an int (every argument checked)."""
    heads = list(heads)
    if not heads:
        raise InvalidInputError("heads is empty; pass at least one Head")
    names = [h.name for h in heads]
    if len(set(names)) != len(names):
        raise InvalidInputError(f"head names {names} are not unique; name each head differently")
    if int(epochs) < 1:
        raise InvalidInputError(f"epochs={epochs}; use 1 (the single pass of the theory) or more")
    epochs = int(epochs)
    if epochs > 1:
        warnings.warn(f"epochs={epochs}: the IWP-SGD guarantee is for a single pass (each example "
                      f"used once); later epochs re-use examples and are not covered by it.",
                      UserWarning, stacklevel=3)
    for h in heads:
        if len(h.features) != h.config.n_features:
            raise InvalidInputError(
                f"head {h.name!r}: {len(h.features)} feature columns {list(h.features)} but "
                f"config.n_features={h.config.n_features}; make them agree")
    return heads, names, epochs


def _resolve_configs(heads, src, trace_every, feature_bound):
    """The heads with the configs the kernels run: the trace_every override applied and the
    'paper' schedule resolved into its constant step (it needs the row count and the bound)."""
    meta = src.release_metadata
    fb = feature_bound if feature_bound is not None else (meta or {}).get("feature_bound")
    tb = (meta or {}).get("target_bound")
    resolved = []
    for h in heads:
        cfg = h.config
        if h.sample_weight is not None and not cfg.weighted:
            cfg = dataclasses.replace(cfg, weighted=True)
        elif cfg.weighted and h.sample_weight is None:
            raise InvalidInputError(
                f"head {h.name!r}: config.weighted=True but no sample-weight column; name it with "
                f"Head(..., sample_weight='column'), or make the config with weighted=False")
        if trace_every and trace_every > 0:
            cfg = dataclasses.replace(cfg, trace_every=int(trace_every))
        if cfg.schedule == "paper":
            theta0_norm = 0.0 if h.theta0 is None else float(np.linalg.norm(h.theta0))
            cfg = resolve_paper_schedule(cfg, None if src.num_rows is None else src.num_rows,
                                         feature_bound=fb, target_bound=tb, A=h.paper_A,
                                         smoothness=h.paper_smoothness, theta0_norm=theta0_norm)
        resolved.append(dataclasses.replace(h, config=cfg))
    return resolved


def _column_plan(heads, src):
    """(column groups, head -> (feature group index, sample-weight group index or None), label
    columns, every used column), each column checked to exist in the source.  A sample-weight
    column is a group of its own, so it never changes the dtype the features are read in."""
    groups: list[list[str]] = []
    for h in heads:
        for g in [list(h.features)] + ([[h.sample_weight]] if h.sample_weight is not None else []):
            if g not in groups:
                groups.append(g)
    group_of = {h.name: (groups.index(list(h.features)),
                         None if h.sample_weight is None else groups.index([h.sample_weight]))
                for h in heads}
    labels = list(dict.fromkeys(h.label for h in heads))
    used_columns = list(dict.fromkeys([c for g in groups for c in g] + labels))
    for c in used_columns:
        if c not in src.full_schema.names:
            raise InvalidInputError(
                f"{src.description}: column {c!r} not found; the columns found are "
                f"{list(src.full_schema.names)}")
    return groups, group_of, labels, used_columns


def _starting_point(heads, names, states, resume, checkpoint, chash, dhash):
    """(states, first epoch, first row, finished): fresh states, the given ``states`` (a pass
    continued), or a checkpoint's when resuming (refused for other heads or other data)."""
    start_epoch, start_row, finished = 0, 0, False
    if states is not None:
        missing = [n for n in names if n not in states]
        if missing:
            raise InvalidInputError(f"states has no entry for head(s) {missing}")
        cur = {n: states[n].copy() for n in names}
    else:
        cur = {h.name: HeadState.new(h.config, h.theta0, h.intercept0) for h in heads}
    if resume:
        if checkpoint is None:
            raise InvalidInputError("resume=True needs checkpoint=<path of the checkpoint file>")
        if checkpoint_exists(checkpoint):
            loaded, cmeta = read_checkpoint(checkpoint)
            if cmeta.get("config_hash") != chash:
                raise CheckpointError(
                    f"checkpoint {os.fspath(checkpoint)!r} was written for other heads or "
                    f"settings (config hash differs): resume with the same heads, configs, "
                    f"columns and epochs, or delete the checkpoint to restart.")
            if cmeta.get("dataset_hash") != dhash:
                raise CheckpointError(
                    f"checkpoint {os.fspath(checkpoint)!r} was written for another dataset "
                    f"(its release metadata, column types, row count, file sizes or Parquet "
                    f"row-group statistics differ): resume on the same data, or restart with "
                    f"overwrite=True (CLI: --overwrite) instead of resume.")
            cur = {n: loaded[n] for n in names}
            start_epoch = int(cmeta["position"]["epoch"])
            start_row = int(cmeta["position"]["row"])
            finished = bool(cmeta.get("finished", False))
        else:
            warnings.warn(f"resume=True but no checkpoint at {os.fspath(checkpoint)!r}: starting "
                          f"from the beginning", UserWarning, stacklevel=3)
    return cur, start_epoch, start_row, finished


def _pass_result(heads, cur, src, n_rows_pass, rows_done, elapsed, reader_stats, resumed_from_row,
                 diverged=None):
    """The StreamResult of a pass, with each head's telemetry (and its warnings; none for the
    heads that ``diverged`` and were dropped)."""
    diverged = diverged or {}
    telemetry = {}
    for h in heads:
        if h.name in diverged:
            with np.errstate(invalid="ignore", over="ignore"):      # a non-finite state
                telemetry[h.name] = head_telemetry(h.config, cur[h.name])
            continue
        tel = head_telemetry(h.config, cur[h.name])
        telemetry[h.name] = tel
        _warn_telemetry(h.name, h.config, tel)
    return StreamResult(
        states=cur, n_rows=int(n_rows_pass or 0), release_metadata=src.release_metadata,
        telemetry=telemetry, elapsed_s=elapsed,
        rows_per_s=rows_done / elapsed if elapsed > 0 else float("nan"),
        configs={h.name: h.config for h in heads}, reader_stats=reader_stats,
        resumed_from_row=resumed_from_row, diverged=dict(diverged))


def _rows_of_pass(src, declared: int | None, read: int) -> int:
    """The rows of one pass: those read, which must be the ones the source declares."""
    if declared is not None and read != declared:
        raise InvalidInputError(f"{src.description}: read {read} rows but the source declares "
                                f"{declared}; the data changed or is corrupt")
    return read


# ------------------------------------------------------------------------------ where passes run
#: the runner of the passes started in this context (None: here, in this process)
_STREAM_RUNNER: contextvars.ContextVar = contextvars.ContextVar("iwpfast_stream_runner",
                                                                default=None)


def stream_runner():
    """The runner set by ``streams_on`` in this context, or None (passes run here)."""
    return _STREAM_RUNNER.get()


@contextlib.contextmanager
def streams_on(runner):
    """Run the passes started inside the block with ``runner`` (e.g. on a Dask cluster:
    ``iwpfast.distributed``): ``fit_stream`` calls ``runner.fit_stream(source, heads, **kw)``
    and ``scoring.score_heads`` calls ``runner.score(source, scorer)``, so an estimator's whole
    ``fit`` -- 'auto' grid, k classes, sample weights -- runs its passes there unchanged.  The
    runner's own workers call ``fit_stream_here``."""
    token = _STREAM_RUNNER.set(runner)
    try:
        yield runner
    finally:
        _STREAM_RUNNER.reset(token)


def _checkpoint_every(checkpoint, checkpoint_every, src, overwrite: bool, resume: bool):
    """The rows between checkpoints of a pass (None: no checkpoint), its file checked."""
    if checkpoint is not None:
        from ..io.outputs import check_output_path, source_files
        check_output_path(checkpoint, what="checkpoint", inputs=source_files(src),
                          overwrite=overwrite or (resume and os.path.exists(checkpoint)),
                          remedy="pass resume=True to continue from it, or overwrite=True to "
                                 "start the pass again (CLI: --resume, --overwrite)")
    if checkpoint is not None and checkpoint_every is None:
        checkpoint_every = DEFAULT_CHECKPOINT_ROWS
    if checkpoint_every is not None and int(checkpoint_every) < 1:
        raise InvalidInputError(f"checkpoint_every={checkpoint_every}; use a number of rows >= 1")
    return checkpoint_every


def fit_stream_here(source, heads: Sequence[Head], *, chunk_rows: int | None = None,
               progress=True, trace_every: int = 0,
               trace_callback: Callable[[dict, dict], None] | None = None,
               checkpoint: str | os.PathLike | None = None, checkpoint_every: int | None = None,
               resume: bool = False, epochs: int = 1,
               states: dict[str, HeadState] | None = None, engine: str = "numba",
               prefetch: bool = True, feature_bound: float | None = None,
               head_threads: int | None = None, overwrite: bool = False,
               finish: bool = True, drop_diverged: bool = False, race=None,
               heads_kernel: bool = False) -> StreamResult:
    """Train ``heads`` in one scan of ``source`` (anything ``open_source`` accepts).

    chunk_rows: rows per kernel call (default: ~16 MiB of columns; does not change the model).
    progress: tqdm bar on a terminal (False: never, "force": even when not a terminal).
    trace_every: record (theta, b) every k updates for every head (overrides config.trace_every
      when > 0); trace_callback(steps, params) receives {head: int64 update numbers} and
      {head: (k, p+1) array of (theta, b)} after each chunk that recorded something.
    checkpoint: path of the checkpoint file; checkpoint_every: rows between checkpoints
      (default 5e7); also written on SIGINT/SIGTERM and at the end of the pass.
    resume: continue from ``checkpoint`` (refused if the heads or the data differ); the model is
      bit-identical to an uninterrupted pass.  A missing file starts from the beginning.
    epochs: passes over the data (the theory is single pass; > 1 only for experiments).
    states: initial HeadState per head name (continue a previous pass: partial_fit).
    engine: 'numba' (the fused kernels) or 'numpy' (the NumPy twin, for tests; alias 'reference').
    feature_bound: B for the 'paper' schedule's defaults (default: the release's feature_bound).
    head_threads: threads running the heads' kernels concurrently (the kernels release the GIL;
      every head has its own state, so the models are bit-identical to a sequential run).
      None: ``default_head_threads`` (one per head when 2 cores are free for kernels); 1:
      sequential, in the calling thread.
    overwrite: replace an existing ``checkpoint`` file when not resuming (else refused); a
      checkpoint path that is one of the source's files is always refused.
    finish: run each head's last partial batch at the end (True: the pass is complete).  False
      leaves those rows in the states' carry, for a later call to continue the same pass
      (``partial_fit``); ``finish_states`` then runs them.
    drop_diverged: a head whose theta becomes non-finite on finite data is left out from there
      on and the pass goes on with the others (``StreamResult.diverged`` names them; a grid of
      heads needs no repeated scan); False: the pass stops with a DivergenceError naming it.  A
      non-finite value in the data is an input error either way.
    race: heads stopped mid-scan (``drop_diverged``, one epoch, no checkpoint; ``scan.Scan``):
      ``rows`` and ``prune(row, alive names, states)`` -> the names to leave out from there on
      (``StreamResult.pruned``); a tuning grid's early pruning (``iwpfast.sgd.halving.Race``).
    heads_kernel: run even a single head in the several-heads kernel (the same bits): a pass
      after a tuning grid's scans (cross-validation's refit, ``iwpfast.sgd.crossval``) then
      compiles no kernel of its own on a first fit.
    """
    t_start = time.perf_counter()
    if race is not None and (not drop_diverged or checkpoint is not None or int(epochs) != 1):
        raise InvalidInputError("race= needs drop_diverged=True, epochs=1 and no checkpoint")
    heads, names, epochs = _check_heads(heads, epochs)
    src: Source = source if isinstance(source, Source) else open_source(source)
    load_lazy_imports()     # before the first batch (and the reader's thread): a clean Ctrl-C
    heads = _resolve_configs(heads, src, trace_every, feature_bound)
    run_unit, finish_unit = _engine(engine, heads_kernel)
    if head_threads is None:
        head_threads = default_head_threads(len(heads), src, len(_units(heads)))
    elif int(head_threads) < 1:
        raise InvalidInputError(f"head_threads={head_threads}; use None (automatic), 1 "
                                f"(sequential) or a number of threads >= 1")
    units = _units(heads, int(head_threads))
    head_threads = min(int(head_threads), len(units))

    groups, group_of, labels, used_columns = _column_plan(heads, src)
    # NaN/inf in a feature column is found by the scan (scan._run_unit_chunk), not summed for
    # while read; labels and sample weights are still checked by the reader
    unchecked = ({c for h in heads for c in h.features} - set(labels)
                 - {h.sample_weight for h in heads})
    # the heads' and the dataset's identities (a grid's configs canonicalized, footers read or
    # in-memory columns hashed): only for checkpoints
    chash = None if checkpoint is None else config_hash(heads, epochs)
    dhash = None if checkpoint is None else dataset_hash(src, used_columns)

    cur, start_epoch, start_row, finished = _starting_point(
        heads, names, states, resume, checkpoint, chash, dhash)
    checkpoint_every = _checkpoint_every(checkpoint, checkpoint_every, src, overwrite, resume)
    checkpoints = Checkpoints(checkpoint, checkpoint_every, cur, chash, dhash)
    n_rows_pass = src.num_rows
    rows_done = 0
    reader_stats: dict = {}
    if not finished:
        total = None if src.num_rows is None else src.num_rows * epochs
        initial = start_row + start_epoch * (src.num_rows or 0)
        bar = progress_bar(progress, total, initial=initial if total else start_row)
        if checkpoint is None:
            chunk_rows = bar_chunk_rows(chunk_rows, progress, src.num_rows)
        scan = Scan(heads, units, cur, group_of, (run_unit, finish_unit), head_threads,
                    trace_callback, checkpoints, bar, drop_diverged=drop_diverged, race=race,
                    regroup=functools.partial(_units, parts=head_threads))
        try:
            with _SignalGuard(checkpoint is not None) as guard:
                for epoch in range(start_epoch, epochs):
                    first_row = start_row if epoch == start_epoch else 0
                    reader = ChunkReader(src, groups, labels, chunk_rows, start_row=first_row,
                                         prefetch=prefetch, unchecked_columns=unchecked)
                    row, rows_read = scan.epoch(reader, epoch, first_row, guard)
                    rows_done += rows_read
                    reader_stats = reader.stats.as_dict()
                    n_rows_pass = _rows_of_pass(src, n_rows_pass, row)
                    if checkpoint is not None and epoch + 1 < epochs:
                        checkpoints.save(epoch + 1, 0, None)
                if finish:
                    scan.finish(n_rows_pass)
                scan.drain()
                if checkpoint is not None:
                    checkpoints.save(epochs - 1, n_rows_pass, None, finished=True)
        finally:
            scan.close()
            if bar is not None:
                bar.close()
    dropped = {} if finished or scan.dropped is None else dict(scan.dropped)
    pruned = {} if finished else dict(scan.pruned)
    result = _pass_result(heads, cur, src, n_rows_pass, rows_done, time.perf_counter() - t_start,
                          reader_stats, start_row + start_epoch * int(n_rows_pass or 0),
                          {n: r for n, r in dropped.items() if n not in pruned})
    result.pruned = pruned
    return result


@functools.wraps(fit_stream_here)
def fit_stream(source, heads: Sequence[Head], **kwargs) -> StreamResult:
    # fit_stream_here's parameters and documentation; inside ``streams_on(runner)`` the runner
    # runs the pass (a cluster's shards) instead
    runner = _STREAM_RUNNER.get()
    if runner is not None:
        return runner.fit_stream(source, heads, **kwargs)
    return fit_stream_here(source, heads, **kwargs)
