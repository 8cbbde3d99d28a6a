"""The NumPy twin of the SGD kernel (iwpfast.sgd.reference): the update semantics of
docs/internals.md, chunking invariance, scikit-learn equivalence, and errors."""
import math
import warnings

import numpy as np
import pytest

from iwpfast.estimates import iwp_gradient
from iwpfast.exceptions import DivergenceError, InvalidInputError
from iwpfast.sgd.reference import reference_finish, reference_run_chunk
from iwpfast.sgd.state import TELEMETRY_INDEX, HeadConfig, HeadState
from tests.conftest import make_head_config, run_in_chunks


def _stream(n=1000, p=4, seed=0, regression=False, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(p, n)) * 0.7).astype(dtype)
    if regression:
        y = X.T.astype(float) @ np.linspace(1, -1, p) + 0.3 * rng.normal(size=n)
    else:
        y = np.where(X[0] + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _cfg(**kw):
    """conftest's head config with the logistic loss, p = 4 and noise variance 0.3."""
    p = kw.pop("n_features", 4)
    return make_head_config(**{"loss": "logistic", "n_features": p, "noise_var": np.full(p, 0.3),
                               "learning_rate": 0.02, "alpha": 0.05, **kw})


def _run(cfg, X, y, chunk, state=None, **state_kw):
    return run_in_chunks(reference_run_chunk, reference_finish, cfg, X, y, chunk, state=state,
                         **state_kw)


def _snapshot(state):
    return np.concatenate([state.theta, state.intercept, state.theta_avg, state.intercept_avg,
                           state.telemetry, state.counters.astype(float)])


CONFIGS = [
    dict(loss="exponential", label_keep_prob=0.8, fit_intercept=True, radius=0.35, average_start=5),
    dict(loss="quadratic", schedule="inverse", mu=0.05, variance_cap=0.03, average_start=0),
    dict(loss="logistic", truncation=3, label_keep_prob=0.7, fit_intercept=True),
    dict(loss="logistic", mode="naive", truncation=0),
    dict(loss="squared_error", fit_intercept=True, noise_var=np.array([0.1, 0.2, 0.0, 0.4]),
         radius=0.3),
    dict(loss="exponential", mode="clean", noise_var=np.zeros(4), average_start=10),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw", CONFIGS, ids=lambda kw: f"{kw['loss']}-{kw.get('mode', 'iwp')}")
def test_chunk_size_invariance_is_bit_identical(kw, dtype):
    cfg = _cfg(**kw)
    X, y = _stream(n=1000, regression=cfg.loss == "squared_error", dtype=dtype)
    ref = _snapshot(_run(cfg, X, y, 1000))
    for chunk in (1, 7, 128, 10_000):
        assert np.array_equal(_snapshot(_run(cfg, X, y, chunk)), ref), chunk
    assert _run(cfg, X, y, 1000).step == math.ceil(1000 / 16)


def test_sequence_of_columns_equals_matrix():
    cfg = _cfg(label_keep_prob=0.9)
    X, y = _stream(dtype=np.float32)
    columns = [np.ascontiguousarray(c) for c in X]
    a = HeadState.new(cfg)
    reference_run_chunk(cfg, a, columns, y)
    b = HeadState.new(cfg)
    X.setflags(write=False)                     # read-only input is fine
    reference_run_chunk(cfg, b, X, y)
    assert np.array_equal(_snapshot(a), _snapshot(b))
    assert np.array_equal(a.carry_X, b.carry_X) and a.carry_n == 1000 % 16


@pytest.mark.parametrize("loss", ["exponential", "quadratic", "logistic", "squared_error"])
def test_iwp_with_zero_noise_and_public_labels_is_clean_exactly(loss):
    X, y = _stream(regression=loss == "squared_error")
    common = dict(loss=loss, fit_intercept=True, average_start=3, radius=5.0)
    iwp = _run(_cfg(mode="iwp", noise_var=np.zeros(4), **common), X, y, 100)
    clean = _run(_cfg(mode="clean", noise_var=np.zeros(4), **common), X, y, 100)
    # naive ignores cfg.noise_var entirely (s = 0 outside mode iwp, docs/internals.md)
    naive = _run(_cfg(mode="naive", noise_var=np.full(4, 2.0), **common), X, y, 100)
    assert np.array_equal(_snapshot(iwp), _snapshot(clean))
    assert np.array_equal(_snapshot(naive), _snapshot(clean))


def _manual(cfg, X, y, theta0=None, b0=0.0):
    """The update written out from iwp_gradient (per-row gradients) and the steps of internals.md."""
    p, n = X.shape
    theta = np.zeros(p) if theta0 is None else theta0.copy()
    b = b0
    avg, bavg, n_avg = np.zeros(p), 0.0, 0
    norms, projections, caps, energies = [], 0, 0, [0.0]
    s = cfg.noise_var if cfg.mode == "iwp" else np.zeros(p)
    eps = None if (cfg.label_keep_prob is None or cfg.mode != "iwp") else \
        math.log(cfg.label_keep_prob / (1 - cfg.label_keep_prob))
    for step, start in enumerate(range(0, n, cfg.batch_size)):
        Xb, yb = X[:, start:start + cfg.batch_size].T.astype(float), y[start:start + cfg.batch_size]
        kwargs = dict(loss=cfg.loss, noise_var=s, truncation=cfg.truncation,
                      intercept=b if cfg.fit_intercept else None)
        if cfg.loss != "squared_error":
            kwargs["epsilon_y"] = eps
        g = iwp_gradient(theta, Xb, yb, **kwargs).mean(axis=0)
        g_theta = g[:p] + cfg.alpha * theta
        g_b = g[p] if cfg.fit_intercept else 0.0
        gamma = cfg.learning_rate / (1 + cfg.mu * cfg.learning_rate * step) \
            if cfg.schedule == "inverse" else cfg.learning_rate
        theta = theta - gamma * g_theta
        b = b - gamma * g_b
        if np.linalg.norm(theta) > cfg.radius:
            theta *= cfg.radius / np.linalg.norm(theta)
            projections += 1
        if s @ theta ** 2 > cfg.variance_cap:
            theta *= math.sqrt(cfg.variance_cap / (s @ theta ** 2))
            caps += 1
        energies.append(s @ theta ** 2)
        if cfg.average_start >= 0 and step + 1 > cfg.average_start:
            n_avg += 1
            avg += (theta - avg) / n_avg
            bavg += (b - bavg) / n_avg
        norms.append(math.hypot(np.linalg.norm(g_theta), g_b))
    return theta, b, avg, bavg, norms, projections, caps, max(energies)


@pytest.mark.parametrize("kw", CONFIGS, ids=lambda kw: f"{kw['loss']}-{kw.get('mode', 'iwp')}")
def test_update_matches_the_formulas_written_out(kw):
    cfg = _cfg(**kw)
    X, y = _stream(n=203, regression=cfg.loss == "squared_error")   # 12 full batches + 11 rows
    theta0 = np.array([0.2, -0.1, 0.05, 0.3])
    state = _run(cfg, X, y, 50, theta0=theta0, intercept0=0.1)
    theta, b, avg, bavg, norms, proj, caps, energy = _manual(cfg, X, y, theta0, 0.1)
    assert np.allclose(state.theta, theta, rtol=1e-12, atol=1e-15)
    assert state.intercept[0] == pytest.approx(b, rel=1e-12, abs=1e-15)
    assert np.allclose(state.theta_avg, avg, rtol=1e-12, atol=1e-15)
    assert state.intercept_avg[0] == pytest.approx(bavg, rel=1e-12, abs=1e-15)
    tel = {k: state.telemetry[i] for k, i in TELEMETRY_INDEX.items()}
    assert tel["rows_seen"] == 203 and tel["batches"] == 13 == state.step
    assert tel["projection_hits"] == proj and tel["cap_hits"] == caps
    assert tel["grad_norm_mean"] == pytest.approx(np.mean(norms), rel=1e-12)
    assert tel["grad_norm_m2"] / 12 == pytest.approx(np.var(norms, ddof=1), rel=1e-9)
    assert tel["max_noise_energy"] == pytest.approx(energy, rel=1e-12, abs=1e-300)
    if "radius" in kw:
        assert proj > 0, "the projection should be exercised by this config"
    if "variance_cap" in kw:
        assert caps > 0, "the variance cap should be exercised by this config"


def test_trace_is_recorded_every_k_updates_and_capacity_is_checked():
    cfg = _cfg(trace_every=3)
    X, y = _stream(n=16 * 10)
    state = HeadState.new(cfg, trace_capacity=3)
    reference_run_chunk(cfg, state, X[:, :16 * 9], y[:16 * 9])
    assert state.trace_n == 3 and list(state.trace_steps) == [3, 6, 9]
    assert np.array_equal(state.trace[2, :-1], state.theta) and state.trace[2, -1] == state.intercept[0]
    with pytest.raises(InvalidInputError, match="trace"):
        reference_run_chunk(cfg, state, X[:, :16 * 3], y[:16 * 3])
    assert state.step == 9, "nothing is updated when the call is rejected"


def test_divergence_reports_the_row():
    cfg = _cfg(loss="exponential", mode="clean", noise_var=np.zeros(4), learning_rate=1e200,
               batch_size=8)
    X, y = _stream(n=100)
    state = HeadState.new(cfg)
    with pytest.raises(DivergenceError, match=r"row (\d+).*smaller learning_rate") as info:
        reference_run_chunk(cfg, state, X, y)
    row = int(info.value.args[0].split("row ")[1].split()[0])
    assert (row + 1) % 8 == 0 and row == state.telemetry[TELEMETRY_INDEX["rows_seen"]] - 1


@pytest.mark.parametrize("alpha,eta", [(1e-4, 0.01), (0.01, 0.05), (0.1, 0.2)])
def test_batch_one_clean_logistic_equals_sklearn(alpha, eta):
    # sklearn's plain SGD (sgd_fast): p = w.x (old w); w <- (1 - eta*alpha) w; w += -eta*dloss(p, y) x
    # with dloss = -y / (1 + e^{y p}) for labels {-1, +1} (classes_[1] = +1 is the positive class).
    # That is theta <- theta - eta (f'(z) y x + alpha theta) with f'(z) = -S(-z): our batch-1 update.
    # (sklearn uses asymptotic forms of dloss for |z| > 18; margins here stay far below.)
    linear_model = pytest.importorskip("sklearn.linear_model")
    rng = np.random.default_rng(1)
    n, p = 500, 5
    X = rng.normal(size=(n, p))
    y = np.where(X @ np.array([1.0, -0.5, 0.0, 0.3, 0.2]) + 0.5 * rng.normal(size=n) > 0, 1, -1)
    clf = linear_model.SGDClassifier(loss="log_loss", penalty="l2", alpha=alpha,
                                     learning_rate="constant", eta0=eta, shuffle=False, max_iter=1,
                                     tol=None, fit_intercept=False, average=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # ConvergenceWarning for max_iter=1
        clf.fit(X, y)
    cfg = HeadConfig(loss="logistic", mode="clean", n_features=p, noise_var=np.zeros(p),
                     batch_size=1, alpha=alpha, learning_rate=eta)
    state = HeadState.new(cfg)
    reference_run_chunk(cfg, state, np.ascontiguousarray(X.T), y)
    reference_finish(cfg, state)
    assert np.allclose(state.theta, clf.coef_.ravel(), rtol=1e-11, atol=1e-14)


@pytest.mark.parametrize("X,y,match", [
    (np.zeros((3, 5)), np.ones(5), r"\(p, n\) with p=4"),
    (np.zeros((4, 5), dtype=np.int64), np.ones(5), "float32 or float64"),
    (np.zeros((4, 5)), np.ones(4), r"expected \(5,\)"),
    (np.zeros((4, 5)), np.array([1, -1, 0, 1, 1]), r"y\[2\] = 0.0"),
    ([np.zeros(5)] * 3, np.ones(5), "4 1-D feature columns"),
    ([np.zeros(5)] * 3 + [np.zeros(4)], np.ones(5), "different lengths"),
])
def test_bad_input_is_rejected(X, y, match):
    cfg = _cfg()
    with pytest.raises(InvalidInputError, match=match):
        reference_run_chunk(cfg, HeadState.new(cfg), X, y)


def test_bad_config_is_rejected():
    with pytest.raises(InvalidInputError, match="truncation"):
        reference_run_chunk(_cfg(truncation=-1), HeadState.new(_cfg()), np.zeros((4, 2)), np.ones(2))
    with pytest.raises(InvalidInputError, match="noise_var"):
        reference_run_chunk(_cfg(noise_var=np.full(4, -1.0)), HeadState.new(_cfg()),
                            np.zeros((4, 2)), np.ones(2))
    with pytest.raises(InvalidInputError, match="batch_size"):
        reference_run_chunk(_cfg(batch_size=8), HeadState.new(_cfg()), np.zeros((4, 2)), np.ones(2))
