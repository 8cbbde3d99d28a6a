"""Batch jobs a scheduler can run (issue 47, items 2, 3, 7 and 9): SIGTERM and SIGHUP stop a
command as SIGINT does, exit statuses by class of failure, a checkpoint removed once its fit
succeeded, and the messages a data engineer met (a broken pipe on a report, EFBIG, a parent that
is a file, a query parameter pyarrow rejects, the summary printed twice, "done" before
"interrupted", progress lines without their command, a bar of carriage returns in a file, help
examples without their continuations, ``fit --features x0=-1:1``, a silent class-weight compile,
Spark workers without pyarrow).  Each test failed on the code before."""
import errno
import os
import signal
import subprocess
import time
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import cli_command as _cli
from conftest import cli_env as _env

import iwpfast
from iwpfast import exceptions as exc
from iwpfast.cli import exit_status, main

RELEASE = ["--features", "a", "b", "--ranges", "a=-1:1", "b=-1:1", "--epsilon-x", "1",
           "--epsilon-y", "1", "--no-progress"]



def _staged(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith(".") and ".tmp" in n)


def _write_raw(path, n, seed=0, nan_at=None):
    r = np.random.default_rng(seed)
    a = r.uniform(-0.5, 0.5, n)
    if nan_at is not None:
        a[nan_at] = np.nan
    pq.write_table(pa.table({"a": a, "b": r.uniform(-0.5, 0.5, n), "y": r.integers(0, 2, n)}),
                   path, row_group_size=20000)


@pytest.fixture
def raw(tmp_path):
    _write_raw(tmp_path / "raw.parquet", 3000)
    return tmp_path / "raw.parquet"


@pytest.fixture
def rel(raw, tmp_path):
    assert main(["release", str(raw), str(tmp_path / "rel.parquet"), "--seed", "1", *RELEASE]) == 0
    return tmp_path / "rel.parquet"


# ------------------------------------------------------------------ item 3: exit status by class
def test_exit_status_table_maps_each_class_in_one_place():
    assert exit_status(exc.InvalidInputError("x")) == 2
    assert exit_status(exc.BadDataError("x")) == 65
    assert exit_status(exc.ReleaseSpecError("x")) == 65
    assert exit_status(exc.MissingInputError("x")) == 66
    assert exit_status(exc.ServiceUnavailableError("x")) == 69
    assert exit_status(exc.InternalError("x")) == 70
    assert exit_status(exc.OutputNotCreatedError("x")) == 73
    assert exit_status(exc.TemporaryFailureError("x")) == 75
    assert exit_status(exc.Interrupted(signal.SIGTERM)) == 143
    assert exit_status(KeyboardInterrupt()) == 130
    assert exit_status(OSError(errno.ENOENT, "no")) == 66
    assert exit_status(OSError(errno.EFBIG, "File too large")) == 73
    assert exit_status(ConnectionRefusedError(errno.ECONNREFUSED, "refused")) == 69
    assert exit_status(OSError("AWS Error NETWORK_CONNECTION during HeadObject operation: "
                               "curlCode: 7, Couldn't connect to server")) == 69
    assert exit_status(OSError("AWS Error SLOW_DOWN during PutObject operation")) == 75
    assert exit_status(TimeoutError("timed out")) == 75
    assert exit_status(OSError(errno.EACCES, "denied")) == 77
    assert exit_status(ZeroDivisionError()) == 70
    # the subclasses stay InvalidInputErrors: existing `except InvalidInputError` keeps working
    for cls in (exc.BadDataError, exc.MissingInputError, exc.OutputNotCreatedError):
        assert issubclass(cls, exc.InvalidInputError) and issubclass(cls, ValueError)
    assert issubclass(exc.Interrupted, KeyboardInterrupt)


def test_a_cli_run_of_each_class_gives_its_status(raw, tmp_path, capsys, monkeypatch):
    out = str(tmp_path / "o.parquet")
    # usage: a bad parameter
    assert main(["release", str(raw), out, *RELEASE[:-3], "--epsilon-y", "-1",
                 "--no-progress"]) == 2
    # bad data: a NaN in a row (it was 2, as a usage error)
    _write_raw(tmp_path / "nan.parquet", 500, nan_at=123)
    assert main(["release", str(tmp_path / "nan.parquet"), out, *RELEASE]) == 65
    assert "row 123" in capsys.readouterr().err
    # missing input
    assert main(["release", str(tmp_path / "nowhere.parquet"), out, *RELEASE]) == 66
    assert main(["info", str(tmp_path / "nowhere.parquet")]) == 66
    # cannot create the output: its folder is missing
    assert main(["release", str(raw), str(tmp_path / "no" / "o.parquet"), *RELEASE]) == 73
    capsys.readouterr()
    import iwpfast.commands.info as info

    def failing(error):
        def run(args):
            raise error
        return run

    for error, status in ((ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), 69),
                          (OSError("AWS Error SLOW_DOWN during GetObject operation: Please "
                                   "reduce your request rate"), 75),
                          (exc.Interrupted(signal.SIGHUP), 129)):
        monkeypatch.setattr(info, "run", failing(error))
        assert main(["info", str(raw)]) == status, error
    # internal: a bug is 70, with its traceback
    monkeypatch.setattr(info, "run", failing(ZeroDivisionError("division by zero")))
    assert main(["info", str(raw)]) == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and "internal error" in err and "report" in err


def test_help_documents_the_exit_statuses(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for code in ("65", "66", "69", "70", "73", "75", "128+n"):
        assert code in text
    doc = open(os.path.join(os.path.dirname(__file__), "..", "docs", "usage.md")).read()
    assert "| 65 | bad data" in doc and "PYSPARK_PYTHON" in doc


# ------------------------------------------------------------------ item 2: SIGTERM and SIGHUP
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_a_release_as_sigint_does(tmp_path, sig):
    raw = tmp_path / "raw.parquet"
    _write_raw(raw, 1_500_000, 1)
    out = tmp_path / "out.parquet"
    proc = subprocess.Popen(_cli("release", str(raw), str(out), "--record-batch-rows", "50000",
                                 *RELEASE[:-1], "--progress", "log", "--progress-every", "0.05"),
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and not _staged(tmp_path):
        time.sleep(0.01)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    err = err.decode()
    assert _staged(tmp_path) == []                  # the staging file removed (it was left)
    assert proc.returncode == 128 + sig, err       # 143 / 129: it was -15 / -1 with the file
    assert not out.exists()
    assert err.strip().splitlines()[-1] == "iwpfast: interrupted"
    assert "done in" not in err and "Traceback" not in err, err
    # the identical command then runs
    assert subprocess.run(_cli("release", str(raw), str(out), *RELEASE), env=_env(),
                          capture_output=True, timeout=120).returncode == 0


@pytest.mark.slow
def test_sigterm_multipart_release_with_resume_is_resumed_by_the_same_command(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(4):
        _write_raw(raw / f"f{i}.parquet", 400_000, i)
    out = str(tmp_path / "out") + "/"
    command = _cli("release", str(raw), out, "--resume", "--record-batch-rows", "20000",
                   *RELEASE)
    proc = subprocess.Popen(command, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and not (
            os.path.isdir(out) and any(n.startswith("part-") for n in os.listdir(out))):
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the release finished before the signal")
    assert proc.returncode == 143, err.decode()
    assert _staged(out) == [] and "_iwpfast_manifest.json" not in os.listdir(out)
    again = subprocess.run(command, env=_env(), capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr.decode()
    from iwpfast.io import open_source
    assert open_source(out).num_rows == 1_600_000
    # without --resume, the refusal of an unfinished run's files names the command that resumes
    from iwpfast.commands.release import resume_named

    class Args:
        resume = overwrite = False

    from iwpfast import commands
    os.makedirs(tmp_path / "stale")
    (tmp_path / "stale" / "_iwpfast_plan.json").write_text("{}")
    commands.COMMAND_LINE[:] = ["release", "raw/", "stale/"]
    with pytest.raises(exc.InvalidInputError, match=r"resumes it: iwpfast release raw/ stale/ "
                                                    r"--resume$"):
        with resume_named(Args, str(tmp_path / "stale") + "/"):
            raise exc.InvalidInputError("holds 1 file(s) of another release run")


@pytest.mark.slow
def test_sighup_during_a_checkpointed_fit_checkpoints_and_names_the_resume(tmp_path):
    raw = tmp_path / "raw.parquet"
    _write_raw(raw, 2_000_000, 2)
    rel = tmp_path / "rel.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iwpfast.release(raw, rel, iwpfast.ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0,
                                                      epsilon_y=1.0, ranges="a=-1:1,b=-1:1"),
                        ["a", "b"], "y")
    ck = tmp_path / "fit.ckpt"
    command = ["fit", str(rel), "--out", str(tmp_path / "m.json"), "--alpha", "1",
               "--learning-rate", "0.001", "--variance-cap", "2", "--checkpoint", str(ck),
               "--chunk-rows", "20000",
               "--progress", "log", "--progress-every", "0.05"]
    proc = subprocess.Popen(_cli(*command), env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    for line in proc.stderr:                        # the pass has started
        if b"rows of" in line:
            break
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=120)
    err = err.decode()
    if proc.returncode == 0:
        pytest.skip("the fit finished before the signal")
    assert proc.returncode == 129, err
    assert ck.exists() and not (tmp_path / "m.json").exists()
    assert "to continue: iwpfast fit" in err and "--resume" in err
    assert err.strip().splitlines()[-1] == "iwpfast: interrupted"
    resumed = subprocess.run(_cli(*command, "--resume"), env=_env(), capture_output=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert not ck.exists()                          # served: removed (item 7)


# ------------------------------------------------------------------ item 7: checkpoints
def test_a_checkpoint_is_removed_after_its_fit_succeeds_unless_kept(rel, tmp_path, capsys):
    ck = tmp_path / "run.ckpt"
    kw = dict(alpha=1.0, learning_rate=0.01, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iwpfast.IWPClassifier(**kw).fit(rel, checkpoint=ck, checkpoint_every=1000)
        assert not ck.exists()
        iwpfast.IWPClassifier(**kw).fit(rel, checkpoint=ck, checkpoint_every=1000,
                                        keep_checkpoint=True)
        assert ck.exists()
    ck.unlink()
    base = ["fit", str(rel), "--alpha", "1", "--learning-rate", "0.01", "--no-progress",
            "--checkpoint", str(ck)]
    # the same command twice: it was refused the second time ("checkpoint file exists already")
    for _ in range(2):
        assert main([*base, "--out", str(tmp_path / "m.json"), "--overwrite"]) == 0
        assert not ck.exists()
    assert main([*base, "--out", str(tmp_path / "m.json"), "--overwrite", "--keep-checkpoint"]) == 0
    assert ck.exists()
    assert main(["tune", str(rel), "--out", str(tmp_path / "t.json"), "--no-progress",
                 "--checkpoint", str(tmp_path / "t.ckpt"), "--keep-checkpoint"]) == 0
    assert (tmp_path / "t.ckpt").exists()


# ------------------------------------------------------------------ item 9: messages
@pytest.mark.parametrize("command", [["info", "{rel}"], ["plan", "--epsilon-x", "1", "--features",
                                                         "3"], ["info", "{rel}", "--json"]])
def test_a_report_into_a_closed_pipe_ends_quietly(rel, command):
    read, write = os.pipe()
    os.close(read)                                  # the reader is gone (`| head -1`)
    try:
        run = subprocess.run(_cli(*[c.format(rel=rel) for c in command]), stdout=write,
                             stderr=subprocess.PIPE, env=_env(), timeout=120)
    finally:
        os.close(write)
    # it was "[Errno 32] Broken pipe; check the path or URI, the network and the credentials", 2
    assert run.returncode == 141 and run.stderr == b"", run.stderr.decode()


def test_efbig_and_enospc_get_their_own_advice(raw, tmp_path, capsys, monkeypatch):
    def too_large(self, *args, **kwargs):
        raise OSError(errno.EFBIG, "File too large")

    monkeypatch.setattr(pq.ParquetWriter, "write_batch", too_large)
    monkeypatch.setattr(pq.ParquetWriter, "write_table", too_large)
    assert main(["release", str(raw), str(tmp_path / "o.parquet"), *RELEASE]) == 73
    err = capsys.readouterr().err
    assert "File too large" in err and "ulimit -f" in err and "network" not in err, err


def test_a_destination_whose_parent_is_a_file_says_so(raw, rel, tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    for args in (["release", str(raw), str(tmp_path / "afile" / "o.parquet"), *RELEASE],
                 ["release", str(raw), str(tmp_path / "afile" / "sub") + "/", *RELEASE],
                 ["fit", str(rel), "--out", str(tmp_path / "afile" / "m.json"), "--no-progress"]):
        assert main(args) == 73
        err = capsys.readouterr().err
        assert "which is a file, not a folder" in err and "does not exist" not in err, err


def test_a_query_parameter_pyarrow_rejects_is_named(raw, capsys):
    assert main(["release", str(raw), "s3://bucket/x.parquet?secret_key=abc", *RELEASE]) == 2
    err = capsys.readouterr().err
    assert "query parameter 'secret_key'" in err and "s3fs" not in err and "abc" not in err, err


def test_the_release_summary_is_printed_once(raw, tmp_path, capsys):
    assert main(["release", str(raw), str(tmp_path / "o.parquet"), *RELEASE[:-1],
                 "--progress", "log"]) == 0
    captured = capsys.readouterr()
    both = captured.out + captured.err
    assert both.count("released 3,000 rows to") == 1 and "released 3,000" in captured.out


def test_progress_lines_carry_the_command_and_stop_is_not_done(monkeypatch, caplog):
    import logging

    from iwpfast import progress
    monkeypatch.setattr(progress, "LOG_INTERVAL_S", 0.0)
    progress.set_command("release")
    try:
        with caplog.at_level(logging.INFO, logger="iwpfast"):
            bar = progress.progress_bar("log", total=100, desc="release")
            bar.update(10)
            try:
                try:
                    raise KeyboardInterrupt
                finally:
                    bar.close()                 # closed while the interrupt passes
            except KeyboardInterrupt:
                pass
    finally:
        progress.set_command(None)
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith("iwpfast release: 10 rows of 100")
    assert "stopped after" in messages[-1] and not any("done in" in m for m in messages)


def test_progress_bar_to_a_file_writes_lines(raw, tmp_path):
    with open(tmp_path / "err.txt", "wb") as err:
        run = subprocess.run(_cli("release", str(raw), str(tmp_path / "o.parquet"),
                                  *RELEASE[:-1], "--progress", "bar", "--record-batch-rows",
                                  "1000"), stderr=err, stdout=subprocess.DEVNULL, env=_env(),
                             timeout=120)
    assert run.returncode == 0
    text = (tmp_path / "err.txt").read_bytes()
    assert b"\r" not in text and b"iwpfast release: 3,000 rows of 3,000" in text, text


def test_release_help_examples_keep_their_continuations(capsys):
    with pytest.raises(SystemExit):
        main(["release", "--help"])
    lines = capsys.readouterr().out.splitlines()
    for before, line in zip(lines, lines[1:], strict=False):
        if line.startswith("      --") and before.lstrip().startswith(("iwpfast", "--")):
            assert before.endswith("\\"), (before, line)


def test_fit_takes_features_with_ranges_as_release_does(raw, tmp_path, capsys):
    assert main(["fit", str(raw), "--features", "a=-1:1", "b=-1:1", "--label", "y",
                 "--out", str(tmp_path / "m.json"), "--alpha", "1", "--learning-rate", "0.01",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "clean baseline" in out and "features: a, b" in out


def test_a_first_class_weight_fit_says_it_compiles(rel, tmp_path, capsys, monkeypatch):
    from iwpfast._kernels import _options
    monkeypatch.setattr(_options, "CACHE_FOLDER", tmp_path / "cache")
    (tmp_path / "cache").mkdir()
    monkeypatch.setattr(_options, "cache_is_empty", lambda: False)
    base = ["fit", str(rel), "--alpha", "1", "--learning-rate", "0.01", "--progress", "log",
            "--class-weight", "balanced", "--overwrite", "--out", str(tmp_path / "m.json")]
    # once (NUMBA_DISABLE_JIT=1 compiles nothing, so says nothing)
    first = os.environ.get("NUMBA_DISABLE_JIT") != "1"
    for said in (first, False):
        main(base)
        err = capsys.readouterr().err
        assert ("iwpfast fit: --class-weight: compiling" in err) == said, err


def test_spark_refuses_workers_without_pyarrow_before_writing(tmp_path):
    from iwpfast.spark import _CHECKED_CONTEXTS, check_workers_python

    class Job:
        def __init__(self, items, fn=None):
            self.items, self.fn = items, fn

        def map(self, fn):
            return Job(self.items, fn)

        def collect(self):
            real = __import__

            def no_pyarrow(name, *args, **kwargs):
                if name == "pyarrow":
                    raise ModuleNotFoundError("No module named 'pyarrow'")
                return real(name, *args, **kwargs)

            import builtins
            builtins.__import__ = no_pyarrow
            try:
                return [self.fn(x) for x in self.items]
            finally:
                builtins.__import__ = real

    class Context:
        applicationId = "fake-app"

        def parallelize(self, items, slices):
            return Job(items)

    with pytest.raises(exc.ServiceUnavailableError, match="PYSPARK_PYTHON") as info:
        check_workers_python(Context())
    assert "pyarrow" in str(info.value)
    assert "fake-app" not in _CHECKED_CONTEXTS
