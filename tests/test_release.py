"""The release (iwpfast.privacy.release and the file, multi-part and CLI paths through it): round
trips, the noise and label flips it draws, its metadata, and, below, the defects users met and the
edges where it keeps its promise (merged from the files of those episodes)."""
import json
import math
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

import iwpfast
from iwpfast.cli import main
from iwpfast.exceptions import InvalidInputError, ReleaseSpecError
from iwpfast.io import open_source
from iwpfast.privacy import GaussianFeatureMechanism, ReleaseSpec, privatize, read_release_spec, release
from iwpfast.privacy.scaling import RangeScaler
from iwpfast.privacy.spec import METADATA_KEY

Z = 5.0  # statistical checks allow 5 standard errors (fixed seeds)
ACS = Path(iwpfast.__file__).parent / "data" / "acs2024_income_FL_NY_PA.parquet"
ACS_RANGES = "AGEP=0:99,SCHL=1:24,WKHP=0:99,SEX=1:2"


def small_table(n=5000, seed=0):
    r = np.random.default_rng(seed)
    return pa.table({
        "age": r.integers(17, 95, n),
        "hours": r.uniform(0, 99, n),
        "sex": r.integers(1, 3, n),
        "y": r.integers(0, 2, n),
    })


def spec(**kw):
    base = dict(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                ranges="age=0:99,hours=0:99,sex=1:2")
    base.update(kw)
    return ReleaseSpec(**base)


def scaled_clipped(table, names, ranges, bound):
    """Independent float64 reference of scaling + coordinate clip + L2 clip."""
    cols = []
    for f in names:
        lo, hi = ranges[f]
        v = (table[f].to_numpy().astype(np.float64) - (lo + hi) / 2) / ((hi - lo) / 2)
        cols.append(np.clip(v, -1, 1))
    X = np.array(cols)
    norms = np.sqrt((X**2).sum(axis=0))
    return X * np.minimum(1.0, bound / np.maximum(norms, 1e-300))


def test_release_parquet_round_trip(tmp_path):
    t = small_table()
    path = tmp_path / "in.parquet"
    pq.write_table(t, path, row_group_size=1500)
    out = tmp_path / "out.parquet"
    res = release(path, out, spec(), features=["age", "hours", "sex"], label="y", record_batch_rows=1000)
    assert res.rows_written == t.num_rows == res.rows_read
    rel = pq.read_table(out)
    assert rel.schema.names == ["age", "hours", "sex", "y"]
    assert rel.schema.field("age").type == pa.float32() and rel.schema.field("y").type == pa.int8()
    assert set(np.unique(rel["y"].to_numpy())) == {-1, 1}
    back = read_release_spec(out)
    assert back.row_count == t.num_rows
    assert back.features == ("age", "hours", "sex") and back.label == "y"
    # the discrete law's sigma depends on the number of features (snapping enters the sensitivity)
    assert back.sigma == spec(features=("age", "hours", "sex")).sigma
    meta = rel.schema.metadata[METADATA_KEY.encode()].decode()
    assert '"row_count": 5000' in meta


def test_no_seed_in_metadata(tmp_path):
    out = tmp_path / "o.parquet"
    release(small_table(), out, spec(), features=["age", "hours", "sex"], label="y", seed=987654321)
    footer = pq.ParquetFile(out).metadata.metadata
    blob = b"".join(k + v for k, v in footer.items())
    assert b'"seed"' not in blob and b"987654321" not in blob
    # only the marker that the release was seeded (a simulation)
    assert b'"seeded": true' in blob


def test_seed_reproducible_and_default_fresh(tmp_path):
    t = small_table()
    kw = dict(features=["age", "hours", "sex"], label="y")
    a = release(t, tmp_path / "a.parquet", spec(), seed=3, **kw)
    b = release(t, tmp_path / "b.parquet", spec(), seed=3, **kw)
    c = release(t, tmp_path / "c.parquet", spec(), **kw)
    ta, tb, tc = (pq.read_table(r.destination) for r in (a, b, c))
    assert ta.equals(tb)
    assert not ta.column("age").equals(tc.column("age"))


def test_two_threads_reproducible_with_independent_streams():
    # 80,000 rows: the chunk is split between 2 threads, each with its own spawned stream.
    n = 80000
    t = small_table(n, seed=3)
    X = {f: t[f].to_numpy() for f in ("age", "hours", "sex")}
    s = spec(epsilon_y=None)
    a, _ = privatize(X, t["y"].to_numpy(), s, seed=9, threads=2)
    b, _ = privatize(X, t["y"].to_numpy(), s, seed=9, threads=2)
    np.testing.assert_array_equal(a, b)
    ref = scaled_clipped(t, ["age", "hours", "sex"], s.ranges, s.bound).T
    noise = a - ref
    half = n // 2
    first, second = noise[:half, 0], noise[half:2 * half, 0]
    assert not np.allclose(first, second)
    # the two halves' noise is uncorrelated (SE of a correlation ~ 1/sqrt(n/2))
    assert abs(np.corrcoef(first, second)[0, 1]) < Z / math.sqrt(half)


def test_pre_noise_vectors_within_bound(tmp_path, monkeypatch):
    # With the noise switched off, the output is exactly what was noised: every vector's norm
    # must be <= bound and equal the float64 reference of scaling + clipping.
    monkeypatch.setattr(GaussianFeatureMechanism, "add_noise_", lambda self, X, rng, noise: None)
    t = small_table(20000, seed=1)
    s = spec(bound=0.8, noise="float")
    out = tmp_path / "o.parquet"
    res = release(t, out, s, features=["age", "hours", "sex"], label="y", record_batch_rows=7000)
    rel = pq.read_table(out)
    X = np.array([rel[f].to_numpy() for f in ("age", "hours", "sex")], dtype=np.float64)
    norms = np.sqrt((X**2).sum(axis=0))
    assert norms.max() <= 0.8
    ref = scaled_clipped(t, ["age", "hours", "sex"], s.ranges, 0.8)
    np.testing.assert_allclose(X, ref, atol=2e-6)
    scaled = scaled_clipped(t, ["age", "hours", "sex"], s.ranges, 1e9)
    assert res.rows_clipped == int((np.sqrt((scaled ** 2).sum(0)) > 0.8 * (1 - 2**-20)).sum())


def test_noise_sd_and_label_flip_rate_in_release(tmp_path):
    n = 60000
    t = small_table(n, seed=2)
    s = spec(epsilon_x=2.0, epsilon_y=0.8)
    X, y = privatize({f: t[f].to_numpy() for f in ("age", "hours", "sex")}, t["y"].to_numpy(), s, seed=11)
    ref = scaled_clipped(t, ["age", "hours", "sex"], s.ranges, s.bound)
    noise = X.T.astype(np.float64) - ref
    var = noise.var(axis=1)
    assert np.all(np.abs(var / s.sigma**2 - 1) < Z * math.sqrt(2 / (n - 1)))
    assert np.all(np.abs(noise.mean(axis=1)) < Z * s.sigma / math.sqrt(n))
    q = 1 - s.label_keep_prob
    flips = np.mean(y != (2 * t["y"].to_numpy() - 1))
    assert abs(flips - q) < Z * math.sqrt(q * (1 - q) / n)


@pytest.mark.parametrize("labels, expected", [
    (np.array([0, 1, 1, 0]), [-1, 1, 1, -1]),
    (np.array([-1, 1, 1, -1]), [-1, 1, 1, -1]),
    (np.array([False, True, True, False]), [-1, 1, 1, -1]),
    (np.array([0.0, 1.0, 1.0, 0.0]), [-1, 1, 1, -1]),
])
def test_label_encodings_accepted(labels, expected):
    s = spec(epsilon_y=None)  # public labels: the mapping is exact
    X = np.array([[20, 10, 1], [30, 20, 2], [40, 30, 1], [50, 40, 2]])
    _, y = privatize(X, labels, s.with_columns(features=("age", "hours", "sex"), label="y"), seed=0)
    assert y.dtype == np.int8 and y.tolist() == expected


def test_ipc_output_with_drop_and_unknown_row_count(tmp_path):
    t = small_table(3000)
    hours = t["hours"].to_numpy().copy()
    hours[[5, 2500]] = np.nan
    t = t.set_column(1, "hours", pa.array(hours))
    reader = pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=1000))
    out = tmp_path / "o.arrow"
    res = release(reader, out, spec(), features=["age", "hours", "sex"], label="y", on_invalid="drop")
    assert res.rows_dropped == 2 and res.rows_written == 2998
    back = read_release_spec(out)
    assert back.row_count == 2998
    with pa.memory_map(str(out)) as f:
        assert pa.ipc.open_file(f).read_all().num_rows == 2998


def test_float64_and_features_only(tmp_path):
    out = tmp_path / "o.parquet"
    release(small_table(), out, spec(feature_dtype="float64"), features=["age", "hours"], label=None)
    rel = pq.read_table(out)
    assert rel.schema.names == ["age", "hours"] and rel.schema.field("age").type == pa.float64()
    back = read_release_spec(out)
    assert back.label is None and back.guarantee().epsilon == 1.0  # no label budget spent


def test_regression_target(tmp_path):
    n = 40000
    r = np.random.default_rng(4)
    t = pa.table({"a": r.uniform(0, 1, n), "income": r.uniform(0, 300000, n)})
    s = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, task="regression",
                    ranges="a=0:1", target_range=(0, 200000), target_bound=1.0)
    out = tmp_path / "o.parquet"
    res = release(t, out, s, features=["a"], label="income", seed=5)
    rel = pq.read_table(out)
    assert rel.schema.field("income").type == pa.float32()
    ref = np.clip((t["income"].to_numpy() - 100000) / 100000, -1, 1)
    noise = rel["income"].to_numpy().astype(np.float64) - ref
    sig = read_release_spec(out).target_noise_scale
    assert abs(noise.var() / sig**2 - 1) < Z * math.sqrt(2 / (n - 1))
    assert read_release_spec(out).guarantee().delta == pytest.approx(2e-5)
    assert res.rows_written == n


def test_ranges_from_data_warns_and_is_recorded(tmp_path):
    out = tmp_path / "o.parquet"
    s = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, ranges_from_data=True)
    with pytest.warns(iwpfast.PrivacyLeakWarning, match="leak"):
        release(small_table(), out, s, features=["age", "hours"], label="y")
    back = read_release_spec(out)
    assert back.ranges_from_data and "not protected" in back.guarantee().statement


def test_release_real_acs_file(tmp_path):
    out = tmp_path / "acs.parquet"
    s = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, ranges=ACS_RANGES)
    res = release(ACS, out, s, features=["AGEP", "SCHL", "WKHP", "SEX"], label="y", seed=0)
    raw = pq.read_table(ACS)
    rel = pq.read_table(out)
    n = raw.num_rows
    assert res.rows_written == n == rel.num_rows == 281136
    assert not res.values_out_of_range  # the declared ranges cover the data
    keep = s.label_keep_prob
    agree = np.mean(rel["y"].to_numpy() == 2 * raw["y"].to_numpy() - 1)
    assert abs(agree - keep) < Z * math.sqrt(keep * (1 - keep) / n)
    ref = scaled_clipped(raw, ["AGEP", "SCHL", "WKHP", "SEX"], s.ranges, 1.0)
    got = np.array([rel[f].to_numpy() for f in ("AGEP", "SCHL", "WKHP", "SEX")], dtype=np.float64)
    assert np.all(np.abs((got - ref).mean(axis=1)) < Z * s.sigma / math.sqrt(n))
    assert read_release_spec(out).guarantee().epsilon == 2.0


def test_csv_and_pandas_sources(tmp_path):
    import pyarrow.csv as pacsv

    t = small_table(2000, seed=6)
    csv = tmp_path / "in.csv"
    pacsv.write_csv(t, csv)
    kw = dict(features=["age", "hours", "sex"], label="y", seed=1)
    a = release(csv, tmp_path / "a.parquet", spec(), **kw)
    b = release(t.to_pandas(), tmp_path / "b.parquet", spec(), **kw)
    assert a.rows_written == b.rows_written == 2000
    # same values and seed: the CSV and DataFrame routes give the same release
    ta, tb = pq.read_table(tmp_path / "a.parquet"), pq.read_table(tmp_path / "b.parquet")
    np.testing.assert_allclose(ta["hours"].to_numpy(), tb["hours"].to_numpy(), atol=1e-5)
    assert ta["y"].equals(tb["y"])

# --------------------------------------------------------------------------------------------------
# Defects users met: float16 scaling, silent target clipping, raw tracebacks, page checksums,
# truncated IPC streams, the seeded marker; each tried as a user would
# --------------------------------------------------------------------------------------------------


def one_line_error(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1 and err[-1].startswith("iwpfast: error:") and "Traceback" not in "\n".join(err)
    return err[-1]


def test_float16_features_are_scaled_in_float64():
    raw = np.array([0, 30000, 60000, 65000], dtype=np.float16)
    out = np.empty(4, dtype=np.float32)
    RangeScaler(["a"], {"a": (0.0, 200000.0)}).scale_into(0, raw, out)
    want = (raw.astype(np.float64) - 100000.0) / 100000.0
    np.testing.assert_allclose(out, want, rtol=1e-6)  # was [-1, -1, -1, -1] in float16
    # end to end: the mean of 20,000 noisy releases of 30000 is -0.7 (SE sigma/sqrt(n) ~ 0.05)
    n = 20_000
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, features=("a",),
                       ranges={"a": (0.0, 200000.0)})
    Xt, _ = privatize({"a": np.full(n, 30000, dtype=np.float16)}, None, spec, seed=1)
    assert abs(Xt[:, 0].mean() + 0.7) < 5 * spec.sigma / math.sqrt(n)


def test_regression_targets_outside_the_range_are_counted_and_warned(tmp_path):
    r = np.random.default_rng(0)
    n = 5000
    t = r.uniform(0, 250_000, n)  # range declared 0:200000: a fifth lie above
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, task="regression",
                       features=("a",), ranges={"a": (0, 1)}, label="t", target_range=(0, 200_000))
    with pytest.warns(UserWarning, match="regression targets lay outside the declared range 0:200000"):
        res = release({"a": r.random(n), "t": t}, tmp_path / "o.parquet", spec, label="t")
    assert res.targets_out_of_range == int((t > 200_000).sum()) > 0
    assert "targets lay outside the declared range" in res.summary()


def test_unwritable_destination_is_a_one_line_error(tmp_path, capsys):
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"a": np.arange(100.0), "y": np.arange(100) % 2}), src)
    base = ["release", str(src), "--features", "a=0:100", "--epsilon-x", "1", "--epsilon-y", "1",
            "--no-progress"]
    # /proc refuses new files even to root
    assert main(base[:2] + ["/proc/iwpfast-release.parquet"] + base[2:]) == 2
    assert "cannot write the destination" in one_line_error(capsys)
    if os.geteuid() != 0:  # permissions bind other users
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        assert main(base[:2] + [str(ro / "o.parquet")] + base[2:]) == 2
        assert "not writable" in one_line_error(capsys)


def test_duplicated_parquet_column_is_a_one_line_error(tmp_path, capsys):
    src = tmp_path / "dup.parquet"
    a = pa.array(np.arange(50.0))
    pq.write_table(pa.Table.from_arrays([a, a, pa.array(np.arange(50) % 2)], names=["a", "a", "y"]), src)
    rc = main(["release", str(src), str(tmp_path / "o.parquet"), "--features", "a=0:50",
               "--epsilon-x", "1", "--epsilon-y", "1", "--no-progress"])
    assert rc == 2
    line = one_line_error(capsys)
    assert "['a']" in line and "more than once" in line
    assert not (tmp_path / "o.parquet").exists()


def _flip_in_first_data_page(path, column=0):
    md = pq.ParquetFile(path).metadata
    chunk = md.row_group(0).column(column)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    offset = start + chunk.total_compressed_size // 2  # inside the (plain, uncompressed) values
    with open(path, "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([byte[0] ^ 0x5A]))


def test_parquet_page_checksums_written_and_verified(tmp_path):
    n = 4000
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"a": np.linspace(0, 1, n), "y": np.arange(n) % 2}), src,
                   compression="none", use_dictionary=False, write_page_checksum=True)
    _flip_in_first_data_page(src)
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=("a",),
                       ranges={"a": (0, 1)}, label="y")
    with pytest.raises(InvalidInputError, match="(?i)checksum|corrupt"):
        release(src, tmp_path / "o.parquet", spec)
    assert not (tmp_path / "o.parquet").exists()
    # the release writes checksums itself: a flipped byte in its output is caught on reading
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"a": np.linspace(0, 1, n), "y": np.arange(n) % 2}), good)
    out = tmp_path / "rel.parquet"
    release(good, out, spec)
    _flip_in_first_data_page(out)
    with pytest.raises(InvalidInputError, match="(?i)checksum|corrupt"):
        sum(b.num_rows for b in open_source(out).batches())


def test_truncated_ipc_stream_is_refused(tmp_path):
    table = pa.table({"a": np.linspace(0, 1, 40_000), "y": np.arange(40_000) % 2})
    full = tmp_path / "full.arrows"
    with pa.OSFile(str(full), "wb") as sink, ipc.new_stream(sink, table.schema) as w:
        for batch in table.to_batches(max_chunksize=20_000):
            w.write_batch(batch)
    data = full.read_bytes()
    assert data.endswith(b"\xff\xff\xff\xff\x00\x00\x00\x00")
    assert open_source(full).schema.names == ["a", "y"]
    cut = tmp_path / "cut.arrows"
    # cut at the batch boundary: everything but the second batch and the end-of-stream marker
    with pa.OSFile(str(full), "rb") as f:
        reader = ipc.open_stream(f)
        reader.read_next_batch()
        boundary = f.tell()
    cut.write_bytes(data[:boundary])
    assert sum(b.num_rows for b in ipc.open_stream(cut.read_bytes())) == 20_000  # pyarrow: no error
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=("a",),
                       ranges={"a": (0, 1)}, label="y")
    with pytest.raises(InvalidInputError, match="end-of-stream marker"):
        release(cut, tmp_path / "o.parquet", spec)
    assert release(full, tmp_path / "ok.parquet", spec).rows_written == 40_000


def test_seeded_release_is_marked_and_shown(tmp_path, capsys):
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"a": np.linspace(0, 1, 500), "y": np.arange(500) % 2}), src)
    out = tmp_path / "o.parquet"
    assert main(["release", str(src), str(out), "--features", "a=0:1", "--epsilon-x", "1",
                 "--epsilon-y", "1", "--seed", "5", "--no-progress"]) == 0
    assert "seeded release" in capsys.readouterr().err
    assert main(["info", str(out)]) == 0
    assert "seeded:        yes" in capsys.readouterr().out
    assert main(["info", str(out), "--json"]) == 0
    text = capsys.readouterr().out
    assert '"seeded": true' in text and '"law": "discrete_gaussian"' in text
    fresh = tmp_path / "f.parquet"
    assert main(["release", str(src), str(fresh), "--features", "a=0:1", "--epsilon-x", "1",
                 "--epsilon-y", "1", "--no-progress"]) == 0
    assert "seeded release" not in capsys.readouterr().err
    assert main(["info", str(fresh), "--json"]) == 0
    assert '"seeded": false' in capsys.readouterr().out


def _sorted_source(n=20_000):
    r = np.random.default_rng(3)
    y = np.sort(r.integers(0, 2, n))  # sorted by the label: position reveals it
    return {"a": r.random(n), "y": y}


def _spec(**kw):
    base = dict(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=("a",),
                ranges={"a": (0, 1)}, label="y")
    base.update(kw)
    return ReleaseSpec(**base)


def test_sorted_labels_warn_and_shuffle_removes_the_position_leak(tmp_path, monkeypatch):
    import warnings

    from iwpfast.exceptions import PrivacyLeakWarning
    from iwpfast.privacy import release as release_fn
    from iwpfast.privacy.release import label_order_z

    shuffle_module = __import__("iwpfast.privacy.shuffle", fromlist=["x"])
    src = _sorted_source()
    with pytest.warns(PrivacyLeakWarning, match="looks sorted or clustered.*shuffle=True"):
        release_fn(src, tmp_path / "sorted.parquet", _spec())
    # a random order does not warn (z ~ N(0, 1) there; the threshold is -6)
    r = np.random.default_rng(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        release_fn({"a": r.random(20_000), "y": r.integers(0, 2, 20_000)}, tmp_path / "r.parquet",
                   _spec())
    assert label_order_z(10, 20, 1) < -3 and abs(label_order_z(500, 1000, 500)) < 0.1

    # shuffled in memory: the released labels no longer follow the sorted order; the multiset
    # of released rows is a permutation (the feature values' noise aside, labels' counts agree)
    for memory in (True, False):
        if not memory:  # force the two-pass bucket shuffle through temporary files
            monkeypatch.setattr(shuffle_module, "SHUFFLE_MEMORY_BYTES", 64 << 10)
        out = tmp_path / f"shuffled-{memory}.parquet"
        with warnings.catch_warnings():
            warnings.simplefilter("error", PrivacyLeakWarning)
            res = release_fn(src, out, _spec(), shuffle=True)
        assert res.rows_written == 20_000
        y_rel = pq.read_table(out)["y"].to_numpy()
        # position no longer predicts the label: agreement of "first half -> -1" with the
        # released label is 1/2 up to sampling error (SE 1/(2 sqrt n))
        guess = np.where(np.arange(20_000) < (src["y"] == 0).sum(), -1, 1)
        assert abs(np.mean(guess == y_rel) - 0.5) < 5 * 0.5 / math.sqrt(20_000)
    # without shuffling, position predicts the released label far above chance
    y_sorted = pq.read_table(tmp_path / "sorted.parquet")["y"].to_numpy()
    guess = np.where(np.arange(20_000) < (src["y"] == 0).sum(), -1, 1)
    assert np.mean(guess == y_sorted) > 0.7


def test_cli_shuffle_flag(tmp_path, capsys):
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table(_sorted_source(5000)), src)
    out = tmp_path / "o.parquet"
    assert main(["release", str(src), str(out), "--features", "a=0:1", "--epsilon-x", "1",
                 "--epsilon-y", "1", "--no-progress"]) == 0
    assert "looks sorted or clustered" in capsys.readouterr().err
    out2 = tmp_path / "o2.parquet"
    assert main(["release", str(src), str(out2), "--features", "a=0:1", "--epsilon-x", "1",
                 "--epsilon-y", "1", "--no-progress", "--shuffle"]) == 0
    assert "looks sorted" not in capsys.readouterr().err
    assert pq.read_table(out2).num_rows == 5000


def test_cli_classic_refusal_prints_the_true_delta_and_writes_nothing(tmp_path, capsys):
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"a": np.linspace(0, 1, 500), "y": np.arange(500) % 2}), src)
    out = tmp_path / "o.parquet"
    for noise in ("discrete", "float"):
        rc = main(["release", str(src), str(out), "--features", "a=0:1", "--epsilon-x", "20",
                   "--calibration", "classic", "--epsilon-y", "1", "--noise", noise, "--no-progress"])
        assert rc == 2
        line = one_line_error(capsys)
        assert "delta=0.00153" in line and "--calibration analytic" in line
        assert not out.exists() and list(tmp_path.iterdir()) == [src]

# --------------------------------------------------------------------------------------------------
# The release keeps its promise at its edges: nothing in the metadata or the layout is a function
# of the raw values except through the mechanism; no second noisy copy after a fault; no
# self-overwrite; no printed secrets; the smaller defects.  Each test failed on the code before.
# --------------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------ randomized response edges
@pytest.mark.parametrize("epsilon_y,k", [(40.0, 3), (35.0, 5), (30.0, 3)])
def test_kary_refuses_epsilon_the_grid_cannot_implement(epsilon_y, k):
    # 40/3: q rounds to 1 (no label changes while 40 is printed); 35/5: the 2^-53 grid moves the
    # implemented epsilon by 0.35; 30/3: by 1.7e-4, beyond the stated tolerance
    from iwpfast.privacy.mechanisms import KARY_EPSILON_TOLERANCE, KaryRandomizedResponse

    assert KARY_EPSILON_TOLERANCE == 1e-6
    with pytest.raises(InvalidInputError, match=f"epsilon_y={epsilon_y:g} with {k} classes"):
        KaryRandomizedResponse(epsilon_y, k)
    with pytest.raises(InvalidInputError, match="epsilon_y <= 22"):
        _spec(classes=tuple("ABCDE"[:k]), epsilon_y=epsilon_y).guarantee()


def test_kary_grid_counts_are_exact_and_near_the_real_probabilities():
    from iwpfast.privacy import kary_probabilities
    from iwpfast.privacy.mechanisms import KaryRandomizedResponse, kary_grid_counts

    for eps, k in [(1.0, 3), (2.0, 5), (20.0, 3), (22.0, 5)]:
        q, r = kary_probabilities(eps, k)
        counts = kary_grid_counts(q, r, k)
        assert counts.sum() == 2**53 and counts.size == k
        # each count is within 1 + k grid points of its real probability (rounding of each edge)
        np.testing.assert_allclose(counts, [q * 2**53] + [r * 2**53] * (k - 1), rtol=0, atol=k + 1)
        assert abs(KaryRandomizedResponse(eps, k).implemented_epsilon - eps) <= 1e-6
    # the counts are those of the implemented map: every uniform of a fine sweep lands in its bin
    q, r = kary_probabilities(1.0, 4)
    counts = kary_grid_counts(q, r, 4)
    edges = np.cumsum(counts)
    for U in np.concatenate([edges[:-1] - 1, edges[:-1]]):
        u = np.array([U * 2.0**-53])
        got = KaryRandomizedResponse(1.0, 4).apply(np.zeros(1, np.int64), _Fixed(u))[0]
        assert got == int(np.searchsorted(edges, U, side="right"))


class _Fixed:
    def __init__(self, u):
        self.u = u

    def random(self, n):
        return self.u[:n]


def test_binary_keep_threshold_never_exceeds_the_exact_probability():
    # the implemented keep probability threshold / 2^53 against S(eps) to 60 digits; eps = 16.748...
    # overshot by 0.46 units of 2^-53 with floor(S * 2^53) - 1 alone
    from decimal import Decimal, localcontext

    from iwpfast.privacy.mechanisms import RandomizedResponse

    r = np.random.default_rng(0)
    for eps in [16.7483177326399, 1.0, 0.5, 8.0] + list(r.uniform(0.01, 30, 300)):
        threshold = RandomizedResponse(float(eps)).keep_threshold
        with localcontext() as ctx:
            ctx.prec = 60
            exact = 1 / (1 + (-Decimal(float(eps))).exp())
            assert Decimal(threshold) <= exact * Decimal(2**53), eps
            assert exact * Decimal(2**53) - Decimal(threshold) < 3      # and not far below


# ------------------------------------------------------------------ the float law's caveat
def test_float_release_metadata_carries_its_caveat_machine_readably(tmp_path):
    src = tmp_path / "raw.parquet"
    pq.write_table(pa.table({"a": [0.1, 0.5, 0.9], "y": [0, 1, 1]}), src)
    release(src, tmp_path / "f.parquet", _spec(noise="float"))
    release(src, tmp_path / "d.parquet", _spec(noise="discrete"))
    g_float = _meta(tmp_path / "f.parquet")["guarantee"]
    g_discrete = _meta(tmp_path / "d.parquet")["guarantee"]
    # the existing keys stay; the caveat is added
    assert g_float["epsilon"] == g_discrete["epsilon"] == 2.0 and g_float["delta"] == 1e-5
    assert g_float["holds_for"] == "real_valued_noise_only" and "low-order bits" in g_float["caveat"]
    assert g_discrete["holds_for"] == "values_as_written" and "caveat" not in g_discrete
    # and the file still reads back as a release
    from iwpfast.privacy import read_release_spec

    assert read_release_spec(tmp_path / "f.parquet").noise == "float"


# ------------------------------------------------------------------ never onto its own input
def _raw(path, n=50):
    r = np.random.default_rng(1)
    pq.write_table(pa.table({"a": r.uniform(0, 1, n), "y": r.integers(0, 2, n)}), path)


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_release_never_replaces_its_input_file(tmp_path, overwrite):
    src = tmp_path / "x.parquet"
    _raw(src)
    before = src.read_bytes()
    with pytest.raises(InvalidInputError, match="its own input"):
        release(src, src, _spec(), overwrite=overwrite)
    assert src.read_bytes() == before


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_release_never_writes_into_its_input_folder(tmp_path, overwrite):
    raw = tmp_path / "D"
    raw.mkdir()
    _raw(raw / "part-000000.parquet")
    _raw(raw / "b.parquet")
    before = sorted((p.name, p.read_bytes()) for p in raw.iterdir())
    with pytest.raises(InvalidInputError, match="its own input"):
        release(raw, str(raw) + "/", _spec(), overwrite=overwrite)
    with pytest.raises(InvalidInputError, match="inside its input folder"):
        release(raw, raw / "out.parquet", _spec(), overwrite=overwrite)
    with pytest.raises(InvalidInputError, match="holds its input"):
        release(raw / "b.parquet", str(raw) + "/", _spec(), overwrite=overwrite)
    assert sorted((p.name, p.read_bytes()) for p in raw.iterdir()) == before


def test_cli_release_onto_its_input_is_one_error_line(tmp_path, capsys):
    from iwpfast.cli import main

    src = tmp_path / "x.parquet"
    _raw(src)
    code = main(["release", str(src), str(src), "--features", "a=0:1", "--label", "y",
                 "--epsilon-x", "1", "--epsilon-y", "1", "--bound", "1", "--overwrite"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("iwpfast: error:") and "own input" in err[0]
    assert src.exists()


# ------------------------------------------------------------------ the smaller defects
def test_empty_inputs_are_refused_by_release_and_fit(tmp_path):
    from iwpfast.estimators import IWPClassifier

    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"a": pa.array([], pa.float64()), "y": pa.array([], pa.int64())}), empty)
    with pytest.raises(InvalidInputError, match="holds no rows"):
        release(empty, tmp_path / "o.parquet", _spec())
    assert not (tmp_path / "o.parquet").exists()
    # every row dropped: nothing released either
    nan = tmp_path / "nan.parquet"
    pq.write_table(pa.table({"a": [float("nan")] * 3, "y": [0, 1, 0]}), nan)
    with pytest.raises(InvalidInputError, match="all 3 rows .* were dropped"):
        release(nan, tmp_path / "o.parquet", _spec(), on_invalid="drop")
    assert not (tmp_path / "o.parquet").exists()
    # a stream whose length is unknown until read
    reader = pa.RecordBatchReader.from_batches(pa.schema([("a", pa.float64()), ("y", pa.int64())]), [])
    with pytest.raises(InvalidInputError, match="holds no rows"):
        release(reader, tmp_path / "o.parquet", _spec())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.parquet", "nan.parquet"]
    with pytest.raises(InvalidInputError, match="holds no rows"):
        IWPClassifier().fit(str(empty), features=["a"], label="y", noise_var=0.1)
    # a multi-part release of empty files: refused as a whole (one empty part among others is
    # fine: a Spark partition may be empty), and the folder it made is gone
    folder = tmp_path / "raw"
    folder.mkdir()
    pq.write_table(pq.read_table(empty), folder / "f0.parquet")
    with pytest.raises(InvalidInputError, match="hold no rows"):
        release(folder, str(tmp_path / "out") + "/", _spec())
    assert not (tmp_path / "out").exists()


def test_threads_zero_is_refused(tmp_path):
    from iwpfast.privacy import privatize

    src = tmp_path / "x.parquet"
    _raw(src)
    for threads in (0, -1, 1.5):
        with pytest.raises(InvalidInputError, match="threads"):
            release(src, tmp_path / "o.parquet", _spec(), threads=threads)
        with pytest.raises(InvalidInputError, match="threads"):
            privatize(np.zeros((3, 1)), np.array([0, 1, 0]), _spec(), threads=threads)


def test_fit_epsilon_y_contradicting_the_release_is_refused(tmp_path):
    from iwpfast.estimators import IWPClassifier

    src, rel = tmp_path / "x.parquet", tmp_path / "rel.parquet"
    _raw(src, 400)
    # seeded: the agreeing fixed-step fit below must not depend on a random draw (unseeded, one
    # release in a few made step 0.1 diverge on these 400 rows)
    release(src, rel, _spec(), seed=5)
    with pytest.raises(ReleaseSpecError, match="epsilon_y=0.3 but the release has 1"):
        IWPClassifier().fit(str(rel), epsilon_y=0.3)
    IWPClassifier(alpha=0.01, learning_rate=0.1).fit(str(rel), epsilon_y=1.0)   # agreeing: fine


def test_a_failed_multipart_release_leaves_no_folder(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    _raw(raw / "f0.parquet")
    pq.write_table(pa.table({"a": [0.5, float("nan")], "y": [0, 1]}), raw / "f1.parquet")
    with pytest.raises(InvalidInputError, match="non-finite"):
        release(raw, str(tmp_path / "out") + "/", _spec())
    assert not (tmp_path / "out").exists()


def test_manifest_has_the_permissions_of_the_parts(tmp_path):
    import os
    import stat

    raw = tmp_path / "raw"
    raw.mkdir()
    _raw(raw / "f0.parquet")
    old = os.umask(0o022)
    try:
        release(raw, str(tmp_path / "out") + "/", _spec())
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "out").iterdir()}
    assert modes == {"part-000000.parquet": 0o644, "_iwpfast_manifest.json": 0o644}


# ------------------------------------------------------------------ no second noisy copy
_KILLED_RUN = r"""
import os, sys
import iwpfast.privacy.privatizer as privatizer
from iwpfast.privacy import ReleaseSpec, release

calls = {"n": 0}
original = privatizer._Privatizer.run

def run(self, *a):
    calls["n"] += 1
    if calls["n"] == 2:          # part 1, mid-write: the process dies (no cleanup runs)
        os._exit(9)
    return original(self, *a)

privatizer._Privatizer.run = run
spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=("a",),
                   ranges={"a": (0, 1)}, label="y")
release(sys.argv[1], sys.argv[2], spec)
"""


def _three_files(raw):
    raw.mkdir()
    for i in range(3):
        _raw(raw / f"f{i}.parquet", 300)


def test_a_killed_release_leaves_no_second_copy_after_the_next_run(tmp_path):
    import subprocess
    import sys

    raw, out = tmp_path / "raw", tmp_path / "out"
    _three_files(raw)
    script = tmp_path / "killed.py"
    script.write_text(_KILLED_RUN)
    done = subprocess.run([sys.executable, str(script), str(raw), str(out) + "/"],
                          capture_output=True, timeout=300)
    assert done.returncode == 9
    left = sorted(p.name for p in out.iterdir())
    # what a killed run leaves: part 0 and the temporary file of part 1 (a noisy copy of rows),
    # and its plan and part 0's row digest (what --resume would continue), all owner-only
    assert left[0].startswith(".part-000001.parquet.") and left[0].endswith(".tmp")
    assert left[1:] == ["_iwpfast_plan.json", "_iwpfast_rows-000000.json", "part-000000.parquet"]
    assert {(out / n).stat().st_mode & 0o777 for n in left} == {0o600}
    # the next run refuses, saying so: resume, or delete the parts (issue 42); the killed run
    # is not running (the folder's lock is free), so its staging file goes even so ...
    with pytest.raises(InvalidInputError, match="another release run that did not publish.*"
                                                "--resume.*overwrite=True"), \
            pytest.warns(UserWarning, match="removed 1 staging file"):
        release(raw, str(out) + "/", _spec())
    assert sorted(p.name for p in out.iterdir()) == left[1:]
    # ... or, asked to, removes the rest first: the folder holds the parts and the manifest only
    with pytest.warns(UserWarning, match="removed 1 file"):
        release(raw, str(out) + "/", _spec(), overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == [
        "_iwpfast_manifest.json", "part-000000.parquet", "part-000001.parquet",
        "part-000002.parquet"]


def test_a_retried_part_draws_the_same_noise_without_a_seed(tmp_path):
    from dataclasses import replace

    from iwpfast.privacy.multipart import release_part_with, start_parts
    from iwpfast.privacy.options import release_options
    from iwpfast.privacy.randomness import NoiseKey

    raw = tmp_path / "raw"
    _three_files(raw)
    options = release_options()
    plan = start_parts(raw, str(tmp_path / "out") + "/", _spec(), options)
    options = replace(options, seed=NoiseKey.from_os_entropy())     # what the release draws
    release_part_with(plan, 1, options)
    first = pq.read_table(plan.part_location(1).path)
    release_part_with(plan, 1, options)                             # the retry
    assert pq.read_table(plan.part_location(1).path).equals(first)
    assert not _meta(plan.part_location(1).path)["seeded"]
    # another part: another key
    release_part_with(plan, 2, options)
    other = pq.read_table(plan.part_location(2).path)
    assert not np.array_equal(other.column("a").to_numpy(), first.column("a").to_numpy())


def test_temporaries_are_removed_before_publishing(tmp_path, monkeypatch):
    import iwpfast.privacy.multipart as multipart

    raw, out = tmp_path / "raw", tmp_path / "out"
    _three_files(raw)
    original = multipart.run_parts_serially

    def with_an_orphan(plan, options):
        # a retried attempt of part 1 that died mid-write, during this run
        (out / ".part-000001.parquet.0123456789ab.tmp").write_bytes(b"noisy rows")
        return original(plan, options)

    monkeypatch.setattr(multipart, "run_parts_serially", with_an_orphan)
    release(raw, str(out) + "/", _spec())
    assert sorted(p.name for p in out.iterdir()) == [
        "_iwpfast_manifest.json", "part-000000.parquet", "part-000001.parquet",
        "part-000002.parquet"]


def test_spark_rerun_refuses_or_replaces_the_release_whole(tmp_path):
    from iwpfast.io.parts import write_manifest
    from iwpfast.io.sources import open_source
    from iwpfast.privacy.multipart import prepare_release_folder, release_batches

    table = pa.table({"a": np.linspace(0, 1, 800), "y": np.arange(800) % 2})
    out = tmp_path / "rel"

    def spark_like(n_partitions, release_id, overwrite=False):
        prepare_release_folder(out, overwrite=overwrite)
        rows = 800 // n_partitions
        for i in range(n_partitions):
            release_batches(table.slice(i * rows, rows).to_batches(), out, _spec(), index=i,
                            release_id=release_id, schema=table.schema)
        return write_manifest(out)

    spark_like(8, "r8")
    with pytest.raises(InvalidInputError, match="already holds a release"):
        spark_like(2, "r2")
    assert open_source(out).num_rows == 800            # the published release is untouched
    doc = spark_like(2, "r2", overwrite=True)
    assert doc["release_id"] == "r2" and len(doc["parts"]) == 2
    assert sorted(p.name for p in out.iterdir()) == [
        "_iwpfast_manifest.json", "part-000000.parquet", "part-000001.parquet"]
    assert open_source(out).num_rows == 800
