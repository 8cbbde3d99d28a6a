"""No second noisy copy (issue 35): the audit's four ways to leave two independently noised copies
of the same records readable -- a single-file re-run next to a killed run's staging file, a
resume over changed inputs, a resumed run next to the killed run's staging files, a Spark-style
folder published with a killed attempt's staging file -- each reproduced (every test here failed
on the code before), and the staging files owner-only (0600)."""
import os
import stat

import pyarrow.parquet as pq
import pytest

from iwpfast.exceptions import InvalidInputError
from iwpfast.io import open_source
from iwpfast.io.writer import AtomicArrowWriter
from iwpfast.privacy import ReleaseSpec, multipart, release
from tests.conftest import fail_part, write_raw_parts

FEATURES = ["a", "b"]
ROWS = [700, 500, 800]


def spec():
    return ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                       ranges="a=-1:1,b=-1:1")


@pytest.fixture
def raw(tmp_path):
    return write_raw_parts(tmp_path / "raw", ROWS)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _killed_writes(monkeypatch, index=None):
    """Writes that die after their rows are staged (what a SIGKILL leaves): the commit of the
    file (or of part ``index``) fails and nothing removes its staging file."""
    commit, abort = AtomicArrowWriter.commit, AtomicArrowWriter.abort

    def dying_commit(self, metadata=None):
        if index is None or self.destination.name.startswith(f"part-{index:06d}"):
            if self._writer is not None:
                self._writer.abort()        # the rows reach the disk, as a killed run's did
                self._writer = None
            self._dead = True
            raise RuntimeError("killed")
        return commit(self, metadata)

    def no_abort(self):
        if not getattr(self, "_dead", False):
            abort(self)

    monkeypatch.setattr(AtomicArrowWriter, "commit", dying_commit)
    monkeypatch.setattr(AtomicArrowWriter, "abort", no_abort)


def _staged(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith(".") and ".tmp" in n)


# ------------------------------------------------------------------ 1. single-file re-run
def test_a_single_file_rerun_removes_the_killed_runs_staging_file(raw, tmp_path, monkeypatch):
    out = tmp_path / "out.arrow"
    with monkeypatch.context() as m:
        _killed_writes(m)
        with pytest.raises(RuntimeError, match="killed"):
            release(raw / "f0.parquet", out, spec(), FEATURES, "y")
    left = _staged(tmp_path)
    assert len(left) == 1 and left[0].startswith(".out.arrow.")     # a noisy partial copy
    assert _mode(tmp_path / left[0]) == 0o600                        # nobody else reads it
    with pytest.warns(UserWarning, match="removed 1 staging file"):
        release(raw / "f0.parquet", out, spec(), FEATURES, "y")
    assert _staged(tmp_path) == []                                   # no second copy remains
    assert _mode(out) == 0o666 & ~_umask()                           # published: a plain file
    assert open_source(out).num_rows == ROWS[0]


def test_only_the_destinations_own_staging_names_are_removed(raw, tmp_path):
    keep = [".out.arrow.notours.tmp", ".other.arrow.0123456789ab.tmp", ".out.arrow.0123456789ab"]
    for name in keep:
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / ".out.arrow.0123456789ab.tmp2").write_bytes(b"noisy")   # an IPC rewrite's
    with pytest.warns(UserWarning, match="removed 1 staging file"):
        release(raw / "f0.parquet", tmp_path / "out.arrow", spec(), FEATURES, "y")
    assert _staged(tmp_path) == sorted(n for n in keep if ".tmp" in n)


# ------------------------------------------------------------------ 2. resume over changed inputs
def _failed_resumable_run(raw, out, monkeypatch, failing=2, seed=None):
    fail_part(monkeypatch, failing,
              lambda: release(raw, out, spec(), FEATURES, "y", resume=True, seed=seed))


def test_a_resume_over_swapped_inputs_is_refused_naming_the_input(raw, tmp_path, monkeypatch):
    out = str(tmp_path / "out") + "/"
    _failed_resumable_run(raw, out, monkeypatch)          # parts 0 and 1 kept, unpublished
    a, b = (raw / "f0.parquet").read_bytes(), (raw / "f1.parquet").read_bytes()
    times = {i: os.stat(raw / f"f{i}.parquet").st_mtime_ns for i in range(2)}
    (raw / "f0.parquet").write_bytes(b)
    (raw / "f1.parquet").write_bytes(a)                    # the audit's swap
    with pytest.raises(InvalidInputError, match=r"resume: the input '.*f0.parquet' changed .*"
                                                r"size \d+ -> \d+ bytes.*footer differs.*--overwrite"):
        release(raw, out, spec(), FEATURES, "y", resume=True)
    # a copy of a kept input into one not yet released is the same duplication
    for i, data in enumerate((a, b)):
        (raw / f"f{i}.parquet").write_bytes(data)
        os.utime(raw / f"f{i}.parquet", ns=(times[i], times[i]))    # restored as they were
    (raw / "f2.parquet").write_bytes(a)
    with pytest.raises(InvalidInputError, match="f2.parquet' changed"):
        release(raw, out, spec(), FEATURES, "y", resume=True)


def test_a_resumed_run_reports_the_rows_it_released(raw, tmp_path, monkeypatch):
    out = str(tmp_path / "out") + "/"
    _failed_resumable_run(raw, out, monkeypatch)
    res = release(raw, out, spec(), FEATURES, "y", resume=True)
    assert res.rows_written == sum(ROWS) and res.rows_kept == ROWS[0] + ROWS[1]
    head = res.summary().splitlines()[0]
    assert head.startswith(f"released {ROWS[2]:,} rows in 1 part to ")
    assert f"kept {ROWS[0] + ROWS[1]:,} rows in 2 parts of the unfinished run" in head
    assert res.rows_per_s == pytest.approx(ROWS[2] / res.elapsed_s)


# ------------------------------------------------------------------ 3. the killed run's staging
def test_a_resumed_run_removes_the_killed_runs_staging_before_drawing_noise(raw, tmp_path,
                                                                            monkeypatch):
    out = tmp_path / "out"
    with monkeypatch.context() as m:
        _killed_writes(m, index=2)                          # killed mid-part 2
        with pytest.raises(RuntimeError, match="killed"), pytest.warns(UserWarning):
            release(raw, str(out) + "/", spec(), FEATURES, "y", resume=True)
    left = [n for n in _staged(out) if n.startswith(".part-000002")]
    assert len(left) == 1 and _mode(out / left[0]) == 0o600          # unreadable by others
    from iwpfast.privacy import randomness
    seen = []
    draw = randomness.NoiseKey.from_os_entropy

    def drawn(*args, **kwargs):
        seen.append(_staged(out))
        return draw(*args, **kwargs)

    monkeypatch.setattr(randomness.NoiseKey, "from_os_entropy", staticmethod(drawn))
    res = release(raw, str(out) + "/", spec(), FEATURES, "y", resume=True)
    assert seen and all(s == [] for s in seen)             # gone before the new key is drawn
    assert res.rows_written == sum(ROWS) and _staged(out) == []


# ------------------------------------------------------------------ 4. a folder published by hand
def test_write_manifest_removes_a_killed_attempts_staging_file(raw, tmp_path):
    """The Spark recipe: parts written by ``release_batches`` (one per partition), a retried
    task's killed first attempt left a staging file; ``write_manifest`` publishes without it."""
    from iwpfast.io.parts import write_manifest
    from iwpfast.privacy.multipart import new_release_id, release_batches

    out = tmp_path / "out"
    out.mkdir()
    rid = new_release_id()
    for i in range(2):
        table = pq.read_table(raw / f"f{i}.parquet")
        release_batches(table.to_batches(), out, spec(), features=FEATURES, label="y", index=i,
                        release_id=rid, seed=5)
    leftover = out / ".part-000001.parquet.0123456789ab.tmp"
    leftover.write_bytes((out / "part-000001.parquet").read_bytes())   # a whole noisy copy
    write_manifest(out)
    assert sorted(os.listdir(out)) == ["_iwpfast_manifest.json", "part-000000.parquet",
                                       "part-000001.parquet"]
    # a part written twice under two names: refused, nothing published
    os.unlink(out / "_iwpfast_manifest.json")
    (out / "part-000002.parquet").write_bytes((out / "part-000001.parquet").read_bytes())
    with pytest.raises(Exception, match="both part 1"):
        write_manifest(out)
    assert "_iwpfast_manifest.json" not in os.listdir(out)


def test_staging_files_are_owner_only_until_published(raw, tmp_path, monkeypatch):
    """Every staging file of a multi-part release -- parts, plan, manifest -- is 0600 until it
    is renamed into place; the manifest then gets the mode of any new file, the parts only once
    the manifest is there (issue 42), the plan never (it is removed)."""
    from iwpfast.io import filesystem, writer
    out = tmp_path / "out"
    modes = {}
    publish_mode = filesystem.make_public_mode

    def watched(path):
        name = os.path.basename(path)
        name = name.split(".")[1] if name.startswith(".") else name.split(".")[0]
        modes[name] = (_mode(path), (out / "_iwpfast_manifest.json").exists())
        publish_mode(path)

    monkeypatch.setattr(filesystem, "make_public_mode", watched)
    monkeypatch.setattr(writer, "make_public_mode", watched)
    release(raw, str(out) + "/", spec(), FEATURES, "y")
    assert modes == {"_iwpfast_manifest": (0o600, False),
                     **{f"part-00000{i}": (0o600, True) for i in range(3)}}
    assert {_mode(out / n) for n in os.listdir(out)} == {0o666 & ~_umask()}


# ------------------------------------------------------------------ issue 42, D1
def _unreadable_by_others(folder) -> bool:
    return all(_mode(folder / n) & 0o077 == 0 for n in os.listdir(folder))


def test_a_killed_runs_parts_stay_owner_only_until_the_manifest_publishes_them(raw, tmp_path,
                                                                             monkeypatch):
    """The audit's D1: finished parts were renamed to 0644 before the manifest existed."""
    out = tmp_path / "out"
    _failed_resumable_run(raw, str(out) + "/", monkeypatch)          # parts 0 and 1 finished
    assert sorted(n for n in os.listdir(out) if n.startswith("part-")) == \
        ["part-000000.parquet", "part-000001.parquet"]
    assert _unreadable_by_others(out)        # parts, plan (its key) and row digests: 0600
    with pytest.raises(Exception, match=r"--resume.*cannot be retracted"):
        open_source(out)                     # unpublished: the reader says resume or delete
    res = release(raw, str(out) + "/", spec(), FEATURES, "y", resume=True)
    assert res.rows_kept == ROWS[0] + ROWS[1]
    # published: the manifest and the parts only (no plan, no digest), readable as the umask says
    assert sorted(os.listdir(out)) == ["_iwpfast_manifest.json"] + [
        f"part-00000{i}.parquet" for i in range(3)]
    assert {_mode(out / n) for n in os.listdir(out)} == {0o666 & ~_umask()}


def test_the_refusal_of_an_unfinished_folder_says_resume_or_delete(raw, tmp_path, monkeypatch):
    out = str(tmp_path / "out") + "/"
    _failed_resumable_run(raw, out, monkeypatch)
    with pytest.raises(InvalidInputError) as refused:
        release(raw, out, spec(), FEATURES, "y")
    said = str(refused.value)
    # never the bare "--overwrite", which redrew the parts with a new key: resume, or delete
    assert "resume=True (CLI: --resume)" in said and "keeps its finished parts" in said
    assert "deletes them before any new part is written" in said
    assert "cannot be retracted" in said


def test_a_refused_multipart_rerun_removes_the_stopped_runs_staging_files(raw, tmp_path,
                                                                          monkeypatch):
    """A rerun into a folder that a stopped run left (finished parts, a staging file) is
    refused, and, since it holds the folder's lock (no run is alive there), removes the staging
    file, a partial noisy copy; the finished parts stay for a resume."""
    out = tmp_path / "out"
    _failed_resumable_run(raw, str(out) + "/", monkeypatch)
    staged = out / ".part-000002.parquet.0123456789ab.tmp"       # what a SIGKILL leaves
    staged.write_bytes(b"noisy rows")
    os.chmod(staged, 0o600)
    parts = sorted(n for n in os.listdir(out) if n.startswith("part-"))
    with pytest.raises(InvalidInputError, match="a release run was stopped there") as refused, \
            pytest.warns(UserWarning, match="removed 1 staging file"):
        release(raw, str(out) + "/", spec(), FEATURES, "y")
    assert "resume=True" in str(refused.value)
    assert _staged(out) == []
    assert sorted(n for n in os.listdir(out) if n.startswith("part-")) == parts
    # the resume the refusal names then publishes
    release(raw, str(out) + "/", spec(), FEATURES, "y", resume=True)
    assert (out / "_iwpfast_manifest.json").exists()


def test_a_folder_another_release_is_writing_into_is_refused_and_left_alone(raw, tmp_path,
                                                                             monkeypatch):
    """While a release runs into a folder (it holds the folder's lock), a second run is refused
    and touches nothing there, not even the running one's staging files."""
    from iwpfast.io.filesystem import BUSY, FolderLock

    out = tmp_path / "out"
    _failed_resumable_run(raw, str(out) + "/", monkeypatch)
    staged = out / ".part-000002.parquet.0123456789ab.tmp"
    staged.write_bytes(b"being written")
    held = FolderLock.take(str(out))
    assert isinstance(held, FolderLock)
    assert FolderLock.take(str(out)) == BUSY
    try:
        before = sorted(os.listdir(out))
        for kw in ({}, {"overwrite": True}, {"resume": True}):
            with pytest.raises(InvalidInputError, match="a release is running into"):
                release(raw, str(out) + "/", spec(), FEATURES, "y", **kw)
            assert sorted(os.listdir(out)) == before
    finally:
        held.release()
    assert isinstance(FolderLock.take(str(out)), FolderLock)     # released: free again


def test_overwrite_deletes_the_unfinished_runs_parts_before_writing_any(raw, tmp_path,
                                                                      monkeypatch):
    out = tmp_path / "out"
    _failed_resumable_run(raw, str(out) + "/", monkeypatch)
    seen = []
    original = multipart.release_file

    def first_part_sees(source, destination, *args, **kwargs):
        seen.append(sorted(n for n in os.listdir(out) if n.startswith("part-")))
        return original(source, destination, *args, **kwargs)

    monkeypatch.setattr(multipart, "release_file", first_part_sees)
    with pytest.warns(UserWarning, match="removed 2 file"):
        release(raw, str(out) + "/", spec(), FEATURES, "y", overwrite=True)
    assert seen[0] == []                     # the old parts went before the first new one


def test_a_refused_single_file_rerun_removes_the_killed_runs_staging_file(raw, tmp_path,
                                                                        monkeypatch):
    """The audit's D8: a rerun refused (the destination exists) left the killed run's
    staging file, a noisy partial copy, on disk."""
    out = tmp_path / "out.arrow"
    release(raw / "f0.parquet", out, spec(), FEATURES, "y")
    with monkeypatch.context() as m:
        _killed_writes(m)
        with pytest.raises(RuntimeError, match="killed"):
            release(raw / "f0.parquet", out, spec(), FEATURES, "y", overwrite=True)
    assert len(_staged(tmp_path)) == 1
    (tmp_path / ".other.arrow.0123456789ab.tmp").write_bytes(b"x")   # another output's
    with pytest.warns(UserWarning, match="removed 1 staging file"), \
            pytest.raises(InvalidInputError, match="exists"):
        release(raw / "f0.parquet", out, spec(), FEATURES, "y")
    assert _staged(tmp_path) == [".other.arrow.0123456789ab.tmp"]
    assert open_source(out).num_rows == ROWS[0]          # the published file untouched


def test_parts_written_part_by_part_are_owner_only_until_write_manifest(raw, tmp_path):
    """The Spark recipe's parts (``release_batches``) too."""
    from iwpfast.io.parts import write_manifest
    from iwpfast.privacy.multipart import new_release_id, release_batches

    out = tmp_path / "out"
    out.mkdir()
    rid = new_release_id()
    for i in range(2):
        release_batches(pq.read_table(raw / f"f{i}.parquet").to_batches(), out, spec(),
                        features=FEATURES, label="y", index=i, release_id=rid)
    assert {_mode(out / n) for n in os.listdir(out)} == {0o600}
    write_manifest(out)
    assert {_mode(out / n) for n in os.listdir(out)} == {0o666 & ~_umask()}
