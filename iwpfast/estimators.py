"""scikit-learn-style estimators on top of the single-pass streaming driver.

``IWPClassifier`` and ``IWPRegressor`` follow scikit-learn's conventions without depending on it:
keyword-only hyper-parameters stored exactly as given, validated at ``fit`` time (every message
names the parameter and the fix), fitted attributes ending in ``_``, ``get_params``/``set_params``
(so ``sklearn.base.clone`` works).  ``fit`` on a released file reads the noise parameters from the
release metadata (DESIGN.md section 1), so a model can never be debiased with the wrong sigma.

Everything heavy is imported lazily: importing this module compiles nothing.
"""
from __future__ import annotations

import inspect
import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .exceptions import InvalidInputError, NotFittedError, NumericalWarning, ReleaseSpecError
from .losses import CLASSIFICATION_LOSSES, REGRESSION_LOSSES
from .sgd.schedules import default_radius
from .sgd.state import SCHEDULES, HeadConfig, HeadState

CORRECTIONS = ("iwp", "none")
_HEAD = "model"  # the name of the single head an estimator trains
# which update engine the driver runs: "numba" (the fused kernels) or "reference" (the NumPy
# twin; tests use it to check the facade independently of the kernels)
_ENGINE = "numba"


class RiskEstimate(NamedTuple):
    """An estimate of the clean risk with its standard error (``risk ± 1.96 * stderr`` is a 95% CI)."""

    risk: float
    stderr: float
    n_rows: int


@dataclass
class _NoiseModel:
    """The noise a dataset went through, from its release metadata or from explicit arguments."""

    noise_var: np.ndarray                 # (p,) sigma_j^2 (zeros for clean data)
    label_keep_prob: float | None         # S(eps_y), None for public labels / regression
    target_noise_var: float               # sigma_y^2 (regression)
    feature_bound: float | None           # B of the release (used for the default radius)
    metadata: dict | None                 # the release metadata dict, when read from a file

    @property
    def is_clean(self) -> bool:
        return (not np.any(self.noise_var > 0) and self.label_keep_prob is None
                and self.target_noise_var == 0.0)


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------
def _lazy_driver():
    from .sgd import driver
    return driver


def _is_tabular(obj) -> bool:
    """pandas/polars DataFrame or pyarrow Table/RecordBatch: something with named columns."""
    mod = type(obj).__module__
    return (mod.startswith("pandas") or mod.startswith("polars") or mod.startswith("pyarrow")) \
        and hasattr(obj, "columns")


def _column_names(obj) -> list[str]:
    if hasattr(obj, "column_names"):          # pyarrow
        return list(obj.column_names)
    return [str(c) for c in obj.columns]       # pandas / polars


def _column(obj, name) -> np.ndarray:
    if hasattr(obj, "column_names"):          # pyarrow Table / RecordBatch
        col = obj.column(name)
        if hasattr(col, "combine_chunks"):
            col = col.combine_chunks()
        return col.to_numpy(zero_copy_only=False)
    return np.asarray(obj[name])


def _check_same_noise(given: dict, meta_noise: _NoiseModel, override: bool) -> None:
    """Error when explicit noise parameters contradict a file's release metadata (unless override)."""
    if override:
        return
    problems = []
    if given.get("noise_var") is not None:
        g = np.broadcast_to(np.asarray(given["noise_var"], dtype=np.float64), meta_noise.noise_var.shape)
        if not np.allclose(g, meta_noise.noise_var, rtol=1e-9, atol=0.0):
            problems.append(f"noise_var={np.asarray(given['noise_var']).tolist()} but the release has "
                            f"{meta_noise.noise_var.tolist()}")
    if given.get("label_keep_prob") is not None:
        if meta_noise.label_keep_prob is None or not math.isclose(
                given["label_keep_prob"], meta_noise.label_keep_prob, rel_tol=1e-9):
            problems.append(f"label keep probability {given['label_keep_prob']} (from epsilon_y / "
                            f"label_keep_prob) but the release has {meta_noise.label_keep_prob}")
    if given.get("target_noise_var") is not None:
        if not math.isclose(given["target_noise_var"], meta_noise.target_noise_var, rel_tol=1e-9):
            problems.append(f"target_noise_var={given['target_noise_var']} but the release has "
                            f"{meta_noise.target_noise_var}")
    if given.get("feature_bound") is not None and meta_noise.feature_bound is not None:
        if not math.isclose(given["feature_bound"], meta_noise.feature_bound, rel_tol=1e-9):
            problems.append(f"feature_bound={given['feature_bound']} but the release has "
                            f"{meta_noise.feature_bound}")
    if problems:
        raise ReleaseSpecError(
            "the noise parameters given contradict the file's release metadata: "
            + "; ".join(problems)
            + ". Drop them (the metadata is read automatically) or pass override=True if you are sure.")


def _noise_from_metadata(meta: dict, features: list[str]) -> _NoiseModel:
    """The noise of ``features`` (any subset or order of the released columns: each carries its
    own independent noise) from a release's metadata, via the driver's by-name lookup."""
    try:
        found = _lazy_driver().noise_from_release(meta, features)
        bound = meta.get("feature_bound")
        return _NoiseModel(
            noise_var=found.noise_var,
            label_keep_prob=found.label_keep_prob,
            target_noise_var=found.target_noise_var,
            feature_bound=None if bound is None else float(bound),
            metadata=meta,
        )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ReleaseSpecError):
            raise
        raise ReleaseSpecError(
            f"the release metadata (schema key 'iwpfast.release') is incomplete or corrupt ({exc!r}); "
            "re-create the release with iwpfast.release / `iwpfast release`") from exc


def _explicit_noise(p: int, *, noise_var, epsilon_y, label_keep_prob, target_noise_var,
                    feature_bound, task: str) -> _NoiseModel:
    """Noise model from explicit arguments (arrays); validates each one."""
    if noise_var is None:
        s = np.zeros(p)
    else:
        s = np.asarray(noise_var, dtype=np.float64)
        if s.ndim == 0:
            s = np.full(p, float(s))
        if s.shape != (p,) or not np.all(np.isfinite(s)) or np.any(s < 0):
            raise InvalidInputError(
                f"noise_var must be a non-negative number or a length-{p} vector of per-feature "
                f"variances sigma_j^2 (got {np.asarray(noise_var).tolist()!r}); pass the release's "
                "feature_noise_scale squared")
    keep = None
    if epsilon_y is not None and label_keep_prob is not None:
        raise InvalidInputError("give either epsilon_y or label_keep_prob, not both")
    if epsilon_y is not None:
        if not (isinstance(epsilon_y, numbers.Real) and epsilon_y > 0 and math.isfinite(epsilon_y)):
            raise InvalidInputError(f"epsilon_y must be a positive finite number (got {epsilon_y!r})")
        from .privacy.calibration import label_keep_probability
        keep = label_keep_probability(epsilon_y)
    elif label_keep_prob is not None:
        if not (isinstance(label_keep_prob, numbers.Real) and 0.5 < label_keep_prob <= 1.0):
            raise InvalidInputError(
                f"label_keep_prob must be in (0.5, 1] (got {label_keep_prob!r}): below 1/2 the labels "
                "carry no usable signal")
        keep = None if label_keep_prob == 1.0 else float(label_keep_prob)
    if task == "regression" and keep is not None:
        raise InvalidInputError("epsilon_y / label_keep_prob are for classification; regression "
                                "targets use target_noise_var")
    tvar = 0.0
    if target_noise_var is not None:
        if not (isinstance(target_noise_var, numbers.Real) and target_noise_var >= 0):
            raise InvalidInputError(f"target_noise_var must be >= 0 (got {target_noise_var!r})")
        tvar = float(target_noise_var)
    if feature_bound is not None and not (isinstance(feature_bound, numbers.Real) and feature_bound > 0):
        raise InvalidInputError(f"feature_bound must be a positive number (got {feature_bound!r})")
    return _NoiseModel(s, keep, tvar, None if feature_bound is None else float(feature_bound), None)


# --------------------------------------------------------------------------------------------
# the base class
# --------------------------------------------------------------------------------------------
class _IWPBase:
    _task = "classification"
    _losses: tuple[str, ...] = CLASSIFICATION_LOSSES

    # ---- scikit-learn parameter protocol (implemented here so scikit-learn stays optional) -----
    @classmethod
    def _get_param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values()
                      if p.name != "self" and p.kind == p.KEYWORD_ONLY)

    def _store_params(self, init_locals: dict[str, Any]) -> None:
        """Store each keyword of ``__init__`` as given (``self._store_params(locals())``): scikit-learn's
        rule that ``__init__`` only records its parameters, without listing each one twice."""
        for name in self._get_param_names():
            setattr(self, name, init_locals[name])

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params):
        valid = self._get_param_names()
        for key, value in params.items():
            if key not in valid:
                raise InvalidInputError(
                    f"{type(self).__name__} has no parameter {key!r}; valid parameters: {', '.join(valid)}")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        changed = [f"{k}={v!r}" for k, v in self.get_params().items()
                   if not (isinstance(v, type(defaults.get(k))) and v == defaults.get(k))]
        return f"{type(self).__name__}({', '.join(changed)})"

    def __sklearn_tags__(self):  # scikit-learn >= 1.6 asks estimators for their tags
        from sklearn.utils import ClassifierTags, RegressorTags, Tags, TargetTags  # noqa: F401
        from sklearn.base import BaseEstimator
        tags = BaseEstimator.__sklearn_tags__(self)  # type: ignore[arg-type]
        if self._task == "classification":
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags(multi_class=False)
        else:
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
        tags.target_tags.required = True
        return tags

    @property
    def _estimator_type(self):
        return "classifier" if self._task == "classification" else "regressor"

    # ---- validation --------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet; call fit(...) (or load a saved model "
                "with iwpfast.load) before using it")

    def _validated(self) -> dict[str, Any]:
        """Check every hyper-parameter; return them normalised.  Messages name the fix."""
        v: dict[str, Any] = {}
        if self.loss not in self._losses:
            raise InvalidInputError(
                f"unknown loss {self.loss!r} for {type(self).__name__}; choose one of "
                f"{', '.join(map(repr, self._losses))}")
        v["loss"] = self.loss
        if self.correction not in CORRECTIONS:
            raise InvalidInputError(
                f"unknown correction {self.correction!r}; choose 'iwp' (debiased) or 'none' (naive SGD)")
        if self.schedule not in SCHEDULES:
            raise InvalidInputError(
                f"unknown schedule {self.schedule!r}; choose one of {', '.join(map(repr, SCHEDULES))}")
        for name in ("alpha", "learning_rate"):
            val = getattr(self, name)
            ok = isinstance(val, numbers.Real) and not isinstance(val, bool) and math.isfinite(val)
            if not ok or val < 0 or (name == "learning_rate" and val == 0):
                raise InvalidInputError(f"{name} must be a finite {'positive' if name == 'learning_rate' else 'non-negative'} "
                                        f"number (got {val!r})")
        if self.schedule == "paper" and self.alpha <= 0:
            raise InvalidInputError("schedule='paper' needs alpha > 0 (the strong convexity mu = alpha)")
        v["alpha"] = float(self.alpha)
        v["learning_rate"] = float(self.learning_rate)
        if self.mu is not None and not (isinstance(self.mu, numbers.Real) and self.mu >= 0):
            raise InvalidInputError(f"mu must be None (= alpha) or a non-negative number (got {self.mu!r})")
        v["mu"] = float(self.alpha if self.mu is None else self.mu)
        if not (isinstance(self.batch_size, numbers.Integral) and not isinstance(self.batch_size, bool)
                and self.batch_size >= 1):
            raise InvalidInputError(f"batch_size must be a positive integer (got {self.batch_size!r})")
        v["batch_size"] = int(self.batch_size)
        for name in ("radius", "variance_cap"):
            val = getattr(self, name)
            if val is not None and not (isinstance(val, numbers.Real) and val > 0):
                raise InvalidInputError(f"{name} must be None or a positive number (got {val!r}); "
                                        f"use None for the default")
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise InvalidInputError(f"fit_intercept must be True or False (got {self.fit_intercept!r})")
        avg = self.average
        if not (avg is False or avg is True or avg == "tail"
                or (isinstance(avg, numbers.Integral) and not isinstance(avg, bool) and avg >= 0)
                or (isinstance(avg, float) and 0.0 <= avg < 1.0)):
            raise InvalidInputError(
                f"average must be False, True (all iterates), 'tail' (the last half), a start fraction "
                f"in [0, 1) or a start update number >= 0 (got {avg!r})")
        if self.chunk_rows is not None and not (isinstance(self.chunk_rows, numbers.Integral)
                                                and self.chunk_rows >= 1):
            raise InvalidInputError(f"chunk_rows must be None or a positive integer (got {self.chunk_rows!r})")
        if not isinstance(self.shuffle, (bool, np.bool_)):
            raise InvalidInputError(f"shuffle must be True or False (got {self.shuffle!r})")
        v["truncation"] = self._validated_truncation()
        return v

    def _validated_truncation(self):
        return 0

    def _average_start(self, n_rows: int | None, batch_size: int) -> int:
        avg = self.average
        if avg is False:
            return -1
        if avg is True:
            return 0
        if isinstance(avg, numbers.Integral):
            return int(avg)
        frac = 0.5 if avg == "tail" else float(avg)
        if n_rows is None:
            raise InvalidInputError(
                f"average={avg!r} is a fraction of the pass, but the number of rows is unknown for "
                "this source; pass n_rows_total=... or give the first averaged update as an integer")
        n_updates = -(-int(n_rows) // batch_size)
        return int(math.floor(frac * n_updates))

    # ---- input handling ------------------------------------------------------------------------
    def _prepare_source(self, X, y, *, noise_kw: dict, features, label, override: bool):
        """Turn (X, y) or a source into (source for the driver, features, label, noise, n_rows, names_in).

        Arrays become a dict of feature-major columns, so arrays and files go through the same
        driver and give the same result.
        """
        if y is not None:
            return self._prepare_arrays(X, y, noise_kw=noise_kw, features=features)
        from .io.sources import open_source
        src = open_source(X)
        meta = src.release_metadata
        names = list(src.full_schema.names)
        if meta is not None:
            feats = list(features) if features is not None else list(meta.get("features") or [])
            lab = label if label is not None else meta.get("label")
            noise = _noise_from_metadata(meta, feats)
            _check_same_noise(noise_kw, noise, override)
            if override:
                noise = self._override_noise(noise, noise_kw)
        else:
            if features is None:
                raise InvalidInputError(
                    f"the source has no release metadata (it is not an iwpfast release), so its feature "
                    f"and label columns are unknown: name them with features=[...], label=... (CLI: "
                    f"--features A B --label Y; columns: {', '.join(names)}), and if the data is private "
                    "give its noise with noise_var=..., epsilon_y=... (CLI: --noise-var, --epsilon-y)")
            feats = list(features)
            lab = label
            noise = _explicit_noise(len(feats), task=self._task, **noise_kw)
        if lab is None:
            raise InvalidInputError(f"the label column is unknown: pass label=... (CLI: --label; "
                                    f"columns: {', '.join(names)})")
        missing = [c for c in feats if c not in names]
        if missing:
            raise InvalidInputError(
                f"feature column(s) {', '.join(map(repr, missing))} not in the source (its columns: "
                f"{', '.join(names)}); pass features=[...] naming existing columns (CLI: --features)")
        if lab not in names:
            raise InvalidInputError(
                f"label column {lab!r} not in the source (its columns: {', '.join(names)}); pass "
                "label=... naming the label column (CLI: --label)")
        return src, feats, lab, noise, src.num_rows, None

    def _override_noise(self, noise: _NoiseModel, kw: dict) -> _NoiseModel:
        p = len(noise.noise_var)
        given = _explicit_noise(p, task=self._task, **kw)
        return _NoiseModel(
            noise_var=given.noise_var if kw.get("noise_var") is not None else noise.noise_var,
            label_keep_prob=(given.label_keep_prob if (kw.get("epsilon_y") is not None
                                                       or kw.get("label_keep_prob") is not None)
                             else noise.label_keep_prob),
            target_noise_var=(given.target_noise_var if kw.get("target_noise_var") is not None
                              else noise.target_noise_var),
            feature_bound=given.feature_bound or noise.feature_bound,
            metadata=noise.metadata)

    def _prepare_arrays(self, X, y, *, noise_kw: dict, features):
        names_in = None
        if _is_tabular(X):
            names_in = _column_names(X)
            if features is not None:
                names_in = list(features)
            cols = [np.asarray(_column(X, c), dtype=np.float64) for c in names_in]
            n = len(cols[0]) if cols else 0
        else:
            Xa = np.asarray(X)
            if Xa.ndim != 2:
                raise InvalidInputError(
                    f"X must be 2-D (rows, features), got shape {Xa.shape}; reshape with X.reshape(-1, 1) "
                    "for a single feature")
            if not np.issubdtype(Xa.dtype, np.number):
                raise InvalidInputError(f"X must be numeric (got dtype {Xa.dtype}); encode non-numeric "
                                        "columns as numbers first")
            n = Xa.shape[0]
            cols = list(np.ascontiguousarray(Xa.T, dtype=np.float64))
        if len(cols) == 0:
            raise InvalidInputError("X has no feature columns; pass at least one feature")
        ya = np.asarray(y)
        if ya.ndim != 1 and not (ya.ndim == 2 and ya.shape[1] == 1):
            raise InvalidInputError(f"y must be 1-D with one value per row (got shape {ya.shape})")
        ya = ya.reshape(-1)
        if ya.shape[0] != n:
            raise InvalidInputError(f"X has {n} rows but y has {ya.shape[0]}; pass one label per row")
        if n == 0:
            raise InvalidInputError("X has 0 rows; fit needs at least one row")
        for j, c in enumerate(cols):
            if not np.all(np.isfinite(c)):
                bad = int(np.flatnonzero(~np.isfinite(c))[0])
                raise InvalidInputError(
                    f"feature {(names_in or [f'x{i}' for i in range(len(cols))])[j]!r} has a non-finite "
                    f"value at row {bad}; drop or impute such rows before fitting")
        p = len(cols)
        feats = list(names_in) if names_in is not None else [f"x{j}" for j in range(p)]
        lab = "__label__"
        noise = _explicit_noise(p, task=self._task, **noise_kw)
        yv = self._encode_targets_fit(ya)
        if self.shuffle:
            perm = np.random.default_rng(self.random_state).permutation(n)
            cols = [c[perm] for c in cols]
            yv = yv[perm]
        data = {f: c for f, c in zip(feats, cols)}
        data[lab] = yv
        return data, feats, lab, noise, n, names_in

    def _encode_targets_fit(self, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    # ---- configuration of the single head --------------------------------------------------
    def _make_config(self, v: dict, noise: _NoiseModel, p: int, n_rows: int | None) -> HeadConfig:
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
        if v["loss"] == "logistic" and mode == "iwp":
            truncation = self._resolve_truncation(truncation, noise, radius, cap)
        return HeadConfig(
            loss=v["loss"], mode=mode, n_features=p,
            noise_var=(np.zeros(p) if mode == "clean" else noise.noise_var.astype(np.float64)),
            label_keep_prob=noise.label_keep_prob if mode != "clean" else None,
            target_noise_var=noise.target_noise_var,
            truncation=int(truncation), batch_size=v["batch_size"], alpha=v["alpha"],
            schedule=self.schedule, learning_rate=v["learning_rate"], mu=v["mu"],
            radius=float(radius), variance_cap=cap, fit_intercept=bool(self.fit_intercept),
            average_start=self._average_start(n_rows, v["batch_size"]), trace_every=0)

    def _resolve_truncation(self, truncation, noise, radius, cap):
        return truncation

    # ---- fitting -----------------------------------------------------------------------------
    def fit(self, X, y=None, *, noise_var=None, epsilon_y=None, label_keep_prob=None,
            target_noise_var=None, feature_bound=None, features=None, label=None,
            override: bool = False, checkpoint=None, checkpoint_every=None, resume: bool = False):
        """Fit in one pass over ``X``.

        ``fit(source)``: a Parquet/IPC/CSV path, directory, pyarrow Table/Dataset/RecordBatchReader
        or DataFrame holding a release; the noise parameters, feature and label names come from its
        release metadata (give ``features=``/``label=`` to select others).
        ``fit(X, y, noise_var=..., epsilon_y=...)``: in-memory arrays with explicit noise parameters
        (none = clean data).  Parameters that contradict a file's metadata are an error unless
        ``override=True``.
        """
        for attr in list(vars(self)):
            if attr.endswith("_") and not attr.startswith("_"):
                delattr(self, attr)
        self._state = None
        return self._fit_pass(X, y, dict(noise_var=noise_var, epsilon_y=epsilon_y,
                                          label_keep_prob=label_keep_prob,
                                          target_noise_var=target_noise_var, feature_bound=feature_bound),
                              features=features, label=label, override=override, n_rows_total=None,
                              finish=True, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                              resume=resume)

    def partial_fit(self, X, y=None, *, classes=None, n_rows_total=None, noise_var=None,
                    epsilon_y=None, label_keep_prob=None, target_noise_var=None, feature_bound=None,
                    features=None, label=None, override: bool = False):
        """Continue the same single pass with more rows (same step counter, schedule and average).

        X, y: in-memory arrays (or a small source, read into memory).  Rows that do not fill a
        whole batch are held until the next call, so ``partial_fit`` over any split of the rows
        gives exactly the model of one ``fit`` over all of them once ``finalize()`` has run the
        held rows as the final partial batch (as ``fit`` does).  ``n_rows_total`` (the rows of
        the whole pass) is needed on the first call for ``average='tail'`` or a fractional average
        and for ``schedule='paper'``.
        """
        if classes is not None and self._task == "classification":
            self._classes_hint = np.asarray(classes)
        noise_kw = dict(noise_var=noise_var, epsilon_y=epsilon_y, label_keep_prob=label_keep_prob,
                        target_noise_var=target_noise_var, feature_bound=feature_bound)
        v = self._validated()
        continuing = getattr(self, "_state", None) is not None and hasattr(self, "coef_")
        if y is None:
            src, feats, lab, noise, _, _ = self._prepare_source(
                X, None, noise_kw=noise_kw, features=features, label=label, override=override)
            cols = {f: [] for f in [*feats, lab]}
            for batch in src.batches([*feats, lab]):
                for c in cols:
                    cols[c].append(np.asarray(batch.column(c).to_numpy(zero_copy_only=False)))
            data = {c: np.concatenate(v_) if v_ else np.zeros(0) for c, v_ in cols.items()}
            data[lab] = self._encode_targets_stream(data[lab])
            names_in = None
            if self._task == "classification" and not hasattr(self, "classes_"):
                self._pending_classes = getattr(self, "_pending_classes", np.array([-1, 1]))
        else:
            data, feats, lab, noise, _, names_in = self._prepare_arrays(X, y, noise_kw=noise_kw,
                                                                        features=features)
        if continuing:
            self._check_same_setup(feats, noise)
        else:
            if n_rows_total is None and (self.schedule == "paper" or (
                    self.average not in (False, True) and not isinstance(self.average, numbers.Integral))):
                raise InvalidInputError(
                    f"partial_fit with average={self.average!r} / schedule={self.schedule!r} needs the "
                    "total number of rows of the whole pass: pass n_rows_total=... on the first call")
            cfg = self._make_config(v, noise, len(feats), n_rows_total)
            if cfg.schedule == "paper":
                from .sgd.schedules import resolve_paper_schedule
                cfg = resolve_paper_schedule(cfg, int(n_rows_total), feature_bound=noise.feature_bound)
            self._start_pass(cfg, feats, lab, noise, names_in)
            self._held = None
        # prepend the rows held back last time; pass on whole batches only, hold the rest
        held = getattr(self, "_held", None)
        if held is not None:
            data = {c: np.concatenate([held[i], np.asarray(data[c], dtype=np.float64)])
                    for i, c in enumerate([*self._features, self._label])}
        else:
            data = {c: np.asarray(data[c], dtype=np.float64) for c in [*feats, lab]}
        n = len(data[lab])
        n_full = n - n % self._config.batch_size
        self._held = [data[c][n_full:].copy() for c in [*self._features, self._label]]
        if n_full > 0:
            self._run({c: data[c][:n_full] for c in data}, {})
        elif not continuing:
            self._state = HeadState.new(self._config)
            self._update_fitted(self._state, {})
        return self

    def finalize(self):
        """Run the rows held back by ``partial_fit`` (fewer than a batch) as the final partial batch."""
        self._check_fitted()
        held = getattr(self, "_held", None)
        if held is not None and len(held[-1]):
            self._run({c: held[i] for i, c in enumerate([*self._features, self._label])}, {})
        self._held = None
        return self

    def _start_pass(self, cfg, feats, lab, noise, names_in):
        self._config = cfg
        self._features = list(feats)
        self._label = lab
        self._noise = noise
        self._state = None
        self._held = None  # rows partial_fit holds back (fewer than a batch)
        self.n_features_in_ = len(feats)
        if names_in is not None:
            self.feature_names_in_ = np.asarray(names_in, dtype=object)
        self.features_ = list(feats)
        self.label_ = None if lab == "__label__" else lab
        spec = None
        if noise.metadata is not None:
            from .privacy import ReleaseSpec
            spec = ReleaseSpec.from_metadata(noise.metadata)
        self.release_spec_ = spec
        self.noise_var_ = np.asarray(cfg.noise_var, dtype=np.float64)
        self.label_keep_prob_ = cfg.label_keep_prob
        self.target_noise_var_ = cfg.target_noise_var
        self.radius_ = cfg.radius
        self.truncation_ = cfg.truncation
        self.mode_ = cfg.mode

    def _run(self, source, kwargs):
        """One call of the streaming driver on ``source`` for this estimator's head."""
        driver = _lazy_driver()
        head = driver.Head(_HEAD, self._config, list(self._features), self._label)
        kw = dict(progress=self.progress, engine=_ENGINE, **kwargs)
        if self.chunk_rows is not None:
            kw["chunk_rows"] = int(self.chunk_rows)
        if self._state is not None:
            kw["states"] = {_HEAD: self._state}
        if self._noise.feature_bound is not None:
            kw["feature_bound"] = self._noise.feature_bound
        result = driver.fit_stream(source, [head], **kw)
        self._config = result.configs.get(_HEAD, self._config)  # 'paper' resolved to its step
        self._state = result.states[_HEAD]
        self._update_fitted(self._state, dict(result.telemetry.get(_HEAD, {})))

    def _fit_pass(self, X, y, noise_kw, *, features, label, override, n_rows_total, finish,
                  checkpoint, checkpoint_every, resume):
        v = self._validated()
        source, feats, lab, noise, n_rows, names_in = self._prepare_source(
            X, y, noise_kw=noise_kw, features=features, label=label, override=override)
        cfg = self._make_config(v, noise, len(feats), n_rows)
        self._start_pass(cfg, feats, lab, noise, names_in)
        if y is None:
            source = self._label_mapped_source(source, lab)
        kwargs = {}
        if checkpoint is not None:
            kwargs.update(checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume)
        self._run(source, kwargs)
        return self

    def _label_mapped_source(self, source, lab):
        return source

    def _check_same_setup(self, feats, noise: _NoiseModel) -> None:
        if list(feats) != list(self._features):
            raise InvalidInputError(
                f"partial_fit got features {list(feats)} but the pass started with {self._features}; "
                "keep the same columns in the same order (or call fit to start a new pass)")
        old = self._noise
        if not (np.allclose(old.noise_var, noise.noise_var) and old.label_keep_prob == noise.label_keep_prob
                and old.target_noise_var == noise.target_noise_var):
            raise ReleaseSpecError(
                "partial_fit got data with other noise parameters than the pass started with; one pass "
                "must read one release (call fit to start a new pass)")

    def _telemetry_from_state(self, state: HeadState) -> dict:
        from .sgd.state import TELEMETRY_FIELDS
        return {k: float(state.telemetry[i]) for i, k in enumerate(TELEMETRY_FIELDS)}

    def _update_fitted(self, state: HeadState, telemetry: dict) -> None:
        averaged = self._config.average_start >= 0
        theta, b = state.coef(averaged)
        self.coef_ = theta if self._task == "regression" else theta.reshape(1, -1)
        self.intercept_ = np.array([b]) if self._task == "classification" else float(b)
        if not self.fit_intercept:
            self.intercept_ = np.zeros(1) if self._task == "classification" else 0.0
        base = self._telemetry_from_state(state)
        base.update(telemetry)
        self.telemetry_ = base
        self.n_rows_seen_ = int(base["rows_seen"]) + state.carry_n
        self.n_iter_ = state.step

    # ---- prediction ----------------------------------------------------------------------------
    def _theta_b(self) -> tuple[np.ndarray, float]:
        self._check_fitted()
        theta = np.asarray(self.coef_, dtype=np.float64).reshape(-1)
        b = float(np.asarray(self.intercept_).reshape(-1)[0])
        return theta, b

    def _feature_columns(self, X, features=None):
        """Yield lists of feature columns (1-D float64 arrays) of X, checking them against the fit.

        X: an (n, p) array, or anything with named columns (DataFrame, pyarrow Table, a file path or
        any source open_source accepts; streamed batch by batch).  ``features``: the columns of X to
        use, in the model's feature order (default: the model's feature names).
        """
        self._check_fitted()
        p = self.n_features_in_
        model_names = list(self.features_)
        if isinstance(X, np.ndarray) or (isinstance(X, (list, tuple)) and X and not isinstance(X[0], str)):
            Xa = np.asarray(X)
            if Xa.ndim != 2 or Xa.shape[1] != p:
                raise InvalidInputError(
                    f"X has shape {Xa.shape} but the model was fitted on {p} features {model_names}; "
                    f"pass an (n, {p}) array with the columns in that order")
            yield [np.asarray(Xa[:, j], dtype=np.float64) for j in range(p)]
            return
        wanted = self._wanted_features(features)
        from .io.sources import open_source
        src = open_source(X)
        self._check_names(list(src.full_schema.names), wanted, model_names)
        for batch in src.batches(wanted):
            yield [np.asarray(batch.column(c).to_numpy(zero_copy_only=False), dtype=np.float64)
                   for c in wanted]

    def _raw_to_released_scale(self, cols: list[np.ndarray]) -> list[np.ndarray]:
        """Map raw clean columns into the release's feature space: the declared ranges onto
        [-1, 1], then the L2 clip at the bound (what the release did before adding noise)."""
        spec = getattr(self, "release_spec_", None)
        if spec is None or not hasattr(spec, "scaler_ranges"):
            raise InvalidInputError(
                "raw=True needs a model fitted on a release file (its ranges scale the raw columns); "
                "this model has no release spec: pass data already in the training scale")
        from .privacy import RangeScaler
        scaler = RangeScaler(list(spec.features), spec.scaler_ranges())
        out = []
        for j, c in enumerate(cols):
            o = np.empty(len(c))
            scaler.scale_into(j, c, o)
            out.append(o)
        norm2 = np.zeros(len(cols[0]))
        for o in out:
            norm2 += o * o
        factor = np.minimum(1.0, float(spec.bound) / np.sqrt(np.maximum(norm2, 1e-300)))
        return [o * factor for o in out]

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
        """``b + sum_j theta_j * cols[j]``: one vectorized pass per feature column."""
        u = np.full(len(cols[0]), b)
        for t, c in zip(theta, cols):
            u += t * c
        return u

    def decision_function(self, X, *, features=None, raw=False) -> np.ndarray:
        """The linear score ``u = theta^T x + b`` for every row of X.

        ``raw=True``: X holds clean data in its original units (e.g. a hold-out of the file that
        was released); it is scaled and clipped as the release did before the score is taken.
        """
        theta, b = self._theta_b()
        out = []
        for cols in self._feature_columns(X, features):
            if raw:
                cols = self._raw_to_released_scale(cols)
            out.append(self._linear_scores(theta, b, cols))
        return np.concatenate(out) if out else np.zeros(0)

    def _clean_xy(self, X, y, features, label, raw):
        """(scores, targets in the kernel's encoding) on clean data: arrays or a source with a label."""
        if y is not None:
            return (self.decision_function(X, features=features, raw=raw),
                    self._encode_targets_stream(np.asarray(y).reshape(-1)))
        self._check_fitted()
        from .io.sources import open_source
        src = open_source(X)
        names = list(src.full_schema.names)
        lab = label or self.label_
        if lab is None or lab not in names:
            what = "which column is the label is unknown" if lab is None else f"the data has no label column {lab!r}"
            raise InvalidInputError(f"{what}: pass label=... naming it (CLI: --label; columns: {', '.join(names)})")
        wanted = self._wanted_features(features)
        self._check_names(names, wanted, list(self.features_))
        theta, b = self._theta_b()
        us, ys = [], []
        for batch in src.batches([*wanted, lab]):
            cols = [np.asarray(batch.column(c).to_numpy(zero_copy_only=False), dtype=np.float64)
                    for c in wanted]
            if raw:
                cols = self._raw_to_released_scale(cols)
            us.append(self._linear_scores(theta, b, cols))
            ys.append(self._encode_targets_stream(batch.column(lab).to_numpy(zero_copy_only=False)))
        return np.concatenate(us), np.concatenate(ys)

    def _clean_score_and_risk(self, X, y=None, *, features=None, label=None, raw=False):
        """``(score(...), risk(...))`` from one pass over X (the CLI's ``evaluate``)."""
        u, yv = self._clean_xy(X, y, features, label, raw)
        return self._score_from(u, yv), self._risk_from(u, yv)

    def score(self, X, y=None, *, features=None, label=None, raw=False) -> float:
        """Accuracy (classifier) or R^2 (regressor) on clean data: arrays ``(X, y)`` or a source
        with the label column."""
        return self._score_from(*self._clean_xy(X, y, features, label, raw))

    def risk(self, X, y=None, *, features=None, label=None, raw=False) -> float:
        """Mean (unregularized) loss on clean data, the loss the model minimizes."""
        return self._risk_from(*self._clean_xy(X, y, features, label, raw))

    # ---- private validation --------------------------------------------------------------------
    def private_risk(self, X, y=None, *, noise_var=None, epsilon_y=None, label_keep_prob=None,
                     target_noise_var=None, features=None, label=None, override=False) -> RiskEstimate:
        """Unbiased estimate of the *clean* risk from a *private* hold-out, with its standard error.

        Each row contributes the IWP loss (DESIGN.md section 2) at the fitted (theta, b), whose
        expectation over the release noise is the clean loss; the estimate is their mean and the
        standard error is their sample sd / sqrt(n) (rows are independent).  For a release file the
        noise parameters come from its metadata.  The logistic loss uses the fitted truncation K
        (its estimate is then unbiased up to the K-term truncation bias).
        """
        from .estimates import glm_loss_values
        theta, b = self._theta_b()
        kw = dict(noise_var=noise_var, epsilon_y=epsilon_y, label_keep_prob=label_keep_prob,
                  target_noise_var=target_noise_var, feature_bound=None)
        source, feats, lab, noise, _, _ = self._prepare_source(
            X, y, noise_kw=kw, features=features, label=label, override=override)
        if len(feats) != self.n_features_in_:
            raise InvalidInputError(
                f"the hold-out has {len(feats)} features {feats}, the model {self.n_features_in_} "
                f"{self.features_}; pass features=[...] in the model's order")
        s = noise.noise_var
        tau = 0.5 * float(np.dot(s, theta * theta))
        keep = noise.label_keep_prob
        weight = 1.0 if keep is None else keep / (2.0 * keep - 1.0)  # S~ = S/(2S-1) = 1/(1-e^-eps)
        total = 0.0
        total_sq = 0.0
        n = 0
        for cols, yv in self._iter_xy(source, feats, lab):
            u = self._linear_scores(theta, b, cols)
            if self._task == "regression":
                r = u - yv
                vals = 0.5 * r * r - tau - 0.5 * noise.target_noise_var
            else:
                vals = glm_loss_values(self.loss, yv * u, tau, weight, int(getattr(self, "truncation_", 0)))
            total += float(vals.sum())
            total_sq += float(np.dot(vals, vals))
            n += len(vals)
        if n == 0:
            raise InvalidInputError("the private hold-out has no rows; pass a release with at least one row")
        mean = total / n
        var = max(total_sq / n - mean * mean, 0.0) * n / max(n - 1, 1)
        return RiskEstimate(mean, math.sqrt(var / n), n)

    def _iter_xy(self, source, feats, lab):
        """Yield (feature columns, targets in the kernel's encoding) per batch of a prepared source."""
        if isinstance(source, dict):
            yield [np.asarray(source[f], dtype=np.float64) for f in feats], np.asarray(source[lab], np.float64)
            return
        for batch in source.batches([*feats, lab]):
            cols = [np.asarray(batch.column(f).to_numpy(zero_copy_only=False), dtype=np.float64)
                    for f in feats]
            yield cols, self._encode_targets_stream(batch.column(lab).to_numpy(zero_copy_only=False))

    def _encode_targets_stream(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(y, dtype=np.float64)

    # ---- persistence ---------------------------------------------------------------------------
    def save(self, path) -> None:
        """Write the fitted model as a small self-describing JSON file (see iwpfast.load)."""
        from .model_io import save_model
        save_model(self, path)


# --------------------------------------------------------------------------------------------
class IWPClassifier(_IWPBase):
    """Linear classifier trained in one pass by IWP-SGD on a local-DP release (labels in two classes).

    Parameters (keyword-only; stored as given, validated at fit time):
    loss: "exponential" (exact correction) | "logistic" (truncated series, see ``truncation``) |
        "quadratic".
    correction: "iwp" (unbiased gradients) | "none" (naive SGD on the noisy data).
    alpha: l2 strength lambda (the regularized risk is alpha-strongly convex).
    learning_rate: gamma0.  schedule: "constant" | "inverse" (gamma0/(1+mu gamma0 t)) | "paper".
    mu: mu of the inverse schedule (None = alpha).
    batch_size: rows per update (the last partial batch is used).
    radius: projection radius on theta (None = feature_bound * |f'(0)| / alpha, DESIGN.md section 2).
    variance_cap: cap on sigma^2 |theta|^2 (None = no cap); keeps large steps stable.
    average: False | True (all iterates) | "tail" (last half) | start fraction | start update number.
    fit_intercept: learn a noise-free intercept.
    truncation: K of the logistic IWP series, or "auto" (the MSE-optimal K at the noise level).
    chunk_rows: rows per chunk read from the source (None = the driver's default).
    shuffle, random_state: permute in-memory arrays once before the pass (files are read in order).
    progress: show a progress bar.
    """

    _task = "classification"
    _losses = CLASSIFICATION_LOSSES

    def __init__(self, *, loss="exponential", correction="iwp", alpha=1.0, learning_rate=1e-3,
                 schedule="constant", mu=None, batch_size=128, radius=None, variance_cap=None,
                 average=False, fit_intercept=True, truncation=2, chunk_rows=None, shuffle=False,
                 random_state=None, progress=True):
        self._store_params(locals())

    def _validated_truncation(self):
        t = self.truncation
        if t == "auto":
            return "auto"
        if not (isinstance(t, numbers.Integral) and not isinstance(t, bool) and 0 <= t <= 20):
            raise InvalidInputError(f"truncation must be an integer K in 0..20 or 'auto' (got {t!r})")
        return int(t)

    def _resolve_truncation(self, truncation, noise, radius, cap):
        """'auto' -> the MSE-optimal K at the largest tau the pass can reach; warn if K is above it."""
        from .transforms import choose_truncation
        energy = float(np.max(noise.noise_var)) * radius ** 2 if math.isfinite(radius) else math.inf
        energy = min(energy, cap)
        if not math.isfinite(energy):
            # without a radius or a cap tau is unbounded; judge K at the noise of a unit-norm theta
            energy = float(np.max(noise.noise_var))
        tau = 0.5 * energy
        best = int(choose_truncation(tau, self.batch_size))
        if truncation == "auto":
            return best
        if truncation > best:
            warnings.warn(
                f"truncation={truncation} is too high for this noise level (tau up to {tau:.3g}): the "
                f"series' variance explodes; the MSE-optimal K is {best} (use truncation={best} or 'auto')",
                NumericalWarning, stacklevel=4)
        return truncation

    def _encode_targets_fit(self, y: np.ndarray) -> np.ndarray:
        classes = np.unique(y)
        hint = getattr(self, "_classes_hint", None)
        if hint is not None:
            bad = np.setdiff1d(classes, hint)
            if bad.size:
                raise InvalidInputError(f"y has labels {bad.tolist()} not in classes={hint.tolist()}; pass "
                                        "classes=[...] naming both labels, or recode y")
            classes = np.unique(hint)
        if hasattr(self, "classes_") and getattr(self, "_state", None) is not None:
            bad = np.setdiff1d(np.unique(y), self.classes_)
            if bad.size:
                raise InvalidInputError(
                    f"y has labels {bad.tolist()} unseen in the classes {self.classes_.tolist()} of this pass")
            classes = self.classes_
        if classes.size > 2:
            raise InvalidInputError(
                f"IWPClassifier is binary but y has {classes.size} classes {classes.tolist()[:10]}; "
                "encode the task as two classes (one-vs-rest)")
        if classes.size == 1:
            if set(classes.tolist()) <= {-1, 1}:
                classes = np.array([-1, 1])
            elif set(classes.tolist()) <= {0, 1}:
                classes = np.array([0, 1])
            else:
                raise InvalidInputError(
                    f"y has a single class {classes.tolist()}; pass classes=[negative, positive] to partial_fit "
                    "or data with both classes")
        self._pending_classes = classes
        return np.where(y == classes[1], 1.0, -1.0)

    def _label_mapped_source(self, source, lab):
        """Released labels are +-1 already; other label columns ({0, 1}) are mapped batch by batch."""
        meta = source.release_metadata
        if meta is not None and meta.get("label_encoding", "pm1") == "pm1":
            self._pending_classes = np.array([-1, 1])
            return source
        import pyarrow as pa
        first: dict = {}

        def batches():
            for batch in source.batches():
                yv = batch.column(lab).to_numpy(zero_copy_only=False)
                enc = self._encode_targets_stream(yv, first, column=lab)
                idx = batch.schema.get_field_index(lab)
                yield batch.set_column(idx, lab, pa.array(enc))

        schema = source.schema
        idx = schema.get_field_index(lab)
        schema = schema.set(idx, pa.field(lab, pa.float64()))
        return pa.RecordBatchReader.from_batches(schema, batches())

    def _encode_targets_stream(self, y, first=None, column=None):
        """Map streamed labels to +-1: {-1, 1} as is, {0, 1} with 0 -> -1 (or the fitted classes)."""
        y = np.asarray(y)
        classes = getattr(self, "classes_", None)
        if classes is None:
            classes = getattr(self, "_pending_classes", None)
        vals = np.unique(y)
        if classes is not None and np.isin(vals, classes).all():
            if first is not None:
                first["classes"] = classes
            return np.where(y == classes[1], 1.0, -1.0)
        if first is not None and "classes" in first:
            classes = first["classes"]
        elif np.isin(vals, [-1, 1]).all():
            classes = np.array([-1, 1])
        elif np.isin(vals, [0, 1]).all():
            classes = np.array([0, 1])
        else:
            where = f"label column {column!r}" if column is not None else "the labels"
            raise InvalidInputError(
                f"{where} has values {vals.tolist()[:10]}, not {{-1, 1}} or {{0, 1}}: a streamed label "
                "must be one of these encodings; recode it (e.g. 1 for the positive class, 0 else), or "
                "fit on arrays, fit(X, y), which maps any two classes")
        if not np.isin(vals, classes).all():
            raise InvalidInputError(
                f"label values {vals.tolist()[:10]} mix encodings (classes so far {classes.tolist()}); "
                "use one encoding, {-1, 1} or {0, 1}, for the whole label column")
        if first is not None:
            first["classes"] = classes
        self._pending_classes = classes
        return np.where(y == classes[1], 1.0, -1.0)

    def _update_fitted(self, state, telemetry):
        super()._update_fitted(state, telemetry)
        if not hasattr(self, "classes_"):
            self.classes_ = np.asarray(getattr(self, "_pending_classes", np.array([-1, 1])))

    def predict(self, X, *, features=None, raw=False) -> np.ndarray:
        """The predicted class of each row (``classes_[1]`` where the score is positive)."""
        u = self.decision_function(X, features=features, raw=raw)
        return self.classes_[(u > 0).astype(np.intp)]

    def predict_proba(self, X, *, features=None, raw=False) -> np.ndarray:
        """Class probabilities (logistic loss only: the other losses are not likelihoods)."""
        if self.loss != "logistic":
            raise InvalidInputError(
                f"predict_proba needs loss='logistic' (this model uses {self.loss!r}, whose score is not "
                "a log-odds); use decision_function, or refit with loss='logistic'")
        u = self.decision_function(X, features=features, raw=raw)
        pos = 0.5 * (1.0 + np.tanh(0.5 * u))  # overflow-free sigmoid
        return np.column_stack([1.0 - pos, pos])

    def _score_from(self, u, ypm) -> float:
        """Accuracy of the scores ``u`` against +-1 targets."""
        return float(np.mean(np.where(u > 0, 1.0, -1.0) == ypm))

    def _risk_from(self, u, ypm) -> float:
        from .losses import derivative
        return float(np.mean(derivative(self.loss, 0, ypm * u)))


class IWPRegressor(_IWPBase):
    """Linear regression (squared error) trained in one pass by IWP-SGD on noisy features and targets.

    Same parameters as ``IWPClassifier`` minus ``truncation``; ``loss`` is "squared_error".  The
    target noise needs no gradient correction (the gradient is linear in y); the feature noise does.
    """

    _task = "regression"
    _losses = REGRESSION_LOSSES

    def __init__(self, *, loss="squared_error", correction="iwp", alpha=1.0, learning_rate=1e-3,
                 schedule="constant", mu=None, batch_size=128, radius=None, variance_cap=None,
                 average=False, fit_intercept=True, chunk_rows=None, shuffle=False,
                 random_state=None, progress=True):
        self._store_params(locals())

    def _encode_targets_fit(self, y):
        if not np.issubdtype(y.dtype, np.number):
            raise InvalidInputError(f"regression targets y must be numeric (got dtype {y.dtype}); convert y "
                                    "with y.astype(float)")
        yf = y.astype(np.float64)
        if not np.all(np.isfinite(yf)):
            raise InvalidInputError(f"y has a non-finite value at row {int(np.flatnonzero(~np.isfinite(yf))[0])}; "
                                    "drop or impute such rows before fitting")
        return yf

    def predict(self, X, *, features=None, raw=False) -> np.ndarray:
        return self.decision_function(X, features=features, raw=raw)

    def _score_from(self, pred, yv) -> float:
        """R^2 (scikit-learn's regressor convention)."""
        ss_res = float(np.sum((yv - pred) ** 2))
        ss_tot = float(np.sum((yv - yv.mean()) ** 2))
        return 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)

    def _risk_from(self, pred, yv) -> float:
        """Mean squared error / 2."""
        return float(np.mean(0.5 * (pred - yv) ** 2))


def load(path):
    """Load a model written by ``save`` (checks the format version and integrity)."""
    from .model_io import load_model
    return load_model(path)
