"""Pure-epsilon releases end to end: ReleaseSpec(mechanism="laplace"), the file and its metadata,
multi-part releases, the CLI (release --mechanism laplace, info --json, plan, fit), and the
learner reading the law from the file.  Small sizes: CI reruns this file with JIT off.
"""
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import iwpfast
from iwpfast.exceptions import InvalidInputError
from iwpfast.io.sources import open_source
from iwpfast.privacy import ReleaseSpec, release
from iwpfast.privacy.laplace import LaplaceFeatureMechanism

FEATURES = ("a", "b", "c")
RANGES = {"a": (-1, 1), "b": (-1, 1), "c": (0, 5)}


def laplace_spec(**kw):
    values = dict(mechanism="laplace", epsilon_x=8.0, delta=0.0, bound=1.5, epsilon_y=2.0,
                  features=FEATURES, ranges=RANGES, label="y")
    values.update(kw)
    return ReleaseSpec(**values)


def raw_data(n, seed=0):
    r = np.random.default_rng(seed)
    x = r.uniform(-1, 1, (n, 2))
    y = (x[:, 0] - 0.5 * x[:, 1] + 0.3 * r.standard_normal(n) > 0).astype(np.int64)
    return {"a": x[:, 0], "b": x[:, 1], "c": r.uniform(0, 5, n), "y": y}


def test_spec_states_pure_epsilon_and_refuses_what_is_not():
    spec = laplace_spec()
    g = spec.guarantee()
    assert (g.epsilon, g.delta) == (10.0, 0.0)
    assert "(10, 0)-locally differentially private (pure epsilon)" in g.statement
    assert "discrete Laplace mechanism" in g.statement and "L1 bound 1.5" in g.statement
    assert isinstance(spec.feature_mechanism, LaplaceFeatureMechanism)
    described = spec.describe()
    assert "(L1)" in described and "discrete_laplace" in described
    # no Gaussian calibration line for a Laplace release; the law's standard deviation instead
    assert "calibration:" not in described and "sigma:" not in described
    assert "noise sd:" in described and "pure epsilon_x=8" in described
    assert ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0).mechanism == "gaussian"   # the default
    with pytest.raises(InvalidInputError, match="pure epsilon: pass delta=0.0"):
        laplace_spec(delta=1e-5)
    with pytest.raises(InvalidInputError, match="noise='float'"):
        laplace_spec(noise="float")
    with pytest.raises(InvalidInputError, match="regression"):
        laplace_spec(task="regression", target_range=(0, 1), epsilon_y=None)
    with pytest.raises(InvalidInputError, match="mechanism must be one of"):
        laplace_spec(mechanism="exponential")
    with pytest.raises(InvalidInputError, match="strictly between 0 and 1"):
        ReleaseSpec(epsilon_x=1.0, delta=0.0, bound=1.0)      # the Gaussian still needs delta > 0


def test_metadata_carries_the_law_and_round_trips():
    spec = laplace_spec()
    meta = spec.to_metadata(10)
    noise = meta["noise"]
    mech = spec.feature_mechanism
    assert noise["law"] == "discrete_laplace" and meta["mechanism"] == "laplace"
    assert noise["grid"] == mech.grid and noise["scale"] == pytest.approx(mech.law.scale)
    # the exact variance 2 a L^2 / (1 - a)^2
    a = math.exp(-mech.grid / noise["scale"])
    assert noise["variance"] == pytest.approx(2 * a * mech.grid**2 / (1 - a) ** 2, rel=1e-9)
    assert noise["epsilon_effective"] <= 8.0 and meta["delta_x"] == 0.0
    back = ReleaseSpec.from_metadata(json.loads(json.dumps(meta)))
    assert back == spec and back.mechanism == "laplace"
    edited = dict(meta, noise=dict(noise, scale=noise["scale"] * 1.1))
    with pytest.raises(iwpfast.ReleaseSpecError, match="noise.scale"):
        ReleaseSpec.from_metadata(edited)


def test_release_writes_grid_points_reproducibly_and_the_twin_gives_the_same_bits(tmp_path):
    data = raw_data(400)
    spec = laplace_spec()
    with pytest.warns(UserWarning, match="seeded"):
        release(data, tmp_path / "a.parquet", spec, seed=5)
    with pytest.warns(UserWarning, match="seeded"):
        release(data, tmp_path / "b.parquet", spec, seed=5, engine="numpy")   # the Python twin
    a, b = pq.read_table(tmp_path / "a.parquet"), pq.read_table(tmp_path / "b.parquet")
    assert a.equals(b)
    grid = spec.feature_mechanism.grid
    for name in FEATURES:
        v = a[name].to_numpy().astype(np.float64)
        np.testing.assert_array_equal(np.rint(v / grid), v / grid)
    y = a["y"].to_numpy()
    assert set(np.unique(y)) <= {-1, 1}
    meta = json.loads(a.schema.metadata[b"iwpfast.release"])
    assert meta["noise"]["law"] == "discrete_laplace" and meta["guarantee"]["delta"] == 0.0
    with pytest.warns(UserWarning, match="seeded"):
        release(data, tmp_path / "c.parquet", spec, seed=6)
    assert not pq.read_table(tmp_path / "c.parquet")["a"].equals(a["a"])


def test_released_noise_has_the_recorded_variance(tmp_path):
    # constant features: the released values minus the snapped point are the noise alone; its
    # sample variance is within 5 standard errors (sd of the squares / sqrt(n)) of the recorded one
    n = 40_000
    data = {"a": np.full(n, 0.2), "b": np.zeros(n), "c": np.full(n, 2.5), "y": np.ones(n, np.int64)}
    spec = laplace_spec(epsilon_y=None)
    with pytest.warns(UserWarning, match="seeded"):
        release(data, tmp_path / "n.parquet", spec, seed=1)
    t = pq.read_table(tmp_path / "n.parquet")
    var = spec.to_metadata()["noise"]["variance"]
    noise = t["b"].to_numpy().astype(np.float64)
    sq = noise**2
    assert abs(sq.mean() - var) < 5 * sq.std() / math.sqrt(n)
    assert abs(noise.mean()) < 5 * math.sqrt(var / n)


def test_multipart_release_reads_back_as_one_with_the_law(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for i, n in enumerate((300, 500)):
        pq.write_table(pa.table(raw_data(n, seed=i)), raw / f"f{i}.parquet")
    res = release(raw, str(tmp_path / "out") + "/", laplace_spec(features=None),
                  list(FEATURES), "y", seed=3)
    assert res.rows_written == 800
    src = open_source(tmp_path / "out")
    assert src.num_rows == 800
    assert src.release_metadata["noise"]["law"] == "discrete_laplace"


def test_the_learner_reads_the_law_and_uses_the_laplace_correction(tmp_path):
    data = raw_data(3000)
    with pytest.warns(UserWarning, match="seeded"):
        release(data, tmp_path / "r.parquet", laplace_spec(), seed=2)
    clf = iwpfast.IWPClassifier(alpha=0.1, learning_rate=0.05).fit(tmp_path / "r.parquet",
                                                                    label="y")
    assert np.all(np.isfinite(clf.coef_))
    from iwpfast.estimators._noise import noise_from_metadata
    model = noise_from_metadata(open_source(tmp_path / "r.parquet").release_metadata, list(FEATURES))
    assert model.noise_law is not None
    cfg = clf._make_config(clf._validated(), model, 3, 3000)
    assert cfg.noise_law is not None
    assert cfg.variance_cap == pytest.approx(cfg.noise_law.default_variance_cap())
    with pytest.raises(InvalidInputError, match="loss='exponential' or loss='quadratic'"):
        iwpfast.IWPClassifier(loss="logistic", alpha=0.1, learning_rate=0.05).fit(
            tmp_path / "r.parquet", label="y")


def test_cli_release_info_plan_and_fit(tmp_path, capsys, monkeypatch):
    from iwpfast.cli import main

    monkeypatch.chdir(tmp_path)
    pq.write_table(pa.table(raw_data(2000)), tmp_path / "raw.parquet")
    rc = main(["release", "raw.parquet", "rel.parquet", "--mechanism", "laplace", "--features",
               "a", "b", "c", "--ranges", "a=-1:1", "b=-1:1", "c=0:5", "--label", "y",
               "--epsilon-x", "8", "--epsilon-y", "2", "--bound", "1.5", "--seed", "1"])
    assert rc == 0
    capsys.readouterr()
    assert main(["info", "rel.parquet", "--json"]) == 0
    noise = json.loads(capsys.readouterr().out)["noise"]
    assert noise["law"] == "discrete_laplace"
    assert {"grid", "scale", "variance"} <= set(noise)
    assert main(["info", "rel.parquet"]) == 0
    text = capsys.readouterr().out
    assert "pure epsilon" in text and "(10, 0)-locally" in text
    assert main(["plan", "--mechanism", "laplace", "--epsilon-x", "8", "--epsilon-y", "2",
                 "--bound", "1.5", "--features", "3", "--json"]) == 0
    assert "(10, 0)-locally" in json.loads(capsys.readouterr().out)["guarantee"]
    rc = main(["release", "raw.parquet", "bad.parquet", "--mechanism", "laplace", "--delta",
               "1e-5", "--features", "a", "--ranges", "a=-1:1", "--no-label", "--epsilon-x", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("iwpfast: error:") and "delta=0.0" in err
    assert main(["fit", "rel.parquet", "--label", "y", "--out", "m.json"]) == 0


@pytest.mark.slow
def test_goal_reduced_iwp_lands_on_the_clean_optimum_and_naive_does_not():
    # examples/experiment_laplace.py at 4 seeds x 60,000 rows: the IWP seed mean within 3 standard
    # errors (sd of the paired differences over seeds / sqrt(seeds)) of the clean optimum on every
    # coordinate, the naive one more than 10 away on some coordinate
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "experiment_laplace.py"
    module_spec = importlib.util.spec_from_file_location("experiment_laplace", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    r = module.run(n=60_000, seeds=4)
    assert r["iwp"]["within_3se"], r["iwp"]
    assert np.max(np.abs(r["naive"]["z"])) > 10, r["naive"]


def test_a_saved_model_keeps_the_law_for_partial_fit(tmp_path):
    data = raw_data(3000)
    with pytest.warns(UserWarning, match="seeded"):
        release(data, tmp_path / "r.parquet", laplace_spec(), seed=2)
    clf = iwpfast.IWPClassifier(alpha=0.1, learning_rate=0.05).fit(tmp_path / "r.parquet", label="y")
    clf.save(tmp_path / "m.json")
    loaded = iwpfast.load(tmp_path / "m.json")
    assert loaded._pass.config.noise_law is not None
    np.testing.assert_allclose(loaded._pass.config.noise_law.variance,
                               clf._pass.config.noise_law.variance)
    loaded.partial_fit(tmp_path / "r.parquet", label="y")
    assert np.all(np.isfinite(loaded.coef_))


def test_public_columns_carry_no_laplace_noise_and_the_learner_skips_them(tmp_path):
    data = raw_data(3000)
    spec = laplace_spec(public_features=("c",))
    assert "(pure epsilon)" in spec.guarantee().statement
    with pytest.warns(UserWarning, match="seeded"):
        release(data, tmp_path / "p.parquet", spec, seed=4)
    t = pq.read_table(tmp_path / "p.parquet")
    meta = json.loads(t.schema.metadata[b"iwpfast.release"])
    assert meta["feature_noise_variance"][2] == 0.0 and meta["feature_noise_variance"][0] > 0
    clean_c = (data["c"] - 2.5) / 2.5
    np.testing.assert_allclose(t["c"].to_numpy(), clean_c, atol=1e-6)   # float32, no noise
    clf = iwpfast.IWPClassifier(alpha=0.1, learning_rate=0.05).fit(tmp_path / "p.parquet", label="y")
    law = clf._pass.config.noise_law
    assert law is not None and law.variance[2] == 0.0 and law.scale[2] == 0.0
    assert law.exponential_factor(np.array([0.1, -0.2, 5.0]))[0][2] == 0.0    # kappa = 1, any theta


def test_private_risk_of_a_laplace_release_is_the_mean_of_the_exact_laplace_estimates(tmp_path):
    """private_risk (and the 'auto' hold-out and the k-class risk, through the same
    estimates.noise_tau) use the Laplace inverse e^{-tau} = prod_j kappa_j for the exponential
    loss, not the Gaussian 1/2 sum s_j theta_j^2: the estimate equals the mean of iwp_loss with the
    release's law, to rounding."""
    data = raw_data(3000)
    with pytest.warns(UserWarning, match="seeded"):
        release(data, tmp_path / "r.parquet", laplace_spec(), seed=2)
    clf = iwpfast.IWPClassifier(alpha=0.1, learning_rate=0.05).fit(tmp_path / "r.parquet",
                                                                    label="y")
    src = open_source(tmp_path / "r.parquet")
    from iwpfast.estimators._noise import noise_from_metadata
    law = noise_from_metadata(src.release_metadata, list(FEATURES)).noise_law
    table = pq.read_table(tmp_path / "r.parquet")
    X = np.column_stack([table[f].to_numpy().astype(np.float64) for f in FEATURES])
    y = table["y"].to_numpy().astype(np.float64)
    theta, b = clf.coef_.ravel(), float(np.ravel(clf.intercept_)[0])
    expected = iwpfast.iwp_loss(theta, X, y, loss="exponential", noise_law=law,
                                epsilon_y=laplace_spec().epsilon_y, intercept=b).mean()
    gaussian = iwpfast.iwp_loss(theta, X, y, loss="exponential", noise_var=law.variance,
                                epsilon_y=laplace_spec().epsilon_y, intercept=b).mean()
    got = clf.private_risk(tmp_path / "r.parquet").risk
    assert got == pytest.approx(expected, rel=1e-9)
    assert abs(expected - gaussian) > 1e-6 * abs(expected)   # the two forms differ at this theta
