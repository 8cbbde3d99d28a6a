"""The private hold-out risk of a grid of heads (the scoring half of ``iwpfast.sgd.tuning``).

``score_heads`` scores trained heads on a (validation) source in one read: ``HeadScorer`` keeps the
sums of ``iwpfast.estimates.RiskAccumulator`` per group of compared heads (all of a two-class
grid; one class's heads of a k-class grid), adds rows batch by batch (one compiled call per batch
and group, ``_kernels/score.py``, through ``score_group``; the NumPy step for small hold-outs, the
logistic loss and ``engine='numpy'``) and merges the sums of other rows (a cluster's shards).
``iwpfast.sgd.tuning`` chooses among the estimates.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._kernels.abi import LOSS_CODES, SCORE_KERNEL_LOSSES
from ..label_noise import label_tilde_from_keep
from ..losses import loss_record

#: the compiled hold-out scoring runs from this many (row, head of a group) values on (below:
#: the NumPy step, whose cost is then a few milliseconds, less than the kernel's compile time)
SCORE_KERNEL_MIN_VALUES = 1 << 20
#: from this many (row, head) values on, the compiled scoring runs on two threads (batches in
#: turn, the two sums merged at the end) when two cores are usable
SCORE_THREADS_MIN_VALUES = 1 << 22


def blas_single_threaded():
    """One BLAS thread while the hold-out is scored, when threadpoolctl is installed (a
    dependency of scikit-learn; not of iwpfast).  The scoring's products are small ((rows x p) @
    (p x k) and the k x k comoment per batch), and BLAS threads that spin-wait for a busy core
    made them 5x slower than one thread on a loaded 2-core machine (bench/README.md)."""
    import contextlib
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def score_heads(source, features: Sequence[str], label: str, heads: Sequence, states: dict,
                configs: dict, *, loss: str, noise=None, label_table=None,
                sample_weight: str | None = None, engine: str = "numba",
                compiled_from: int | None = None, threads_from: int | None = None,
                width: int | None = None):
    """(RiskEstimate per head, covariance of the estimates: inf between heads of different
    classes, which are never compared) on a (validation) source: one read,
    one (rows x p) @ (p x k) product per batch.  ``noise``: the ``driver.NoiseModel`` (or the
    triple noise_var, label_keep_prob, target_noise_var) of the validation data (default: the
    heads' own; naive heads need it given, since their configs run without the correction).

    One-vs-rest heads (``HeadConfig.label_class`` set; the label column holds class indices) are
    scored on their own binary problem: the sign of a row is +1 where its class is the head's,
    and the per-row IWP loss uses the k-ary label weights ``label_table`` (those of the
    validation data; default: the head's own ``label_weights``, public labels without them).

    ``sample_weight``: a column of public row weights s_i; each row's IWP loss is multiplied by
    s_i, an unbiased estimate of the weighted clean risk the weighted heads minimize.

    Heads trained with class weights (``class_weight``; docs/math.md "Class weights") are scored
    by the class-weighted private risk they minimize, the training's per-row loss: two classes
    with the heads' weighted table (``HeadConfig.label_weights``, rebuilt for the validation's
    keep probability; the heads of one call must share it), k classes with each head's table and
    the per-class boost (``class_boost``; the NumPy step, the compiled one has no boost).

    Inside ``driver.streams_on(runner)`` (a cluster's pass) the source is scored by the runner:
    each worker scores its shard of the rows with a copy of the ``HeadScorer`` and the copies
    are merged (``HeadScorer.merge``), the same sums as one read.

    ``engine``: 'numba' scores each batch with one compiled call per group of compared heads
    (``_kernels/score.py``; logistic heads use the NumPy step), 'numpy' (alias 'reference')
    with the NumPy step, its twin.  ``compiled_from``, ``threads_from``: the (row, head) values
    from which the compiled step is used, and two threads (default ``SCORE_KERNEL_MIN_VALUES``,
    ``SCORE_THREADS_MIN_VALUES``).  ``width``: the heads per group those (row, head) values count
    (default: the widest group scored); a tuning grid's final scoring counts the grid's heads,
    so that the survivors of a race are scored as the whole grid would be (the step and the
    threads, and so the bits: a head's estimate does not depend on the heads beside it)."""
    from .driver import stream_runner
    scorer = HeadScorer(features, label, heads, states, configs, loss=loss, noise=noise,
                        label_table=label_table, sample_weight=sample_weight, engine=engine,
                        compiled_from=compiled_from, threads_from=threads_from, width=width)
    runner = stream_runner()
    if runner is not None:
        scorer = runner.score(source, scorer)
    else:
        scorer.add_source(source)
    return scorer.result()


class HeadScorer:
    """The sums ``score_heads`` keeps: the heads' parameters and one ``RiskAccumulator`` per
    group of compared heads.  ``add_source`` scores rows; ``merge`` adds another scorer's rows
    (the same heads on other rows); ``result`` gives the estimates and their covariance."""

    def __init__(self, features: Sequence[str], label: str, heads: Sequence, states: dict,
                 configs: dict, *, loss: str, noise=None, label_table=None,
                 sample_weight: str | None = None, engine: str = "numba",
                 compiled_from: int | None = None, threads_from: int | None = None,
                 width: int | None = None):
        from ..estimates import RiskAccumulator, noise_tau
        from .driver import resolve_engine
        self.features = list(features)
        self.label = label
        self.loss = loss
        self.sample_weight = sample_weight
        k = len(heads)
        self.k = k
        self.theta = np.stack([states[h].coef(configs[h].average_start >= 0)[0] for h in heads],
                              axis=1)
        self.b = np.array([states[h].coef(configs[h].average_start >= 0)[1] for h in heads])
        cfg0 = configs[heads[0]]
        self.truncation = int(cfg0.truncation)
        if noise is None:
            noise = (cfg0.noise_var, cfg0.label_keep_prob if cfg0.mode == "iwp" else None,
                     cfg0.target_noise_var)
        elif hasattr(noise, "noise_var"):          # a driver.NoiseModel
            noise = (noise.noise_var, noise.label_keep_prob, noise.target_noise_var)
        law = cfg0.noise_law if cfg0.mode == "iwp" else None
        if law is not None:
            law = law.broadcast(self.theta.shape[0])
        self.tau = np.array([noise_tau(loss, noise[0], self.theta[:, g], law)[0]
                             for g in range(k)])                             # (k,)
        self.weight = label_tilde_from_keep(noise[1])
        self.target_var = float(noise[2])
        self.one_vs_rest = cfg0.label_class is not None
        # the heads whose estimates are compared with each other (one class's heads; all of them
        # for two classes) share an accumulator: only their paired covariance is needed, and a
        # few small (m x G) comoment products are much cheaper than one (m x kG) (measured: BLAS
        # threads on 2 busy cores made a 75-column product 140x slower than a 25-column one)
        self.groups = [list(range(k))]
        self.head_class = None
        self.table: tuple | None = None
        # per group: None, or per class index the boost added to a row's weight of F(z)
        self.boosts: list = [None]
        group_tables: list | None = None
        if not self.one_vs_rest and any(
                (configs[h].label_weights is None) != (cfg0.label_weights is None)
                or configs[h].label_weights is not None
                and tuple(configs[h].label_weights) != tuple(cfg0.label_weights) for h in heads):
            from ..exceptions import InvalidInputError
            raise InvalidInputError("the scored heads have different class weights "
                                    "(HeadConfig.label_weights); score each weighting on its own")
        if cfg0.label_weights is not None and not self.one_vs_rest:
            # class weights of two classes: the hold-out scores the class-weighted risk the heads
            # minimize, with the weighted table rebuilt for the validation's keep probability
            # (the weights are the head's table over its own S~: docs/math.md "Class weights")
            from ..label_noise import class_weighted_table
            own = float(cfg0.label_tilde)
            self.table = class_weighted_table(
                (float(cfg0.label_weights[2]) / own, float(cfg0.label_weights[0]) / own),
                noise[1])
        if self.one_vs_rest:
            self.head_class = np.array([float(configs[h].label_class) for h in heads])
            table = label_table
            if table is None:
                table = cfg0.label_weights if cfg0.label_weights is not None \
                    else (1.0, 0.0, 1.0, 0.0)
            self.table = tuple(float(w) for w in table)
            self.groups = [list(np.flatnonzero(self.head_class == c))
                           for c in np.unique(self.head_class)]
            self.boosts = [None] * len(self.groups)
            if cfg0.class_boost is not None:
                # class weights of k classes: each class's heads score with their own table and
                # the per-class boost (the weighted risk they minimize; the validation rows share
                # the training's label budget), by the NumPy step (the compiled one has no boost)
                group_tables = [tuple(float(w) for w in configs[heads[g[0]]].label_weights)
                                for g in self.groups]
                self.boosts = [np.asarray(configs[heads[g[0]]].class_boost, dtype=np.float64)
                               for g in self.groups]
        self.group_tables: list = (group_tables if group_tables is not None
                                   else [self.table] * len(self.groups))
        self.accs = [RiskAccumulator(len(g)) for g in self.groups]
        # the compiled step for the losses it knows (the logistic's F_0 is a truncated series)
        self.compiled = (resolve_engine(engine) in ("numba", "auto") and loss in SCORE_KERNEL_LOSSES
                         and self.boosts[0] is None)
        self.compiled_from = SCORE_KERNEL_MIN_VALUES if compiled_from is None else int(compiled_from)
        self.threads_from = SCORE_THREADS_MIN_VALUES if threads_from is None else int(threads_from)
        self.width = None if width is None else int(width)

    def add_source(self, source) -> None:
        """Score every row of ``source`` (one read)."""
        from ..estimates import glm_loss_values, glm_loss_values_table
        from ..io.sources import Source, open_source
        record = loss_record(self.loss)
        features, label, sample_weight = self.features, self.label, self.sample_weight
        theta, b, tau = self.theta, self.b, self.tau
        src = source if isinstance(source, Source) else open_source(source)
        # a small hold-out is scored by the NumPy step: compiling the kernel (~1 s, once per
        # machine) would cost a first fit on small data more than it saves.  Counted per group
        # of compared heads, so that a class of a k-class grid is scored as the two-class grid
        # of that class against the rest (the same bits)
        widest = self.width or max(len(g) for g in self.groups)
        compiled = self.compiled and (src.num_rows is None
                                      or src.num_rows * widest >= self.compiled_from)
        batches = src.batches(scored_columns(features, label, sample_weight))
        if compiled and _two_threads(src.num_rows, self.width or self.k, self.threads_from):
            self._add_compiled_two_threads(batches)
            return
        for batch in batches:
            if compiled:
                self._add_compiled(batch)
                continue
            X = np.column_stack([np.asarray(batch.column(f).to_numpy(zero_copy_only=False),
                                            dtype=np.float64) for f in features])
            y = np.asarray(batch.column(label).to_numpy(zero_copy_only=False), dtype=np.float64)
            if sample_weight is not None:
                row_weights = np.asarray(
                    batch.column(sample_weight).to_numpy(zero_copy_only=False), dtype=np.float64)
            if self.head_class is not None and record.task != "regression":
                # one-vs-rest, class by class: a row's sign and label weights are the same for all
                # of the class's heads, so they are (m, 1) columns broadcast over its G heads;
                # each class's own (m, G) product, as a two-class grid's (BLAS picks its
                # summation order by the shape: the same shape gives the same bits)
                for g, acc, table, boost in zip(self.groups, self.accs, self.group_tables,
                                                self.boosts, strict=True):
                    sign = np.where(y == self.head_class[g[0]], 1.0, -1.0)[:, None]
                    U = X @ theta[:, g] + b[g]
                    vals = glm_loss_values_table(
                        self.loss, sign * U, sign, tau[g], table, self.truncation,
                        None if boost is None else boost[y.astype(np.int64)][:, None])
                    acc.add(vals if sample_weight is None else vals * row_weights[:, None])
                continue
            U = X @ theta + b                                                 # (m, k)
            if record.task == "regression":
                r = U - y[:, None]
                vals = 0.5 * r * r - tau - 0.5 * self.target_var
            elif self.table is not None:
                vals = glm_loss_values_table(self.loss, y[:, None] * U, y[:, None], tau,
                                             self.table, self.truncation)
            else:
                vals = glm_loss_values(self.loss, y[:, None] * U, tau, self.weight,
                                       self.truncation)
            if sample_weight is not None:
                vals = vals * row_weights[:, None]
            self.accs[0].add(vals)

    def _add_compiled(self, batch) -> None:
        """One batch through ``score_block_heads``: one call per group of compared heads, on
        the batch's columns in place (one float dtype: float32 columns stay float32)."""
        def column(name):
            return np.asarray(batch.column(name).to_numpy(zero_copy_only=False))
        inputs = scoring_inputs([column(f) for f in self.features], column(self.label),
                                column(self.sample_weight) if self.sample_weight is not None
                                else None)
        record = loss_record(self.loss)
        if self.table is not None:
            table = np.array(self.table, dtype=np.float64)
        else:
            s = 1.0 if self.weight is None else float(self.weight)
            table = np.array([s, 1.0 - s, s, 1.0 - s])
        for g, acc in zip(self.groups, self.accs, strict=True):
            cls = (-1.0 if self.head_class is None or record.task == "regression"
                   else float(self.head_class[g[0]]))
            score_group(inputs, self.theta[:, g], self.b[g], self.tau[g], self.loss, table, cls,
                        self.target_var, acc)

    def _add_compiled_two_threads(self, batches) -> None:
        """``_add_compiled`` of every batch, the odd ones on a second thread into a copy of this
        scorer with empty sums, merged at the end (the kernel releases the GIL).  Which thread
        scores a batch depends only on its position, and the merge is ``merge``'s, so the sums
        are the same from run to run (not the bits of one thread's sequence of merges: an
        estimate moves by rounding only)."""
        import copy
        import queue
        import threading

        from ..estimates import RiskAccumulator
        other = copy.copy(self)
        other.accs = [RiskAccumulator(len(g)) for g in self.groups]
        handed: queue.Queue = queue.Queue(maxsize=2)    # at most two batches in flight
        failed: list[BaseException] = []

        def score_odd_batches():
            while (batch := handed.get()) is not None:
                if not failed:              # after an error: drain, so the reader never blocks
                    try:
                        other._add_compiled(batch)
                    except BaseException as error:      # re-raised by the caller
                        failed.append(error)

        worker = threading.Thread(target=score_odd_batches, name="iwpfast-score", daemon=True)
        worker.start()
        try:
            for position, batch in enumerate(batches):
                if position % 2:
                    handed.put(batch)
                else:
                    self._add_compiled(batch)
        finally:
            handed.put(None)
            worker.join()
        if failed:
            raise failed[0]
        self.merge(other)

    def merge(self, other: HeadScorer) -> None:
        """Add the rows ``other`` scored (the same heads)."""
        for acc, theirs in zip(self.accs, other.accs, strict=True):
            acc.merge(theirs)

    def result(self):
        """(RiskEstimate per head, covariance of the estimates)."""
        estimates: list = [None] * self.k
        cov = np.full((self.k, self.k), np.inf)   # heads of different groups are never compared
        for g, acc in zip(self.groups, self.accs, strict=True):
            for i, est in zip(g, acc.estimates(self.loss, 2.0 * self.tau[g]), strict=True):
                estimates[i] = est
            cov[np.ix_(g, g)] = acc.covariance_of_means()
        return estimates, cov


def _two_threads(n_rows: int | None, n_heads: int,
                 threshold: int = SCORE_THREADS_MIN_VALUES) -> bool:
    """Whether a hold-out of ``n_rows`` rows scored for ``n_heads`` heads is worth two threads."""
    from . import driver
    return (n_rows is not None and n_rows * n_heads >= threshold and driver.usable_cores() >= 2)


def scoring_inputs(columns, y, weights):
    """The kernel's view of one batch, made once for all its groups of heads: (the columns kept
    alive, their addresses, the dtype marker, labels, row weights).  One signature per column
    dtype: the columns in one float dtype (float64 when they differ), labels and weights as
    C-contiguous, writable float64 (an Arrow buffer's read-only array would be a second
    signature, a second compile); no weights: an empty array."""
    from .engine import _LIKE, _addresses
    dtype = columns[0].dtype if columns else np.dtype(np.float64)
    if dtype not in (np.float32, np.float64) or any(c.dtype != dtype for c in columns):
        dtype = np.dtype(np.float64)
    columns = [np.ascontiguousarray(c, dtype=dtype) for c in columns]
    return (columns, _addresses(columns), _LIKE[dtype], _owned(y),
            _owned(np.empty(0) if weights is None else weights))


def _owned(values):
    return np.require(values, dtype=np.float64, requirements=["C", "W"])


def score_group(inputs, theta, b, tau, loss: str, table, cls: float, target_var: float,
                acc) -> None:
    """The rows of ``inputs`` (``scoring_inputs``) scored by the heads (``theta`` (p, G), ``b``,
    ``tau``) of one group, merged into the RiskAccumulator ``acc`` by ``_kernels/score.py``;
    ``table``: the 2 x 2 label weights, ``cls``: the group's class (-1.0: +-1 labels)."""
    from .._kernels.score import score_block_heads
    _, addresses, like, y, weights = inputs
    acc.n = int(score_block_heads(
        addresses, like, np.int64(len(y)), y, weights, _owned(theta), _owned(b), _owned(tau),
        np.int64(LOSS_CODES[loss]), _owned(table), float(cls), float(target_var), acc.mean,
        acc.m2, acc.comoment, acc.sum_abs, acc.sum_sq, acc.max_abs, np.int64(acc.n)))


def warm_scoring(dtype) -> None:
    """Compile (or load) the hold-out scoring kernel for feature columns of ``dtype``
    (``iwpfast warmup``: a small fit's hold-out is scored by the NumPy step)."""
    from ..estimates import RiskAccumulator
    column = np.zeros(1, dtype=dtype)
    score_group(scoring_inputs([column], np.ones(1), None), np.zeros((1, 1)), np.zeros(1),
                np.zeros(1), "exponential", np.array([1.0, 0.0, 1.0, 0.0]), -1.0, 0.0,
                RiskAccumulator(1))


def scored_columns(features, label, sample_weight) -> list[str]:
    return [*features, label] + ([sample_weight] if sample_weight is not None else [])
