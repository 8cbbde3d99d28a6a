"""The estimators' common base: one pass of the streaming driver, and persistence.

``fit`` starts a pass (a fresh ``PassState``), ``partial_fit`` continues it; both hand the prepared
input to ``iwpfast.sgd.driver.fit_stream`` for this estimator's single head.  Everything heavy is
imported lazily: importing this module compiles nothing.
"""
from __future__ import annotations

import math
import numbers
import time

import numpy as np

from ..exceptions import (
    InvalidInputError,
    NotFittedError,
    NumericalWarning,
    ReleaseSpecError,
    sklearn_compatible,
)
from ..losses import LOSS_RECORDS
from ..progress import logger
from ..settings import current_engine
from ..sgd.schedules import default_radius
from ..sgd.state import HeadConfig, HeadState
from ._checks import is_integral
from ._clean import fit_categorical
from ._evaluation import EvaluationMixin
from ._heads import HEAD_NAME, SingleHead
from ._inputs import (
    InputsMixin,
    on_filesystem,
    with_release,
)
from ._noise import NoiseModel
from ._params import ParamsMixin
from ._state import ARRAY_LABEL, PassPlan, PassState
from ._tuned import TunedFitMixin
from ._units import scale_and_clip, scaling_mapper, unscaled_hint

#: a fit whose pass makes fewer minibatch steps warns (fair's 35 steps of 128 rows land within
#: 0.01 of scikit-learn on bench/real_tables.py; breast cancer's 4 do not)
FEW_UPDATES = 20

#: the pass length partial_fit's 'auto' assumes when n_rows_total is not given (it sets the tail
#: average's start; see _streaming_auto_config and docs/tuning.md)
STREAM_ROWS = 100_000


class IWPBase(ParamsMixin, InputsMixin, TunedFitMixin, EvaluationMixin):
    """What IWPClassifier and IWPRegressor share: the pass, prediction, evaluation, persistence."""

    # the current pass (None before the first fit); a class attribute so an unfitted estimator
    # answers None without probing
    _pass: PassState = None  # type: ignore[assignment]  # (typed as once a pass started)

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise sklearn_compatible(NotFittedError)(
                f"this {type(self).__name__} is not fitted yet; call fit(...) (or load a saved model "
                "with iwpfast.load) before using it")

    # ---- arrays of a release (release_spec=) -------------------------------------------------
    def _release_rows(self, X) -> bool:
        """Whether ``X`` holds rows of the release ``release_spec`` names: in-memory arrays and
        frames (never paths or sources, which carry their own metadata or none)."""
        return getattr(self, "release_spec", None) is not None and released_arrays(X)

    def _spec_for(self, y, release_spec, release):
        """The spec ``fit`` reads arrays ``(X, y)`` with: fit's own ``release_spec=``, else the
        estimator's (arrays of that release: scikit-learn's folds), unless ``release=`` is given."""
        if release_spec is not None or release is not None or y is None:
            return release_spec
        return getattr(self, "release_spec", None)

    def _model_scores(self, X, features, scaled: bool, where: str, stacklevel: int = 5):
        """As ``EvaluationMixin._model_scores``; rows of ``release_spec``'s release are in the
        release's space already: never scaled again, and their noise is no units mistake."""
        if not self._release_rows(X):
            return super()._model_scores(X, features, scaled, where, stacklevel + 1)
        theta, b = self._theta_b()
        out = [self._linear_scores(theta, b, cols) for cols in self._feature_columns(X, features)]
        return np.concatenate(out) if out else np.zeros(0)

    # ---- configuration of the single head --------------------------------------------------
    def _head_mode(self, noise: NoiseModel) -> str:
        """The head's correction: "clean" without noise, else the estimator's ``correction``."""
        if noise.is_clean:
            return "clean"
        return "iwp" if self.correction == "iwp" else "naive"

    def _laplace_cap(self, loss: str, noise: NoiseModel, p: int, mode: str) -> float | None:
        """The cap an IWP head of a Laplace release needs when none is given (its law's
        finite-variance region), else None: the exponential loss's estimate has a finite
        variance only for |theta_j| < 1/(2 b_j); the cap keeps theta inside (docs/math.md "Pure
        epsilon")."""
        if noise.noise_law is None or mode != "iwp" or self.variance_cap is not None \
                or noise.noise_law.inverse_for(loss) != "product":
            return None
        return noise.noise_law.broadcast(p).default_variance_cap()

    def _variance_cap(self, loss: str, noise: NoiseModel, p: int, mode: str) -> float:
        """The cap on sigma^2 |theta|^2 a head runs with, before "auto" sets its own."""
        laplace = self._laplace_cap(loss, noise, p, mode)
        if laplace is not None:
            return laplace
        return math.inf if self.variance_cap is None else float(self.variance_cap)

    def _make_config(self, v: dict, noise: NoiseModel, p: int, n_rows: int | None) -> HeadConfig:
        mode = self._head_mode(noise)
        radius = self.radius
        if radius is None:
            bound = noise.feature_bound
            # squared_error: no target bound is known here, so default_radius gives inf
            radius = math.inf if bound is None else default_radius(v["loss"], bound, v["alpha"])
        cap = self._variance_cap(v["loss"], noise, p, mode)
        law = noise.noise_law if mode != "clean" else None
        truncation = v["truncation"]
        if LOSS_RECORDS[v["loss"]].truncated and mode == "iwp":
            truncation = self._resolve_truncation(truncation, noise, radius, cap)
        elif truncation == "auto":
            # K only matters for the logistic IWP series: without noise (or correction) or with
            # another loss every K gives the same gradient, so 'auto' is simply ignored
            truncation = 0
        class_weights = None if self._pass is None else self._pass.class_weights
        label_weights = None
        if class_weights is not None:
            from ..label_noise import class_weighted_table
            label_weights = class_weighted_table(
                class_weights, noise.label_keep_prob if mode == "iwp" else None)
        return HeadConfig(
            label_weights=label_weights,
            loss=v["loss"], mode=mode, n_features=p,
            noise_var=(np.zeros(p) if mode == "clean" else noise.noise_var.astype(np.float64)),
            label_keep_prob=noise.label_keep_prob if mode != "clean" else None,
            target_noise_var=noise.target_noise_var,
            truncation=int(truncation), batch_size=v["batch_size"], alpha=v["alpha"],
            schedule=self.schedule, learning_rate=v["learning_rate"],
            mu=v["alpha"] if v["mu"] is None else v["mu"],
            radius=float(radius), variance_cap=cap, fit_intercept=bool(self.fit_intercept),
            average_start=self._average_start(n_rows, v["batch_size"]), trace_every=0,
            noise_law=law)

    def _resolve_truncation(self, truncation, noise, radius, cap):
        return truncation

    def _prepare_class_weight(self, source, mapper, lab, noise) -> None:
        """The class weights of the pass, before its configs are made (the classifier's)."""

    # ---- fitting -----------------------------------------------------------------------------
    def fit(self, X, y=None, sample_weight=None, *, noise_var=None, epsilon_y=None, label_keep_prob=None,
            target_noise_var=None, feature_bound=None, features=None, label=None, override: bool = False,
            checkpoint=None, checkpoint_every=None, resume: bool = False, overwrite: bool = False,
            ranges=None, categories=None, unknown_category=None, validation=None, filesystem=None,
            release_spec=None, release=None, n_rows_total=None, keep_checkpoint=False):
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
            Removed once the fit succeeds, unless ``keep_checkpoint=True``.
        overwrite : bool, default False
            Replace an existing checkpoint file that is not resumed.
        ranges, categories, unknown_category : optional
            X is raw, un-noised data mapped as a release would (the clean baseline): ranges
            ``{name: (lo, hi)}``, "A=0:99" or (lo, hi) per column scaled, clipped at ``feature_bound``
            (default 1); categories ``{name: [A, B]}`` one-hot, others to ``unknown_category``.
        validation : release, optional
            A separate private release to choose the "auto" hyper-parameters on (default:
            ``validation_fraction`` of X's rows).
        filesystem : pyarrow.fs.FileSystem or fsspec filesystem, optional
            The filesystem X's path (and a ``validation`` path) lies on, e.g.
            ``pyarrow.fs.S3FileSystem(...)`` with X ``"bucket/release/"`` (an fsspec filesystem
            is wrapped).  Default: the local disk, or the store a URI names.  In-memory X
            (arrays, frames, tables) with a filesystem is an InvalidInputError.
        release_spec : ReleaseSpec, optional
            The spec of the release X holds, for released rows that lost their schema metadata
            on the way (read through pandas, polars or DuckDB) or never had it (``privatize``'s
            arrays, with ``y``): the noise, label keep probability, bound and public columns
            come from it as from a release file (``iwpfast.read_release`` returns it).
        release : path or ReleaseSpec, optional
            The same from the release itself: its file / folder / URI (the metadata is read) or
            its spec.  ``fit(privatize(X, y, spec))`` needs neither (the result carries its spec).
        n_rows_total : int >= 1, optional
            The exact number of rows of a source that does not know it (a stream, CSV), as for
            ``partial_fit``: "auto" then splits, halves and tail-averages as on a file of that
            many rows, without reading ahead (docs/streaming.md "'auto' on a stream"); a wrong
            count is an InvalidInputError.  Without it "auto" reads the stream ahead until it
            ends or its split no longer depends on the length.  Also the length a fixed fit's
            ``average`` fraction is taken of.

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
        if categories is not None:      # a raw table with categorical columns (_clean.py)
            return fit_categorical(self, **{k: v for k, v in locals().items() if k != "self"})
        self._new_pass()
        X = on_filesystem(X, filesystem)
        from ._rr import fit_rr, opened, rr_release_spec
        if y is None and release_spec is None and release is None:
            X = opened(X)           # a path opened once: its metadata read once for this fit
        from ._moments import fit_codes_release
        X = fit_codes_release(self, X, sample_weight=sample_weight, checkpoint=checkpoint,
                              validation=validation)     # self: codes of RR, fitted
        rr_spec = None if X is self else rr_release_spec(X)
        if rr_spec is not None or X is self:
            # categorical codes of randomized response: their own learner (docs/math.md
            # "Categorical columns by randomized response"; it refuses a regressor, class_weight)
            return self if X is self else fit_rr(self, X, rr_spec, self._validated())
        X, y = with_release(X, y, self._spec_for(y, release_spec, release), release, filesystem)
        validation = on_filesystem(validation, filesystem, "validation", paths_only=True)
        started = time.perf_counter()
        self._fit_pass(X, y, dict(noise_var=noise_var, epsilon_y=epsilon_y, label_keep_prob=label_keep_prob,
                                  target_noise_var=target_noise_var, feature_bound=feature_bound),
                       features=features, label=label, override=override, n_rows_total=n_rows_total,
                       finish=True, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                       resume=resume, overwrite=overwrite, ranges=ranges, validation=validation,
                       sample_weight=sample_weight)
        _remove_served_checkpoint(checkpoint, keep_checkpoint)
        seconds = time.perf_counter() - started
        rows = int(getattr(self, "n_rows_seen_", 0) or 0)
        logger.info("fitted %s on %s rows in %.2f s (%.3g M rows/s)", type(self).__name__,
                    f"{rows:,}", seconds, rows / max(seconds, 1e-9) / 1e6)
        self._warn_few_updates(rows)
        return self

    def _warn_few_updates(self, rows: int) -> None:
        """A pass of fewer than ``FEW_UPDATES`` minibatch steps may end far from the best model:
        say so, with the fix (bench/real_tables.py: 399 breast-cancer rows in batches of 128, 4 steps, end
        0.08 below scikit-learn; batch_size=1 recovers 0.05 of it)."""
        updates = int(np.max(np.atleast_1d(getattr(self, "n_iter_", 0) or 0)))
        if 0 < updates < FEW_UPDATES:
            import warnings

            from ..exceptions import user_stacklevel
            warnings.warn(
                f"the pass made only {updates} SGD step(s) ({rows:,} rows in minibatches of "
                f"{self.batch_size}): one pass of this few steps may end far from the best "
                f"model; a smaller batch_size (e.g. batch_size=1) makes more, or fit on more "
                f"rows", NumericalWarning,
                stacklevel=user_stacklevel())

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
        # class weights: their shares from one read of the label column, before the config
        self._prepare_class_weight(plan.source, None, plan.label, plan.noise)
        plan.engine = current_engine()
        p = len(plan.features)
        plan.make_config = lambda rows: self._make_config(v, plan.noise, p, rows)
        plan.config = plan.config_for(plan.rows)
        return plan

    def adopt_pass(self, plan: PassPlan, state: HeadState, telemetry: dict):
        """Set the fitted attributes from the state ``state`` that another driver ran for
        ``plan`` (with ``plan.config``) and its telemetry (``iwpfast.sgd.driver.head_telemetry``
        and the driver's own entries).  Returns self."""
        self._start_pass(plan)
        heads = self._pass.running()
        heads.adopt(list(heads.configs), [state])
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
        feature bound, the noise, the label keep probability and the loss; ``n_rows_total``, else
        a pass of ``STREAM_ROWS`` = 100,000 rows, sets the tail average's start), and kept for
        the whole pass (fitted ``alpha_``, ``learning_rate_``; docs/tuning.md "partial_fit").
        With ``solver='moments'`` each call adds the batch's debiased moments to the pass's sums
        and solves again (alpha chosen on the folds as ``fit`` chooses it), so the model is usable
        after every call and ``finalize`` has nothing to run (``_moments.partial_fit_moments``).

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
            fractional average and for ``schedule="paper"``; with "auto", the tail average's start.
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
        from ._moments import moment_pass, partial_fit_moments, resolve_solver
        if resolve_solver(self, v, partial=True) == "moments" or moment_pass(self) is not None:
            # the batch's moments added to the pass's sums, the model solved again (_moments.py)
            return partial_fit_moments(self, X, y, sample_weight, n_rows_total=n_rows_total,
                                       noise_kw=noise_kw, features=features, label=label,
                                       override=override)
        for name in ("alpha", "learning_rate"):
            if isinstance(v[name], list):
                raise InvalidInputError(
                    f"partial_fit cannot choose {name} from a list: choosing needs a private "
                    "validation over a whole pass, which only fit runs. Pass a number, 'auto' (a "
                    f"value derived from public quantities only), or the {name}_ of a fit")
        if y is None:
            from ._rr import opened, partial_fit_rr, rr_release_spec
            X = opened(X)           # a path opened once: its metadata read once for this call
            rr_spec = rr_release_spec(X)
            if rr_spec is not None:
                # randomized-response codes: their own pass (estimators/_rr.py)
                return partial_fit_rr(self, X, rr_spec, v, n_rows_total)
        if ps.rr is not None:
            raise ReleaseSpecError(
                "partial_fit got a release without randomized-response codes, but the pass started "
                "on one with them; one pass must read one release (call fit to start a new pass)")
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
        quantities only -- the feature bound, the noise, the label keep probability and the loss
        (the pass's rows, ``n_rows_total``, else ``STREAM_ROWS``, set the tail average's start)
        -- never from the data's values.  Resolved once, on the pass's first call (every later call runs with
        the same values); the IWP heads run with the variance cap of "auto", and
        average='auto' tail-averages when ``n_rows_total`` is given (as fit's "auto")."""
        from ..sgd.grid import grid_centre
        rows = STREAM_ROWS if n_rows_total is None else int(n_rows_total)
        grid = self._auto_grid(v, noise, p, rows)
        return grid.make_config(grid_centre(grid.points), n_rows_total)

    def finalize(self):
        """Run the rows ``partial_fit`` carries (fewer than a batch) as the pass's final partial
        batch, as ``fit`` does at the end of its pass."""
        self._check_fitted()
        ps = self._pass
        if getattr(self, "solver_", None) == "moments":
            return self             # nothing carried: every partial_fit call solved its rows
        if ps is not None and ps.rr is not None:
            from ._rr import finalize_rr
            finalize_rr(self)
            return self
        telemetry = None if ps is None or ps.heads is None else ps.heads.finish(ps, current_engine())
        if telemetry is not None:
            self._update_fitted(telemetry)
        return self

    def _start_pass(self, plan: PassPlan):
        """Set the pass's head up from ``plan`` (its config made; the classes found and the hint
        given so far stay) and the fitted attributes that describe it.  A plan with sample weights
        gets a weighted head."""
        ps = self._pass
        cfg, feats, lab, noise, names_in = (plan.made_config(), plan.features, plan.label,
                                            plan.noise, plan.names)
        ps.sample_weight = plan.sample_weight
        if ps.sample_weight is not None and not cfg.weighted:
            import dataclasses
            cfg = dataclasses.replace(cfg, weighted=True)
        # one head, unless the labels made the pass k one-vs-rest heads
        heads = ps.heads if ps.heads is not None else SingleHead(task=self._task)
        heads.start(cfg)
        ps.heads = heads
        ps.features = list(feats)
        ps.label = lab
        ps.noise = noise
        self.n_features_in_ = len(feats)
        if names_in is not None:
            self.feature_names_in_ = np.asarray(names_in, dtype=object)
        self.features_ = list(feats)
        self.label_ = None if lab == ARRAY_LABEL else lab
        # the spec read with the metadata (once, in _prepare_source): not parsed again per pass
        spec = noise.release_spec()
        self.release_spec_ = spec
        # the declared ranges raw data is scaled by (predict & co.; fit(..., ranges=) sets them
        # for raw training data): a release's own, for the features this model reads
        if spec is not None and spec.has_categorical and list(feats) == list(spec.released_features):
            # raw tables (strings) are mapped as the release did: the feature map
            self.feature_map_ = spec.feature_map
            self.feature_bound_ = (math.inf if spec.bound is None or spec.label_only
                                   else float(spec.bound))
        elif spec is not None and all(f in spec.ranges for f in feats):
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
        self.solver_ = "sgd"

    def _run(self, source, kwargs):
        """One call of the streaming driver on ``source`` for this estimator's heads."""
        ps = self._pass
        kw = dict(progress=self.progress, engine=current_engine(), **kwargs)
        if self.chunk_rows is not None:
            kw["chunk_rows"] = int(self.chunk_rows)
        heads = ps.running()
        telemetry = heads.run(ps, source, kw)
        heads.note_step(self)
        self._update_fitted(telemetry)

    def _fit_pass(self, X, y, noise_kw, *, features, label, override, n_rows_total, finish,
                  checkpoint, checkpoint_every, resume, overwrite=False, ranges=None,
                  validation=None, sample_weight=None):
        from ._moments import resolve_solver
        v = self._validated()
        v["solver"] = resolve_solver(self, v, sample_weight=sample_weight, checkpoint=checkpoint,
                                     validation=validation)
        if v["solver"] == "moments":
            from ._moments import check_solver
            check_solver(self, v, sample_weight=sample_weight, checkpoint=checkpoint,
                         validation=validation)
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
                                           resume=resume, overwrite=overwrite),
                                      n_rows_total=n_rows_total)
        except DivergenceError as exc:
            raise self._explained_divergence(exc, plan.source, plan.features, ranges, plan.noise,
                                             v) from None

    def _explained_divergence(self, exc, source, feats, ranges, noise, v):
        """The divergence said for this fit: data that look unscaled name ranges=/--ranges
        first, whatever the step; the learning rate is named only when the user set one."""
        from ..exceptions import DivergenceError
        from ..sgd.state import divergence_advice
        hint = None if ranges is not None or noise.metadata is not None \
            else unscaled_hint(source, feats)
        if exc.config is None or exc.where is None:
            return exc if hint is None else DivergenceError(f"{exc} {hint}")
        step_given = isinstance(v["learning_rate"], float) and self.schedule != "paper"
        parts = [exc.where, hint, divergence_advice(exc.config, step_given)]
        err = DivergenceError(" ".join(p for p in parts if p))
        err.config, err.where = exc.config, exc.where
        return err

    def _fit_prepared(self, plan: PassPlan, y, v, ranges, validation, ckpt, n_rows_total=None):
        """``fit``'s pass once the source is open: the tuned grid or one head.  ``n_rows_total``:
        the declared length of a source that does not know its own (a stream)."""
        plan.rows = _declared_rows(plan.rows, n_rows_total, plan.source)
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
        self._prepare_class_weight(source, mapper, lab, noise)
        if v["solver"] == "moments" and getattr(self, "solver", "sgd") == "auto" \
                and plan.rows is not None and plan.rows < 10:
            v = dict(v, solver="sgd")   # too few rows for the folds that choose alpha
        if v["solver"] == "moments":
            from ._moments import fit_moments_plan
            plan.source = source
            fit_moments_plan(self, plan, mapper, v, validation)
            return self
        tune = not isinstance(v["alpha"], float) or (not isinstance(v["learning_rate"], float)
                                                     and self.schedule != "paper")
        plan.source = source
        if tune:
            self._fit_tuned(plan, mapper, v, validation, scaling, ckpt,
                            declared=n_rows_total is not None)
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
        started_with = list(self._pass.features or [])
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
        if old is None:             # a pass always starts with its noise
            raise RuntimeError("the pass has no noise model")
        if not (np.allclose(old.noise_var, noise.noise_var) and old.label_keep_prob == noise.label_keep_prob
                and old.target_noise_var == noise.target_noise_var):
            raise ReleaseSpecError(
                "partial_fit got data with other noise parameters than the pass started with; one pass "
                "must read one release (call fit to start a new pass)")

    def _update_fitted(self, telemetry: dict) -> None:
        """The fitted attributes from the heads' states and their telemetry (by head name)."""
        self._pass.running().set_fitted(self, telemetry)

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


def released_arrays(X) -> bool:
    """In-memory rows (NumPy arrays, lists, pandas/polars frames): what scikit-learn's model
    selection hands an estimator, and what ``release_spec=`` says are rows of a release."""
    from ._inputs import is_array_like, is_tabular
    return is_array_like(X) or (is_tabular(X) and not type(X).__module__.startswith("pyarrow"))


def _declared_rows(rows: int | None, n_rows_total, source) -> int | None:
    """The pass's length: the source's own, else the declared ``n_rows_total`` (which must then
    be a whole number >= 1, and agree with a length the source knows)."""
    if n_rows_total is None:
        return rows
    if not is_integral(n_rows_total) or int(n_rows_total) < 1:
        raise InvalidInputError(f"n_rows_total={n_rows_total!r} must be the whole number of rows "
                                "of X (>= 1), or None")
    if rows is not None and int(rows) != int(n_rows_total):
        desc = getattr(source, "description", "X")
        raise InvalidInputError(f"n_rows_total={int(n_rows_total)} but {desc} holds {rows} rows; "
                                "leave n_rows_total out for a source that knows its length")
    return int(n_rows_total)


def _remove_served_checkpoint(checkpoint, keep: bool) -> None:
    """A fit's checkpoint once the fit succeeded: removed (the model holds the pass's result),
    unless ``keep_checkpoint=True``."""
    if checkpoint is not None and not keep:
        from ..io.filesystem import remove_file

        remove_file(checkpoint)
