"""Categorical columns released by k-ary randomized response (categorical_mechanism='rr'): the
release (codes, metadata, guarantee, privacy ratio), the exponential loss's exact inverse (unbiased
loss and gradient by Monte Carlo against the clean values), kernel vs NumPy twin, and the fit."""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import iwpfast
from iwpfast.categorical_rr import RRLayout, rr_gradient, rr_loss, rr_sgd_reference
from iwpfast.exceptions import InvalidInputError, PrivacyLeakWarning, ReleaseSpecError
from iwpfast.label_noise import kary_probabilities, label_tilde
from iwpfast.privacy import ReleaseSpec, read_release_spec, release
from iwpfast.privacy.mechanisms import KaryRandomizedResponse, kary_grid_counts
from tests.conftest import write_release_rows

CATS = {"c": ["x", "y", "z"], "d": [1, 2, 3, 4]}


def _spec(**kw):
    base = dict(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=1.0, ranges={"a": (0, 1)},
                categories=CATS, categorical_mechanism="rr", epsilon_categorical=1.0, label="y")
    base.update(kw)
    return ReleaseSpec(**base)


def _table(n, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.uniform(0, 1, n), "c": rng.choice(CATS["c"], n),
                       "d": rng.integers(1, 5, n)})
    df["y"] = ((df.c == "x") * 1.5 - (df.d == 4) * 1.0 + df.a + rng.normal(0, 0.5, n) > 0.5
               ).astype(int)
    return df


def _release(tmp_path, df, **kw):
    out = str(tmp_path / "r.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)     # seeded: a simulation
        release(df, out, _spec(**kw), features=["a", "c", "d"], label="y", seed=3)
    return out


def test_release_writes_one_narrow_code_per_column_and_its_law(tmp_path):
    df = _table(3000)
    out = _release(tmp_path, df, epsilon_categorical={"c": 1.0, "d": 2.0})
    table = pq.read_table(out)
    assert [f.name for f in table.schema] == ["a", "c", "d", "y"]
    assert str(table.schema.field("c").type) == "uint8"
    meta = json.loads(table.schema.metadata[b"iwpfast.release"])
    assert meta["format_version"] == 4 and "seed" not in meta and "\"3\"" not in json.dumps(meta)
    for col, eps in (("c", 1.0), ("d", 2.0)):
        k = len(CATS[col])
        q, r = kary_probabilities(eps, k)
        assert meta["categorical_rr"][col] == {"k": k, "epsilon": eps, "keep_prob": q,
                                               "other_prob": r}
    # the numeric part keeps the numeric-only sensitivity 2B: sigma of epsilon_x alone
    assert meta["feature_noise_scale"][1:] == [0.0, 0.0]
    numeric_only = ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.0, features=["a"],
                               ranges={"a": (0, 1)})
    assert meta["feature_noise_scale"][0] == pytest.approx(numeric_only.sigma, rel=1e-12)
    spec = read_release_spec(out)
    assert spec.guarantee().epsilon == pytest.approx(2.0 + 1.0 + 2.0 + 1.0)
    assert "k-ary randomized response" in spec.guarantee().statement
    # the kept share of each column's codes is q (binomial SE: sqrt(q(1-q)/n), bound 4 SE)
    truth = pd.Categorical(df.c, categories=CATS["c"]).codes
    q, _ = kary_probabilities(1.0, 3)
    kept = np.mean(table.column("c").to_numpy() == truth)
    assert abs(kept - q) < 4 * math.sqrt(q * (1 - q) / len(df))


def test_rr_privacy_ratio_is_exactly_e_to_the_epsilon():
    # every output's probability under two inputs differs by q/r = e^eps exactly (as implemented:
    # the sampler's outcome counts on the 2^-53 grid of its uniforms)
    for eps, k in ((0.5, 3), (1.0, 24), (2.0, 6)):
        mech = KaryRandomizedResponse(eps, k, parameter="epsilon_categorical")
        q, r = mech.keep_probability, mech.other_probability
        assert q / r == pytest.approx(math.exp(eps), rel=1e-12)
        counts = kary_grid_counts(q, r, k)
        assert math.log(counts.max() / counts.min()) == pytest.approx(eps, abs=1e-6)


def test_spec_refusals_name_the_fix():
    with pytest.raises(InvalidInputError, match="needs epsilon_categorical"):
        _spec(epsilon_categorical=None)
    with pytest.raises(InvalidInputError, match="categorical_mechanism='rr'"):
        _spec(categorical_mechanism="gaussian")
    with pytest.raises(InvalidInputError, match="one of"):
        _spec(categorical_mechanism="onehot")
    with pytest.raises(InvalidInputError, match=r"no budget .*\['d'\]"):
        _spec(epsilon_categorical={"c": 1.0})


def test_edited_rr_metadata_is_refused(tmp_path):
    out = _release(tmp_path, _table(200))
    meta = json.loads(pq.read_schema(out).metadata[b"iwpfast.release"])
    meta["categorical_rr"]["c"]["keep_prob"] = 0.9
    with pytest.raises(ReleaseSpecError, match="categorical_rr"):
        ReleaseSpec.from_metadata(meta)


def _layout():
    sizes = np.array([3, 4])
    q, r = zip(*(kary_probabilities(e, int(k)) for e, k in zip((1.0, 2.0), sizes, strict=True)),
               strict=True)
    return RRLayout(np.array([0, 5, 6]), np.array([0.3, 0.0, 0.2]), np.array([1, 7]), sizes,
                    np.array(q), np.array(r), 11)


def test_loss_and_gradient_are_unbiased_by_monte_carlo():
    rng = np.random.default_rng(0)
    layout = _layout()
    theta, b = rng.normal(0, 0.5, 11), 0.2
    x, c, y = np.array([0.3, -0.5, 0.8]), np.array([2, 1]), 1.0
    clean_u = theta[[0, 5, 6]] @ x + b + theta[1 + 2] + theta[7 + 1]
    clean = math.exp(-y * clean_u)
    hot = np.zeros(11)
    hot[[0, 5, 6]] = x
    hot[[3, 8]] = 1.0
    clean_grad = np.append(-y * clean * hot, -y * clean)
    R = 100_000
    X = x[:, None] + np.sqrt(layout.noise_var)[:, None] * rng.standard_normal((3, R))
    codes = np.stack([KaryRandomizedResponse(e, int(k)).apply(np.full(R, cc), rng)
                      for k, e, cc in zip(layout.sizes, (1.0, 2.0), c, strict=True)])
    keep = 1.0 / (1.0 + math.exp(-1.0))
    y_rel = np.where(rng.random(R) < keep, y, -y)
    L = rr_loss(theta, X, codes, y_rel, layout, label_weight=label_tilde(1.0), intercept=b)
    G = rr_gradient(theta, X, codes, y_rel, layout, label_weight=label_tilde(1.0), intercept=b)
    # each mean within 4.5 standard errors (sample sd / sqrt(R)) of the clean value; the 12
    # gradient entries and the loss: 13 tests at ~7e-6 each
    assert abs(L.mean() - clean) < 4.5 * L.std() / math.sqrt(R)
    se = G.std(axis=0) / math.sqrt(R)
    assert np.all(np.abs(G.mean(axis=0) - clean_grad) <= 4.5 * se + 1e-12)


def test_gradient_is_the_derivative_of_the_loss():
    rng = np.random.default_rng(1)
    layout = _layout()
    theta = rng.normal(0, 0.3, 11)
    X = rng.normal(size=(3, 5))
    codes = np.stack([rng.integers(0, 3, 5), rng.integers(0, 4, 5)])
    y = rng.choice([-1.0, 1.0], 5)
    G = rr_gradient(theta, X, codes, y, layout, label_weight=1.4, intercept=0.1)
    h = 1e-6
    for j in range(11):
        e = np.zeros(11)
        e[j] = h
        num = (rr_loss(theta + e, X, codes, y, layout, label_weight=1.4, intercept=0.1)
               - rr_loss(theta - e, X, codes, y, layout, label_weight=1.4, intercept=0.1)) / (2 * h)
        np.testing.assert_allclose(G[:, j], num, rtol=1e-5, atol=1e-8)


def test_kernel_matches_its_numpy_twin():
    from iwpfast._kernels.categorical import rr_loss_values, rr_sgd_pass
    rng = np.random.default_rng(2)
    layout = _layout()
    n = 300
    X = rng.normal(size=(3, n))
    codes = np.stack([rng.integers(0, 3, n), rng.integers(0, 4, n)]).astype(np.uint8)
    y = rng.choice([-1, 1], n).astype(np.int8)
    order = rng.permutation(n).astype(np.int64)
    states = []
    for kernel in (False, True):
        state = [np.zeros(11), np.zeros(1), np.zeros(11), np.zeros(1), np.zeros(2, np.int64)]
        if kernel:
            rr_sgd_pass(X, codes, y, order, layout.float_index, layout.noise_var, layout.offsets,
                        layout.sizes, layout.keep, layout.other, *state, 1.58, 16, 0.05, 0.01,
                        0.01, 5.0, 0.005, 0.01, True, 5, True)
        else:
            rr_sgd_reference(X, codes, y.astype(float), order, layout, *state, label_weight=1.58,
                             batch_size=16, learning_rate=0.05, mu=0.01, alpha=0.01, radius=5.0,
                             fit_intercept=True, average_start=5, variance_cap=0.005,
                             block_cap=0.01)
        states.append(state)
    for a, b in zip(*states, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    assert states[0][4][0] == math.ceil(n / 16)
    # the caps bound in this run (without them the path differs), so the twin checks them too
    free = [np.zeros(11), np.zeros(1), np.zeros(11), np.zeros(1), np.zeros(2, np.int64)]
    rr_sgd_reference(X, codes, y.astype(float), order, layout, *free, label_weight=1.58,
                     batch_size=16, learning_rate=0.05, mu=0.01, alpha=0.01, radius=5.0,
                     fit_intercept=True, average_start=5)
    assert np.max(np.abs(free[0] - states[0][0])) > 1e-3
    out = np.empty(n)
    rr_loss_values(X, codes, y, layout.float_index, layout.noise_var, layout.offsets, layout.sizes,
                   layout.keep, layout.other, states[0][0], 0.3, 1.58, out)
    np.testing.assert_allclose(out, rr_loss(states[0][0], X, codes, y, layout, label_weight=1.58,
                                            intercept=0.3), rtol=1e-12, atol=1e-14)


def test_fit_on_rr_release_learns_and_predicts_raw_strings(tmp_path):
    df = _table(6000)
    out = _release(tmp_path, df, epsilon_x=4.0, epsilon_categorical=2.0, epsilon_y=2.0)
    model = iwpfast.IWPClassifier(random_state=0).fit(out)
    assert model.features_ == ["a", "c=x", "c=y", "c=z", "d=1", "d=2", "d=3", "d=4"]
    coef = model.coef_by_feature_
    # the signal: c == x raises the score, d == 4 lowers it
    assert coef["c"]["x"] > max(coef["c"]["y"], coef["c"]["z"])
    assert coef["d"][4] < min(coef["d"][1], coef["d"][2], coef["d"][3])
    accuracy = np.mean(model.predict(df[["a", "c", "d"]]) == df.y)
    majority = max(df.y.mean(), 1 - df.y.mean())
    assert accuracy > majority + 0.05
    with pytest.raises(InvalidInputError, match="loss='exponential'"):
        iwpfast.IWPClassifier(loss="logistic").fit(out)
    with pytest.raises(InvalidInputError, match="class_weight is not implemented"):
        iwpfast.IWPClassifier(class_weight="balanced").fit(out)
    for call in (iwpfast.IWPRegressor().fit, iwpfast.IWPRegressor(alpha=0.01).partial_fit):
        with pytest.raises(InvalidInputError, match="classification release; use IWPClassifier"):
            call(out)


def test_block_cap_bounds_the_inverse_factor_kernel_and_twin_alike():
    from iwpfast._kernels import categorical as kernels
    from iwpfast.categorical_rr import block_log_factor, cap_blocks
    layout = _layout()
    theta = np.random.default_rng(4).normal(0, 1.5, 11)
    assert all(block_log_factor(theta, int(o), int(k), q, r, 0.0, 1.0) > 1.0 for o, k, q, r in
               zip(layout.offsets, layout.sizes, layout.keep, layout.other, strict=True))
    twin, compiled = theta.copy(), theta.copy()
    assert cap_blocks(twin, layout, 1.0) == 2
    assert kernels.cap_blocks(compiled, layout.offsets, layout.sizes, layout.keep, layout.other,
                              1.0) == 2
    np.testing.assert_array_equal(twin, compiled)
    for o, k, q, r in zip(layout.offsets, layout.sizes, layout.keep, layout.other, strict=True):
        assert block_log_factor(twin, int(o), int(k), q, r, 0.0, 1.0) <= 1.0
        # the block's mean is kept (the shrink is towards it)
        assert twin[o:o + k].mean() == pytest.approx(theta[o:o + k].mean(), abs=1e-12)
    # a constant block is exact: factor 1, log 0
    assert block_log_factor(np.zeros(11), 1, 3, layout.keep[0], layout.other[0], 0.0, 1.0) == 0.0
    # the factor is what it says: E[phi^2]/v^2 at the worst category, by enumeration
    o, k, q, r = 7, 4, layout.keep[1], layout.other[1]
    worst = 0.0
    for t in (1.0, -1.0):
        v = np.exp(-t * theta[o:o + k])
        for c in range(k):
            p = np.full(k, r)
            p[c] = q
            phi = (v - r * v.sum()) / (q - r)
            worst = max(worst, float(np.dot(p, phi ** 2)) / v[c] ** 2)
    assert block_log_factor(theta, o, k, q, r, 0.0, 1.0) == pytest.approx(math.log(worst), rel=1e-9)


def test_rr_without_a_private_numeric_feature_is_refused():
    with pytest.raises(InvalidInputError, match="at least one private numeric feature"):
        _spec(features=["c", "d"])


def test_partial_fit_over_parts_is_the_fit_bit_for_bit(tmp_path):
    out = _release(tmp_path, _table(700))
    table = pq.read_table(out)
    parts = []
    for i, (a, b) in enumerate(((0, 333), (333, 340), (340, 700))):    # one shorter than a batch
        parts.append(str(tmp_path / f"part{i}.parquet"))
        # a file with some of a release's rows states its own row count (read and checked)
        write_release_rows(table, a, b - a, parts[-1])
    kw = dict(alpha=0.01, learning_rate=0.1, batch_size=16, average=True)
    whole = iwpfast.IWPClassifier(**kw).fit(out)
    stream = iwpfast.IWPClassifier(**kw)
    for part in parts:
        stream.partial_fit(part)
    # 43 whole batches run, the last 12 rows carried until finalize
    assert (stream.n_rows_seen_, stream.n_iter_) == (700, 43)
    stream.finalize()
    assert stream.n_iter_ == whole.n_iter_ == 44
    assert stream.coef_.tobytes() == whole.coef_.tobytes()
    assert stream.intercept_.tobytes() == whole.intercept_.tobytes()
    # a fit's pass goes on; 'auto' is the grid's centre, nothing validated
    assert whole.partial_fit(parts[2]).n_rows_seen_ == 1060
    auto = iwpfast.IWPClassifier().partial_fit(parts[0])
    assert (auto.alpha_, auto.learning_rate_, auto.block_cap_) == (0.01, 0.1, 1.0)
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(ReleaseSpecError, match="one pass must read one release"):
        auto.partial_fit(_release(other, _table(300), epsilon_categorical=2.0))
    # one pass reads one kind of release
    X, y = np.random.default_rng(0).normal(size=(50, 2)), np.tile([0, 1], 25)
    arrays = iwpfast.IWPClassifier(alpha=0.01, learning_rate=0.1).partial_fit(
        X, y, noise_var=0.1, epsilon_y=1.0)
    with pytest.raises(ReleaseSpecError, match="started on one without them"):
        arrays.partial_fit(parts[0])
    with pytest.raises(ReleaseSpecError, match="started on one with them"):
        auto.partial_fit(X, y, noise_var=0.1, epsilon_y=1.0)
    path = tmp_path / "m.json"
    stream.save(path)
    with pytest.raises(InvalidInputError, match="keeps no SGD state"):
        iwpfast.load(path).partial_fit(parts[0])
    with pytest.raises(InvalidInputError, match="plan_pass"):
        iwpfast.IWPClassifier(alpha=0.01, learning_rate=0.1).plan_pass(out)


def _in_memory_pass(path, spec, alpha, step, batch_size, average_start, variance_cap, block_cap):
    """The reference: the kernel once over every row of the file read whole (pyarrow), in order."""
    from iwpfast._kernels.categorical import rr_sgd_pass
    from iwpfast.label_noise import label_tilde_from_keep
    layout = RRLayout.from_spec(spec)
    table = pq.read_table(path)
    X = np.stack([table.column("a").to_numpy().astype(np.float64)])
    codes = np.stack([table.column(c).to_numpy().astype(np.uint16) for c in ("c", "d")])
    y = table.column("y").to_numpy().astype(np.int8)
    state = [np.zeros(8), np.zeros(1), np.zeros(8), np.zeros(1), np.zeros(2, np.int64)]
    rr_sgd_pass(X, codes, y, np.arange(len(y), dtype=np.int64), layout.float_index,
                layout.noise_var, layout.offsets, layout.sizes, layout.keep, layout.other, *state,
                label_tilde_from_keep(spec.label_keep_prob), batch_size, step, alpha, alpha,
                spec.feature_map.vector_bound(spec.bound) / alpha, variance_cap, block_cap, True,
                average_start, True)
    return state


def test_streamed_fit_is_the_in_memory_pass_bit_for_bit(tmp_path):
    out = _release(tmp_path, _table(700))
    spec = read_release_spec(out)
    fits = {rows: iwpfast.IWPClassifier(alpha=0.01, learning_rate=0.1, batch_size=16,
                                        average="tail", chunk_rows=rows).fit(out)
            for rows in (None, 37, 16, 5)}
    # 700 rows in batches of 16: 44 updates, the average over the last 22
    theta, b, theta_avg, b_avg, counters = _in_memory_pass(out, spec, 0.01, 0.1, 16, 22, 2.0, 1.0)
    assert counters.tolist() == [44, 22]
    for rows, m in fits.items():
        assert m.coef_.reshape(-1).tobytes() == theta_avg.tobytes(), rows
        assert m.intercept_[0] == b_avg[0] and m.n_iter_ == 44 and m.n_rows_seen_ == 700


def test_auto_grid_streams_its_blocks_and_does_not_depend_on_the_chunks(tmp_path, monkeypatch):
    from iwpfast.estimators import _rr
    df = _table(3000)
    out = _release(tmp_path, df, epsilon_x=4.0, epsilon_categorical=2.0, epsilon_y=2.0)
    monkeypatch.setattr(_rr, "head_threads", lambda n: 1)
    a = iwpfast.IWPClassifier().fit(out)
    # the 18 heads cut over 4 threads: every head's bits, so the same scores and choice
    monkeypatch.setattr(_rr, "head_threads", lambda n: min(n, 4))
    b = iwpfast.IWPClassifier(chunk_rows=101).fit(out)
    threaded = iwpfast.IWPClassifier().fit(out)
    assert threaded.tuning_["risk"] == a.tuning_["risk"]
    assert threaded.coef_.tobytes() == a.coef_.tobytes()
    t = a.tuning_
    # 3000 rows, period 10: blocks of 3000 // 200 = 15 rows, every 10th held out
    assert (t["n_train"], t["n_validation"], t["heads"]) == (2700, 300, 18)
    assert sum(t["chosen"]) == 1 and t["block_cap"][t["chosen"].index(True)] == a.block_cap_
    assert a.coef_.tobytes() == b.coef_.tobytes() and b.tuning_["chosen"] == t["chosen"]
    # the scores are sums merged chunk by chunk: equal up to the order of the additions
    np.testing.assert_allclose(b.tuning_["risk"], t["risk"], rtol=1e-12)
    # the chosen head refitted on every row: the fit with its values (block cap 1: the default)
    assert a.block_cap_ == 1.0
    trained = iwpfast.IWPClassifier(alpha=a.alpha_, learning_rate=a.learning_rate_,
                                    average="tail").fit(out)
    assert trained.coef_.tobytes() == a.coef_.tobytes()


def test_rr_model_saves_loads_and_scores_a_private_holdout(tmp_path):
    df = _table(3000)
    out = _release(tmp_path, df, epsilon_x=4.0, epsilon_categorical=2.0, epsilon_y=2.0)
    model = iwpfast.IWPClassifier().fit(out)
    path = tmp_path / "m.json"
    model.save(path)
    back = iwpfast.load(path)
    raw = df[["a", "c", "d"]]
    assert back.coef_.tobytes() == model.coef_.tobytes()
    assert back.intercept_.tobytes() == model.intercept_.tobytes()
    np.testing.assert_array_equal(back.decision_function(raw), model.decision_function(raw))
    np.testing.assert_array_equal(back.predict_proba(raw), model.predict_proba(raw))
    assert back.coef_by_feature_ == model.coef_by_feature_ and back.features_ == model.features_
    assert (back.categorical_mechanism_, back.block_cap_, back.alpha_, back.learning_rate_) == \
        ("rr", model.block_cap_, model.alpha_, model.learning_rate_)
    assert back.release_spec_.to_metadata() == model.release_spec_.to_metadata()
    back.save(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()
    # a private hold-out released with the same spec: the exact inverse's estimate of the clean
    # exponential risk of its rows, unbiased: within 4 standard errors of the clean value
    test = _table(4000, seed=7)
    holdout = str(tmp_path / "test.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        release(test, holdout, _spec(epsilon_x=4.0, epsilon_categorical=2.0, epsilon_y=2.0),
                features=["a", "c", "d"], label="y", seed=11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # the reliability verdict is not the point
        est = back.private_risk(holdout)
        assert model.private_risk(holdout).risk == est.risk
    u = model.decision_function(test[["a", "c", "d"]])
    clean = float(np.mean(np.exp(-np.where(test.y == 1, 1.0, -1.0) * u)))
    assert est.n_rows == 4000 and abs(est.risk - clean) < 4 * est.stderr


def test_cli_release_fit_info_evaluate_an_rr_release(tmp_path, capsys):
    from iwpfast.cli import main
    df = _table(3000)
    df["d"] = df["d"].astype(str)
    raw = tmp_path / "raw.parquet"
    df.to_parquet(raw)
    rel, model = tmp_path / "rel.parquet", tmp_path / "m.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        assert main(["release", str(raw), str(rel), "--features", "a=0:1", "c", "d", "--label", "y",
                     "--categories", "c=x,y,z", "--categories", "d=1,2,3,4",
                     "--categorical-mechanism", "rr", "--epsilon-cat", "2", "--epsilon-x", "4",
                     "--epsilon-y", "2", "--bound", "1", "--seed", "5"]) == 0
    assert main(["fit", str(rel), "--out", str(model)]) == 0
    text = capsys.readouterr().out
    assert "tuning: 18 heads (alpha x learning rate x block cap)" in text
    assert "model written to" in text and "projection hits" not in text
    assert main(["info", str(model)]) == 0
    text = capsys.readouterr().out
    assert "c (randomized response): x=" in text and "k-ary randomized response" in text
    assert main(["evaluate", str(model), str(raw), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    majority = max(df.y.mean(), 1 - df.y.mean())
    assert report["kind"] == "clean" and report["accuracy"] > majority + 0.05
    assert main(["evaluate", str(model), str(rel), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kind"] == "private" and report["rows"] == 3000


def test_a_code_outside_its_categories_is_refused_with_its_row(tmp_path):
    out = _release(tmp_path, _table(300))
    table = pq.read_table(out)
    codes = table.column("d").to_numpy().copy()
    codes[123] = 4                                  # d has 4 categories: codes 0..3
    bad = str(tmp_path / "bad.parquet")
    pq.write_table(table.set_column(2, "d", pa.array(codes, pa.uint8())), bad)
    with pytest.raises(InvalidInputError, match=r"'d' holds the code 4 at .*row 123"):
        iwpfast.IWPClassifier(alpha=0.01, learning_rate=0.1).fit(bad)


def test_auto_on_too_few_rows_to_validate_runs_the_grid_centre(tmp_path):
    from iwpfast.exceptions import NumericalWarning
    out = _release(tmp_path, _table(200))
    # 200 rows: blocks of 1 row, every 10th held out: 20 validation rows, fewer than 30
    with pytest.warns(NumericalWarning, match="20 validation rows"):
        m = iwpfast.IWPClassifier().fit(out)
    assert (m.alpha_, m.learning_rate_, m.block_cap_) == (0.01, 0.1, 1.0)
    assert m.tuning_["n_validation"] == 0 and m.n_rows_seen_ == 200
