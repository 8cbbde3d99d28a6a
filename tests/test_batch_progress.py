"""Batch jobs: --progress {auto,bar,log,none} on the scanning commands, and the ``iwpfast``
logger of library calls (docs/streaming.md "Progress and logging")."""
import logging
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import iwpfast
from iwpfast import progress
from iwpfast.cli import main


@pytest.fixture()
def raw(tmp_path):
    rng = np.random.default_rng(1)
    n = 4000
    pq.write_table(pa.table({"a": rng.uniform(-1, 1, n), "b": rng.uniform(-1, 1, n),
                             "y": rng.integers(0, 2, n)}), tmp_path / "raw.parquet")
    return tmp_path


RELEASE = ["--features", "a", "b", "--ranges", "a=-1:1", "b=-1:1", "--epsilon-x", "2",
           "--epsilon-y", "1", "--seed", "1", "--record-batch-rows", "1000"]


def lines(text):
    return [line for line in text.splitlines() if line.startswith("iwpfast")]


def test_progress_log_writes_rows_rate_and_eta_lines(raw, capsys, monkeypatch):
    monkeypatch.setattr(progress, "_on_terminal", lambda: True)    # log even on a terminal
    assert main(["release", str(raw / "raw.parquet"), str(raw / "rel.parquet"), *RELEASE,
                 "--progress", "log", "--progress-every", "1e-9"]) == 0
    err = capsys.readouterr().err
    # each line carries the command (issue 47: it read "iwpfast: release: ...", and through a
    # logging format "iwpfast.progress INFO iwpfast: 1,803,392 rows")
    steps = [line for line in lines(err) if line.startswith("iwpfast release: ")]
    # one line per record batch read (the interval is ~0), the last one with the time taken
    assert steps[0].startswith("iwpfast release: 1,000 rows of 4,000 (25.0%)")
    assert "M rows/s" in steps[0] and "ETA" in steps[0] and "done in" in steps[-1]
    # the summary is printed once, on stdout, not logged to stderr as well (issue 47)
    assert not any("released 4,000 rows to" in line for line in lines(err))
    assert progress.LOG_INTERVAL_S == 5.0 and not logging.getLogger("iwpfast").handlers[1:]
    assert main(["fit", str(raw / "rel.parquet"), "--out", str(raw / "m.json"), "--alpha", "1",
                 "--learning-rate", "0.01", "--progress", "log", "--progress-every", "1e-9"]) == 0
    err = capsys.readouterr().err
    assert any(line.startswith("iwpfast fit: 4,000 rows of 4,000 (100.0%)") and "done in" in line
               for line in lines(err))
    assert any("fitted IWPClassifier on 4,000 rows" in line for line in lines(err))


def test_auto_logs_off_a_terminal_and_none_is_silent(raw, capsys, monkeypatch):
    monkeypatch.setattr(progress, "_on_terminal", lambda: False)
    args = ["release", str(raw / "raw.parquet"), str(raw / "rel.parquet"), *RELEASE, "--overwrite"]
    assert main(args) == 0                          # --progress auto (the default)
    err = capsys.readouterr().err
    assert any("release: 4,000 rows of 4,000 (100.0%)" in line for line in lines(err))
    for quiet in (["--progress", "none"], ["--no-progress"]):
        assert main(args + quiet) == 0
        assert not [line for line in lines(capsys.readouterr().err) if "rows" in line]
    with pytest.raises(SystemExit):
        main(args + ["--progress", "sometimes"])
    assert "invalid choice" in capsys.readouterr().err


def test_library_calls_log_through_the_iwpfast_logger(raw, caplog):
    spec = iwpfast.ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                               ranges="a=-1:1,b=-1:1")
    with caplog.at_level(logging.INFO, logger="iwpfast"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iwpfast.release(raw / "raw.parquet", raw / "r.parquet", spec, ["a", "b"], "y", seed=1)
        iwpfast.IWPClassifier(alpha=1.0, learning_rate=0.01, progress="log").fit(raw / "r.parquet")
    records = [(r.name, r.getMessage()) for r in caplog.records]
    assert any(name == "iwpfast" and msg.startswith("released 4,000 rows to ")
               for name, msg in records)
    assert any(name == "iwpfast" and msg.startswith("fitted IWPClassifier on 4,000 rows")
               for name, msg in records)
    # progress="log": the progress lines, never a bar
    assert any(name == "iwpfast.progress" and "4,000 rows of 4,000" in msg for name, msg in records)
    # nothing is printed by default: the library's logger has only a NullHandler
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("iwpfast").handlers)
