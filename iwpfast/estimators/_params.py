"""Hyper-parameters: scikit-learn's parameter protocol and their validation at fit time.

Implemented here so that scikit-learn stays optional: keyword-only hyper-parameters stored exactly
as given by ``__init__``, ``get_params``/``set_params`` (so ``sklearn.base.clone`` works), and one
``_validated`` that checks them all, each message naming the parameter and the fix.
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..exceptions import InvalidInputError
from ..sgd.state import SCHEDULES
from ._checks import is_integral, is_real
from ._fields import EstimatorFields

#: the scikit-learn check one-pass SGD cannot pass (both estimators declare it, with this reason)
SAMPLE_WEIGHT_EQUIVALENCE = (
    "check_sample_weight_equivalence_on_dense_data",
    "one-pass minibatch SGD: a weight of 2 doubles a row's gradient inside its own minibatch, "
    "while a repeated row is a second, later row in another minibatch, so the two fits differ "
    "(both minimize the same weighted risk); scikit-learn declares this check for its own "
    "SGDClassifier and SGDRegressor for the same reason")

CORRECTIONS = ("iwp", "none")


class ParamsMixin(EstimatorFields):
    """``get_params``/``set_params``/``repr``/tags and the validation of every hyper-parameter."""

    _task = "classification"
    _losses: Sequence[str] = ()

    # ---- scikit-learn parameter protocol -------------------------------------------------------
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
        from sklearn.base import BaseEstimator
        from sklearn.utils import ClassifierTags, RegressorTags
        tags = BaseEstimator.__sklearn_tags__(self)  # type: ignore[arg-type, unused-ignore]
        if self._task == "classification":
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags(multi_class=True)
        else:
            tags.estimator_type = "regressor"
            # scikit-learn's regressor check wants R^2 > 0.5 after fitting 200 rows with alpha=0.01:
            # one projected-SGD pass over 200 rows (the estimator's whole design: each privatised
            # row is used once) does not get there at a fixed learning rate
            tags.regressor_tags = RegressorTags(poor_score=True)
        tags.target_tags.required = True
        return tags

    @property
    def _estimator_type(self):
        return "classifier" if self._task == "classification" else "regressor"

    # ---- validation --------------------------------------------------------------------------
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
            if isinstance(val, str) and val == "auto":
                v[name] = "auto"
                continue
            grid = isinstance(val, (list, tuple, np.ndarray))
            values = list(val) if grid else [val]
            for x in values:
                ok = is_real(x) and not isinstance(x, bool) and math.isfinite(x)
                if not ok or x < 0 or (name == "learning_rate" and x == 0) or (grid and x == 0):
                    kind = "positive" if name == "learning_rate" or grid else "non-negative"
                    raise InvalidInputError(
                        f"{name} must be 'auto' (chosen by private validation), a finite {kind} "
                        f"number, or a list of positive numbers to choose from (got {val!r})")
            if grid and not values:
                raise InvalidInputError(f"{name}=[] is an empty grid; give at least one value or 'auto'")
            v[name] = [float(x) for x in values] if grid else float(val)
        if self.schedule == "paper" and isinstance(v["alpha"], float) and v["alpha"] <= 0:
            raise InvalidInputError("schedule='paper' needs alpha > 0 (the strong convexity mu = alpha)")
        if self.mu is not None and not (is_real(self.mu) and self.mu >= 0):
            raise InvalidInputError(f"mu must be None (= alpha) or a non-negative number (got {self.mu!r})")
        # mu = alpha unless given; an 'auto' alpha gets its mu per grid point
        v["mu"] = (v["alpha"] if isinstance(v["alpha"], float) else None) if self.mu is None \
            else float(self.mu)
        vf = self.validation_fraction
        if not (is_real(vf) and not isinstance(vf, bool) and 0.0 < vf <= 0.5):
            raise InvalidInputError(f"validation_fraction must be in (0, 0.5] (got {vf!r}); it is the "
                                    "share of the rows held out to choose the 'auto' hyper-parameters")
        v["validation_fraction"] = float(vf)
        if not (is_integral(self.batch_size) and not isinstance(self.batch_size, bool)
                and self.batch_size >= 1):
            raise InvalidInputError(f"batch_size must be a positive integer (got {self.batch_size!r})")
        v["batch_size"] = int(self.batch_size)
        for name in ("radius", "variance_cap"):
            val = getattr(self, name)
            if val is not None and not (is_real(val) and val > 0):
                raise InvalidInputError(f"{name} must be None or a positive number (got {val!r}); "
                                        f"use None for the default")
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise InvalidInputError(f"fit_intercept must be True or False (got {self.fit_intercept!r})")
        avg = self.average
        if not (avg is False or avg is True or avg == "tail" or avg == "auto"
                or (is_integral(avg) and not isinstance(avg, bool) and avg >= 0)
                or (isinstance(avg, float) and 0.0 <= avg < 1.0)):
            raise InvalidInputError(
                f"average must be 'auto' (tail averaging when alpha/learning_rate are chosen by private "
                f"validation, none otherwise), False, True (all iterates), 'tail' (the last half), a "
                f"start fraction in [0, 1) or a start update number >= 0 (got {avg!r})")
        if self.chunk_rows is not None and not (is_integral(self.chunk_rows)
                                                and self.chunk_rows >= 1):
            raise InvalidInputError(
                f"chunk_rows must be None or a positive integer (got {self.chunk_rows!r})")
        if not isinstance(self.shuffle, (bool, np.bool_)):
            raise InvalidInputError(f"shuffle must be True or False (got {self.shuffle!r})")
        v["truncation"] = self._validated_truncation()
        from ._moments import SOLVERS
        solver = getattr(self, "solver", "sgd")
        if solver not in SOLVERS:
            raise InvalidInputError(f"unknown solver {solver!r}; choose 'auto' (the moment "
                                    "learner where it applies, else SGD), 'sgd' (one-pass "
                                    "IWP-SGD) or 'moments' (the exact quadratic-loss solution "
                                    "from the release's debiased second moments)")
        v["solver"] = solver
        spec = getattr(self, "release_spec", None)
        if spec is not None:
            from ..privacy.spec import ReleaseSpec
            if not isinstance(spec, ReleaseSpec):
                raise InvalidInputError(
                    f"release_spec must be None or the ReleaseSpec of the release the arrays hold "
                    f"(privatize(...).spec, iwpfast.read_release(path)[1]); got a "
                    f"{type(spec).__name__}")
        return v

    def _validated_truncation(self):
        return 0

    @property
    def resolved_params_(self) -> dict[str, Any]:
        """The constructor parameters that reproduce this fit with every "auto" resolved:
        ``type(est)(**est.resolved_params_).fit(same rows)`` gives the same coefficients, bit for
        bit, where the fitted model is a pass over all the rows (a fit with numbers; "auto" on
        data it cross-validates, whose chosen head is trained again on every row; solver
        'moments').  "auto" on data above the cross-validation limit (400,000 rows by default)
        keeps the chosen head as trained on its training part (docs/tuning.md): a fit with these
        values trains it on every row instead.  Saved with the model (``iwpfast.load``) and read
        by ``iwpfast fit --params-from MODEL``."""
        return resolved_params(self)

    def _average_start(self, n_rows: int | None, batch_size: int) -> int:
        avg = self.average
        if avg == "auto":          # a fit with fixed values: no averaging, as before "auto"
            avg = False
        if avg is False:
            return -1
        if avg is True:
            return 0
        if is_integral(avg):
            return int(avg)
        frac = 0.5 if avg == "tail" else float(avg)
        if n_rows is None:
            raise InvalidInputError(
                f"average={avg!r} is a fraction of the pass, but the number of rows is unknown for "
                "this source; pass n_rows_total=... or give the first averaged update as an integer")
        n_updates = -(-int(n_rows) // batch_size)
        return int(math.floor(frac * n_updates))


def resolved_params(est) -> dict[str, Any]:
    """``est.resolved_params_``: ``get_params()`` with alpha, learning_rate (and schedule),
    variance_cap, radius, average (the first averaged update, or False), truncation and solver
    as the fitted pass ran them.  An InvalidInputError when no such parameters exist (k classes
    that chose different values each, the moment learner's constant model)."""
    est._check_fitted()
    params = est.get_params()
    solver = getattr(est, "solver_", params.get("solver", "sgd"))
    alpha = np.asarray(getattr(est, "alpha_", np.nan), dtype=np.float64).reshape(-1)
    step = np.asarray(getattr(est, "learning_rate_", np.nan), dtype=np.float64).reshape(-1)
    if alpha.size > 1 and not (np.all(alpha == alpha[0]) and np.all(step == step[0])):
        raise InvalidInputError(
            "this k-class 'auto' fit chose alpha and learning_rate per class (alpha_, "
            "learning_rate_); one estimator's parameters give every class the same values, so no "
            "parameters reproduce it: refit each class's pair by hand, or fit with numbers")
    if "solver" in params:
        params["solver"] = solver
    if solver == "moments":
        if not math.isfinite(alpha[0]):
            raise InvalidInputError(
                "solver='moments' chose the constant model (alpha_ is nan): no alpha reproduces "
                "it; every row predicts the label's mean")
        params["alpha"] = float(alpha[0])
        from ._moments import MOMENT_LOSSES
        # the default's choice across learners adopted the moment model: its loss is the
        # quadratic (estimators/_across.py)
        params["loss"] = MOMENT_LOSSES[est._task]
        return params
    cfg = est._pass.config if est._pass is not None else None
    if cfg is None:            # a learner without a head configuration (randomized-response codes)
        params.update(alpha=float(alpha[0]), learning_rate=float(step[0]))
        return params
    params.update(alpha=float(cfg.alpha), learning_rate=float(cfg.learning_rate),
                  schedule=cfg.schedule,
                  variance_cap=float(cfg.variance_cap) if math.isfinite(cfg.variance_cap) else None,
                  radius=float(cfg.radius) if math.isfinite(cfg.radius) else None,
                  average=int(cfg.average_start) if cfg.average_start >= 0 else False)
    if "truncation" in params:
        params["truncation"] = int(cfg.truncation)
    return params
