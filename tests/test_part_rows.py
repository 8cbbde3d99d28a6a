"""The row digests a resumed engine release (iwpfast.spark.release_dataframe(resume=True)) checks
its kept partitions with: independent of the rows' order and batching, changed by any value, any
moved row and the key; sidecars owner-only.  Spark-free (the Spark runs: tests/test_spark.py)."""
import os
import stat

import numpy as np
import pyarrow as pa

from iwpfast._kernels.digest import digest_lanes
from iwpfast.io.filesystem import resolve
from iwpfast.privacy.part_rows import (
    RowDigest,
    _words,
    column_salts,
    digest_lanes_numpy,
    read_sidecars,
    remove_sidecars,
    sidecar_name,
    write_sidecar,
)

KEY = bytes(range(16))


def table(n=300, seed=0):
    r = np.random.default_rng(seed)
    return pa.table({"a": r.uniform(-1, 1, n), "b": r.uniform(-1, 1, n).astype(np.float32),
                     "y": r.integers(0, 2, n), "s": pa.array(r.choice(["u", "v", None], n))})


def digest(t, key=KEY, chunk=64):
    d = RowDigest(key)
    for batch in t.to_batches(max_chunksize=chunk):
        d.update(batch)
    return d.value()


def test_the_digest_is_that_of_the_rows_not_of_their_order_or_batches():
    t = table()
    perm = np.random.default_rng(1).permutation(t.num_rows)
    assert digest(t) == digest(t.take(perm), chunk=17)
    assert digest(t)["rows"] == 300


def test_a_changed_value_a_moved_row_or_another_key_changes_the_digest():
    t = table()
    base = digest(t)
    a = t.column("a").to_numpy().copy()
    a[5] = np.nextafter(a[5], 2.0)                           # one ulp of one value
    assert digest(t.set_column(0, "a", pa.array(a)))["digest"] != base["digest"]
    # rows swapped between two parts: each part's digest changes (same multiset overall)
    first, second = t.slice(0, 150), t.slice(150)
    swapped = pa.concat_tables([first.slice(0, 149), second.slice(0, 1)])
    assert digest(swapped)["digest"] != digest(first)["digest"]
    # a value moved between columns of a row
    s = t.set_column(0, "a", t.column("b").cast(pa.float64())) \
        .set_column(1, "b", t.column("a").cast(pa.float32()))
    assert digest(s)["digest"] != base["digest"]
    labels = t.column("s").to_pylist()
    labels[0] = "w" if labels[0] != "w" else "u"
    assert digest(t.set_column(3, "s", pa.array(labels)))["digest"] != base["digest"]
    assert digest(t, key=bytes(16))["digest"] != base["digest"]


def test_sidecars_are_owner_only_and_read_back_by_release(tmp_path):
    folder = resolve(str(tmp_path) + "/")
    write_sidecar(folder, 3, "r1", {"rows": 7, "digest": "ab"})
    write_sidecar(folder, 4, "other", {"rows": 1, "digest": "cd"})
    path = tmp_path / sidecar_name(3)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_sidecars(folder, "r1") == {3: {"rows": 7, "digest": "ab"}}
    remove_sidecars(folder, keep=[3])
    assert sorted(os.listdir(tmp_path)) == [sidecar_name(3)]


def test_the_digest_kernel_is_its_numpy_twin():
    """The compiled lanes equal the twin's, bit for bit, on words that use all 64 bits (values
    near 2^64 make every addition and product wrap)."""
    r = np.random.default_rng(5)
    for m, n in ((1, 1), (3, 1000), (7, 4097)):
        words = r.integers(0, 2**64, size=(m, n), dtype=np.uint64, endpoint=False)
        words[:, :3] = np.uint64(2**64 - 1)
        seeds = r.integers(0, 2**64, size=2, dtype=np.uint64)
        got = digest_lanes(words, column_salts(m), seeds[0], seeds[1])
        want = digest_lanes_numpy(words, column_salts(m), seeds[0], seeds[1])
        assert [int(v) for v in got] == [int(v) for v in want]


def test_a_batch_s_digest_is_the_twin_s_over_its_columns_words():
    """RowDigest (through the kernel) adds exactly the twin's lanes of each batch: the digest a
    sidecar stored before the kernel existed is the digest a resumed run recomputes now."""
    t = table(500, seed=3)
    d = RowDigest(KEY)
    lanes = [0, 0]
    for batch in t.to_batches(max_chunksize=128):
        d.update(batch)
        words = np.stack([_words(c, KEY) for c in batch.columns])
        for i, z in enumerate(digest_lanes_numpy(words, column_salts(batch.num_columns),
                                                 d.seed1, d.seed2)):
            lanes[i] = (lanes[i] + int(z)) % (1 << 64)
    assert d.value() == {"rows": 500, "digest": f"{lanes[0]:016x}{lanes[1]:016x}"}
