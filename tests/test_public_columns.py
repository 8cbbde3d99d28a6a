"""Issue 18: public columns and label-only releases -- the learner's side (per-column noise with
zeros) and the release's (public columns scaled and clipped, never noised)."""
import numpy as np
import pytest

from iwpfast.estimates import iwp_gradient
from iwpfast.losses import LOSS_RECORDS


@pytest.mark.parametrize("loss", ["exponential", "quadratic"])
def test_iwp_gradient_is_unbiased_with_zeros_in_the_per_column_variances(loss):
    """Monte Carlo over the release noise (fixed seed, 400,000 draws per row): the mean IWP
    gradient of each row equals the clean gradient f'(y u) y x (and f'(y u) y for the
    intercept) within 4 standard errors of the mean (SE = sample sd / sqrt(draws)); the noise
    variances are s = (0.5, 0, 0.8, 0): columns 1 and 3 public, never noised, labels by
    randomized response at epsilon_y = 1."""
    rng = np.random.default_rng(11)
    s = np.array([0.5, 0.0, 0.8, 0.0])
    theta = np.array([0.4, -0.7, 0.3, 0.5])
    b = 0.2
    keep = 1 / (1 + np.exp(-1.0))
    draws = 400_000
    for x, y in ((np.array([0.5, -0.2, 0.1, 0.9]), 1.0), (np.array([-0.3, 0.6, -0.8, 0.1]), -1.0)):
        X = x + rng.standard_normal((draws, 4)) * np.sqrt(s)
        assert np.all(X[:, [1, 3]] == x[[1, 3]])           # public columns carry no noise
        yt = np.where(rng.random(draws) < keep, y, -y)
        g = iwp_gradient(theta, X, yt, loss=loss, noise_var=s, epsilon_y=1.0, intercept=b)
        fp = LOSS_RECORDS[loss].derivative(1, np.array([y * (theta @ x + b)]))[0]
        clean = np.append(fp * y * x, fp * y)
        se = g.std(axis=0, ddof=1) / np.sqrt(draws)
        assert np.all(np.abs(g.mean(axis=0) - clean) < 4 * se + 1e-12), (g.mean(axis=0), clean, se)


def test_the_grid_reads_per_column_noise():
    """'auto''s grid step (``step_scale``): the feature factor sums the private variances only,
    the cap bounds |theta| only when every column is noised, and a label-only release (no feature
    noise) has the label factor only."""
    from iwpfast.sgd.grid import column_noise, step_scale
    kw = dict(loss="exponential", alpha=0.1, bound=2.0, label_keep_prob=0.73, n_features=5,
              radius=3.0)
    uniform = step_scale(noise_var=1.5, **kw)
    assert step_scale(noise_var=[1.5] * 5, **kw) == uniform
    # two public columns: less noise, a larger step
    mixed = step_scale(noise_var=[1.5, 1.5, 1.5, 0.0, 0.0], **kw)
    assert mixed > uniform
    noise = column_noise([1.5, 1.5, 1.5, 0.0, 0.0], 5)
    assert noise.total == 4.5 and not noise.all_private
    assert noise.capped_radius(10.0, 2.0) == 10.0         # the public directions are not capped
    assert column_noise(2.0, 3).capped_radius(10.0, 2.0) == 1.0
    label_only = step_scale(noise_var=[0.0] * 5, **kw)
    no_label_noise = step_scale(noise_var=[0.0] * 5, **dict(kw, label_keep_prob=None))
    assert label_only < no_label_noise and label_only > mixed


# ------------------------------------------------------------------------------ the release
RANGES = {"a": (0.0, 10.0), "b": (0.0, 1.0), "c": (-4.0, 4.0), "d": (0.0, 2.0)}


def _raw(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(0, 10, n), rng.uniform(0, 1, n), rng.uniform(-5, 5, n),
                         rng.uniform(0, 2, n)])
    y = (rng.random(n) < 1 / (1 + np.exp(-(X[:, 0] - 5) / 2 - X[:, 2]))).astype(int)
    return X, y


def _spec(**kw):
    from iwpfast.privacy import ReleaseSpec
    base = dict(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=("a", "b", "c", "d"),
                ranges=RANGES, label="y", public_features=("c", "d"))
    base.update(kw)
    return ReleaseSpec(**base)


@pytest.mark.parametrize("noise", ["discrete", "float"])
@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_public_columns_are_scaled_and_clipped_never_noised_and_the_rest_is_the_private_release(
        noise, engine):
    """The private columns of a mixed release are, bit for bit, the release of the private
    columns alone (same seed): the calibration (the discrete law's snapping depends on the
    number of noised coordinates), the L2 clip and the noise cover them only; the public
    columns are their values scaled by the declared ranges and clipped to [-1, 1]."""
    import warnings

    from iwpfast.exceptions import PrivacyLeakWarning
    from iwpfast.privacy import privatize
    X, y = _raw()
    mixed = _spec(noise=noise)
    alone = _spec(noise=noise, features=("a", "b"), public_features=())
    assert mixed.sigma == alone.sigma
    assert mixed.feature_mechanism.noise_metadata() == alone.feature_mechanism.noise_metadata()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        Xm, ym = privatize(X, y, mixed, seed=7, engine=engine)
        Xa, ya = privatize(X[:, :2], y, alone, seed=7, engine=engine)
    np.testing.assert_array_equal(Xm[:, :2], Xa)
    np.testing.assert_array_equal(ym, ya)
    lo = np.array([RANGES["c"][0], RANGES["d"][0]])
    hi = np.array([RANGES["c"][1], RANGES["d"][1]])
    want = np.clip((X[:, 2:] - (lo + hi) / 2) / ((hi - lo) / 2), -1, 1).astype(np.float32)
    np.testing.assert_allclose(Xm[:, 2:], want, rtol=0, atol=2e-7)
    assert np.abs(Xm[:, 2]).max() == 1.0          # c's values beyond its range are clipped


def test_the_metadata_and_guarantee_of_mixed_and_label_only_releases():
    from iwpfast.privacy import ReleaseSpec
    mixed = _spec()
    meta = mixed.to_metadata(100)
    assert meta["format_version"] == 2 and meta["public_features"] == ["c", "d"]
    var = mixed.feature_mechanism.variance
    assert meta["feature_noise_variance"] == [var, var, 0.0, 0.0]
    assert meta["feature_noise_scale"] == [mixed.sigma, mixed.sigma, 0.0, 0.0]
    assert ReleaseSpec.from_metadata(meta) == mixed
    text = mixed.guarantee().statement
    assert "(3, 1e-05)-locally differentially private in its private columns and label" in text
    assert "any two records that agree on the public columns" in text
    assert "private features a, b by" in text and "public features c, d released WITHOUT noise" in text
    assert "NOT protected" in text
    label_only = _spec(epsilon_x=None, delta=None, bound=None, public_features=("a", "b", "c", "d"))
    meta = label_only.to_metadata(100)
    assert meta["epsilon_x"] is None and meta["feature_bound"] is None
    assert meta["feature_noise_variance"] == [0.0] * 4 and meta["noise"]["variance"] == 0.0
    assert ReleaseSpec.from_metadata(meta) == label_only
    g = label_only.guarantee()
    assert (g.epsilon, g.delta) == (1.0, 0.0)
    assert g.statement.startswith("Each record's label is (1, 0)-locally differentially private "
                                  "for any two records with the same features (label-only release): "
                                  "label y by randomized response")
    assert "features a, b, c, d released WITHOUT noise" in g.statement
    k_ary = _spec(epsilon_x=None, delta=None, bound=None, public_features=("a", "b", "c", "d"),
                  classes=("lo", "mid", "hi"))
    assert "k-ary randomized response" in k_ary.guarantee().statement
    # all-private releases are unchanged: version 1, no new fields
    plain = _spec(public_features=()).to_metadata(100)
    assert plain["format_version"] == 1 and "public_features" not in plain
    # an edited variance is caught
    bad = dict(mixed.to_metadata(100), feature_noise_variance=[var, var, 0.0, 1.0])
    from iwpfast.exceptions import ReleaseSpecError
    with pytest.raises(ReleaseSpecError, match="feature_noise_variance"):
        ReleaseSpec.from_metadata(bad)


@pytest.mark.parametrize("kw,match", [
    (dict(epsilon_x=None, epsilon_y=None, public_features=("a", "b", "c", "d")), "nothing private"),
    (dict(epsilon_x=None, label=None, epsilon_y=None, public_features=("a", "b", "c", "d")),
     "nothing private"),
    (dict(public_features=("a", "b", "c", "d")), "epsilon_x would protect nothing"),
    (dict(epsilon_x=None), "are private .* but no epsilon_x"),
    (dict(public_features=("c", "z")), "public feature.* z are not among the features"),
    (dict(epsilon_x=None, public_features=()), "epsilon_x is missing"),
])
def test_refusals(kw, match):
    from iwpfast.exceptions import InvalidInputError
    with pytest.raises(InvalidInputError, match=match):
        _spec(**kw)


# ------------------------------------------------------------------------------ end to end
@pytest.fixture(scope="module")
def raw_files(tmp_path_factory):
    import pyarrow as pa
    import pyarrow.parquet as pq
    d = tmp_path_factory.mktemp("public")
    X, y = _raw(12000, 1)
    table = pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "d": X[:, 3], "y": y})
    pq.write_table(table.slice(0, 9000), d / "train.parquet")
    pq.write_table(table.slice(9000), d / "test.parquet")
    (d / "parts").mkdir()
    pq.write_table(table.slice(0, 4500), d / "parts" / "p0.parquet")
    pq.write_table(table.slice(4500, 4500), d / "parts" / "p1.parquet")
    return d


RANGE_ARGS = ["--ranges", "a=0:10", "b=0:1", "c=-4:4", "d=0:2"]


def test_label_only_round_trip_cli_release_fit_evaluate(raw_files, capsys):
    import json

    from iwpfast.cli import main
    from iwpfast.estimators import load
    d = raw_files
    assert main(["release", str(d / "train.parquet"), str(d / "lo.parquet"), "--features", "a", "b",
                 "c", "d", "--public", "all", *RANGE_ARGS, "--epsilon-y", "1", "--seed", "3",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "label-only release" in out and "NOT protected" in out
    assert main(["info", str(d / "lo.parquet"), "--json"]) == 0
    meta = json.loads(capsys.readouterr().out)
    assert meta["public_features"] == ["a", "b", "c", "d"] and meta["epsilon_x"] is None
    assert main(["info", str(d / "lo.parquet")]) == 0
    assert "public:        a, b, c, d" in capsys.readouterr().out
    assert main(["fit", str(d / "lo.parquet"), "--out", str(d / "lo.json"), "--no-progress"]) == 0
    capsys.readouterr()
    model = load(d / "lo.json")
    assert np.all(model.noise_var_ == 0.0) and model.label_keep_prob_ == pytest.approx(
        1 / (1 + np.exp(-1.0)))
    assert float(model.tuning_["variance_cap"]) == np.inf     # nothing for a cap to hold
    assert main(["evaluate", str(d / "lo.json"), str(d / "test.parquet"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # the clean data's signal is strong (AUC of the true model ~0.9): the label-only model finds it
    assert report["auc"] > 0.8 and report["accuracy"] > report["majority_accuracy"] + 0.1


def test_mixed_release_cli_multi_part_and_the_learner_reads_per_column_noise(raw_files, capsys):
    import json

    from iwpfast.cli import main
    from iwpfast.estimators import load
    d = raw_files
    assert main(["release", str(d / "parts"), str(d / "mixed") + "/", "--features", "a", "b", "c",
                 "d", "--public", "c", "d", *RANGE_ARGS, "--epsilon-x", "4", "--epsilon-y", "2",
                 "--seed", "4", "--no-progress"]) == 0
    assert "public features c, d released WITHOUT noise" in capsys.readouterr().out
    assert main(["info", str(d / "mixed"), "--json"]) == 0
    meta = json.loads(capsys.readouterr().out)
    assert meta["public_features"] == ["c", "d"] and meta["feature_noise_variance"][2:] == [0, 0]
    assert main(["fit", str(d / "mixed"), "--out", str(d / "mixed.json"), "--alpha", "0.1",
                 "--learning-rate", "0.02", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["info", str(d / "mixed.json")]) == 0
    assert "over the private features (public, clipped to their ranges only: c, d)" in \
        capsys.readouterr().out
    model = load(d / "mixed.json")
    var = meta["feature_noise_variance"][0]
    np.testing.assert_allclose(model.noise_var_, [var, var, 0.0, 0.0])
    # predictions in raw units clip the private columns to the bound only (as the release did)
    from iwpfast.estimators._units import scale_and_clip
    lo, hi, bound, private = model._model_ranges()
    assert bound == 1.0 and private.tolist() == [True, True, False, False]
    cols = scale_and_clip([np.array([10.0]), np.array([1.0]), np.array([4.0]), np.array([2.0])],
                          lo, hi, bound, private)
    assert np.hypot(cols[0][0], cols[1][0]) == pytest.approx(1.0) and cols[2][0] == cols[3][0] == 1.0


def test_cli_release_refusals(raw_files, capsys):
    from iwpfast.cli import main
    d = raw_files
    base = ["release", str(d / "train.parquet"), str(d / "never.parquet"), "--features", "a", "b",
            *RANGE_ARGS[:3], "--no-progress"]
    for extra, match in ((["--public", "all", "--public-labels"], "nothing private"),
                         (["--public", "all", "--epsilon-x", "1", "--epsilon-y", "1"],
                          "protect nothing"),
                         (["--public", "a", "--epsilon-y", "1"], "no epsilon_x"),
                         (["--public", "z", "--epsilon-x", "1", "--epsilon-y", "1"],
                          "not among the features")):
        assert main(base + extra) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and match in err[0], (extra, err)
    assert not (d / "never.parquet").exists()


def test_dask_release_with_public_columns(raw_files):
    distributed = pytest.importorskip("distributed")
    from iwpfast.distributed import release_files
    from iwpfast.privacy import read_release_spec
    d = raw_files
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                       dashboard_address=None)
    try:
        with distributed.Client(cluster) as client:
            result = release_files(client, str(d / "parts"), str(d / "dask") + "/", _spec(),
                                   seed=5)
    finally:
        cluster.close()
    assert result.spec.public_features == ("c", "d")
    spec = read_release_spec(str(d / "dask"))
    assert spec.public_features == ("c", "d") and spec.feature_noise_variances()[2:] == [0.0, 0.0]


def test_the_variance_cap_scales_the_noised_coordinates_only(linear_data, head_config, chunked_run):
    """Kernel and NumPy twin, noise (0.5, 0, 0.8): the cap on sum_j s_j theta_j^2 binds; the
    public coordinate (s_1 = 0) is never scaled by it, so it ends beyond the radius a cap on the
    whole vector would allow; the two agree to rounding."""
    from iwpfast.sgd.engine import finish, run_chunk
    from iwpfast.sgd.reference import reference_finish as ref_finish
    from iwpfast.sgd.reference import reference_run_chunk as ref_run_chunk
    X, y = linear_data(n=600, p=3, layout="features")
    cfg = head_config(noise_var=np.array([0.5, 0.0, 0.8]), variance_cap=0.05, learning_rate=0.2)
    kernel = chunked_run(run_chunk, finish, cfg, X, y, 250)
    twin = chunked_run(ref_run_chunk, ref_finish, cfg, X, y, 250)
    assert kernel.telemetry[6] > 0, "the cap never bound"
    np.testing.assert_allclose(kernel.theta, twin.theta, rtol=1e-12, atol=1e-15)
    energy = float(np.dot(cfg.noise_var, kernel.theta ** 2))
    assert energy <= 0.05 * (1 + 1e-9)
    # one update (16 rows, batch 16): the capped theta is the uncapped one with its noised
    # coordinates scaled by sqrt(cap / energy) and the public one as it was
    import dataclasses
    one = dataclasses.replace(cfg, learning_rate=2.0)
    free = dataclasses.replace(one, variance_cap=np.inf)
    for run, fin in ((run_chunk, finish), (ref_run_chunk, ref_finish)):
        capped = chunked_run(run, fin, one, X[:, :16], y[:16], 16)
        uncapped = chunked_run(run, fin, free, X[:, :16], y[:16], 16)
        e = float(np.dot(cfg.noise_var, uncapped.theta ** 2))
        assert e > 0.05
        want = uncapped.theta * np.where(cfg.noise_var > 0, np.sqrt(0.05 / e), 1.0)
        np.testing.assert_allclose(capped.theta, want, rtol=1e-12)
        assert capped.theta[1] == uncapped.theta[1]


def test_plan_takes_public_columns(capsys):
    from iwpfast.cli import main
    from iwpfast.planning import plan_release
    all_private = plan_release(epsilon_x=4, epsilon_y=2, delta=1e-5, bound=2, n_features=5)
    mixed = plan_release(epsilon_x=4, epsilon_y=2, delta=1e-5, bound=2, n_features=5, n_public=2)
    # the same sigma on 3 noised columns, whose energy spreads over |x|^2 <= B^2 + 2
    assert mixed.sigma == pytest.approx(all_private.sigma, rel=1e-3)
    assert mixed.feature_factor == pytest.approx(1 + 3 * mixed.sigma ** 2 / 6)
    assert mixed.detectable_correlation(30000) < all_private.detectable_correlation(30000)
    label_only = plan_release(epsilon_x=None, epsilon_y=1, delta=None, bound=None, n_features=5,
                              n_public=5)
    assert label_only.sigma == 0 and label_only.feature_factor == 1.0
    assert main(["plan", "--epsilon-y", "1", "--features", "5", "--public", "5", "--rows",
                 "20000"]) == 0
    out = capsys.readouterr().out
    assert "label-only" in out and "all public (no feature noise)" in out
    assert main(["plan", "--epsilon-x", "4", "--features", "5", "--public", "2"]) == 0
    assert "2 public, 3 private" in capsys.readouterr().out


def test_plan_says_whether_the_cap_lets_predictions_leave_the_majority_class(capsys):
    """Issue 18's case: (4 + 2, 1e-5), bound 2, 23.6% positives: the capped scores reach
    +-sqrt(2) B / sigma = 0.654 against |b*| = logit(0.764) / 2 = 0.587 (exponential loss):
    only rows near the bound can flip; with 5% positives (|b*| = 1.47) none can, and the plan
    names what would (sigma, public columns) and that rows would not."""
    from iwpfast.planning import plan_release
    plan = plan_release(epsilon_x=4, epsilon_y=2, delta=1e-5, bound=2, n_features=5,
                        positive_share=0.236)
    lines = plan.majority_verdict()
    assert "|b*| = 0.587" in lines[0] and "only rows near the bound" in lines[1]
    rare = plan_release(epsilon_x=4, epsilon_y=2, delta=1e-5, bound=2, n_features=5,
                        positive_share=0.05).majority_verdict()
    assert "cannot move any prediction off the majority class" in rare[1]
    assert "more rows do not lift the cap" in rare[1] and "public" in rare[1]
    assert plan_release(epsilon_x=4, epsilon_y=2, delta=1e-5, bound=2,
                        n_features=5).majority_verdict() == []
    from iwpfast.cli import main
    assert main(["plan", "--epsilon-x", "4", "--epsilon-y", "2", "--bound", "2", "--features",
                 "5", "--positive-share", "0.05"]) == 0
    assert "cannot move any prediction" in capsys.readouterr().out
    assert main(["plan", "--epsilon-x", "4", "--features", "5", "--positive-share", "1.5"]) == 2
