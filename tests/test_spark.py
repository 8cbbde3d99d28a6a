"""iwpfast.spark with a real pyspark in local[2] (the slow suite: `python -m pytest -m slow
tests/test_spark.py`, with `pip install iwpfast[spark]` and Java 17): release_dataframe rerun with
and without overwrite, its parts' row groups, fit_dataframe against one machine's fit."""
import hashlib
import os

import numpy as np
import pyarrow.parquet as pq
import pytest

import iwpfast
from iwpfast.exceptions import InvalidInputError
from iwpfast.io import open_source

# slow: deselected by default; the imports are checked inside the fixture so that the default run
# deselects these tests instead of reporting them skipped
pytestmark = pytest.mark.slow

FEATURES = ["a", "b", "c"]


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("iwpfast-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    yield session
    session.stop()


def spec():
    return iwpfast.ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=3 ** 0.5, epsilon_y=1.0,
                               ranges="a=-1:1,b=-1:1,c=-1:1")


def frame(spark, n, partitions, seed=0):
    r = np.random.default_rng(seed)
    x = r.uniform(-1, 1, (n, 3))
    y = (x @ np.array([1.0, -0.5, 0.25]) + 0.3 * r.standard_normal(n) > 0).astype("int64")
    import pandas as pd

    pdf = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "y": y})
    return spark.createDataFrame(pdf).repartition(partitions)


def digests(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_release_dataframe_refuses_a_rerun_and_overwrite_replaces_it_whole(spark, tmp_path):
    from iwpfast.spark import release_dataframe

    out = tmp_path / "rel"
    m = release_dataframe(frame(spark, 30000, 3), str(out) + "/", spec(), features=FEATURES,
                          label="y", seed=1)
    assert m["row_count"] == 30000 and len(m["parts"]) == 3
    # one row group per part of 10^4 rows (Spark's Arrow batches are gathered, not 10^4 groups)
    assert [pq.read_metadata(out / f"part-00000{i}.parquet").num_row_groups
            for i in range(3)] == [1, 1, 1]
    before = digests(out)
    with pytest.raises(InvalidInputError, match="already holds a release"):
        release_dataframe(frame(spark, 500, 2), str(out) + "/", spec(), features=FEATURES,
                          label="y")
    assert digests(out) == before and open_source(out).num_rows == 30000   # left readable
    m2 = release_dataframe(frame(spark, 800, 2, seed=1), str(out) + "/", spec(),
                           features=FEATURES, label="y", overwrite=True)
    assert m2["row_count"] == 800 and m2["release_id"] != m["release_id"]
    assert sorted(p.name for p in out.iterdir()) == [
        "_iwpfast_manifest.json", "part-000000.parquet", "part-000001.parquet"]
    src = open_source(out)
    assert src.num_rows == 800 and src.release_metadata["features"] == FEATURES


def test_fit_dataframe_with_auto_is_one_machines_fit(spark, tmp_path, single_holdout):
    # Spark's pass uses the one hold-out; so does one machine here (its default cross-validates
    # data this small, sgd/crossval.py)
    from iwpfast.spark import fit_dataframe, release_dataframe

    out = str(tmp_path / "rel") + "/"
    release_dataframe(frame(spark, 40000, 2), out, spec(), features=FEATURES, label="y", seed=2)
    one = iwpfast.IWPClassifier().fit(out)
    got = fit_dataframe(spark.read.parquet(out), iwpfast.IWPClassifier())
    assert got.telemetry_["shards"] == 2 and got.n_rows_seen_ == one.n_rows_seen_
    assert got.tuning_["n_validation"] == one.tuning_["n_validation"] > 0
    assert got.tuning_["variance_cap"] == one.tuning_["variance_cap"] == 2.0
    r_one, r_got = one.private_risk(out), got.private_risk(out)
    # within 3 standard errors of the difference (taken as independent: a loose bound)
    assert abs(r_got.risk - r_one.risk) <= 3.0 * float(np.hypot(r_one.stderr, r_got.stderr))
    # fixed values, 2 rounds: every row once
    fixed = fit_dataframe(spark.read.parquet(out),
                          iwpfast.IWPClassifier(alpha=1.0, learning_rate=0.005, average="tail"),
                          rounds=2)
    assert fixed.n_rows_seen_ == 40000 and fixed.telemetry_["rounds"] == 2


# ------------------------------------------------------------------ resume and progress
def failing_frame(spark, n, partitions, flag, fail_part):
    """frame(), whose partition ``fail_part`` fails while the file ``flag`` exists: the job dies
    after some parts are written (a kill of a task that Spark does not retry in local mode)."""
    base = frame(spark, n, partitions)

    def maybe_fail(batches):
        from pyspark import TaskContext

        if TaskContext.get().partitionId() == fail_part and os.path.exists(flag):
            raise RuntimeError("killed for the test")
        yield from batches

    return base.mapInArrow(maybe_fail, base.schema)


def test_a_killed_resumable_release_resumes_keeping_its_parts_and_publishing_each_row_once(
        spark, tmp_path):
    from iwpfast.spark import release_dataframe

    out = str(tmp_path / "rel") + "/"
    flag = str(tmp_path / "fail")
    open(flag, "w").close()
    n, parts = 24000, 6
    df = failing_frame(spark, n, parts, flag, fail_part=4)
    with pytest.raises(Exception, match="killed for the test"):
        release_dataframe(df, out, spec(), features=FEATURES, label="y", resume=True)
    names = sorted(os.listdir(out))
    kept = [x for x in names if x.startswith("part-")]
    assert len(kept) >= 2        # two task slots: two partitions ended before partition 4 began
    assert "_iwpfast_manifest.json" not in names and "part-000004.parquet" not in names
    assert "_iwpfast_plan.json" in names
    before = {k: v for k, v in digests(tmp_path / "rel").items() if k in kept}
    # unpublished: the folder is refused by readers, and a run without resume refuses it
    with pytest.raises(Exception, match="resume"):
        open_source(out)
    with pytest.raises(InvalidInputError, match="another release run"):
        release_dataframe(df, out, spec(), features=FEATURES, label="y")
    os.remove(flag)
    m = release_dataframe(df, out, spec(), features=FEATURES, label="y", resume=True)
    after = digests(tmp_path / "rel")
    # the kept parts published as they were written (bytes unchanged), the rest released now
    assert {k: after[k] for k in kept} == before
    assert m["row_count"] == n and len(m["parts"]) == parts
    assert sorted(os.listdir(out)) == ["_iwpfast_manifest.json"] + [
        f"part-{i:06d}.parquet" for i in range(parts)]          # plan and digests removed
    # each raw row published once: every part holds exactly its partition's rows (the raw
    # labels' counts per partition against the released parts' row counts, and the total)
    rows = partition_sizes(df)
    assert [p["rows"] for p in sorted(m["parts"], key=lambda p: p["index"])] == rows
    assert open_source(out).num_rows == n


def partition_sizes(df):
    """The rows of each partition of ``df``, in partition order (a nested function: the Python
    workers cannot import this test module)."""
    import pyarrow as pa

    def count(batches):
        from pyspark import TaskContext

        yield pa.RecordBatch.from_pydict({"part": [TaskContext.get().partitionId()],
                                          "rows": [sum(b.num_rows for b in batches)]})

    rows = df.mapInArrow(count, "part long, rows long").collect()
    return [int(r["rows"]) for r in sorted(rows, key=lambda r: r["part"])]


def test_a_resume_on_other_partitions_is_refused_and_publishes_nothing(spark, tmp_path):
    from iwpfast.spark import release_dataframe

    out = str(tmp_path / "rel") + "/"
    flag = str(tmp_path / "fail")
    open(flag, "w").close()
    df = failing_frame(spark, 12000, 4, flag, fail_part=3)
    with pytest.raises(Exception, match="killed for the test"):
        release_dataframe(df, out, spec(), features=FEATURES, label="y", resume=True)
    kept = sorted(x for x in os.listdir(out) if x.startswith("part-"))
    if not kept:            # the failing task ended the job before any other part was written
        pytest.fail("no part was kept: the test needs a part written before the failure")
    def published(folder):   # (a cancelled task may leave its owner-only staging file behind)
        return {k: v for k, v in digests(folder).items() if not k.endswith(".tmp")}

    before = published(tmp_path / "rel")
    os.remove(flag)
    # the same rows dealt to the partitions another way (another row order before the
    # round-robin): a kept part's rows are now partly in parts this run would write
    other = frame(spark, 12000, 1).orderBy("b").repartition(4)
    with pytest.raises(InvalidInputError, match="hold other rows than the parts kept"):
        release_dataframe(other, out, spec(), features=FEATURES, label="y", resume=True)
    assert digests(tmp_path / "rel") == before       # this run's parts deleted, kept ones kept
    assert not any(k.endswith(".tmp") for k in os.listdir(out))
    assert "_iwpfast_manifest.json" not in os.listdir(out)


def test_release_and_fit_log_the_rows_of_each_finished_partition(spark, tmp_path, caplog,
                                                                   monkeypatch):
    import logging

    import iwpfast.progress
    from iwpfast.spark import fit_dataframe, release_dataframe

    monkeypatch.setattr(iwpfast.progress, "LOG_INTERVAL_S", 0.0)
    df = frame(spark, 20000, 4)
    sizes = partition_sizes(df)
    sums = {sum(s for s, keep in zip(sizes, mask, strict=True) if keep)
            for mask in np.ndindex(*([2] * len(sizes)))}   # rows of any set of finished partitions
    out = str(tmp_path / "rel") + "/"
    with caplog.at_level(logging.INFO, logger="iwpfast"):
        release_dataframe(df, out, spec(), features=FEATURES, label="y", progress="log")
    lines = [r.getMessage() for r in caplog.records if r.name == "iwpfast.progress"]
    counts = [int(x.split(": ", 1)[1].split(" ")[0].replace(",", "")) for x in lines]
    assert counts and counts[-1] == 20000 and "done in" in lines[-1]
    assert set(counts) <= sums and counts == sorted(counts)
    assert any(r.name == "iwpfast" and "released 20,000 rows in 4 parts" in r.getMessage()
               for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="iwpfast"):
        fit_dataframe(spark.read.parquet(out), iwpfast.IWPClassifier(
            alpha=1.0, learning_rate=0.005, average="tail", progress="log"))
    lines = [r.getMessage() for r in caplog.records if r.name == "iwpfast.progress"]
    assert lines and "20,000 rows of 20,000" in lines[-1]


def test_fit_dataframe_with_solver_moments_is_one_machines_fit(spark, tmp_path):
    # each partition's fold moments on its executor, added: the statistics differ from one
    # machine's only by the order of float additions, so the same alpha and the model to 1e-9
    from iwpfast.spark import fit_dataframe, release_dataframe

    out = str(tmp_path / "rel") + "/"
    release_dataframe(frame(spark, 40000, 3), out, spec(), features=FEATURES, label="y", seed=4)
    kw = dict(solver="moments", loss="quadratic", progress=False)
    one = iwpfast.IWPClassifier(**kw).fit(out)
    got = fit_dataframe(spark.read.parquet(out), iwpfast.IWPClassifier(**kw))
    assert got.solver_ == "moments" and got.n_rows_seen_ == one.n_rows_seen_ == 40000
    assert got.alpha_ == one.alpha_
    np.testing.assert_allclose(got.coef_, one.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.intercept_, one.intercept_, rtol=1e-9, atol=1e-12)
