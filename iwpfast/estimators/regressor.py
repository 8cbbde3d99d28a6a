"""IWPRegressor: linear regression trained in one pass by IWP-SGD on noisy features and targets."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from types import MappingProxyType

import numpy as np

from ..exceptions import InvalidInputError
from ..losses import REGRESSION_LOSSES
from ._base import IWPBase
from ._inputs import on_filesystem
from ._params import SAMPLE_WEIGHT_EQUIVALENCE
from ._units import (
    check_target_units,
    resolve_scaled,
    target_range_of,
    target_scale,
    to_target_units,
    warn_targets_outside,
)


class IWPRegressor(IWPBase):
    """Linear regression (squared error) from noisy features and targets in one pass: by default
    the exact solution of the release's debiased second moments, or IWP-SGD (``solver``).

    The target noise needs no gradient correction (the gradient is linear in y); the feature
    noise does.  Parameters are keyword-only and validated by ``fit`` (``InvalidInputError``
    naming the parameter and its legal range).

    Parameters
    ----------
    loss : {"squared_error"}, default "squared_error"
    correction : {"iwp", "none"}, default "iwp"
        "iwp": unbiased gradients of the clean loss; "none": naive SGD on the noisy data.
    alpha : float >= 0, list of floats > 0, or "auto", default "auto"
        L2 strength lambda; "auto" or a list: chosen by private validation (fitted ``alpha_``).
    learning_rate : float > 0, list of floats > 0, or "auto", default "auto"
        The step gamma0; "auto": chosen with alpha by private validation (``learning_rate_``).
    schedule : {"constant", "inverse", "paper"}, default "constant"
    mu : float >= 0 or None, default None (= alpha)
    batch_size : int >= 1, default 128
        Rows per SGD update (minibatch); the last partial minibatch is used.
    radius : float > 0 or None, default None (feature_bound / alpha)
    variance_cap : float > 0 or None, default None
        Cap on sigma^2 |theta|^2.
    average : "auto", bool, "tail", float in [0, 1) or int >= 0, default "auto"
    fit_intercept : bool, default True
    chunk_rows : int >= 1 or None, default None
    shuffle : bool, default False
    random_state : int, numpy Generator or None, default None
    progress : bool, "force" or "log", default True
        A progress bar on a terminal, else progress lines through ``logging`` (False: never;
        "force": always a bar; "log": always the log lines; see ``iwpfast.progress``).
    validation_fraction : float in (0, 0.5], default 0.1
        As for ``IWPClassifier``.
    solver : {"auto", "sgd", "moments"}, default "auto"
        "auto": the moment learner, unless an SGD-only setting is given (a learning_rate
        number or list, schedule, mu, radius, variance_cap, average), or sample_weight or a
        checkpoint (which it does not take yet): then SGD.  ``partial_fit`` on a new pass
        starts SGD (usable after the first minibatch) and continues a ``fit``'s solver.
        "sgd": one pass of IWP-SGD (every loss).  "moments": the exact minimizer of the quadratic
        loss from the release's debiased second moments (loss='squared_error', the default):
        one read, no step, alpha ("auto", a number or a list) chosen on 5 folds of the same pass with a
        positive-definite guard and the constant model as a candidate (docs/tuning.md "The
        moment learner"; ``solver_``, ``tuning_``, ``coef_stderr_``).  ``partial_fit`` adds
        each batch's moments to the pass's sums and solves again (any split of the rows: the
        statistics of one ``fit``); a loaded model holds no sums to continue.  Not with
        sample_weight or checkpoints yet.

    Units of the target.  A release declares the target's range (``target_range=(lo, hi)``, CLI
    ``--target-range LO:HI``) and maps it onto [-1, 1] before adding noise; a model fitted on it
    is fitted in that space (``coef_``, ``intercept_``, ``tuning_``), and ``predict``,
    ``decision_function``, ``score``, ``risk``, ``evaluate_report`` and ``private_risk`` map back:
    predictions ``lo + (hi - lo) (u + 1) / 2`` in the target's units, and clean targets y given in
    them.  ``target_units='model'`` keeps the model's space (predictions u, targets scaled as the
    release did).  A model without a declared target range (fitted on arrays, or with explicit
    noise) has one space, its training units; ``target_units`` changes nothing there.

    Attributes
    ----------
    coef_ : ndarray of shape (p,)
        In the model's space (features scaled as the release did, the target in [-1, 1] when the
        release declares its range).
    intercept_ : float
    n_rows_seen_ : int
    release_spec_ : ReleaseSpec or None
    target_range_ : (lo, hi) or None
        The target's declared range (from ``release_spec_``): predictions are in its units.
    telemetry_ : dict
    """

    _task = "regression"
    _losses = REGRESSION_LOSSES

    # scikit-learn's check_estimator passes except this; give it as its expected_failed_checks
    # (check_estimator(est, expected_failed_checks=est.sklearn_expected_failed_checks)).
    sklearn_expected_failed_checks = MappingProxyType({
        "check_regressors_no_decision_function": (
            "IWPRegressor.decision_function is iwpfast's public API since the first release (the "
            "linear score <theta, x> + b on raw or scaled features, the same values as predict); "
            "scikit-learn expects regressors not to have it, but removing it would break callers"),
        **dict([SAMPLE_WEIGHT_EQUIVALENCE])})

    def __init__(self, *, loss="squared_error", correction="iwp", alpha="auto", learning_rate="auto",
                 schedule="constant", mu=None, batch_size=128, radius=None, variance_cap=None,
                 average="auto", fit_intercept=True, chunk_rows=None, shuffle=False,
                 random_state=None, progress=True, validation_fraction=0.1, solver="auto",
                 release_spec=None):
        self._store_params(locals())

    def _target_encoder(self, y):
        if y.dtype == object:       # numbers in an object array are numbers (scikit-learn's rule)
            try:
                y.astype(np.float64)
            except (TypeError, ValueError):
                pass
            else:
                y = y[:0].astype(np.float64)
        if not np.issubdtype(y.dtype, np.number):
            raise InvalidInputError(f"regression targets y must be numeric (got dtype {y.dtype}); convert y "
                                    "with y.astype(float)")

        def encode(values, first_row, dtype=np.float64):
            targets = np.asarray(values, dtype=np.float64)
            if not np.isfinite(np.add.reduce(targets)) and not np.isfinite(targets).all():
                bad = first_row + int(np.flatnonzero(~np.isfinite(targets))[0])
                raise InvalidInputError(f"y has a non-finite value at row {bad}; drop or impute such "
                                        "rows before fitting")
            return targets

        return encode

    @property
    def target_range_(self) -> tuple[float, float] | None:
        """The declared range (lo, hi) of the target of the release the model was fitted on (its
        units are the predictions'), or None: no declared range, one space."""
        self._check_fitted()
        return target_range_of(getattr(self, "release_spec_", None))

    def target_units_text(self, target_units="target") -> str:
        """Which units the predictions, targets and risks of ``target_units`` are in, in words."""
        rng = self.target_range_
        if rng is None:
            return "the model's training units (no declared target range)"
        name = self.label_ if self.label_ is not None else "the target"
        if check_target_units(target_units) == "model":
            return (f"the model's space ({name}'s declared range {rng[0]:g}:{rng[1]:g} mapped "
                    "onto [-1, 1])")
        return f"the target's units ({name}, declared range {rng[0]:g}:{rng[1]:g})"

    def _in_target_units(self, u, target_units, y=None, where="predict") -> np.ndarray:
        """Model-space scores ``u`` in the units ``target_units`` asks for; clean targets ``y``
        (when given) checked against the declared range."""
        units = check_target_units(target_units)
        rng = self.target_range_
        if rng is None:
            return u
        if y is not None:
            warn_targets_outside(y, rng, where, stacklevel=5, units=units)
        return u if units == "model" else to_target_units(u, rng)

    def decision_function(self, X, *, features=None, scaled=None, raw=None, filesystem=None,
                          target_units="target") -> np.ndarray:
        """The linear score ``theta^T x + b`` of every row of X, in the target's units: a model
        fitted on a release that declares the target's range returns ``lo + (hi - lo) (u + 1) / 2``
        (the inverse of the release's map onto [-1, 1]); ``target_units='model'``: u itself.

        X is in raw units by default: a model with declared ranges (fitted on a release, or with
        ``fit(..., ranges=...)``) scales and clips it as the release did.  ``scaled=True``: X is
        already in the model's [-1, 1] space (``scaled`` is about X only; ``target_units`` about
        the output).  ``filesystem``: the pyarrow or fsspec filesystem X's path lies on.
        """
        check_target_units(target_units)
        X = on_filesystem(X, filesystem)
        u = self._model_scores(X, features, resolve_scaled(scaled, raw), "decision_function")
        return self._in_target_units(u, target_units)

    def predict(self, X, *, features=None, scaled=None, raw=None, filesystem=None,
                target_units="target") -> np.ndarray:
        """Predicted targets, in the target's units (``target_units='model'``: the model's space);
        X in raw units unless ``scaled=True`` (see decision_function).
        ``filesystem``: the pyarrow or fsspec filesystem X's path lies on (as for ``fit``)."""
        check_target_units(target_units)
        X = on_filesystem(X, filesystem)
        u = self._model_scores(X, features, resolve_scaled(scaled, raw), "predict")
        return self._in_target_units(u, target_units)

    def _clean_pred(self, X, y, features, label, scaled, raw, filesystem, target_units, where,
                    sample_weight=None):
        """(predictions, targets, weights) on clean data, both in the units ``target_units``.
        Arrays of a release (``release_spec=`` given to the constructor: scikit-learn's folds)
        hold the released targets, in the model's space: compared there."""
        check_target_units(target_units)
        X = on_filesystem(X, filesystem)
        if self._release_rows(X):
            target_units = "model"
        u, yv, w = self._clean_xy(X, y, features, label, resolve_scaled(scaled, raw), where,
                                  sample_weight=sample_weight)
        return self._in_target_units(u, target_units, yv, where), yv, w

    def score(self, X, y=None, sample_weight=None, *, features=None, label=None, scaled=None,
              raw=None, filesystem=None, target_units="target") -> float:
        """R^2 on clean data (scikit-learn's definition; weighted with ``sample_weight``): arrays
        ``(X, y)`` or a source with the label column.  X in raw units unless ``scaled=True``; y in
        the target's units (``target_units='model'``: y scaled as the release did), so that the
        score is ``r2_score(y, predict(X))``.  A ``UnitsWarning`` says when more than 1% of y lies
        outside the declared range (compared as given) or y looks scaled."""
        return self._score_from(*self._clean_pred(X, y, features, label, scaled, raw, filesystem,
                                                  target_units, "score", sample_weight))

    def risk(self, X, y=None, sample_weight=None, *, features=None, label=None, scaled=None,
             raw=None, filesystem=None, target_units="target") -> float:
        """Half the mean squared error on clean data (the loss the model minimizes), in the
        target's units squared (``target_units='model'``: the model's space); arguments as for
        ``score``; weighted: (1/n) sum_i s_i (pred_i - y_i)^2 / 2."""
        return self._risk_from(*self._clean_pred(X, y, features, label, scaled, raw, filesystem,
                                                 target_units, "risk", sample_weight))

    def score_and_risk(self, X, y=None, *, features=None, label=None, scaled=None, raw=None,
                       filesystem=None, target_units="target") -> tuple[float, float]:
        """``(score(...), risk(...))`` from one pass over X; arguments as for ``score``."""
        pred, yv, _ = self._clean_pred(X, y, features, label, scaled, raw, filesystem,
                                       target_units, "evaluate")
        return self._score_from(pred, yv), self._risk_from(pred, yv)

    def evaluate_report(self, X, y=None, *, features=None, label=None, scaled=None, raw=None,
                        filesystem=None, target_units="target") -> RegressionReport:
        """The verdict on clean data (``iwpfast evaluate`` prints it): R^2, RMSE and mean absolute
        error in the target's units (``target_units='model'``: the model's space), beside the
        constant model that predicts the mean of y, and a warning when R^2 is below 0 (worse than
        that constant).  Arguments as for ``score``; R^2 is ``score``'s."""
        pred, yv, _ = self._clean_pred(X, y, features, label, scaled, raw, filesystem,
                                       target_units, "evaluate")
        return regression_report(pred, yv, self.target_units_text(target_units),
                                 self.target_range_ if target_units == "target" else None)

    def private_risk(self, X, y=None, sample_weight=None, *, noise_var=None, epsilon_y=None,
                     label_keep_prob=None, target_noise_var=None, features=None, label=None,
                     override=False, filesystem=None, class_weighted=None,
                     target_units="target"):
        """The debiased estimate of the clean risk (half the mean squared error) from a private
        hold-out (see ``IWPBase.private_risk``), in the target's units squared: the release's
        model-space estimate and its standard error times ``((hi - lo) / 2)^2``
        (``target_units='model'``: as estimated, in the model's space)."""
        units = check_target_units(target_units)
        est = super().private_risk(
            X, y, sample_weight, noise_var=noise_var, epsilon_y=epsilon_y,
            label_keep_prob=label_keep_prob, target_noise_var=target_noise_var, features=features,
            label=label, override=override, filesystem=filesystem, class_weighted=class_weighted)
        rng = self.target_range_
        if rng is None or units == "model":
            return est
        h2 = target_scale(rng) ** 2
        return est._replace(risk=est.risk * h2, stderr=est.stderr * h2)

    def _score_from(self, pred, yv, sample_weight=None) -> float:
        """R^2 (scikit-learn's regressor convention; weighted as its r2_score)."""
        w = np.ones_like(yv) if sample_weight is None else sample_weight
        ss_res = float(np.sum(w * (yv - pred) ** 2))
        ss_tot = float(np.sum(w * (yv - np.average(yv, weights=w)) ** 2))
        return 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)

    def _risk_from(self, pred, yv, sample_weight=None) -> float:
        """Mean squared error / 2 (weighted: (1/n) sum s_i (pred_i - y_i)^2 / 2)."""
        loss = 0.5 * (pred - yv) ** 2
        return float(np.mean(loss if sample_weight is None else loss * sample_weight))


@dataclass(frozen=True)
class RegressionReport:
    """A regressor's verdict on clean data (``IWPRegressor.evaluate_report``).

    Attributes
    ----------
    n_rows : int
    r2 : float
        1 - sum (y - pred)^2 / sum (y - mean y)^2 (``score``).
    rmse, mae : float
        Root mean squared error and mean absolute error, in ``units``.
    risk : float
        Half the mean squared error (the loss the model minimizes), in ``units`` squared.
    target_mean, constant_rmse : float
        The mean of y and the RMSE of always predicting it (the standard deviation of y).
    units : str
        Which units y, the predictions and the errors are in, in words.
    target_range : (lo, hi) or None
        The target's declared range when the numbers are in its units.
    warnings : tuple of str
        R^2 below 0: the model is worse than predicting the mean.
    """

    n_rows: int
    r2: float
    rmse: float
    mae: float
    risk: float
    target_mean: float
    constant_rmse: float
    units: str
    target_range: tuple | None = None
    warnings: tuple = ()

    def describe(self) -> str:
        text = (f"R^2 {self.r2:.4f}, RMSE {self.rmse:,.6g}, mean absolute error {self.mae:,.6g} "
                f"over {self.n_rows:,} rows, in {self.units}; the constant model (the mean "
                f"{self.target_mean:,.6g}) has RMSE {self.constant_rmse:,.6g}")
        return "\n".join([text] + [f"warning: {w}" for w in self.warnings])

    def to_dict(self) -> dict:
        out = asdict(self)
        out["target_range"] = None if self.target_range is None else list(self.target_range)
        out["warnings"] = list(self.warnings)
        return out


def regression_report(pred: np.ndarray, y: np.ndarray, units: str,
                      target_range=None) -> RegressionReport:
    """The ``RegressionReport`` of predictions ``pred`` against clean targets ``y`` (same units)."""
    n = int(y.shape[0])
    if n == 0:
        nan = float("nan")
        return RegressionReport(0, nan, nan, nan, nan, nan, nan, units, target_range)
    err = np.asarray(pred, dtype=np.float64) - y
    ss_res = float(np.sum(err * err))
    mean = float(np.mean(y))
    ss_tot = float(np.sum((y - mean) ** 2))
    # score's R^2 (IWPRegressor._score_from), the same sums
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    mse, var = ss_res / n, ss_tot / n
    warns = () if not r2 < 0 else (
        f"R^2 {r2:.4f} is below 0: the model predicts worse than the constant mean of y "
        f"({mean:,.6g}); check the units of the data (and target_units) and the release's noise",)
    return RegressionReport(n, r2, math.sqrt(mse), float(np.mean(np.abs(err))), 0.5 * mse, mean,
                            math.sqrt(var), units, target_range, warns)
