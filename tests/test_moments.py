"""The release's debiased second moments (iwpfast.moment_stats; docs/math.md "The release's
debiased second moments"): kernel == NumPy twin, chunking and merge invariance, exactness in
expectation for every release kind (Monte Carlo), the ridge solve."""
import numpy as np
import pyarrow as pa
import pytest

import iwpfast
from iwpfast.exceptions import InvalidInputError
from iwpfast.moment_stats import (
    CLASS_LABEL,
    INTERCEPT,
    SCALAR_LABEL,
    Moments,
    accumulate_chunk,
    accumulate_numpy,
    moments,
    solve_ridge,
)
from iwpfast.privacy import ReleaseSpec, privatize

#: float bound of the invariance tests, relative to the raw sums before debiasing (sum_i x~_ij^2,
#: which the diagonal's n v_j cancels down by up to 100x here): 2 * 10^4 products summed in another
#: order differ by about sqrt(n) * 2^-53 of that scale (~10^-14); the bound leaves room
FLOAT_BOUND = 1e-12


def _kernel_args(rng, n, P, sizes, K, kind):
    m = len(sizes)
    d = P + sum(sizes) + 1
    # the floats first, then the attributes' blocks (any interleaving is legal: the indices say)
    float_index = np.arange(P, dtype=np.int64)
    offsets = (P + np.concatenate([[0], np.cumsum(sizes)[:-1]])).astype(np.int64)
    codes = np.stack([rng.integers(0, k, n) for k in sizes]).astype(np.uint16) if m else \
        np.zeros((0, n), np.uint16)
    keep = np.array([0.6, 0.5][:m])
    other = (1 - keep) / (np.asarray(sizes) - 1)
    y = rng.integers(0, K, n).astype(np.float64) if kind == CLASS_LABEL else \
        rng.choice([-1.0, 1.0], n)
    return (rng.normal(size=(P, n)), float_index, rng.uniform(0, 2, P), codes,
            offsets, np.asarray(sizes, np.int64), keep, other, y, kind, 1.7, 0.7, 0.15,
            np.zeros((d, d)), np.zeros((d, K)))


@pytest.mark.parametrize("sizes,K,kind", [((), 1, SCALAR_LABEL), ((3, 4), 1, SCALAR_LABEL),
                                          ((3,), 3, CLASS_LABEL), ((), 0, 0)])
def test_kernel_equals_numpy_twin(sizes, K, kind):
    from iwpfast._kernels.moments import moments_chunk
    args = _kernel_args(np.random.default_rng(1), 500, 3, sizes, K, kind)
    twin = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    blas = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    moments_chunk(*args)                # the kernel alone (float_gram=1)
    accumulate_numpy(*twin)
    accumulate_chunk(*blas)             # what moments() runs: BLAS for X X^T, the kernel the rest
    for out in (args, blas):
        np.testing.assert_allclose(out[-2], twin[-2], rtol=1e-12, atol=1e-10)
        np.testing.assert_allclose(out[-1], twin[-1], rtol=1e-12, atol=1e-10)


# ---------------------------------------------------------------- a fixed clean table
N_ROWS = 24


def _clean_table():
    """Scaled values on multiples of 1/4 inside every clip ball used below (|x|_2 <= 0.71,
    |x|_1 <= 1): the release's scaling, clip and grid snap leave them unchanged, so the clean
    statistics are those of 2x - 1 exactly."""
    rng = np.random.default_rng(7)
    a = rng.choice([0.25, 0.375, 0.5, 0.625, 0.75], N_ROWS)
    b = rng.choice([0.25, 0.375, 0.5, 0.625, 0.75], N_ROWS)
    c = rng.integers(0, 3, N_ROWS)
    y2 = rng.integers(0, 2, N_ROWS)
    y3 = rng.integers(0, 3, N_ROWS)
    t = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], N_ROWS)
    return a, b, c, y2, y3, t


def _clean_z(with_c):
    a, b, c, *_ = _clean_table()
    cols = [2 * a - 1, 2 * b - 1]
    if with_c:
        cols += [(c == j).astype(float) for j in range(3)]
    return np.stack(cols + [np.ones(N_ROWS)])


BASE = dict(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=1.0, ranges="a=0:1,b=0:1",
            label="y")
KINDS = {
    "gaussian_discrete": dict(),
    "gaussian_float": dict(noise="float"),
    "laplace": dict(mechanism="laplace", delta=0.0),
    "public_column": dict(public_features=("b",)),
    "onehot_gaussian": dict(categories={"c": [0, 1, 2]}),
    "rr_categorical": dict(categories={"c": [0, 1, 2]}, categorical_mechanism="rr",
                           epsilon_categorical=1.0),
    "kary_labels": dict(classes=[0, 1, 2]),
    "regression": dict(task="regression", target_range=(0.0, 1.0)),
}


def kind_release(kind, R, seed=11):
    """The clean table tiled R times, released by the spec of ``kind`` (the noise of every row is
    independent, so rows r*N..(r+1)*N-1 are a release of their own)."""
    a, b, c, y2, y3, t = _clean_table()
    extra = KINDS[kind]
    with_c = "categories" in extra
    spec = ReleaseSpec(features=["a", "b", "c"] if with_c else ["a", "b"], **{**BASE, **extra})
    X = np.stack([a, b, c] if with_c else [a, b], axis=1)
    y = y3 if "classes" in extra else (t if kind == "regression" else y2)
    return privatize(np.tile(X, (R, 1)), np.tile(y, R), spec, seed=seed)


def _release_blocks(kind, R):
    """R independent releases of the clean table (``kind_release``), and the clean (Z, Y) they
    estimate."""
    _, _, _, y2, y3, t = _clean_table()
    extra = KINDS[kind]
    rel = kind_release(kind, R)
    Z = _clean_z("categories" in extra)
    if "classes" in extra:
        Y = np.stack([(y3 == k).astype(float) for k in range(3)])
    elif kind == "regression":
        Y = (2 * t - 1)[None]
    else:
        Y = (2.0 * y2 - 1)[None]
    return rel, Z, Y


def _block_stats(rel, R):
    from iwpfast.moment_stats import privatized_table
    table = privatized_table(rel)
    out = []
    for r in range(R):
        m = moments(table.slice(r * N_ROWS, N_ROWS))
        out.append(np.concatenate([m.G.ravel(), m.rhs_sum.ravel() / m.rows]))
    return np.array(out)


def _worst_z(kind, R):
    rel, Z, Y = _release_blocks(kind, R)
    stats = _block_stats(rel, R)
    clean = np.concatenate([(Z @ Z.T / N_ROWS).ravel(), (Z @ Y.T / N_ROWS).ravel()])
    mean = stats.mean(axis=0)
    se = stats.std(axis=0, ddof=1) / np.sqrt(R)
    # entries without noise (the intercept's, public products) have SE 0: they must be exact
    exact = se < 1e-12
    np.testing.assert_allclose(mean[exact], clean[exact], atol=1e-12)
    return float(np.max(np.abs(mean[~exact] - clean[~exact]) / se[~exact]))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_monte_carlo_mean_is_the_clean_statistics(kind):
    # R = 300 releases: each entry's mean over releases within 4 SE (SE = sd / sqrt(R)) of the
    # clean statistic; under exactness |z| > 4 has probability ~6e-5 per entry (~50 entries)
    assert _worst_z(kind, 300) < 4.0


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_monte_carlo_large(kind):
    assert _worst_z(kind, 3000) < 4.0


def test_clean_data_gives_the_clean_statistics():
    a, b, *_ , y2, _, _ = _clean_table()
    Z = _clean_z(False)
    m = moments({"a": 2 * a - 1, "b": 2 * b - 1, "y": 2.0 * y2 - 1})
    assert m.names == ("a", "b", INTERCEPT) and m.targets == ("y",)
    np.testing.assert_allclose(m.G, Z @ Z.T / N_ROWS, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(m.b, Z @ (2.0 * y2 - 1) / N_ROWS, rtol=1e-14, atol=1e-15)


def _big_release(n=20_000):
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, (n, 3))
    X[:, 2] = rng.integers(0, 3, n)
    y = rng.integers(0, 2, n)
    spec = ReleaseSpec(features=["a", "b", "c"], **{**BASE, **KINDS["rr_categorical"]})
    return privatize(X, y, spec, seed=5)


def _close(m1: Moments, m2: Moments, rel):
    assert m1.rows == m2.rows and m1.names == m2.names
    scale = max(m1.rows, float(np.max(np.sum(np.asarray(rel.X, np.float64) ** 2, axis=0))))
    np.testing.assert_allclose(m1.gram_sum, m2.gram_sum, rtol=0, atol=FLOAT_BOUND * scale)
    np.testing.assert_allclose(m1.rhs_sum, m2.rhs_sum, rtol=0, atol=FLOAT_BOUND * scale)


def test_chunking_does_not_change_the_statistics():
    rel = _big_release()
    whole = moments(rel, record_batch_rows=20_000)
    for rows in (7, 4096):
        _close(whole, moments(rel, record_batch_rows=rows), rel)


def test_parts_add_up_and_save_load(tmp_path):
    from iwpfast.moment_stats import privatized_table
    rel = _big_release()
    table = privatized_table(rel)
    whole = moments(table)
    first, second = moments(table.slice(0, 7_000)), moments(table.slice(7_000))
    _close(whole, first + second, rel)
    _close(whole, first.update(table.slice(7_000)), rel)
    path = tmp_path / "m.json"
    whole.save(path)
    back = Moments.load(path)
    assert back.rows == whole.rows and back.names == whole.names
    assert np.array_equal(back.gram_sum, whole.gram_sum)          # exact: JSON floats round-trip
    assert "seed" not in path.read_text()


def test_adding_different_columns_is_refused():
    m1 = moments({"a": np.ones(3), "y": np.ones(3)})
    m2 = moments({"b": np.ones(3), "y": np.ones(3)})
    with pytest.raises(InvalidInputError, match="cannot add moments"):
        m1 + m2


def test_solve_equals_the_normal_equations():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(500, 3))
    y = X @ [1.0, -2.0, 0.5] + 0.3 + rng.normal(size=500)
    m = moments((X, y))
    Z = np.c_[X, np.ones(500)]
    alpha = 0.1
    expected = np.linalg.solve(Z.T @ Z / 500 + alpha * np.diag([1, 1, 1, 0]), Z.T @ y / 500)
    coef, intercept = solve_ridge(m, alpha)
    np.testing.assert_allclose(np.r_[coef, intercept], expected, rtol=1e-10)
    coef0, intercept0 = solve_ridge(m, alpha, fit_intercept=False)
    np.testing.assert_allclose(coef0, np.linalg.solve(X.T @ X / 500 + alpha * np.eye(3),
                                                      X.T @ y / 500), rtol=1e-10)
    assert intercept0 == 0.0


def test_indefinite_gram_is_refused_naming_alpha():
    # G = diag(-1, 1): the coordinate's -1 needs alpha > 1
    m = Moments(10, np.diag([-10.0, 10.0]), np.ones((2, 1)), ("a", INTERCEPT), ("y",))
    with pytest.raises(InvalidInputError, match="alpha=0.5.*raise alpha"):
        solve_ridge(m, 0.5)
    solve_ridge(m, 2.0)


def test_kary_labels_give_one_rhs_per_class():
    a, b, c, y2, y3, t = _clean_table()
    spec = ReleaseSpec(features=["a", "b"], **{**BASE, **KINDS["kary_labels"]})
    m = moments(privatize(np.tile(np.c_[a, b], (100, 1)), np.tile(y3, 100), spec, seed=1))
    assert m.targets == ("0", "1", "2") and m.b.shape == (3, 3)
    coef, intercept = solve_ridge(m, 1.0)
    assert coef.shape == (3, 2) and intercept.shape == (3,)


def test_a_private_logistic_problem_predicts_like_the_clean_one():
    # sanity of usefulness: 10^5 rows, p = 4, logistic labels; the ridge solve on the release
    # predicts (sign of the score) within 0.02 accuracy of the same solve on the clean rows
    rng = np.random.default_rng(0)
    n, theta = 100_000, np.array([1.5, -1.0, 0.5, 0.8])
    X = rng.uniform(-1, 1, (n, 4))
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-3 * (X @ theta)))).astype(int)
    names = ["a", "b", "c", "d"]
    spec = ReleaseSpec(epsilon_x=4.0, delta=1e-5, bound=2.0, epsilon_y=2.0, features=names,
                       ranges={f: (-1.0, 1.0) for f in names}, label="y")
    alpha = 1e-3
    coef_p, b_p = solve_ridge(moments(privatize(X, y, spec, seed=9)), alpha)
    coef_c, b_c = solve_ridge(moments((X, 2.0 * y - 1)), alpha)
    Xt = rng.uniform(-1, 1, (n, 4))
    yt = rng.uniform(size=n) < 1 / (1 + np.exp(-3 * (Xt @ theta)))
    acc_p = np.mean((Xt @ coef_p + b_p > 0) == yt)
    acc_c = np.mean((Xt @ coef_c + b_c > 0) == yt)
    assert acc_p > acc_c - 0.02


def test_top_level_names_are_lazy():
    assert iwpfast.moments is moments and iwpfast.solve_ridge is solve_ridge
    assert iwpfast.Moments is Moments


def test_bad_chunk_rows_is_refused():
    with pytest.raises(InvalidInputError, match="record_batch_rows"):
        moments({"a": np.ones(3)}, record_batch_rows=0)


def test_a_file_and_a_multi_part_folder_read_like_the_table(tmp_path):
    import warnings

    import pyarrow.parquet  # noqa: F401  (pa.parquet below)

    from iwpfast.privacy import read_release
    rng = np.random.default_rng(4)
    data = {"a": rng.uniform(0, 1, 3000), "b": rng.uniform(0, 1, 3000),
            "y": rng.integers(0, 2, 3000)}
    spec = ReleaseSpec(features=["a", "b"], **BASE)
    pa.parquet.write_table(pa.table(data), tmp_path / "raw.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the seeded release's PrivacyLeakWarning
        iwpfast.release(data, tmp_path / "one.parquet", spec, seed=0)
        iwpfast.release(tmp_path / "raw.parquet", tmp_path / "parts", spec, seed=0,
                        max_part_rows=1000)
    for path in (tmp_path / "one.parquet", tmp_path / "parts"):
        table, _ = read_release(path)
        m = moments(path)
        assert m.rows == 3000 and m.debiased == moments(table).debiased
        np.testing.assert_allclose(m.gram_sum, moments(table).gram_sum, rtol=1e-12)


# ---------------------------------------------------------------- class-weighted moments
def _class_weighted_block_stats(kind, R, weights):
    """Per release block: the class-weighted G and b (one Gram per released class combined by
    the weights' label inverse), and the clean weighted statistics they estimate."""
    from iwpfast.io.reader import ChunkReader
    from iwpfast.io.sources import open_source
    from iwpfast.moment_stats import (
        CLASS_LABEL,
        accumulate_class_folds,
        class_weighted,
        privatized_table,
        release_layout,
    )
    rel, Z, Y = _release_blocks(kind, R)
    spec = rel.spec
    table = privatized_table(rel)
    k = len(weights)
    out = []
    for r in range(R):
        layout = release_layout(spec, None, None)
        reader = ChunkReader(open_source(table.slice(r * N_ROWS, N_ROWS)),
                             [layout.float_columns], layout.code_columns + [layout.label], None)
        G, rows = accumulate_class_folds(reader, layout, 1, 1024, k)
        if layout.label_kind == CLASS_LABEL:
            keep, other, targets = layout.label_q, layout.label_r, np.eye(k)
        else:
            keep = spec.label_keep_prob
            other, targets = 1.0 - keep, np.array([[-1.0, 1.0]])
        m = class_weighted(G, rows, targets, np.asarray(weights), keep, other, layout)[0]
        out.append(np.concatenate([m.G.ravel(), m.rhs_sum.ravel() / m.rows]))
    true_class = np.argmax(Y, axis=0) if Y.shape[0] > 1 else (Y[0] > 0).astype(int)
    w = np.asarray(weights)[true_class]
    clean = np.concatenate([((Z * w) @ Z.T / N_ROWS).ravel(), ((Z * w) @ Y.T / N_ROWS).ravel()])
    return np.array(out), clean


@pytest.mark.parametrize("kind,weights", [("gaussian_discrete", [1.0, 3.0]),
                                          ("kary_labels", [0.5, 1.0, 2.5])])
def test_class_weighted_moments_average_to_the_clean_weighted_statistics(kind, weights):
    # 300 releases: every entry's mean within 4.5 of its standard errors of the clean weighted
    # statistic (max over ~40-60 entries of |z|; P(any |z| > 4.5) < 1e-3 for normal means)
    stats, clean = _class_weighted_block_stats(kind, 300, weights)
    mean = stats.mean(axis=0)
    se = stats.std(axis=0, ddof=1) / np.sqrt(len(stats))
    exact = se < 1e-12
    np.testing.assert_allclose(mean[exact], clean[exact], atol=1e-12)
    assert np.max(np.abs(mean[~exact] - clean[~exact]) / se[~exact]) < 4.5


@pytest.mark.parametrize("p", [0, 3, 4, 10, 40])
@pytest.mark.parametrize("label_kind", ["scalar", "class", "none"])
@pytest.mark.parametrize("blas", [False, True])
def test_the_runs_kernel_equals_its_numpy_twin(p, label_kind, blas, monkeypatch):
    # one call per chunk (moment_stats.accumulate_runs: the fold blocks handled inside, float32
    # or float64 columns read in place) against accumulate_runs_numpy (accumulate_numpy per run)
    import iwpfast.moment_stats as ms
    if blas:
        monkeypatch.setattr(ms, "KERNEL_GRAM_COLUMNS", 0)      # the BLAS branch for the Gram
    rng = np.random.default_rng(p)
    n, folds, block_rows, start = 1337, 3, 200, 77
    names = [f"x{j}" for j in range(p)]
    kind = {"scalar": ms.SCALAR_LABEL, "class": ms.CLASS_LABEL, "none": ms.NO_LABEL}[label_kind]
    layout = ms.layout_for_columns(names, rng.uniform(0, 0.5, p), None if kind == ms.NO_LABEL
                                   else "y", label_kind=kind, label_scale=1.3, label_q=0.7,
                                   label_r=0.15, targets=("a", "b", "c") if
                                   kind == ms.CLASS_LABEL else ())
    if kind == ms.CLASS_LABEL:
        y = rng.integers(0, 3, n).astype(np.float64)
    else:
        y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    codes = np.zeros((0, n), np.int64)
    d, K = len(layout.names), max(len(layout.targets), 1) if kind != ms.NO_LABEL else 0
    results = {}
    for dtype in (np.float32, np.float64):
        cols = [rng.normal(size=n).astype(dtype) for _ in range(p)] if dtype == np.float32 \
            else [c.astype(np.float64) for c in results["f32cols"]]
        if dtype == np.float32:
            results["f32cols"] = cols
        for name, fn in (("kernel", ms.accumulate_runs), ("twin", ms.accumulate_runs_numpy)):
            G, B = np.zeros((folds, d, d)), np.zeros((folds, d, K))
            rows = np.zeros(folds, np.int64)
            fn(layout, cols, codes, y, start, folds, block_rows, G, B, rows)
            results[(dtype, name)] = (G, B, rows)
    for dtype in (np.float32, np.float64):
        (G, B, rows), (Gt, Bt, rowst) = results[(dtype, "kernel")], results[(dtype, "twin")]
        np.testing.assert_array_equal(rows, rowst)
        np.testing.assert_allclose(G, Gt, rtol=1e-12, atol=1e-10)
        np.testing.assert_allclose(B, Bt, rtol=1e-12, atol=1e-10)
    # float32 columns and the same values as float64: the same sums, bit for bit
    for a, b in zip(results[(np.float32, "kernel")], results[(np.float64, "kernel")], strict=True):
        np.testing.assert_array_equal(a, b)
