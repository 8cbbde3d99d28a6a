"""``iwpfast bench``: one table comparing iwpfast with its peers on the same data, in the same run.

Rows (all one pass over the same generated data, timed as the median of ``repeats`` runs, data
already in memory, compile time excluded and reported separately):

* ``iwpfast IWP``   -- the fused kernel, mode iwp, on the released (noisy) data;
* ``iwpfast clean`` -- the same kernel, mode clean, on the clean data;
* ``NumPy (vectorized per batch)`` -- the same algorithm as the kernel (mode iwp), one NumPy
  expression per batch: the fastest pure-NumPy formulation (a Python loop per batch is unavoidable,
  each update depends on the previous one); timed on ``numpy_rows`` rows;
* ``scikit-learn SGDClassifier.partial_fit`` (clean, when installed) -- its native per-row SGD over
  the whole array in one call (float64, row-major, as it requires);
* River / Vowpal Wabbit when installed (clean, per row).

Ratios are rows/s divided by the ``iwpfast IWP`` row's. The machine is usually shared: compare
ratios of one run, not absolute numbers of different runs.

Example::

    from iwpfast.benchmarks import run_bench, format_bench
    result = run_bench(rows=200_000, numpy_rows=20_000, repeats=1)
    print(format_bench(result))
"""
from __future__ import annotations

import math
import os
import platform
import statistics
import time
from dataclasses import dataclass
from functools import partial

import numpy as np

from .exceptions import InvalidInputError
from .losses import CLASSIFICATION_LOSSES
from .sgd.schedules import default_radius

__all__ = ["run_bench", "format_bench", "numpy_pass"]


def numpy_pass(cfg, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The kernel's update (docs/internals.md), vectorized with NumPy within each batch.

    Constant step, projection on the ball of radius ``cfg.radius``, no averaging, no telemetry;
    X is feature-major (p, n). Returns the final theta.
    """
    from .estimates import glm_scalars

    p, n = X.shape
    B = int(cfg.batch_size)
    s = np.asarray(cfg.noise_var, dtype=np.float64) if cfg.mode == "iwp" else np.zeros(p)
    label_weight = cfg.label_tilde
    theta = np.zeros(p)
    gamma, alpha, radius = float(cfg.learning_rate), float(cfg.alpha), float(cfg.radius)
    for start in range(0, n, B):
        Xb = X[:, start:start + B].astype(np.float64)
        yb = y[start:start + B].astype(np.float64)
        m = yb.shape[0]
        tau = 0.5 * float(s @ (theta * theta))
        a, c = glm_scalars(cfg.loss, yb * (theta @ Xb), tau, label_weight, cfg.truncation)
        g = (Xb @ (a * yb)) / m - (float(c.sum()) / m) * (s * theta) + alpha * theta
        theta = theta - gamma * g
        norm = math.sqrt(float(theta @ theta))
        if norm > radius:
            theta *= radius / norm
    return theta


def _median_time(fn, repeats: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def cpu_model() -> str:
    """The CPU model name (printed with every benchmark figure: the machine changes between runs)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _versions() -> dict:
    out = {"python": platform.python_version(), "numpy": np.__version__}
    for mod in ("numba", "pyarrow", "sklearn", "river", "vowpalwabbit"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:          # not installed (or broken): say so rather than fail
            out[mod] = None
    from . import __version__
    out["iwpfast"] = __version__
    return out


def run_bench(rows: int = 2_000_000, features: int = 10, *, loss: str = "logistic",
              batch_size: int = 128, dtype: str = "float32", repeats: int = 3,
              numpy_rows: int = 200_000, peer_rows: int | None = None, epsilon: float = 2.0,
              seed: int = 0) -> dict:
    """Measure every row of the table on one generated dataset; returns a JSON-ready dict."""
    from .sgd.state import HeadConfig

    if loss not in CLASSIFICATION_LOSSES:
        raise InvalidInputError(f"--loss {loss!r}: the bench compares classifiers; use one of "
                                f"{', '.join(CLASSIFICATION_LOSSES)}")
    if dtype not in ("float32", "float64"):
        raise InvalidInputError(f"--dtype {dtype!r}: use float32 or float64")
    if rows < batch_size or features < 1 or repeats < 1:
        raise InvalidInputError(f"rows={rows}, features={features}, repeats={repeats}: need "
                                "rows >= batch size, at least one feature and one repeat")
    numpy_rows = min(int(numpy_rows), rows)
    peer_rows = min(int(peer_rows or rows), rows)

    t0 = time.perf_counter()
    data = _bench_data(rows, features, dtype, epsilon, seed)
    data_seconds = time.perf_counter() - t0

    alpha = 1e-3
    radius = default_radius(loss, data.bound, alpha)
    config = partial(HeadConfig, loss=loss, n_features=features, batch_size=batch_size, alpha=alpha,
                     learning_rate=1e-3, radius=radius, truncation=2)
    cfg_iwp = config(mode="iwp", noise_var=np.full(features, data.sigma ** 2), label_keep_prob=data.keep)
    cfg_clean = config(mode="clean", noise_var=np.zeros(features))

    from .sgd import engine
    t0 = time.perf_counter()
    engine.warmup(dtypes=(dtype,))
    compile_seconds = time.perf_counter() - t0

    results: list[dict] = []
    add = _adder(results)
    s, ts = _median_time(_kernel_pass(cfg_iwp, data.noisy_fm, data.y_noisy), repeats)
    add("iwpfast IWP", rows, s, ts, f"fused Numba kernel, {dtype}, batch {batch_size}")
    s, ts = _median_time(_kernel_pass(cfg_clean, data.clean_fm, data.y_clean), repeats)
    add("iwpfast clean", rows, s, ts, f"same kernel, mode clean, {dtype}")
    Xn, yn = data.noisy_fm[:, :numpy_rows], data.y_noisy[:numpy_rows]
    s, ts = _median_time(lambda: numpy_pass(cfg_iwp, Xn, yn), repeats)
    add("NumPy (vectorized per batch)", numpy_rows, s, ts,
        f"same algorithm (IWP), one NumPy expression per batch of {batch_size}")
    X_rows = np.ascontiguousarray(data.X[:peer_rows])     # float64 row-major, as the peers need
    _time_peers(add, X_rows, data.y[:peer_rows], loss, alpha, repeats)

    ref = results[0]["rows_per_s"]
    for r in results:
        r["ratio_to_iwp"] = r["rows_per_s"] / ref
    versions = _versions()
    missing = [name for name, mod in (("scikit-learn", "sklearn"), ("River", "river"),
                                      ("Vowpal Wabbit", "vowpalwabbit")) if versions[mod] is None]
    return {
        "setup": {"rows": rows, "features": features, "loss": loss, "batch_size": batch_size,
                  "dtype": dtype, "repeats": repeats, "epsilon": epsilon, "sigma": data.sigma,
                  "label_keep_prob": data.keep, "numpy_rows": numpy_rows, "peer_rows": peer_rows,
                  "data": "make_classification (2 informative), features scaled to [-1, 1]"},
        "compile_seconds": compile_seconds,
        "data_seconds": data_seconds,
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform()},
        "versions": versions,
        "not_installed": missing,
        "results": results,
    }


@dataclass
class _BenchData:
    X: np.ndarray              # clean rows, float64 row-major (the peers' input)
    y: np.ndarray
    clean_fm: np.ndarray       # clean, feature-major in the bench's dtype (the kernel's input)
    noisy_fm: np.ndarray       # released: Gaussian feature noise, randomized-response labels
    y_clean: np.ndarray
    y_noisy: np.ndarray
    bound: float
    sigma: float
    keep: float


def _bench_data(rows: int, features: int, dtype: str, epsilon: float, seed: int) -> _BenchData:
    """The generated rows, clean and released ((epsilon / 2, 1e-5) on the features, epsilon / 2
    on the labels), in memory."""
    from .datasets import make_classification
    from .privacy.calibration import gaussian_noise_scale, label_keep_probability

    X, y = make_classification(rows, n_features=features, random_state=seed)
    bound = math.sqrt(features)
    sigma = gaussian_noise_scale(epsilon / 2, 1e-5, bound, "analytic")
    keep = label_keep_probability(epsilon / 2)
    rng = np.random.default_rng(seed + 1)
    clean_fm = np.ascontiguousarray(X.T, dtype=dtype)
    noisy_fm = (clean_fm + sigma * rng.standard_normal(clean_fm.shape).astype(dtype)).astype(dtype)
    y_noisy = np.where(rng.uniform(size=rows) < keep, y, -y).astype(dtype)
    return _BenchData(X, y, clean_fm, noisy_fm, y.astype(dtype), y_noisy, bound, sigma, keep)


def _kernel_pass(cfg, Xfm, yy):
    """One pass of the kernel over the whole array, from a fresh state (a thing to time)."""
    from .sgd import engine
    from .sgd.state import HeadState

    def go():
        state = HeadState.new(cfg)
        engine.run_chunk(cfg, state, Xfm, yy)
        engine.finish(cfg, state)
    return go


def _adder(results: list):
    """``add(name, rows, seconds, times, note)``: one row of the table into ``results``."""
    def add(name, n, seconds, times, note):
        results.append({"name": name, "rows": n, "seconds": seconds, "times": times,
                        "rows_per_s": n / seconds if seconds > 0 else float("inf"), "note": note})
    return add


def _time_peers(add, X_rows: np.ndarray, y_rows: np.ndarray, loss: str, alpha: float,
                repeats: int) -> None:
    """The rows of the peers that are installed and learn this loss (clean data, per row)."""
    features = X_rows.shape[1]
    peer_rows = X_rows.shape[0]
    try:
        from sklearn.linear_model import SGDClassifier
    except ImportError:
        SGDClassifier = None
    if SGDClassifier is not None and loss in ("logistic", "quadratic"):
        sk_loss = "log_loss" if loss == "logistic" else "squared_error"

        def sk():
            SGDClassifier(loss=sk_loss, penalty="l2", alpha=alpha, learning_rate="constant",
                          eta0=1e-3, fit_intercept=False, shuffle=False).partial_fit(
                X_rows, y_rows, classes=np.array([-1.0, 1.0]))
        s, ts = _median_time(sk, repeats)
        add("scikit-learn SGDClassifier.partial_fit", peer_rows, s, ts,
            "clean, per-row SGD, float64 row-major (its native input)")
    try:
        from river import linear_model as river_lm
        from river import optim as river_optim
    except ImportError:
        river_lm = None
    if river_lm is not None and loss == "logistic":
        n_river = min(peer_rows, 100_000)

        def rv():
            model = river_lm.LogisticRegression(optimizer=river_optim.SGD(1e-3), l2=alpha)
            for i in range(n_river):
                model.learn_one({j: X_rows[i, j] for j in range(features)}, y_rows[i] > 0)
        s, ts = _median_time(rv, 1)
        add("River LogisticRegression.learn_one", n_river, s, ts, "clean, per row, dicts")
    try:
        import vowpalwabbit
    except ImportError:
        vowpalwabbit = None
    if vowpalwabbit is not None and loss == "logistic":
        n_vw = min(peer_rows, 200_000)
        lines = [f"{int(y_rows[i])} | " + " ".join(f"{j}:{X_rows[i, j]:.6g}" for j in range(features))
                 for i in range(n_vw)]

        def vw():
            model = vowpalwabbit.Workspace("--loss_function logistic --quiet", enable_logging=False)
            for line in lines:
                model.learn(line)
            model.finish()
        s, ts = _median_time(vw, 1)
        add("Vowpal Wabbit (Python bindings)", n_vw, s, ts, "clean, per row, text parsing included")


def format_bench(result: dict) -> str:
    """The table as text (Markdown)."""
    s = result["setup"]
    lines = [f"iwpfast bench: {s['rows']:,} rows x {s['features']} features, {s['loss']} loss, "
             f"batch {s['batch_size']}, {s['dtype']}; median of {s['repeats']} runs",
             f"machine: {result['machine']['cpu']} ({result['machine']['cores']} cores); "
             + ", ".join(f"{k} {v}" for k, v in result["versions"].items() if v),
             f"compile/cache load (excluded): {result['compile_seconds']:.2f} s", "",
             "| implementation | rows timed | M rows/s | ratio to iwpfast IWP | note |",
             "|---|---|---|---|---|"]
    for r in result["results"]:
        lines.append(f"| {r['name']} | {r['rows']:,} | {r['rows_per_s'] / 1e6:.3g} | "
                     f"{r['ratio_to_iwp']:.3g} | {r['note']} |")
    if result["not_installed"]:
        lines.append("")
        lines.append("not installed (rows skipped): " + ", ".join(result["not_installed"]))
    return "\n".join(lines)
