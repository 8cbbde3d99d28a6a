import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import iwpfast
from iwpfast.privacy import GaussianFeatureMechanism, ReleaseSpec, privatize, read_release_spec, release
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
