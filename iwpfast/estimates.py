"""Per-example IWP loss and gradient estimates (NumPy; the reference path, docs/design.md section 2).

For a released example (x~, y~) with per-feature Gaussian noise variances ``s`` and, optionally,
labels flipped by randomized response with budget ``epsilon_y``, the IWP estimates are unbiased for
the clean loss / gradient (``E[L~] = l(theta, x, y)``, ``E[grad L~] = grad l``):

    u = theta^T x~ + b,   z = y~ u,   tau = 1/2 sum_j s_j theta_j^2,   S~ = 1 / (1 - exp(-epsilon_y))
    L~      = S~ F_0(z) + (1 - S~) F_0(-z)
    grad_th = a y~ x~ - c (s * theta),        grad_b = a y~
    a = S~ F_1(z) - (1 - S~) F_1(-z),         c = S~ F_2(z) + (1 - S~) F_2(-z)

with ``F_j`` the inverse-Weierstrass series of ``iwpfast.losses.series_F`` (S~ = 1 for public
labels).  Regression (``squared_error``, target noise variance ``sigma_y^2``):

    L~ = (u - y~)^2 / 2 - tau - sigma_y^2 / 2,     grad_th = (u - y~) x~ - s * theta,   grad_b = u - y~

``correction="none"`` evaluates the same code with tau = 0, S~ = 1 and no sigma_y^2 term: the naive
loss/gradient that treats the noisy data as clean (on clean data: the clean loss/gradient).

Example::

    >>> import numpy as np, iwpfast
    >>> theta = np.array([0.5, -1.0]); X = np.array([[1.0, 2.0], [0.0, -1.0]]); y = np.array([1, -1])
    >>> g = iwpfast.iwp_gradient(theta, X, y, loss="exponential", noise_var=0.25, epsilon_y=2.0)
    >>> g.shape
    (2, 2)
    >>> L = iwpfast.iwp_loss(theta, X, y, loss="quadratic", noise_var=[0.25, 0.5])
    >>> L.shape
    (2,)
"""
from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np

from .exceptions import InvalidInputError
from .holdout_verdict import ConstantRisk, PredictedClasses, judge_difference
from .label_noise import check_classes, label_tilde, label_weight_table
from .losses import (
    CLASSIFICATION_LOSSES,
    LOSS_RECORDS,
    REGRESSION_LOSSES,
    check_loss,
    check_order,
    loss_record,
    series_F_unchecked,
)
from .noise_registry import LearnerLaw

__all__ = ["iwp_loss", "iwp_gradient", "label_tilde", "label_weight_table", "glm_scalars",
           "noise_tau",
           "glm_loss_values", "glm_scalars_table", "glm_loss_values_table",
           "RiskEstimate", "RiskAccumulator", "ConstantRisk", "ConstantBaseline",
           "noise_variance_factor"]


# --------------------------------------------------------------------------------------------
# Vectorized building blocks, shared with the reference twin (iwpfast.sgd.reference).
# --------------------------------------------------------------------------------------------

def glm_scalars(loss: str, z: np.ndarray, tau: float, label_weight: float,
                truncation: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-row scalars (a, c) of a classification loss at margins ``z = y~ u`` (no validation).

    a = S~ F_1(z) - (1 - S~) F_1(-z),  c = S~ F_2(z) + (1 - S~) F_2(-z).
    With S~ == 1 the (1 - S~) terms are exactly zero and are skipped (not multiplied: 0 * inf
    would turn an overflow of F(-z) into NaN), so IWP with sigma = 0 and public labels is clean.
    """
    record = LOSS_RECORDS[loss]
    a, c = record.both_series(z, tau, truncation)
    if label_weight != 1.0:
        a_neg, c_neg = record.both_series(-z, tau, truncation)
        other = 1.0 - label_weight
        a = label_weight * a - other * a_neg
        c = label_weight * c + other * c_neg
    return a, c


def glm_loss_values(loss: str, z: np.ndarray, tau: float | np.ndarray, label_weight: float,
                    truncation: int) -> np.ndarray:
    """Per-row IWP loss S~ F_0(z) + (1 - S~) F_0(-z) of a classification loss (no validation)."""
    value = series_F_unchecked(loss, 0, z, tau, truncation)
    if label_weight != 1.0:
        value = label_weight * value + (1.0 - label_weight) * series_F_unchecked(loss, 0, -z, tau,
                                                                                 truncation)
    return value


def _table_weights(signs: np.ndarray, table, boost=None) -> tuple[np.ndarray, np.ndarray]:
    match = signs > 0
    w_z = np.where(match, table[0], table[2])
    return (w_z if boost is None else w_z + boost), np.where(match, table[1], table[3])


def _symmetric(table) -> bool:
    return table[0] == table[2] and table[1] == table[3]


def glm_scalars_table(loss: str, z: np.ndarray, signs: np.ndarray, tau: float, table,
                      truncation: int, boost=None) -> tuple[np.ndarray, np.ndarray]:
    """``glm_scalars`` with a 2 x 2 label-weight table (``label_weight_table``): the row's weights
    of (F(z), F(-z)) are table[0:2] where signs > 0 (label = the head's class), table[2:4] elsewhere.
    A table with two equal rows is ``glm_scalars`` with S~ = table[0] (same bits).  ``boost``:
    None, or per row an addition to the weight of F(z) (class weights of k classes)."""
    if boost is None and _symmetric(table):
        return glm_scalars(loss, z, tau, table[0], truncation)
    w_z, w_minus_z = _table_weights(signs, table, boost)
    record = LOSS_RECORDS[loss]
    a, c = record.both_series(z, tau, truncation)
    a_neg, c_neg = record.both_series(-z, tau, truncation)
    return w_z * a - w_minus_z * a_neg, w_z * c + w_minus_z * c_neg


def glm_loss_values_table(loss: str, z: np.ndarray, signs: np.ndarray, tau: float | np.ndarray,
                          table, truncation: int, boost=None) -> np.ndarray:
    """Per-row IWP loss W_+ F_0(z) + W_- F_0(-z) with the table's weights for each row (``signs``
    broadcasts against ``z``: an (m, 1) column weighs the (m, G) margins of G heads of one class,
    ``tau`` then their (G,) taus); ``boost`` as for ``glm_scalars_table``."""
    if boost is None and _symmetric(table):
        return glm_loss_values(loss, z, tau, table[0], truncation)
    w_z, w_minus_z = _table_weights(signs, table, boost)
    return w_z * series_F_unchecked(loss, 0, z, tau, truncation) \
        + w_minus_z * series_F_unchecked(loss, 0, -z, tau, truncation)


# --------------------------------------------------------------------------------------------
# Validation (public wrapper only).
# --------------------------------------------------------------------------------------------

def _real_array(value, name: str, ndim: int) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise InvalidInputError(
            f"{name} has dtype {array.dtype}; pass real numbers (float or int array)")
    if array.ndim != ndim:
        raise InvalidInputError(
            f"{name} must be a {ndim}-D array, got shape {array.shape}"
            + ("; for one example use X.reshape(1, -1)" if name == "X" and array.ndim == 1 else ""))
    array = array.astype(np.float64, copy=False)
    if not np.all(np.isfinite(array)):
        bad = np.argwhere(~np.isfinite(array))[0]
        raise InvalidInputError(f"{name} has a non-finite value at index {tuple(int(i) for i in bad)}; "
                                "remove or impute it")
    return array


def _nonnegative_float(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or value < 0:
        raise InvalidInputError(f"{name}={value!r} must be a finite number >= 0")
    return float(value)


def _prepare(theta, X, y, loss, noise_var, epsilon_y, truncation, intercept, correction,
             target_noise_var, noise_law=None):
    check_loss(loss)
    truncation = check_order(truncation, "truncation")
    if correction not in ("iwp", "none"):
        raise InvalidInputError(f"correction={correction!r}; choose 'iwp' (unbiased) or 'none' (naive)")
    theta = _real_array(theta, "theta", 1)
    X = _real_array(X, "X", 2)
    y = _real_array(y, "y", 1)
    n, p = X.shape
    if theta.shape[0] != p:
        raise InvalidInputError(f"theta has {theta.shape[0]} coefficients but X has {p} columns "
                                "(X is (n_rows, n_features)); pass one coefficient per column")
    if y.shape[0] != n:
        raise InvalidInputError(f"y has {y.shape[0]} labels but X has {n} rows; pass one label per row")
    law = _check_law(noise_law, noise_var, loss, p)
    if law is not None:
        noise_var = law.variance
    elif noise_var is None:
        raise InvalidInputError("pass noise_var (the Gaussian release's sigma_j^2, a number or one per "
                                "column) or noise_law (a DiscreteLaplace, for a pure-epsilon release)")
    noise = np.asarray(noise_var)
    if noise.dtype.kind not in "biuf" or noise.ndim > 1:
        raise InvalidInputError(f"noise_var must be a number or a ({p},) vector of variances, "
                                f"got {noise_var!r}")
    noise = np.broadcast_to(noise.astype(np.float64), (p,)) if noise.ndim == 0 else \
        noise.astype(np.float64)
    if noise.shape != (p,):
        raise InvalidInputError(f"noise_var has {noise.shape[0]} entries but X has {p} columns; "
                                "pass a scalar or one variance (sigma_j^2, not sigma_j) per column")
    if not np.all(np.isfinite(noise)) or np.any(noise < 0):
        raise InvalidInputError("noise_var must hold finite variances >= 0 (sigma_j^2); "
                                f"got {noise_var!r}")
    if intercept is not None:
        if isinstance(intercept, bool) or not isinstance(intercept, numbers.Real) \
                or not math.isfinite(intercept):
            raise InvalidInputError(f"intercept={intercept!r} must be a finite float or None (no intercept)")
        intercept = float(intercept)
    target_noise_var = _nonnegative_float(target_noise_var, "target_noise_var")
    if loss in CLASSIFICATION_LOSSES:
        if epsilon_y is not None:
            if isinstance(epsilon_y, bool) or not isinstance(epsilon_y, numbers.Real) \
                    or not float(epsilon_y) > 0:
                raise InvalidInputError(f"epsilon_y={epsilon_y!r} must be > 0 (the label budget), "
                                        "or None for public labels")
        bad = np.flatnonzero((y != 1.0) & (y != -1.0))
        if bad.size:
            raise InvalidInputError(
                f"y[{bad[0]}] = {float(y[bad[0]])!r}: classification labels must be -1 or +1; "
                "map classes with y = 2 * (labels == positive_class) - 1")
        if target_noise_var != 0.0:
            raise InvalidInputError("target_noise_var is for loss='squared_error'; "
                                    "leave it at 0 for classification")
    else:
        if epsilon_y is not None:
            raise InvalidInputError("epsilon_y is the label budget of classification; for "
                                    "loss='squared_error' pass target_noise_var (sigma_y^2) instead")
    iwp = correction == "iwp"
    s = noise if iwp else np.zeros(p)
    tau, direction = noise_tau(loss, s, theta, law if iwp else None)
    weight = label_tilde(epsilon_y) if (iwp and loss in CLASSIFICATION_LOSSES) else 1.0
    u = X @ theta
    if intercept is not None:
        u = u + intercept
    return theta, X, y, direction, tau, weight, u, truncation, intercept, \
        (target_noise_var if iwp else 0.0)


def noise_tau(loss: str, noise_var, theta, noise_law=None) -> tuple[float, np.ndarray]:
    """(tau, direction) of the inverse transform at ``theta``: the argument of the loss's series
    and d tau / d theta.  The law says which form a loss takes (``LearnerLaw.inverse_for``):
    "variance" (Gaussian noise; the Laplace law for the quadratic losses, whose inverse involves
    the variance only: D_j f = f - (Var_j theta_j^2 / 2) f'') gives tau = 1/2 sum_j s_j
    theta_j^2, direction s * theta; "product" (the Laplace law with the exponential loss) gives
    e^{-tau} = prod_j kappa_j from the law's ``exponential_factor`` (docs/math.md "Pure
    epsilon").  ``noise_law``: None (Gaussian) or a ``LearnerLaw`` of len(theta) features;
    ``noise_var`` is then its variance."""
    theta = np.asarray(theta, dtype=np.float64)
    if noise_law is not None and noise_law.inverse_for(loss) == "product":
        log_kappa, direction = noise_law.exponential_factor(theta)
        return -math.fsum(log_kappa.tolist()), direction
    s = np.asarray(noise_var, dtype=np.float64)
    return 0.5 * float(np.dot(s, theta * theta)), s * theta


def _check_law(noise_law, noise_var, loss, p):
    """The law of p features that debiases ``loss``, or None (Gaussian noise of variances
    noise_var)."""
    if noise_law is None:
        return None
    if not isinstance(noise_law, LearnerLaw):
        raise InvalidInputError(f"noise_law={noise_law!r}; pass None (Gaussian noise of variance "
                                "noise_var) or an iwpfast.laplace.DiscreteLaplace(scale, grid)")
    if noise_var is not None:
        raise InvalidInputError("pass noise_var (Gaussian release) or noise_law (Laplace release), "
                                "not both: the Laplace law's variance is noise_law.variance")
    if noise_law.inverse_for(loss) is None:
        raise InvalidInputError(noise_law.refusal(loss))
    return noise_law.broadcast(p)


def iwp_loss(theta, X, y, *, loss: str, noise_var=None, epsilon_y: float | None = None,
             truncation: int = 2, intercept: float | None = None, correction: str = "iwp",
             target_noise_var: float = 0.0, classes=None,
             noise_law: LearnerLaw | None = None) -> np.ndarray:
    """Per-row IWP loss estimates, shape (n,); their expectation over the release noise is the clean loss.

    With ``classes`` (k >= 2 one-vs-rest heads; docs/math.md "k classes"): ``classes`` is k or the
    list of class values, ``y`` the released classes (indices 0..k-1, or the values), ``epsilon_y``
    the budget of k-ary randomized response, ``theta`` (k, p), ``intercept`` None or (k,); the
    result is (n, k), column c the estimate of head c's loss f(y_c u_c).

    Parameters
    ----------
    theta : (p,) coefficients.   X : (n, p) released features x~.   y : (n,) released labels in
        {-1, +1} (classification) or released targets (``squared_error``).
    loss : "exponential" | "quadratic" | "logistic" | "squared_error".
    noise_var : feature noise variance(s) sigma_j^2, a scalar or a (p,) vector.
    epsilon_y : label budget of randomized response; None = public labels (classification only).
    truncation : K for the logistic series (the loss is summed to k = K).
    intercept : None, or a float b (noise-free) added to the score: u = theta^T x~ + b.
    correction : "iwp" (unbiased) or "none" (naive: the loss of the noisy data as if clean).
    target_noise_var : sigma_y^2 of the regression targets (IWP subtracts sigma_y^2 / 2).

    Formulas: classification ``S~ F_0(z) + (1-S~) F_0(-z)`` with ``z = y u``; regression
    ``(u - y)^2/2 - tau - sigma_y^2/2``; ``tau = sum_j s_j theta_j^2 / 2``.

    >>> import numpy as np
    >>> from iwpfast import iwp_loss
    >>> iwp_loss(np.array([1.0]), np.array([[0.0]]), np.array([1.0]), loss="exponential", noise_var=2.0)
    array([0.36787944])
    """
    if classes is not None:
        heads = _one_vs_rest(theta, X, y, classes, loss, noise_var, epsilon_y, truncation,
                             intercept, correction, target_noise_var, noise_law)
        return np.stack([glm_loss_values_table(loss, signs * u, signs, tau, table, truncation)
                         for signs, u, tau, table, *_ in heads], axis=1)
    theta, X, y, _, tau, weight, u, truncation, intercept, target_var = _prepare(
        theta, X, y, loss, noise_var, epsilon_y, truncation, intercept, correction, target_noise_var,
        noise_law)
    if loss in REGRESSION_LOSSES:
        residual = u - y
        return 0.5 * residual * residual - tau - 0.5 * target_var
    return glm_loss_values(loss, y * u, tau, weight, truncation)


def iwp_gradient(theta, X, y, *, loss: str, noise_var=None, epsilon_y: float | None = None,
                 truncation: int = 2, intercept: float | None = None, correction: str = "iwp",
                 target_noise_var: float = 0.0, classes=None,
                 noise_law: LearnerLaw | None = None) -> np.ndarray:
    """Per-row IWP gradient estimates, shape (n, p), or (n, p+1) with an intercept (last column: d/db).

    With ``classes`` (as in ``iwp_loss``): shape (n, k, p) or (n, k, p+1), block c the gradient of
    head c (theta[c], intercept[c]).

    Each row is the exact gradient of the corresponding ``iwp_loss`` row, and its expectation over
    the release noise is the clean gradient (exactly for exponential / quadratic / squared_error; up
    to the truncation bias for logistic, see ``iwpfast.transforms.logistic_gradient_truncation_bias``):

        classification:  a y~ x~ - c (s * theta)   and   a y~  for b
        regression:      (u - y~) x~ - s * theta    and   u - y~ for b

    Same arguments as ``iwp_loss``; the naive gradient is ``correction="none"``.

    >>> import numpy as np
    >>> from iwpfast import iwp_gradient
    >>> iwp_gradient(np.array([1.0, 0.0]), np.array([[0.0, 1.0]]), np.array([-1.0]),
    ...              loss="quadratic", noise_var=0.5, intercept=0.0)
    array([[-0.5,  1. ,  1. ]])
    """
    if classes is not None:
        blocks = []
        for signs, u, tau, table, _, X_c, direction, has_intercept in _one_vs_rest(
                theta, X, y, classes, loss, noise_var, epsilon_y, truncation, intercept, correction,
                target_noise_var, noise_law):
            a, c = glm_scalars_table(loss, signs * u, signs, tau, table, truncation)
            row_weight = a * signs
            grad = row_weight[:, None] * X_c - c[:, None] * direction[None, :]
            if has_intercept:
                grad = np.concatenate([grad, row_weight[:, None]], axis=1)
            blocks.append(grad)
        return np.stack(blocks, axis=1)
    theta, X, y, direction, tau, weight, u, truncation, intercept, _ = _prepare(
        theta, X, y, loss, noise_var, epsilon_y, truncation, intercept, correction, target_noise_var,
        noise_law)
    if loss in REGRESSION_LOSSES:
        row_weight = u - y
        c = np.ones_like(u) if correction == "iwp" else np.zeros_like(u)
    else:
        a, c = glm_scalars(loss, y * u, tau, weight, truncation)
        row_weight = a * y
    grad = row_weight[:, None] * X - c[:, None] * direction[None, :]
    if intercept is not None:
        grad = np.concatenate([grad, row_weight[:, None]], axis=1)
    return grad


def class_indices(y, classes) -> tuple[np.ndarray, int]:
    """(class index of each label, k): ``classes`` is k (labels are indices 0..k-1) or the list of
    class values (labels are those values).  A label outside the classes names its row."""
    if isinstance(classes, numbers.Integral) and not isinstance(classes, bool):
        k = int(classes)
        if k < 2:
            raise InvalidInputError(f"classes={classes!r}: one-vs-rest needs at least 2 classes")
        codes = np.asarray(y)
        if codes.dtype.kind not in "iuf" or codes.ndim != 1:
            raise InvalidInputError(f"y must be a 1-D array of class indices 0..{k - 1} with "
                                    f"classes={k}, got dtype {codes.dtype}, shape {codes.shape}")
        bad = ~np.isin(codes, np.arange(k))
        if bad.any():
            row = int(np.argmax(bad))
            raise InvalidInputError(f"y[{row}] = {codes[row].item()!r} is not a class index 0..{k - 1}; "
                                    "pass indices, or classes=[the class values]")
        return codes.astype(np.int64), k
    values = check_classes(classes)
    labels = np.asarray(y, dtype=object if isinstance(values[0], str) else None)
    if labels.ndim != 1:
        raise InvalidInputError(f"y must be 1-D (one label per row), got shape {labels.shape}")
    lookup_codes = _small_integer_codes(labels, values)
    if lookup_codes is not None:
        return lookup_codes, len(values)
    if labels.dtype.kind in "biuf" and not isinstance(values[0], str):
        # vectorized (the estimators map every chunk of a k-class fit): a binary search in the
        # sorted class values, then an equality test (a NaN or another value is not found)
        table = np.asarray(values, dtype=np.result_type(labels.dtype, np.asarray(values).dtype))
        order = np.argsort(table, kind="stable")
        ordered = table[order]
        found_at = np.minimum(np.searchsorted(ordered, labels), len(values) - 1)
        missing = ordered[found_at] != labels
        if missing.any():
            row = int(np.argmax(missing))
            raise InvalidInputError(f"y[{row}] = {labels[row].item()!r} is not one of the classes "
                                    f"{list(values)!r}; declare every class")
        return order[found_at].astype(np.int64), len(values)
    lookup = {v: i for i, v in enumerate(values)}
    codes = np.empty(labels.shape[0], np.int64)
    for row, value in enumerate(labels.tolist()):
        index = lookup.get(value)
        if index is None:
            raise InvalidInputError(f"y[{row}] = {value!r} is not one of the classes {list(values)!r}; "
                                    "declare every class")
        codes[row] = index
    return codes, len(values)


#: integer classes spanning at most this many values are mapped by a lookup table
LOOKUP_CLASS_SPAN = 1 << 16


def _small_integer_codes(labels: np.ndarray, values) -> np.ndarray | None:
    """Class indices of integer labels by a lookup table over [min class, max class] (one pass
    each for the range check, the shift and the lookup: ~4x faster than the binary search on
    int8 labels), or None when the labels or classes are not integers of a small span, or a
    label lies outside the table (the caller's path then names the row)."""
    if labels.dtype.kind not in "iu" or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values):
        return None
    lo, hi = min(values), max(values)
    if hi - lo >= LOOKUP_CLASS_SPAN or labels.size == 0:
        return None
    if int(labels.min()) < lo or int(labels.max()) > hi:
        return None
    table = np.full(hi - lo + 1, -1, np.int64)
    table[np.asarray(values, dtype=np.int64) - lo] = np.arange(len(values))
    codes = table.take(np.subtract(labels, lo, dtype=np.intp))
    if codes.min() < 0:             # a value between the classes that is none of them
        return None
    return codes


def _one_vs_rest(theta, X, y, classes, loss, noise_var, epsilon_y, truncation, intercept,
                 correction, target_noise_var, noise_law=None):
    """Per head c: (signs, u, tau, table, theta_c, X, direction, has_intercept), validated
    (direction: d(-tau)/d(-theta), s * theta_c for Gaussian noise)."""
    check_loss(loss, allowed=CLASSIFICATION_LOSSES, parameter="loss (with classes=)")
    codes, k = class_indices(y, classes)
    theta = np.asarray(theta)
    if theta.ndim != 2 or theta.shape[0] != k:
        raise InvalidInputError(f"theta has shape {theta.shape}; with {k} classes pass one row of "
                                f"coefficients per class, shape ({k}, p)")
    if intercept is not None:
        intercept = np.asarray(intercept, dtype=np.float64)
        if intercept.shape != (k,):
            raise InvalidInputError(f"intercept has shape {intercept.shape}; with {k} classes pass "
                                    f"None or one intercept per class, shape ({k},)")
    if epsilon_y is not None and (isinstance(epsilon_y, bool) or not isinstance(epsilon_y, numbers.Real)
                                  or not float(epsilon_y) > 0):
        raise InvalidInputError(f"epsilon_y={epsilon_y!r} must be > 0 (the label budget of k-ary "
                                "randomized response), or None for public labels")
    if correction not in ("iwp", "none"):
        raise InvalidInputError(f"correction={correction!r}; choose 'iwp' (unbiased) or 'none' (naive)")
    table = label_weight_table(epsilon_y, k) if correction == "iwp" else (1.0, 0.0, 1.0, 0.0)
    heads = []
    for c in range(k):
        signs = np.where(codes == c, 1.0, -1.0)
        theta_c, X_c, _, direction, tau, _, u, truncation, b, _ = _prepare(
            theta[c], X, signs, loss, noise_var, None, truncation,
            None if intercept is None else float(intercept[c]), correction, target_noise_var,
            noise_law)
        heads.append((signs, u, tau, table, theta_c, X_c, direction, intercept is not None))
    return heads


# --------------------------------------------------------------------------------------------
# The private risk: an estimate, its standard error, and whether to believe them.
# --------------------------------------------------------------------------------------------
#: an estimate is unreliable when fewer than this many rows effectively carry the sum
#: ((sum |v|)^2 / sum v^2, Kish's effective sample size of the per-row values v)
MIN_EFFECTIVE_ROWS = 30.0
#: ... or when one row carries more than this share of sum |v|
MAX_LARGEST_SHARE = 0.05
#: ... or when the feature noise inflates the per-row variance by more than n / this (then the rare
#: rows whose noise dominates the mean are seldom in the sample, and the sample sd misses them)
MIN_ROWS_PER_VARIANCE_FACTOR = 100.0


def noise_variance_factor(loss: str, noise_energy: float) -> float:
    """How much the feature noise multiplies the second moment of a row's IWP loss (leading order).

    ``noise_energy`` is sigma^2 |theta|^2 = sum_j s_j theta_j^2 (= 2 tau): the variance of the
    noise theta^T eta in the released score.  For the exponential loss the IWP loss of a row is
    exp(-tau - z~) with z~ = z + theta^T eta, so E[value^2] / (clean value)^2 = E[e^{-2 theta^T eta}]
    e^{-2 tau} = e^{2 noise_energy - noise_energy} = exp(sigma^2 |theta|^2): a log-normal factor, which
    grows without bound.  The quadratic, logistic (truncated series) and squared-error values are
    polynomials in the noise, whose moments grow polynomially; for them this returns 1 + noise_energy
    (the variance added to the score), a scale, not a bound.
    """
    return loss_record(loss).variance_factor(noise_energy)


class RiskEstimate(NamedTuple):
    """An estimate of the clean risk from a private hold-out, its standard error, and diagnostics.

    risk, stderr, n_rows: the mean of the per-row IWP losses, their sample sd / sqrt(n), the rows.
    largest_share: the largest |value| over sum |value| (one row's weight in the estimate).
    effective_rows: (sum |v|)^2 / sum v^2, the rows that effectively carry the sum (n when all
      rows weigh the same).
    noise_energy: sigma^2 |theta|^2 of the model scored (0 on clean data).
    variance_factor: ``noise_variance_factor(loss, noise_energy)``.
    reliable: False when any warning below applies; then ``ci95`` is None and ``describe()`` says
      why instead of printing an interval.
    warnings: the reasons, one sentence each.
    baseline: the best constant model beside it (``ConstantRisk``), or None.
    class_weight: the class weights (``classes_`` order) when this is the class-weighted risk
      (1/n) sum_i w_{y_i} loss_i of a model fitted with ``class_weight``; None: the plain risk.
    unweighted: beside a class-weighted estimate, the plain one of the same rows (same read).
    predictions: a classifier's predicted-class shares and debiased accuracy (``holdout_verdict.
      PredictedClasses``; with noisy features only its note that they cannot be estimated), or None.

    ``risk +- 1.96 stderr`` is a 95% interval only when ``reliable``: the per-row IWP values can be
    so heavy-tailed (exponential loss, large sigma^2 |theta|^2) that the rows which dominate the
    mean are absent from the sample; then the sample mean and the sample sd are both too small.
    """

    risk: float
    stderr: float
    n_rows: int
    largest_share: float = float("nan")
    effective_rows: float = float("nan")
    noise_energy: float = 0.0
    variance_factor: float = 1.0
    reliable: bool = True
    warnings: tuple = ()
    baseline: ConstantRisk | None = None
    class_weight: tuple | None = None
    unweighted: RiskEstimate | None = None
    predictions: PredictedClasses | None = None

    @property
    def difference_reliable(self) -> bool | None:
        """Whether ``baseline.difference`` may be read as a verdict (both estimates reliable:
        ``holdout_verdict.judge_difference``); None without a baseline."""
        return None if self.baseline is None else self.baseline.difference_reliable

    @property
    def ci95(self) -> tuple[float, float] | None:
        """The 95% normal interval, or None when the estimate is not reliable."""
        if not self.reliable:
            return None
        return (self.risk - 1.96 * self.stderr, self.risk + 1.96 * self.stderr)

    def describe(self) -> str:
        """One paragraph: the estimate, the standard error, the interval only when it can be trusted."""
        head = f"{self.risk:.5f} +- {self.stderr:.5f} (standard error, {self.n_rows:,} rows)"
        diag = (f"effective rows {self.effective_rows:,.0f}, largest row's share "
                f"{self.largest_share:.3g}, sigma^2|theta|^2 {self.noise_energy:.3g}")
        interval = self.ci95
        if interval is not None:
            lo, hi = interval
            text = f"{head}; 95% CI [{lo:.5f}, {hi:.5f}]; {diag}"
        else:
            text = (f"{head}; UNRELIABLE, no interval shown: " + " ".join(self.warnings)
                    + f" ({diag})")
        if self.class_weight is not None:
            text = ("class-weighted risk (1/n) sum w_y loss, the objective of the model's "
                    f"class_weight_ [{', '.join(f'{w:.4g}' for w in self.class_weight)}]: {text}")
        text += "" if self.baseline is None else "\n" + self.baseline.describe()
        if self.unweighted is not None:     # which holds the same rows' predictions
            return text + ("\nunweighted risk (comparable with models fitted without class "
                           "weights): " + self.unweighted.describe())
        return text if self.predictions is None else text + "\n" + self.predictions.describe()


def constant_intercept(loss: str, share: float) -> float:
    """The b minimizing ``share f(b) + (1 - share) f(-b)``: the link of the loss at the class
    share (exponential: half the log-odds; logistic: the log-odds; quadratic: 2 share - 1), by
    its record (``Loss.best_constant``)."""
    record = loss_record(loss)
    if record.task != "classification":
        raise InvalidInputError(f"loss={loss!r} has no link at a class share; the constant model "
                                "is defined for classification losses")
    return record.best_constant(share)


class ConstantBaseline:
    """Streaming sums for the best constant model beside a model on a private hold-out.

    ``add(values, groups, weights)`` per batch: the model's per-row IWP values (already times the
    row weights), each row's released class (0..G-1) and the row weights (None: 1).  The constant
    model's per-row value depends only on the released class and the weight (``s_i v0(g)``), so
    per class a two-column accumulator of (model value, weight) gives, once b is known after the
    pass, the constant's risk and the paired difference's mean and variance without a second read.
    ``tables``: each head's 2 x 2 label weights, ``head_classes``: the released class each head
    calls its own (binary: one head, class 1 = the positive label).  ``boost``: per released
    class the addition to the weight of F(z) (k classes' class weights, ``glm_loss_values_table``);
    ``class_weighted``: the tables hold class weights (``ConstantRisk.class_weighted``).
    """

    def __init__(self, loss: str, tables, head_classes, n_groups: int, boost=None,
                 class_weighted: bool = False):
        self.loss = loss
        self.tables = [tuple(float(w) for w in t) for t in tables]
        self.head_classes = [int(c) for c in head_classes]
        self.groups = [RiskAccumulator(2) for _ in range(int(n_groups))]
        self.boost = None if boost is None else np.asarray(boost, dtype=np.float64)
        self.class_weighted = bool(class_weighted)

    def add(self, values, groups, weights=None) -> None:
        values = np.asarray(values, dtype=np.float64)
        groups = np.asarray(groups)
        w = np.ones_like(values) if weights is None else np.asarray(weights, dtype=np.float64)
        for g, acc in enumerate(self.groups):
            mask = groups == g
            if mask.any():
                acc.add(np.column_stack([values[mask], w[mask]]))

    def result(self, model: RiskEstimate | None = None) -> ConstantRisk | None:
        """The constant model after the pass, its difference judged against ``model`` (the
        model's estimate of the same rows; None: the constant's own numbers only)."""
        from .losses import derivative
        n = sum(acc.n for acc in self.groups)
        if n < 2:
            return None
        weight_sums = np.array([acc.n * acc.mean[1] if acc.n else 0.0 for acc in self.groups])
        total = float(weight_sums.sum())
        if not total > 0:
            return None
        intercepts, shares = [], []
        # v0[g]: the constant model's IWP value of a row of released class g (weight 1)
        v0 = np.zeros(len(self.groups))
        for table, own in zip(self.tables, self.head_classes, strict=True):
            match_z, match_minus_z, other_z, other_minus_z = table
            rest = total - weight_sums[own]
            # the private risk of b is A f(b) + B f(-b): A, B the debiased weighted shares
            a = weight_sums[own] * match_z + rest * other_minus_z
            b_ = weight_sums[own] * match_minus_z + rest * other_z
            if self.boost is not None:      # F(z) of class g gains boost[g]; z = b for own
                boosted = weight_sums * self.boost
                a, b_ = a + boosted[own], b_ + float(boosted.sum()) - boosted[own]
            share = a / (a + b_)
            # a share estimated outside (0, 1) (a rare class under strong label noise) makes
            # the risk unbounded below in b: keep b finite at the share of half a row
            share = min(max(share, 0.5 / n), 1.0 - 0.5 / n)
            b = constant_intercept(self.loss, share)
            intercepts.append(b)
            shares.append(float(share))
            f_plus, f_minus = (float(v) for v in derivative(self.loss, 0, np.array([b, -b])))
            for g in range(len(self.groups)):
                v0[g] += (match_z * f_plus + match_minus_z * f_minus if g == own
                          else other_z * f_minus + other_minus_z * f_plus)
                if self.boost is not None:
                    v0[g] += self.boost[g] * (f_plus if g == own else f_minus)
        # per class g: difference d_i = v_i - v0[g] s_i, constant c_i = v0[g] s_i
        counts, d_mean, d_m2, c_mean, c_m2 = [], [], [], [], []
        for g, acc in enumerate(self.groups):
            if acc.n == 0:
                continue
            cov = acc.comoment
            counts.append(acc.n)
            d_mean.append(acc.mean[0] - v0[g] * acc.mean[1])
            d_m2.append(cov[0, 0] + v0[g] ** 2 * cov[1, 1] - 2.0 * v0[g] * cov[0, 1])
            c_mean.append(v0[g] * acc.mean[1])
            c_m2.append(v0[g] ** 2 * cov[1, 1])

        def pooled(means, m2s):
            counts_ = np.asarray(counts, dtype=np.float64)
            means_ = np.asarray(means)
            mean = float(np.dot(counts_, means_) / n)
            m2 = float(np.sum(m2s) + np.dot(counts_, (means_ - mean) ** 2))
            return mean, math.sqrt(max(m2, 0.0) / (n - 1) / n)

        risk, stderr = pooled(c_mean, c_m2)
        diff, diff_se = pooled(d_mean, d_m2)
        why = []
        if math.isfinite(diff) and diff + 1.96 * diff_se > 0:
            why.append(
                f"the model's private risk is not below the best constant model's by 1.96 "
                f"standard errors (difference {diff:+.5f} +- {diff_se:.5f}): on this hold-out "
                "the model is not shown to beat predicting from the class shares alone")
        return judge_difference(ConstantRisk(tuple(float(b) for b in intercepts), tuple(shares),
                                             risk, stderr, diff, diff_se, tuple(why),
                                             self.class_weighted), model)


class RiskAccumulator:
    """Streaming sums of per-row IWP loss values for k models at once (one column each).

    ``add(values)`` with an (m,) or (m, k) array per batch; ``estimates(...)`` at the end.  Means
    and squared deviations are merged per batch (Chan et al.), so no sum of squares cancels.
    """

    def __init__(self, k: int = 1):
        self.k = int(k)
        self.n = 0
        self.mean = np.zeros(self.k)
        self.m2 = np.zeros(self.k)
        self.sum_abs = np.zeros(self.k)
        self.sum_sq = np.zeros(self.k)
        self.max_abs = np.zeros(self.k)
        self.comoment = np.zeros((self.k, self.k))  # sum of (v_i - mean)(v_i - mean)^T

    def covariance_of_means(self) -> np.ndarray:
        """(k, k) covariance of the k estimates (paired: the same rows score every model), so the
        standard error of a difference of two estimates is sqrt(C_aa + C_bb - 2 C_ab)."""
        if self.n < 2:
            return np.full((self.k, self.k), np.inf)
        return self.comoment / ((self.n - 1) * self.n)

    def add(self, values: np.ndarray) -> None:
        v = np.asarray(values, dtype=np.float64)
        if v.ndim == 1:
            v = v[:, None]
        m = v.shape[0]
        if m == 0:
            return
        with np.errstate(over="ignore", invalid="ignore"):
            bmean = v.mean(axis=0)
            centred = v - bmean
            bm2 = (centred * centred).sum(axis=0)
            n = self.n + m
            delta = bmean - self.mean
            self.mean = self.mean + delta * (m / n)
            self.m2 = self.m2 + bm2 + delta * delta * (self.n * m / n)
            if self.k > 1:
                self.comoment += centred.T @ centred + np.outer(delta, delta) * (self.n * m / n)
            a = np.abs(v)
            self.sum_abs += a.sum(axis=0)
            self.sum_sq += (a * a).sum(axis=0)
            self.max_abs = np.maximum(self.max_abs, a.max(axis=0))
        self.n = n

    def merge(self, other: RiskAccumulator) -> None:
        """Add the rows of ``other`` (the same k models scored on other rows: a shard of a
        distributed hold-out), as if its batches had been added here (Chan et al.)."""
        if other.k != self.k:
            raise InvalidInputError(f"cannot merge sums of {other.k} models into sums of {self.k}")
        if other.n == 0:
            return
        n = self.n + other.n
        with np.errstate(over="ignore", invalid="ignore"):
            delta = other.mean - self.mean
            self.mean = self.mean + delta * (other.n / n)
            self.m2 = self.m2 + other.m2 + delta * delta * (self.n * other.n / n)
            if self.k > 1:
                self.comoment = (self.comoment + other.comoment
                                 + np.outer(delta, delta) * (self.n * other.n / n))
            self.sum_abs = self.sum_abs + other.sum_abs
            self.sum_sq = self.sum_sq + other.sum_sq
            self.max_abs = np.maximum(self.max_abs, other.max_abs)
        self.n = n

    def estimates(self, loss: str, noise_energy=0.0) -> list[RiskEstimate]:
        """One RiskEstimate per column; ``noise_energy``: sigma^2 |theta|^2 per column (or one)."""
        if self.n == 0:
            raise InvalidInputError("the private hold-out has no rows; pass a release with at least one row")
        energy = np.broadcast_to(np.asarray(noise_energy, dtype=np.float64), (self.k,))
        out = []
        for j in range(self.k):
            out.append(_judge(loss, float(self.mean[j]), float(self.m2[j]), self.n,
                              float(self.sum_abs[j]), float(self.sum_sq[j]),
                              float(self.max_abs[j]), float(energy[j])))
        return out


def _judge(loss, mean, m2, n, sum_abs, sum_sq, max_abs, energy) -> RiskEstimate:
    var = m2 / (n - 1) if n > 1 else math.inf
    stderr = math.sqrt(var / n) if math.isfinite(var) else math.inf
    if sum_abs > 0 and math.isfinite(sum_sq) and sum_sq > 0:
        share = max_abs / sum_abs
        eff = sum_abs * sum_abs / sum_sq
    else:
        share, eff = (0.0, float(n)) if sum_abs == 0 else (1.0, 1.0)
    factor = noise_variance_factor(loss, energy)
    why = []
    if not (math.isfinite(mean) and math.isfinite(stderr)):
        why.append("the per-row values overflowed.")
    if eff < MIN_EFFECTIVE_ROWS:
        why.append(f"only {eff:.3g} rows effectively carry the sum (fewer than "
                   f"{MIN_EFFECTIVE_ROWS:g}).")
    if share > MAX_LARGEST_SHARE:
        why.append(f"one row carries {share:.1%} of the sum.")
    if LOSS_RECORDS[loss].heavy_tailed and factor * MIN_ROWS_PER_VARIANCE_FACTOR > n:
        why.append(f"sigma^2|theta|^2 = {energy:.3g} multiplies a row's variance by about "
                   f"exp({energy:.3g}) = {factor:.3g}, too much for {n:,} rows (the rare rows that "
                   "dominate the mean are mostly missing, so mean and standard error are too small).")
    # every loss here is >= 0: an interval reaching below 0 cannot cover the truth's tail honestly
    if math.isfinite(mean) and math.isfinite(stderr) and mean - 1.96 * stderr < 0:
        why.append("the 95% interval reaches below 0, impossible for a non-negative loss: the "
                   "standard error does not describe this estimate.")
    if why:
        why.append("Use a model with smaller sigma^2|theta|^2 (a variance cap, a smaller step or a "
                   "larger alpha) or a larger hold-out.")
    return RiskEstimate(mean, stderr, int(n), share, eff, energy, factor, not why, tuple(why))
