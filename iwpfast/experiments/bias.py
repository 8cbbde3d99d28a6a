"""The bias of naive SGD on display (exponential loss): the exact noisy risk next to the clean one.

For the exponential loss the expected loss on the release has a closed form,
``E exp(-y~ theta^T x~) = exp(sigma^2 |theta|^2 / 2) (S R(theta) + (1 - S) R(-theta))`` (docs/design.md
section 3), so the objective naive SGD minimizes can be drawn exactly and its minimizer computed
(:func:`iwpfast.solvers.solve_noisy_exponential`).
"""
from __future__ import annotations

import numpy as np

from ..solvers import noisy_exponential_objective, objective


def bias_line(result: dict, raw_first: dict, n_points: int = 61) -> dict:
    """Curves along t theta* (first seed's training data) and the per-seed final thetas projected on
    the plane of theta* and the IWP spread; JSON-ready."""
    data = raw_first["data"]
    X, y = data.X_train_fm.T, data.y_train
    alpha = result["setting"]["alpha"]
    theta_star = raw_first["theta_star"]
    t = np.linspace(-0.25, 1.5, n_points)
    clean = [objective(ti * theta_star, X, y, "exponential", alpha) for ti in t]
    noisy, naive_t, iwp_t = {}, {}, {}
    star_mean = np.asarray(result["theta_star_mean"])
    ss = float(star_mean @ star_mean)
    for cal, block in result["calibrations"].items():
        c = block["release"]
        noisy[cal] = [noisy_exponential_objective(ti * theta_star, X, y, noise_var=c["sigma"] ** 2,
                                                  keep_prob=c["label_keep_prob"], alpha=alpha)[0]
                      for ti in t]
        naive_t[cal] = float(np.asarray(block["heads"]["naive"]["mean_theta"]) @ star_mean / ss)
        iwp_t[cal] = float(np.asarray(block["heads"]["iwp"]["mean_theta"]) @ star_mean / ss)

    cal = "classic" if "classic" in result["calibrations"] else next(iter(result["calibrations"]))
    block = result["calibrations"][cal]
    u1 = star_mean / np.sqrt(ss)
    iwp = np.asarray(block["heads"]["iwp"]["final_thetas"])
    resid = iwp - iwp.mean(axis=0)
    resid -= np.outer(resid @ u1, u1)
    if resid.shape[1] > 1 and np.linalg.norm(resid) > 0:
        u2 = np.linalg.svd(resid, full_matrices=False)[2][0]
    else:
        u2 = np.zeros_like(u1)

    def proj(th):
        th = np.atleast_2d(th)
        return np.column_stack([th @ u1, th @ u2]).tolist()

    plane = {name: proj(np.asarray(block["heads"][name]["final_thetas"]))
             for name in ("clean", "naive", "iwp")}
    plane["theta_star"] = proj(star_mean)[0]
    plane["theta_noisy"] = proj(np.asarray(block["theta_noisy_mean"]))[0]
    return {"t": t.tolist(), "clean": clean, "noisy": noisy, "naive_t": naive_t, "iwp_t": iwp_t,
            "plane": plane, "plane_calibration": cal}
