"""Per-head configuration and state: the contract between the driver and the kernels.

A *head* is one model trained during a scan of the data (e.g. clean / naive / IWP, or several
step sizes).  ``HeadConfig`` is immutable and describes what the head computes; ``HeadState`` is
everything that must be carried from one chunk to the next (and written in a checkpoint) so that
the result does not depend on how the stream is chunked.

Codes are small integers because only arrays, scalars and integer codes cross into a kernel;
names are turned into codes once, here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..label_noise import label_tilde_from_keep
from ..losses import LOSS_CODES

MODE_CODES = {"clean": 0, "naive": 1, "iwp": 2}
SCHEDULE_CODES = {"constant": 0, "inverse": 1}
# "paper" is resolved by the driver into a constant step (it needs n), so it has no kernel code.
SCHEDULES = ("constant", "inverse", "paper")

# Indices into HeadState.telemetry (float64 array).
TELEMETRY_FIELDS = (
    "rows_seen",          # rows consumed by updates (the partial carried batch is not counted yet)
    "batches",            # number of SGD updates done
    "projection_hits",    # updates after which the projection was active
    "grad_norm_mean",     # running mean of the per-batch gradient norm (Welford)
    "grad_norm_m2",       # running sum of squared deviations (Welford); variance = m2/(batches-1)
    "max_noise_energy",   # largest sigma^2 |theta|^2 = 2*tau reached (0 without feature noise)
    "cap_hits",           # updates after which the variance cap was active
)
TELEMETRY_INDEX = {name: i for i, name in enumerate(TELEMETRY_FIELDS)}


@dataclass(frozen=True)
class HeadConfig:
    """What one head computes.  All fields are plain Python/NumPy values (no names in kernels).

    loss:            key of ``iwpfast.losses.LOSS_CODES`` ("exponential", "quadratic", "logistic",
                     "squared_error").
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
    label_weights:   the 2 x 2 table of label weights (match_z, match_minus_z, other_z,
                     other_minus_z) of (F(z), F(-z)) for rows whose label is / is not the head's
                     class (docs/math.md "k classes"; ``iwpfast.estimates.label_weight_table``);
                     None: from ``label_keep_prob`` (the binary S~, 1 - S~).  Mode iwp only.
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

    @property
    def loss_code(self) -> int:
        return LOSS_CODES[self.loss]

    @property
    def mode_code(self) -> int:
        return MODE_CODES[self.mode]

    @property
    def schedule_code(self) -> int:
        return SCHEDULE_CODES[self.schedule]

    @property
    def label_table(self) -> tuple[float, float, float, float]:
        """(match_z, match_minus_z, other_z, other_minus_z) as the kernel uses it: the given
        ``label_weights`` in mode iwp, else (S~, 1 - S~) twice (public labels: (1, 0) twice)."""
        if self.label_weights is not None and self.mode == "iwp":
            return tuple(float(w) for w in self.label_weights)
        tilde = self.label_tilde
        other = 1.0 - tilde
        return (tilde, other, tilde, other)

    @property
    def label_tilde(self) -> float:
        """S~ = 1/(1 - exp(-eps_y)) = S / (2S - 1); 1 for public labels (and for clean/naive)."""
        if self.label_keep_prob is None or self.mode != "iwp":
            return 1.0
        return label_tilde_from_keep(self.label_keep_prob)


@dataclass
class HeadState:
    """Everything carried across chunks for one head (float64 accumulation throughout).

    theta, theta_avg: (p,) float64.   intercept, intercept_avg: floats stored in (1,) arrays so the
    kernel can update them in place.  step: number of updates done.  n_avg: number of iterates in
    the running average.  carry_X: (p, B) float64 rows of the incomplete batch at a chunk's end,
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
    counters: np.ndarray = field(default_factory=lambda: np.zeros(4, dtype=np.int64))
    # counters: [step, n_avg, carry_n, trace_n]

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
            carry_X=np.zeros((p, cfg.batch_size)),
            carry_y=np.zeros(cfg.batch_size),
            telemetry=np.zeros(len(TELEMETRY_FIELDS)),
            trace=np.zeros((trace_capacity, p + 1)),
            trace_steps=np.zeros(trace_capacity, dtype=np.int64),
        )

    # named views of the integer counters (kept in one array so the kernel updates them in place)
    @property
    def step(self) -> int:
        return int(self.counters[0])

    @property
    def n_avg(self) -> int:
        return int(self.counters[1])

    @property
    def carry_n(self) -> int:
        return int(self.counters[2])

    @property
    def trace_n(self) -> int:
        return int(self.counters[3])

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
