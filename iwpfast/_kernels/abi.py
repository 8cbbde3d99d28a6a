"""The kernels' ABI: every integer code and array position shared by the SGD kernels
(``_kernels/sgd.py``) and the Python side (``iwpfast.sgd.state``, ``engine``, ``reference``,
``driver``).  Only arrays, scalars and integer codes cross into a kernel, so these numbers are the
contract; they are defined here once and ``tests/test_abi.py`` pins them.

Plain Python constants (no Numba import): the kernels read them as compile-time constants, the
wrapper imports them without compiling anything.

- codes: ``LOSS_*``, ``MODE_*``, ``SCHEDULE_*``, ``LAW_*`` and the name -> code dicts (and the
  blocks of a Laplace head's noise array, ``NOISE_*_BLOCK``);
- ``fparams`` (float64) and ``iparams`` (int64): one head's configuration, packed by
  ``iwpfast.sgd.engine`` with ``pack_fparams`` / ``pack_iparams`` from named values;
- ``counters`` (int64) and ``telemetry`` (float64): the per-head state the kernel updates in place;
- ``NO_DIVERGENCE``: a kernel's return value when theta stayed finite (else the row index).
"""
from __future__ import annotations

import numpy as np

# ------------------------------------------------------------------------------ codes
LOSS_EXPONENTIAL, LOSS_QUADRATIC, LOSS_LOGISTIC, LOSS_SQUARED_ERROR = 0, 1, 2, 3
LOSS_CODES = {"exponential": LOSS_EXPONENTIAL, "quadratic": LOSS_QUADRATIC,
              "logistic": LOSS_LOGISTIC, "squared_error": LOSS_SQUARED_ERROR}
#: the codes the SGD kernel has branches for (``_kernels/sgd.py``: ``_row_scalars``, whose final
#: ``else`` is the squared error, and ``_table_row_scalars``, whose final ``else`` is the
#: logistic): ``iwpfast.sgd.engine`` refuses any other code rather than run it as the squared
#: error.  A code goes here with its two branches (``tests/test_abi.py`` reads them).
SGD_KERNEL_LOSS_CODES = (LOSS_EXPONENTIAL, LOSS_QUADRATIC, LOSS_LOGISTIC, LOSS_SQUARED_ERROR)
#: the losses whose hold-out risk ``_kernels/score.py`` computes (the others: the NumPy step)
SCORE_KERNEL_LOSSES = ("exponential", "quadratic", "squared_error")

MODE_CLEAN, MODE_NAIVE, MODE_IWP = 0, 1, 2
MODE_CODES = {"clean": MODE_CLEAN, "naive": MODE_NAIVE, "iwp": MODE_IWP}

# the feature noise law of an IWP head: Gaussian (the Weierstrass inverse, tau = sum s_j theta_j^2
# / 2) or discrete Laplace with the exponential loss (tau = -sum log kappa_j; docs/math.md "Pure
# epsilon").  A Laplace release with the quadratic losses runs as LAW_GAUSSIAN with s_j = the exact
# Laplace variance (its inverse only involves the variance).
LAW_GAUSSIAN, LAW_LAPLACE = 0, 1
LAW_CODES = {"gaussian": LAW_GAUSSIAN, "laplace": LAW_LAPLACE}
# A LAW_LAPLACE head's noise array holds 3 blocks of p: the variances Var_j (what the cap and the
# telemetry read, as s_j for a Gaussian head), c_j = a_j / (1 - a_j)^2 and the grids L_j
# (kappa_j = 1 - 4 c_j sinh^2(L_j theta_j / 2)); a LAW_GAUSSIAN head's holds the first block only.
NOISE_VARIANCE_BLOCK, NOISE_CURVATURE_BLOCK, NOISE_GRID_BLOCK = 0, 1, 2

# "paper" is resolved by the driver into a constant step (it needs n): it has no kernel code
SCHEDULE_CONSTANT, SCHEDULE_INVERSE = 0, 1
SCHEDULE_CODES = {"constant": SCHEDULE_CONSTANT, "inverse": SCHEDULE_INVERSE}

# ------------------------------------------------------------------------------ fparams
# The label weights of (F(z), F(-z)) are a 2 x 2 table: (MATCH_Z, MATCH_MINUS_Z) for a row whose
# label is the head's class (y = +1), (OTHER_Z, OTHER_MINUS_Z) for one whose label is not; a
# binary head has two equal rows (S~, 1 - S~), public labels (1, 0).  MATCH_Z comes first (it is
# S~ for a binary head, the first parameter since the first kernel).
FPARAM_FIELDS = ("match_z", "alpha", "learning_rate", "mu", "radius", "variance_cap",
                 "match_minus_z", "other_z", "other_minus_z")
(F_MATCH_Z, F_ALPHA, F_LEARNING_RATE, F_MU, F_RADIUS, F_VARIANCE_CAP,
 F_MATCH_MINUS_Z, F_OTHER_Z, F_OTHER_MINUS_Z) = range(len(FPARAM_FIELDS))
F_LABEL_TILDE = F_MATCH_Z

# ------------------------------------------------------------------------------ iparams
# weighted (1/0): the rows carry sample weights s_i, read as one more column after the p features
# (in the features' dtype); row i's gradient is s_i times its unweighted one.  noise_law: LAW_*.
IPARAM_FIELDS = ("loss", "mode", "schedule", "truncation", "fit_intercept", "average_start",
                 "trace_every", "batch_size", "weighted", "noise_law")
(I_LOSS, I_MODE, I_SCHEDULE, I_TRUNCATION, I_FIT_INTERCEPT, I_AVERAGE_START,
 I_TRACE_EVERY, I_BATCH_SIZE, I_WEIGHTED, I_NOISE_LAW) = range(len(IPARAM_FIELDS))

# ------------------------------------------------------------------------------ state
COUNTER_FIELDS = (
    "step",               # number of updates done
    "n_avg",              # iterates in the running (Polyak) average
    "carry_n",            # rows of the incomplete minibatch held in carry_X / carry_y
    "trace_n",            # rows of the trace buffer filled since the driver last drained it
)
C_STEP, C_NAVG, C_CARRY, C_TRACE = range(len(COUNTER_FIELDS))

TELEMETRY_FIELDS = (
    "rows_seen",          # rows consumed by updates (the partial carried batch is not counted yet)
    "batches",            # number of SGD updates done
    "projection_hits",    # updates after which the projection was active
    "grad_norm_mean",     # running mean of the per-batch gradient norm (Welford)
    "grad_norm_m2",       # running sum of squared deviations (Welford); variance = m2/(batches-1)
    "max_noise_energy",   # largest sigma^2 |theta|^2 = 2*tau reached (0 without feature noise)
    "cap_hits",           # updates after which the variance cap was active
)
T_ROWS, T_BATCHES, T_PROJ, T_GMEAN, T_GM2, T_ENERGY, T_CAP = range(len(TELEMETRY_FIELDS))
TELEMETRY_INDEX = {name: i for i, name in enumerate(TELEMETRY_FIELDS)}

NO_DIVERGENCE = -1


def _pack(fields: tuple, values: dict, dtype) -> np.ndarray:
    missing = [name for name in fields if name not in values]
    unknown = [name for name in values if name not in fields]
    if missing or unknown:
        raise KeyError(f"kernel parameters: missing {missing}, unknown {unknown}")
    return np.array([values[name] for name in fields], dtype=dtype)


def pack_fparams(**values: float) -> np.ndarray:
    """The float64 ``fparams`` array from its named values (every field of FPARAM_FIELDS)."""
    return _pack(FPARAM_FIELDS, values, np.float64)


def pack_iparams(**values: int) -> np.ndarray:
    """The int64 ``iparams`` array from its named values (every field of IPARAM_FIELDS)."""
    return _pack(IPARAM_FIELDS, values, np.int64)
