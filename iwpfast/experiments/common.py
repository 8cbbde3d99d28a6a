"""The machinery shared by every experiment: data, simulated releases, heads, evaluation, summary.

One *setting* (:class:`Setting`) describes one experiment of the paper. :func:`run_setting` runs it
for a list of seeds: per seed it prepares the data, computes the clean optimum ``theta*`` with the
full-batch solver, simulates the release in memory (the same clipping, calibration and randomized
response as :mod:`iwpfast.privacy`, with NumPy), trains every head (clean, naive, IWP, one per
calibration and truncation) with one kernel call per head over the whole training set, and evaluates
the traced iterates on the test set. :func:`summarize` turns the per-seed results into the tables
and curves written to JSON.

Noise law: the experiments reproduce the paper, so they simulate its real-valued Gaussian mechanism
(float noise, one shared draw across calibrations), i.e. the library's ``noise="float"``; the
library's default release law is the discrete Gaussian on a grid (docs/release.md), whose
per-coordinate variance equals sigma^2 to double precision, so the IWP results carry over
(docs/math.md, "Discrete noise").

Conventions (also in docs/results.md): ``theta0 = 0``; no intercept (the paper's model); projection
radius ``R = B |f'(0)| / lambda`` (the library's default, docs/design.md section 2); the last iterate is the
model (no averaging, as in the paper); test risk is the unregularized mean loss on clean test data.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..engines import resolve_engine
from ..exceptions import InvalidInputError, PrivacyCalibrationWarning
from ..losses import loss_record
from ..sgd.schedules import default_radius  # re-exported (__all__): one definition of R
from ..solvers import solve, solve_noisy_exponential

# Number of evaluation points along the pass (plus the initial point), and the test rows used for the
# curves (the final numbers use the whole test set): evaluating every traced iterate on every test
# row would cost more than training.
TRACE_POINTS = 100
CURVE_TEST_ROWS = 50_000
CALIBRATIONS = ("classic", "analytic")


@dataclass(frozen=True)
class Setting:
    """One experiment. ``data`` is "synthetic" or an ACS task ("income", "pubcov");
    ``target`` is "label" (classification) or "income" (the regression variant)."""

    name: str
    title: str
    data: str
    loss: str
    alpha: float
    batch_size: int
    learning_rate: float
    epsilon: float
    delta: float = 1e-5
    n_features: int = 0              # synthetic only (ACS: the paper's four features)
    n_train: int | None = 1_000_000         # synthetic: rows drawn for training; ACS: None = the 80% split
    test_fraction: float = 1.0 / 6.0  # synthetic: the last 1/6 of generated rows; ACS: 0.2
    target: str = "label"
    calibrations: tuple[str, ...] = CALIBRATIONS
    truncations: tuple = ()           # logistic IWP heads: integers K and/or "mse"
    structure_seed: int = 1           # synthetic distribution (see docs/results.md)
    split_seed: int = 0               # ACS train/test split
    seeds_vary: str = "data"          # "data" (fresh draw, order and release) or "noise"
    notes: str = ""

    @property
    def task(self) -> str:
        return loss_record(self.loss).task


@dataclass
class Dataset:
    """Train/test arrays of one seed. X_train is feature-major (p, n) for the kernels."""

    X_train_fm: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    bound: float
    target_bound: float | None
    features: tuple[str, ...]


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------

_ACS_CACHE: dict = {}


def _acs_arrays(setting: Setting):
    from ..datasets import ACS_TARGET_RANGES, load_acs, scale_to_unit

    key = (setting.data, setting.target, setting.split_seed)
    if key not in _ACS_CACHE:
        acs = load_acs(setting.data)
        X = scale_to_unit(acs.X, acs.ranges_array)
        if setting.target == "label":
            y = acs.y
        else:
            column, rng_ = ACS_TARGET_RANGES[setting.data]
            y = scale_to_unit(acs.income, rng_)
        order = np.random.default_rng(setting.split_seed).permutation(acs.n_rows)
        n_test = int(round(0.2 * acs.n_rows))
        test, train = order[:n_test], order[n_test:]
        _ACS_CACHE[key] = (X[train], y[train], X[test], y[test], acs.features)
    return _ACS_CACHE[key]


def make_dataset(setting: Setting, seed: int, n_train: int | None) -> Dataset:
    """The data of one seed. Synthetic: a fresh draw from the fixed distribution; ACS: fixed split,
    optionally the first ``n_train`` training rows (reduced runs)."""
    if setting.data == "synthetic":
        from ..datasets import make_classification

        n = n_train or setting.n_train
        if n is None:
            raise InvalidInputError(f"setting {setting.name!r}: synthetic data needs n_train rows")
        n_total = int(round(n / (1.0 - setting.test_fraction)))
        X, y = make_classification(n_total, n_features=setting.n_features,
                                   random_state=np.random.default_rng([seed, 0]),
                                   structure_random_state=setting.structure_seed)
        p = setting.n_features
        return Dataset(np.ascontiguousarray(X[:n].T), y[:n], X[n:], y[n:], math.sqrt(p), None,
                       tuple(f"x{j}" for j in range(p)))
    X_tr, y_tr, X_te, y_te, features = _acs_arrays(setting)
    if n_train is not None:
        X_tr, y_tr = X_tr[:n_train], y_tr[:n_train]
    p = X_tr.shape[1]
    return Dataset(np.ascontiguousarray(X_tr.T), y_tr, X_te, y_te, math.sqrt(p),
                   1.0 if setting.task == "regression" else None, features)


# --------------------------------------------------------------------------------------------
# Privacy calibration and the simulated release
# --------------------------------------------------------------------------------------------

def calibrate(setting: Setting, bound: float, target_bound: float | None, calibration: str) -> dict:
    """Noise parameters of the release: the total budget split evenly between features and labels
    (docs/design.md section 6); for regression delta is split too (the target is a Gaussian mechanism)."""
    from ..privacy.calibration import gaussian_noise_scale, label_keep_probability

    eps_x = eps_y = setting.epsilon / 2.0
    with warnings.catch_warnings():
        # The classic calibration above epsilon = 1 is what the paper used; the warning is recorded
        # in the results instead of being printed once per seed.
        warnings.simplefilter("ignore", PrivacyCalibrationWarning)
        if setting.task == "regression":
            delta_x = delta_y = setting.delta / 2.0
            sigma = gaussian_noise_scale(eps_x, delta_x, bound, calibration)
            sigma_y = gaussian_noise_scale(eps_y, delta_y, target_bound, calibration)
            keep = None
        else:
            delta_x, delta_y = setting.delta, None
            sigma = gaussian_noise_scale(eps_x, delta_x, bound, calibration)
            sigma_y = None
            keep = label_keep_probability(eps_y)
    return {"calibration": calibration, "epsilon_x": eps_x, "epsilon_y": eps_y, "delta_x": delta_x,
            "delta_y": delta_y, "sigma": sigma, "sigma_y": sigma_y, "label_keep_prob": keep,
            "bound": bound, "target_bound": target_bound,
            "classic_beyond_proof": calibration == "classic" and eps_x > 1.0}


def clip_rows(X_fm: np.ndarray, bound: float) -> np.ndarray:
    """x * min(1, B / |x|) per row (column of the feature-major array)."""
    norms = np.sqrt(np.einsum("ij,ij->j", X_fm, X_fm))
    scale = np.minimum(1.0, bound / np.maximum(norms, 1e-300))
    return X_fm * scale if np.any(scale < 1.0) else X_fm


# --------------------------------------------------------------------------------------------
# Heads
# --------------------------------------------------------------------------------------------

def choose_truncation_at(t: float, batch_size: int) -> int:
    """K for the logistic loss by the MSE rule (``iwpfast.transforms.choose_truncation``: smallest
    bias^2 + variance / B), evaluated at ``t = tau`` of the clean optimum (margin v = 0)."""
    from ..transforms import choose_truncation

    return int(choose_truncation(t, batch_size))


def _engine(engine: str):
    if resolve_engine(engine, allowed=("numba", "numpy")) == "numba":
        from ..sgd.engine import finish, run_chunk
        return run_chunk, finish
    from ..sgd.reference import reference_finish, reference_run_chunk
    return reference_run_chunk, reference_finish


def run_head(cfg, X_fm, y, engine: str):
    """One pass of one head over the whole training set: one kernel call plus the last batch.
    Returns (state, steps, params) with the traced iterates, the initial point prepended."""
    from ..sgd.state import HeadState

    run_chunk, finish = _engine(engine)
    n = y.shape[0]
    n_updates = -(-n // cfg.batch_size)
    capacity = n_updates // max(cfg.trace_every, 1) + 2
    state = HeadState.new(cfg, trace_capacity=capacity)
    run_chunk(cfg, state, X_fm, y)
    finish(cfg, state)
    k = state.trace_n
    steps = np.concatenate([[0], state.trace_steps[:k]])
    params = np.vstack([np.zeros((1, cfg.n_features + 1)), state.trace[:k]])
    if steps[-1] != state.step:        # always include the final iterate
        steps = np.append(steps, state.step)
        params = np.vstack([params, np.append(state.theta, state.intercept[0])])
    return state, steps, params


# --------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------

def evaluate(params: np.ndarray, X: np.ndarray, y: np.ndarray, loss: str, block: int = 32):
    """Test risk (unregularized mean loss) and accuracy of each row (theta, b) of ``params``."""
    k = params.shape[0]
    risks, accs = np.empty(k), np.empty(k)
    record = loss_record(loss)
    regression = record.task == "regression"
    for start in range(0, k, block):
        P = params[start:start + block]
        U = X @ np.ascontiguousarray(P[:, :-1].T)           # (n, block) scores
        if np.any(P[:, -1] != 0.0):
            U += P[:, -1]
        if regression:
            U -= y[:, None]
            accs[start:start + block] = np.nan
        else:
            U *= y[:, None]
            accs[start:start + block] = np.count_nonzero(U > 0, axis=0) / U.shape[0]
        risks[start:start + block] = record.derivative(0, U).mean(axis=0)
    return risks, accs


# --------------------------------------------------------------------------------------------
# One seed, all heads
# --------------------------------------------------------------------------------------------

def head_plan(setting: Setting, t_star: dict[str, float]) -> list[dict]:
    """The heads trained per seed: clean once, then naive and IWP per calibration (IWP once per
    truncation for the logistic loss). ``t_star[cal]`` is tau at theta* (for the MSE rule of K)."""
    plan = [{"head": "clean", "mode": "clean", "calibration": None, "truncation": 2}]
    for cal in setting.calibrations:
        plan.append({"head": "naive", "mode": "naive", "calibration": cal, "truncation": 2})
        if loss_record(setting.loss).truncated:
            ks: list[tuple[int, str]] = []
            for K in setting.truncations or ("mse",):
                k = choose_truncation_at(t_star[cal], setting.batch_size) if K == "mse" else int(K)
                label = f"iwp-K{k}" + ("(mse)" if K == "mse" else "")
                if all(k != prev for prev, _ in ks):
                    ks.append((k, label))
                else:                 # K chosen by MSE equals a listed K: name it once, both ways
                    ks = [(kk, lab + "(mse)" if kk == k and K == "mse" else lab) for kk, lab in ks]
            for k, label in ks:
                plan.append({"head": label, "mode": "iwp", "calibration": cal, "truncation": k})
        else:
            plan.append({"head": "iwp", "mode": "iwp", "calibration": cal, "truncation": 2})
    return plan


def run_seed(setting: Setting, seed: int, *, n_train: int | None = None, engine: str = "numba",
             keep_test: bool = False) -> dict:
    """Everything measured for one seed (arrays; summarized by :func:`summarize`)."""
    from ..sgd.state import HeadConfig

    t0 = time.perf_counter()
    data = make_dataset(setting, seed, n_train)
    p, n = data.X_train_fm.shape
    X_train = data.X_train_fm.T
    optimum = solve(X_train, data.y_train, loss=setting.loss, alpha=setting.alpha)
    theta_star = optimum.theta
    radius = default_radius(setting.loss, data.bound, setting.alpha, data.target_bound)
    n_updates = -(-n // setting.batch_size)
    trace_every = max(1, n_updates // TRACE_POINTS)

    releases = {}
    release_rng = np.random.default_rng([seed, 1])
    X_clipped = clip_rows(data.X_train_fm, data.bound)
    # One standard-normal draw and one uniform per row serve every calibration: each release is a
    # valid release on its own (noise scaled by its sigma), and sharing the draw makes the
    # classic/analytic comparison paired.
    Z = release_rng.standard_normal(X_clipped.shape)
    U = release_rng.uniform(size=n)
    Zy = release_rng.standard_normal(n) if setting.task == "regression" else None
    t_star = {}
    for cal in setting.calibrations:
        c = calibrate(setting, data.bound, data.target_bound, cal)
        X_noisy = X_clipped + c["sigma"] * Z
        if setting.task == "regression":
            assert data.target_bound is not None and Zy is not None     # a regression dataset's
            y_noisy = np.clip(data.y_train, -data.target_bound, data.target_bound) + c["sigma_y"] * Zy
        else:
            y_noisy = np.where(U < c["label_keep_prob"], data.y_train, -data.y_train)
        releases[cal] = (c, X_noisy, y_noisy)
        t_star[cal] = 0.5 * c["sigma"] ** 2 * float(theta_star @ theta_star)

    heads = []
    for h in head_plan(setting, t_star):
        if h["calibration"] is None:
            X_fm, y = X_clipped, data.y_train
            noise_var, keep, target_var = np.zeros(p), None, 0.0
        else:
            c, X_fm, y = releases[h["calibration"]]
            noise_var = np.full(p, c["sigma"] ** 2)
            keep = c["label_keep_prob"]
            target_var = (c["sigma_y"] or 0.0) ** 2
        cfg = HeadConfig(loss=setting.loss, mode=h["mode"], n_features=p, noise_var=noise_var,
                         label_keep_prob=keep, target_noise_var=target_var,
                         truncation=h["truncation"], batch_size=setting.batch_size,
                         alpha=setting.alpha, schedule="constant",
                         learning_rate=setting.learning_rate, radius=radius,
                         trace_every=trace_every)
        t1 = time.perf_counter()
        state, steps, params = run_head(cfg, X_fm, y, engine)
        train_s = time.perf_counter() - t1
        m = CURVE_TEST_ROWS
        risks, accs = evaluate(params, data.X_test[:m], data.y_test[:m], setting.loss)
        final_risk, final_acc = evaluate(params[-1:], data.X_test, data.y_test, setting.loss)
        tel = state.telemetry
        heads.append({**h, "steps": steps, "params": params, "risk": risks, "accuracy": accs,
                      "final_risk": float(final_risk[0]), "final_accuracy": float(final_acc[0]),
                      "theta": state.theta.copy(), "train_seconds": train_s,
                      "projection_hits": int(tel[2]), "max_noise_energy": float(tel[5]),
                      "final_norm": float(np.linalg.norm(state.theta)),
                      "ends_on_sphere": bool(np.linalg.norm(state.theta) >= radius * (1 - 1e-9))})

    out = {"seed": seed, "n_train": n, "n_test": int(data.y_test.shape[0]), "p": p,
           "theta_star": theta_star, "radius": radius, "bound": data.bound,
           "trace_every": trace_every, "n_updates": n_updates, "heads": heads,
           "calibration": {cal: releases[cal][0] for cal in setting.calibrations},
           "t_star": t_star, "features": data.features,
           }
    star_risk, star_acc = evaluate(np.append(theta_star, 0.0)[None], data.X_test, data.y_test,
                                   setting.loss)
    out["risk_star"], out["accuracy_star"] = float(star_risk[0]), float(star_acc[0])
    if setting.loss == "exponential":
        # Where naive SGD converges: the minimizer of the expected regularized risk on the release.
        out["theta_noisy"] = {
            cal: solve_noisy_exponential(X_train, data.y_train, noise_var=releases[cal][0]["sigma"] ** 2,
                                         keep_prob=releases[cal][0]["label_keep_prob"],
                                         alpha=setting.alpha).theta
            for cal in setting.calibrations}
    if keep_test:
        out["data"] = data
    out["seconds"] = time.perf_counter() - t0
    return out


# --------------------------------------------------------------------------------------------
# Summary over seeds
# --------------------------------------------------------------------------------------------

def _head_key(h: dict) -> tuple:
    return (h["calibration"], h["head"])


def summarize(setting: Setting, seeds: list[dict]) -> dict:
    """Tables and curves over seeds, per calibration and head (JSON-ready)."""
    first = seeds[0]
    X_ref, y_ref = first["data"].X_test, first["data"].y_test
    theta_star = np.array([s["theta_star"] for s in seeds])               # (S, p)
    star_norm = float(np.mean(np.linalg.norm(theta_star, axis=1)))
    S = len(seeds)
    result = {"setting": asdict(setting), "n_seeds": S, "seeds": [s["seed"] for s in seeds],
              "n_train": first["n_train"], "n_test": first["n_test"], "p": first["p"],
              "radius": first["radius"], "bound": first["bound"], "n_updates": first["n_updates"],
              "theta_star_mean": theta_star.mean(axis=0).tolist(), "theta_star_norm": star_norm,
              "risk_star_mean": float(np.mean([s["risk_star"] for s in seeds])),
              "accuracy_star_mean": float(np.mean([s["accuracy_star"] for s in seeds])),
              "calibrations": {}}
    keys = [_head_key(h) for h in first["heads"]]
    for cal in setting.calibrations:
        c = first["calibration"][cal]
        block = {"release": c, "t_star_mean": float(np.mean([s["t_star"][cal] for s in seeds])),
                 "heads": {}}
        if "theta_noisy" in first:
            noisy = np.array([s["theta_noisy"][cal] for s in seeds])
            block["theta_noisy_mean"] = noisy.mean(axis=0).tolist()
            block["noisy_optimum_distance"] = float(
                np.mean(np.linalg.norm(noisy - theta_star, axis=1)))
        for key in keys:
            if key[0] not in (None, cal):
                continue
            hs = [next(h for h in s["heads"] if _head_key(h) == key) for s in seeds]
            thetas = np.array([h["theta"] for h in hs])
            errors = thetas - theta_star
            bias = errors.mean(axis=0)
            # Standard error of the mean error vector's norm: sqrt(trace Cov / S) is the norm one
            # expects from pure seed noise (the ratio is ~1 without bias, p dof).
            se = float(np.sqrt(np.sum(errors.var(axis=0, ddof=1)) / S)) if S > 1 else float("nan")
            risks = np.array([h["risk"] for h in hs])
            accs = np.array([h["accuracy"] for h in hs])
            params = np.array([h["params"] for h in hs])                    # (S, k, p+1)
            m = CURVE_TEST_ROWS
            avg_risk, _ = evaluate(params.mean(axis=0), X_ref[:m], y_ref[:m], setting.loss)
            avg_final, _ = evaluate(params.mean(axis=0)[-1:], X_ref, y_ref, setting.loss)
            final_risks = np.array([h["final_risk"] for h in hs])
            final_accs = np.array([h["final_accuracy"] for h in hs])
            entry = {
                "mode": hs[0]["mode"], "truncation": hs[0]["truncation"],
                "final_risk_mean": float(final_risks.mean()),
                "final_risk_sd": float(final_risks.std(ddof=1)) if S > 1 else 0.0,
                "final_accuracy_mean": float(final_accs.mean()),
                "final_accuracy_sd": float(final_accs.std(ddof=1)) if S > 1 else 0.0,
                "mean_theta": thetas.mean(axis=0).tolist(),
                "bias_norm": float(np.linalg.norm(bias)), "bias_se": se,
                "bias_in_se": float(np.linalg.norm(bias) / se) if se > 0 else float("nan"),
                "mean_distance": float(np.mean(np.linalg.norm(errors, axis=1))),
                "relative_bias": float(np.linalg.norm(bias) / star_norm) if star_norm else None,
                "relative_distance": float(np.mean(np.linalg.norm(errors, axis=1)) / star_norm)
                if star_norm else None,
                "averaged_model_final_risk": float(avg_final[0]),
                "projection_hits_mean": float(np.mean([h["projection_hits"] for h in hs])),
                "max_noise_energy_max": float(np.max([h["max_noise_energy"] for h in hs])),
                "seeds_ending_on_sphere": int(np.sum([h["ends_on_sphere"] for h in hs])),
                "train_seconds_median": float(np.median([h["train_seconds"] for h in hs])),
                "curves": {
                    "batches": hs[0]["steps"].tolist(),
                    "risk_mean": risks.mean(axis=0).tolist(),
                    "risk_sd": (risks.std(axis=0, ddof=1) if S > 1 else 0 * risks[0]).tolist(),
                    "averaged_model_risk": avg_risk.tolist(),
                    "accuracy_mean": None if setting.task == "regression" else accs.mean(axis=0).tolist(),
                    "accuracy_sd": None if setting.task == "regression" or S < 2
                    else accs.std(axis=0, ddof=1).tolist(),
                },
                "final_thetas": thetas.tolist(),
            }
            # Unbiasedness along the way, not only at the optimum: E[theta_t] of IWP follows clean SGD
            # (nearly linear dynamics), so compare the mean to clean SGD's mean in standard errors.
            clean = np.array([next(h for h in s["heads"] if h["head"] == "clean")["theta"]
                              for s in seeds])
            diff = thetas - clean
            se_c = float(np.sqrt(np.sum(diff.var(axis=0, ddof=1)) / S)) if S > 1 else float("nan")
            entry["distance_to_clean_sgd_of_mean"] = float(np.linalg.norm(diff.mean(axis=0)))
            entry["distance_to_clean_sgd_se"] = se_c
            if "theta_noisy" in first:
                noisy = np.array([s["theta_noisy"][cal] for s in seeds])
                entry["distance_to_noisy_optimum_of_mean"] = float(
                    np.linalg.norm((thetas - noisy).mean(axis=0)))
            block["heads"][key[1]] = entry
        result["calibrations"][cal] = block
    return result


def _ratio(a: float, b: float) -> str:
    # b ~ 0 up to rounding: a deterministic head (ACS clean SGD: seeds vary only the noise)
    return f"{a / b:.1f}" if b and np.isfinite(b) and b > 1e-12 * max(abs(a), 1e-300) else "–"


def format_table(result: dict) -> str:
    """Markdown table per calibration: the numbers of the issue's table."""
    lines = []
    star = result["theta_star_norm"]
    task_is_reg = loss_record(result["setting"]["loss"]).task == "regression"
    for cal, block in result["calibrations"].items():
        c = block["release"]
        sig = f"sigma = {c['sigma']:.3g}"
        if c.get("sigma_y"):
            sig += f", sigma_y = {c['sigma_y']:.3g}"
        if c.get("label_keep_prob"):
            sig += f", label keep prob = {c['label_keep_prob']:.3f}"
        lines.append(f"**{result['setting']['name']}, {cal} calibration** ({sig}; "
                     f"|theta*| = {star:.4g}, test risk at theta* = {result['risk_star_mean']:.4f}"
                     + ("" if task_is_reg else f", accuracy {result['accuracy_star_mean']:.4f}") + ", "
                     f"{result['n_seeds']} seeds, n = {result['n_train']:,})")
        lines.append("")
        acc_head = "" if task_is_reg else " final accuracy |"
        lines.append(f"| head | final test risk (mean ± sd) |{acc_head} |mean θ − θ*| (± se) "
                     "| in se | mean per-seed |θ − θ*| | per-seed / |θ*| | risk of mean θ "
                     "| |mean θ − mean θ_clean-SGD| (in se) |")
        lines.append("|---|---|" + ("" if task_is_reg else "---|") + "---|---|---|---|---|---|")
        for name, h in block["heads"].items():
            acc = "" if task_is_reg else \
                f" {h['final_accuracy_mean']:.4f} ± {h['final_accuracy_sd']:.4f} |"
            rel = "" if h["relative_distance"] is None else f"{h['relative_distance']:.1%}"
            lines.append(
                f"| {name} | {h['final_risk_mean']:.5f} ± {h['final_risk_sd']:.5f} |{acc} "
                f"{h['bias_norm']:.4g} ± {h['bias_se']:.2g} | {_ratio(h['bias_norm'], h['bias_se'])} | "
                f"{h['mean_distance']:.4g} | {rel} | {h['averaged_model_final_risk']:.5f} | "
                + ("–" if name == "clean" else
                   f"{h['distance_to_clean_sgd_of_mean']:.3g} "
                   f"({_ratio(h['distance_to_clean_sgd_of_mean'], h['distance_to_clean_sgd_se'])})")
                + " |")
        if "noisy_optimum_distance" in block:
            lines.append("")
            naive_distance = block['heads']['naive']['distance_to_noisy_optimum_of_mean']
            lines.append(f"Minimizer of the exact noisy risk (where naive SGD should end): "
                         f"|theta_noisy − theta*| = {block['noisy_optimum_distance']:.4g} "
                         f"({block['noisy_optimum_distance'] / star:.0%} of |theta*|); "
                         f"naive's mean θ is {naive_distance:.3g} from it.")
        lines.append("")
    return "\n".join(lines)


def run_setting(setting: Setting, seeds, *, n_train: int | None = None, engine: str = "numba",
                progress=None) -> tuple[dict, list[dict]]:
    """Run all seeds; returns (summary, per-seed raw results)."""
    raw = []
    for i, seed in enumerate(seeds):
        raw.append(run_seed(setting, int(seed), n_train=n_train, engine=engine,
                            keep_test=(i == 0)))
        if progress:
            progress(setting.name, i + 1, len(seeds), raw[-1]["seconds"])
    summary = summarize(setting, raw)
    summary["seconds"] = float(sum(r["seconds"] for r in raw))
    return summary, raw


def with_overrides(setting: Setting, **kw) -> Setting:
    return replace(setting, **{k: v for k, v in kw.items() if v is not None})


__all__ = ["Setting", "Dataset", "make_dataset", "calibrate", "run_seed", "run_setting",
           "summarize", "format_table", "evaluate", "default_radius", "with_overrides"]
