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
import operator
import os
import uuid
import warnings
import weakref

import numpy as np

from .exceptions import DivergenceError, InvalidInputError
from .privacy.options import _UNSET, DEFAULT_BATCH_ROWS

#: the local cluster each client made by ``local_client`` runs on (closed with it by close_client)
_LOCAL_CLUSTERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

__all__ = ["release_files", "fit_files", "shard_bounds", "merge_states", "local_client"]


def _require_client(client):
    if not hasattr(client, "submit") or not hasattr(client, "gather"):
        raise InvalidInputError(
            f"client must be a dask.distributed.Client (got {type(client).__name__}); e.g. "
            f"Client('tcp://scheduler:8786') or Client(LocalCluster(n_workers=2)) "
            f"(pip install iwpfast[dask])")


#: Dask settings of the workers ``local_client`` starts: no statistical profiler (a thread
#: sampling every thread's stack every 10 ms, whose CPU time grows with the wall time of a run)
WORKER_CONFIG = {"distributed.worker.profile.enabled": False}


def local_client(n_workers: int, *, dashboard: bool = False):
    """A ``Client`` on a new local cluster of ``n_workers`` processes with one thread each (the
    CLI's ``--workers N``; ``WORKER_CONFIG``), with the Dask dashboard on a free port when
    ``dashboard`` (``client.dashboard_link``).  Close it (and its cluster) with
    ``close_client(client)``."""
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise InvalidInputError("--workers/--scheduler need Dask: pip install iwpfast[dask]") from None
    if int(n_workers) < 1:
        raise InvalidInputError(f"--workers {n_workers}: give at least 1 worker")
    with dask.config.set(WORKER_CONFIG):
        # the scheduler always serves HTTP (health, metrics): on a free port (":0"), never the
        # default 8787 ("Port 8787 is already in use" when another cluster runs); the dashboard
        # itself only when asked
        cluster = LocalCluster(n_workers=int(n_workers), threads_per_worker=1, processes=True,
                               dashboard_address=":0", scheduler_kwargs={"dashboard": dashboard})
    client = Client(cluster)
    _LOCAL_CLUSTERS[client] = cluster
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
    cluster = _LOCAL_CLUSTERS.pop(client, None)
    client.close()
    if cluster is not None:
        cluster.close()


def client_path(target, filesystem=None, *, what: str = "source", must_exist: bool = True):
    """``target`` as the cluster's workers must see it: a relative local path made absolute here
    (a worker's working directory is its own, not the client's: a relative path named other
    files there, or none) and checked on the client (a source must exist, a destination's
    folder must).  URIs, paths on another filesystem and in-memory data are returned as they
    are; a list of paths path by path.  The files must of course lie where the workers see them
    under the same absolute path (a shared or network filesystem) or on an object store."""
    from .io.filesystem import is_uri, wrap_filesystem

    if isinstance(target, (list, tuple)) and target and all(
            isinstance(t, (str, os.PathLike)) for t in target):
        return [client_path(t, filesystem, what=what, must_exist=must_exist) for t in target]
    if not isinstance(target, (str, os.PathLike)):
        return target
    text = os.fspath(target)
    if is_uri(text) and not text.lower().startswith("file://"):
        return target
    if filesystem is not None:
        import pyarrow.fs as pafs
        if not isinstance(wrap_filesystem(filesystem), pafs.LocalFileSystem):
            return target
    if text.lower().startswith("file://"):
        text = text[len("file://"):]
    trailing = text.endswith(("/", os.sep))
    absolute = os.path.abspath(os.path.expanduser(text))
    glob = any(c in text for c in "*?[")
    if must_exist and not glob and not os.path.exists(absolute):
        raise InvalidInputError(
            f"the {what} {text!r} does not exist on this machine ({absolute!r}); the cluster's "
            "workers are given absolute paths, so the data must be there: check the path")
    folder = os.path.dirname(absolute) if not glob else os.path.dirname(absolute.split("*")[0])
    if not must_exist and not os.path.isdir(folder):
        raise InvalidInputError(f"the folder {folder!r} of the {what} {text!r} does not exist; "
                                "create it first")
    return absolute + (os.sep if trailing else "")


# --------------------------------------------------------------------------------- release
def release_files(client, source, destination, spec, *, features=None, label=_UNSET, ranges=None,
                  seed=None, overwrite: bool = False, on_invalid: str = "error",
                  format: str | None = None, compression="auto",
                  record_batch_rows: int = DEFAULT_BATCH_ROWS, threads: int | None = 1,
                  engine: str | None = None, filesystem=None, retries: int = 0,
                  kernel: str | None = None, max_part_rows: int | None = None,
                  batch_rows: int | None = None, resume: bool = False,
                  part_retries: int | None = None, progress=False):
    """Release each input file of ``source`` as one part of ``destination`` (a folder / prefix,
    e.g. ``s3://bucket/release/``) on the Dask cluster of ``client``; write the manifest last.

    Arguments as :func:`iwpfast.release`; ``threads`` is per task (default 1: the cluster's
    workers are the parallelism); ``part_retries`` (default 2): a part's task tries the part
    again after a transient (I/O) error; ``retries``: Dask retries of a failed task, for any
    error (a retried part replaces the earlier attempt); ``max_part_rows``: large Parquet/IPC
    files become several parts (tasks) of whole row groups of about that many rows;
    ``resume``: keep the parts an unfinished run of the same plan published and release only
    the missing ones (docs/distributed.md "Resume"); ``progress``: a bar over the parts on the
    client.  Returns a :class:`~iwpfast.privacy.multipart.MultiPartResult` (rows, parts, spec:
    ``.spec.guarantee()``).  When a part fails after its retries, the other parts are let finish
    (Dask cannot stop a running task), then every part written is deleted and nothing is
    published -- with ``resume=True`` the finished parts are kept, unpublished, for the next
    resumed run.
    """
    from .privacy.options import release_options
    from .privacy.release import run_release

    _require_client(client)
    source = client_path(source, filesystem)
    destination = client_path(destination, filesystem, what="destination", must_exist=False)
    options = release_options(
        seed=seed, overwrite=overwrite, on_invalid=on_invalid, format=format,
        compression=compression, record_batch_rows=record_batch_rows, batch_rows=batch_rows,
        threads=threads, engine=engine, kernel=kernel, filesystem=filesystem,
        max_part_rows=max_part_rows, features=features, label=label, ranges=ranges,
        resume=resume, part_retries=part_retries, progress=progress)
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
        todo = plan.todo()
        # a resumed run has its release id: the run's own nonce keeps Dask from handing back
        # an earlier run's (failed) task of the same part
        run = uuid.uuid4().hex[:8]
        futures = [self.client.submit(_release_part_task, plan, i, task_options,
                                      part_seed(options.seed, i), retries=self.retries,
                                      pure=False,
                                      key=f"iwpfast-release-{plan.release_id}-part-{i}-{run}")
                   for i in todo]
        try:
            done = dict(zip(todo, self._gather_parts(futures, todo, plan, options), strict=True))
            return [done[i] if i in done else plan.kept_result(i)
                    for i in range(len(plan.inputs))]
        except BaseException:
            # Dask cannot stop a part task that a worker has started (cancel only forgets it: the
            # part would go on writing, and publish after the cleanup), and whether a task has
            # started cannot be known without a race.  So every part is let finish, then all
            # deleted.
            _wait_quietly(futures)
            discard_parts(plan)
            raise


    def _gather_parts(self, futures, todo, plan, options):
        """The parts' results in order, a bar over the parts (and the rows released so far)
        advanced as each one finishes; the first failure is raised."""
        from distributed import as_completed

        from .progress import progress_bar
        bar = progress_bar(options.progress, len(plan.inputs), initial=len(plan.kept),
                           desc="iwpfast release", unit="parts")
        rows = sum(plan.kept.values())
        results = {}
        try:
            for fut in as_completed(futures):
                result = fut.result()        # raises the part's error
                results[fut.key] = result    # kept: fetched once, not again by a gather
                rows += result.rows_written
                bar.update(1)
                if hasattr(bar, "set_postfix_str"):
                    bar.set_postfix_str(f"{rows:,} rows released")
        finally:
            bar.close()
        return [results[fut.key] for fut in futures]


def _release_part_task(plan, index, options, key):
    """``release_part`` on a Dask worker, pyarrow's decoding limited to the part's noise threads
    (``_limit_worker_threads``)."""
    from .privacy.multipart import release_part_with

    _limit_worker_threads(int(options.threads or 1))
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


# ------------------------------------------------------------------------------ shards of a source
@dataclasses.dataclass
class ShardRecipe:
    """How a worker opens rows ``[a, b)`` of a source the client opened: the files and their row
    counts (a shard opens only the files its rows lie in), and the view on top (a training or
    validation part of the 'auto' split, batches mapped), whose blocks stay those of the whole
    source (``PartSource(row_offset=a)``).  Only locations, counts and the mapper travel."""

    locations: list
    file_rows: list
    batch_rows: int
    period: int | None = None
    block: int = 1
    validation: bool = False
    mapper: object = None
    view: bool = False          # a PartSource on top (a split or a mapper)
    #: a training view whose validation rows each shard holds on its worker (``ShardHold``):
    #: the budget of one shard's piece, in bytes (None: nothing held)
    hold_bytes: int | None = None

    @classmethod
    def of(cls, source) -> ShardRecipe:
        from .io.sources import FileSource
        from .io.views import PartSource
        view = isinstance(source, PartSource)
        files = source.inner if view else source
        if not isinstance(files, FileSource) or any(n is None for n in files.file_rows):
            raise InvalidInputError(
                f"a pass on the cluster reads files on the workers: give a Parquet/IPC file, "
                f"folder, glob or prefix (not {getattr(source, 'description', type(source).__name__)}"
                f"; CSV files do not know their row counts: convert them to Parquet)")
        if view and source.row_offset:
            raise InvalidInputError("a shard of a shard cannot be split again")
        hold = getattr(source, "hold", None) if view else None
        return cls(list(files.locations), [int(n) for n in files.file_rows], files.batch_rows,
                   source.period if view else None, source.block if view else 1,
                   source.validation if view else False, source.mapper if view else None, view,
                   hold.budget_bytes if isinstance(hold, ShardHold) and not source.validation
                   and source.period is not None else None)

    @property
    def n_rows(self) -> int:
        """Rows of the files (the shards cut these; a part keeps its own rows of each shard)."""
        return int(sum(self.file_rows))

    def rows(self, a: int, b: int) -> int:
        """The rows the view holds of the files' rows ``[a, b)``."""
        from .io.views import part_rows
        return part_rows(a, b, self.period, self.block, self.validation)

    def open(self, a: int, b: int):
        """The source of rows ``[a, b)``, opening only the files they lie in."""
        from .io.sources import FileSource, RowRangeSource
        from .io.views import PartSource
        starts = np.concatenate([[0], np.cumsum(self.file_rows)]).astype(np.int64)
        first = max(0, int(np.searchsorted(starts, a, side="right")) - 1)
        last = max(first + 1, int(np.searchsorted(starts, b, side="left")))
        files = FileSource(self.locations[first:last], None, self.batch_rows)
        offset = int(starts[first])
        src = RowRangeSource(files, a - offset, b - offset)
        if not self.view:
            return src
        from .io.views import HeldRows, part_rows
        hold = (None if self.hold_bytes is None else
                HeldRows(part_rows(a, b, self.period, self.block, True), self.hold_bytes))
        return PartSource(src, period=self.period, block=self.block, validation=self.validation,
                          mapper=self.mapper, row_offset=a, hold=hold)


class ShardHold:
    """The cluster's ``HeldRows`` (``grid_scan.hold_validation``): each training shard's task
    holds the validation rows of its rows (at most ``budget_bytes`` a shard) on its worker, a
    Dask future, scored there (``DaskStreams.score``) instead of read again.  ``source`` is
    None when a shard could not hold them all (the validation part is read again)."""

    def __init__(self, budget_bytes: int):
        self.budget_bytes = int(budget_bytes)
        self.reset()

    def reset(self) -> None:
        self.futures: list = []
        self.complete = True

    def add(self, batch) -> None:        # a read of the training view here: nothing is held
        self.complete = False

    def source(self, columns):
        if not self.futures or not self.complete:
            return None
        return HeldOnShards(list(self.futures), list(columns))


@dataclasses.dataclass
class HeldOnShards:
    """Futures of the ``HeldRows`` on the workers and the columns ``DaskStreams.score`` scores."""

    futures: list
    columns: list
    description: str = "the validation rows held on the shards"


def _limit_worker_threads(threads: int) -> None:
    """pyarrow's decoding gets the task's threads (a worker's threads are its share of the
    machine; pyarrow would otherwise start one decoding thread per core in every worker)."""
    import pyarrow as pa

    pa.set_cpu_count(max(1, int(threads)))
    pa.set_io_thread_count(max(2, int(threads)))


def _shard_score(recipe: ShardRecipe, a: int, b: int, scorer):
    """The validation rows of rows ``[a, b)`` scored on a worker (``scoring.HeadScorer``)."""
    _limit_worker_threads(1)
    scorer.add_source(recipe.open(a, b))
    return scorer


class ShardedStreams:
    """Where an estimator's passes run when its rows lie in shards on a cluster:
    ``driver.streams_on(runner)`` around ``estimator.fit`` (``fit_files``; ``iwpfast.spark``).

    A pass (``fit_stream``) is cut into shards (row ranges of files on Dask, partitions on
    Spark), each read in ``rounds`` consecutive pieces; every head runs on every shard with its
    step multiplied by the number of shards (the 'paper' schedule resolved with the shard's rows;
    an average over a fraction of the pass started at that fraction of the shard's updates), and
    the heads' shard states are merged by row-weighted averaging after each round
    (``merge_states``).  A scoring read (``scoring.score_heads``) is cut the same way and the
    shards' sums merged.  A subclass says where the shards are (``_layout``) and runs one round
    of pieces (``_run_round``) and one scoring read (``_run_scores``)."""

    shards: int
    rounds: int = 1
    average_fraction: float | None = None

    def _layout(self, source):
        """(layout, rows of each shard in the source's view); the layout is what ``_run_round``
        and ``_run_scores`` need to find the shards' rows."""
        raise NotImplementedError

    def _run_round(self, layout, r: int, shard_heads, shard_states, kw: dict, bar) -> list:
        """Round r's piece of every shard: [``run_piece``'s tuple or DivergenceError]."""
        raise NotImplementedError

    def _run_scores(self, layout, scorer) -> list:
        """Every shard's rows scored by a copy of ``scorer``."""
        raise NotImplementedError

    def _shard_config(self, cfg, rows: int, noise_meta: dict | None, feature_bound, head):
        from .sgd.schedules import resolve_paper_schedule
        if cfg.schedule == "paper":
            fb = feature_bound if feature_bound is not None else (noise_meta or {}).get("feature_bound")
            theta0 = 0.0 if head.theta0 is None else float(np.linalg.norm(head.theta0))
            cfg = resolve_paper_schedule(cfg, rows, feature_bound=fb,
                                         target_bound=(noise_meta or {}).get("target_bound"),
                                         A=head.paper_A, smoothness=head.paper_smoothness,
                                         theta0_norm=theta0)
        else:
            cfg = dataclasses.replace(cfg, learning_rate=cfg.learning_rate * self.shards)
        if cfg.average_start >= 0 and self.average_fraction is not None:
            updates = -(-int(rows) // int(cfg.batch_size))
            cfg = dataclasses.replace(cfg, average_start=int(math.floor(self.average_fraction
                                                                        * updates)))
        return cfg

    def fit_stream(self, source, heads, *, chunk_rows=None, progress=True, states=None,
                   engine: str = "numba", feature_bound=None, finish: bool = True,
                   trace_every: int = 0, checkpoint=None, resume: bool = False, epochs: int = 1,
                   drop_diverged: bool = False, **_ignored):
        """One pass over the shards.  ``drop_diverged``: a head that diverges on a shard is
        dropped there (the others go on), left out of the merge and the later rounds, and named
        in ``StreamResult.diverged`` with its row of the pass (the earlier shards' rows, then its
        shard's); its telemetry counts the rows every shard trained it on: one pass, whatever
        diverges.  Without it, a shard's divergence is raised once every shard has ended."""
        from .progress import progress_bar
        from .sgd.driver import StreamResult, _warn_telemetry, head_telemetry
        from .sgd.state import HeadState

        if checkpoint is not None or resume or int(epochs) != 1 or trace_every or not finish:
            raise InvalidInputError(
                "a pass on the cluster runs one whole pass: checkpoints, resume, epochs, traces "
                "and partial_fit are for a pass on one machine")
        layout, weights = self._layout(source)
        if min(weights) <= 0:
            raise InvalidInputError(f"{self.shards} shards of {source.description}: a shard has "
                                    f"no rows; use fewer shards")
        meta = source.release_metadata
        shard_heads = [[dataclasses.replace(h, config=self._shard_config(
            h.config, rows, meta, feature_bound, h)) for h in heads] for rows in weights]
        if len({(h.config.alpha, h.config.learning_rate) for h in shard_heads[0]}) == 1:
            _check_step(shard_heads[0][0].config, self.shards)
        names = [h.name for h in heads]
        start = None if states is None else {k: states[k].arrays() for k in names}
        shard_states: list = [start] * self.shards
        total = sum(weights)
        kw = {"engine": engine, "chunk_rows": chunk_rows, "feature_bound": feature_bound,
              "drop_diverged": bool(drop_diverged)}
        bar = progress_bar(progress, total, desc=f"iwpfast ({self.shards} shards)")
        merged: dict = {}
        configs: dict = {}
        diverged: dict[str, int] = {}
        # the rows of the pass before each shard and, within a shard, before each round's piece
        before = np.concatenate([[0], np.cumsum(weights)])[:-1]
        done_rows = [0] * self.shards
        try:
            for r in range(self.rounds):
                live = [nm for nm in names if nm not in diverged]
                if not live:
                    break
                done = self._run_round(layout, r, [[h for h in hs if h.name in live]
                                                   for hs in shard_heads], shard_states, kw, bar)
                for d in done:
                    if isinstance(d, DivergenceError):
                        raise d
                configs.update(done[0][1])
                results = [{nm: HeadState.from_arrays(x) for nm, x in d[0].items()} for d in done]
                # a head that diverged on a shard: the row of the pass where it did (the earliest
                # over the shards); it leaves the merge and the later rounds
                now: dict[str, int] = {}
                for k, d in enumerate(done):
                    for nm, row in (d[3] if len(d) > 3 else {}).items():
                        at = int(before[k]) + done_rows[k] + int(row)
                        now[nm] = min(now.get(nm, at), at)
                    done_rows[k] += int(d[2])
                with np.errstate(invalid="ignore", over="ignore"):   # a diverged head's states
                    merged.update({nm: merge_states([res[nm] for res in results], weights)
                                   for nm in live})
                diverged.update(now)
                # the merged state goes back to every shard; the telemetry each shard carries on
                # is its own, so that the final sum counts every update once
                shard_states = []
                for res in results:
                    nxt = {}
                    for nm in (nm for nm in live if nm not in diverged):
                        st = HeadState.from_arrays(merged[nm].arrays())
                        st.telemetry = res[nm].telemetry.copy()
                        nxt[nm] = st.arrays()
                    shard_states.append(nxt)
        finally:
            bar.close()
        telemetry = {}
        for nm in names:
            with np.errstate(invalid="ignore", over="ignore"):      # a diverged head's state
                tel = head_telemetry(configs[nm], merged[nm])
            if nm not in diverged:
                _warn_telemetry(nm, configs[nm], tel)
            tel.update(shards=self.shards, rounds=self.rounds)
            telemetry[nm] = tel
        return StreamResult(states=merged, n_rows=total, release_metadata=meta,
                            telemetry=telemetry, elapsed_s=0.0, rows_per_s=math.nan,
                            configs=dict(configs), diverged=diverged)

    def score(self, source, scorer):
        layout, _ = self._layout(source)
        parts = self._run_scores(layout, scorer)
        for part in parts[1:]:
            parts[0].merge(part)
        return parts[0]


def run_piece(src, heads: list, state_arrays: dict | None, kw: dict):
    """One piece of one shard, where it runs: the heads' pass over ``src`` from ``state_arrays``
    (None: fresh states).  Returns ({head: final state arrays}, the configs run, the rows read,
    {head: row of the piece where it diverged and was dropped: ``kw['drop_diverged']``}), or
    without drop the ``DivergenceError`` of a head whose step is too large (returned, not
    raised: an expected outcome, not a task failure for the worker's log).  The heads run in the
    task's thread (its share of the machine: a thread per head would oversubscribe the cores)."""
    from .sgd import driver
    from .sgd.state import HeadState

    _limit_worker_threads(1)
    args: dict = {"progress": False, "engine": kw["engine"], "head_threads": 1,
                  "drop_diverged": bool(kw.get("drop_diverged", False))}
    if kw.get("chunk_rows") is not None:
        args["chunk_rows"] = int(kw["chunk_rows"])
    if kw.get("feature_bound") is not None:
        args["feature_bound"] = kw["feature_bound"]
    if state_arrays is not None:
        args["states"] = {n: HeadState.from_arrays(x) for n, x in state_arrays.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the merged model's telemetry is checked by the client
        try:
            result = driver.fit_stream_here(src, heads, **args)
        except DivergenceError as exc:
            return exc
    return ({n: st.arrays() for n, st in result.states.items()}, result.configs,
            int(result.n_rows), dict(result.diverged))


def _shard_moments(recipe: ShardRecipe, a: int, b: int, layout, folds: int, block_rows: int,
                   chunk_rows):
    """The fold moments of rows ``[a, b)`` on a Dask worker (their folds those of the whole
    source: ``first_row=a``)."""
    from .moment_stats import accumulate_folds, layout_reader
    _limit_worker_threads(1)
    return accumulate_folds(layout_reader(recipe.open(a, b), layout, chunk_rows), layout, folds,
                            block_rows, first_row=a)


def _shard_pass(recipe: ShardRecipe, a: int, b: int, heads: list, state_arrays, kw: dict):
    """Rows ``[a, b)`` of the files on a Dask worker (``run_piece``)."""
    return run_piece(recipe.open(a, b), heads, state_arrays, kw)


def _shard_pass_holding(recipe: ShardRecipe, a: int, b: int, heads: list, state_arrays,
                        kw: dict):
    """``_shard_pass`` of a training view that holds its validation rows: ((the piece's result,
    whether every validation row of ``[a, b)`` is held), the ``HeldRows``)."""
    src = recipe.open(a, b)
    out = run_piece(src, heads, state_arrays, kw)
    held = src.hold
    ok = held is not None and not held.failed and held.filled == held.n_rows
    return (out, ok), (held if ok else None)


def _score_held(held, columns: list, scorer):
    """A shard's held validation rows scored on the worker that holds them."""
    _limit_worker_threads(1)
    source = held.source(columns)
    if source is None:
        raise InvalidInputError("the held validation rows lack a scored column")
    scorer.add_source(source)
    return scorer


class DaskStreams(ShardedStreams):
    """``ShardedStreams`` on a Dask cluster: K row ranges of the files of a source
    (``ShardRecipe``), each task opening only the files of its rows."""

    def __init__(self, client, shards: int, rounds: int = 1, average_fraction: float | None = None):
        self.client = client
        self.shards = int(shards)
        self.rounds = int(rounds)
        self.average_fraction = average_fraction

    def _layout(self, source):
        recipe = ShardRecipe.of(source)
        n = recipe.n_rows
        if n < self.shards * self.rounds:
            raise InvalidInputError(f"{n} rows cannot make {self.shards} shards x {self.rounds} "
                                    f"rounds")
        bounds = shard_bounds(n, self.shards)
        pieces = [[(a + lo, a + hi) for lo, hi in shard_bounds(b - a, self.rounds)]
                  for a, b in bounds]
        hold = getattr(source, "hold", None) if recipe.hold_bytes is not None else None
        return (recipe, bounds, pieces, hold), [recipe.rows(a, b) for a, b in bounds]

    #: the search's training shards hold their validation rows on the workers (``ShardHold``)
    holds_validation = True

    def hold_validation(self, budget_bytes: int) -> ShardHold:
        """A training view's ``hold`` (``grid_scan.hold_validation``)."""
        return ShardHold(budget_bytes)

    def _run_round(self, layout, r, shard_heads, shard_states, kw, bar):
        recipe, _, pieces, hold = layout
        rows = [recipe.rows(*pieces[k][r]) for k in range(self.shards)]
        futures = [self.client.submit(_shard_pass if hold is None else _shard_pass_holding,
                                      recipe, *pieces[k][r], shard_heads[k], shard_states[k], kw,
                                      pure=False) for k in range(self.shards)]
        if hold is None:
            return self._gather(futures, bar, rows)
        # the validation rows stay on the worker that read them (a future of each piece's
        # ``HeldRows``); only the states come back
        if r == 0:
            hold.reset()
        hold.futures += [self.client.submit(operator.itemgetter(1), f, pure=False)
                         for f in futures]
        done = self._gather([self.client.submit(operator.itemgetter(0), f, pure=False)
                             for f in futures], bar, rows)
        hold.complete = hold.complete and all(ok for _, ok in done)
        return [out for out, _ in done]

    def moment_parts(self, source, layout, folds: int, block_rows: int, chunk_rows) -> list:
        """``solver='moments'``: each shard's fold moments on a worker, added per fold (one read
        of the data in all; the sums differ from one machine's only by the order of float
        additions)."""
        recipe = ShardRecipe.of(source)
        futures = [self.client.submit(_shard_moments, recipe, a, b, layout, folds, block_rows,
                                      chunk_rows, pure=False)
                   for a, b in shard_bounds(recipe.n_rows, self.shards)]
        shards = self._gather(futures, None, None)
        return [sum((s[f] for s in shards[1:]), shards[0][f]) for f in range(folds)]

    def score(self, source, scorer):
        if not isinstance(source, HeldOnShards):
            return super().score(source, scorer)
        futures = [self.client.submit(_score_held, f, source.columns, scorer, pure=False)
                   for f in source.futures]
        parts = self._gather(futures, None, None)
        for part in parts[1:]:
            parts[0].merge(part)
        return parts[0]

    def _run_scores(self, layout, scorer):
        recipe, bounds, _, _ = layout
        futures = [self.client.submit(_shard_score, recipe, a, b, scorer, pure=False)
                   for a, b in bounds]
        return self._gather(futures, None, None)

    def _gather(self, futures, bar, rows):
        """The futures' results in order; ``bar`` advanced by each one's rows as it finishes.  A
        failure cancels the others (a training shard writes nothing) and is raised."""
        from distributed import as_completed
        index = {f.key: i for i, f in enumerate(futures)}
        try:
            for fut in as_completed(futures):
                if fut.status == "error":
                    fut.result()            # raises the task's exception
                if bar is not None:
                    bar.update(rows[index[fut.key]])
            return self.client.gather(futures)
        except BaseException:
            self.client.cancel(futures)
            raise


def fit_files(client, source, estimator, *, rounds: int = 1, shards: int | None = None,
              features=None, label=None, filesystem=None, sample_weight=None):
    """Fit ``estimator`` (an ``IWPClassifier``/``IWPRegressor``, refitted in place and returned)
    on the release ``source`` on the Dask cluster of ``client``: ``estimator.fit(source)`` with
    its passes run on the cluster (``DaskStreams``), so every setting works as on one machine --
    ``alpha``/``learning_rate='auto'`` (the default), k > 2 classes, sample weights.

    source: a Parquet/IPC release file, folder (e.g. a multi-part release), glob or prefix, on
        any filesystem (``s3://...``; ``filesystem=`` for paths that are not URIs).
    shards: K, the number of shards (default: the number of workers).
    rounds: periodic averaging: each shard's rows are read in ``rounds`` consecutive pieces, and
        the shards' states are merged after each piece and sent back (1: one merge at the end).
    sample_weight: the column of public per-row weights (as ``estimator.fit(path,
        sample_weight=...)``); None: unweighted.

    Each head runs on every shard with its step multiplied by K (a shard makes 1/K of the
    updates of one pass); the shards are merged by row-weighted averaging.  With 'auto' the
    grid's heads are trained that way on the training blocks of every shard, the merged heads
    scored on the validation blocks of every shard (the split is the one machine's), and one
    chosen by the same rule; the cap and the tail average 'auto' sets are those of one machine.
    ``learning_rate_`` is the step the shards ran (K times the grid's; ``tuning_`` lists the
    grid's steps for one pass).  ``n_iter_`` counts the updates of all shards and
    ``telemetry_`` adds ``shards`` and ``rounds``.
    """
    from .sgd.driver import streams_on

    _require_client(client)
    source = client_path(source, filesystem)
    if int(rounds) < 1:
        raise InvalidInputError(f"rounds={rounds}: use 1 (one merge at the end) or more")
    if shards is None:
        shards = max(1, len(client.scheduler_info().get("workers", {})))
    if int(shards) < 1:
        raise InvalidInputError(f"shards={shards}: use 1 or more")
    runner = DaskStreams(client, int(shards), int(rounds), _average_fraction(estimator))
    with streams_on(runner):
        estimator.fit(source, sample_weight=sample_weight, features=features, label=label,
                      filesystem=filesystem)
    estimator.telemetry_ = dict(estimator.telemetry_, shards=int(shards), rounds=int(rounds))
    estimator.n_iter_ = int(estimator.telemetry_["batches"])
    return estimator


def _average_fraction(estimator) -> float | None:
    """The fraction of the pass after which the estimator's average starts (None: a fixed
    update, or no average); 'auto' averages the tail when it tunes (``_auto_grid``)."""
    avg = estimator.get_params().get("average")
    if avg in ("tail", "auto"):
        return 0.5
    if isinstance(avg, float):
        return avg
    return None


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
