"""alpha / learning_rate = "auto": the derived grid and the tuned fit of an estimator.

``TunedFitMixin`` is the part of ``IWPBase`` that chooses the hyper-parameters by private
validation (docs/tuning.md): the derived grid from public quantities only (``_auto_grid``), a
grid of heads trained in one scan and scored on a private hold-out (the heads' ``tune``: one
head, or each of k classes choosing its own point), and the grid's centre when there are too few
rows to hold any out.
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..exceptions import (
    DivergenceError,
    InvalidInputError,
    NumericalWarning,
    ReleaseSpecError,
    user_stacklevel,
)
from ..progress import logger
from ..settings import current
from ..sgd.grid import GridPoint, grid_centre
from ..sgd.schedules import default_radius
from ._fields import EstimatorFields
from ._heads import HEAD_NAME, Heads, SingleHead, TuneOutcome
from ._noise import NoiseModel
from ._state import PassPlan

#: where every head of the derived grid diverged, its steps are tried once more this many times
#: smaller: the grid spans three decades of steps (``iwpfast.sgd.grid.STEP_MULTIPLIERS``), so
#: the retry spans the three decades below it
STEP_RETRY_FACTOR = 1e-3


class TunedFitMixin(EstimatorFields):
    """The "auto" side of ``IWPBase`` (hyper-parameters chosen by private validation)."""

    def _auto_grid(self, v, noise: NoiseModel, p: int, n_train: int | None) -> AutoGrid:
        """The derived grid of "auto" for a pass over ``n_train`` rows (docs/tuning.md), from
        public quantities only: the feature bound, the noise, the label keep probability, the
        loss, the batch size and n_train."""
        from ..sgd import tuning
        from ..sgd.grid import default_grid
        # the grid's mode and cap come from the noise (no config is made for them: each grid
        # point's config is made once, below)
        mode = self._head_mode(noise)
        bound = noise.feature_bound
        notes = []
        if bound is None:
            bound = math.sqrt(p)
            notes.append(f"no feature bound known: the grid assumes features in [-1, 1] (bound "
                         f"sqrt(p) = {bound:.3g}); pass feature_bound=... for a better grid")
        noise_var = (np.asarray(noise.noise_var, dtype=np.float64) if mode != "clean" and p
                     else np.zeros(max(p, 1)))
        # the cap acts on sum_j s_j theta_j^2 over the noised columns: without feature noise (a
        # label-only release) there is nothing for it to hold, and "auto" sets none
        feature_noise = bool(np.any(noise_var > 0))
        cap = (tuning.AUTO_VARIANCE_CAP if (self.variance_cap is None and mode == "iwp"
                                            and feature_noise)
               else (math.inf if self.variance_cap is None else float(self.variance_cap)))
        laplace_cap = self._laplace_cap(v["loss"], noise, p, mode)
        if laplace_cap is not None:
            cap = laplace_cap       # a Laplace release: its finite-variance region's cap
        keep = self._grid_label_keep_prob(noise) if mode == "iwp" else None
        paper = self.schedule == "paper"
        points = default_grid(
            loss=v["loss"], n_rows=n_train, bound=bound, batch_size=v["batch_size"],
            noise_var=noise_var, label_keep_prob=keep, n_features=p, variance_cap=cap,
            radius_of=lambda a: (self.radius if self.radius is not None else
                                 default_radius(v["loss"], bound, a)),
            alphas=_grid_values(v["alpha"]),
            learning_rates=[1.0] if paper else _grid_values(v["learning_rate"]),
            target_noise_var=noise.target_noise_var)

        def make_config(pt, rows):
            vv = dict(v, alpha=pt.alpha, learning_rate=pt.learning_rate,
                      mu=pt.alpha if v["mu"] is None else v["mu"])
            cfg = self._make_config(vv, noise, p, rows)
            if self.average == "auto" and rows is not None:
                # tail averaging under "auto": measured better at every grid point that matters on
                # noisy releases (docs/tuning.md), and it makes the chosen head less seed-dependent
                cfg = dataclasses.replace(cfg, average_start=(-(-int(rows) // v["batch_size"])) // 2)
            return dataclasses.replace(cfg, variance_cap=cap)

        return AutoGrid(points, make_config, cap, mode, notes)

    def _grid_label_keep_prob(self, noise: NoiseModel):
        """The label keep probability the derived grid's step accounts for (two classes: the
        release's own; k classes: the binary equivalent of their weights)."""
        return self._pass_heads().grid_label_keep_prob(noise)

    def _pass_heads(self) -> Heads:
        """The heads of the pass being set up: k one-vs-rest heads when the labels made them,
        else one head."""
        ps = self._pass
        if ps.heads is None:
            ps.heads = SingleHead(task=self._task)
        return ps.heads

    def _fit_tuned(self, plan: PassPlan, mapper, v, validation, scaling, ckpt,
                   declared: bool = False):
        """alpha / learning_rate = 'auto': a grid of heads in one scan, chosen on a private hold-out
        (``iwpfast.sgd.tuning``; docs/tuning.md).  With sample weights every head is weighted and
        the hold-out scores the same weighted risk.  A source of unknown length (a stream, CSV)
        is read ahead until it ends or its split no longer depends on the length
        (``iwpfast.io.peek``; ``declared``: ``plan.rows`` is the caller's ``n_rows_total``)."""
        from ..io.sources import open_source
        from ..sgd import tuning
        from ..sgd.split import validation_period, validation_rows
        feats, lab, noise = plan.features, plan.label, plan.noise
        p = len(feats)
        val_src = None
        plan.source = open_source(plan.source)
        if validation is not None:
            val_src = self._validation_source(validation, feats, lab, noise)
        elif plan.rows is None or declared:
            from ..io.peek import peek_stream
            plan.source = peek_stream(plan.source,
                                      validation_period(v["validation_fraction"]),
                                      declared=plan.rows)
            plan.rows = plan.source.num_rows
        n_rows = plan.rows
        # the grid does not depend on the length (docs/tuning.md); a pass of unknown length has
        # no tail average and no halving rungs (docs/streaming.md "'auto' on a stream")
        n_train = None if n_rows is None else (
            n_rows if val_src is not None
            else n_rows - n_rows // validation_period(v["validation_fraction"]))
        grid = self._auto_grid(v, noise, p, n_train)
        if val_src is None and n_rows is not None and validation_rows(
                n_rows, v["validation_fraction"]) < tuning.MIN_VALIDATION_ROWS:
            self._fit_untuned_centre(plan, mapper, grid, scaling)
            return
        mode = grid.mode
        # the engine and the search's options (``iwpfast.settings``), passed down explicitly
        settings = current()
        kw = dict(loss=v["loss"], validation_fraction=v["validation_fraction"], validation=val_src,
                  mapper=mapper, engine=settings.engine, options=settings.search,
                  progress=self.progress, chunk_rows=self.chunk_rows,
                  feature_bound=noise.feature_bound,
                  # the pass's noise model (clean heads debias for none)
                  noise=noise if mode != "clean" else dataclasses.replace(
                      noise, noise_var=np.zeros(p), label_keep_prob=None, target_noise_var=0.0))
        if ckpt.get("checkpoint") is not None:
            kw.update(ckpt)
        if self._pass.sample_weight is not None:
            # every head of the grid weighted, the hold-out scoring the same weighted risk
            if val_src is not None:
                raise InvalidInputError(
                    "sample_weight with validation=...: the separate validation release has no "
                    "weights for its rows; leave validation out (a part of X, with its weights, is "
                    "held out), or pass numbers for alpha and learning_rate")
            kw["sample_weight"] = self._pass.sample_weight
        from . import _across
        given = dict(sample_weight=self._pass.sample_weight, checkpoint=ckpt.get("checkpoint"),
                     validation=val_src)
        read = None
        if _across.applies_before(self, plan, v, **given):
            read = _across.read_moments(self, plan, mapper)
            if _across.adopt_moment_model(self, plan, v, read):
                return      # noisy features: the moment model, no SGD search (_across.py)
        self._tune(plan, grid, kw, scaling)
        if _across.applies(self, plan, v, **given):
            _across.choose_across(self, plan, mapper, v, read)   # the SGD model weighed

    def _tune(self, plan: PassPlan, grid: AutoGrid, kw, scaling):
        """Run the grid (the heads' ``tune``: one head, or each of k classes choosing its own
        point) and set the chosen heads up as the fitted model."""
        heads = self._pass_heads()
        outcome = self._tune_never_failing(heads, plan, grid, kw)
        plan.config = outcome.configs[0]
        self._start_pass(plan)
        self._set_scaling(scaling, plan.features)
        heads.adopt(outcome.configs, outcome.states)
        self._update_fitted(outcome.telemetry)
        self.alpha_, self.learning_rate_ = outcome.alpha, outcome.learning_rate
        self.tuning_ = outcome.table
        from ..sgd.tuning import routine_note
        for note in outcome.notes:
            # routine events of the search (heads pruned, diverged, left out) are tuning_'s
            # notes and log lines; a warning is for what the user must act on
            if routine_note(note):
                logger.getChild("progress").info("auto hyper-parameters: %s", note)
            else:
                warnings.warn(f"auto hyper-parameters: {note}", NumericalWarning,
                              stacklevel=user_stacklevel())
        # the chosen heads' own warnings, as a plain fit would give them: a chosen head that
        # ended on the cap "auto" set is a model the noise held small (issue 18), said too
        telemetry = heads.per_head_telemetry(self) if outcome.warn_names else []
        for name, cfg, tel in zip(outcome.warn_names, outcome.configs[:len(telemetry)],
                                  telemetry, strict=True):
            _warn_telemetry(name, cfg, dict(tel), chosen=self.variance_cap is None)

    def _tune_never_failing(self, heads: Heads, plan: PassPlan, grid: AutoGrid, kw):
        """``heads.tune``, which never stops on a divergence (docs/tuning.md "When every head
        diverges"): where every head of the grid diverged, the derived grid's steps are tried
        once more STEP_RETRY_FACTOR times smaller (a second scan; only with derived steps), and
        where those diverge too (or the steps were the user's) the fit is the best constant
        model under the loss, with one warning and its own ``tuning_`` entry.  A source read
        once (a stream), a checkpointed search and k classes cannot scan again: their
        divergence is raised as before."""
        try:
            return heads.tune(plan, grid, kw)
        except DivergenceError:
            if (not getattr(plan.source, "rereadable", False) or "checkpoint" in kw
                    or not isinstance(heads, SingleHead)):
                raise
        tried = list(grid.points)
        if isinstance(self.learning_rate, str) and self.schedule != "paper":
            smaller = dataclasses.replace(grid, points=[
                GridPoint(pt.alpha, pt.learning_rate * STEP_RETRY_FACTOR) for pt in grid.points])
            try:
                outcome = heads.tune(plan, smaller, kw)
            except DivergenceError:
                tried += smaller.points
            else:
                note = (f"every head of the derived grid diverged ({len(grid.points)} heads); "
                        f"its steps were tried again {1 / STEP_RETRY_FACTOR:g} times smaller "
                        f"(one more scan of the data)")
                outcome.table["notes"].insert(0, note)
                hint = _unscaled(plan)
                if hint is not None:        # a warning: the user should declare the ranges
                    said = f"{hint} (The derived grid's steps were all too large for them.)"
                    outcome.table["notes"].insert(0, said)
                    outcome.notes.insert(0, said)
                outcome.table["passes"] = float(outcome.table["passes"]) + 1.0
                return outcome
        return self._constant_outcome(heads, plan, grid, kw, tried)

    def _constant_outcome(self, heads: Heads, plan: PassPlan, grid: AutoGrid, kw,
                          tried: list):
        """Every head diverged: the best constant model under the loss (theta = 0, the
        intercept that minimizes the risk at the debiased class share, or the target's mean),
        from one read of the labels; its ``tuning_`` lists the heads tried (diverged) and the
        constant (learner 'constant', chosen)."""
        from ..sgd.choice import tuning_table
        from ..sgd.state import HeadState
        n_rows, value, risk = _constant_fit(plan, kw)
        centre = grid_centre(grid.points)
        cfg = grid.make_config(centre, n_rows)
        state = HeadState.new(cfg, intercept0=value if self.fit_intercept else 0.0)
        n = len(tried)
        what = ("the majority class's constant score" if self._task == "classification"
                else "the target's mean")
        retried = (f", the derived steps and {1 / STEP_RETRY_FACTOR:g} times smaller ones "
                   "included" if n > len(grid.points) else "")
        note = (f"every head diverged ({n} heads{retried}): the model is the "
                f"best constant under the loss ({what}, intercept {value:.4g}), which predicts "
                "no better than the label's base rate. Give smaller steps "
                "(learning_rate=[...]; CLI --learning-rate), a larger alpha, or "
                "fit_intercept=False, or use solver='moments'")
        hint = _unscaled(plan)
        if hint is not None:
            note = f"{note}. {hint}"
        nan = [math.nan] * n
        table = tuning_table(
            dict(alpha=[pt.alpha for pt in tried] + [math.nan],
                 learning_rate=[pt.learning_rate for pt in tried] + [math.nan],
                 risk=nan + [risk], stderr=nan + [math.nan], reliable=[False] * n + [True],
                 effective_rows=nan + [math.nan], noise_energy=nan + [0.0],
                 capped=[False] * (n + 1), on_sphere=[False] * (n + 1),
                 pruned_at_row=[None] * (n + 1), chosen=[False] * n + [True]),
            learner=["sgd"] * n + ["constant"], rule="every head diverged: the constant model",
            n_train=int(n_rows), n_validation=0, passes=float(2 + (n > len(grid.points))),
            folds=None, edge=None, notes=[*grid.notes, note], heads=len(grid.points),
            variance_cap=grid.cap)
        return TuneOutcome([cfg], [state], {HEAD_NAME: {}}, cfg.alpha, cfg.learning_rate,
                           table, [note], [])

    def _fit_untuned_centre(self, plan: PassPlan, mapper, grid: AutoGrid, scaling):
        """Too few rows to hold out a useful validation part: the derived grid's centre (the middle
        alpha, its middle step) on every row, said in tuning_ and a warning."""
        from ..io.views import PartSource
        from ..sgd import tuning
        from ..sgd.choice import tuning_table
        from ..sgd.grid import grid_centre
        pt = grid_centre(grid.points)
        n_rows = int(plan.rows or 0)        # known: a source of unknown length is not tuned
        plan.config = grid.make_config(pt, n_rows)
        self._start_pass(plan)
        self._set_scaling(scaling, plan.features)
        source = plan.source if mapper is None else PartSource(plan.source, mapper=mapper)
        self._run(source, {})
        note = (f"only {n_rows} rows: too few to hold out a validation part of at least "
                f"{tuning.MIN_VALIDATION_ROWS} rows; used the derived grid's centre (alpha "
                f"{pt.alpha:.3g}, step {pt.learning_rate:.3g}) on every row, without validation")
        self.tuning_ = tuning_table(
            dict(alpha=[pt.alpha], learning_rate=[pt.learning_rate], risk=[math.nan],
                 stderr=[math.nan], reliable=[False], effective_rows=[math.nan],
                 noise_energy=[math.nan], capped=[bool(self.telemetry_.get("capped"))],
                 on_sphere=[bool(self.telemetry_.get("on_sphere"))], pruned_at_row=[None],
                 chosen=[True]),
            learner="sgd", rule="too few rows: the derived grid's centre", n_train=int(n_rows),
            n_validation=0, passes=1.0, folds=None, edge=None, notes=[*grid.notes, note],
            heads=1, variance_cap=grid.cap)
        self._pass.running().untuned(self)
        warnings.warn(f"auto hyper-parameters: {note}", NumericalWarning,
                      stacklevel=user_stacklevel())

    def _validation_source(self, validation, feats, lab, noise):
        """A separate private release for choosing the hyper-parameters: same features, same noise."""
        from ..io.sources import open_source
        from ._noise import noise_from_metadata
        src = open_source(validation)
        meta = src.release_metadata
        if meta is None:
            raise InvalidInputError("validation=... must be a private release (with iwpfast release "
                                    "metadata) of the same features; or leave it out to hold out "
                                    "validation_fraction of the training rows")
        vnoise = noise_from_metadata(meta, feats)
        if not (np.allclose(vnoise.noise_var, noise.noise_var, rtol=1e-9)
                and vnoise.label_keep_prob == noise.label_keep_prob):
            raise ReleaseSpecError("the validation release's noise differs from the training data's; "
                                   "release both with the same parameters")
        if lab not in src.full_schema.names:
            raise InvalidInputError(f"the validation release has no label column {lab!r}")
        self._pass_heads().check_validation(meta)
        return src


@dataclass
class AutoGrid:
    """The derived grid of an "auto" pass: its points, each point's HeadConfig for a pass over
    n rows (``make_config(point, n)``), the variance cap its IWP heads run with, the head mode
    and notes on what the grid had to assume."""

    points: list
    make_config: Callable
    cap: float
    mode: str
    notes: list


def _grid_values(value):
    """'auto' -> None (the derived grid), a list -> the list, a number -> [number]."""
    if isinstance(value, str):
        return None
    return list(value) if isinstance(value, list) else [float(value)]


def _warn_telemetry(*args, **kwargs) -> None:
    from ..sgd.driver import _warn_telemetry as warn
    warn(*args, **kwargs)


def _constant_fit(plan: PassPlan, kw) -> tuple[int, float, float]:
    """(rows, value, clean risk) of the best constant model from one read of the labels (and
    weights): classification, the intercept ``Loss.best_constant`` gives at the class share
    debiased for randomized response (share = (q - (1 - s)) / (2 s - 1) for the released share
    q and the keep probability s); regression, the target's (weighted) mean (the target's noise
    has mean 0)."""
    from ..io.views import PartSource
    from ..losses import loss_record
    label, weight, noise = plan.label, kw.get("sample_weight"), kw.get("noise")
    source = PartSource(plan.source, mapper=kw.get("mapper"))
    columns = [*plan.features, label] + ([weight] if weight else [])
    total = mass = positive = 0.0
    rows = 0
    for batch in source.batches(columns):
        y = np.asarray(batch.column(label).to_numpy(zero_copy_only=False), dtype=np.float64)
        w = (np.ones_like(y) if not weight else
             np.asarray(batch.column(weight).to_numpy(zero_copy_only=False), dtype=np.float64))
        rows += len(y)
        mass += float(w.sum())
        total += float((w * y).sum())
        positive += float(w[y > 0].sum())
    record = loss_record(kw["loss"])
    mass = max(mass, 1e-300)
    if record.task != "classification":
        mean = total / mass
        return rows, mean, math.nan
    share = positive / mass
    keep = None if noise is None else noise.label_keep_prob
    if keep is not None:
        share = (share - (1.0 - keep)) / (2.0 * keep - 1.0)
    share = min(max(share, 1e-6), 1.0 - 1e-6)
    b = record.best_constant(share)
    from ..losses import derivative
    risk = float(share * derivative(kw["loss"], 0, np.array([b]))[0]
                 + (1.0 - share) * derivative(kw["loss"], 0, np.array([-b]))[0])
    return rows, float(b), risk


def _unscaled(plan) -> str | None:
    """The advice to declare ranges when a source without release metadata looks unscaled (the
    usual cause of a grid that diverges everywhere)."""
    if plan.noise.metadata is not None:
        return None
    from ._units import unscaled_hint
    return unscaled_hint(plan.source, plan.features)
