"""Every fenced block of README.md and docs/*.md runs as written, or is marked as not code.

The convention is the block's info string (the words after the opening fence; GitHub highlights by
the first word):

    ```python  /  ```bash                   run here, in the default suite
    ```python slow  /  ```bash slow         run here in the slow suite (-m slow): S3, Dask, Spark,
                                            or work of more than a few seconds
    ```text  /  ```json                     not code: output, a listing, a schema, a signature
    ```python illustration  /  ```bash illustration
                                            code that is shown and not run: an install, a
                                            fragment (a resume after Ctrl-C, a module setting), a
                                            command of minutes (benchmarks, every experiment)

A page's blocks run in order, in one fresh folder and one Python namespace per page: a block uses
the files and names that the page's earlier blocks made (each page says which block makes them).
The default run leaves the slow blocks out, so a default block never needs a slow one; the slow
run runs every block of the page.  Bash blocks run under ``bash -e -o pipefail`` with this
checkout's package first (PYTHONPATH) and this interpreter's folder first on PATH.  A
PrivacyLeakWarning fails a page: the docs do not teach a leak.  In the slow run ``s3://bucket/``
is a local S3-compatible server (moto; tests/s3_server.py, found through AWS_ENDPOINT_URL) and
``tcp://scheduler:8786`` a local Dask cluster of two processes; Spark runs in local[2].

Timing (the project's 2 shared cores, warm kernel cache, 2026-11-28): the default pages 31 s
together, the README 18 s of it (its Python block alone was 10 s before the other pages ran); the
slow pages 2.5-3.5 minutes.  As plain Python (CI's NUMBA_DISABLE_JIT=1 pass) the pages' 10^5-10^6-row
releases and 'auto' fits take minutes and cover no kernel line the kernel tests miss, so .ci/run
deselects test_page_runs_as_written there (every page).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from iwpfast.exceptions import PrivacyLeakWarning

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))
RUNNABLE = {"python", "bash"}
DATA = {"text", "json"}
KINDS = {"slow", "illustration"}
FENCE = re.compile(r"^```(.*)$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int            # 1-based line of the opening fence
    language: str        # "python", "bash", "text", ...
    kind: str            # "run", "slow", "illustration", "text"
    code: str


def blocks_of(page: str) -> list[Block]:
    """The fenced blocks of ``page`` (top-level fences only: the docs indent none)."""
    found, lines = [], (ROOT / page).read_text(encoding="utf-8").split("\n")
    opened, info, body = None, "", []
    for number, line in enumerate(lines, 1):
        match = FENCE.match(line)
        if match is None:
            if opened is not None:
                body.append(line)
            continue
        if opened is None:
            opened, info, body = number, match.group(1).strip(), []
            continue
        words = info.split()
        language = words[0] if words else ""
        kind = words[1] if len(words) > 1 else ("run" if language in RUNNABLE else language)
        found.append(Block(page, opened, language, kind, "\n".join(body) + "\n"))
        opened = None
    assert opened is None, f"{page}: the fence opened at line {opened} is never closed"
    return found


ALL = {page: blocks_of(page) for page in PAGES}


def test_every_block_says_whether_it_runs():
    """A block is python/bash (run, slow or illustration) or text; an unmarked fence is refused."""
    wrong = [f"{b.page}:{b.line} ```{b.language} {b.kind}".rstrip() for blocks in ALL.values()
             for b in blocks
             if not ((b.language in RUNNABLE and b.kind in {"run"} | KINDS)
                     or (b.language in DATA and b.kind == b.language))]
    assert not wrong, "mark these blocks (tests/test_docs_run.py's docstring): " + ", ".join(wrong)


def test_the_readme_runs_its_release_and_fit_blocks():
    """The README's quickstart Python and its command-line walk-through are run, not illustrated."""
    readme = ALL["README.md"]
    assert any(b.language == "python" and b.kind == "run" and "IWPClassifier()" in b.code
               for b in readme)
    assert any(b.language == "bash" and b.kind == "run" and "iwpfast tune" in b.code
               for b in readme)


def _bash(block: Block, folder: Path, env: dict) -> None:
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.code], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=900)
    where = f"{block.page}:{block.line} (bash)"
    assert done.returncode == 0, f"{where} exited {done.returncode}:\n{done.stderr[-3000:]}"
    assert "PrivacyLeakWarning" not in done.stderr, f"{where} warned of a leak:\n{done.stderr}"


def _python(block: Block, namespace: dict) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        exec(compile(block.code, f"{block.page}:{block.line}", "exec"), namespace)


def run_page(page: str, folder: Path, monkeypatch, *, slow: bool, env: dict | None = None,
             scheduler: str | None = None) -> int:
    """Run the page's blocks in order in ``folder``; returns how many ran."""
    monkeypatch.chdir(folder)
    shell_env = dict(os.environ if env is None else env)
    shell_env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + ([shell_env["PYTHONPATH"]] if shell_env.get("PYTHONPATH") else []))
    shell_env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), shell_env["PATH"]])
    namespace: dict = {"__name__": "docs"}
    ran = 0
    for block in ALL[page]:
        if block.kind not in ({"run", "slow"} if slow else {"run"}):
            continue
        if scheduler is not None:
            block = Block(block.page, block.line, block.language, block.kind,
                          block.code.replace("tcp://scheduler:8786", scheduler))
        if block.language == "bash":
            _bash(block, folder, shell_env)
        else:
            _python(block, namespace)
        ran += 1
    return ran


DEFAULT_PAGES = [p for p in PAGES if any(b.kind == "run" for b in ALL[p])]
SLOW_PAGES = [p for p in PAGES if any(b.kind == "slow" for b in ALL[p])]


@pytest.mark.parametrize("page", DEFAULT_PAGES)
def test_page_runs_as_written(page, tmp_path, monkeypatch):
    assert run_page(page, tmp_path, monkeypatch, slow=False) > 0


@pytest.fixture()
def s3_and_scheduler(monkeypatch):
    """``s3://bucket/`` and ``tcp://scheduler:8786`` of the docs, on this machine, empty for each
    page (the endpoint is set before the cluster starts: its worker processes inherit it)."""
    pytest.importorskip("distributed")
    from distributed import LocalCluster
    from s3_server import s3_server

    with s3_server() as s3:
        s3.filesystem().create_dir("bucket")
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{s3.endpoint}")
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster:
            yield cluster.scheduler_address


@pytest.mark.slow
@pytest.mark.parametrize("page", SLOW_PAGES)
def test_page_runs_with_its_slow_blocks(page, tmp_path, monkeypatch, s3_and_scheduler):
    assert run_page(page, tmp_path, monkeypatch, slow=True, scheduler=s3_and_scheduler) > 0
