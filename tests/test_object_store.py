"""Object stores, for real: an S3-compatible server on localhost (moto), pyarrow's S3FileSystem,
and the same calls a user makes with s3:// URIs; results compared bit for bit with local files."""
import json

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pds
import pyarrow.parquet as pq
import pytest
from s3_server import s3_server

import iwpfast
from iwpfast.cli import main
from iwpfast.exceptions import InvalidInputError, ReleaseSpecError
from iwpfast.io import open_source
from iwpfast.io.parts import write_manifest
from iwpfast.privacy import ReleaseSpec, release

FEATURES = ["a", "b", "c"]


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        server.filesystem().create_dir("bkt")
        yield server


def raw_table(n, seed):
    r = np.random.default_rng(seed)
    return pa.table({"a": r.uniform(-1, 1, n), "b": r.uniform(-1, 1, n),
                     "c": r.uniform(0, 5, n), "y": r.integers(0, 2, n)})


def spec():
    return ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.5, epsilon_y=1.0,
                       ranges="a=-1:1,b=-1:1,c=0:5")


@pytest.fixture(scope="module")
def raw_files(tmp_path_factory, s3):
    """Three raw Parquet files, locally and under s3://bkt/raw/."""
    local = tmp_path_factory.mktemp("raw")
    fs = s3.filesystem()
    for i, n in enumerate([3000, 4100, 2500]):
        t = raw_table(n, i)
        pq.write_table(t, local / f"f{i}.parquet", row_group_size=1000)
        pq.write_table(t, f"bkt/raw/f{i}.parquet", row_group_size=1000, filesystem=fs)
    return local


def test_release_to_and_from_s3_uri_is_bit_for_bit_the_local_release(s3, raw_files, tmp_path):
    local = release(raw_files / "f1.parquet", tmp_path / "rel.parquet", spec(), FEATURES, "y",
                    seed=7, record_batch_rows=1500)
    remote = release(s3.uri("bkt/raw/f1.parquet"), s3.uri("bkt/out/rel.parquet"), spec(),
                     FEATURES, "y", seed=7, record_batch_rows=1500)
    assert remote.rows_written == local.rows_written == 4100
    assert remote.destination == s3.uri("bkt/out/rel.parquet").split("?")[0]
    # only the published object, no temporary key left behind
    assert s3.keys("bkt/out") == ["bkt/out/rel.parquet"]
    a = pq.read_table(tmp_path / "rel.parquet")
    b = pq.read_table("bkt/out/rel.parquet", filesystem=s3.filesystem())
    assert a.equals(b) and a.schema.metadata == b.schema.metadata
    # read back through the URI: row count from the footer, metadata intact
    src = open_source(s3.uri("bkt/out/rel.parquet"))
    assert src.num_rows == 4100 and src.release_metadata["row_count"] == 4100
    assert pa.Table.from_batches(list(src.batches())).equals(a)


def test_explicit_filesystem_and_dataset_on_s3_have_row_counts(s3, raw_files):
    fs = s3.filesystem()
    src = open_source("bkt/raw/", filesystem=fs)
    assert src.num_rows == 9600 and len(src.paths) == 3
    ds = pds.dataset("bkt/raw", filesystem=fs, format="parquet")
    src2 = open_source(ds)
    assert src2.num_rows == 9600  # was None before: no progress total, no seek on resume
    got = pa.Table.from_batches(list(src2.batches(start_row=2999)))
    want = pa.concat_tables([raw_table(n, i) for i, n in enumerate([3000, 4100, 2500])]).slice(2999)
    assert got.equals(want)
    glob = open_source(s3.uri("bkt/raw/f[12].parquet"))
    assert glob.num_rows == 6600


def test_failed_remote_release_leaves_nothing(s3, raw_files):
    fs = s3.filesystem()
    t = raw_table(5000, 3)
    c = t["c"].to_numpy().copy()
    c[4500] = np.nan  # found after several batches were written to the output stream
    pq.write_table(t.set_column(2, "c", pa.array(c)), "bkt/bad/in.parquet", filesystem=fs)
    with pytest.raises(InvalidInputError, match="non-finite"):
        release(s3.uri("bkt/bad/in.parquet"), s3.uri("bkt/badout/rel.parquet"), spec(), FEATURES,
                "y", seed=1, record_batch_rows=1000)
    assert s3.keys("bkt/badout") == []
    # the same for a multi-part release: no part, no manifest
    with pytest.raises(InvalidInputError, match="non-finite"):
        release(s3.uri("bkt/bad/"), s3.uri("bkt/badparts/"), spec(), FEATURES, "y", seed=1,
                record_batch_rows=1000)
    assert s3.keys("bkt/badparts") == []


def test_multipart_release_on_s3_reads_as_one_release(s3, raw_files, tmp_path, capsys):
    args = ["--features", *FEATURES, "--ranges", "a=-1:1", "b=-1:1", "c=0:5", "--epsilon-x", "2",
            "--epsilon-y", "1", "--bound", "1.5", "--seed", "11", "--no-progress"]
    assert main(["release", s3.uri("bkt/raw/"), s3.uri("bkt/parts/"), *args]) == 0
    assert "in 3 parts" in capsys.readouterr().out
    assert main(["release", str(raw_files), str(tmp_path / "parts") + "/", *args]) == 0
    keys = s3.keys("bkt/parts")
    assert keys == ["bkt/parts/_iwpfast_manifest.json"] + [
        f"bkt/parts/part-00000{i}.parquet" for i in range(3)]
    remote, local = open_source(s3.uri("bkt/parts")), open_source(tmp_path / "parts")
    assert remote.num_rows == local.num_rows == 9600
    assert remote.release_metadata == local.release_metadata
    assert "part" not in remote.release_metadata
    a = pa.Table.from_batches(list(remote.batches()))
    b = pa.Table.from_batches(list(local.batches()))
    assert a.equals(b)
    # iwpfast info on the prefix
    assert main(["info", s3.uri("bkt/parts")]) == 0
    assert "in 3 part(s)" in capsys.readouterr().out
    assert main(["info", s3.uri("bkt/parts/part-000001.parquet")]) == 0
    assert "rows:          4,100" in capsys.readouterr().out


def test_fit_from_s3_equals_fit_from_local_and_models_and_checkpoints_on_s3(s3, raw_files, tmp_path):
    release(raw_files, str(tmp_path / "parts") + "/", spec(), FEATURES, "y", seed=5)
    release(raw_files, s3.uri("bkt/fitparts/"), spec(), FEATURES, "y", seed=5)
    kw = dict(alpha=1.0, learning_rate=0.01, batch_size=32, average="tail", variance_cap=2.0)
    local = iwpfast.IWPClassifier(**kw).fit(tmp_path / "parts")
    remote = iwpfast.IWPClassifier(**kw).fit(s3.uri("bkt/fitparts"),
                                             checkpoint=s3.uri("bkt/ckpt/fit.ckpt"),
                                             checkpoint_every=4000)
    np.testing.assert_array_equal(local.coef_, remote.coef_)
    assert local.n_rows_seen_ == remote.n_rows_seen_ == 9600
    # served: removed once the fit succeeded (issue 47), on the store as on a disk
    assert "bkt/ckpt/fit.ckpt" not in s3.keys("bkt/ckpt")
    remote.save(s3.uri("bkt/models/m.json"))
    back = iwpfast.load(s3.uri("bkt/models/m.json"))
    np.testing.assert_array_equal(back.coef_, remote.coef_)
    assert s3.keys("bkt/models") == ["bkt/models/m.json"]
    with pytest.raises(InvalidInputError, match="exists already"):
        remote.save(s3.uri("bkt/models/m.json"))
    remote.save("bkt/models/m.json", filesystem=s3.filesystem(), overwrite=True)
    back = iwpfast.load("bkt/models/m.json", filesystem=s3.filesystem())
    np.testing.assert_array_equal(back.coef_, remote.coef_)


def test_fsspec_filesystems_and_urls(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    mem = fsspec.filesystem("memory")
    t = raw_table(2000, 9)
    with mem.open("/iwp/raw.parquet", "wb") as fh:
        pq.write_table(t, fh)
    out = release("memory://iwp/raw.parquet", "memory://iwp/rel.parquet", spec(), FEATURES, "y",
                  seed=2)
    assert out.rows_written == 2000
    src = open_source("/iwp/rel.parquet", filesystem=mem)
    assert src.num_rows == 2000 and src.release_metadata["features"] == FEATURES
    assert [p for p in mem.ls("/iwp", detail=False) if "tmp" in p] == []
    pq.write_table(t, tmp_path / "raw.parquet")
    local = release(tmp_path / "raw.parquet", tmp_path / "rel.parquet", spec(), FEATURES, "y", seed=2)
    assert local.rows_written == 2000
    assert pq.read_table(tmp_path / "rel.parquet").equals(
        pa.Table.from_batches(list(src.batches())))
    # file:// URIs are the local disk
    assert open_source("file://" + str(tmp_path / "rel.parquet")).num_rows == 2000


def test_mismatched_parts_are_refused_naming_the_part(tmp_path, raw_files):
    release(raw_files, str(tmp_path / "r1") + "/", spec(), FEATURES, "y", seed=1)
    release(raw_files, str(tmp_path / "r2") + "/", spec(), FEATURES, "y", seed=2)
    other = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.5, epsilon_y=1.0,
                        ranges="a=-1:1,b=-1:1,c=0:5")
    release(raw_files, str(tmp_path / "r3") + "/", other, FEATURES, "y", seed=3)
    p1 = tmp_path / "r1" / "part-000000.parquet"
    p2 = tmp_path / "r2" / "part-000001.parquet"
    p3 = tmp_path / "r3" / "part-000001.parquet"
    with pytest.raises(ReleaseSpecError, match="part-000001.parquet.*another release"):
        open_source([p1, p2])
    with pytest.raises(ReleaseSpecError, match="part-000001.parquet.*other release metadata"):
        open_source([p1, p3])
    # a folder of parts without its manifest is an unpublished release
    (tmp_path / "r1" / "_iwpfast_manifest.json").unlink()
    with pytest.raises(ReleaseSpecError, match="no _iwpfast_manifest.json"):
        open_source(tmp_path / "r1")
    doc = write_manifest(tmp_path / "r1")
    assert doc["row_count"] == 9600 and open_source(tmp_path / "r1").num_rows == 9600
    # a missing part named by the manifest
    (tmp_path / "r2" / "part-000002.parquet").unlink()
    with pytest.raises(ReleaseSpecError, match="part 2 .*missing"):
        open_source(tmp_path / "r2")
    # the manifest is JSON a person can read
    doc = json.loads((tmp_path / "r3" / "_iwpfast_manifest.json").read_text())
    assert [p["rows"] for p in doc["parts"]] == [3000, 4100, 2500]


def test_parts_that_saw_other_label_values_are_refused(tmp_path):
    r = np.random.default_rng(5)
    raw = tmp_path / "raw"
    raw.mkdir()
    x = {c: r.uniform(-1, 1, 500) for c in ("a", "b")}
    pq.write_table(pa.table({**x, "c": r.uniform(0, 5, 500), "y": r.integers(0, 2, 500)}),
                   raw / "f0.parquet")
    pq.write_table(pa.table({**x, "c": r.uniform(0, 5, 500), "y": 2 * r.integers(0, 2, 500) - 1}),
                   raw / "f1.parquet")
    with pytest.raises(ReleaseSpecError, match="f1.parquet|part-000001.parquet"):
        release(raw, str(tmp_path / "out") + "/", spec(), FEATURES, "y", seed=1)
    assert not (tmp_path / "out" / "_iwpfast_manifest.json").exists()


def test_credentials_in_a_uri_are_not_shown(s3, raw_files):
    uri = s3.uri("bkt/raw/f0.parquet").replace("s3://", "s3://testing:testing@")
    src = open_source(uri)
    assert src.num_rows == 3000
    assert "testing" not in src.description and "testing" not in repr(src)


def test_estimator_methods_take_filesystem_and_equal_the_local_files(s3, raw_files, tmp_path):
    """fit / partial_fit / predict / predict_proba / score / risk / private_risk with
    ``filesystem=S3FileSystem`` and bucket paths give bit for bit what the local files give."""
    fs = s3.filesystem()
    release(raw_files, str(tmp_path / "parts") + "/", spec(), FEATURES, "y", seed=9)
    release(raw_files, s3.uri("bkt/fsparts/"), spec(), FEATURES, "y", seed=9)
    kw = dict(loss="logistic", alpha=1.0, learning_rate=0.01, batch_size=32, average="tail",
              variance_cap=2.0)
    local = iwpfast.IWPClassifier(**kw).fit(tmp_path / "parts")
    remote = iwpfast.IWPClassifier(**kw).fit("bkt/fsparts", filesystem=fs)
    np.testing.assert_array_equal(local.coef_, remote.coef_)
    assert local.intercept_ == remote.intercept_ and remote.n_rows_seen_ == 9600
    # partial_fit over the parts one by one (paths on the store) ends at the same model as
    # the same calls on the local parts
    parts = sorted(p.name for p in (tmp_path / "parts").glob("part-*.parquet"))
    lp = iwpfast.IWPClassifier(**kw)
    rp = iwpfast.IWPClassifier(**kw)
    for name in parts:
        lp.partial_fit(tmp_path / "parts" / name, n_rows_total=9600)
        rp.partial_fit(f"bkt/fsparts/{name}", n_rows_total=9600, filesystem=fs)
    np.testing.assert_array_equal(lp.finalize().coef_, rp.finalize().coef_)
    # prediction and evaluation on raw (clean) files: a local path vs the bucket path
    raw_local, raw_remote = raw_files / "f1.parquet", "bkt/raw/f1.parquet"
    np.testing.assert_array_equal(remote.predict(raw_local), remote.predict(raw_remote, filesystem=fs))
    np.testing.assert_array_equal(remote.predict_proba(raw_local),
                                  remote.predict_proba(raw_remote, filesystem=fs))
    assert remote.predict(raw_remote, filesystem=fs).shape == (4100,)
    assert remote.score(raw_local) == remote.score(raw_remote, filesystem=fs)
    assert remote.risk(raw_local) == remote.risk(raw_remote, filesystem=fs)
    # private validation on the private release itself
    a = remote.private_risk(tmp_path / "parts")
    b = remote.private_risk("bkt/fsparts/", filesystem=fs)
    assert (a.risk, a.stderr, a.n_rows) == (b.risk, b.stderr, b.n_rows) and b.n_rows == 9600
    # and a regressor's predict through the same argument
    reg = iwpfast.IWPRegressor(alpha=1.0, learning_rate=0.01, batch_size=32).fit(
        "bkt/raw/", filesystem=fs, features=FEATURES, label="y")
    ref = iwpfast.IWPRegressor(alpha=1.0, learning_rate=0.01, batch_size=32).fit(
        raw_files, features=FEATURES, label="y")
    np.testing.assert_array_equal(reg.coef_, ref.coef_)
    np.testing.assert_array_equal(reg.predict(raw_remote, filesystem=fs), ref.predict(raw_local))



def test_fit_validation_path_lies_on_the_same_filesystem(s3, raw_files, tmp_path):
    """fit(X, validation=path, filesystem=fs): both paths on the store, as the local fit."""
    fs = s3.filesystem()
    for dest in (str(tmp_path / "val.parquet"), s3.uri("bkt/val.parquet")):
        release(raw_files / "f2.parquet", dest, spec(), FEATURES, "y", seed=21)
    release(raw_files / "f1.parquet", s3.uri("bkt/train.parquet"), spec(), FEATURES, "y", seed=22)
    release(raw_files / "f1.parquet", tmp_path / "train.parquet", spec(), FEATURES, "y", seed=22)
    # the exponential loss: the logistic's truncation choice at this noise costs a minute and is
    # not what this checks
    kw = dict(loss="exponential", alpha="auto", learning_rate=0.01, batch_size=32)
    local = iwpfast.IWPClassifier(**kw).fit(tmp_path / "train.parquet",
                                            validation=tmp_path / "val.parquet")
    remote = iwpfast.IWPClassifier(**kw).fit("bkt/train.parquet", validation="bkt/val.parquet",
                                             filesystem=fs)
    assert remote.alpha_ == local.alpha_
    np.testing.assert_array_equal(local.coef_, remote.coef_)


def test_filesystem_with_in_memory_data_is_refused_naming_it(s3):
    fs = s3.filesystem()
    X = raw_table(200, 4)
    Xa = np.column_stack([X[f].to_numpy() for f in FEATURES])
    y = X["y"].to_numpy()
    model = iwpfast.IWPClassifier(loss="logistic", alpha=1.0, learning_rate=0.05)
    with pytest.raises(InvalidInputError, match=r"filesystem= applies to paths, but X is a ndarray"):
        model.fit(Xa, y, filesystem=fs)
    with pytest.raises(InvalidInputError, match=r"filesystem= applies to paths, but X is a Table"):
        model.fit(X, features=FEATURES, label="y", filesystem=fs)
    model.fit(Xa, y)
    for call in (model.predict, model.predict_proba, model.decision_function):
        with pytest.raises(InvalidInputError, match="filesystem="):
            call(Xa, filesystem=fs)
    for call in (model.score, model.risk, model.private_risk):
        with pytest.raises(InvalidInputError, match="filesystem="):
            call(Xa, y, filesystem=fs)
    with pytest.raises(InvalidInputError, match="filesystem="):
        iwpfast.IWPClassifier(alpha=1.0, learning_rate=0.05).partial_fit(Xa, y, filesystem=fs)


def test_a_release_of_many_parts_on_s3_opens_with_concurrent_metadata(s3, tmp_path):
    """60 parts of 120 rows (whole row groups), released locally and copied to the S3 server,
    read back as one release equal to the local one; a missing part is named.  The footers are
    read through a bounded pool and the parts checked against one listing (bench/many_parts.py
    times it)."""
    import pyarrow.fs as pafs

    from iwpfast.privacy.multipart import release_parts

    r = np.random.default_rng(3)
    n = 60 * 120
    t = pa.table({"a": r.uniform(-1, 1, n), "b": r.uniform(-1, 1, n), "c": r.uniform(0, 5, n),
                  "y": r.integers(0, 2, n)})
    pq.write_table(t, tmp_path / "big.parquet", row_group_size=120)
    res = release_parts(tmp_path / "big.parquet", str(tmp_path / "many") + "/", spec(),
                        features=FEATURES, label="y", seed=2, max_part_rows=120)
    assert len(res.parts) == 60 and res.rows_written == n
    pafs.copy_files(str(tmp_path / "many"), "bkt/many", source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=s3.filesystem())
    remote, local = open_source(s3.uri("bkt/many")), open_source(tmp_path / "many")
    assert remote.num_rows == local.num_rows == n and len(remote.paths) == 60
    assert pa.Table.from_batches(list(remote.batches())).equals(
        pa.Table.from_batches(list(local.batches())))
    s3.filesystem().delete_file("bkt/many/part-000041.parquet")
    with pytest.raises(ReleaseSpecError, match="part 41 .*missing"):
        open_source(s3.uri("bkt/many"))


def test_a_published_release_opens_with_one_footer_and_checks_each_part_when_read(tmp_path,
                                                                                  raw_files):
    """open_source of a published release reads the manifest and part 0's footer only (the
    manifest holds every part's rows and the release's metadata); a part changed after
    publishing is refused, named, when it is read."""
    import shutil

    release(raw_files, str(tmp_path / "r1") + "/", spec(), FEATURES, "y", seed=1)
    release(raw_files, str(tmp_path / "r2") + "/", spec(), FEATURES, "y", seed=2)
    src = open_source(tmp_path / "r1")
    assert src.num_rows == 9600 and src.release_metadata["row_count"] == 9600
    assert [f is not None for f in src.files._files] == [True, False, False]
    assert sum(b.num_rows for b in src.batches()) == 9600
    assert [f is not None for f in src.files._files] == [True, True, True]
    shutil.copy(tmp_path / "r2" / "part-000002.parquet", tmp_path / "r1" / "part-000002.parquet")
    src = open_source(tmp_path / "r1")            # opens: the changed part is not read yet
    with pytest.raises(ReleaseSpecError, match="part-000002.parquet.*another release"):
        list(src.batches())
