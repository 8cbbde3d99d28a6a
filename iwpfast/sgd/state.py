"""Per-head configuration and state: the contract between the driver and the kernels.

A *head* is one model trained during a scan of the data (e.g. clean / naive / IWP, or several
step sizes).  ``HeadConfig`` is immutable and describes what the head computes; ``HeadState`` is
everything that must be carried from one chunk to the next (and written in a checkpoint) so that
the result does not depend on how the stream is chunked.

Codes are small integers because only arrays, scalars and integer codes cross into a kernel;
names are turned into codes here, with the tables of ``iwpfast._kernels.abi`` (the kernels' ABI:
codes, packed-parameter, counter and telemetry positions, defined once).  ``check_config`` is the
one validation of a ``HeadConfig``, shared by the kernel wrapper and the NumPy twin.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .._kernels.abi import (  # the kernels' ABI (codes, positions): defined once there
    C_CARRY,
    C_NAVG,
    C_STEP,
    C_TRACE,
    COUNTER_FIELDS,
    LAW_CODES,
    LAW_GAUSSIAN,
    LOSS_CODES,
    MODE_CODES,
    SCHEDULE_CODES,
    TELEMETRY_FIELDS,
    TELEMETRY_INDEX,
)
from ..exceptions import InvalidInputError, SampleWeightError
from ..label_noise import label_tilde_from_keep
from ..losses import CLASSIFICATION_LOSSES, LOSS_RECORDS
from ..noise_registry import LearnerLaw

__all__ = ["HeadConfig", "HeadState", "CheckedConfig", "check_config", "check_sample_weight",
           "first_invalid_weight", "SCHEDULES", "MODE_CODES",
           "SCHEDULE_CODES", "LOSS_CODES", "TELEMETRY_FIELDS", "TELEMETRY_INDEX", "COUNTER_FIELDS",
           "MAX_TRUNCATION"]

# "paper" is resolved by the driver into a constant step (it needs n), so it has no kernel code.
SCHEDULES = ("constant", "inverse", "paper")

# Eulerian numbers A(2K, k) overflow float64 precision long before this; the estimator's variance
# explodes already at K ~ 5 (docs/design.md section 3).
MAX_TRUNCATION = 40


@dataclass(frozen=True)
class HeadConfig:
    """What one head computes.  All fields are plain Python/NumPy values (no names in kernels).

    loss:            one of ``iwpfast.losses.LOSSES`` ("exponential", "quadratic", "logistic",
                     "squared_error"); its kernel code is ``iwpfast._kernels.abi.LOSS_CODES``.
    mode:            "clean" | "naive" | "iwp" (naive = IWP formulas with tau = 0 and S~ = 1).
    n_features:      p.
    noise_var:       (p,) float64 per-feature noise variances s_j = sigma_j^2 (zeros for clean).
    label_keep_prob: S(eps_y) = 1/(1+exp(-eps_y)) or None for public labels / regression.
    target_noise_var: sigma_y^2 for regression (only enters the IWP loss value, not the gradient).
    truncation:      K for the logistic loss (exact gradient of the K-truncated IWP loss).
    batch_size:      B rows per update; the last partial batch of the stream is used.
    alpha:           l2 strength lambda (gradient gets + lambda * theta, not the intercept).
    schedule:        "constant" | "inverse" (gamma_t = gamma0 / (1 + mu * gamma0 * t)); the driver
                     turns "paper" into "constant".
    learning_rate:   gamma0.
    mu:              mu of the inverse schedule (defaults to alpha in the driver).
    radius:          R of the projection on the L2 ball of theta (intercept excluded); inf = none.
    variance_cap:    cap on sigma^2 |theta|^2 = 2 tau (theta scaled down when exceeded); inf = none.
    fit_intercept:   learn a noise-free intercept b (score = theta^T x + b).
    average_start:   Polyak averaging of theta (and b) over the iterates after update number
                     ``average_start`` (0 = all iterates; a negative value = no averaging).
    trace_every:     record (theta, b) every k updates into the trace buffer (0 = never).
    label_class:     None: labels are -1/+1.  An integer c: labels are class indices 0..k-1 and this
                     is the one-vs-rest head of class c (its label is +1 where the index is c).
    weighted:        the rows carry public sample weights s_i >= 0 (the engine's ``sample_weight``):
                     each row's gradient is multiplied by s_i, an unbiased gradient of the weighted
                     risk (1/n) sum s_i l_i (docs/math.md "Sample weights"); the carried rows then
                     hold their weight as row p of carry_X.
    label_weights:   the 2 x 2 table of label weights (match_z, match_minus_z, other_z,
                     other_minus_z) of (F(z), F(-z)) for rows whose label is / is not the head's
                     class (docs/math.md "k classes"; ``iwpfast.estimates.label_weight_table``);
                     None: from ``label_keep_prob`` (the binary S~, 1 - S~).  Any mode (a
                     class-weighted head of a clean fit has its own table).
    class_boost:     None, or per class index an addition to the weight of F(z) of the rows
                     released as that class: the class weights of a one-vs-rest head
                     (``label_class`` set; docs/math.md "Class weights"), with ``label_weights``.
    noise_law:       None (Gaussian feature noise of variances ``noise_var``) or the learner's
                     law (``iwpfast.noise_registry.LearnerLaw``, e.g. the
                     ``iwpfast.laplace.DiscreteLaplace`` of a pure-epsilon release); ``noise_var``
                     is then its exact variance.  Mode iwp with a loss the law debiases by its own
                     inverse (the Laplace law's exponential loss) needs a ``variance_cap`` the law
                     accepts (``check_cap``: below ``energy_limit``; docs/math.md "Pure epsilon").
    """

    loss: str
    mode: str
    n_features: int
    noise_var: np.ndarray
    label_keep_prob: float | None = None
    target_noise_var: float = 0.0
    truncation: int = 2
    batch_size: int = 128
    alpha: float = 0.0
    schedule: str = "constant"
    learning_rate: float = 1e-3
    mu: float = 0.0
    radius: float = float("inf")
    variance_cap: float = float("inf")
    fit_intercept: bool = False
    average_start: int = -1
    trace_every: int = 0
    label_class: int | None = None
    label_weights: tuple | None = None
    class_boost: tuple | None = None
    weighted: bool = False
    noise_law: LearnerLaw | None = None

    @property
    def n_columns(self) -> int:
        """Columns a chunk hands the kernel: the p features, then the sample weights if weighted."""
        return self.n_features + (1 if self.weighted else 0)

    @property
    def label_table(self) -> tuple[float, float, float, float]:
        """(match_z, match_minus_z, other_z, other_minus_z) as the kernel uses it: the given
        ``label_weights`` (in every mode: a class-weighted head of a clean fit has (w_+, 0, w_-,
        0)), else (S~, 1 - S~) twice (public labels: (1, 0) twice)."""
        if self.label_weights is not None:
            match_z, match_minus_z, other_z, other_minus_z = (float(w) for w in self.label_weights)
            return (match_z, match_minus_z, other_z, other_minus_z)
        tilde = self.label_tilde
        other = 1.0 - tilde
        return (tilde, other, tilde, other)

    @property
    def label_tilde(self) -> float:
        """S~ = 1/(1 - exp(-eps_y)) = S / (2S - 1); 1 for public labels (and for clean/naive)."""
        if self.label_keep_prob is None or self.mode != "iwp":
            return 1.0
        return label_tilde_from_keep(self.label_keep_prob)


class CheckedConfig(NamedTuple):
    """A ``HeadConfig`` validated and converted once (``check_config``): what the kernel wrapper
    packs and the NumPy twin runs, so both refuse the same configs with the same messages."""

    loss: str
    mode: str
    schedule: str
    n_features: int
    noise_var: np.ndarray       # (p,) float64 s as the update uses it: zeros outside mode iwp
    truncation: int
    batch_size: int
    trace_every: int
    average_start: int
    alpha: float
    learning_rate: float
    mu: float
    radius: float
    variance_cap: float
    fit_intercept: bool
    label_table: tuple          # (match_z, match_minus_z, other_z, other_minus_z)
    label_class: int | None
    class_boost: tuple | None   # per class index, added to the weight of F(z) (k-class weights)
    weighted: bool
    noise_law: int              # a LAW_CODES value (_kernels/abi.py): the inverse the kernel runs
    noise_packed: np.ndarray    # what the kernel reads: noise_var, or the law's kernel_noise()
    laplace: LearnerLaw | None  # the law of a head run by its own inverse ("product"; the twin
                                # reads its exponential_factor), None: the variance form


def _finite_number(value, name: str, *, minimum: float | None = None, strict: bool = False,
                   allow_inf: bool = False) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"HeadConfig.{name}={value!r} must be a number") from None
    if math.isnan(number) or (math.isinf(number) and not allow_inf):
        raise InvalidInputError(f"HeadConfig.{name}={value!r} must be a finite number")
    if minimum is not None and (number < minimum or (strict and number == minimum)):
        relation = ">" if strict else ">="
        raise InvalidInputError(f"HeadConfig.{name}={value!r} must be {relation} {minimum}")
    return number


def _integer(value, name: str, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < minimum:
        raise InvalidInputError(f"HeadConfig.{name}={value!r} must be an integer >= {minimum}")
    return int(value)


def check_config(cfg: HeadConfig) -> CheckedConfig:
    """Validate every field of ``cfg`` (``InvalidInputError`` naming the field and the fix) and
    return them converted: the one check shared by ``iwpfast.sgd.engine`` and its NumPy twin
    ``iwpfast.sgd.reference``.

    Outside mode iwp nothing is corrected: the returned ``noise_var`` is zeros there (no
    ``-c s*theta`` term, no variance cap, max_noise_energy stays 0; docs/internals.md)."""
    if not isinstance(cfg, HeadConfig):
        raise InvalidInputError(f"cfg must be an iwpfast.sgd.state.HeadConfig, got {type(cfg).__name__}")
    if cfg.loss not in LOSS_RECORDS:      # the kernels' code: checked where they are called
        raise InvalidInputError(f"HeadConfig.loss={cfg.loss!r} is unknown; choose one of "
                                f"{', '.join(LOSS_RECORDS)}")
    if cfg.mode not in MODE_CODES:
        raise InvalidInputError(f"HeadConfig.mode={cfg.mode!r} is unknown; choose one of "
                                f"{', '.join(MODE_CODES)}")
    if cfg.schedule not in SCHEDULE_CODES:
        hint = (" (the driver turns 'paper' into a constant step with "
                "iwpfast.sgd.schedules.paper_learning_rate)" if cfg.schedule == "paper" else "")
        raise InvalidInputError(f"HeadConfig.schedule={cfg.schedule!r} cannot run in the kernel; "
                                f"choose one of {', '.join(SCHEDULE_CODES)}{hint}")
    p = _integer(cfg.n_features, "n_features", 1)
    noise_var = np.asarray(cfg.noise_var, dtype=np.float64)
    if noise_var.ndim == 0:
        noise_var = np.full(p, float(noise_var))
    if noise_var.shape != (p,):
        raise InvalidInputError(f"HeadConfig.noise_var has shape {noise_var.shape}; pass one variance "
                                f"per feature, shape ({p},)")
    if not np.all(np.isfinite(noise_var)) or np.any(noise_var < 0):
        bad = int(np.flatnonzero(~(np.isfinite(noise_var) & (noise_var >= 0)))[0])
        raise InvalidInputError(f"HeadConfig.noise_var[{bad}]={noise_var[bad]!r}: noise variances "
                                "sigma_j^2 must be finite and >= 0")
    truncation = _integer(cfg.truncation, "truncation", 0)
    if truncation > MAX_TRUNCATION:
        raise InvalidInputError(f"HeadConfig.truncation={truncation} is too large (at most "
                                f"{MAX_TRUNCATION}; the estimator's variance explodes beyond K ~ 5): "
                                "choose K by iwpfast.transforms")
    batch_size = _integer(cfg.batch_size, "batch_size", 1)
    trace_every = _integer(cfg.trace_every, "trace_every", 0)
    if isinstance(cfg.average_start, (bool, np.bool_)) \
            or not isinstance(cfg.average_start, (int, np.integer)):
        raise InvalidInputError(f"HeadConfig.average_start={cfg.average_start!r} must be an integer "
                                "(negative = no averaging)")
    alpha = _finite_number(cfg.alpha, "alpha", minimum=0.0)
    learning_rate = _finite_number(cfg.learning_rate, "learning_rate", minimum=0.0, strict=True)
    mu = _finite_number(cfg.mu, "mu", minimum=0.0)
    radius = _finite_number(cfg.radius, "radius", minimum=0.0, strict=True, allow_inf=True)
    variance_cap = _finite_number(cfg.variance_cap, "variance_cap", minimum=0.0, strict=True,
                                  allow_inf=True)
    label_tilde = 1.0
    if cfg.loss in CLASSIFICATION_LOSSES and cfg.mode == "iwp" and cfg.label_keep_prob is not None:
        keep = _finite_number(cfg.label_keep_prob, "label_keep_prob")
        if not 0.5 < keep <= 1.0:
            raise InvalidInputError(f"HeadConfig.label_keep_prob={keep!r} must be in (0.5, 1] "
                                    "(S(eps_y) = 1/(1+exp(-eps_y)) with eps_y > 0; None = public labels)")
        label_tilde = label_tilde_from_keep(keep)
    table = (label_tilde, 1.0 - label_tilde, label_tilde, 1.0 - label_tilde)
    if cfg.label_weights is not None:
        if cfg.loss not in CLASSIFICATION_LOSSES:
            raise InvalidInputError(f"HeadConfig.label_weights is for classification losses, not "
                                    f"{cfg.loss!r}; drop it")
        weights = np.asarray(cfg.label_weights, dtype=np.float64) if np.ndim(cfg.label_weights) \
            else np.zeros(0)
        if weights.shape not in ((4,), (2, 2)) or not np.all(np.isfinite(weights)):
            raise InvalidInputError(f"HeadConfig.label_weights={cfg.label_weights!r} must be 4 finite "
                                    "numbers (match_z, match_minus_z, other_z, other_minus_z): use "
                                    "iwpfast.label_noise.label_weight_table(epsilon_y, k)")
        match_z, match_minus_z, other_z, other_minus_z = (float(w) for w in weights.ravel())
        table = (match_z, match_minus_z, other_z, other_minus_z)
    label_class = None
    if cfg.label_class is not None:
        if cfg.loss not in CLASSIFICATION_LOSSES:
            raise InvalidInputError(f"HeadConfig.label_class is for classification losses, not "
                                    f"{cfg.loss!r}; drop it")
        label_class = _integer(cfg.label_class, "label_class", 0)
    class_boost = None
    if cfg.class_boost is not None:
        boost = np.asarray(cfg.class_boost, dtype=np.float64) if np.ndim(cfg.class_boost) == 1 \
            else np.zeros(0)
        if label_class is None or boost.size <= label_class or not np.all(np.isfinite(boost)):
            raise InvalidInputError(
                f"HeadConfig.class_boost={cfg.class_boost!r} must be one finite number per class "
                "index of a one-vs-rest head (label_class set, below the number of classes): use "
                "the estimator's class_weight, which derives it")
        class_boost = tuple(float(b) for b in boost)
    if cfg.mode != "iwp":
        noise_var = np.zeros(p)
    law_code, packed, laplace = _check_noise_law(cfg, p, noise_var, variance_cap)
    return CheckedConfig(
        loss=cfg.loss, mode=cfg.mode, schedule=cfg.schedule, n_features=p,
        noise_var=np.ascontiguousarray(noise_var), truncation=truncation, batch_size=batch_size,
        trace_every=trace_every, average_start=int(cfg.average_start), alpha=alpha,
        learning_rate=learning_rate, mu=mu, radius=radius, variance_cap=variance_cap,
        fit_intercept=bool(cfg.fit_intercept), label_table=table, label_class=label_class,
        class_boost=class_boost, weighted=bool(cfg.weighted), noise_law=law_code,
        noise_packed=packed, laplace=laplace)


def _check_noise_law(cfg: HeadConfig, p: int, noise_var: np.ndarray, variance_cap: float):
    """(law code, the kernel's noise array, the law or None) of a checked config: the law says
    how it debiases the loss (``LearnerLaw.inverse_for``); the variance form runs as Gaussian."""
    gaussian = (LAW_GAUSSIAN, np.ascontiguousarray(noise_var), None)
    if cfg.noise_law is None:
        return gaussian
    if not isinstance(cfg.noise_law, LearnerLaw):
        raise InvalidInputError(f"HeadConfig.noise_law={cfg.noise_law!r} must be None (Gaussian) or a "
                                "noise law of the learner (iwpfast.laplace.DiscreteLaplace)")
    law = cfg.noise_law.broadcast(p)
    if not np.allclose(np.asarray(cfg.noise_var, dtype=np.float64), law.variance, rtol=1e-12, atol=0):
        raise InvalidInputError("HeadConfig.noise_var must be noise_law.variance (the exact variance "
                                "of the release's law); pass noise_var=noise_law.variance")
    if cfg.mode != "iwp":
        return gaussian
    form = law.inverse_for(cfg.loss)
    if form is None:
        raise InvalidInputError(law.refusal(cfg.loss))
    if form == "variance":
        return gaussian             # e.g. quadratic losses: the Gaussian formula with s = Var, exactly
    law.check_cap(variance_cap, "HeadConfig.variance_cap")
    code = LAW_CODES.get(law.inverse)
    if code is None:
        raise InvalidInputError(
            f"noise law {type(law).__name__} names the inverse {law.inverse!r}, which has no kernel "
            "code: add it to LAW_CODES in iwpfast/_kernels/abi.py and its branch to "
            "iwpfast/_kernels/sgd.py (docs/extending.md \"A noise law\")")
    return code, np.ascontiguousarray(law.kernel_noise()), law


def first_invalid_weight(weights: np.ndarray) -> int:
    """Index of the first sample weight that is not finite and >= 0, or -1.

    One sum and one minimum (no temporary array) in the usual case: a finite sum of values whose
    minimum is >= 0 has no NaN and no inf; only a failing (or overflowing) check looks for the row."""
    w = np.asarray(weights)
    if w.size == 0:
        return -1
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.add.reduce(w)) and w.min() >= 0:
            return -1
        bad = np.flatnonzero(~(np.isfinite(w) & (w >= 0)))
    return int(bad[0]) if bad.size else -1


def check_sample_weight(cfg: HeadConfig, sample_weight, n: int, dtype) -> np.ndarray | None:
    """The sample weights of a chunk of n rows as the update reads them: a contiguous array in the
    features' ``dtype`` (the kernel reads them as one more column), each finite and >= 0; None for
    an unweighted head.  The one check shared by ``iwpfast.sgd.engine`` and its NumPy twin."""
    if not cfg.weighted:
        if sample_weight is not None:
            raise InvalidInputError("sample_weight given for a head without weights: make its "
                                    "HeadConfig with weighted=True (weights cannot start mid-pass)")
        return None
    if sample_weight is None:
        raise InvalidInputError("HeadConfig.weighted=True: pass sample_weight=... (one weight >= 0 "
                                "per row of X), or make the config with weighted=False")
    w = np.asarray(sample_weight)
    if w.ndim != 1 or w.shape[0] != n:
        raise InvalidInputError(f"sample_weight has shape {w.shape}; expected ({n},), one weight per "
                                "row of X")
    if w.dtype.kind not in "fiub":
        raise InvalidInputError(f"sample_weight has dtype {w.dtype}; weights must be real numbers >= 0")
    with np.errstate(over="ignore", invalid="ignore"):     # an overflow is reported below
        w = np.ascontiguousarray(w, dtype=dtype)
    bad = first_invalid_weight(w)
    if bad >= 0:
        given = np.asarray(sample_weight)[bad].item()
        why = (f"it overflows the features' dtype {np.dtype(dtype)}" if np.isfinite(given) and given >= 0
               else "sample weights must be finite and >= 0")
        # row and reason travel with the error: the streaming driver names the column and the row
        # of the source with them instead of checking the weights a second time
        raise SampleWeightError(f"sample_weight[{bad}] = {given!r} (row {bad} of this chunk): {why}",
                                bad, why)
    return w


@dataclass
class HeadState:
    """Everything carried across chunks for one head (float64 accumulation throughout).

    theta, theta_avg: (p,) float64.   intercept, intercept_avg: floats stored in (1,) arrays so the
    kernel can update them in place.  step: number of updates done.  n_avg: number of iterates in
    the running average.  carry_X: (p, B) float64 rows of the incomplete batch at a chunk's end
    ((p + 1, B) for a weighted head: row p holds the rows' sample weights),
    carry_y: (B,) float64, carry_n: how many of them are filled.  telemetry: see TELEMETRY_FIELDS.
    trace: (capacity, p+1) float64 rows of (theta, b) recorded every ``trace_every`` updates since the
    driver last drained it; trace_n: rows filled.  trace_steps: the update number of each row.
    """

    theta: np.ndarray
    theta_avg: np.ndarray
    intercept: np.ndarray
    intercept_avg: np.ndarray
    carry_X: np.ndarray
    carry_y: np.ndarray
    telemetry: np.ndarray
    trace: np.ndarray
    trace_steps: np.ndarray
    counters: np.ndarray = field(default_factory=lambda: np.zeros(len(COUNTER_FIELDS), dtype=np.int64))
    # counters: COUNTER_FIELDS = (step, n_avg, carry_n, trace_n), positions C_* of _kernels/abi.py

    @classmethod
    def new(cls, cfg: HeadConfig, theta0: np.ndarray | None = None, intercept0: float = 0.0,
            trace_capacity: int = 0) -> HeadState:
        p = cfg.n_features
        theta = np.zeros(p) if theta0 is None else np.array(theta0, dtype=np.float64, copy=True)
        if theta.shape != (p,):
            raise ValueError(f"theta0 has shape {theta.shape}, expected ({p},)")
        return cls(
            theta=theta,
            theta_avg=np.zeros(p),
            intercept=np.array([float(intercept0)]),
            intercept_avg=np.zeros(1),
            carry_X=np.zeros((cfg.n_columns, cfg.batch_size)),
            carry_y=np.zeros(cfg.batch_size),
            telemetry=np.zeros(len(TELEMETRY_FIELDS)),
            trace=np.zeros((trace_capacity, p + 1)),
            trace_steps=np.zeros(trace_capacity, dtype=np.int64),
        )

    # named views of the integer counters (kept in one array so the kernel updates them in place)
    @property
    def step(self) -> int:
        return int(self.counters[C_STEP])

    @property
    def n_avg(self) -> int:
        return int(self.counters[C_NAVG])

    @property
    def carry_n(self) -> int:
        return int(self.counters[C_CARRY])

    @property
    def trace_n(self) -> int:
        return int(self.counters[C_TRACE])

    def arrays(self) -> dict[str, np.ndarray]:
        """All state as named arrays (what a checkpoint stores)."""
        return {k: getattr(self, k) for k in (
            "theta", "theta_avg", "intercept", "intercept_avg", "carry_X", "carry_y",
            "telemetry", "trace", "trace_steps", "counters")}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> HeadState:
        return cls(**{k: np.array(v, copy=True) for k, v in arrays.items()})

    def copy(self) -> HeadState:
        return HeadState.from_arrays(self.arrays())

    def coef(self, averaged: bool) -> tuple[np.ndarray, float]:
        """(theta, b) of the last iterate, or of the Polyak average when one was kept."""
        if averaged and self.n_avg > 0:
            return self.theta_avg.copy(), float(self.intercept_avg[0])
        return self.theta.copy(), float(self.intercept[0])


def divergence_advice(cfg: HeadConfig | CheckedConfig, step_given: bool = True) -> str:
    """What to change after a divergence, fitted to the settings in force (no advice to set a
    variance cap that is set, or that cannot act without feature noise).  ``step_given=False``:
    the step was derived automatically, so the advice does not name a setting the user never
    touched (the grid already tried smaller steps)."""
    import math
    tips = ([f"a smaller learning_rate (CLI: --learning-rate; now {cfg.learning_rate:g})"]
            if step_given else [])
    if math.isfinite(cfg.radius):
        tips.append(f"a smaller radius (now {cfg.radius:g})")
    else:
        tips.append("a projection radius (radius=..., none now)")
    if cfg.mode == "iwp" and np.any(np.asarray(cfg.noise_var) > 0):
        if math.isfinite(cfg.variance_cap):
            tips.append(f"a smaller variance_cap (now {cfg.variance_cap:g})")
        else:
            tips.append("a variance_cap such as 2 (none now)")
    said = tips[0] if len(tips) == 1 else ", ".join(tips[:-1]) + " or " + tips[-1]
    auto = "" if step_given else ("The learning rate was derived automatically (the grid's "
                                  "smaller steps diverged too). ")
    intercept = ""
    # private labels: a keep probability (HeadConfig), or a table with a weight on F(-z)
    table = getattr(cfg, "label_table", None)
    private = (getattr(cfg, "label_keep_prob", None) is not None
               or (table is not None and (table[1] != 0.0 or table[3] != 0.0)))
    if cfg.fit_intercept and cfg.mode == "iwp" and private:
        # measured (issue 20's array: 20 % positives, eps_y = 2): radius=3 still diverged,
        # fit_intercept=False did not; the corrected per-row loss S~ e^-z + (1 - S~) e^z is
        # unbounded below once |z| > eps_y / 2, and nothing projects b
        intercept = (" The radius and the variance cap bound theta, not the intercept: with "
                     "private labels a drifting intercept makes the label weights grow like "
                     "e^|intercept| (fit_intercept=False keeps it at 0).")
    return (auto + "Use " + said
            + "; also check that the features of that batch are finite and scaled (a release's "
            "lie in [-1, 1] plus noise)." + intercept)
