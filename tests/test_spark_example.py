"""examples/spark_release.py: the per-partition function on its own, and the Spark job when
pyspark is installed."""
import importlib.util
import pathlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iwpfast import ReleaseSpec
from iwpfast.io import open_source
from iwpfast.io.parts import write_manifest

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "spark_release.py"


def load_example():
    spec = importlib.util.spec_from_file_location("spark_release", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def spec():
    return ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=3 ** 0.5, epsilon_y=1.0, features=("a", "b", "c"),
                       ranges="a=-1:1,b=-1:1,c=-1:1", label="y")


def test_partition_function_writes_parts_read_as_one_release(tmp_path):
    ex = load_example()
    r = np.random.default_rng(0)
    n = 5000
    table = pa.table({"a": r.uniform(-1, 1, n), "b": r.uniform(-1, 1, n),
                      "c": r.uniform(-1, 1, n), "y": r.integers(0, 2, n)})
    # three partitions as mapInArrow hands them out (batches), one of them empty
    partitions = [table.slice(0, 3000).to_batches(max_chunksize=1000), [],
                  table.slice(3000).to_batches(max_chunksize=700)]
    out = tmp_path / "rel"
    out.mkdir()
    summaries = []
    for index, batches in enumerate(partitions):
        summaries += list(ex.release_partition(index, iter(batches), str(out), spec(), "rid0",
                                               table.schema, seed=4))
    assert [s.to_pydict()["rows"] for s in summaries] == [[3000], [0], [2000]]
    with pytest.raises(Exception, match="manifest"):  # not published before the manifest
        open_source(out)
    manifest = write_manifest(out)
    assert manifest["row_count"] == n and manifest["release_id"] == "rid0"
    src = open_source(out)
    assert src.num_rows == n
    assert src.release_metadata["features"] == ["a", "b", "c"]
    assert src.release_metadata["label_keep_prob"] == pytest.approx(1 / (1 + np.exp(-1.0)))
    assert pq.read_table(out / "part-000001.parquet").num_rows == 0
    # a retried partition replaces its part: same seed, same bits
    before = pq.read_table(out / "part-000002.parquet")
    list(ex.release_partition(2, iter(partitions[2]), str(out), spec(), "rid0", table.schema,
                              seed=4))
    assert pq.read_table(out / "part-000002.parquet").equals(before)


@pytest.mark.slow
def test_spark_job(tmp_path):
    # slow: starts a Spark session (tests/test_spark.py has the API's tests)
    pytest.importorskip("pyspark")
    ex = load_example()
    out = str(tmp_path / "spark") + "/"
    ex.main(["--output", out, "--rows", "20000", "--partitions", "2", "--seed", "1"])
    src = open_source(out)
    assert src.num_rows == 20000 and src.release_metadata["features"] == ["a", "b", "c"]
