"""``IWPClassifier.fit`` on a release whose categorical columns are randomized-response codes.

Such a release (``categorical_mechanism="rr"``, format version 4) is learned by the kernel
``iwpfast._kernels.categorical.rr_sgd_pass`` with the exponential loss's exact inverse
(``iwpfast.categorical_rr``), streamed as every pass of the house is: the release is read in
chunks (``iwpfast.io.reader.ChunkReader``), one kernel call per head per chunk, rows in the
stream's order, the SGD state (theta, b, their averages, the update counters) carried from one
call to the next and the rows of an incomplete minibatch carried to the next chunk (``_train``),
so the model is bit for bit the in-memory pass over the same rows whatever the chunk size, in
memory that does not grow with the rows; ``partial_fit`` continues such a pass from call to call
(``RRStream``) and ``finalize`` runs its last batch.

``alpha='auto'`` / ``learning_rate='auto'`` choose alpha x step x block cap from ``RR_ALPHAS``,
``RR_STEPS``, ``RR_BLOCK_CAPS`` (``_choose``): every head of the grid is trained in one scan of the
training part (the heads on one thread per core), scored on the validation part (the
deterministic blocks of docs/tuning.md "Split": every m-th block of consecutive rows,
m = round(1/validation_fraction), read again chunk by chunk, never held) by the unbiased per-row
loss estimate averaged, trusted only where the reliability judge of every private risk trusts it;
then the chosen head is refitted on every row (a third read).  Every head runs with the variance
cap sigma^2|theta_F|^2 <= 2 on the noised float columns (as the other learners' 'auto') and each
attribute's coefficients shrunk towards their mean until the log of its inverse-variance factor
(``block_log_factor``) is at most the block cap: the exponential estimate's variance grows like
exp(sigma^2|theta_F|^2) times the attributes' factors, and without both caps SGD diverged on the
benchmark tables (docs/release.md).

The model's coordinates are the one-hot coordinates of the feature map, so ``predict`` & co. read
raw tables (strings) as for any categorical release, ``save`` writes it as an ordinary linear model
over them with the release's spec (``_document``), and ``private_risk`` scores an rr hold-out
with the same inverse (``rr_private_risk``).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..categorical_rr import RRLayout, check_rr_loss
from ..exceptions import InvalidInputError
from ..label_noise import label_tilde_from_keep

#: the 'auto' grid: ridge alpha x initial step (schedule gamma0 / (1 + alpha gamma0 t)) x the cap
#: on each attribute's log inverse-variance factor (0: the blocks stay constant, a model of the
#: float columns alone, which the hold-out risk then compares with the models that use them)
RR_ALPHAS = (1e-3, 1e-2, 1e-1)
RR_STEPS = (0.03, 0.1, 0.3)
RR_BLOCK_CAPS = (0.0, 1.0)
#: the cap on the float columns' noise energy sigma^2|theta|^2 ('auto', as the other learners')
RR_VARIANCE_CAP = 2.0


def opened(X):
    """``X`` opened as a ``Source`` when it is a path, so that a fit opens its files and decodes
    their metadata once for every check that follows; anything else, or a path that cannot be
    opened (the usual path then names the problem), unchanged."""
    if not isinstance(X, (str, os.PathLike)):
        return X
    from ..io.sources import open_source
    try:
        return open_source(X)
    except Exception:           # not readable here: the usual path names the problem
        return X


def rr_release_spec(X):
    """The ReleaseSpec of ``X`` when it is a release with randomized-response categorical columns,
    else None (arrays and other sources go the usual way)."""
    from ..io.source_base import Source
    X = opened(X)
    if not isinstance(X, Source):
        return None
    meta = X.release_metadata
    # a Source's release_metadata is parsed already (a dict, or None)
    if not meta or not meta.get("categorical_rr"):
        return None
    from ..privacy import ReleaseSpec
    return ReleaseSpec.from_metadata(meta)


def _columns(spec) -> tuple[list[str], list[str]]:
    """(the released float columns, the code columns), in the feature map's order."""
    fm = spec.feature_map
    rr = spec.rr_mechanisms
    floats = [n for c in fm.inputs if c.name not in rr
              for n in fm.released_columns[slice(*fm.released_slices[c.name])]]
    return floats, [c.name for c in fm.inputs if c.name in rr]


def _check_learnable(spec) -> None:
    if spec.label is None:
        raise InvalidInputError("the release has no label column: nothing to learn")
    if spec.label_encoding != "pm1":
        raise InvalidInputError("a release with randomized-response categorical columns is learned "
                                "for a binary label only (k-class labels: not supported yet)")


def _check_fit(est, v: dict, spec) -> None:
    """What ``fit`` and ``partial_fit`` need of the estimator and the release."""
    if est._task != "classification":
        raise InvalidInputError("a release with randomized-response categorical columns is a "
                                "classification release; use IWPClassifier")
    if getattr(est, "class_weight", None) is not None:
        raise InvalidInputError(
            "class_weight is not implemented for a release with randomized-response "
            "categorical columns (their learner has its own inverse); drop class_weight")
    check_rr_loss(v["loss"])
    if est.correction != "iwp":
        raise InvalidInputError(f"correction={est.correction!r}: a release with randomized-response "
                                "categorical columns is learned with correction='iwp' only")
    _check_learnable(spec)


def _radius(est, bound: float, alpha: float) -> float:
    """The projection radius: ``est.radius``, else bound / alpha (none without a ridge)."""
    return math.inf if est.radius is None and alpha <= 0 else (
        float(est.radius) if est.radius is not None else bound / alpha)


def _chunks(source, spec, layout: RRLayout, chunk_rows: int | None, bar=None):
    """Yield (X (P, n) float64 released float columns, codes (m, n) uint16, y (n,) int8) per chunk
    of ``source`` (``ChunkReader``: decoded one chunk ahead, nulls and NaN refused with their
    row); a code outside its column's 0..k-1 or a label other than -1/+1 is an error naming the
    column and the row (the kernel indexes its tables by the code).  ``bar``: a progress bar
    (``iwpfast.progress``) counting the rows."""
    from ..io.reader import ChunkReader
    floats, coded = _columns(spec)
    # the codes and the label are read as labels: their own integer type, views of Arrow memory
    reader = ChunkReader(source, [floats], coded + [spec.label], chunk_rows)
    for chunk in reader:
        n = chunk.n_rows
        X = np.empty((len(floats), n))
        for j, column in enumerate(chunk.features[0]):
            X[j] = column
        codes = np.empty((len(coded), n), np.uint16)
        for a, name in enumerate(coded):
            column = chunk.labels[name]
            k = int(layout.sizes[a])
            if n and (int(column.max()) >= k or int(column.min()) < 0):
                i = int(np.flatnonzero((column < 0) | (column >= k))[0])
                raise InvalidInputError(
                    f"randomized-response column {name!r} holds the code {int(column[i])} at "
                    f"{chunk.describe(i)}, outside 0..{k - 1} of its {k} declared categories: the "
                    "release is corrupt or not the one its metadata describes")
            codes[a] = column
        y = chunk.labels[spec.label]
        if n and not np.all((y == 1) | (y == -1)):
            i = int(np.flatnonzero((y != 1) & (y != -1))[0])
            raise InvalidInputError(
                f"label column {spec.label!r} holds {y[i]!r} at {chunk.describe(i)}; a release's "
                "binary labels are -1/+1")
        if bar is not None:
            bar.update(n)
        yield X, codes, np.ascontiguousarray(y, dtype=np.int8)


class _Head:
    """One model of a scan: its hyper-parameters and the kernel's SGD state, carried from one
    chunk's call to the next (theta, b, their Polyak averages, counters [updates, averaged])."""

    def __init__(self, layout: RRLayout, alpha, step, radius, variance_cap, block_cap,
                 average_start, fit_intercept):
        p = layout.n_coords
        self.alpha, self.step, self.radius = float(alpha), float(step), float(radius)
        self.variance_cap, self.block_cap = float(variance_cap), float(block_cap)
        self.average_start, self.fit_intercept = int(average_start), bool(fit_intercept)
        self.theta, self.b = np.zeros(p), np.zeros(1)
        self.theta_avg, self.b_avg = np.zeros(p), np.zeros(1)
        self.counters = np.zeros(2, np.int64)
        self.diverged = False

    def run(self, layout: RRLayout, X, codes, y, order, label_weight, batch_size) -> None:
        from .._kernels.categorical import rr_sgd_pass
        rr_sgd_pass(X, codes, y, order, layout.float_index, layout.noise_var, layout.offsets,
                    layout.sizes, layout.keep, layout.other, self.theta, self.b, self.theta_avg,
                    self.b_avg, self.counters, float(label_weight), int(batch_size),
                    self.step, self.alpha, self.alpha, self.radius, self.variance_cap,
                    self.block_cap, self.fit_intercept, self.average_start, True)

    def model(self) -> tuple[np.ndarray, float]:
        """(theta, b): the Polyak average once averaging started, else the last iterate."""
        if self.counters[1] > 0:
            return self.theta_avg, float(self.b_avg[0])
        return self.theta, float(self.b[0])


def head_threads(n_heads: int) -> int:
    """Threads for a scan's heads: one per usable core, at most one per head (1 on one core).
    The kernel releases the GIL and every head has its own state: the same bits as one thread."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:                      # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(int(n_heads), cores))


def _train(chunks, layout: RRLayout, heads: list[_Head], label_weight, batch_size,
           threads: int | None = None, carry=None, finish: bool = True) -> tuple[int, tuple | None]:
    """One scan: every head's kernel once per chunk over the chunk's whole minibatches; the rows
    of an incomplete one are carried (copied: fewer than ``batch_size``) and completed from the
    next chunk, and the last, short, batch runs at the end, so the batches are those of one call
    over all the rows: the same bits.  The heads are cut into ``threads`` groups (default
    ``head_threads``) that run concurrently, each group's heads one after the other.  A head whose
    theta became non-finite is left out from the next chunk on (its model stays non-finite:
    diverged).  ``carry``: rows carried from an earlier call (``partial_fit``); ``finish=False``
    leaves the last incomplete batch carried.  Returns (rows read, the rows still carried)."""
    from concurrent.futures import ThreadPoolExecutor
    threads = head_threads(len(heads)) if threads is None else max(1, min(int(threads), len(heads)))
    groups = [heads[i::threads] for i in range(threads)]
    pool = ThreadPoolExecutor(threads, "iwpfast-rr-heads") if threads > 1 else None

    def run_group(group, X, codes, y, order):
        for h in group:
            if not h.diverged:
                h.run(layout, X, codes, y, order, label_weight, batch_size)

    def run(X, codes, y, order):
        if pool is None:
            run_group(heads, X, codes, y, order)
            return
        for job in [pool.submit(run_group, g, X, codes, y, order) for g in groups]:
            job.result()

    try:
        return _scan_chunks(chunks, run, heads, batch_size, carry, finish)
    finally:
        if pool is not None:
            pool.shutdown()


def _scan_chunks(chunks, run, heads, batch_size, carry, finish) -> tuple[int, tuple | None]:
    """``_train``'s loop: ``run(X, codes, y, order)`` on whole minibatches, the carry between."""
    n = 0
    for X, codes, y in chunks:
        rows = y.shape[0]
        n += rows
        start = 0
        if carry is not None:
            need = batch_size - carry[2].shape[0]
            take = min(need, rows)
            carry = (np.concatenate([carry[0], X[:, :take]], axis=1),
                     np.concatenate([carry[1], codes[:, :take]], axis=1),
                     np.concatenate([carry[2], y[:take]]))
            if take < need:
                continue
            run(*carry, np.arange(batch_size, dtype=np.int64))
            start, carry = need, None
        full = (rows - start) // batch_size * batch_size
        if full:
            run(X, codes, y, np.arange(start, start + full, dtype=np.int64))
        if start + full < rows:
            rest = slice(start + full, rows)
            carry = (X[:, rest].copy(), codes[:, rest].copy(), y[rest].copy())
        for h in heads:
            h.diverged = h.diverged or not (np.all(np.isfinite(h.theta))
                                            and math.isfinite(float(h.b[0])))
    if finish and carry is not None:
        run(*carry, np.arange(carry[2].shape[0], dtype=np.int64))
        carry = None
    return n, carry


def _float_energy(layout: RRLayout, theta) -> float:
    """The numeric part's sigma^2|theta|^2 (what the variance cap bounds)."""
    theta_f = theta[layout.float_index]
    return float(np.dot(layout.noise_var, theta_f * theta_f))


def _noise_energy(layout: RRLayout, theta) -> float:
    """The numeric part's sigma^2|theta|^2 plus the log of the attributes' inverse-variance factor
    (the exponential estimate is log-normal-like in both): the reliability judge's energy."""
    return _float_energy(layout, theta) + math.log(layout.inverse_variance_factor(theta))


def _score(chunks, layout: RRLayout, models: list, label_weight) -> list:
    """The private risk of every (theta, b) of ``models`` on the rows of ``chunks``: one
    ``RiskEstimate`` each, judged as every private risk is (``iwpfast.estimates``), or None where
    the model is not finite.  Streamed: one ``rr_loss_values`` call per model per chunk, the
    per-row values merged into paired running sums (``RiskAccumulator``)."""
    from .._kernels.categorical import rr_loss_values
    from ..estimates import RiskAccumulator
    live = [i for i, (theta, b) in enumerate(models)
            if np.all(np.isfinite(theta)) and math.isfinite(b)]
    out: list = [None] * len(models)
    if not live:
        return out
    acc = RiskAccumulator(len(live))
    for X, codes, y in chunks:
        values = np.empty((len(live), y.shape[0]))
        for r, i in enumerate(live):
            theta, b = models[i]
            rr_loss_values(X, codes, y, layout.float_index, layout.noise_var, layout.offsets,
                           layout.sizes, layout.keep, layout.other, theta, float(b),
                           float(label_weight), values[r])
        acc.add(values.T)
    energies = [_noise_energy(layout, models[i][0]) for i in live]
    for i, estimate in zip(live, acc.estimates("exponential", energies), strict=True):
        out[i] = estimate
    return out


def rr_private_risk(est, X, spec):
    """``private_risk`` of a model on a randomized-response release ``X`` (spec ``spec``): the
    mean of the rows' unbiased loss estimates (``iwpfast.categorical_rr.rr_loss``), streamed."""
    check_rr_loss(est.loss)
    _check_learnable(spec)
    fm = getattr(est, "feature_map_", None)
    if fm is None or list(fm.coordinates) != list(spec.feature_map.coordinates):
        raise InvalidInputError(
            "the model's coordinates are not those of this release's feature map "
            f"({list(spec.feature_map.coordinates)}); score it on a release of the same columns "
            "and categories")
    layout = RRLayout.from_spec(spec)
    theta = np.asarray(est.coef_, dtype=np.float64).reshape(-1)
    b = float(np.asarray(est.intercept_).reshape(-1)[0])
    estimate = _score(_chunks(X, spec, layout, est.chunk_rows), layout, [(theta, b)],
                      label_tilde_from_keep(spec.label_keep_prob))[0]
    if estimate is None:
        raise InvalidInputError("the model's coefficients are not finite: nothing to score")
    from ..holdout_verdict import NOISY_FEATURES_NOTE, PredictedClasses
    # randomized codes are noisy features: a prediction on them is not the clean row's
    return estimate._replace(predictions=PredictedClasses(
        tuple(np.asarray(est.classes_).tolist()), estimate.n_rows, note=NOISY_FEATURES_NOTE))


def fit_rr(est, X, spec, v: dict):
    """Fit ``est`` (an IWPClassifier) on the randomized-response release ``X`` (spec ``spec``)."""
    from ..exceptions import DivergenceError
    from ..io.sources import open_source
    from ..progress import progress_bar
    _check_fit(est, v, spec)
    layout = RRLayout.from_spec(spec)
    from ..io.source_base import Source
    src = X if isinstance(X, Source) else open_source(X)
    n = src.num_rows
    if n is None:
        raise InvalidInputError(f"{src.description}: its number of rows is unknown; a release with "
                                "randomized-response columns is a Parquet or Arrow IPC file (or "
                                "a folder of parts) that declares it")
    if n == 0:
        raise InvalidInputError("the release holds no rows: nothing to learn")
    label_weight = label_tilde_from_keep(spec.label_keep_prob)
    fm = spec.feature_map
    bound = fm.vector_bound(spec.bound)
    batch_size = v["batch_size"]

    def radius_for(alpha):
        return _radius(est, bound, alpha)

    def read(source):
        return _chunks(source, spec, layout, est.chunk_rows, bar)

    alphas = RR_ALPHAS if not isinstance(v["alpha"], float) else (v["alpha"],)
    steps = RR_STEPS if not isinstance(v["learning_rate"], float) else (v["learning_rate"],)
    tune = len(alphas) * len(steps) > 1
    variance_cap = (RR_VARIANCE_CAP if est.variance_cap is None else float(est.variance_cap))
    # the block caps are part of 'auto' (a fixed alpha and step keep the blocks free, up to the
    # variance cap's share: the largest cap of the grid)
    block_caps = RR_BLOCK_CAPS if tune else (max(RR_BLOCK_CAPS),)
    tuning = None
    alpha, step, block_cap = alphas[0], steps[0], block_caps[0]
    # one bar over every read: the grid's scan and hold-out (n rows), then the refit (n)
    bar = progress_bar(est.progress, n * (2 if tune else 1))
    try:
        if tune:
            alpha, step, block_cap, tuning = _choose(est, v, read, src, layout, n, label_weight,
                                                     alphas, steps, block_caps, variance_cap,
                                                     radius_for)
        head = _Head(layout, alpha, step, radius_for(alpha), variance_cap, block_cap,
                     -(-n // batch_size) // 2 if (est.average == "auto" and tuning is not None)
                     else est._average_start(n, batch_size), est.fit_intercept)
        rows = _train(read(src), layout, [head], label_weight, batch_size)[0]
    finally:
        bar.close()
    if rows != n:
        raise InvalidInputError(f"{src.description}: read {rows} rows but the source declares "
                                f"{n}; the data changed or is corrupt")
    theta, b = head.model()
    if not (np.all(np.isfinite(theta)) and math.isfinite(b)):
        raise DivergenceError(f"theta became non-finite (alpha={alpha:g}, learning_rate={step:g}); "
                              "use a larger alpha or a smaller learning_rate")
    _set_fitted(est, spec_label_classes(src), spec, layout, head, theta, b, n, radius_for(alpha),
                tuning)
    # partial_fit may continue this pass (every batch run: nothing carried)
    est._pass.rr = RRStream(spec, layout, head, None, int(n), label_weight, batch_size,
                            radius_for(alpha))
    return est


def _choose(est, v, read, src, layout, n, label_weight, alphas, steps, block_caps, variance_cap,
            radius_for):
    """'auto': (alpha, step, block cap, ``tuning_``), every head of the grid trained in one scan
    of the training blocks and scored on the validation blocks (docs/tuning.md "Split")."""
    import warnings

    from ..exceptions import NumericalWarning
    from ..sgd.choice import tuning_table
    from ..sgd.split import make_split
    from ..sgd.tuning import MIN_VALIDATION_ROWS
    batch_size = v["batch_size"]
    # the split of every 'auto' (docs/tuning.md "Split"); fewer than MIN_VALIDATION_ROWS
    # validation rows: nothing validated, the grid's centre on every row (as 'auto')
    train, validation = make_split(src, v["validation_fraction"])
    n_train, n_validation = train.num_rows, validation.num_rows
    grid = [(a, s, c) for c in block_caps for a in alphas for s in steps]
    if n_validation < MIN_VALIDATION_ROWS:
        note = (f"{n_validation} validation rows (fewer than {MIN_VALIDATION_ROWS}): nothing "
                "validated; the grid's centre on every row")
        warnings.warn("alpha/learning_rate='auto': " + note, NumericalWarning, stacklevel=4)
        tuning = tuning_table(
            {"alpha": [], "learning_rate": [], "block_cap": [], "risk": [], "stderr": [],
             "reliable": [], "effective_rows": [], "noise_energy": [], "capped": [],
             "on_sphere": [], "pruned_at_row": [], "chosen": []},
            learner="rr", rule="grid centre (too few rows to validate)", n_train=int(n),
            n_validation=0, passes=1.0, folds=None, edge=None, notes=[note], heads=0,
            variance_cap=variance_cap)
        return (alphas[len(alphas) // 2], steps[len(steps) // 2], max(block_caps), tuning)
    average_start = -(-n_train // batch_size) // 2
    heads = [_Head(layout, a, s, radius_for(a), variance_cap, c, average_start, est.fit_intercept)
             for a, s, c in grid]
    _train(read(train), layout, heads, label_weight, batch_size)
    models = [h.model() for h in heads]
    estimates = _score(read(validation), layout, models, label_weight)
    risks = [math.inf if e is None else e.risk for e in estimates]
    # a heavy-tailed estimate that the judge cannot trust is no basis for a choice; with none
    # trusted, the largest alpha's best head (the least noise energy)
    trusted = [i for i, e in enumerate(estimates)
               if e is not None and e.reliable and math.isfinite(e.risk)]
    notes = []
    if not trusted:
        trusted = [i for i, (a, _, _) in enumerate(grid)
                   if a == max(alphas) and math.isfinite(risks[i])]
        notes.append("no head's private risk is reliable: the largest alpha's best head")
    if not trusted:
        raise InvalidInputError("every head of the 'auto' grid diverged on this release; set "
                                "alpha and learning_rate, or a smaller radius")
    best = min(trusted, key=lambda i: risks[i])
    return (*grid[best], _tuning_table(grid, heads, models, estimates, best, layout, variance_cap,
                                       n_train, n_validation, n, notes))


@dataclass
class RRStream:
    """A randomized-response pass that ``partial_fit`` continues: the release it reads (its spec
    and layout), the head's SGD state, the rows of an incomplete batch carried to the next call,
    the rows read so far."""

    spec: Any
    layout: RRLayout
    head: _Head
    carry: tuple | None
    rows: int
    label_weight: float
    batch_size: int
    radius: float

    def same_release(self, layout: RRLayout, spec) -> bool:
        """Whether ``layout`` / ``spec`` describe the release this pass started on (the same
        coordinates, noise, randomized-response probabilities and label keep probability)."""
        mine = self.layout
        return (mine.n_coords == layout.n_coords
                and all(np.array_equal(getattr(mine, f), getattr(layout, f))
                        for f in ("float_index", "noise_var", "offsets", "sizes", "keep", "other"))
                and self.spec.label_keep_prob == spec.label_keep_prob
                and list(self.spec.feature_map.coordinates) == list(spec.feature_map.coordinates))


def partial_fit_rr(est, X, spec, v: dict, n_rows_total):
    """``partial_fit`` on a randomized-response release (a part of one): continue the pass of
    ``est`` (started by ``fit`` or an earlier ``partial_fit`` in this process) or start one.
    'auto' is the grid's centre (``RR_ALPHAS``, ``RR_STEPS`` middle values, the largest block
    cap), nothing validated, as ``partial_fit`` does on other releases; the rows of an incomplete
    batch stay carried until the next call, ``finalize`` runs them (``finalize_rr``)."""
    from ..exceptions import ReleaseSpecError
    _check_fit(est, v, spec)
    layout = RRLayout.from_spec(spec)
    stream = None if est._pass is None else est._pass.rr
    if stream is None and getattr(est, "categorical_mechanism_", None) == "rr":
        raise InvalidInputError(
            "this model was learned from randomized-response codes and loaded from a file, which "
            "keeps no SGD state: partial_fit continues only a pass of this process; call "
            "partial_fit on a new IWPClassifier to start one")
    if stream is None and hasattr(est, "coef_"):
        raise ReleaseSpecError(
            "partial_fit got a release with randomized-response codes, but the pass started on "
            "one without them; one pass must read one release (call fit to start a new pass)")
    if stream is not None and not stream.same_release(layout, spec):
        raise ReleaseSpecError(
            "partial_fit got a release with other columns, categories or noise than the pass "
            "started with; one pass must read one release (call fit to start a new pass)")
    if stream is None:
        if n_rows_total is not None and not (isinstance(n_rows_total, int) and n_rows_total >= 1):
            raise InvalidInputError(f"n_rows_total={n_rows_total!r} must be an integer >= 1")
        alpha = v["alpha"] if isinstance(v["alpha"], float) else RR_ALPHAS[len(RR_ALPHAS) // 2]
        step = (v["learning_rate"] if isinstance(v["learning_rate"], float)
                else RR_STEPS[len(RR_STEPS) // 2])
        batch_size = v["batch_size"]
        tuned = not (isinstance(v["alpha"], float) and isinstance(v["learning_rate"], float))
        if est.average == "auto":
            # as partial_fit's 'auto' elsewhere: tail-averaged when the pass's length is known
            average_start = (-(-int(n_rows_total) // batch_size) // 2
                             if tuned and n_rows_total is not None else -1)
        else:
            average_start = est._average_start(n_rows_total, batch_size)
        bound = spec.feature_map.vector_bound(spec.bound)
        radius = _radius(est, bound, alpha)
        variance_cap = RR_VARIANCE_CAP if est.variance_cap is None else float(est.variance_cap)
        head = _Head(layout, alpha, step, radius, variance_cap, max(RR_BLOCK_CAPS),
                     average_start, est.fit_intercept)
        stream = RRStream(spec, layout, head, None, 0, label_tilde_from_keep(spec.label_keep_prob),
                          batch_size, radius)
    rows, stream.carry = _train(_chunks(X, spec, layout, est.chunk_rows), layout, [stream.head],
                                stream.label_weight, stream.batch_size, carry=stream.carry,
                                finish=False)
    stream.rows += rows
    _fitted_from_stream(est, X, stream)
    return est


def finalize_rr(est) -> None:
    """Run the rows a randomized-response ``partial_fit`` pass carries as its last, short batch."""
    stream = est._pass.rr
    if stream.carry is not None:
        _train(iter(()), stream.layout, [stream.head], stream.label_weight, stream.batch_size,
               carry=stream.carry, finish=True)
        stream.carry = None
    _fitted_from_stream(est, None, stream)


def _fitted_from_stream(est, X, stream: RRStream) -> None:
    from ..exceptions import DivergenceError
    head = stream.head
    theta, b = head.model()
    if not (np.all(np.isfinite(theta)) and math.isfinite(b)):
        raise DivergenceError(f"theta became non-finite (alpha={head.alpha:g}, learning_rate="
                              f"{head.step:g}); use a larger alpha or a smaller learning_rate")
    classes = (spec_label_classes(X) if X is not None else list(est.classes_))
    _set_fitted(est, classes, stream.spec, stream.layout, head, theta, b, stream.rows,
                stream.radius, None)
    est._pass.rr = stream


def _tuning_table(grid, heads, models, estimates, best, layout, variance_cap, n_train,
                  n_validation, n, notes) -> dict:
    """``tuning_`` (``iwpfast.sgd.choice.tuning_table``, learner "rr": one entry per head, one
    hold-out, no grid edge) with a ``block_cap`` column; ``passes``: the reads of the data
    (training part, validation part, the refit)."""
    from ..sgd.choice import tuning_table
    t: dict = {"alpha": [float(a) for a, _, _ in grid],
               "learning_rate": [float(s) for _, s, _ in grid],
               "block_cap": [float(c) for _, _, c in grid],
               "risk": [math.nan if e is None else e.risk for e in estimates],
               "stderr": [math.nan if e is None else e.stderr for e in estimates],
               "reliable": [e is not None and bool(e.reliable) for e in estimates],
               "effective_rows": [math.nan if e is None else e.effective_rows for e in estimates],
               "noise_energy": [math.nan if e is None else e.noise_energy for e in estimates],
               "capped": [bool(np.all(np.isfinite(th))
                               and _float_energy(layout, th) >= variance_cap * (1 - 1e-9))
                          for th, _ in models],
               "on_sphere": [bool(np.all(np.isfinite(h.theta)) and math.isfinite(h.radius)
                                  and np.linalg.norm(h.theta) >= h.radius * (1 - 1e-9))
                             for h in heads],
               "pruned_at_row": [None] * len(grid),
               "chosen": [i == best for i in range(len(grid))]}
    return tuning_table(t, learner="rr",
                        rule="lowest reliable private risk, refitted on every row",
                        n_train=int(n_train), n_validation=int(n_validation),
                        passes=(n_train + n_validation) / n + 1.0, folds=0, edge=None,
                        notes=notes, heads=len(grid), variance_cap=float(variance_cap))


def _set_fitted(est, classes: list, spec, layout, head, theta, b, n, radius, tuning) -> None:
    """The fitted attributes, and the pass as an ordinary single head over the feature map's
    coordinates (what ``save`` writes: ``_document``)."""
    from ..sgd.state import HeadConfig
    from ._heads import SingleHead
    from ._noise import NoiseModel
    from ._state import PassState
    fm = spec.feature_map
    est.coef_ = theta.reshape(1, -1).copy()
    est.intercept_ = np.array([b if est.fit_intercept else 0.0])
    est.classes_ = np.asarray(classes)
    est.features_ = list(fm.coordinates)
    est.n_features_in_ = len(fm.coordinates)
    est.label_ = spec.label
    est.release_spec_ = spec
    est.feature_map_ = fm
    est.feature_bound_ = float(spec.bound) if spec.bound is not None else math.inf
    est.noise_var_ = np.zeros(len(fm.coordinates))
    est.noise_var_[layout.float_index] = layout.noise_var
    est.label_keep_prob_ = spec.label_keep_prob
    est.target_noise_var_ = 0.0
    est.truncation_ = 0
    est.alpha_ = head.alpha
    est.learning_rate_ = head.step
    est.radius_ = radius
    est.variance_cap_ = head.variance_cap
    est.block_cap_ = head.block_cap
    est.n_rows_seen_ = int(n)
    est.n_iter_ = int(head.counters[0])
    est.mode_ = "iwp"
    est.categorical_mechanism_ = "rr"
    est.solver_ = "sgd"
    if tuning is not None:
        est.tuning_ = tuning
    est.telemetry_ = {"rows_seen": int(n), "batches": int(head.counters[0]),
                      "max_noise_energy": _noise_energy(layout, theta)}
    # the pass as the model file describes one: exponential loss, IWP mode, the step schedule,
    # alpha, radius and cap it ran with; no SGD state (partial_fit does not continue an rr pass)
    config = HeadConfig(loss="exponential", mode="iwp", n_features=len(fm.coordinates),
                        noise_var=est.noise_var_, label_keep_prob=spec.label_keep_prob,
                        batch_size=int(est._validated()["batch_size"]), alpha=head.alpha,
                        schedule="inverse", learning_rate=head.step, mu=head.alpha, radius=radius,
                        variance_cap=head.variance_cap, fit_intercept=bool(est.fit_intercept),
                        average_start=head.average_start)
    est._pass = PassState(heads=SingleHead(configs=[config], states=None),
                          features=list(fm.coordinates), label=spec.label,
                          noise=NoiseModel(est.noise_var_, spec.label_keep_prob, 0.0, est.feature_bound_,
                                           spec.to_metadata(), spec=spec, origin="release"))

def spec_label_classes(X) -> list:
    """The release's binary ``label_classes`` (-1/+1 stand for them), default [0, 1]."""
    from ..io.source_base import Source
    from ..io.sources import open_source
    meta = (X if isinstance(X, Source) else open_source(X)).release_metadata
    return list((meta or {}).get("label_classes") or [0, 1])
