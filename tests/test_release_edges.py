"""The release keeps its promise at its edges (issue 19): nothing in the metadata or the layout is a
function of the raw values except through the mechanism; no second noisy copy after a fault; no
self-overwrite; no printed secrets; the smaller defects.  Each test failed on the code before."""
import json

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
    release(src, rel, _spec())
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
    # and its plan (what --resume would continue)
    assert left[0].startswith(".part-000001.parquet.") and left[0].endswith(".tmp")
    assert left[1:] == ["_iwpfast_plan.json", "part-000000.parquet"]
    # the next run refuses, saying so ...
    with pytest.raises(InvalidInputError, match="another release run that did not publish.*"
                                                "overwrite=True"):
        release(raw, str(out) + "/", _spec())
    assert sorted(p.name for p in out.iterdir()) == left
    # ... or, asked to, removes them first: the folder holds the parts and the manifest only
    with pytest.warns(UserWarning, match="removed 2 file"):
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
