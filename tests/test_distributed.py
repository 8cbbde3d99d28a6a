"""The Dask release and training on a real local cluster (2 worker processes, 1 thread each),
started and stopped by this module; compared with the serial release and with fit."""
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from s3_server import s3_server

import iwpfast
from iwpfast.exceptions import InvalidInputError
from iwpfast.io import open_source
from iwpfast.io.sources import FileSource, RowRangeSource
from iwpfast.privacy import ReleaseSpec, release

distributed = pytest.importorskip("distributed")
dist = pytest.importorskip("iwpfast.distributed")

FEATURES = ["a", "b", "c"]
ROWS = [3000, 4100, 2500, 3400]


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:  # before the cluster: the workers inherit its credentials
        server.filesystem().create_dir("bkt")
        yield server


@pytest.fixture(scope="module")
def client(s3):
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def spec():
    return ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.5, epsilon_y=1.0,
                       ranges="a=-1:1,b=-1:1,c=0:5")


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    d = tmp_path_factory.mktemp("raw")
    r = np.random.default_rng(0)
    for i, n in enumerate(ROWS):
        x = r.uniform(-1, 1, (n, 2))
        y = (x[:, 0] - 0.5 * x[:, 1] + 0.3 * r.standard_normal(n) > 0).astype(np.int64)
        pq.write_table(pa.table({"a": x[:, 0], "b": x[:, 1], "c": r.uniform(0, 5, n), "y": y}),
                       d / f"f{i}.parquet", row_group_size=1024)
    return d


def test_dask_release_with_a_seed_is_the_serial_release(client, raw, tmp_path):
    # threads=1: the Dask release's default per task (docs/distributed.md: same threads, same bits)
    serial = release(raw, str(tmp_path / "serial") + "/", spec(), FEATURES, "y", seed=42,
                     threads=1)
    res = dist.release_files(client, raw, str(tmp_path / "dask") + "/", spec(), features=FEATURES,
                             label="y", seed=42)
    assert res.rows_written == serial.rows_written == sum(ROWS) and len(res.parts) == 4
    assert "guarantee" not in res.summary() and res.spec.guarantee().epsilon == 3.0
    for i in range(4):
        name = f"part-{i:06d}.parquet"
        a, b = pq.read_table(tmp_path / "serial" / name), pq.read_table(tmp_path / "dask" / name)
        assert a.equals(b)  # same bits: part i's key comes from (seed, i) wherever it runs
    s, d = open_source(tmp_path / "serial"), open_source(tmp_path / "dask")
    assert s.num_rows == d.num_rows == sum(ROWS)
    # parts of one release differ from each other (independent keys per part), and two
    # unseeded releases differ (fresh OS entropy per part)
    p0 = pq.read_table(tmp_path / "dask" / "part-000000.parquet")["a"].to_numpy()[:100]
    p1 = pq.read_table(tmp_path / "dask" / "part-000001.parquet")["a"].to_numpy()[:100]
    assert not np.array_equal(p0, p1)
    u1 = dist.release_files(client, raw, str(tmp_path / "u1") + "/", spec(), features=FEATURES,
                            label="y")
    assert u1.rows_written == sum(ROWS)
    q0 = pq.read_table(tmp_path / "u1" / "part-000000.parquet")["a"].to_numpy()[:100]
    assert not np.array_equal(p0, q0)


def copy_with_a_bad_value(raw, folder, files, value, row):
    """The first ``files`` raw files in ``folder``, file 2's column c holding ``value`` at
    ``row`` (the same row groups: the same noise as the raw files)."""
    folder.mkdir()
    for i in range(files):
        t = pq.read_table(raw / f"f{i}.parquet")
        if i == 2:
            c = t["c"].to_numpy().copy()
            c[row] = value
            t = t.set_column(2, "c", pa.array(c))
        pq.write_table(t, folder / f"f{i}.parquet", row_group_size=1024)


def test_failed_dask_release_publishes_nothing(client, raw, tmp_path):
    bad = tmp_path / "bad"
    copy_with_a_bad_value(raw, bad, 3, np.inf, 7)
    with pytest.raises(InvalidInputError, match="non-finite"):
        dist.release_files(client, bad, str(tmp_path / "out") + "/", spec(), features=FEATURES,
                           label="y", seed=1)
    assert not (tmp_path / "out").exists()     # the folder it created is gone too


@pytest.fixture(scope="module")
def released(raw, tmp_path_factory):
    out = tmp_path_factory.mktemp("rel") / "rel"
    release(raw, str(out) + "/", spec(), FEATURES, "y", seed=3)
    return out


def test_fit_files_with_one_shard_is_fit(client, released):
    kw = dict(alpha=1.0, learning_rate=0.005, batch_size=16, average="tail", variance_cap=2.0)
    ref = iwpfast.IWPClassifier(**kw).fit(released)
    got = dist.fit_files(client, released, iwpfast.IWPClassifier(**kw), shards=1)
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    np.testing.assert_array_equal(got.intercept_, ref.intercept_)
    assert got.n_rows_seen_ == ref.n_rows_seen_ == sum(ROWS)
    assert got.n_iter_ == ref.n_iter_ and got.features_ == ref.features_
    assert got.telemetry_["batches"] == ref.telemetry_["batches"]


def test_fit_files_merges_shards_by_row_weighted_averaging(client, released):
    kw = dict(alpha=1.0, learning_rate=0.005, batch_size=16, average="tail", variance_cap=2.0)
    got = dist.fit_files(client, released, iwpfast.IWPClassifier(**kw), shards=2)
    # the same two shards fitted here, one after the other, with the step x 2
    n = sum(ROWS)
    bounds = dist.shard_bounds(n, 2)
    base = FileSource(open_source(released).locations, None, 1 << 16)
    fits = [iwpfast.IWPClassifier(**{**kw, "learning_rate": 0.01}).fit(RowRangeSource(base, a, b))
            for a, b in bounds]
    w = np.array([b - a for a, b in bounds], dtype=float) / n
    want = w[0] * fits[0].coef_ + w[1] * fits[1].coef_
    np.testing.assert_allclose(got.coef_, want, rtol=1e-12, atol=1e-15)
    assert got.n_rows_seen_ == n
    assert got.n_iter_ == fits[0].n_iter_ + fits[1].n_iter_
    assert got.telemetry_["projection_hits"] == sum(f.telemetry_["projection_hits"] for f in fits)
    # periodic averaging: 3 rounds still see every row once
    r3 = dist.fit_files(client, released, iwpfast.IWPClassifier(**kw), shards=2, rounds=3)
    assert r3.n_rows_seen_ == n and r3.telemetry_["rounds"] == 3
    # (feature c is independent of y: its coefficient is ~0 and its sign depends on the noise)
    assert np.all(np.sign(r3.coef_[:, :2]) == np.sign(got.coef_[:, :2]))


def test_release_a_bucket_on_dask_and_train_from_the_bucket(client, raw, s3, tmp_path):
    fs = s3.filesystem()
    for i in range(len(ROWS)):
        pq.write_table(pq.read_table(raw / f"f{i}.parquet"), f"bkt/raw/f{i}.parquet", filesystem=fs,
                       row_group_size=1024)  # the same row groups: the same chunks, the same noise
    res = dist.release_files(client, s3.uri("bkt/raw/"), s3.uri("bkt/rel/"), spec(),
                             features=FEATURES, label="y", seed=8)
    assert res.rows_written == sum(ROWS)
    assert s3.keys("bkt/rel")[0] == "bkt/rel/_iwpfast_manifest.json"
    local = release(raw, str(tmp_path / "rel") + "/", spec(), FEATURES, "y", seed=8)
    assert local.rows_written == res.rows_written
    kw = dict(alpha=1.0, learning_rate=0.005, batch_size=16, average="tail", variance_cap=2.0)
    remote = dist.fit_files(client, s3.uri("bkt/rel"), iwpfast.IWPClassifier(**kw), shards=2)
    here = dist.fit_files(client, tmp_path / "rel", iwpfast.IWPClassifier(**kw), shards=2)
    np.testing.assert_array_equal(remote.coef_, here.coef_)


def test_merge_states_is_the_weighted_mean():
    from iwpfast.sgd.state import TELEMETRY_INDEX, HeadConfig, HeadState

    cfg = HeadConfig(loss="exponential", mode="iwp", n_features=3, noise_var=np.ones(3))
    r = np.random.default_rng(1)
    states = []
    for k in range(3):
        s = HeadState.new(cfg)
        s.theta[:] = r.standard_normal(3)
        s.theta_avg[:] = r.standard_normal(3)
        s.intercept[:] = r.standard_normal()
        s.counters[:2] = [10 + k, 5 + k]
        s.telemetry[TELEMETRY_INDEX["batches"]] = 10 + k
        s.telemetry[TELEMETRY_INDEX["rows_seen"]] = 100 * (k + 1)
        s.telemetry[TELEMETRY_INDEX["grad_norm_mean"]] = k + 1.0
        states.append(s)
    w = [1.0, 2.0, 3.0]
    m = dist.merge_states(states, w)
    ww = np.array(w) / 6
    np.testing.assert_allclose(m.theta, sum(wk * s.theta for wk, s in zip(ww, states, strict=True)))
    np.testing.assert_allclose(m.theta_avg, sum(wk * s.theta_avg for wk, s in zip(ww, states, strict=True)))
    np.testing.assert_allclose(m.intercept, sum(wk * s.intercept for wk, s in zip(ww, states, strict=True)))
    assert m.telemetry[TELEMETRY_INDEX["rows_seen"]] == 600
    assert m.telemetry[TELEMETRY_INDEX["batches"]] == 33
    # pooled mean of the per-update gradient norms: weighted by updates
    assert m.telemetry[TELEMETRY_INDEX["grad_norm_mean"]] == pytest.approx((10 + 22 + 36) / 33)
    assert m.step == round(float(ww @ [10, 11, 12]))


def test_cli_release_and_fit_on_the_cluster(client, raw, tmp_path, capsys):
    from iwpfast.cli import main

    address = client.scheduler.address
    out = str(tmp_path / "rel") + "/"
    assert main(["release", str(raw), out, "--features", *FEATURES, "--ranges", "a=-1:1",
                 "b=-1:1", "c=0:5", "--epsilon-x", "2", "--epsilon-y", "1", "--bound", "1.5",
                 "--seed", "4", "--no-progress", "--scheduler", address]) == 0
    assert "in 4 parts" in capsys.readouterr().out
    model = tmp_path / "m.json"
    assert main(["fit", out, "--out", str(model), "--alpha", "1", "--learning-rate", "0.005",
                 "--average", "tail", "--scheduler", address, "--shards", "2", "--rounds", "2",
                 "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert f"on {sum(ROWS):,} rows" in text
    back = iwpfast.load(model)
    assert back.n_rows_seen_ == sum(ROWS) and back.telemetry_["shards"] == 2
    # a file destination cannot hold parts: one line naming the fix
    assert main(["release", str(raw), str(tmp_path / "x.parquet"), "--features", *FEATURES,
                 "--ranges", "a=-1:1", "b=-1:1", "c=0:5", "--epsilon-x", "2", "--epsilon-y", "1",
                 "--scheduler", address]) == 2
    assert "ending in /" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_workers_starts_and_stops_a_local_cluster(released, tmp_path, capsys):
    # slow: starts its own 2-process cluster (the other tests share one)
    from iwpfast.cli import main

    model = tmp_path / "m.json"
    assert main(["fit", str(released), "--out", str(model), "--alpha", "1.0",
                 "--learning-rate", "0.005", "--workers", "2", "--no-progress",
                 "--dashboard"]) == 0
    assert "Dask dashboard: http" in capsys.readouterr().err
    back = iwpfast.load(model)
    assert back.n_rows_seen_ == sum(ROWS) and back.telemetry_["shards"] == 2


def test_large_files_split_into_row_group_ranges(client, raw, tmp_path, capsys):
    from iwpfast.cli import main
    from iwpfast.privacy.multipart import release_parts

    serial = release_parts(raw, str(tmp_path / "s") + "/", spec(), FEATURES, "y", seed=6,
                           max_part_rows=2000)
    res = dist.release_files(client, raw, str(tmp_path / "d") + "/", spec(), features=FEATURES,
                             label="y", seed=6, max_part_rows=2000)
    # row groups of 1024 rows: 3000 -> 2048 + 952, 4100 -> 2048 + 2048 + 4, ...
    assert [r.rows_written for r in serial.parts] == [2048, 952, 2048, 2048, 4, 2048, 452,
                                                      2048, 1352]
    assert [r.rows_written for r in res.parts] == [r.rows_written for r in serial.parts]
    for i in range(len(serial.parts)):
        name = f"part-{i:06d}.parquet"
        assert pq.read_table(tmp_path / "s" / name).equals(pq.read_table(tmp_path / "d" / name))
    assert open_source(tmp_path / "d").num_rows == sum(ROWS)
    # the rows of each part are those of its range: the labels' signs follow the raw labels
    # except where randomized response flipped them (keep probability 0.73 at epsilon_y = 1)
    raw_y = np.concatenate([pq.read_table(raw / f"f{i}.parquet")["y"].to_numpy() for i in range(4)])
    rel_y = pa.Table.from_batches(list(open_source(tmp_path / "d").batches()))["y"].to_numpy()
    agree = np.mean((raw_y * 2 - 1) == rel_y)
    assert 0.69 < agree < 0.77  # 0.731 +- 5 se (se = 0.004 at 13000 rows)
    assert main(["release", str(raw), str(tmp_path / "c") + "/", "--features", *FEATURES,
                 "--ranges", "a=-1:1", "b=-1:1", "c=0:5", "--epsilon-x", "2", "--epsilon-y", "1",
                 "--bound", "1.5", "--seed", "6", "--part-rows", "2000", "--no-progress"]) == 0
    assert "in 9 parts" in capsys.readouterr().out


def test_fit_files_with_a_sample_weight_column_is_fit(client, raw, tmp_path):
    # a single-file release with a public weight column appended (its metadata kept)
    rel = tmp_path / "rel.parquet"
    release(raw, str(rel), spec(), FEATURES, "y", seed=5)
    table = pq.read_table(rel)
    w = np.random.default_rng(1).exponential(1.0, table.num_rows)
    pq.write_table(table.append_column("w", pa.array(w)), tmp_path / "rel_w.parquet")
    path = str(tmp_path / "rel_w.parquet")
    kw = dict(alpha=1.0, learning_rate=0.005, batch_size=16, average="tail", variance_cap=2.0)
    ref = iwpfast.IWPClassifier(**kw).fit(path, sample_weight="w")
    got = dist.fit_files(client, path, iwpfast.IWPClassifier(**kw), shards=1, sample_weight="w")
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    np.testing.assert_array_equal(got.intercept_, ref.intercept_)
    plain = iwpfast.IWPClassifier(**kw).fit(path)
    assert not np.array_equal(plain.coef_, ref.coef_)
    with pytest.raises(InvalidInputError, match="sample_weight column 'v' not in the source"):
        dist.fit_files(client, path, iwpfast.IWPClassifier(**kw), shards=1, sample_weight="v")


# ------------------------------------------------------------------ 'auto' and k classes on shards
def _risk_gap_bound(a, b):
    """3 standard errors of the difference of two private risk estimates (treated as
    independent: their paired difference has a smaller standard error, so this bound is loose
    the safe way)."""
    return 3.0 * float(np.hypot(a.stderr, b.stderr))


def test_fit_files_auto_chooses_on_every_shard_as_one_machine(client, released, single_holdout):
    # a cluster's pass uses the one hold-out; so does one machine here (its default cross-
    # validates data this small, sgd/crossval.py)
    one = iwpfast.IWPClassifier(solver="sgd").fit(released)
    got = dist.fit_files(client, released, iwpfast.IWPClassifier(solver="sgd"), shards=2)
    # the same grid, the same split (train and validation rows of the whole release), the cap
    for key in ("alpha", "learning_rate"):
        assert got.tuning_[key] == one.tuning_[key]
    assert got.tuning_["n_validation"] == one.tuning_["n_validation"] > 0
    assert got.tuning_["n_train"] == one.tuning_["n_train"]
    # what the cluster changes in the search is said (iwpfast.settings.SearchOptions.on_cluster)
    assert any("cluster's runner" in n for n in got.tuning_["notes"])
    assert not any("cluster's runner" in n for n in one.tuning_["notes"])
    assert got.tuning_["variance_cap"] == one.tuning_["variance_cap"] == 2.0
    assert got._pass.config.variance_cap == 2.0 and got._pass.config.average_start > 0
    assert got.telemetry_["shards"] == 2 and got.n_rows_seen_ == one.tuning_["n_train"]
    chosen = got.tuning_["chosen"].index(True)
    assert got.alpha_ == got.tuning_["alpha"][chosen]
    assert got.learning_rate_ == 2 * got.tuning_["learning_rate"][chosen]   # the shards' step
    # the risk of the model: within 3 standard errors of one machine's
    r_one, r_got = one.private_risk(released), got.private_risk(released)
    assert abs(r_got.risk - r_one.risk) <= _risk_gap_bound(r_one, r_got)


@pytest.fixture(scope="module")
def released_3(tmp_path_factory):
    d = tmp_path_factory.mktemp("raw3")
    r = np.random.default_rng(5)
    for i, n in enumerate([5000, 4000]):
        x = r.uniform(-1, 1, (n, 2))
        score = np.stack([x[:, 0], x[:, 1], -x[:, 0] - x[:, 1]], axis=1)
        y = np.array(["u", "v", "w"])[np.argmax(score + 0.3 * r.standard_normal((n, 3)), axis=1)]
        pq.write_table(pa.table({"a": x[:, 0], "b": x[:, 1], "c": r.uniform(0, 5, n), "y": y}),
                       d / f"f{i}.parquet", row_group_size=1024)
    out = tmp_path_factory.mktemp("rel3") / "rel"
    s = ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.5, epsilon_y=2.0,
                    ranges="a=-1:1,b=-1:1,c=0:5", classes=["u", "v", "w"])
    release(d, str(out) + "/", s, FEATURES, "y", seed=6)
    return out


def test_fit_files_k_classes_with_one_shard_is_fit(client, released_3):
    kw = dict(alpha=1.0, learning_rate=0.005, batch_size=16, average="tail")
    ref = iwpfast.IWPClassifier(**kw).fit(released_3)
    got = dist.fit_files(client, released_3, iwpfast.IWPClassifier(**kw), shards=1)
    assert got.coef_.shape == (3, 3) and list(got.classes_) == ["u", "v", "w"]
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    np.testing.assert_array_equal(got.intercept_, ref.intercept_)


def test_fit_files_auto_k_classes_on_two_shards(client, released_3, single_holdout):
    # a cluster's pass uses the one hold-out; so does one machine here (its default cross-
    # validates data this small, sgd/crossval.py)
    one = iwpfast.IWPClassifier().fit(released_3)
    got = dist.fit_files(client, released_3, iwpfast.IWPClassifier(), shards=2)
    assert got.coef_.shape == (3, 3) and list(got.classes_) == ["u", "v", "w"]
    assert got.tuning_["class"] == one.tuning_["class"]
    assert got.tuning_["n_validation"] == one.tuning_["n_validation"] > 0
    r_one, r_got = one.private_risk(released_3), got.private_risk(released_3)
    assert abs(r_got.risk - r_one.risk) <= _risk_gap_bound(r_one, r_got)


def test_cli_fit_and_tune_with_auto_on_the_cluster(client, released, tmp_path, capsys):
    from iwpfast.cli import main

    address = client.scheduler.address
    model = tmp_path / "auto.json"
    assert main(["fit", str(released), "--out", str(model), "--scheduler", address,
                 "--no-progress"]) == 0
    back = iwpfast.load(model)
    assert back.telemetry_["shards"] == 2 and back.tuning_["variance_cap"] == 2.0
    capsys.readouterr()
    assert main(["tune", str(released), "--out", str(tmp_path / "t.json"), "--scheduler",
                 address, "--no-progress"]) == 0
    assert "chosen" in capsys.readouterr().out.lower()


def test_dask_release_resumes_keeping_the_finished_parts(client, raw, tmp_path):
    import hashlib
    src = tmp_path / "src"
    copy_with_a_bad_value(raw, src, 4, np.nan, 3)
    out = str(tmp_path / "out") + "/"
    with pytest.raises(InvalidInputError):
        dist.release_files(client, src, out, spec(), features=FEATURES, label="y", seed=9,
                           resume=True)
    kept = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in (tmp_path / "out").glob("part-*")}
    assert len(kept) == 3                              # every part but the failed one
    # the inputs must stay as they were (a changed input is refused: issue 35); the bad row is
    # dropped by the resumed run instead
    res = dist.release_files(client, src, out, spec(), features=FEATURES, label="y", seed=9,
                             resume=True, on_invalid="drop")
    assert res.rows_written == sum(ROWS) - 1 and open_source(out).num_rows == sum(ROWS) - 1
    assert res.rows_kept == sum(ROWS) - ROWS[2] and res.parts_kept == 3
    for name, digest in kept.items():
        assert hashlib.sha256((tmp_path / "out" / name).read_bytes()).hexdigest() == digest
    serial = release(src, str(tmp_path / "serial") + "/", spec(), FEATURES, "y", seed=9,
                     on_invalid="drop")
    assert serial.rows_written == res.rows_written
    assert pa.Table.from_batches(list(open_source(out).batches())).equals(
        pa.Table.from_batches(list(open_source(tmp_path / "serial").batches())))


def test_relative_paths_reach_the_workers_absolute(client, tmp_path, monkeypatch, capsys):
    """Relative local paths with a cluster whose workers run elsewhere (this module's cluster,
    reached through its address as an external scheduler is, its workers started in another
    working directory): the client makes them absolute and checks them before any task
    (docs/distributed.md "Paths")."""
    import json
    import os

    from iwpfast.cli import main
    from iwpfast.distributed import client_path

    scheduler = client.scheduler.address
    rng = np.random.default_rng(2)
    (tmp_path / "raw").mkdir()
    for i in range(2):
        pq.write_table(pa.table({"a": rng.uniform(-1, 1, 600), "y": rng.integers(0, 2, 600)}),
                       tmp_path / "raw" / f"f{i}.parquet")
    # the worker processes keep the directory they started in: relative paths would name
    # other files there
    monkeypatch.chdir(tmp_path)
    assert os.getcwd() != os.path.dirname(os.path.abspath(__file__))
    os.mkdir("out")
    assert main(["release", "raw/", "out/rel/", "--features", "a=-1:1", "--epsilon-x", "2",
                 "--epsilon-y", "1", "--seed", "1", "--scheduler", scheduler,
                 "--progress", "none"]) == 0
    manifest = json.loads((tmp_path / "out" / "rel" / "_iwpfast_manifest.json").read_text())
    assert manifest["row_count"] == 1200
    assert main(["fit", "out/rel", "--out", "m.json", "--alpha", "1", "--learning-rate", "0.01",
                 "--scheduler", scheduler, "--shards", "1", "--progress", "none"]) == 0
    assert iwpfast.load("m.json").n_rows_seen_ == 1200
    capsys.readouterr()
    # checked on the client, before any task: a source that is not there, a destination whose
    # folder is not there
    assert main(["release", "nothere/", "out/r2/", "--features", "a=-1:1", "--epsilon-x", "2",
                 "--epsilon-y", "1", "--scheduler", scheduler]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(InvalidInputError, match="folder .* does not exist"):
        client_path("missing/deeper/rel/", what="destination", must_exist=False)
    assert client_path("raw/") == str(tmp_path / "raw") + os.sep
    assert client_path("s3://bkt/raw/") == "s3://bkt/raw/"


def test_solver_moments_on_the_cluster_adds_the_shards_fold_moments(client, released):
    # each shard's fold moments are read on a worker with the whole source's folds and added:
    # the statistics differ from one machine's only by the order of float additions (bound:
    # 1e-12 of the largest sum), so the chosen alpha is the same and the model agrees to 1e-9
    ref = iwpfast.IWPClassifier(solver="moments", loss="quadratic", progress=False).fit(released)
    got = dist.fit_files(client, released, iwpfast.IWPClassifier(
        solver="moments", loss="quadratic", progress=False), shards=3)
    assert got.solver_ == "moments" and got.n_rows_seen_ == ref.n_rows_seen_ == sum(ROWS)
    assert got.alpha_ == ref.alpha_ or (np.isnan(got.alpha_) and np.isnan(ref.alpha_))
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.intercept_, ref.intercept_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.tuning_["risk"], ref.tuning_["risk"], rtol=1e-9, atol=1e-12)
