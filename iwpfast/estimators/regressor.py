"""IWPRegressor: linear regression trained in one pass by IWP-SGD on noisy features and targets."""
from __future__ import annotations

from types import MappingProxyType

import numpy as np

from ..exceptions import InvalidInputError
from ..losses import REGRESSION_LOSSES
from ._base import IWPBase
from ._params import SAMPLE_WEIGHT_EQUIVALENCE


class IWPRegressor(IWPBase):
    """Linear regression (squared error) trained in one pass by IWP-SGD on noisy features and targets.

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
    solver : {"sgd", "moments"}, default "sgd"
        "sgd": one pass of IWP-SGD (every loss).  "moments": the exact minimizer of the quadratic
        loss from the release's debiased second moments (loss='squared_error', the default):
        one read, no step, alpha ("auto", a number or a list) chosen on 5 folds of the same pass with a
        positive-definite guard and the constant model as a candidate (docs/tuning.md "The
        moment learner"; ``solver_``, ``tuning_``).  Not with sample_weight, class_weight,
        partial_fit, validation= or checkpoints yet.

    Attributes
    ----------
    coef_ : ndarray of shape (p,)
    intercept_ : float
    n_rows_seen_ : int
    release_spec_ : ReleaseSpec or None
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
                 random_state=None, progress=True, validation_fraction=0.1, solver="sgd"):
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

    def predict(self, X, *, features=None, scaled=None, raw=None,
                filesystem=None) -> np.ndarray:
        """Predicted targets; X in raw units unless ``scaled=True`` (see decision_function).
        ``filesystem``: the pyarrow or fsspec filesystem X's path lies on (as for ``fit``)."""
        return self.decision_function(X, features=features, scaled=scaled, raw=raw,
                                      filesystem=filesystem)

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
