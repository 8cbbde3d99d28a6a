"""The release keeps its promise at its edges (issue 19): nothing in the metadata or the layout is a
function of the raw values except through the mechanism; no second noisy copy after a fault; no
self-overwrite; no printed secrets; the smaller defects.  Each test failed on the code before."""
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iwpfast.exceptions import InvalidInputError, ReleaseSpecError
from iwpfast.privacy import ReleaseSpec, release
from iwpfast.privacy.spec import METADATA_KEY


def _spec(**kw):
    base = dict(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=("a",),
                ranges={"a": (0, 1)}, label="y")
    base.update(kw)
    return ReleaseSpec(**base)


def _meta(path) -> dict:
    return json.loads(pq.read_schema(path).metadata[METADATA_KEY.encode()])


# ------------------------------------------------------------------ metadata from raw labels
@pytest.mark.parametrize("declared", [None, (-1, 1)])
def test_one_row_files_record_the_same_label_classes_whatever_the_label(tmp_path, declared):
    # one row with y = 1, 0 or -1: the metadata (label_classes included) must not tell which
    metas = []
    for y in (1, 0, -1):
        if declared is not None and y == 0:
            continue                           # 0 is not a declared class there
        src = tmp_path / f"y{y}.parquet"
        pq.write_table(pa.table({"a": [0.5], "y": [y]}), src)
        out = tmp_path / f"out{y}.parquet"
        release(src, out, _spec(classes=declared), on_invalid="error")
        meta = _meta(out)
        metas.append({k: v for k, v in meta.items() if k != "library_version"})
    assert all(m == metas[0] for m in metas), metas
    assert metas[0]["label_classes"] == ([0, 1] if declared is None else [-1, 1])


def test_parts_record_the_declared_rule_not_their_labels(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for i, y in enumerate((1, 0)):
        pq.write_table(pa.table({"a": [0.25, 0.75], "y": [y, y]}), raw / f"f{i}.parquet")
    release(raw, str(tmp_path / "out") + "/", _spec())
    metas = [_meta(p) for p in sorted((tmp_path / "out").glob("part-*.parquet"))]
    assert [m["label_classes"] for m in metas] == [[0, 1], [0, 1]]


def test_pm1_labels_without_declared_classes_warn_the_data_holder(tmp_path):
    src = tmp_path / "pm1.parquet"
    pq.write_table(pa.table({"a": [0.1, 0.9], "y": [-1, 1]}), src)
    with pytest.warns(UserWarning, match="fixed rule.*--classes -1 1"):
        release(src, tmp_path / "o.parquet", _spec())


# ------------------------------------------------------------------ layout from dropped rows
@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_dropped_rows_do_not_shape_the_row_groups(tmp_path, suffix):
    r = np.random.default_rng(0)
    a = r.uniform(0, 1, 5000)
    a[[10, 11, 1500, 4999]] = np.nan            # dropped: two in the first batch, one in the second
    src = tmp_path / "raw.parquet"
    pq.write_table(pa.table({"a": a, "y": r.integers(0, 2, 5000)}), src, row_group_size=1000)
    out = tmp_path / f"out{suffix}"
    res = release(src, out, _spec(), on_invalid="drop", record_batch_rows=1000)
    assert res.rows_written == 4996
    if suffix == ".parquet":
        meta = pq.ParquetFile(out).metadata
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    else:
        import pyarrow.ipc as ipc

        with pa.memory_map(str(out)) as mm:
            reader = ipc.open_file(mm)
            sizes = [reader.get_batch(i).num_rows for i in range(reader.num_record_batches)]
    # cut by the count written only: 1000-row groups and the rest last
    assert sizes == [1000, 1000, 1000, 1000, 996]
