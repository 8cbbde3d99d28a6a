"""The estimators' common base: one pass of the streaming driver, prediction and evaluation.

``fit`` starts a pass (a fresh ``PassState``), ``partial_fit`` continues it; both hand the prepared
input to ``iwpfast.sgd.driver.fit_stream`` for this estimator's single head.  Everything heavy is
imported lazily: importing this module compiles nothing.
"""
from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..estimates import RiskEstimate
from ..exceptions import (
    InvalidInputError,
    NotFittedError,
    NumericalWarning,
    ReleaseSpecError,
    sklearn_compatible,
)
from ..losses import LOSS_RECORDS
from ..sgd.schedules import default_radius
from ..sgd.state import HeadConfig, HeadState
from ._heads import HEAD_NAME, Heads, SingleHead
from ._inputs import (
    InputsMixin,
    column_names,
    dense_numeric,
    is_array_like,
    is_tabular,
    on_filesystem,
    refuse_unsupported,
)
from ._noise import NoiseModel
from ._params import ParamsMixin
from ._state import ARRAY_LABEL, PassPlan, PassState
from ._units import UnitsCheck, resolve_scaled, scale_and_clip, scaling_mapper

#: the pass length partial_fit's 'auto' assumes when n_rows_total is not given (the derived step
#: depends on the number of updates; see _streaming_auto_config and docs/tuning.md)
STREAM_ROWS = 100_000

# which update engine the driver runs: "numba" (the fused kernels) or "reference" (the NumPy
# twin; tests use it to check the facade independently of the kernels)
_ENGINE = "numba"


def _lazy_driver():
    from ..sgd import driver
    return driver


class IWPBase(ParamsMixin, InputsMixin):
    """What IWPClassifier and IWPRegressor share: the pass, prediction, evaluation, persistence."""

    # the current pass (None before the first fit); a class attribute so an unfitted estimator
    # answers None without probing
    _pass: PassState | None = None

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise sklearn_compatible(NotFittedError)(
                f"this {type(self).__name__} is not fitted yet; call fit(...) (or load a saved model "
                "with iwpfast.load) before using it")

    # ---- configuration of the single head --------------------------------------------------
    def _make_config(self, v: dict, noise: NoiseModel, p: int, n_rows: int | None) -> HeadConfig:
        if noise.is_clean:
            mode = "clean"
        else:
            mode = "iwp" if self.correction == "iwp" else "naive"
        radius = self.radius
        if radius is None:
            bound = noise.feature_bound
            # squared_error: no target bound is known here, so default_radius gives inf
            radius = math.inf if bound is None else default_radius(v["loss"], bound, v["alpha"])
        cap = math.inf if self.variance_cap is None else float(self.variance_cap)
        truncation = v["truncation"]
        if LOSS_RECORDS[v["loss"]].truncated and mode == "iwp":
            truncation = self._resolve_truncation(truncation, noise, radius, cap)
        elif truncation == "auto":
            # K only matters for the logistic IWP series: without noise (or correction) or with
            # another loss every K gives the same gradient, so 'auto' is simply ignored
            truncation = 0
        return HeadConfig(
            loss=v["loss"], mode=mode, n_features=p,
            noise_var=(np.zeros(p) if mode == "clean" else noise.noise_var.astype(np.float64)),
            label_keep_prob=noise.label_keep_prob if mode != "clean" else None,
            target_noise_var=noise.target_noise_var,
            truncation=int(truncation), batch_size=v["batch_size"], alpha=v["alpha"],
            schedule=self.schedule, learning_rate=v["learning_rate"],
            mu=v["alpha"] if v["mu"] is None else v["mu"],
            radius=float(radius), variance_cap=cap, fit_intercept=bool(self.fit_intercept),
            average_start=self._average_start(n_rows, v["batch_size"]), trace_every=0)

    def _resolve_truncation(self, truncation, noise, radius, cap):
        return truncation

    # ---- fitting -----------------------------------------------------------------------------
    def fit(self, X, y=None, sample_weight=None, *, noise_var=None, epsilon_y=None,
            label_keep_prob=None, target_noise_var=None, feature_bound=None, features=None,
            label=None, override: bool = False, checkpoint=None, checkpoint_every=None,
            resume: bool = False, overwrite: bool = False, ranges=None, validation=None,
            filesystem=None):
        """Fit in one pass over ``X`` (a new model: earlier fitted attributes are dropped).

        Parameters
        ----------
        X : path, folder, glob, URI, pyarrow Table/Dataset/RecordBatchReader, DataFrame, or array
            A release (Parquet/IPC/CSV file or folder of parts, local or ``s3://...``): its noise
            parameters, features and label come from its metadata.  Or an (n, p) array (or list
            of p columns) of released rows with ``y`` and explicit noise parameters.
        y : array of shape (n,) or None
            Labels (any two values, or the declared classes) / regression targets, for arrays.
        sample_weight : array of shape (n,), str, or None
            Public per-row weights s_i >= 0: the model minimizes the weighted risk
            (1/n) sum_i s_i loss_i + ridge, and the IWP gradient stays unbiased for it (the weights
            must not be computed from the private data; docs/usage.md "Sample weights").  An
            array for arrays X (a number: the same weight for every row); for a source X or a
            DataFrame, the name of the column holding the weights (not a feature then).  None:
            every row weighs 1 (the same model, bit for bit, as weights of 1).
        noise_var : float >= 0 or sequence of p floats >= 0, optional
            Feature noise variances sigma_j^2 (arrays; None: clean features).  With a release,
            must agree with its metadata unless ``override=True``.
        epsilon_y : float > 0 or None, optional
            Label budget of randomized response (None: public labels).
        label_keep_prob : float in (0.5, 1], optional
            S(epsilon_y) directly, instead of ``epsilon_y``.
        target_noise_var : float >= 0, optional
            sigma_y^2 of a regression target (only the reported risk uses it).
        feature_bound : float > 0, optional
            The release's L2 bound B (default radius and the paper schedule; a release gives it).
        features : list of str, optional
            Columns to train on (any subset/order of a release's features); default all.
        label : str, optional
            The label column; default the release's.
        override : bool, default False
            Let explicit noise parameters replace a release's (the model is then biased if wrong).
        checkpoint : path, optional
            A checkpoint written every ``checkpoint_every`` rows (int >= 1; default 5e7) and on
            SIGINT/SIGTERM; ``resume=True`` continues from it (refused for other data or heads).
        overwrite : bool, default False
            Replace an existing checkpoint file that is not resumed.
        ranges : dict {name: (lo, hi)}, "A=0:99,B=1:24", or list of (lo, hi), optional
            X is raw, un-noised data: scale and clip it as a release with these ranges and
            ``feature_bound`` (default 1) would, without noise (the clean baseline).
        validation : release, optional
            A separate private release to choose the "auto" hyper-parameters on (default:
            ``validation_fraction`` of X's rows).
        filesystem : pyarrow.fs.FileSystem or fsspec filesystem, optional
            The filesystem X's path (and a ``validation`` path) lies on, e.g.
            ``pyarrow.fs.S3FileSystem(...)`` with X ``"bucket/release/"`` (an fsspec filesystem
            is wrapped).  Default: the local disk, or the store a URI names.  In-memory X
            (arrays, frames, tables) with a filesystem is an InvalidInputError.

        Returns
        -------
        self
            Fitted: ``coef_``, ``intercept_``, ``n_rows_seen_``, ``telemetry_``, and with "auto"
            ``alpha_``, ``learning_rate_``, ``tuning_``.

        Raises
        ------
        InvalidInputError
            A parameter or input value out of range (the message names it and the fix).
        ReleaseSpecError
            Release metadata missing, corrupt or contradicted by explicit parameters.
        DivergenceError
            theta became non-finite (smaller learning_rate, radius or a variance_cap).
        """
        self._new_pass()
        X = on_filesystem(X, filesystem)
        validation = on_filesystem(validation, filesystem, "validation", paths_only=True)
        return self._fit_pass(X, y, dict(noise_var=noise_var, epsilon_y=epsilon_y,
                                          label_keep_prob=label_keep_prob,
                                          target_noise_var=target_noise_var, feature_bound=feature_bound),
                              features=features, label=label, override=override, n_rows_total=None,
                              finish=True, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                              resume=resume, overwrite=overwrite, ranges=ranges,
                              validation=validation, sample_weight=sample_weight)

    def _new_pass(self) -> None:
        """Drop the fitted attributes and start a new pass (``fit``, ``plan_pass``)."""
        for attr in list(vars(self)):
            if attr.endswith("_") and not attr.startswith("_"):
                delattr(self, attr)
        self._pass = PassState()

    # ---- a pass run by another driver ---------------------------------------------------------
    def plan_pass(self, X, *, features=None, label=None, sample_weight=None,
                  filesystem=None) -> PassPlan:
        """Start a new pass over the release ``X`` that another driver runs (``iwpfast.distributed``
        runs it on a cluster), and return its ``PassPlan``: the source with its labels in the
        kernel's encoding, the feature and label columns, the noise, the sample-weight column and
        ``config``, the head's configuration for one pass over all rows (``plan.config_for(n)``:
        for a pass over n of them).  Drops the fitted attributes, as ``fit`` does; ``adopt_pass``
        sets them from the state the driver ran.  alpha and learning_rate must be numbers ("auto"
        chooses them on a private hold-out, which only ``fit`` runs)."""
        self._new_pass()
        v = self._validated()
        if not isinstance(v["alpha"], float) or (not isinstance(v["learning_rate"], float)
                                                 and self.schedule != "paper"):
            raise InvalidInputError(
                "a pass run by another driver needs numbers for alpha and learning_rate ('auto' "
                "chooses them on a private hold-out in fit): fit a sample with 'auto' first and "
                "pass its alpha_ and learning_rate_")
        if not isinstance(v["learning_rate"], float):   # schedule='paper' resolves the step itself
            v = dict(v, learning_rate=1.0)
        plan = self._prepare_source(on_filesystem(X, filesystem), None, noise_kw={},
                                    features=features, label=label, override=False,
                                    sample_weight=sample_weight)
        plan.source = self._label_mapped_source(plan.source, plan.label)
        plan.engine = _ENGINE
        p = len(plan.features)
        plan.make_config = lambda rows: self._make_config(v, plan.noise, p, rows)
        plan.config = plan.config_for(plan.rows)
        return plan

    def adopt_pass(self, plan: PassPlan, state: HeadState, telemetry: dict):
        """Set the fitted attributes from the state ``state`` that another driver ran for
        ``plan`` (with ``plan.config``) and its telemetry (``iwpfast.sgd.driver.head_telemetry``
        and the driver's own entries).  Returns self."""
        self._start_pass(plan)
        self._pass.heads.adopt([self._pass.config], [state])
        self._update_fitted({HEAD_NAME: telemetry})
        return self

    def partial_fit(self, X, y=None, sample_weight=None, *, classes=None, n_rows_total=None,
                    noise_var=None, epsilon_y=None, label_keep_prob=None, target_noise_var=None,
                    feature_bound=None, features=None, label=None, override: bool = False,
                    filesystem=None):
        """Continue the same single pass with more rows (same step counter, schedule and average).

        Rows that do not fill a whole minibatch are carried in the state until the next call, so
        ``partial_fit`` over any split of the rows gives exactly the model of one ``fit`` over all
        of them once ``finalize()`` has run the carried rows as the final partial minibatch.
        alpha/learning_rate "auto" cannot be validated on a stream: on the pass's first call they
        are set to the centre of the grid ``fit`` would derive, from public quantities only (the
        feature bound, the noise, the label keep probability, the loss, the batch size and
        ``n_rows_total``, else a pass of ``STREAM_ROWS`` = 100,000 rows), and kept for the whole
        pass (fitted ``alpha_``, ``learning_rate_``; docs/tuning.md "partial_fit").

        Parameters
        ----------
        X, y : as for ``fit`` (arrays, or a source streamed in chunks)
        classes : array-like of the label values, optional
            All classes, on the first call when this chunk may not show them all.
        sample_weight : array of shape (n,), str, or None
            As for ``fit``.  A pass that starts weighted takes weights in every call; one that
            starts without them takes none (call ``fit`` to start a new pass).
        n_rows_total : int >= 1, optional
            Rows of the whole pass; needed on the first call for ``average="tail"`` or a
            fractional average and for ``schedule="paper"``; with "auto" it sets the derived step.
        noise_var, epsilon_y, label_keep_prob, target_noise_var, feature_bound, features, label,
        override : as for ``fit``; they must stay the same across calls.
        filesystem : as for ``fit`` (the filesystem X's path lies on).

        Returns
        -------
        self
        """
        X = on_filesystem(X, filesystem)
        if self._pass is None:
            self._pass = PassState()
        ps = self._pass
        if classes is not None and self._task == "classification":
            ps.classes_hint = np.asarray(classes)
        noise_kw = dict(noise_var=noise_var, epsilon_y=epsilon_y, label_keep_prob=label_keep_prob,
                        target_noise_var=target_noise_var, feature_bound=feature_bound)
        v = self._validated()
        for name in ("alpha", "learning_rate"):
            if isinstance(v[name], list):
                raise InvalidInputError(
                    f"partial_fit cannot choose {name} from a list: choosing needs a private "
                    "validation over a whole pass, which only fit runs. Pass a number, 'auto' (a "
                    f"value derived from public quantities only), or the {name}_ of a fit")
        continuing = ps.started and hasattr(self, "coef_")
        if y is None:
            plan = self._prepare_source(X, None, noise_kw=noise_kw, features=features, label=label,
                                        override=override, sample_weight=sample_weight)
            # labels in the kernel's encoding (k classes are known from here on, before the
            # first call's config is made)
            plan.source = self._label_mapped_source(plan.source, plan.label)
        else:
            plan = self._prepare_arrays(X, y, noise_kw=noise_kw, features=features,
                                        sample_weight=sample_weight, whole_pass=False)
            plan.source.validate = False  # the driver names a non-finite value (io/arrays.py)
        weight_column = plan.sample_weight
        if continuing:
            self._check_same_setup(plan.features, plan.noise)
            if (weight_column is None) != (ps.sample_weight is None):
                raise InvalidInputError(
                    "partial_fit: the pass started " + ("with" if ps.sample_weight else "without")
                    + " sample_weight and this call " + ("gives none" if ps.sample_weight else
                                                         "gives some")
                    + "; a pass is weighted in every call or in none (call fit to start a new pass)")
            ps.sample_weight = weight_column
        else:
            # average="auto" is no averaging with numeric hyper-parameters (as in fit); with
            # "auto" ones, tail averaging when n_rows_total gives the pass's length (else none)
            if n_rows_total is None and (self.schedule == "paper" or (
                    self.average not in (False, True, "auto")
                    and not isinstance(self.average, numbers.Integral))):
                raise InvalidInputError(
                    f"partial_fit with average={self.average!r} / schedule={self.schedule!r} needs the "
                    "total number of rows of the whole pass: pass n_rows_total=... on the first call")
            noise, p = plan.noise, len(plan.features)
            if isinstance(v["alpha"], float) and (isinstance(v["learning_rate"], float)
                                                   or self.schedule == "paper"):
                cfg = self._make_config(v, noise, p, n_rows_total)
            else:
                cfg = self._streaming_auto_config(v, noise, p, n_rows_total)
            if cfg.schedule == "paper":
                from ..sgd.schedules import resolve_paper_schedule
                cfg = resolve_paper_schedule(cfg, int(n_rows_total), feature_bound=noise.feature_bound)
            plan.config = cfg
            self._start_pass(plan)
        # the rows of an incomplete last batch stay in the state's carry (finish=False): the next
        # call completes the batch, finalize() runs it as the pass's last update
        self._run(plan.source, {"finish": False})
        return self

    def _streaming_auto_config(self, v, noise: NoiseModel, p: int, n_rows_total) -> HeadConfig:
        """partial_fit with alpha and/or learning_rate = 'auto': a stream cannot hold rows out and
        read them again, so nothing is validated; the values are the centre of the grid ``fit``
        would derive (``_auto_grid``: the middle alpha, its middle step), computed from public
        quantities only -- the feature bound, the noise, the label keep probability, the loss,
        the batch size and the pass's rows (``n_rows_total``, else ``STREAM_ROWS``) -- never from
        the data's values.  Resolved once, on the pass's first call (every later call runs with
        the same values); the IWP heads run with the variance cap of "auto", and
        average='auto' tail-averages when ``n_rows_total`` is given (as fit's "auto")."""
        from ..sgd import tuning
        rows = STREAM_ROWS if n_rows_total is None else int(n_rows_total)
        grid = self._auto_grid(v, noise, p, rows)
        return grid.make_config(tuning.grid_centre(grid.points), n_rows_total)

    def finalize(self):
        """Run the rows ``partial_fit`` carries (fewer than a batch) as the pass's final partial
        batch, as ``fit`` does at the end of its pass."""
        self._check_fitted()
        ps = self._pass
        telemetry = None if ps is None or ps.heads is None else ps.heads.finish(ps, _ENGINE)
        if telemetry is not None:
            self._update_fitted(telemetry)
        return self

    def _start_pass(self, plan: PassPlan):
        """Set the pass's head up from ``plan`` (its config made; the classes found and the hint
        given so far stay) and the fitted attributes that describe it.  A plan with sample weights
        gets a weighted head."""
        ps = self._pass
        cfg, feats, lab, noise, names_in = (plan.config, plan.features, plan.label, plan.noise,
                                            plan.names)
        ps.sample_weight = plan.sample_weight
        if ps.sample_weight is not None and not cfg.weighted:
            import dataclasses
            cfg = dataclasses.replace(cfg, weighted=True)
        # one head, unless the labels made the pass k one-vs-rest heads
        ps.heads = ps.heads if ps.heads is not None else SingleHead(task=self._task)
        ps.heads.start(cfg)
        ps.features = list(feats)
        ps.label = lab
        ps.noise = noise
        self.n_features_in_ = len(feats)
        if names_in is not None:
            self.feature_names_in_ = np.asarray(names_in, dtype=object)
        self.features_ = list(feats)
        self.label_ = None if lab == ARRAY_LABEL else lab
        spec = None
        if noise.metadata is not None:
            from ..privacy import ReleaseSpec
            spec = ReleaseSpec.from_metadata(noise.metadata)
        self.release_spec_ = spec
        # the declared ranges raw data is scaled by (predict & co.; fit(..., ranges=) sets them
        # for raw training data): a release's own, for the features this model reads
        if spec is not None and all(f in spec.ranges for f in feats):
            self.feature_ranges_ = {f: tuple(map(float, spec.ranges[f])) for f in feats}
            # a label-only release clips no vector (its columns only to their ranges)
            self.feature_bound_ = math.inf if spec.bound is None else float(spec.bound)
        self.noise_var_ = np.asarray(cfg.noise_var, dtype=np.float64)
        self.label_keep_prob_ = cfg.label_keep_prob
        self.target_noise_var_ = cfg.target_noise_var
        self.radius_ = cfg.radius
        self.truncation_ = cfg.truncation
        # the values the pass runs with ('auto' resolved, 'paper' resolved once run: _run updates)
        self.alpha_ = cfg.alpha
        self.learning_rate_ = cfg.learning_rate
        self.mode_ = cfg.mode

    def _run(self, source, kwargs):
        """One call of the streaming driver on ``source`` for this estimator's heads."""
        ps = self._pass
        kw = dict(progress=self.progress, engine=_ENGINE, **kwargs)
        if self.chunk_rows is not None:
            kw["chunk_rows"] = int(self.chunk_rows)
        telemetry = ps.heads.run(ps, source, kw)
        ps.heads.note_step(self)
        self._update_fitted(telemetry)

    def _fit_pass(self, X, y, noise_kw, *, features, label, override, n_rows_total, finish,
                  checkpoint, checkpoint_every, resume, overwrite=False, ranges=None,
                  validation=None, sample_weight=None):
        v = self._validated()
        if ranges is not None:
            # raw, un-noised data: scaled and clipped as a release would, at the release's bound
            noise_kw = dict(noise_kw)
            if noise_kw.get("feature_bound") is None:
                noise_kw["feature_bound"] = 1.0
        plan = self._prepare_source(X, y, noise_kw=noise_kw, features=features, label=label,
                                    override=override, sample_weight=sample_weight)
        from ..exceptions import DivergenceError
        try:
            return self._fit_prepared(plan, y, v, ranges, validation,
                                      dict(checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                                           resume=resume, overwrite=overwrite))
        except DivergenceError as exc:
            raise self._explained_divergence(exc, plan.source, plan.features, ranges, plan.noise,
                                             v) from None

    def _explained_divergence(self, exc, source, feats, ranges, noise, v):
        """The divergence said for this fit: data that look unscaled name ranges=/--ranges
        first, whatever the step; the learning rate is named only when the user set one."""
        from ..exceptions import DivergenceError
        from ..sgd.state import divergence_advice
        hint = None if ranges is not None or noise.metadata is not None \
            else _unscaled_hint(source, feats)
        if exc.config is None or exc.where is None:
            return exc if hint is None else DivergenceError(f"{exc} {hint}")
        step_given = isinstance(v["learning_rate"], float) and self.schedule != "paper"
        parts = [exc.where, hint, divergence_advice(exc.config, step_given)]
        err = DivergenceError(" ".join(p for p in parts if p))
        err.config, err.where = exc.config, exc.where
        return err

    def _fit_prepared(self, plan: PassPlan, y, v, ranges, validation, ckpt):
        """``fit``'s pass once the source is open: the tuned grid or one head."""
        self._pass.sample_weight = plan.sample_weight
        source, feats, lab, noise = plan.source, plan.features, plan.label, plan.noise
        mapper = None
        scaling = None
        if ranges is not None:
            scaling = self._clean_ranges(ranges, feats, noise)
            if isinstance(source, dict):
                cols = scale_and_clip([source[f] for f in feats], *scaling)
                source = {**source, **dict(zip(feats, cols, strict=True))}
            else:
                mapper = scaling_mapper(feats, *scaling)
        if y is None:
            label_mapper = self._label_mapper_for(source, lab)
            from ..io.views import chain_mappers
            mapper = chain_mappers(mapper, label_mapper)
        tune = not isinstance(v["alpha"], float) or (not isinstance(v["learning_rate"], float)
                                                     and self.schedule != "paper")
        plan.source = source
        if tune:
            self._fit_tuned(plan, mapper, v, validation, scaling, ckpt)
            return self
        if not isinstance(v["learning_rate"], float):   # schedule='paper' resolves the step itself
            v = dict(v, learning_rate=1.0)
        plan.config = self._make_config(v, noise, len(feats), plan.rows)
        self._start_pass(plan)
        self._set_scaling(scaling, feats)
        if mapper is not None:
            from ..io.sources import open_source
            from ..io.views import PartSource
            source = PartSource(open_source(source), mapper=mapper)
        elif y is not None:
            source.validate = False     # the driver names a non-finite value (see io/arrays.py)
        self._run(source, ckpt if ckpt["checkpoint"] is not None else {})
        return self

    # ---- the clean baseline path ----------------------------------------------------------------
    def _clean_ranges(self, ranges, feats, noise):
        """(lo, hi, bound) for fit(..., ranges=...): raw clean data, every feature's range declared."""
        if noise.metadata is not None:
            raise InvalidInputError(
                "ranges=... is for raw, un-noised data; this source is a release (already scaled "
                "and noised): drop ranges")
        if not noise.is_clean:
            raise InvalidInputError(
                "ranges=... scales raw clean data as a release would; it cannot be combined with "
                "noise parameters (noise_var/epsilon_y): release the data instead (iwpfast release)")
        from ..privacy.scaling import parse_ranges
        if (isinstance(ranges, (list, tuple)) and ranges and all(
                isinstance(r, (list, tuple)) and len(r) == 2 and not isinstance(r[0], str)
                for r in ranges)):
            # (lo, hi) per column, in the order of X's columns
            if len(ranges) != len(feats):
                raise InvalidInputError(f"ranges has {len(ranges)} (lo, hi) pairs for {len(feats)} "
                                        "features; give one per column, or a dict by name")
            ranges = dict(zip(feats, ranges, strict=True))
        parsed = parse_ranges(ranges)
        missing = [f for f in feats if f not in parsed]
        if missing:
            raise InvalidInputError(
                f"no declared range for feature(s) {', '.join(missing)}; give every feature's public "
                "range, e.g. ranges={" + ", ".join(f"'{m}': (lo, hi)" for m in missing[:3])
                + "} (CLI: --ranges " + " ".join(f"{m}=LO:HI" for m in missing[:3]) + ")")
        lo = np.array([float(parsed[f][0]) for f in feats])
        hi = np.array([float(parsed[f][1]) for f in feats])
        return lo, hi, float(noise.feature_bound)

    def _set_scaling(self, scaling, feats):
        if scaling is not None:
            lo, hi, bound = scaling
            self.feature_ranges_ = {f: (float(a), float(b)) for f, a, b in zip(feats, lo, hi, strict=True)}
            self.feature_bound_ = bound

    # ---- hyper-parameters by private validation ----------------------------------------------
    def _auto_grid(self, v, noise: NoiseModel, p: int, n_train: int) -> AutoGrid:
        """The derived grid of "auto" for a pass over ``n_train`` rows (docs/tuning.md), from
        public quantities only: the feature bound, the noise, the label keep probability, the
        loss, the batch size and n_train."""
        import dataclasses

        from ..sgd import tuning
        probe = self._make_config(dict(v, alpha=1.0, learning_rate=1.0, mu=v["mu"]), noise, p,
                                  n_train)
        mode = probe.mode
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
        keep = self._grid_label_keep_prob(noise) if mode == "iwp" else None
        paper = self.schedule == "paper"
        points = tuning.default_grid(
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

    def _fit_tuned(self, plan: PassPlan, mapper, v, validation, scaling, ckpt):
        """alpha / learning_rate = 'auto': a grid of heads in one scan, chosen on a private hold-out
        (``iwpfast.sgd.tuning``; docs/tuning.md).  With sample weights every head is weighted and
        the hold-out scores the same weighted risk."""
        from ..sgd import tuning
        feats, lab, noise, n_rows = plan.features, plan.label, plan.noise, plan.rows
        p = len(feats)
        val_src = None
        if validation is not None:
            val_src = self._validation_source(validation, feats, lab, noise)
            n_train = n_rows
        else:
            period = tuning.validation_period(v["validation_fraction"])
            n_train = None if n_rows is None else n_rows - n_rows // period
        if n_train is None:
            raise InvalidInputError(
                "learning_rate/alpha='auto' needs the number of rows to derive the grid, which this "
                "source does not know (CSV or a stream): convert it to Parquet/IPC, or pass numbers")
        grid = self._auto_grid(v, noise, p, n_train)
        from ..io.sources import open_source
        plan.source = open_source(plan.source)
        if val_src is None and tuning.validation_rows(n_rows, v["validation_fraction"]) \
                < tuning.MIN_VALIDATION_ROWS:
            self._fit_untuned_centre(plan, mapper, grid, scaling)
            return
        mode = grid.mode
        kw = dict(loss=v["loss"], validation_fraction=v["validation_fraction"], validation=val_src,
                  mapper=mapper, engine=_ENGINE, progress=self.progress, chunk_rows=self.chunk_rows,
                  feature_bound=noise.feature_bound,
                  noise=(noise.noise_var if mode != "clean" else np.zeros(p),
                         noise.label_keep_prob if mode != "clean" else None,
                         noise.target_noise_var if mode != "clean" else 0.0))
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
        self._tune(plan, grid, kw, scaling)

    def _tune(self, plan: PassPlan, grid: AutoGrid, kw, scaling):
        """Run the grid (the heads' ``tune``: one head, or each of k classes choosing its own
        point) and set the chosen heads up as the fitted model."""
        heads = self._pass_heads()
        outcome = heads.tune(plan, grid, kw)
        plan.config = outcome.configs[0]
        self._start_pass(plan)
        self._set_scaling(scaling, plan.features)
        heads.adopt(outcome.configs, outcome.states)
        self._update_fitted(outcome.telemetry)
        self.alpha_, self.learning_rate_ = outcome.alpha, outcome.learning_rate
        self.tuning_ = outcome.table
        for note in outcome.notes:
            warnings.warn(f"auto hyper-parameters: {note}", NumericalWarning, stacklevel=4)
        # the chosen heads' own warnings, as a plain fit would give them: a chosen head that
        # ended on the cap "auto" set is a model the noise held small (issue 18), said too
        for name, cfg, tel in zip(outcome.warn_names, outcome.configs,
                                  heads.per_head_telemetry(self), strict=True):
            _lazy_driver()._warn_telemetry(name, cfg, dict(tel), chosen=self.variance_cap is None)

    def _fit_untuned_centre(self, plan: PassPlan, mapper, grid: AutoGrid, scaling):
        """Too few rows to hold out a useful validation part: the derived grid's centre (the middle
        alpha, its middle step) on every row, said in tuning_ and a warning."""
        from ..io.views import PartSource
        from ..sgd import tuning
        pt = tuning.grid_centre(grid.points)
        n_rows = plan.rows
        plan.config = grid.make_config(pt, n_rows)
        self._start_pass(plan)
        self._set_scaling(scaling, plan.features)
        source = plan.source if mapper is None else PartSource(plan.source, mapper=mapper)
        self._run(source, {})
        note = (f"only {n_rows} rows: too few to hold out a validation part of at least "
                f"{tuning.MIN_VALIDATION_ROWS} rows; used the derived grid's centre (alpha "
                f"{pt.alpha:.3g}, step {pt.learning_rate:.3g}) on every row, without validation")
        self.tuning_ = dict(alpha=[pt.alpha], learning_rate=[pt.learning_rate], risk=[math.nan],
                            stderr=[math.nan], reliable=[False], effective_rows=[math.nan],
                            noise_energy=[math.nan], capped=[bool(self.telemetry_.get("capped"))],
                            on_sphere=[bool(self.telemetry_.get("on_sphere"))], chosen=[True],
                            rule="too few rows: the derived grid's centre", n_train=int(n_rows),
                            n_validation=0, passes=1.0, heads=1, variance_cap=grid.cap,
                            notes=[*grid.notes, note])
        self._pass.heads.untuned(self)
        warnings.warn(f"auto hyper-parameters: {note}", NumericalWarning, stacklevel=4)

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

    def _label_mapper_for(self, source, lab):
        """A batch mapper (``iwpfast.io.views``) putting ``lab`` into the kernel's encoding, or None."""
        return None

    def _label_mapped_source(self, source, lab):
        """``source`` with its labels in the kernel's encoding (a re-readable view)."""
        mapper = self._label_mapper_for(source, lab)
        if mapper is None:
            return source
        from ..io.views import PartSource
        return PartSource(source, mapper=mapper)

    def _check_same_setup(self, feats, noise: NoiseModel) -> None:
        started_with = list(self._pass.features)
        if len(feats) != len(started_with):
            raise InvalidInputError(
                f"X has {len(feats)} features, but {type(self).__name__} is expecting "
                f"{len(started_with)} features as input: partial_fit got features {list(feats)} but the "
                f"pass started with {started_with}; keep the same columns in the same order (or call "
                "fit to start a new pass)")
        if list(feats) != started_with:
            raise InvalidInputError(
                f"partial_fit got features {list(feats)} but the pass started with {started_with}; "
                "keep the same columns in the same order (or call fit to start a new pass)")
        old = self._pass.noise
        if not (np.allclose(old.noise_var, noise.noise_var) and old.label_keep_prob == noise.label_keep_prob
                and old.target_noise_var == noise.target_noise_var):
            raise ReleaseSpecError(
                "partial_fit got data with other noise parameters than the pass started with; one pass "
                "must read one release (call fit to start a new pass)")

    def _update_fitted(self, telemetry: dict) -> None:
        """The fitted attributes from the heads' states and their telemetry (by head name)."""
        self._pass.heads.set_fitted(self, telemetry)

    # ---- prediction ----------------------------------------------------------------------------
    def _theta_b(self):
        """(theta, b) of the fitted model: (p,) and a float, or (k, p) and (k,) for k heads."""
        self._check_fitted()
        return self._fitted_heads().theta_b(self)

    def _fitted_heads(self) -> Heads:
        """The heads of the fitted model (one head when it came without a pass)."""
        ps = self._pass
        return ps.heads if ps is not None and ps.heads is not None else SingleHead(task=self._task)

    def _read(self, source, features, label=None):
        """Yield (feature columns, labels or None) chunk by chunk: the one read path of every
        estimator call, the training reader (``ChunkReader``: only these columns decoded, in a
        background thread; a null or non-finite value raises the error ``fit`` gives, naming the
        file, row group and row)."""
        from ..io.reader import ChunkReader
        reader = ChunkReader(source, [list(features)], [] if label is None else [label],
                             chunk_rows=None if self.chunk_rows is None else int(self.chunk_rows))
        for chunk in reader:
            yield list(chunk.features[0]), (None if label is None else chunk.labels[label])

    def _feature_columns(self, X, features=None):
        """Yield lists of feature columns of X (chunk by chunk, the model's feature order), checked
        against the fit: values must be finite, as in ``fit``.

        X: an (n, p) array (read without a copy when its columns are contiguous), or anything with
        named columns (DataFrame, pyarrow Table, a file path or any source open_source accepts).
        ``features``: the columns of X to use, in the model's feature order (default: the model's
        feature names).
        """
        self._check_fitted()
        p = self.n_features_in_
        model_names = list(self.features_)
        refuse_unsupported(X)
        if is_array_like(X):
            from ..io.arrays import ArraySource
            Xa = dense_numeric(X)
            if Xa.ndim != 2:
                raise InvalidInputError(
                    f"Expected a 2-D array (rows, features), got shape {Xa.shape}. Reshape your data "
                    "with X.reshape(-1, 1) for a single feature or X.reshape(1, -1) for a single row")
            if Xa.shape[1] != p:
                raise InvalidInputError(
                    f"X has {Xa.shape[1]} features, but {type(self).__name__} is expecting {p} features "
                    f"as input (the model's features, in order: {model_names}); "
                    f"pass an (n, {p}) array with the columns in that order")
            if not np.issubdtype(Xa.dtype, np.number):
                raise InvalidInputError(f"X must be numeric (got dtype {Xa.dtype}); encode non-numeric "
                                        "columns as numbers first")
            if Xa.shape[0] == 0:
                return
            names = [f"x{j}" for j in range(p)]
            source = ArraySource(Xa, None, names, None, description="<X array>")
            for cols, _ in self._read(source, names):
                yield cols
            return
        wanted = self._wanted_features(features)
        from ..io.sources import open_source
        src = open_source(X)
        self._check_names(list(src.full_schema.names), wanted, model_names)
        for cols, _ in self._read(src, wanted):
            yield cols

    def _model_ranges(self):
        """(lo, hi, bound) of the model's features in the model's order, or None when the model
        has no declared ranges (then raw units are its training units)."""
        ranges = getattr(self, "feature_ranges_", None)
        if not ranges:
            return None
        names = list(self.features_)
        lo = np.array([float(ranges[n][0]) for n in names])
        hi = np.array([float(ranges[n][1]) for n in names])
        # a release's public columns are clipped to their ranges only, not to the L2 bound
        spec = getattr(self, "release_spec_", None)
        public = set(spec.public_features) if spec is not None else set()
        private = None if not public else np.array([n not in public for n in names])
        return lo, hi, float(self.feature_bound_), private

    def _in_model_units(self, batches, scaled: bool, where: str):
        """Yield the feature columns of ``batches`` in the model's space (``_units``), then warn
        once if the data did not look like the units assumed."""
        ranges = self._model_ranges()
        check = UnitsCheck(list(self.features_), None if ranges is None else ranges[0],
                           None if ranges is None else ranges[1], scaled, where)
        for cols in batches:
            check.add(cols)
            if ranges is not None and not scaled:
                cols = scale_and_clip(cols, *ranges)
            yield cols
        check.warn(stacklevel=4)

    def _wanted_features(self, features) -> list[str]:
        """The columns to read for the model's features: ``features`` (one per model feature, in
        the model's order) or the model's own names."""
        model_names = list(self.features_)
        wanted = list(features) if features is not None else model_names
        if len(wanted) != len(model_names):
            raise InvalidInputError(
                f"features={wanted} names {len(wanted)} columns but the model has {len(model_names)}: "
                f"{model_names}; name one column per model feature, in that order (CLI: --features)")
        return wanted

    @staticmethod
    def _check_names(names, wanted, model_names):
        missing = [c for c in wanted if c not in names]
        if missing:
            extra = [c for c in names if c not in wanted]
            raise InvalidInputError(
                f"the data lacks the model's feature columns {missing} (model features: {model_names}; "
                f"data columns not used: {extra}); rename the columns or pass features=[...] mapping "
                "them in the model's order (CLI: --features)")

    @staticmethod
    def _linear_scores(theta, b, cols) -> np.ndarray:
        """``b + sum_j theta_j * cols[j]``: one vectorized pass per feature column; with (k, p)
        coefficients and k intercepts (one-vs-rest heads) the (n, k) scores."""
        if np.ndim(theta) == 2:
            return np.column_stack([IWPBase._linear_scores(t, bb, cols)
                                    for t, bb in zip(theta, b, strict=True)])
        u = np.full(len(cols[0]), b)
        for t, c in zip(theta, cols, strict=True):
            u += t * c
        return u

    def decision_function(self, X, *, features=None, scaled=None, raw=None,
                          filesystem=None) -> np.ndarray:
        """The linear score ``u = theta^T x + b`` for every row of X.

        X is in raw units by default: a model with declared ranges (fitted on a release, or with
        ``fit(..., ranges=...)``) scales and clips it as the release did.  ``scaled=True``: X is
        already in the model's [-1, 1] space.  (``raw=True`` is the older spelling of the default.)
        ``filesystem``: the pyarrow or fsspec filesystem X's path lies on (as for ``fit``).
        """
        X = on_filesystem(X, filesystem)
        scaled = resolve_scaled(scaled, raw)
        theta, b = self._theta_b()
        out = []
        for cols in self._in_model_units(self._feature_columns(X, features), scaled,
                                         "decision_function"):
            out.append(self._linear_scores(theta, b, cols))
        return np.concatenate(out) if out else np.zeros(0)

    def _clean_xy(self, X, y, features, label, scaled, where="score", sample_weight=None):
        """(scores, targets in the kernel's encoding, weights or None) on clean data: arrays or a
        source with a label; ``sample_weight`` an array, or a column of the source / DataFrame."""
        if y is not None:
            u = self.decision_function(X, features=features, scaled=scaled)
            targets = self._encode_clean_targets(np.asarray(y).reshape(-1))
            if sample_weight is None:
                return u, targets, None
            from ._inputs import column, sample_weight_array
            if isinstance(sample_weight, str) and is_tabular(X):
                if sample_weight not in column_names(X):
                    raise InvalidInputError(
                        f"sample_weight column {sample_weight!r} not in X (its columns: "
                        f"{', '.join(column_names(X))}); name an existing column or pass an array")
                sample_weight = np.asarray(column(X, sample_weight))
            return u, targets, sample_weight_array(sample_weight, u.shape[0])
        self._check_fitted()
        from ..io.sources import open_source
        src = open_source(X)
        names = list(src.full_schema.names)
        lab = label or self.label_
        if lab is None or lab not in names:
            what = ("which column is the label is unknown" if lab is None
                    else f"the data has no label column {lab!r}")
            raise InvalidInputError(f"{what}: pass label=... naming it (CLI: --label; columns: "
                                    f"{', '.join(names)})")
        wanted = self._wanted_features(features)
        self._check_names(names, wanted, list(self.features_))
        from ._inputs import _check_weight_column
        _check_weight_column(sample_weight, src, wanted, lab)
        theta, b = self._theta_b()
        us, ys, ws = [], [], []
        source = self._targets_view(src, lab, clean=True)
        # the weight column is read with the features, then split off
        extra = [] if sample_weight is None else [sample_weight]

        def batches():
            for cols, labels in self._read(source, wanted + extra, lab):
                ys.append(np.asarray(labels, dtype=np.float64))
                if extra:
                    ws.append(np.asarray(cols[-1], dtype=np.float64))
                    cols = cols[:-1]
                yield cols

        for cols in self._in_model_units(batches(), scaled, where):
            us.append(self._linear_scores(theta, b, cols))
        weights = None
        if extra:
            from ..sgd.state import first_invalid_weight
            weights = np.concatenate(ws)
            bad = first_invalid_weight(weights)
            if bad >= 0:
                raise InvalidInputError(f"sample weight {weights[bad]!r} in column {sample_weight!r} "
                                        f"at row {bad}: sample weights must be finite and >= 0")
        return np.concatenate(us), np.concatenate(ys), weights

    def score_and_risk(self, X, y=None, *, features=None, label=None, scaled=None, raw=None,
                       filesystem=None) -> tuple[float, float]:
        """``(score(...), risk(...))`` on clean data from one pass over X (the CLI's ``evaluate``);
        arguments as for ``score``."""
        X = on_filesystem(X, filesystem)
        u, yv, _ = self._clean_xy(X, y, features, label, resolve_scaled(scaled, raw), "evaluate")
        return self._score_from(u, yv), self._risk_from(u, yv)

    def score(self, X, y=None, sample_weight=None, *, features=None, label=None, scaled=None,
              raw=None, filesystem=None) -> float:
        """Accuracy (classifier) or R^2 (regressor) on clean data: arrays ``(X, y)`` or a source
        with the label column.  X in raw units unless ``scaled=True`` (see decision_function).
        ``sample_weight`` (an array, or a column of a source or DataFrame): the weighted accuracy
        sum_i s_i [correct_i] / sum_i s_i, or the weighted R^2 (scikit-learn's definitions).
        ``filesystem``: the pyarrow or fsspec filesystem X's path lies on (as for ``fit``)."""
        X = on_filesystem(X, filesystem)
        return self._score_from(*self._clean_xy(X, y, features, label, resolve_scaled(scaled, raw),
                                                sample_weight=sample_weight))

    def risk(self, X, y=None, sample_weight=None, *, features=None, label=None, scaled=None,
             raw=None, filesystem=None) -> float:
        """Mean (unregularized) loss on clean data, the loss the model minimizes.  X in raw units
        unless ``scaled=True`` (see decision_function).  ``sample_weight`` (an array, or a column
        of a source or DataFrame): the weighted risk (1/n) sum_i s_i loss_i that a weighted fit
        minimizes (divided by n, not by the sum of the weights).  ``filesystem``: the pyarrow or
        fsspec filesystem X's path lies on (as for ``fit``)."""
        X = on_filesystem(X, filesystem)
        return self._risk_from(*self._clean_xy(X, y, features, label, resolve_scaled(scaled, raw),
                                               "risk", sample_weight=sample_weight))

    # ---- private validation --------------------------------------------------------------------
    def _holdout(self, X, y, noise_kw: dict, *, features, label, override,
                 sample_weight=None) -> PassPlan:
        """The hold-out of ``private_risk``, its features checked against the model's."""
        plan = self._prepare_source(X, y, noise_kw=noise_kw, features=features, label=label,
                                    override=override, sample_weight=sample_weight)
        if len(plan.features) != self.n_features_in_:
            raise InvalidInputError(
                f"the hold-out has {len(plan.features)} features {plan.features}, the model "
                f"{self.n_features_in_} {self.features_}; pass features=[...] in the model's order")
        return plan

    def private_risk(self, X, y=None, sample_weight=None, *, noise_var=None, epsilon_y=None,
                     label_keep_prob=None, target_noise_var=None, features=None, label=None,
                     override=False, filesystem=None) -> RiskEstimate:
        """Unbiased estimate of the *clean* risk from a *private* hold-out, with its standard error
        and whether to believe them.

        Each row contributes the IWP loss at the fitted (theta, b), whose expectation over the
        release noise is the clean loss; the estimate is their mean and the standard error is their
        sample sd / sqrt(n) (rows are independent).  For a release file the noise parameters come
        from its metadata.  The logistic loss uses the fitted truncation K (its estimate is then
        unbiased up to the K-term truncation bias).

        The returned ``RiskEstimate`` also carries reliability diagnostics (the rows that
        effectively carry the sum, the largest row's share, sigma^2 |theta|^2 and the variance
        factor it implies); when they show that a few rows dominate, or that the noise makes the
        per-row values too heavy-tailed for this many rows, ``reliable`` is False, ``ci95`` is None
        and a NumericalWarning says why (``iwpfast.estimates``: the thresholds).

        ``sample_weight`` (public row weights: an array, or a column of the hold-out): the
        estimate of the weighted risk (1/n) sum_i s_i loss_i, the mean of s_i times each row's IWP
        loss (unbiased for it, as for the training gradient; docs/math.md "Sample weights").

        ``filesystem``: the pyarrow or fsspec filesystem X's path lies on (as for ``fit``).
        """
        X = on_filesystem(X, filesystem)
        self._check_fitted()
        plan = self._holdout(
            X, y, dict(noise_var=noise_var, epsilon_y=epsilon_y, label_keep_prob=label_keep_prob,
                       target_noise_var=target_noise_var, feature_bound=None),
            features=features, label=label, override=override, sample_weight=sample_weight)
        # one head: the mean of the rows' IWP losses; k heads: the sum over the heads, each
        # debiased with the hold-out's k-ary label weights
        est = self._fitted_heads().risk_estimate(self, plan, epsilon_y)
        if not est.reliable:
            warnings.warn("private_risk: the estimate is not reliable: " + " ".join(est.warnings),
                          NumericalWarning, stacklevel=2)
        return est

    def _iter_xy(self, source, feats, lab, weight_column=None):
        """Yield (feature columns, targets in the kernel's encoding, sample weights or None) per
        chunk of a prepared source (the weights read with the features and checked)."""
        from ..io.arrays import ArraySource
        from ..sgd.state import first_invalid_weight
        if not isinstance(source, ArraySource):       # arrays: labels encoded by the source
            source = self._targets_view(source, lab)
        extra = [] if weight_column is None else [weight_column]
        row = 0
        for cols, labels in self._read(source, list(feats) + extra, lab):
            weights = None
            if extra:
                weights = np.asarray(cols[-1], dtype=np.float64)
                cols = cols[:-1]
                bad = first_invalid_weight(weights)
                if bad >= 0:
                    raise InvalidInputError(
                        f"sample weight {weights[bad]!r} in column {weight_column!r} at row "
                        f"{row + bad}: sample weights must be finite and >= 0")
            row += len(labels)
            yield cols, np.asarray(labels, dtype=np.float64), weights

    def _targets_view(self, source, lab, clean: bool = False):
        """``source`` with the label column in the kernel's encoding of this fitted model
        (``_encode_targets_stream``, one call per batch), for the evaluation reads; ``clean``:
        the labels are the user's values (``_encode_clean_targets``: none the model never saw)."""
        from ..io.sources import open_source
        from ..io.views import PartSource, column_mapper
        encode = self._encode_clean_targets if clean else self._encode_targets_stream
        return PartSource(open_source(source), mapper=column_mapper({lab: encode}))

    def _encode_targets_stream(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(y, dtype=np.float64)

    def _encode_clean_targets(self, y: np.ndarray) -> np.ndarray:
        """Clean labels (score, risk, evaluate) in the kernel's encoding; classifiers refuse
        values the model never saw."""
        return self._encode_targets_stream(y)

    # ---- persistence ---------------------------------------------------------------------------
    def save(self, path, *, overwrite: bool = False, filesystem=None) -> None:
        """Write the fitted model as a small self-describing JSON file (see iwpfast.load).

        An existing file is replaced only with ``overwrite=True``; the write is atomic.  ``path``
        may be a URI (``s3://bucket/model.json``) or a path on ``filesystem`` (a pyarrow or
        fsspec filesystem)."""
        from ..io.outputs import check_output_path
        from ..model_io import write_document
        self._check_fitted()
        check_output_path(path, what="model", overwrite=overwrite, filesystem=filesystem)
        write_document(self._to_document(), path, filesystem)

    def _to_document(self) -> dict:
        """This estimator's part of its model file (``_document.to_document``)."""
        from ._document import to_document
        return to_document(self)

    @classmethod
    def _from_document(cls, doc: dict):
        """The estimator a model document describes (``_document.from_document``)."""
        from ._document import from_document
        return from_document(cls, doc)


def _unscaled_hint(source, feats) -> str | None:
    """A sentence naming ranges=/--ranges when the first rows' features look unscaled (some
    |value| above 10, while a release's features lie within [-1, 1] plus noise)."""
    try:
        if isinstance(source, dict):
            big = {f: float(np.max(np.abs(source[f][:65536]))) for f in feats if len(source[f])}
        else:
            from ..io.sources import open_source
            batch = next(iter(open_source(source).batches(list(feats))), None)
            if batch is None:
                return None
            big = {f: float(np.max(np.abs(batch.column(f).to_numpy(zero_copy_only=False))))
                   for f in feats}
    except Exception:  # the hint is a courtesy: never hide the divergence behind another error
        return None
    large = [f"{f} up to {m:g}" for f, m in big.items() if m > 10.0]
    if not large:
        return None
    return ("The features look unscaled (" + ", ".join(large[:4]) + "): give their declared ranges "
            "so they are scaled into [-1, 1] and clipped as a release would: ranges={name: (lo, hi)} "
            "(CLI: --ranges NAME=LO:HI ...).")


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
