"""The multiclass experiment: k one-vs-rest heads learned from k-ary randomized response.

Per seed: draw (synthetic) or take (ACS) the data, scale and clip it as a release does, compute
the clean one-vs-rest optimum theta* (per head: full-batch Newton on the clean, clipped training
rows, ``iwpfast.solvers.solve``), release the training rows in memory (Gaussian features,
k-ary randomized response on the label: ``iwpfast.privacy.privatize`` with ``classes``), and train
three IWPClassifier models in one pass each:

- clean: the clean rows (public labels, no noise): what SGD reaches without privacy;
- naive: the release, ``correction="none"`` (the noisy data treated as clean);
- iwp:   the release, the k-ary + Weierstrass inverses (one scan for the k heads).

Reported per method over the seeds: test one-vs-rest risk and accuracy (mean +- standard error),
|theta - theta*| (all heads, intercepts included), and the bias check: the seed mean of
theta - theta* per coordinate divided by its standard error (sd over seeds / sqrt(seeds)).
An unbiased method has |z| of order 1 (max over the k (p+1) coordinates a few), a biased one grows
with the seeds.

Settings (``MULTICLASS_SETTINGS``):
- ``multiclass-synthetic-k3`` / ``-k5``: p = 10 features uniform on [-1, 1]^p (declared ranges),
  labels argmax_c (w_c^T x + Gumbel noise) with fixed w (a multinomial logit), L2 bound sqrt(p)
  (nothing clips), (5, 1e-5)-LDP features + epsilon_y = 2 labels; data drawn per seed.
- ``multiclass-acs-education``: the shipped ACSIncome 2024 rows (FL, NY, PA), the task "education
  level" in k = 4 bands of SCHL (no high-school diploma: SCHL <= 15; high school / some college:
  16-19; associate or bachelor: 20-21; master, professional, doctorate: 22-24) from AGEP, SEX,
  WKHP and PINCP (declared ranges: AGEP 0..99, SEX 1..2, WKHP 0..99, PINCP 0..200000),
  (4, 1e-5)-LDP features + epsilon_y = 2 labels, L2 bound 1; 80% of the rows (one fixed
  shuffle: the file is sorted by state) train, the rest test; the data are fixed and the release
  noise varies with the seed.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..exceptions import InvalidInputError

METHODS = ("clean", "naive", "iwp")


@dataclass(frozen=True)
class MulticlassSetting:
    name: str
    title: str
    data: str                   # "synthetic" | "acs-education"
    n_classes: int
    n_features: int
    epsilon_x: float
    epsilon_y: float
    bound: float
    alpha: float
    learning_rate: float
    n_train: int | None
    n_test: int = 200_000
    delta: float = 1e-5
    loss: str = "exponential"
    batch_size: int = 128
    classes: tuple = field(default=())


_SYN: dict[str, Any] = dict(data="synthetic", n_features=10, epsilon_x=5.0, epsilon_y=2.0, bound=1.0,
            alpha=1.0, learning_rate=2e-2, n_train=500_000)
MULTICLASS_SETTINGS: dict[str, MulticlassSetting] = {
    "multiclass-synthetic-k3": MulticlassSetting(
        name="multiclass-synthetic-k3", n_classes=3,
        title="Synthetic, k = 3, p = 10, exponential loss, (5, 1e-5)-LDP features, epsilon_y = 2",
        classes=("A", "B", "C"), **_SYN),
    "multiclass-synthetic-k5": MulticlassSetting(
        name="multiclass-synthetic-k5", n_classes=5,
        title="Synthetic, k = 5, p = 10, exponential loss, (5, 1e-5)-LDP features, epsilon_y = 2",
        classes=("A", "B", "C", "D", "E"), **_SYN),
    "multiclass-acs-education": MulticlassSetting(
        name="multiclass-acs-education", data="acs-education", n_classes=4, n_features=4,
        title="ACSIncome 2024 (FL, NY, PA): education level (4 bands of SCHL) from AGEP, SEX, WKHP, "
              "PINCP; exponential loss, (4, 1e-5)-LDP features, epsilon_y = 2",
        epsilon_x=4.0, epsilon_y=2.0, bound=1.0, alpha=1.0, learning_rate=2e-2, n_train=None,
        classes=("no diploma", "high school", "bachelor", "graduate")),
}
MULTICLASS_GROUP = list(MULTICLASS_SETTINGS)

ACS_EDUCATION_FEATURES = ("AGEP", "SEX", "WKHP", "PINCP")
ACS_EDUCATION_RANGES = {"AGEP": (0.0, 99.0), "SEX": (1.0, 2.0), "WKHP": (0.0, 99.0),
                        "PINCP": (0.0, 200000.0)}
ACS_EDUCATION_BANDS = (16, 20, 22)        # SCHL <= 15 | 16-19 | 20-21 | 22-24


def _synthetic_weights(k: int, p: int) -> np.ndarray:
    """Fixed class directions (the same for every seed): class c leans on features 2c, 2c+1."""
    W = np.zeros((k, p))
    for c in range(k):
        W[c, (2 * c) % p] = 2.0
        W[c, (2 * c + 1) % p] = -1.0
    return W


def make_data(setting: MulticlassSetting, seed: int, n_train: int | None):
    """(X_train, y_train, X_test, y_test, ranges, feature names): raw X, labels as class values."""
    if setting.data == "synthetic":
        n_rows = n_train or setting.n_train
        if n_rows is None:
            raise InvalidInputError(f"setting {setting.name!r}: synthetic data needs n_train rows")
        n = n_rows + setting.n_test
        rng = np.random.default_rng(10_000 + seed)
        p, k = setting.n_features, setting.n_classes
        X = rng.uniform(-1.0, 1.0, (n, p))
        scores = X @ _synthetic_weights(k, p).T + rng.gumbel(size=(n, k))
        y = np.asarray(setting.classes)[np.argmax(scores, axis=1)]
        names = [f"x{j}" for j in range(p)]
        ranges = {f: (-1.0, 1.0) for f in names}
        cut = n - setting.n_test
        return X[:cut], y[:cut], X[cut:], y[cut:], ranges, names
    import pyarrow.parquet as pq

    from ..datasets import acs_path
    table = pq.read_table(acs_path("income"))
    X = np.column_stack([table.column(f).to_numpy().astype(np.float64) for f in ACS_EDUCATION_FEATURES])
    bands = np.digitize(table.column("SCHL").to_numpy(), ACS_EDUCATION_BANDS)
    y = np.asarray(setting.classes)[bands]
    # the file is sorted by state: one fixed permutation (the same for every seed) makes the
    # single pass see the rows in an order that does not drift (SGD's guarantee is for iid rows)
    order = np.random.default_rng(2024).permutation(len(y))
    X, y = X[order], y[order]
    cut = int(0.8 * len(y))
    train = cut if n_train is None else min(cut, int(n_train))
    return (X[:train], y[:train], X[cut:], y[cut:], dict(ACS_EDUCATION_RANGES),
            list(ACS_EDUCATION_FEATURES))


def _scaled(X: np.ndarray, ranges: dict, names: list, bound: float) -> np.ndarray:
    """Raw rows scaled into [-1, 1] by the declared ranges and clipped to the L2 bound (what the
    release does before the noise), float64."""
    from ..datasets import scale_to_unit
    from .common import clip_rows
    Xs = scale_to_unit(X, np.array([ranges[n] for n in names]))
    return clip_rows(Xs.T, bound).T


def clean_optimum(setting: MulticlassSetting, X: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """theta* of every head, (k, p + 1) with the intercept last: full-batch Newton per head."""
    from ..solvers import solve
    rows = []
    for c in range(setting.n_classes):
        sol = solve(X, np.where(codes == c, 1.0, -1.0), loss=setting.loss, alpha=setting.alpha,
                    fit_intercept=True)
        rows.append(np.append(sol.theta, sol.intercept))
    return np.array(rows)


def _ovr_risk(params: np.ndarray, X: np.ndarray, codes: np.ndarray, loss: str) -> float:
    from ..losses import derivative
    U = X @ params[:, :-1].T + params[:, -1]
    signs = np.where(codes[:, None] == np.arange(params.shape[0]), 1.0, -1.0)
    return float(np.mean(np.sum(derivative(loss, 0, signs * U), axis=1)))


def run_seed(setting: MulticlassSetting, seed: int, *, n_train: int | None = None) -> dict:
    from ..estimators import IWPClassifier
    from ..privacy import ReleaseSpec, privatize
    X_raw, y, X_test_raw, y_test, ranges, names = make_data(setting, seed, n_train)
    classes = list(setting.classes)
    lookup = {c: i for i, c in enumerate(classes)}
    codes = np.array([lookup[v] for v in y.tolist()])
    test_codes = np.array([lookup[v] for v in y_test.tolist()])
    X = _scaled(X_raw, ranges, names, setting.bound)
    X_test = _scaled(X_test_raw, ranges, names, setting.bound)
    theta_star = clean_optimum(setting, X, codes)
    spec = ReleaseSpec(epsilon_x=setting.epsilon_x, delta=setting.delta, bound=setting.bound,
                       epsilon_y=setting.epsilon_y, features=names, ranges=ranges, label="y",
                       classes=tuple(classes))
    Xt, yt = privatize(X_raw, y, spec, seed=seed)
    sigma2 = spec.sigma ** 2
    common = dict(loss=setting.loss, alpha=setting.alpha, learning_rate=setting.learning_rate,
                  batch_size=setting.batch_size, average="tail", progress=False)
    out = {"seed": seed, "theta_star": theta_star, "sigma": spec.sigma, "n_train": len(codes),
           "q_r": [spec.label_keep_prob, spec.label_other_prob]}
    fits = {
        "clean": lambda m: m.fit(X, codes, classes=list(range(len(classes)))),
        "naive": lambda m: m.fit(np.asarray(Xt), yt, noise_var=sigma2, epsilon_y=setting.epsilon_y,
                                 classes=list(range(len(classes)))),
        "iwp": lambda m: m.fit(np.asarray(Xt), yt, noise_var=sigma2, epsilon_y=setting.epsilon_y,
                               classes=list(range(len(classes)))),
    }
    import warnings
    for method in METHODS:
        model = IWPClassifier(correction="none" if method == "naive" else "iwp",
                              radius=setting.bound / setting.alpha, **common)
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fits[method](model)
        params = np.column_stack([model.coef_, model.intercept_])
        out[method] = {
            "params": params,
            "seconds": time.perf_counter() - t0,
            "risk": _ovr_risk(params, X_test, test_codes, setting.loss),
            "accuracy": float(np.mean(np.argmax(X_test @ params[:, :-1].T + params[:, -1], axis=1)
                                      == test_codes)),
            "distance": float(np.linalg.norm(params - theta_star)),
            "max_noise_energy": float(model.telemetry_.get("max_noise_energy", 0.0)),
            "warnings": sorted({str(w.message)[:120] for w in caught}),
        }
    out["optimum_risk"] = _ovr_risk(theta_star, X_test, test_codes, setting.loss)
    out["optimum_accuracy"] = float(np.mean(
        np.argmax(X_test @ theta_star[:, :-1].T + theta_star[:, -1], axis=1) == test_codes))
    return out


def summarize(setting: MulticlassSetting, runs: list[dict]) -> dict:
    S = len(runs)
    summary = {"name": setting.name, "title": setting.title, "seeds": S,
               "setting": {k: (list(v) if isinstance(v, tuple) else v)
                           for k, v in setting.__dict__.items()},
               "sigma": runs[0]["sigma"], "q_r": runs[0]["q_r"], "n_train": runs[0]["n_train"],
               "optimum": {"risk": float(np.mean([r["optimum_risk"] for r in runs])),
                           "accuracy": float(np.mean([r["optimum_accuracy"] for r in runs]))},
               "methods": {}}
    for method in METHODS:
        errors = np.array([r[method]["params"] - r["theta_star"] for r in runs])   # (S, k, p+1)
        mean_error = errors.mean(axis=0)
        se = errors.std(axis=0, ddof=1) / math.sqrt(S) if S > 1 else np.zeros(mean_error.shape)
        # no spread over the seeds (clean SGD on fixed data is deterministic): no z
        z = np.divide(mean_error, se, out=np.full(mean_error.shape, np.nan), where=se > 0)
        risk = np.array([r[method]["risk"] for r in runs])
        acc = np.array([r[method]["accuracy"] for r in runs])
        dist = np.array([r[method]["distance"] for r in runs])

        def sem(v):
            return float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else float("nan")
        summary["methods"][method] = {
            "risk": float(risk.mean()), "risk_se": sem(risk),
            "accuracy": float(acc.mean()), "accuracy_se": sem(acc),
            "distance": float(dist.mean()), "distance_se": sem(dist),
            "mean_model_distance": float(np.linalg.norm(mean_error)),
            "z_max": float(np.max(np.abs(z))) if np.isfinite(z).any() else float("nan"),
            "z_rms": float(np.sqrt(np.mean(z ** 2))) if np.isfinite(z).any() else float("nan"),
            "z": z.tolist(), "mean_error": mean_error.tolist(),
            "seconds": float(np.mean([r[method]["seconds"] for r in runs])),
            "max_noise_energy": float(np.max([r[method]["max_noise_energy"] for r in runs])),
            "warnings": sorted({w for r in runs for w in r[method]["warnings"]}),
        }
    summary["theta_star"] = np.mean([r["theta_star"] for r in runs], axis=0).tolist()
    return summary


def format_table(summary: dict) -> str:
    lines = [f"### {summary['title']} (`{summary['name']}`)", "",
             f"{summary['seeds']} seeds, {summary['n_train']:,} training rows, sigma = "
             f"{summary['sigma']:.4g} per feature, k-ary RR q = {summary['q_r'][0]:.4g}, "
             f"r = {summary['q_r'][1]:.4g}.  Clean one-vs-rest optimum theta*: test risk "
             f"{summary['optimum']['risk']:.4f}, accuracy {summary['optimum']['accuracy']:.4f}.", "",
             "| method | test risk | accuracy | mean over seeds of abs(theta - theta*) | "
             "abs(seed mean - theta*) | max abs z | rms z |",
             "|---|---|---|---|---|---|---|"]
    for method, m in summary["methods"].items():
        lines.append(
            f"| {method} | {m['risk']:.4f} ± {m['risk_se']:.4f} | {m['accuracy']:.4f} ± "
            f"{m['accuracy_se']:.4f} | {m['distance']:.4f} ± {m['distance_se']:.4f} | "
            f"{m['mean_model_distance']:.4f} | {_z(m['z_max'])} | {_z(m['z_rms'])} |")
    lines += ["", "z = (seed mean of theta - theta*) / its standard error, per coordinate of the "
              "k (p + 1) parameters (intercepts included); unbiased: rms z ~ 1 (n/a: the same model "
              "on every seed, no spread to compare with)."]
    return "\n".join(lines)


def _z(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.2f}"


def plot(summary: dict, path) -> None:
    """Per-coordinate bias z-scores of naive and IWP (and clean), and the test risk per method."""
    from .plots import _color, _plt
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ax = axes[0]
    for i, (method, m) in enumerate(summary["methods"].items()):
        z = np.abs(np.asarray(m["z"], dtype=float).ravel())
        if not np.isfinite(z).any():
            continue
        ax.plot(np.arange(z.size), z, "o", color=_color(method, i), label=method, ms=4)
    ax.axhline(3.0, color="gray", ls="--", lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("coordinate of (theta_c, b_c), heads in order")
    ax.set_ylabel("|seed mean - theta*| / SE")
    ax.set_title("bias against the clean one-vs-rest optimum")
    ax.legend()
    ax = axes[1]
    names = list(summary["methods"])
    risks = [summary["methods"][n]["risk"] for n in names]
    errs = [summary["methods"][n]["risk_se"] for n in names]
    ax.bar(names, risks, yerr=errs, color=[_color(n, i) for i, n in enumerate(names)])
    ax.axhline(summary["optimum"]["risk"], color="black", ls=":", lw=1, label="theta*")
    low = min(min(risks), summary["optimum"]["risk"])
    high = max(max(risks), summary["optimum"]["risk"])
    pad = 0.5 * (high - low) + 1e-3
    ax.set_ylim(low - pad, high + pad)
    ax.set_ylabel("test one-vs-rest risk (mean ± SE)")
    ax.legend()
    fig.suptitle(summary["title"], fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_multiclass(name: str, seeds: list[int], *, n_train: int | None = None,
                   progress=None) -> dict:
    setting = MULTICLASS_SETTINGS[name]
    runs = []
    for i, seed in enumerate(seeds):
        t0 = time.perf_counter()
        runs.append(run_seed(setting, seed, n_train=n_train))
        if callable(progress):
            progress(name, i + 1, len(seeds), time.perf_counter() - t0)
        elif progress:
            print(f"{name}: seed {seed} ({i + 1}/{len(seeds)}) {time.perf_counter() - t0:.1f} s",
                  flush=True)
    summary = summarize(setting, runs)
    summary["table"] = format_table(summary)
    return summary
