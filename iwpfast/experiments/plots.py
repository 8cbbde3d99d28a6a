"""Figures of the experiments (matplotlib, imported lazily; Agg backend so no display is needed)."""
from __future__ import annotations

import numpy as np

from ..losses import loss_record

COLORS = {"clean": "tab:blue", "naive": "tab:red", "iwp": "tab:green"}
_EXTRA = ["tab:green", "tab:olive", "tab:purple", "tab:brown", "tab:cyan"]


def _plt():
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        from ..exceptions import InvalidInputError
        raise InvalidInputError(
            "figures need matplotlib: pip install 'iwpfast[plot]', or pass --no-plots") from exc
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    return plt


def _color(name: str, i: int) -> str:
    if name in COLORS:
        return COLORS[name]
    return _EXTRA[i % len(_EXTRA)]


def plot_curves(result: dict, calibration: str, path) -> None:
    """Three panels like the paper's: test risk (mean and ±1 sd over seeds), risk of the
    seed-averaged model, accuracy (classification) -- against the number of batches."""
    plt = _plt()
    block = result["calibrations"][calibration]
    regression = loss_record(result["setting"]["loss"]).task == "regression"
    n_panels = 2 if regression else 3
    fig, axes = plt.subplots(1, n_panels, figsize=(5.2 * n_panels, 4.0))
    risk_star = result["risk_star_mean"]
    for i, (name, h) in enumerate(block["heads"].items()):
        c = _color(name, i - 2)
        cv = h["curves"]
        x = np.asarray(cv["batches"])
        m, sd = np.asarray(cv["risk_mean"]), np.asarray(cv["risk_sd"])
        axes[0].plot(x, m, color=c, label=name, lw=1.4)
        axes[0].fill_between(x, m - sd, m + sd, color=c, alpha=0.18, lw=0)
        axes[1].plot(x, cv["averaged_model_risk"], color=c, label=name, lw=1.4)
        if not regression:
            a = np.asarray(cv["accuracy_mean"])
            asd = np.asarray(cv["accuracy_sd"] or 0 * a)
            axes[2].plot(x, a, color=c, label=name, lw=1.4)
            axes[2].fill_between(x, a - asd, a + asd, color=c, alpha=0.18, lw=0)
    for ax in axes[:2]:
        ax.axhline(risk_star, color="k", ls=":", lw=1, label="θ* (full batch)")
        ax.set_xlabel("batches")
    axes[0].set_ylabel("test risk")
    axes[0].set_title("test risk of θ_t (mean ± sd over seeds)")
    axes[1].set_title("test risk of the seed-averaged θ_t")
    if not regression:
        axes[2].set_title("test accuracy (mean ± sd)")
        axes[2].set_xlabel("batches")
    # Zoom the risk panels on the curves' late part: the initial risk at theta = 0 dwarfs the gaps.
    tail = []
    for h in block["heads"].values():
        cv = h["curves"]
        k = len(cv["batches"]) // 4
        tail += list(np.asarray(cv["risk_mean"][k:]) + np.asarray(cv["risk_sd"][k:]))
        tail += list(np.asarray(cv["risk_mean"][k:]) - np.asarray(cv["risk_sd"][k:]))
        tail += list(cv["averaged_model_risk"][k:])
    lo, hi = min(tail + [risk_star]), max(tail + [risk_star])
    pad = 0.08 * (hi - lo or 1e-6)
    for ax in axes[:2]:
        ax.set_ylim(lo - pad, hi + pad)
    axes[0].legend(fontsize=8)
    c = block["release"]
    fig.suptitle(f"{result['setting']['title']} — {calibration} calibration (σ = {c['sigma']:.3g}), "
                 f"{result['n_seeds']} seeds, n = {result['n_train']:,}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_bias(result: dict, bias_line: dict, path) -> None:
    """Left: the clean and the exact noisy regularized risk along t θ* (exponential loss), with where
    naive and IWP SGD end (their seed-mean θ projected on the line). Right: the final θ of every
    seed in the plane of θ* and the naive direction."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    t = np.asarray(bias_line["t"])
    ax = axes[0]
    # Two y axes: the clean objective moves by ~1% over the segment, the noisy one by tens of %.
    ax.plot(t, bias_line["clean"], color="tab:blue", label="clean risk + λ|θ|²/2 (left axis)")
    ax.axvline(t[int(np.argmin(bias_line["clean"]))], color="tab:blue", ls=":", lw=1)
    ax.set_ylabel("clean objective", color="tab:blue")
    ax2 = ax.twinx()
    for cal, ls in zip(bias_line["noisy"], ("-", "--"), strict=False):
        ax2.plot(t, bias_line["noisy"][cal], color="tab:red", ls=ls,
                 label=f"exact noisy risk + λ|θ|²/2, {cal} (right axis)")
    ax2.set_ylabel("expected objective on the release", color="tab:red")
    cal0 = bias_line["plane_calibration"]
    ax.axvline(bias_line["naive_t"][cal0], color="tab:red", lw=2, alpha=0.5,
               label=f"naive SGD ends ({cal0}, seed mean)")
    ax.axvline(bias_line["iwp_t"][cal0], color="tab:green", lw=2, alpha=0.5,
               label=f"IWP-SGD ends ({cal0}, seed mean)")
    ax.set_xlabel("t  (θ = t θ*; t = 1 is the clean optimum)")
    ax.set_title("regularized risk along the segment from 0 to θ*")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper center")

    ax = axes[1]
    pts = bias_line["plane"]
    for name, color in (("clean", "tab:blue"), ("naive", "tab:red"), ("iwp", "tab:green")):
        xy = np.asarray(pts[name])
        ax.scatter(xy[:, 0], xy[:, 1], s=12, color=color, alpha=0.7, label=f"{name} (per seed)")
        ax.scatter(*xy.mean(axis=0), s=90, marker="X", color=color, edgecolor="k")
    ax.scatter(*pts["theta_star"], s=120, marker="*", color="k", label="θ*")
    ax.scatter(*pts["theta_noisy"], s=80, marker="D", color="tab:red", edgecolor="k",
               label="noisy-risk minimizer")
    ax.axhline(0, color="0.8", lw=0.8)
    ax.axvline(0, color="0.8", lw=0.8)
    ax.set_xlabel("along θ*")
    ax.set_ylabel("orthogonal (plane of the IWP spread)")
    ax.set_title(f"final θ per seed ({bias_line['plane_calibration']} calibration); X = seed mean")
    ax.legend(fontsize=7)
    fig.suptitle(result["setting"]["title"], fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
