"""Kill-and-rerun and interrupt loops (issue 35; the slow suite: ``python -m pytest -m slow
tests/test_kill_rerun.py``): releases killed (SIGKILL) or interrupted (SIGINT) at seeded random
moments, single file, multi-part, Dask and Spark local[2,3], then run again.  After every rerun
no staging file is left and every record is published once; a staging file a killed run left is
decoded first (a partial noisy copy under another key: its difference to the published rows has
sd ~ sqrt(2) sigma) to show that the loop does reach the moment the audit attacked, and it is
owner-only (0600) until the rerun removes it."""
import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from conftest import cli_command as _cli
from conftest import cli_env as _env

from iwpfast.io import open_source
from iwpfast.privacy import ReleaseSpec, release

pytestmark = pytest.mark.slow

EPS = 1.0
SPEC_ARGS = ["--features", "a", "b", "--ranges", "a=-1:1", "b=-1:1", "--epsilon-x", str(EPS),
             "--epsilon-y", "1", "--no-progress"]


def spec():
    return ReleaseSpec(epsilon_x=EPS, delta=1e-5, bound=1.0, epsilon_y=1.0, ranges="a=-1:1,b=-1:1")


def _write_raw(path, n, seed):
    r = np.random.default_rng(seed)
    # the same clipped-free values in every row (|v| <= 0.5 each: the L2 bound 1 never clips),
    # so that two noisy copies of a row differ by noise only
    pq.write_table(pa.table({"a": r.uniform(-0.5, 0.5, n), "b": r.uniform(-0.5, 0.5, n),
                             "y": r.integers(0, 2, n)}), path, row_group_size=20000)


def _staged(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith(".") and ".tmp" in n)


def _decode_partial_ipc(path) -> pa.Table | None:
    """The complete record batches of a partial Arrow IPC file (a killed writer's)."""
    data = open(path, "rb").read()
    if len(data) < 16:
        return None
    batches = []
    try:
        reader = ipc.open_stream(pa.py_buffer(data[8:]))
        for batch in reader:
            batches.append(batch)
    except (pa.ArrowInvalid, OSError):
        pass
    return pa.Table.from_batches(batches) if batches else None



def _kill_while_writing(proc, folder, rng, pause=(0.0, 0.6), start=None):
    """SIGKILL ``proc`` at a random moment: every other try while it writes (a seeded pause
    after its first staging file appears in ``folder``), the others at a random time from
    ``start`` seconds on (possibly before it writes, or after it published)."""
    if start is not None and rng.random() < 0.5:
        time.sleep(rng.uniform(*start))
    else:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            if os.path.isdir(folder) and [n for n in _staged(folder) if n.startswith((".out",
                                                                                      ".part"))]:
                break
            time.sleep(0.01)
        time.sleep(rng.uniform(*pause))
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=60)


# ------------------------------------------------------------------------- single file, SIGKILL
def test_single_file_kill_and_rerun_leaves_no_second_copy(tmp_path):
    raw = tmp_path / "raw.parquet"
    n = 2_000_000
    _write_raw(raw, n, 0)
    out = tmp_path / "out.arrow"
    rng = random.Random(35)
    copies = 0
    sigma = None
    for _ in range(8):
        if out.exists():
            out.unlink()                # the previous try's release: start afresh
        proc = subprocess.Popen(_cli("release", str(raw), str(out), "--record-batch-rows",
                                     "20000", *SPEC_ARGS), env=_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _kill_while_writing(proc, tmp_path, rng, pause=(0.0, 0.5))
        leftover = None
        for name in _staged(tmp_path):
            assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o600
            leftover = _decode_partial_ipc(tmp_path / name)
        if out.exists():
            out.unlink()                # a run that finished before the kill: release again
        with __import__("warnings").catch_warnings():
            __import__("warnings").simplefilter("ignore")
            res = release(raw, out, spec(), ["a", "b"], "y", record_batch_rows=20000)
        assert _staged(tmp_path) == [] and res.rows_written == n
        published = pa.ipc.open_file(out).read_all()
        assert published.num_rows == n
        sigma = res.spec.sigma
        if leftover is not None and leftover.num_rows:
            copies += 1
            k = leftover.num_rows
            diff = (leftover["a"].to_numpy()[:k].astype(float)
                    - published["a"].to_numpy()[:k].astype(float))
            # two independent noises: sd sqrt(2) sigma (+-10% is > 10 standard errors at 2e4)
            assert abs(diff.std() / (np.sqrt(2) * sigma) - 1) < 0.1
    assert copies >= 1, "no kill landed mid-write: the loop tested nothing"


# ------------------------------------------------------------------------- multi-part, SIGKILL
MULTI = textwrap.dedent("""
    import sys
    from iwpfast.privacy import ReleaseSpec, release
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                       ranges="a=-1:1,b=-1:1")
    release(sys.argv[1], sys.argv[2], spec, ["a", "b"], "y", resume=True,
            record_batch_rows=20000, format="ipc")
""")


def _check_published_once(folder, rows):
    import json
    manifest = json.loads((folder / "_iwpfast_manifest.json").read_text())
    assert [p["rows"] for p in manifest["parts"]] == rows
    assert sorted(n for n in os.listdir(folder) if not n.startswith("_")) == \
        sorted(p["path"] for p in manifest["parts"])              # no stray part, no staging
    assert _staged(folder) == []
    assert open_source(folder).num_rows == sum(rows)


def test_multipart_kill_and_resume_leaves_no_second_copy(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    rows = [150_000, 100_000, 200_000, 120_000]
    for i, n in enumerate(rows):
        _write_raw(raw / f"f{i}.parquet", n, i)
    rng = random.Random(36)
    staged_seen = 0
    for k in range(6):
        out = tmp_path / f"out{k}"
        proc = subprocess.Popen([sys.executable, "-c", MULTI, str(raw), str(out) + "/"],
                                env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # on a quiet machine pauses of up to 1 s after the first staging file landed after the
        # publish on all 6 tries (the loop then tested nothing): kill within the first part
        _kill_while_writing(proc, out, rng, pause=(0.0, 0.08), start=(0.5, 2.5))
        if out.exists():
            for name in _staged(out):
                assert stat.S_IMODE(os.stat(out / name).st_mode) == 0o600
                staged_seen += 1
            kept = {n: (out / n).read_bytes() for n in os.listdir(out) if n.startswith("part-")}
        else:
            kept = {}
        if (out / "_iwpfast_manifest.json").exists():
            _check_published_once(out, rows)             # the run finished before the kill
            continue
        # unpublished: no file of the killed run (parts, plan, row digests) is readable by
        # anyone but the owner (issue 42: finished parts were 0644 before the manifest)
        assert not out.exists() or all(stat.S_IMODE(os.stat(out / n).st_mode) & 0o077 == 0
                                       for n in os.listdir(out))
        with __import__("warnings").catch_warnings():
            __import__("warnings").simplefilter("ignore")
            release(raw, str(out) + "/", spec(), ["a", "b"], "y", resume=True,
                    record_batch_rows=20000, format="ipc")
        _check_published_once(out, rows)
        mask = os.umask(0o022)
        os.umask(mask)
        assert {stat.S_IMODE(os.stat(out / n).st_mode) for n in os.listdir(out)} == \
            {0o666 & ~mask}                                          # published: readable
        for name, data in kept.items():
            assert (out / name).read_bytes() == data                 # kept byte for byte
    assert staged_seen >= 1, "no kill landed mid-part: the loop tested nothing"


# ------------------------------------------------------------------------- Dask, SIGKILL
DASK = textwrap.dedent("""
    import sys
    from distributed import Client, LocalCluster
    import iwpfast.distributed as dist
    from iwpfast.privacy import ReleaseSpec
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                       ranges="a=-1:1,b=-1:1")
    if __name__ == "__main__":
        client = Client(LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0"))
        print("ready", flush=True)
        dist.release_files(client, sys.argv[1], sys.argv[2], spec, features=["a", "b"],
                           label="y", resume=True, record_batch_rows=20000)
""")


def test_dask_kill_and_resume_leaves_no_second_copy(tmp_path):
    pytest.importorskip("distributed")
    raw = tmp_path / "raw"
    raw.mkdir()
    rows = [300_000, 200_000, 250_000, 220_000]
    for i, n in enumerate(rows):
        _write_raw(raw / f"f{i}.parquet", n, i)
    script = tmp_path / "dask_release.py"
    script.write_text(DASK)
    rng = random.Random(37)
    unfinished = 0
    for k in range(3):
        out = tmp_path / f"out{k}"
        proc = subprocess.Popen([sys.executable, str(script), str(raw), str(out) + "/"],
                                env=_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.2, 1.5))
        os.killpg(proc.pid, signal.SIGKILL)          # the client, the scheduler and the workers
        proc.wait(timeout=60)
        time.sleep(0.5)
        if out.exists():
            assert all(stat.S_IMODE(os.stat(out / n).st_mode) == 0o600 for n in _staged(out))
        if (out / "_iwpfast_manifest.json").exists():
            _check_published_once(out, rows)
            continue
        unfinished += 1
        if out.exists():                 # the killed run's finished parts: owner-only
            assert all(stat.S_IMODE(os.stat(out / n).st_mode) & 0o077 == 0
                       for n in os.listdir(out))
        with __import__("warnings").catch_warnings():
            __import__("warnings").simplefilter("ignore")
            release(raw, str(out) + "/", spec(), ["a", "b"], "y", resume=True,
                    record_batch_rows=20000)
        _check_published_once(out, rows)
    assert unfinished >= 1, "every run finished before its kill: the loop tested nothing"


# ------------------------------------------------------------------------- Spark, a killed task
def test_spark_killed_task_is_retried_and_leaves_no_second_copy(tmp_path):
    """A Python worker SIGKILLed in the middle of partition 1 (first attempt only); Spark
    (local[2,3]: up to 3 attempts) retries the task on rows in another order; the release is
    published with every row once and no staging file."""
    pytest.importorskip("pyspark")
    import pandas as pd
    from pyspark.sql import SparkSession

    from iwpfast.spark import release_dataframe

    session = (SparkSession.builder.master("local[2,3]").appName("iwpfast-kill")
               .config("spark.ui.enabled", "false").getOrCreate())
    try:
        r = np.random.default_rng(0)
        n = 200_000
        pdf = pd.DataFrame({"a": r.uniform(-0.5, 0.5, n), "b": r.uniform(-0.5, 0.5, n),
                            "y": r.integers(0, 2, n)})
        df = session.createDataFrame(pdf).repartition(2)
        marker = str(tmp_path / "killed-once")
        out = tmp_path / "rel"

        def writer_pid(staged: str):
            """The process holding ``staged`` open: the Python worker writing the part."""
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    fds = os.listdir(f"/proc/{pid}/fd")
                    if any(os.readlink(f"/proc/{pid}/fd/{fd}") == staged for fd in fds):
                        return int(pid)
                except OSError:
                    continue
            return None

        def killer(batches):
            from pyspark import TaskContext
            ctx = TaskContext.get()
            order = list(batches)
            if ctx.partitionId() == 1 and ctx.attemptNumber() == 0 and not os.path.exists(marker):
                open(marker, "w").close()
                yield from order[: len(order) // 2]
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:   # the part's writer stages what it got
                    staged = [n for n in os.listdir(out) if n.startswith(".part-000001")]
                    if staged and os.path.getsize(out / staged[0]) > 0:
                        break
                    time.sleep(0.05)
                pid = writer_pid(str(out / staged[0])) if staged else None
                os.kill(pid or os.getpid(), signal.SIGKILL)       # the writing worker
                time.sleep(5)
            if ctx.attemptNumber() > 0:
                order = order[::-1]              # the retry sees the rows in another order
            yield from order

        killed = df.mapInArrow(killer, df.schema)
        with __import__("warnings").catch_warnings():
            __import__("warnings").simplefilter("ignore")
            manifest = release_dataframe(killed, str(out) + "/", spec(), features=["a", "b"],
                                         label="y", record_batch_rows=10000)
        assert os.path.exists(marker)                                 # the kill happened
        assert manifest["row_count"] == n
        assert _staged(out) == []
        assert sorted(os.listdir(out)) == ["_iwpfast_manifest.json", "part-000000.parquet",
                                           "part-000001.parquet"]
        assert open_source(out).num_rows == n
    finally:
        session.stop()


# ------------------------------------------------------------------------- SIGINT at random times
def test_sigint_at_random_times_ends_in_130_with_nothing_published(tmp_path):
    raw = tmp_path / "raw.parquet"
    _write_raw(raw, 1_500_000, 1)
    out = tmp_path / "out.parquet"
    rng = random.Random(38)
    interrupted = 0
    for _ in range(12):
        if out.exists():
            out.unlink()
        proc = subprocess.Popen(_cli("release", str(raw), str(out), "--record-batch-rows",
                                     "100000", *SPEC_ARGS), env=_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.0, 1.4))
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)         # a hang fails here
        err = err.decode()
        assert _staged(tmp_path) == []
        if proc.returncode == 0:                       # published before the signal: complete
            assert open_source(out).num_rows == 1_500_000
            continue
        # -2: killed by SIGINT before the CLI started (the shell shows 130)
        assert proc.returncode in (130, -signal.SIGINT), err
        assert not out.exists()
        if proc.returncode == 130:
            interrupted += 1
            assert err.strip().splitlines()[-1] == "iwpfast: interrupted"
            assert "Traceback" not in err and "warning" not in err, err
    assert interrupted >= 6


def test_sigint_during_a_fit_leaves_no_model(tmp_path):
    raw = tmp_path / "raw.parquet"
    _write_raw(raw, 1_000_000, 2)
    rel = tmp_path / "rel.parquet"
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore")
        release(raw, rel, spec(), ["a", "b"], "y")
    model = tmp_path / "m.json"
    rng = random.Random(39)
    for _ in range(5):
        if model.exists():
            model.unlink()
        proc = subprocess.Popen(_cli("fit", str(rel), "--out", str(model), "--no-progress",
                                     "--alpha", "1", "--learning-rate", "0.01"), env=_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.2, 2.0))
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert _staged(tmp_path) == []
        if proc.returncode == 0:
            assert model.exists()
            continue
        assert proc.returncode in (130, -signal.SIGINT), err.decode()
        assert not model.exists()
