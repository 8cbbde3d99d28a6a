"""``iwpfast warmup``: the kernels that fits use are compiled into the cache ahead of the first fit
(iwpfast/commands/warmup.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iwpfast.cli import main
from iwpfast.commands.warmup import warmup_jobs

ROOT = Path(__file__).resolve().parents[1]


def test_the_jobs_cover_each_kind_dtype_and_loss_heaviest_first():
    jobs = warmup_jobs(["float32", "float64"], ["exponential", "logistic"])
    assert len(jobs) == 3 * 2 * 2 + 2 and len(set(jobs)) == len(jobs)
    assert [kind for kind, _, _ in jobs] == ["classes"] * 4 + ["auto"] * 4 + ["release"] \
        + ["fixed"] * 4 + ["demo"]
    assert ("release", "float32", "exponential") in jobs
    assert ("demo", "float64", "exponential") in jobs        # iwpfast demo's scan, first loss
    without = warmup_jobs(["float64"], ["exponential"], release=False)
    assert ("release", "float32", "exponential") not in without
    assert [kind for kind, _, _ in without] == ["classes", "auto", "fixed"]


@pytest.mark.parametrize("argv, message", [
    (["--dtypes", "float16"], "--dtypes float16: choose from float32, float64"),
    (["--losses", "hinge"], "--losses hinge: choose from"),
    (["--jobs", "0"], "--jobs 0: give at least 1"),
])
def test_bad_options_give_one_error_line(argv, message, capsys):
    assert main(["warmup", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("iwpfast: error: ") and message in err[0]


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="nothing is compiled")
def test_after_a_warmup_a_fresh_process_fits_without_compiling(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}
    env.update(IWPFAST_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    warm = subprocess.run([sys.executable, "-m", "iwpfast.cli", "warmup", "--dtypes", "float64",
                           "--jobs", "2"], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=900)
    assert warm.returncode == 0, warm.stderr
    probe = """
import json, numpy as np, iwpfast
from iwpfast._kernels import sgd
X = np.random.default_rng(0).standard_normal((1000, 3))
iwpfast.IWPClassifier(progress=False).fit(X, (X[:, 0] > 0).astype(int))
iwpfast.IWPClassifier(progress=False).fit(X, np.arange(1000) % 3, classes=[0, 1, 2])
print(json.dumps({name: sum(getattr(sgd, name).stats.cache_misses.values())
                  for name in ("sgd_chunk_heads", "_heads_batch", "first_invalid_label")}))
"""
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "sgd_chunk_heads": 0, "_heads_batch": 0, "first_invalid_label": 0}
