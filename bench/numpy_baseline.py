"""The same minibatch loop as the kernel, vectorized with NumPy within each batch (speed baseline).

One Python iteration per batch (an update depends on the previous one), everything inside a batch
is a NumPy expression on a (p, B) slice of the feature-major array: the fastest NumPy formulation
of this algorithm we know.  It does what the kernel does for ``bench/kernels.py``'s configurations
(mode iwp, projection, averaging), reading each batch in float64 as the kernel accumulates in
float64.  ``iwpfast.sgd.reference`` is the exact twin used by the tests; it is not used here
because it also validates, keeps telemetry and traces (slower, and not what a NumPy user writes).
"""
from __future__ import annotations

import math

import numpy as np

from iwpfast.estimates import glm_scalars


def numpy_pass(cfg, X, y) -> np.ndarray:
    p, n = X.shape
    B = cfg.batch_size
    s = np.asarray(cfg.noise_var, dtype=np.float64)
    theta = np.zeros(p)
    theta_avg = np.zeros(p)
    label_weight = cfg.label_tilde
    regression = cfg.loss == "squared_error"
    for step, start in enumerate(range(0, n, B), start=1):
        Xb = X[:, start:start + B].astype(np.float64)
        yb = y[start:start + B].astype(np.float64)
        m = yb.shape[0]
        tau = 0.5 * float(s @ (theta * theta))
        u = theta @ Xb
        if regression:
            w = u - yb
            c_mean = 1.0
        elif cfg.loss == "exponential" and label_weight == 1.0:
            e = np.exp(-tau - yb * u)            # the closed form, cheaper than glm_scalars
            w = -e * yb
            c_mean = float(e.sum()) / m
        else:
            a, c = glm_scalars(cfg.loss, yb * u, tau, label_weight, cfg.truncation)
            w = a * yb
            c_mean = float(c.sum()) / m
        g = (Xb @ w) / m - c_mean * (s * theta) + cfg.alpha * theta
        theta = theta - cfg.learning_rate * g
        norm = math.sqrt(float(theta @ theta))
        if norm > cfg.radius:
            theta *= cfg.radius / norm
        theta_avg += (theta - theta_avg) / step
    return theta_avg
