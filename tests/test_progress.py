"""One meaning of progress= (iwpfast/progress.py) for the training pass and the release:
True = a bar on a terminal only, False = never, "force" = always."""
import io
import sys

import numpy as np
import pyarrow as pa
import pytest

from iwpfast.progress import progress_bar, shows_progress


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_meaning(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())          # a pipe / a log file
    assert not shows_progress(True) and not shows_progress(None) and not shows_progress(False)
    assert shows_progress("force")
    monkeypatch.setattr(sys, "stderr", _Terminal())
    assert shows_progress(True) and shows_progress(None) and not shows_progress(False)
    with pytest.raises(ValueError, match="'force'"):
        shows_progress("always")


def test_disabled_bar_is_a_no_op_and_forced_bar_writes(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    bar = progress_bar(True, total=100)
    bar.update(10)
    bar.close()
    assert stream.getvalue() == ""
    bar = progress_bar("force", total=100, desc="unit")
    bar.update(100)
    bar.close()
    assert "unit" in stream.getvalue() and "100" in stream.getvalue()


def test_release_and_fit_agree_off_a_terminal(monkeypatch, tmp_path):
    # progress=True used to mean "always" for the release and "on a terminal" for the fit
    from iwpfast import IWPClassifier
    from iwpfast.privacy import ReleaseSpec, release

    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    rng = np.random.default_rng(0)
    table = pa.table({"a": rng.uniform(-1, 1, 500), "y": np.where(rng.random(500) < 0.5, -1, 1)})
    spec = ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=2.0, ranges="a=-1:1")
    out = tmp_path / "r.parquet"
    release(table, out, spec, features=["a"], label="y", seed=3, progress=True)
    IWPClassifier(alpha=1.0, learning_rate=0.01, progress=True).fit(out)
    assert "rows" not in stream.getvalue()
    release(table, tmp_path / "r2.parquet", spec, features=["a"], label="y", seed=3, progress="force")
    assert "release" in stream.getvalue()
