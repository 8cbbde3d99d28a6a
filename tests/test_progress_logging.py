"""Batch jobs without a terminal: progress goes to the logging module (iwpfast.progress)."""
import logging

import numpy as np

from iwpfast import progress
from iwpfast.progress import progress_bar


def test_no_terminal_logs_rows_rate_and_eta(caplog, monkeypatch):
    monkeypatch.setattr(progress, "LOG_INTERVAL_S", 0.0)      # a line at every update
    monkeypatch.setattr(progress, "_on_terminal", lambda: False)
    with caplog.at_level(logging.INFO, logger="iwpfast.progress"):
        bar = progress_bar(True, total=1000, desc="iwpfast")
        bar.update(250)
        bar.update(250)
        bar.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "iwpfast.progress"]
    assert lines[0].startswith("iwpfast: 250 rows of 1,000 (25.0%)") and "M rows/s" in lines[0]
    assert "ETA" in lines[0]
    assert lines[-1].startswith("iwpfast: 500 rows of 1,000 (50.0%)") and "done in" in lines[-1]


def test_fit_logs_its_progress_and_progress_false_logs_nothing(caplog, monkeypatch):
    from iwpfast import IWPClassifier
    monkeypatch.setattr(progress, "_on_terminal", lambda: False)
    X = np.random.default_rng(0).standard_normal((3000, 2))
    with caplog.at_level(logging.INFO, logger="iwpfast.progress"):
        IWPClassifier(alpha=1.0, learning_rate=0.01, chunk_rows=500).fit(X, X[:, 0] > 0)
    done = [r.getMessage() for r in caplog.records if r.name == "iwpfast.progress"]
    assert done and done[-1].startswith("iwpfast: 3,000 rows of 3,000 (100.0%)")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="iwpfast.progress"):
        IWPClassifier(alpha=1.0, learning_rate=0.01, progress=False).fit(X, X[:, 0] > 0)
    assert not [r for r in caplog.records if r.name == "iwpfast.progress"]
