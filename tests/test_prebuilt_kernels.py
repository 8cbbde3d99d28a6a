"""Kernels compiled by a regular install (setup.py's build_py runs ``iwpfast warmup`` into
``iwpfast/_kernels/prebuilt/``) and copied into the per-user cache by the first process that needs
a kernel (``_options.seed_from_prebuilt``): a first fit after ``pip install .`` compiles nothing."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iwpfast._kernels import _options

ROOT = Path(__file__).resolve().parents[1]


def _function(folder: Path, base: str, n_data: int, content: bytes) -> None:
    """A fake cached function: its index and ``n_data`` data files."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(1, n_data + 1):
        (folder / f"{base}.{i}.nbc").write_bytes(content + bytes([i]))
    (folder / f"{base}.nbi").write_bytes(content)


def test_seed_copies_each_function_the_user_cache_lacks_and_keeps_the_others(tmp_path):
    prebuilt = tmp_path / "prebuilt"
    source = prebuilt / _options.CACHE_NAME
    _function(source, "sgd.first-10.py311", 2, b"built")
    _function(source, "sgd.second-20.py311", 1, b"built")
    user = tmp_path / "user"
    _function(user, "sgd.second-20.py311", 3, b"own")      # compiled here before: kept whole
    assert _options.seed_from_prebuilt(user, prebuilt) == ["sgd.first-10.py311.nbi"]
    assert (user / "sgd.first-10.py311.nbi").read_bytes() == b"built"
    assert [(user / f"sgd.first-10.py311.{i}.nbc").read_bytes() for i in (1, 2)] == [
        b"built\x01", b"built\x02"]
    assert (user / "sgd.second-20.py311.nbi").read_bytes() == b"own"
    assert (user / "sgd.second-20.py311.1.nbc").read_bytes() == b"own\x01"
    assert sorted(p.name for p in user.iterdir() if p.name.endswith(".tmp")) == []
    assert _options.seed_from_prebuilt(user, prebuilt) == []        # once: nothing left to copy


def test_seed_takes_only_this_kernel_version_and_never_copies_a_folder_onto_itself(tmp_path):
    prebuilt = tmp_path / "prebuilt"
    _function(prebuilt / "kernels-0123456789abcdef0123", "sgd.first-10.py311", 1, b"other")
    user = tmp_path / "user"
    user.mkdir()
    assert _options.seed_from_prebuilt(user, prebuilt) == []
    assert list(user.iterdir()) == []
    same = prebuilt / _options.CACHE_NAME
    _function(same, "sgd.first-10.py311", 1, b"built")
    assert _options.seed_from_prebuilt(same, prebuilt) == []


def test_the_first_compile_says_why_the_install_s_prebuilt_kernels_were_not_used(tmp_path,
                                                                              monkeypatch):
    import numba
    monkeypatch.setattr(_options, "PREBUILT_ROOT", tmp_path)
    assert _options._prebuilt_mismatch() == ""                   # no prebuilt kernels (-e)
    python = ".".join(map(str, sys.version_info[:3]))
    (tmp_path / "built-with.json").write_text(json.dumps({"numba": "0.1.0", "python": python}))
    said = _options._prebuilt_mismatch()
    assert f"built with numba 0.1.0 (this is {numba.__version__})" in said
    assert "python" not in said and "Reinstall iwpfast (not -e)" in said
    (tmp_path / "built-with.json").write_text(json.dumps({"numba": numba.__version__,
                                                         "python": python}))
    assert "built from other kernel sources" in _options._prebuilt_mismatch()


def test_the_build_environment_has_the_runtime_dependencies():
    tomllib = pytest.importorskip("tomllib")         # Python >= 3.11
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # setup.py's build runs fits (iwpfast warmup) in pip's isolated build environment
    assert set(data["project"]["dependencies"]) <= set(data["build-system"]["requires"])


def _install(tmp_path: Path, env_changes: dict) -> Path:
    """``pip install --no-deps --no-build-isolation --target`` of a copy of this tree (offline: the
    build uses this interpreter's packages)."""
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", "*.nbi", "*.nbc", ".pytest_cache", "build", "*.egg-info", ".venv*",
        "prebuilt"))
    target = tmp_path / "site"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "IWPFAST_CACHE_DIR",
                                                            "NUMBA_DISABLE_JIT")}
    env.update(env_changes)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--target", str(target), str(src)],
                   env=env, check=True, timeout=1800, capture_output=True)
    return target


def test_the_build_compiles_nothing_when_told_not_to(tmp_path):
    target = _install(tmp_path, {"IWPFAST_PREBUILD_KERNELS": "0"})
    assert (target / "iwpfast" / "_kernels" / "sgd.py").is_file()
    assert not (target / "iwpfast" / "_kernels" / "prebuilt").exists()


# a default fit in a fresh process with an empty user cache, counting Numba's compiles
FIRST_FIT = """
import json, sys
import numba.core.event as ev
import numpy as np
import iwpfast
from iwpfast._kernels import _options

compiled = []

class Count(ev.Listener):
    def on_start(self, event):
        pass

    def on_end(self, event):
        compiled.append(event.data["dispatcher"].py_func.__qualname__)

ev.register("numba:compile", Count())
X = np.random.default_rng(0).standard_normal((1000, 3))
iwpfast.IWPClassifier(progress=False).fit(X, (X[:, 0] > 0).astype(int))
print(json.dumps({"module": iwpfast.__file__, "compiled": compiled,
                  "cached": sorted(p.name for p in _options.CACHE_FOLDER.glob("*.nbi"))}))
"""


@pytest.mark.slow
def test_a_regular_install_ships_kernels_that_a_first_fit_loads_without_compiling(tmp_path):
    target = _install(tmp_path, {})
    prebuilt = target / "iwpfast" / "_kernels" / "prebuilt"
    folders = [f for f in prebuilt.iterdir() if f.is_dir()]
    assert [f.name for f in folders] == [_options.CACHE_NAME]
    indexes = sorted(p.name for p in folders[0].glob("*.nbi"))
    assert any(name.startswith("sgd.sgd_chunk_heads-") for name in indexes)
    assert not list(prebuilt.rglob(".lock"))
    import numba
    assert json.loads((prebuilt / "built-with.json").read_text())["numba"] == numba.__version__
    # every shipped file is in the install's RECORD, so an uninstall removes it
    record = next(target.glob("iwpfast-*.dist-info")) / "RECORD"
    listed = {line.split(",")[0] for line in record.read_text().splitlines()}
    assert {str(p.relative_to(target)) for p in prebuilt.rglob("*") if p.is_file()} <= listed

    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_DISABLE_JIT",)}
    env.update(PYTHONPATH=str(target), IWPFAST_CACHE_DIR=str(tmp_path / "user-cache"))
    out = subprocess.run([sys.executable, "-c", FIRST_FIT], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert Path(got["module"]).is_relative_to(target)
    assert got["compiled"] == []
    assert set(got["cached"]) == set(indexes)           # the user cache was seeded from them
    assert "compiling kernels" not in out.stderr
