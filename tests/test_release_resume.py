"""Resume and retries of a multi-part release (``resume=True``, ``iwpfast release ... --resume``):
a killed run (SIGKILL in the middle of a part), a failed run, another plan, transient errors."""
import hashlib
import json
import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iwpfast.exceptions import InvalidInputError
from iwpfast.io import open_source
from iwpfast.io.formats import RELEASE_METADATA_KEY_BYTES
from iwpfast.privacy import ReleaseSpec, multipart, release
from tests.conftest import fail_part, write_raw_parts

FEATURES = ["a", "b"]
ROWS = [700, 500, 800, 600, 400]


def spec():
    return ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                       ranges="a=-1:1,b=-1:1")


@pytest.fixture
def raw(tmp_path):
    return write_raw_parts(tmp_path / "raw", ROWS)


def digests(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.name.startswith("part-")}


KILLED_RUN = textwrap.dedent("""
    import os, signal, sys
    import pyarrow as pa, pyarrow.parquet as pq
    from iwpfast.privacy import ReleaseSpec, multipart
    raw, out = sys.argv[1], sys.argv[2]
    original = multipart.PartPlan.part_source

    def part_source(self, index, batch_rows):
        if index != 3:
            return original(self, index, batch_rows)
        # part 3 gets one batch written to its temporary file, then the process is killed
        table = pq.read_table(self.inputs[3].path)

        def batches():
            yield table.to_batches(max_chunksize=100)[0]
            os.kill(os.getpid(), signal.SIGKILL)
        return pa.RecordBatchReader.from_batches(table.schema, batches())

    multipart.PartPlan.part_source = part_source
    spec = ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=1.0, ranges="a=-1:1,b=-1:1")
    multipart.release_parts(raw, out + "/", spec, ["a", "b"], "y", record_batch_rows=100)
""")


def test_resume_after_a_killed_run_keeps_its_parts_byte_for_byte(raw, tmp_path):
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-c", KILLED_RUN, str(raw), str(out)],
                         capture_output=True, timeout=300)
    assert run.returncode == -9, run.stderr.decode()[-2000:]       # SIGKILL, mid-part 3
    before = digests(out)
    assert sorted(before) == [f"part-00000{i}.parquet" for i in range(3)]
    assert any(n.endswith(".tmp") for n in os.listdir(out))         # part 3's, never published
    with pytest.raises(Exception, match="no _iwpfast_manifest.json"):
        open_source(out)                                             # unpublished: refused
    res = release(raw, str(out) + "/", spec(), FEATURES, "y", resume=True, record_batch_rows=100)
    assert res.rows_written == sum(ROWS) and len(res.parts) == len(ROWS)
    after = digests(out)
    assert all(after[name] == digest for name, digest in before.items())   # kept byte for byte
    assert sorted(os.listdir(out)) == ["_iwpfast_manifest.json"] + sorted(after)  # no temporary
    src = open_source(out)                                           # one release, every row once
    assert src.num_rows == sum(ROWS)
    assert [pq.read_metadata(out / n).num_rows for n in sorted(after)] == ROWS
    metas = [json.loads(pq.read_schema(out / n).metadata[RELEASE_METADATA_KEY_BYTES])
             for n in sorted(after)]
    assert len({m["part"]["release_id"] for m in metas}) == 1      # the killed run's release id


def test_a_failed_resumable_run_keeps_its_parts_and_resumes(raw, tmp_path, monkeypatch):
    original = multipart.release_file

    def failing_part_2(source, destination, *args, **kwargs):
        if kwargs["part"]["index"] == 2:
            raise InvalidInputError("part 2 failed")       # not transient: not retried
        return original(source, destination, *args, **kwargs)

    monkeypatch.setattr(multipart, "release_file", failing_part_2)
    out = str(tmp_path / "out") + "/"
    with pytest.raises(InvalidInputError, match="part 2 failed"), \
            pytest.warns(UserWarning, match="no unfinished release"):   # a first run: said
        release(raw, out, spec(), FEATURES, "y", resume=True, seed=1)
    kept = digests(tmp_path / "out")
    assert sorted(kept) == ["part-000000.parquet", "part-000001.parquet"]
    # without resume, a failed run deletes its parts (nothing half-written is left)
    with pytest.raises(InvalidInputError):
        release(raw, str(tmp_path / "plain") + "/", spec(), FEATURES, "y", seed=1)
    assert not (tmp_path / "plain").exists()                           # nor the folder it made
    monkeypatch.setattr(multipart, "release_file", original)          # the cause gone
    res = release(raw, out, spec(), FEATURES, "y", resume=True, seed=1)
    assert res.rows_written == sum(ROWS)
    assert {k: v for k, v in digests(tmp_path / "out").items() if k in kept} == kept
    # seeded: a resumed release is bit for bit the uninterrupted one (part i's key: (seed, i))
    release(raw, str(tmp_path / "whole") + "/", spec(), FEATURES, "y", seed=1)
    whole = open_source(tmp_path / "whole")
    got = open_source(tmp_path / "out")
    assert pa.Table.from_batches(list(got.batches())).equals(
        pa.Table.from_batches(list(whole.batches())))


def test_resume_refuses_another_plan_and_a_published_release(raw, tmp_path, monkeypatch):
    out = str(tmp_path / "out") + "/"
    original = multipart.release_file

    def failing_part_1(source, destination, *args, **kwargs):
        if kwargs["part"]["index"] == 1:
            raise InvalidInputError("part 1 failed")
        return original(source, destination, *args, **kwargs)

    monkeypatch.setattr(multipart, "release_file", failing_part_1)
    with pytest.raises(InvalidInputError), pytest.warns(UserWarning, match="no unfinished"):
        release(raw, out, spec(), FEATURES, "y", resume=True)   # fails at part 1: part 0 kept
    monkeypatch.setattr(multipart, "release_file", original)
    with pytest.raises(InvalidInputError, match="other spec"):
        release(raw, out, ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                                      ranges="a=-1:1,b=-1:1"), FEATURES, "y", resume=True)
    release(raw, out, spec(), FEATURES, "y", resume=True)
    with pytest.raises(InvalidInputError, match="nothing to resume"):
        release(raw, out, spec(), FEATURES, "y", resume=True)
    with pytest.raises(InvalidInputError, match="choose one"):
        release(raw, out, spec(), FEATURES, "y", resume=True, overwrite=True)


def test_a_transient_error_is_retried_and_a_data_error_is_not(raw, tmp_path, monkeypatch):
    calls = []
    original = multipart.release_file

    def flaky(source, destination, *args, **kwargs):
        calls.append(kwargs["part"]["index"])
        if calls.count(1) == 1 and kwargs["part"]["index"] == 1:
            raise OSError("connection reset by peer")
        return original(source, destination, *args, **kwargs)

    monkeypatch.setattr(multipart, "release_file", flaky)
    monkeypatch.setattr(multipart.time, "sleep", lambda s: None)
    res = release(raw, str(tmp_path / "out") + "/", spec(), FEATURES, "y", seed=2)
    assert res.rows_written == sum(ROWS) and calls.count(1) == 2
    calls.clear()
    with pytest.raises(OSError, match="reset"):
        release(raw, str(tmp_path / "none") + "/", spec(), FEATURES, "y", seed=2, part_retries=0)
    assert calls == [0, 1]


def test_cli_release_resume(raw, tmp_path, capsys):
    from iwpfast.cli import main

    args = [str(raw), str(tmp_path / "out") + "/", "--features", "a", "b", "--label", "y",
            "--ranges", "a=-1:1", "b=-1:1", "--epsilon-x", "2", "--epsilon-y", "1",
            "--bound", "1", "--no-progress"]
    assert main(["release", *args, "--resume"]) == 0     # nothing to resume: every part
    assert "in 5 parts" in capsys.readouterr().out
    assert main(["release", *args, "--resume"]) == 2
    assert "nothing to resume" in capsys.readouterr().err


# ------------------------------------------------------------------ issue 42, D2
def _plain_inputs(folder, rows, row_group_size=None):
    """Uncompressed inputs without statistics or dictionaries, of ``rows`` rows each: inputs
    holding other rows have byte-identical footers (the audit's case)."""
    import numpy as np

    folder.mkdir()
    r = np.random.default_rng(3)
    for i, n in enumerate(rows):
        pq.write_table(pa.table({"a": r.uniform(-1, 1, n), "b": r.uniform(-1, 1, n),
                                 "y": r.integers(0, 2, n)}), folder / f"f{i}.parquet",
                       compression="none", write_statistics=False, use_dictionary=False,
                       row_group_size=row_group_size)
    return folder


def _rewrite_keeping_mtime(path, table, **kwargs):
    times = os.stat(path).st_mtime_ns
    size = os.path.getsize(path)
    footer = pq.read_metadata(path)
    pq.write_table(table, path, compression="none", write_statistics=False,
                   use_dictionary=False, **kwargs)
    os.utime(path, ns=(times, times))
    assert os.path.getsize(path) == size and pq.read_metadata(path).num_rows == footer.num_rows


def test_resume_refuses_swapped_inputs_whose_footers_are_identical(tmp_path, monkeypatch):
    """The audit's D2: size, mtime and footer all unchanged after swapping two inputs."""
    raw = _plain_inputs(tmp_path / "raw", [300, 300, 300])
    out = str(tmp_path / "out") + "/"
    fail_part(monkeypatch, 1, lambda: release(raw, out, spec(), FEATURES, "y", resume=True))
    tables = [pq.read_table(raw / f"f{i}.parquet") for i in range(2)]
    from iwpfast.io.filesystem import resolve
    footers = {multipart.input_fingerprint(resolve(str(raw / f"f{i}.parquet")))["parquet_footer"]
               for i in range(2)}
    assert len(footers) == 1                                 # byte-identical footers
    _rewrite_keeping_mtime(raw / "f0.parquet", tables[1])
    _rewrite_keeping_mtime(raw / "f1.parquet", tables[0])   # part 0's rows, released again?
    with pytest.raises(InvalidInputError,
                       match=r"resume: the input '.*f0.parquet' changed .*sampled content differs"):
        release(raw, out, spec(), FEATURES, "y", resume=True)


def test_resume_refuses_rows_moved_between_the_parts_of_one_input(tmp_path, monkeypatch):
    """Rows swapped between two row-group parts of one input: a change a sampled fingerprint
    may miss (here switched off) is found by the parts' row digests, naming input and part."""
    from iwpfast.privacy import fingerprints

    raw = _plain_inputs(tmp_path / "raw", [400, 300], row_group_size=200)
    out = tmp_path / "out"

    def run():
        return release(raw, str(out) + "/", spec(), FEATURES, "y", resume=True, max_part_rows=200)

    monkeypatch.setattr(fingerprints, "sampled_digest", lambda fh, size, key: "missed")
    fail_part(monkeypatch, 2, run)                          # parts 0, 1 (f0's two groups) kept
    assert sorted(n for n in os.listdir(out) if n.startswith("_iwpfast_rows-")) == \
        ["_iwpfast_rows-000000.json", "_iwpfast_rows-000001.json"]
    table = pq.read_table(raw / "f0.parquet")
    order = list(range(400))
    order[10], order[250] = order[250], order[10]           # one row of each part swapped
    _rewrite_keeping_mtime(raw / "f0.parquet", table.take(order), row_group_size=200)
    with pytest.raises(InvalidInputError,
                       match=r"resume: the input '.*f0.parquet' \(part 0, rows 0:200\) changed"):
        run()
    table_back = table.take(list(range(400)))
    _rewrite_keeping_mtime(raw / "f0.parquet", table_back, row_group_size=200)
    res = run()                                              # restored: resumed
    assert res.rows_kept == 400 and res.rows_written == 700
    assert not [n for n in os.listdir(out) if n.startswith(("_iwpfast_rows", "_iwpfast_plan"))]


def test_the_plan_holds_its_key_owner_only_and_a_part_without_digest_is_released_again(
        raw, tmp_path, monkeypatch):
    out = tmp_path / "out"
    fail_part(monkeypatch, 2, lambda: release(raw, str(out) + "/", spec(), FEATURES, "y",
                                               resume=True))
    plan = json.loads((out / "_iwpfast_plan.json").read_bytes())
    assert len(bytes.fromhex(plan["digest_key"])) == 16
    assert all("sampled" in fp for _, fp in plan["fingerprints"])
    assert os.stat(out / "_iwpfast_plan.json").st_mode & 0o777 == 0o600
    os.unlink(out / "_iwpfast_rows-000000.json")            # killed between part and digest
    res = release(raw, str(out) + "/", spec(), FEATURES, "y", resume=True)
    assert res.rows_kept == ROWS[1] and res.rows_written == sum(ROWS)
