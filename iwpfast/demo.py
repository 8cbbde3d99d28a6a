"""`iwpfast demo`: the paper's result on this machine in about a minute.

What it does (all of it through the public layers, nothing demo-specific in the hot path):
1. generate the paper's synthetic problem (``iwpfast.datasets.make_classification``: p features,
   2 informative, one cluster per class, each feature min-max scaled to [-1, 1]; the last 1/6 of the
   rows is the clean test set), or, with ``real=True``, the shipped ACS 2024 income task (features
   AGEP, SEX, SCHL, WKHP scaled by their declared ranges; a random 20% is the test set);
2. write the training rows to a temporary Parquet file and release it with
   ``iwpfast.privacy.release`` ((epsilon, 1e-5)-LDP split evenly between features and labels);
   the clean columns are added to the released file (``clean_<name>``) for the simulation only,
   so that one scan feeds the three heads;
3. train the clean / naive / IWP heads in ONE scan (``fit_stream`` with three heads, tracing
   (theta, b) along the pass);
4. compute the clean optimum theta* of the regularized risk with the deterministic full-batch
   Newton solver (``iwpfast.solvers.solve``) and print a table: test risk, excess risk over theta*,
   accuracy, distance |theta - theta*|, and the scan's rows/s; write a PNG of the test risk of each
   head's iterate against the number of batches.

Settings (the paper's, docs/design.md section 6): exponential loss, lambda = 5, batch 128,
bound sqrt(p), theta_0 = 0, no intercept, gamma = 1e-4.  Our choices, to make the point clearly and
stably at 10^6 rows (docs/design.md section 2, "Why projection and the variance cap matter"): the
output of each head is its *tail average* (the
mean of the iterates of the second half of the pass), which removes most of IWP-SGD's iterate noise
without the bias a uniform average from theta_0 = 0 carries; and gamma = max(1e-4, 4 / (lambda T))
with T the number of updates, i.e. the paper's 1e-4 at 10^6 rows, raised on small runs so that the
pass still forgets theta_0 (exp(-gamma lambda T) <= e^-4).  The IWP head also gets a variance cap
sigma^2 |theta|^2 <= 4 (docs/design.md section 2): inactive at the optimum here
(sigma^2 |theta*|^2 ~ 0.4 at the default size) but it stops the exp(sigma^2 |theta|^2) gradient
variance from running away on an unlucky early stretch; the table says when it was hit.

Settings of the real-data demo (``real=True``; not the paper's ACS settings, whose lambda = 10
without an intercept gives theta* ~ 0.02 and a 0.57-accuracy model, i.e. nothing to see):
- a noise-free intercept: the scaled ACS features are not centred (most people are adults who
  work), so without b the optimum has to spend theta on the offset;
- lambda = 0.5: |theta*| = 0.27 and 0.645 test accuracy (the unregularized optimum reaches 0.735,
  lambda = 1: 0.62, lambda = 0.3: 0.67).  IWP-SGD's gradient variance grows as
  exp(sigma^2 |theta|^2), so the norm of theta* the release can support is set by sigma;
- epsilon = 10 split evenly ((5, 1e-5) on the feature vector, sigma = 3.57; labels kept with
  probability 0.993): sigma^2 |theta*|^2 = 0.9, so the 1,757 updates of 225k rows average the IWP
  noise out (over seeds 0..7 |theta_iwp - theta*| was 0.019..0.065, naive 0.25, i.e. naive
  collapses to theta ~ 0 and predicts the majority class).  At epsilon = 5 (sigma = 6.5)
  sigma^2 |theta*|^2 = 3.1: 225k rows are too few and IWP lands 24-40% of |theta*| away even at
  lambda = 1 -- more rows, or a weaker model, are the price of more privacy.
"""
from __future__ import annotations

import math
import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from .exceptions import InvalidInputError, PrivacyLeakWarning

HEADS = ("clean", "naive", "iwp")
PAPER_LEARNING_RATE = 1e-4
DEMO_VARIANCE_CAP = 4.0
REAL_EPSILON = 10.0
REAL_ALPHA = 0.5


@dataclass
class HeadSummary:
    name: str
    theta: np.ndarray
    intercept: float
    test_risk: float
    accuracy: float
    distance: float
    telemetry: dict


@dataclass
class DemoResult:
    """Everything the demo printed, for programmatic use (tests, notebooks)."""

    rows: int                      # training rows
    test_rows: int
    features: list[str]
    sigma: float
    label_keep_prob: float
    epsilon: float
    learning_rate: float
    theta_star: np.ndarray
    optimum_risk: float
    optimum_accuracy: float
    heads: dict[str, HeadSummary]
    rows_per_s: float
    scan_s: float
    total_s: float
    plot_path: str | None
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    compile_s: float = 0.0
    table: str = ""
    alpha: float = 5.0
    fit_intercept: bool = False
    intercept_star: float = 0.0


def _synthetic(rows: int, features: int, seed: int):
    from .datasets import make_classification

    n_total = rows + rows // 5            # the last 1/6 of all rows is the test set
    X, y = make_classification(n_total, features, n_informative=min(2, features),
                               n_clusters_per_class=1, random_state=seed)
    names = [f"x{j}" for j in range(features)]
    return X[:rows], y[:rows], X[rows:], y[rows:], names, {n: (-1.0, 1.0) for n in names}


def _real(seed: int, rows: int | None):
    from .datasets import load_acs, scale_to_unit

    data = load_acs("income")
    rng = np.random.default_rng(seed)
    order = rng.permutation(data.n_rows)
    n_test = data.n_rows // 5
    X = data.X[order]
    y = data.y[order]
    Xtr, ytr, Xte, yte = X[n_test:], y[n_test:], X[:n_test], y[:n_test]
    if rows is not None:
        Xtr, ytr = Xtr[:rows], ytr[:rows]
    ranges = dict(data.ranges)
    # the test set is seen in the released space: scaled by the declared ranges (and clipped)
    Xte_scaled = scale_to_unit(Xte, data.ranges_array)
    return Xtr, ytr, Xte_scaled, yte, list(data.features), ranges


def _risk_and_accuracy(loss: str, theta, b, X, y):
    from .experiments.common import evaluate

    risk, acc = evaluate(np.append(theta, b)[None], X, y, loss)
    return float(risk[0]), float(acc[0])


def _fmt_rate(r: float) -> str:
    return f"{r / 1e6:.2f} M" if r >= 1e6 else f"{r / 1e3:.0f} k"


def run_demo(*, rows: int = 1_000_000, features: int = 10, epsilon: float | None = None,
             delta: float = 1e-5,
             loss: str = "exponential", out_dir: str | os.PathLike = ".", seed: int = 0,
             real: bool = False, alpha: float | None = None, batch_size: int = 128,
             learning_rate: float | None = None, fit_intercept: bool | None = None,
             progress: bool = True, plot: bool = True, stream=None) -> DemoResult:
    """Run the demo; print the table to ``stream`` (stdout) and return a :class:`DemoResult`.

    ``None`` picks the setting's default: synthetic epsilon = 5, lambda = 5, no intercept (the
    paper's); real (ACS) epsilon = 10, lambda = 0.5, a noise-free intercept (see the module notes).
    With ``real=True``, ``rows`` caps the ACS training rows (all 224,909 at the default).
    """
    from .privacy import ReleaseSpec
    from .sgd.driver import noise_from_release
    from .sgd.schedules import default_radius

    stream = sys.stdout if stream is None else stream
    t_start = time.perf_counter()
    epsilon, alpha, fit_intercept = _settings(rows, features, epsilon, loss, real, alpha,
                                              fit_intercept)
    if real:
        Xtr, ytr, Xte, yte, names, ranges = _real(seed, rows)
    else:
        Xtr, ytr, Xte, yte, names, ranges = _synthetic(rows, features, seed)
    n, p = Xtr.shape
    bound = math.sqrt(p)
    # both settings label the rows -1/+1: declared, since a release never reads its classes from
    # the labels (the fixed rule would record [0, 1] and warn)
    spec = ReleaseSpec(epsilon_x=epsilon / 2, delta=delta, bound=bound, epsilon_y=epsilon / 2,
                       features=tuple(names), ranges=ranges, label="y", classes=(-1, 1))
    n_updates = -(-n // batch_size)
    if learning_rate is None:
        learning_rate = max(PAPER_LEARNING_RATE, 4.0 / (alpha * n_updates))
    trace_every = max(1, n_updates // 200)
    common = dict(loss=loss, n_features=p, batch_size=batch_size, alpha=float(alpha),
                  schedule="constant", learning_rate=float(learning_rate),
                  radius=default_radius(loss, bound, alpha), fit_intercept=fit_intercept,
                  average_start=n_updates // 2, trace_every=trace_every)

    with tempfile.TemporaryDirectory(prefix="iwpfast-demo-") as tmp:
        spec, rows_written, Xtr_scaled, sim_path = _release_with_clean_columns(
            tmp, Xtr, ytr, names, ranges, spec, seed, real)
        # the learner's noise parameters come from the release's metadata (the law applied)
        found = noise_from_release(spec.to_metadata(rows_written), list(names))
        keep = 1.0 if found.label_keep_prob is None else float(found.label_keep_prob)
        heads = _heads(names, found.noise_var, keep, common)
        result, traces, compile_s = _scan(sim_path, heads, loss, progress, trace_every)

    sol, opt_risk, opt_acc, summaries, curves = _summaries(
        result, traces, Xtr_scaled, ytr, Xte, yte, loss, float(alpha), fit_intercept)
    res = DemoResult(rows=n, test_rows=len(yte), features=list(names), sigma=float(spec.sigma),
                     label_keep_prob=keep, epsilon=float(epsilon), learning_rate=float(learning_rate),
                     theta_star=sol.theta, optimum_risk=opt_risk, optimum_accuracy=opt_acc,
                     heads=summaries, rows_per_s=float(result.rows_per_s), scan_s=float(result.elapsed_s),
                     total_s=0.0, plot_path=None, curves=curves, compile_s=compile_s,
                     alpha=float(alpha), fit_intercept=bool(fit_intercept),
                     intercept_star=float(sol.intercept))
    res.plot_path = _plot(res, out_dir, loss, real) if plot else None
    res.total_s = time.perf_counter() - t_start
    res.table = format_table(res, loss, real)
    print(res.table, file=stream)
    return res


def _settings(rows: int, features: int, epsilon: float | None, loss: str, real: bool,
              alpha: float | None, fit_intercept: bool | None) -> tuple[float, float, bool]:
    """Check the demo's arguments and resolve the setting's defaults: (epsilon, alpha,
    fit_intercept)."""
    from .losses import CLASSIFICATION_LOSSES

    if loss not in CLASSIFICATION_LOSSES:
        raise InvalidInputError(f"unknown loss {loss!r} for the demo; choose one of {CLASSIFICATION_LOSSES}")
    if epsilon is None:
        epsilon = REAL_EPSILON if real else 5.0
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise InvalidInputError(f"--epsilon must be a positive number (got {epsilon})")
    if not real:
        if rows < 1000:
            raise InvalidInputError(f"--rows {rows} is too small to show anything; use at least 1000")
        if features < 2:
            raise InvalidInputError(f"--features {features}: use at least 2 (the problem has 2 informative)")
    if alpha is None:
        alpha = REAL_ALPHA if real else 5.0     # synthetic: the paper's lambda
    if fit_intercept is None:
        fit_intercept = real      # ACS features are not centred: without b, theta* is near 0
    return epsilon, alpha, fit_intercept


def _release_with_clean_columns(tmp: str, Xtr, ytr, names, ranges, spec, seed: int, real: bool):
    """Release the training rows into ``tmp`` and add their clean columns (``clean_<name>``,
    ``clean_y``) to the released file, so that one scan feeds the clean head too (a simulation:
    never ship this).  Returns (the release's spec, its rows, the clean features in the released
    space, the path of the file with both)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .datasets import scale_to_unit
    from .experiments.common import clip_rows
    from .privacy import release

    clean_path = os.path.join(tmp, "clean.parquet")
    released_path = os.path.join(tmp, "released.parquet")
    sim_path = os.path.join(tmp, "released_with_clean.parquet")
    # raw training data (for ACS: raw units; the release scales them by the declared ranges)
    pq.write_table(pa.table({**{f: Xtr[:, j] for j, f in enumerate(names)}, "y": ytr}), clean_path)
    with warnings.catch_warnings():
        # the demo is a simulation by design: its seeded release (marked "seeded" in the
        # file) is expected, no need to warn about it
        warnings.filterwarnings("ignore", message="seeded release", category=PrivacyLeakWarning)
        rel = release(clean_path, released_path, spec, seed=seed + 1, progress=False)
    # Clean features in the released space: scaled by the declared ranges (identity for [-1, 1]).
    sim = pq.read_table(released_path)
    Xtr_scaled = scale_to_unit(Xtr, np.array([ranges[f] for f in names])) if real else Xtr
    if rel.spec.bound is not None:          # the release's L2 clip (a no-op at B = sqrt(p))
        Xtr_scaled = clip_rows(Xtr_scaled.T, rel.spec.bound).T
    for j, f in enumerate(names):
        sim = sim.append_column(f"clean_{f}", pa.array(Xtr_scaled[:, j]))
    sim = sim.append_column("clean_y", pa.array(ytr))
    pq.write_table(sim, sim_path)
    return rel.spec, rel.rows_written, Xtr_scaled, sim_path


def _heads(names, noise_var, keep: float, common: dict) -> list:
    """The three heads of the one scan: clean (on the clean columns), naive and IWP."""
    from .sgd.driver import Head
    from .sgd.state import HeadConfig

    p = len(names)
    return [
        Head("clean", HeadConfig(mode="clean", noise_var=np.zeros(p), **common),
             [f"clean_{f}" for f in names], "clean_y"),
        Head("naive", HeadConfig(mode="naive", noise_var=noise_var, **common), list(names), "y"),
        Head("iwp", HeadConfig(mode="iwp", noise_var=noise_var, label_keep_prob=keep,
                               variance_cap=DEMO_VARIANCE_CAP, **common), list(names), "y"),
    ]


def _scan(sim_path: str, heads: list, loss: str, progress: bool, trace_every: int):
    """The one scan of the three heads, tracing (theta, b) along it: (the driver's result, the
    traces per head, the seconds spent compiling or loading the kernels before it)."""
    from .sgd.driver import fit_stream
    from .sgd.engine import warmup

    traces: dict[str, list] = {h: [] for h in HEADS}

    def on_trace(steps, params):
        for name in HEADS:
            if name in steps and len(steps[name]):
                traces[name].append((np.asarray(steps[name]).copy(), np.asarray(params[name]).copy()))

    # compile (or load from Numba's cache) before the clock starts: rows/s is the scan's rate
    t_compile = time.perf_counter()
    # what the scan runs: the naive and IWP heads on the release (float32 features, int8 labels
    # read in place) in the several-heads kernel, warmed with its single-head kernel in case they
    # run apart (without it the scan compiled it inside its clock: ~7 s, "137 k rows/s"); the
    # clean head on float64 features and labels
    warmup(dtypes=("float32",), label_dtypes=("int8",), losses=(loss,), heads=True)
    warmup(dtypes=("float64",), losses=(loss,))
    compile_s = time.perf_counter() - t_compile
    result = fit_stream(sim_path, heads, progress=progress, trace_every=trace_every,
                        trace_callback=on_trace)
    return result, traces, compile_s


def _summaries(result, traces, Xtr_scaled, ytr, Xte, yte, loss: str, alpha: float,
               fit_intercept: bool):
    """The clean optimum theta* (full-batch Newton on the clean training rows) and each head's
    output and test-risk curve against it: (solution, its test risk, its accuracy, summaries,
    curves)."""
    from .experiments.common import evaluate
    from .solvers import solve

    sol = solve(Xtr_scaled, ytr, loss=loss, alpha=alpha, fit_intercept=fit_intercept)
    opt_risk, opt_acc = _risk_and_accuracy(loss, sol.theta, sol.intercept, Xte, yte)
    summaries = {}
    curves = {}
    for name in HEADS:
        state = result.states[name]
        theta, b = state.coef(averaged=True)
        r, a = _risk_and_accuracy(loss, theta, b, Xte, yte)
        summaries[name] = HeadSummary(name, theta, b, r, a, float(np.linalg.norm(theta - sol.theta)),
                                      dict(result.telemetry.get(name, {})))
        if traces[name]:
            steps = np.concatenate([s for s, _ in traces[name]])
            params = np.concatenate([q for _, q in traces[name]])
            # in blocks of iterates: a (test rows x iterates) matrix would be 300 MB at the default size
            risks, _ = evaluate(params, Xte, yte, loss)
            curves[name] = (steps, risks)
    return sol, opt_risk, opt_acc, summaries, curves


def format_table(res: DemoResult, loss: str, real: bool) -> str:
    data = "ACS 2024 income (FL, NY, PA)" if real else f"synthetic make_classification, p={len(res.features)}"
    lines = [
        f"iwpfast demo: {data}; {res.rows:,} training rows, {res.test_rows:,} clean test rows",
        f"release: ({res.epsilon:g}, 1e-05)-LDP split evenly: features sigma = {res.sigma:.4g}, "
        f"labels kept with probability {res.label_keep_prob:.4f}",
        f"training: {loss} loss, one scan, 3 heads, batch 128, gamma = {res.learning_rate:.3g}, "
        + (f"lambda = {res.alpha:g}, noise-free intercept, " if res.fit_intercept else "")
        + "output = tail average (last half of the iterates)",
        "",
        f"{'head':<28}{'test risk':>10}{'excess':>10}{'accuracy':>10}{'|theta-theta*|':>16}",
        f"{'clean optimum theta* (Newton)':<28}{res.optimum_risk:>10.4f}{0.0:>10.4f}"
        f"{res.optimum_accuracy:>10.4f}{0.0:>16.4f}",
    ]
    labels = {"clean": "SGD on clean data", "naive": "SGD on private data (naive)",
              "iwp": "IWP-SGD on private data"}
    for name in HEADS:
        h = res.heads[name]
        lines.append(f"{labels[name]:<28}{h.test_risk:>10.4f}{h.test_risk - res.optimum_risk:>10.4f}"
                     f"{h.accuracy:>10.4f}{h.distance:>16.4f}")
    iwp = res.heads["iwp"].telemetry
    optimum = f"|theta*| = {np.linalg.norm(res.theta_star):.4f}"
    if res.fit_intercept:
        optimum += f", b* = {res.intercept_star:+.4f}"
    lines += [
        "",
        f"{optimum}; scan: {res.rows:,} rows x 3 heads in "
        f"{res.scan_s:.2f} s = {_fmt_rate(res.rows_per_s)} rows/s (kernel compile/cache load before it: "
        f"{res.compile_s:.1f} s); whole demo {res.total_s:.1f} s",
        f"IWP head: largest sigma^2|theta|^2 = {iwp.get('max_noise_energy', float('nan')):.3g}, "
        f"projection hits {int(iwp.get('projection_hits', 0))}, "
        f"variance-cap hits {int(iwp.get('cap_hits', 0))}",
    ]
    if res.plot_path:
        lines.append(f"plot: {res.plot_path}")
    return "\n".join(lines)


def _plot(res: DemoResult, out_dir, loss: str, real: bool) -> str | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print('matplotlib is not installed: no plot written (pip install "iwpfast[plot]")',
              file=sys.stderr)
        return None
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.abspath(os.path.join(out_dir, "iwpfast_demo_acs.png" if real else "iwpfast_demo.png"))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    colors = {"clean": "tab:green", "naive": "tab:red", "iwp": "tab:blue"}
    labels = {"clean": "SGD, clean data", "naive": "SGD, private data (naive)",
              "iwp": "IWP-SGD, private data"}
    for name in HEADS:
        if name in res.curves:
            steps, risks = res.curves[name]
            ax.plot(steps, risks, color=colors[name], lw=1.2, label=labels[name] + " (iterate)")
        ax.axhline(res.heads[name].test_risk, color=colors[name], ls="--", lw=0.9)
    ax.axhline(res.optimum_risk, color="black", ls=":", lw=1.0, label="clean optimum theta*")
    ax.set_xlabel("batches")
    ax.set_ylabel(f"test risk ({loss} loss, clean test set)")
    ax.set_title(f"({res.epsilon:g}, 1e-5)-LDP, {res.rows:,} rows: dashed = tail-averaged output")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
