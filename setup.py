"""Build hook: a regular install compiles the kernels it ships (all other metadata lives in
pyproject.toml; this file is also kept for tools that still call setup.py).

A first fit otherwise compiles its kernels for ~9 s on 2 cores.  ``build_py`` below runs
``iwpfast warmup`` on the freshly built package, with its cache folder set to
``iwpfast/_kernels/prebuilt/`` inside the build: the machine code goes into the wheel (and the
wheel's RECORD, so an uninstall removes it), and the first process that needs a kernel copies it
into the per-user cache (``iwpfast/_kernels/_options.py``, ``seed_from_prebuilt``).

- Paid at install: about 40 s on 2 cores (``iwpfast warmup``'s fits, in parallel processes).
- Skipped for editable installs (their kernels compile into the user cache at first use, as the
  test suite does) and with ``IWPFAST_PREBUILD_KERNELS=0`` (e.g. for a wheel that is copied to
  other machines: the code is for the build machine's CPU, Numba and Python; elsewhere it is not
  used, and the kernels compile at first use as without it).
- A failed warmup never fails the build: the wheel then has no prebuilt kernels.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PREBUILD_ENV = "IWPFAST_PREBUILD_KERNELS"
# the warmup, then the versions it compiled for (iwpfast/_kernels/_options.py names them when a
# later process cannot use the kernels)
WARMUP = """
import json, os, sys
from iwpfast.cli import main
if main(["warmup"]) != 0:
    sys.exit(1)
from iwpfast._kernels._options import build_record
with open(os.path.join(os.environ["IWPFAST_CACHE_DIR"], "built-with.json"), "w") as f:
    json.dump(build_record(), f)
"""


class BuildWithKernels(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False) or os.environ.get(PREBUILD_ENV, "1") == "0":
            return
        build = Path(self.build_lib).resolve()
        target = build / "iwpfast" / "_kernels" / "prebuilt"
        shutil.rmtree(target, ignore_errors=True)
        env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_DISABLE_JIT", "NUMBA_CACHE_DIR")}
        # the built package first; pip's isolated build environment reaches its packages through
        # PYTHONPATH, which is kept
        env["PYTHONPATH"] = os.pathsep.join([str(build), *filter(None, [env.get("PYTHONPATH")])])
        env["IWPFAST_CACHE_DIR"] = str(target)
        print(f"iwpfast: compiling the kernels into the package ({target}; skip with "
              f"{PREBUILD_ENV}=0)", flush=True)
        try:
            done = subprocess.run([sys.executable, "-c", WARMUP], env=env, cwd=build,
                                  capture_output=True, text=True, timeout=1800)
            failure = None if done.returncode == 0 else (done.stderr.strip().splitlines()
                                                         or [f"exit {done.returncode}"])[-1]
        except (OSError, subprocess.SubprocessError) as exc:
            failure = str(exc)
        if failure is not None:
            print(f"iwpfast: kernels not prebuilt ({failure}); they compile at first use",
                  flush=True)
            shutil.rmtree(target, ignore_errors=True)
            return
        for lock in target.rglob(".lock"):
            lock.unlink()


setup(cmdclass={"build_py": BuildWithKernels})
