"""The release's open defects (issue: float16 scaling, silent target clipping, raw tracebacks,
page checksums, truncated IPC streams, seeded marker), each tried as a user would."""
import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from iwpfast.cli import main
from iwpfast.exceptions import InvalidInputError
from iwpfast.io import open_source
from iwpfast.privacy import ReleaseSpec, privatize, release
from iwpfast.privacy.scaling import RangeScaler


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


def _spec():
    return ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=("a",),
                       ranges={"a": (0, 1)}, label="y")


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
