"""iwpfast.spark with a real pyspark in local[2] (the slow suite: `python -m pytest -m slow
tests/test_spark.py`, with `pip install iwpfast[spark]` and Java 17): release_dataframe rerun with
and without overwrite, its parts' row groups, fit_dataframe against one machine's fit."""
import hashlib

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


def test_fit_dataframe_with_auto_is_one_machines_fit(spark, tmp_path):
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
