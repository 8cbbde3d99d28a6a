"""The release and the training on a Dask cluster (optional extra: ``pip install iwpfast[dask]``).

- ``release_files(client, source, destination, spec, *, features, label, ...)``: one task per
  input file, each writing one part of a multi-part release; the manifest is written last, by the
  caller, once every part is there.  With a seed the parts are bit for bit those of the serial
  ``iwpfast.release(source, "dest/", ..., threads=1)`` (part i's key is derived from the seed and
  i; the tasks run one thread each by default); without
  one the release's key is drawn from OS entropy by the client and each task gets its part's key
  only (a retried part draws the same noise).
- ``fit_files(client, source, estimator, *, rounds=1)``: K shards of about equal row counts, one
  single-pass IWP-SGD per shard on its worker, merged by row-weighted averaging of the parameters
  and of the averaged iterates (``rounds > 1``: the merged state is sent back and every shard goes
  on with its next 1/rounds of rows -- periodic averaging).  Each shard takes 1/K of the updates,
  so its step is multiplied by K (a ``paper`` schedule is resolved with the shard's rows instead).
  docs/distributed.md gives the theory, the measurements and the limits.

Only arrays, configurations and file locations travel between the client and the workers; the
data is read where the task runs.  Dask is imported by the caller (who passes a ``Client``); this
module imports nothing heavy.
"""
from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np

from .exceptions import InvalidInputError
from .privacy.options import _UNSET, DEFAULT_BATCH_ROWS

__all__ = ["release_files", "fit_files", "shard_bounds", "merge_states", "local_client"]


def _require_client(client):
    if not hasattr(client, "submit") or not hasattr(client, "gather"):
        raise InvalidInputError(
            f"client must be a dask.distributed.Client (got {type(client).__name__}); e.g. "
            f"Client('tcp://scheduler:8786') or Client(LocalCluster(n_workers=2)) "
            f"(pip install iwpfast[dask])")


def local_client(n_workers: int):
    """A ``Client`` on a new local cluster of ``n_workers`` processes with one thread each (the
    CLI's ``--workers N``).  Close it (and its cluster) with ``client.close(); cluster.close()``,
    or use it as a context manager: ``with local_client(2) as client: ...``."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InvalidInputError("--workers/--scheduler need Dask: pip install iwpfast[dask]") from None
    if int(n_workers) < 1:
        raise InvalidInputError(f"--workers {n_workers}: give at least 1 worker")
    cluster = LocalCluster(n_workers=int(n_workers), threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    client._iwpfast_cluster = cluster  # closed with the client by close_client
    return client


def connect(address: str):
    """A ``Client`` of the running Dask scheduler at ``address`` (the CLI's ``--scheduler``)."""
    try:
        from distributed import Client
    except ImportError:
        raise InvalidInputError("--scheduler needs Dask: pip install iwpfast[dask]") from None
    try:
        return Client(address, timeout=30)
    except OSError as exc:
        raise InvalidInputError(f"cannot reach the Dask scheduler at {address!r} ({exc}); check "
                                f"the address (tcp://HOST:8786) and that the scheduler runs") from None


def close_client(client) -> None:
    cluster = getattr(client, "_iwpfast_cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


# --------------------------------------------------------------------------------- release
def release_files(client, source, destination, spec, *, features=None, label=_UNSET, ranges=None,
                  seed=None, overwrite: bool = False, on_invalid: str = "error",
                  format: str | None = None, compression="auto",
                  record_batch_rows: int = DEFAULT_BATCH_ROWS, threads: int | None = 1,
                  engine: str | None = None, filesystem=None, retries: int = 0,
                  kernel: str | None = None, max_part_rows: int | None = None,
                  batch_rows: int | None = None):
    """Release each input file of ``source`` as one part of ``destination`` (a folder / prefix,
    e.g. ``s3://bucket/release/``) on the Dask cluster of ``client``; write the manifest last.

    Arguments as :func:`iwpfast.release`; ``threads`` is per task (default 1: the cluster's
    workers are the parallelism); ``retries``: Dask retries of a failed part (a retried part
    replaces the earlier attempt); ``max_part_rows``: large Parquet/IPC files become several
    parts (tasks) of whole row groups of about that many rows.  Returns a
    :class:`~iwpfast.privacy.multipart.MultiPartResult` (rows, parts, spec: ``.spec.guarantee()``).
    When a part fails, the other parts are let finish (Dask cannot stop a running task), then
    every part written is deleted and nothing is published.
    """
    from .privacy.options import release_options
    from .privacy.release import run_release

    _require_client(client)
    options = release_options(
        seed=seed, overwrite=overwrite, on_invalid=on_invalid, format=format,
        compression=compression, record_batch_rows=record_batch_rows, batch_rows=batch_rows,
        threads=threads, engine=engine, kernel=kernel, filesystem=filesystem,
        max_part_rows=max_part_rows, features=features, label=label, ranges=ranges)
    return run_release(source, destination, spec, options,
                       parts_runner=DaskPartsRunner(client, retries))


class DaskPartsRunner:
    """Runs the parts of a multi-part release as Dask tasks (``run_release``'s parts runner)."""

    def __init__(self, client, retries: int = 0):
        self.client = client
        self.retries = int(retries)

    def __call__(self, plan, options):
        from .privacy.multipart import discard_parts

        if options.engine == "auto" and plan.spec.feature_dtype == "float32":
            # a cluster release is a large one: each worker loads the fused kernels once from the
            # on-disk cache (~0.5 s) and keeps them for all its parts
            options = dataclasses.replace(options, engine="numba")
        from .privacy.multipart import part_seed

        # each task gets its part's key only (derived here from the release's key): a retried
        # task draws the same noise; the filesystem object stays here (the plan's locations
        # carry their own)
        task_options = dataclasses.replace(options, filesystem=None, seed=None)
        futures = [self.client.submit(_release_part_task, plan, i, task_options,
                                      part_seed(options.seed, i), retries=self.retries,
                                      pure=False, key=f"iwpfast-release-{plan.release_id}-part-{i}")
                   for i in range(len(plan.inputs))]
        try:
            return list(self.client.gather(futures))
        except BaseException:
            # Dask cannot stop a part task that a worker has started (cancel only forgets it: the
            # part would go on writing, and publish after the cleanup), and whether a task has
            # started cannot be known without a race.  So every part is let finish, then all
            # deleted.
            _wait_quietly(futures)
            discard_parts(plan)
            raise


def _release_part_task(plan, index, options, key):
    """``release_part`` on a Dask worker: pyarrow's decoding uses as many threads as the part's
    noise (a worker's threads are its share of the machine; pyarrow would otherwise start one
    decoding thread per core in every worker process)."""
    import pyarrow as pa

    from .privacy.multipart import release_part_with

    pa.set_cpu_count(max(1, int(options.threads or 1)))
    pa.set_io_thread_count(max(2, int(options.threads or 1)))
    return release_part_with(plan, index, options, key)


def _wait_quietly(futures) -> None:
    """Wait until every part task has ended (finished or failed), so that nothing is written at
    the destination once its parts are deleted."""
    from distributed import wait
    try:
        wait(futures)
    except Exception:
        pass


# --------------------------------------------------------------------------------- training
def shard_bounds(n_rows: int, shards: int) -> list[tuple[int, int]]:
    """``shards`` contiguous row ranges of about equal length covering ``range(n_rows)``."""
    cuts = [round(n_rows * k / shards) for k in range(shards + 1)]
    return [(cuts[k], cuts[k + 1]) for k in range(shards)]


def merge_states(states: list, weights) -> object:
    """The row-weighted mean of shard states (``HeadState``): parameters, averaged iterates and
    intercepts averaged with ``weights`` (normalized to sum to 1); counters (updates, averaged
    iterates) averaged too, so the next round of every shard goes on as one shard of the merged
    run would; telemetry merged (counts summed, largest values kept, gradient-norm means and
    variances pooled)."""
    from .sgd.state import TELEMETRY_INDEX, HeadState

    w = np.asarray(weights, dtype=np.float64)
    if len(states) != len(w) or len(states) == 0 or w.sum() <= 0:
        raise InvalidInputError(f"merge_states: {len(states)} states and weights {list(w)}")
    w = w / w.sum()
    first = states[0]
    merged = HeadState.from_arrays(first.arrays())
    for name in ("theta", "theta_avg", "intercept", "intercept_avg"):
        setattr(merged, name, sum(wk * getattr(s, name) for wk, s in zip(w, states, strict=True)))
    counters = np.array([s.counters for s in states], dtype=np.float64)
    merged.counters = np.zeros_like(first.counters)
    merged.counters[0] = int(round(float(w @ counters[:, 0])))   # updates
    merged.counters[1] = int(round(float(w @ counters[:, 1])))   # averaged iterates
    if any(s.n_avg > 0 for s in states) and merged.counters[1] == 0:
        merged.counters[1] = 1
    merged.counters[2] = 0                                       # no carried rows (each finished)
    merged.carry_X = np.zeros_like(first.carry_X)
    merged.carry_y = np.zeros_like(first.carry_y)
    merged.telemetry = merge_telemetry([s.telemetry for s in states], TELEMETRY_INDEX)
    return merged


def merge_telemetry(tels: list, index: dict) -> np.ndarray:
    """Telemetry arrays of shards as one: rows, updates and hits summed, the largest noise energy
    kept, the per-update gradient-norm mean and sum of squares pooled (Chan et al.)."""
    out = np.zeros_like(tels[0])
    for name in ("rows_seen", "batches", "projection_hits", "cap_hits"):
        out[index[name]] = sum(t[index[name]] for t in tels)
    out[index["max_noise_energy"]] = max(t[index["max_noise_energy"]] for t in tels)
    n, mean, m2 = 0.0, 0.0, 0.0
    for t in tels:
        nb, mb, m2b = t[index["batches"]], t[index["grad_norm_mean"]], t[index["grad_norm_m2"]]
        if nb <= 0:
            continue
        delta = mb - mean
        total = n + nb
        mean += delta * nb / total
        m2 += m2b + delta * delta * n * nb / total
        n = total
    out[index["grad_norm_mean"]] = mean
    out[index["grad_norm_m2"]] = m2
    return out


#: the name of a shard's single head (its telemetry warnings name it, as a fit's)
_HEAD = "model"


def _fit_shard(locations, start, stop, config, features, label, state_arrays, estimator, engine,
               chunk_rows, sample_weight=None):
    """One shard's pass on a worker: rows [start, stop) of the files, from ``state_arrays``
    (None: a fresh state).  Returns the final state's arrays and the head's telemetry."""
    from .io.sources import FileSource, RowRangeSource
    from .sgd import driver
    from .sgd.state import HeadState

    src = RowRangeSource(FileSource(locations, None, 1 << 16), start, stop)
    # the shard's plan: released labels are +-1 already; {0, 1} label columns of clean data are
    # mapped per batch
    plan = estimator.plan_pass(src, features=features, label=label, sample_weight=sample_weight)
    head = driver.Head(_HEAD, config, list(features), label, sample_weight=sample_weight)
    kw = {"progress": False, "engine": engine}
    if chunk_rows is not None:
        kw["chunk_rows"] = int(chunk_rows)
    if state_arrays is not None:
        kw["states"] = {_HEAD: HeadState.from_arrays(state_arrays)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the merged model's telemetry is checked by the caller
        result = driver.fit_stream(plan.source, [head], **kw)
    return result.states[_HEAD].arrays()


def fit_files(client, source, estimator, *, rounds: int = 1, shards: int | None = None,
              features=None, label=None, filesystem=None, sample_weight=None):
    """Fit ``estimator`` (an unfitted or fitted ``IWPClassifier``/``IWPRegressor``; refitted in
    place and returned) on the release ``source`` on the Dask cluster of ``client``.

    source: a release file, folder (e.g. a multi-part release), glob or prefix, on any
        filesystem (``s3://...``; ``filesystem=`` for paths that are not URIs).
    shards: K, the number of shards (default: the number of workers).
    rounds: periodic averaging: each shard's rows are read in ``rounds`` consecutive pieces, and
        the shards' states are merged after each piece and sent back (1: one merge at the end).
    sample_weight: the column of public per-row weights (as ``estimator.fit(path,
        sample_weight=...)``); None: unweighted.

    The step of a constant or inverse schedule is multiplied by K: a shard makes 1/K of the
    updates of one pass over all rows.  Returns the estimator with the attributes ``fit`` sets;
    its ``telemetry_`` sums the shards' (``n_iter_`` = all shards' updates).
    """
    from .io.sources import FileSource, open_source
    from .sgd.driver import _warn_telemetry, head_telemetry
    from .sgd.schedules import resolve_paper_schedule
    from .sgd.state import HeadState

    _require_client(client)
    if int(rounds) < 1:
        raise InvalidInputError(f"rounds={rounds}: use 1 (one merge at the end) or more")
    rounds = int(rounds)
    src = open_source(source, filesystem=filesystem)
    if not isinstance(src, FileSource) or src.num_rows is None:
        raise InvalidInputError(
            f"fit_files reads files on the workers: give a Parquet/IPC file, folder, glob or prefix "
            f"(not {type(source).__name__}, and not CSV: its row count is unknown)")
    if shards is None:
        shards = max(1, len(client.scheduler_info().get("workers", {})))
    if int(shards) < 1:
        raise InvalidInputError(f"shards={shards}: use 1 or more")
    shards = int(shards)
    n = int(src.num_rows)
    if n < shards * rounds:
        raise InvalidInputError(f"{n} rows cannot make {shards} shards x {rounds} rounds")

    # the pass set up once, as fit() does it: columns, noise, configuration
    est = estimator
    if _is_auto(est.get_params()["alpha"]) or (_is_auto(est.get_params()["learning_rate"])
                                               and est.schedule != "paper"):
        raise InvalidInputError(
            "fit_files needs numbers for alpha and learning_rate ('auto' chooses them on a private "
            "hold-out in one pass on one machine): fit a sample with 'auto' first and pass its "
            "alpha_ and learning_rate_")
    meta = src.release_metadata or {}
    if meta.get("label_encoding") == "class_index":
        raise InvalidInputError(
            "fit_files trains one head per shard: a k-class release (k one-vs-rest heads) is fitted "
            "in one scan on one machine with estimator.fit(path)")
    plan = est.plan_pass(src, features=features, label=label, sample_weight=sample_weight)
    feats, lab, noise = plan.features, plan.label, plan.noise
    bounds = shard_bounds(n, shards)
    configs = []
    for a, b in bounds:
        cfg = plan.config_for(b - a)
        if cfg.schedule == "paper":
            cfg = resolve_paper_schedule(cfg, b - a, feature_bound=noise.feature_bound,
                                         target_bound=(noise.metadata or {}).get("target_bound"))
        else:
            cfg = dataclasses.replace(cfg, learning_rate=cfg.learning_rate * shards)
        configs.append(dataclasses.replace(cfg, weighted=sample_weight is not None))
    _check_step(configs[0], shards)
    locations = src.locations
    template = type(est)(**est.get_params())
    engine = plan.engine
    states = [None] * shards
    weights = [b - a for a, b in bounds]
    merged = None
    for r in range(rounds):
        futures = []
        for k, (a, b) in enumerate(bounds):
            lo, hi = shard_bounds(b - a, rounds)[r]
            futures.append(client.submit(
                _fit_shard, locations, a + lo, a + hi, configs[k], feats, lab, states[k], template,
                engine, est.chunk_rows, sample_weight, pure=False))
        arrays = client.gather(futures)
        shard_states = [HeadState.from_arrays(x) for x in arrays]
        merged = merge_states(shard_states, weights)
        # the merged state goes back to every shard; the telemetry each shard carries on is its
        # own so that the final sum counts every update once
        states = []
        for s in shard_states:
            nxt = HeadState.from_arrays(merged.arrays())
            nxt.telemetry = s.telemetry.copy()
            states.append(nxt.arrays())
    plan.config = configs[0]
    tel = head_telemetry(configs[0], merged)
    tel.update(shards=shards, rounds=rounds)
    est.adopt_pass(plan, merged, tel)
    est.n_iter_ = int(tel["batches"])
    _warn_telemetry(_HEAD, configs[0], tel)
    return est


def _is_auto(value) -> bool:
    """A hyper-parameter that is not a number ('auto' or a list of candidates)."""
    return isinstance(value, (str, list, tuple))


def _check_step(cfg, shards: int) -> None:
    """Warn when the rescaled step overshoots the ridge term: with gamma * lambda >= 1 an update
    flips the sign of theta's shrinkage, and averaging cannot repair a diverging shard."""
    if cfg.schedule in ("constant", "inverse") and cfg.learning_rate * cfg.alpha >= 1.0:
        warnings.warn(
            f"the step rescaled for {shards} shards is {cfg.learning_rate:g}, and step * alpha = "
            f"{cfg.learning_rate * cfg.alpha:.3g} >= 1: each shard's updates overshoot. Use fewer "
            f"shards or a smaller learning_rate", UserWarning, stacklevel=3)
    if not math.isfinite(cfg.learning_rate):
        raise InvalidInputError(f"the rescaled step {cfg.learning_rate} is not finite")
