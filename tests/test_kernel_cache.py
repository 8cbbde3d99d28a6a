"""Where the compiled kernels are cached: a per-user folder keyed by the kernel sources, never the
installed package; unwritable locations fall back quietly (iwpfast/_kernels/_options.py)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "iwpfast" / "_kernels"

# compiles one small kernel (about a second) and reports where its cache went
PROBE = """
import json, numpy as np
from iwpfast._kernels import _options, sgd
sgd.first_invalid_label(np.ones(3))
folder = _options.CACHE_FOLDER
print(json.dumps({"folder": None if folder is None else str(folder),
                  "files": [] if folder is None else sorted(os.listdir(folder))}))
"""


def _probe(env_changes: dict, cwd) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("IWPFAST_CACHE_DIR", "NUMBA_CACHE_DIR",
                                                            "NUMBA_DISABLE_JIT")}
    env.update(env_changes)
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", "import os\n" + PROBE], env=env, cwd=cwd,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _package_cache_files() -> list[Path]:
    return [p for p in KERNELS.rglob("*") if p.suffix in (".nbi", ".nbc")]


def test_cache_goes_to_the_given_folder_keyed_by_the_sources_not_into_the_package(tmp_path):
    before = set(_package_cache_files())
    got = _probe({"IWPFAST_CACHE_DIR": str(tmp_path / "cache")}, tmp_path)
    folder = Path(got["folder"])
    assert folder.parent == tmp_path / "cache" and folder.name.startswith("kernels-")
    assert any(f.startswith("sgd.first_invalid_label") and f.endswith(".nbi") for f in got["files"])
    assert set(_package_cache_files()) == before          # nothing written next to the sources


def test_default_cache_is_per_user(tmp_path):
    got = _probe({"XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}, tmp_path)
    if sys.platform.startswith("linux"):
        assert Path(got["folder"]).parent == tmp_path / "xdg" / "iwpfast"
    assert got["files"]


def test_unwritable_cache_folder_falls_back_to_the_temporary_folder(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    (tmp_path / "tmp").mkdir()
    got = _probe({"IWPFAST_CACHE_DIR": str(blocker / "cache"), "TMPDIR": str(tmp_path / "tmp")},
                 tmp_path)
    assert got["folder"] is not None and Path(got["folder"]).is_relative_to(tmp_path / "tmp")
    assert got["files"]


def test_no_writable_folder_means_no_cache(monkeypatch):
    from iwpfast._kernels import _options
    monkeypatch.setattr(_options, "_writable_folder", lambda path: False)
    assert _options._choose_cache_folder() is None
    monkeypatch.setattr(_options, "_CACHE_CLASS", None)
    compiled = _options.jit(lambda x: x + 1)                # compiled without a cache, runs
    assert compiled(1) == 2


def test_any_edit_of_a_kernel_source_changes_the_cache_key(tmp_path, monkeypatch):
    from iwpfast._kernels import _options
    copy = tmp_path / "_kernels"
    shutil.copytree(KERNELS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(_options, "_KERNEL_SOURCES", copy)
    original = _options.kernel_source_hash()
    assert original == _options.kernel_source_hash()      # deterministic
    helper = copy / "_lowlevel.py"                          # not the file a kernel is defined in
    helper.write_text(helper.read_text() + "\n# an edit\n")
    assert _options.kernel_source_hash() != original


@pytest.mark.slow
def test_readme_install_flow_then_import_from_another_folder(tmp_path):
    """The README's two Quickstart commands in one environment (a regular install, which runs a
    fit, then an editable one), then ``import iwpfast`` from another folder.  Offline: the new
    environment sees this interpreter's packages through a .pth file, and pip builds without
    isolation (the commands are otherwise the README's)."""
    import site
    import venv
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "host.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # Python 3.11's venv bundles an old setuptools that would shadow the host's (the build backend
    # pyproject names, setuptools >= 77, in the dev extra): without build isolation, use the host's
    subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "-q", "setuptools"],
                   capture_output=True, check=False)
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", "*.nbi", "*.nbc", ".pytest_cache", "build", "*.egg-info", ".venv"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "IWPFAST_CACHE_DIR",
                                                            "NUMBA_CACHE_DIR", "NUMBA_DISABLE_JIT")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    pip = [str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q"]
    fit = ("import numpy as np, iwpfast; X = np.random.default_rng(0).standard_normal((500, 2)); "
           "iwpfast.IWPClassifier(progress=False).fit(X, X[:, 0] > 0)")
    other = tmp_path / "elsewhere"
    other.mkdir()
    subprocess.run([*pip, "."], cwd=src, env=env, check=True, timeout=600)
    subprocess.run([str(python), "-c", fit], cwd=other, env=env, check=True, timeout=600)
    subprocess.run([*pip, "-e", "."], cwd=src, env=env, check=True, timeout=600)
    check = subprocess.run(
        [str(python), "-c", "import iwpfast; print(iwpfast.__file__, iwpfast.IWPClassifier.__name__)"],
        cwd=other, env=env, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr
    assert check.stdout.split()[-1] == "IWPClassifier"
    assert Path(check.stdout.split()[0]).is_relative_to(src)
    leftovers = [p for p in Path(purelib).rglob("iwpfast*/**/*") if p.suffix in (".nbi", ".nbc")]
    assert leftovers == []


# compiles first_invalid_label; says "compiled" once the compile is over, before Numba saves it
SAVER = """
import sys, numpy as np
import numba.core.event as ev
from iwpfast._kernels import sgd

class Said(ev.Listener):
    def on_start(self, event):
        pass

    def on_end(self, event):
        if event.data["dispatcher"] is sgd.first_invalid_label:
            print("compiled", flush=True)

ev.register("numba:compile", Said())
sgd.first_invalid_label(np.ones(3))
"""


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="nothing is compiled")
@pytest.mark.skipif(sys.platform == "win32", reason="no fcntl: saves are not locked")
def test_a_save_into_the_cache_waits_for_the_folder_lock(tmp_path):
    # Numba's save (index read, data-file number picked, both written) is not atomic across
    # processes; each save holds the folder's lock, so one compiled elsewhere at the same moment
    # cannot interleave with it
    import fcntl
    import time

    from iwpfast._kernels._options import kernel_source_hash
    folder = tmp_path / f"kernels-{kernel_source_hash()}"
    folder.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}
    env.update(IWPFAST_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    with open(folder / ".lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        child = subprocess.Popen([sys.executable, "-c", SAVER], env=env, cwd=tmp_path,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "compiled", child.stderr.read()
            time.sleep(0.5)         # a save that ignored the lock would have been written by now
            assert child.poll() is None
            assert not list(folder.glob("*.nbi"))
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    assert child.wait(timeout=120) == 0, child.stderr.read()
    assert any(p.name.startswith("sgd.first_invalid_label") for p in folder.glob("*.nbi"))
