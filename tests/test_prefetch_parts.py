"""Parts of a release on an object store read ahead (``FileSource._gen_ahead``): the same batches
and models as read one after the other, memory bounded to REMOTE_PREFETCH_PARTS parts of at most
REMOTE_PREFETCH_BYTES (bench/s3_parts_fit.py times it)."""
import time
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from s3_server import s3_server

import iwpfast
import iwpfast.io.format_readers as format_readers
import iwpfast.io.sources as sources
from iwpfast.exceptions import ReleaseSpecError
from iwpfast.io import open_source
from iwpfast.privacy.multipart import release_parts

PARTS, ROWS = 12, 400
FIT = dict(alpha=1.0, learning_rate=0.01, variance_cap=2.0, progress=False)


@pytest.fixture(scope="module")
def s3_release(tmp_path_factory):
    """A 12-part release written locally and copied to the S3 server (the test process's thread)."""
    folder = tmp_path_factory.mktemp("ahead")
    r = np.random.default_rng(4)
    n = PARTS * ROWS
    pq.write_table(pa.table({"a": r.uniform(-1, 1, n), "b": r.uniform(-1, 1, n),
                             "y": r.integers(0, 2, n)}), folder / "raw.parquet",
                   row_group_size=ROWS // 2)
    spec = iwpfast.ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                               ranges="a=-1:1,b=-1:1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # the seeded-release warning
        release_parts(folder / "raw.parquet", str(folder / "rel") + "/", spec, features=["a", "b"],
                      label="y", seed=2, max_part_rows=ROWS)
    with s3_server() as s3:
        fs = s3.filesystem()
        fs.create_dir("bkt")
        pafs.copy_files(str(folder / "rel"), "bkt/rel", source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=fs)
        yield s3, folder / "rel"


def test_read_ahead_gives_the_batches_and_models_of_one_after_the_other(s3_release, monkeypatch):
    s3, local = s3_release
    uri = s3.uri("bkt/rel")
    expected = list(open_source(local).located_batches())
    model = iwpfast.IWPClassifier(**FIT).fit(str(local)).coef_
    for ahead in (0, 1, 4):
        monkeypatch.setattr(sources, "REMOTE_PREFETCH_PARTS", ahead)
        got = list(open_source(uri).located_batches(start_row=0))
        assert [o.global_row for o, _ in got] == [o.global_row for o, _ in expected]
        assert [o.row_group for o, _ in got] == [o.row_group for o, _ in expected]
        assert all(a.equals(b) for (_, a), (_, b) in zip(got, expected, strict=True))
        np.testing.assert_array_equal(iwpfast.IWPClassifier(**FIT).fit(uri).coef_, model)
    # a start inside a part (a resumed pass) reads from that row
    monkeypatch.setattr(sources, "REMOTE_PREFETCH_PARTS", 4)
    tail = list(open_source(uri).batches(start_row=5 * ROWS + 7))
    assert sum(b.num_rows for b in tail) == PARTS * ROWS - 5 * ROWS - 7
    assert tail[0].equals(pa.Table.from_batches(list(open_source(local).batches()))
                          .slice(5 * ROWS + 7, tail[0].num_rows).to_batches()[0])


def test_read_ahead_holds_at_most_its_parts(s3_release, monkeypatch):
    """With a consumer slower than the store, at most REMOTE_PREFETCH_PARTS parts are read and
    not yet handed out; pyarrow's allocated memory stays within that many parts."""
    s3, _ = s3_release
    monkeypatch.setattr(sources, "REMOTE_PREFETCH_PARTS", 3)
    loaded: list[int] = []
    whole = format_readers._ParquetFile.read_whole

    def counted(self, file_index, *args):
        out = whole(self, file_index, *args)
        loaded.append(file_index)
        return out

    monkeypatch.setattr(format_readers._ParquetFile, "read_whole", counted)
    src = open_source(s3.uri("bkt/rel"))
    part_bytes = None
    ahead, peak, base = [], 0, pa.total_allocated_bytes()
    for origin, batch in src.located_batches():
        time.sleep(0.02)               # the kernel's turn: the pool runs ahead meanwhile
        ahead.append(max(loaded) - origin.file_index)
        peak = max(peak, pa.total_allocated_bytes() - base)
        part_bytes = part_bytes or batch.nbytes * 2
    assert sorted(loaded) == list(range(PARTS))
    assert max(ahead) <= 3 and max(ahead) >= 2           # it did read ahead, and no further
    assert peak <= (3 + 2) * part_bytes * 2              # the parts ahead, the current, slack

    # a part larger than REMOTE_PREFETCH_BYTES is only opened ahead, then read as before
    monkeypatch.setattr(sources, "REMOTE_PREFETCH_BYTES", 1)
    loaded.clear()
    assert sum(b.num_rows for b in open_source(s3.uri("bkt/rel")).batches()) == PARTS * ROWS
    assert loaded == []


def test_a_bad_part_read_ahead_is_named_when_its_turn_comes(s3_release, tmp_path):
    s3, local = s3_release
    fs = s3.filesystem()
    pafs.copy_files(str(local), "bkt/bad", source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=fs)
    with fs.open_output_stream("bkt/bad/part-000003.parquet") as out:
        out.write(b"PAR1 this is not a parquet file PAR1")
    src = open_source(s3.uri("bkt/bad"))
    got = 0
    with pytest.raises((ReleaseSpecError, iwpfast.InvalidInputError), match="part-000003"):
        for batch in src.batches():
            got += batch.num_rows
    assert got == 3 * ROWS                 # the parts before it were handed out, in order
    assert format_readers.REMOTE_WHOLE_BYTES >= 1 << 16
