"""What each compiled function costs in a first fit with an empty kernel cache.

    python bench/compile_cost.py                  # the first fit of bench/default_cost.py
    python bench/compile_cost.py --classes 3      # a 3-class first fit instead
    python bench/compile_cost.py --json           # one JSON line per compiled signature

A fresh process with an empty ``IWPFAST_CACHE_DIR`` imports iwpfast and runs
``IWPClassifier(progress=False).fit`` on a 1000 x 3 float64 array (the first fit of
``bench/default_cost.py``), with listeners on Numba's compile events.  Every compile of a function
for one signature is a row: its seconds excluding the compiles nested in it (a kernel's callees,
the overload implementations of ``np.empty`` & co. are compiled while the caller is typed), split
into the parts Numba spends in LLVM (timed by wrapping Numba's code-library methods):

- ``typing``: Numba's type inference (``nopython_type_inference``);
- ``llvm_fn``: parsing the function's IR and LLVM's function passes (``add_ir_module``);
- ``llvm_module``: LLVM's module optimization after the callees are linked in
  (``_optimize_final_module``: inlining, loop vectorization, O3);
- ``machine``: machine code for the JIT (``_finalize_specific``);
- ``numba``: the rest of Numba's Python side (bytecode analysis, IR passes and IR-level inlining,
  lowering to LLVM IR);
- ``cache_save``: writing the compiled function into the on-disk cache (after the compile: an
  object file is emitted a second time, then pickled).

Prints the wall seconds and CPU seconds of the fit, then one row per (function, signature),
largest first, and the totals; ``--passes`` adds the seconds of each Numba pass (excluding
nested compiles), largest first.  Not run by the test suite.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
import numpy as np
import numba.core.event as ev
from numba.core import caching, codegen

import iwpfast

PARTS = ("typing", "llvm_fn", "llvm_module", "machine")
stack = []          # open compiles: [name, signature, start, nested seconds, parts]
rows = []
saves = {}


class Compiles(ev.Listener):
    def on_start(self, event):
        data = event.data
        stack.append([data["dispatcher"].py_func.__qualname__,
                      ", ".join(str(a) for a in data["args"]), time.perf_counter(), 0.0,
                      dict.fromkeys(PARTS, 0.0)])

    def on_end(self, event):
        name, signature, start, nested, parts = stack.pop()
        seconds = time.perf_counter() - start
        if stack:
            stack[-1][3] += seconds
        if pass_stack:
            pass_stack[-1][2] += seconds
        own = seconds - nested
        rows.append(dict(function=name, signature=signature, seconds=own, **parts,
                         numba=own - sum(parts.values())))


pass_stack = []    # open passes: [name, start, nested compile seconds]
passes = {}


class Passes(ev.Listener):
    def on_start(self, event):
        pass_stack.append([event.data["name"], time.perf_counter(), 0.0])

    def on_end(self, event):
        name, start, nested = pass_stack.pop()
        own = time.perf_counter() - start - nested
        key = (stack[-1][0] if stack else "?") + " " + name
        passes[key] = passes.get(key, 0.0) + own
        if stack and name.startswith("nopython_type_inference"):
            stack[-1][4]["typing"] += own


def timed(owner, method, part):
    original = getattr(owner, method)

    def wrapper(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            if stack:
                stack[-1][4][part] += time.perf_counter() - start
    setattr(owner, method, wrapper)


timed(codegen.CPUCodeLibrary, "add_ir_module", "llvm_fn")
timed(codegen.CPUCodeLibrary, "_optimize_final_module", "llvm_module")
timed(codegen.JITCodeLibrary, "_finalize_specific", "machine")

original_save = caching.Cache.save_overload


def save_and_time(self, sig, cres):
    start = time.perf_counter()
    try:
        return original_save(self, sig, cres)
    finally:
        key = (self._py_func.__qualname__, ", ".join(str(a) for a in cres.signature.args))
        saves[key] = saves.get(key, 0.0) + time.perf_counter() - start


caching.Cache.save_overload = save_and_time

n_classes = int(sys.argv[1])
X = np.random.default_rng(0).standard_normal((1000, 3))
y = (X[:, 0] > 0).astype(int) if n_classes == 2 else np.arange(1000) % n_classes
with ev.install_listener("numba:compile", Compiles()), \
        ev.install_listener("numba:run_pass", Passes()):
    t0, c0 = time.perf_counter(), time.process_time()
    iwpfast.IWPClassifier(progress=False).fit(X, y)
    t1, c1 = time.perf_counter(), time.process_time()
for row in rows:
    row["cache_save"] = saves.pop((row["function"], row["signature"]), 0.0)
print(json.dumps({"fit_s": t1 - t0, "fit_cpu_s": c1 - c0, "rows": rows, "passes": passes}))
"""


def measure(n_classes: int = 2) -> dict:
    """Run the first fit in a fresh process with an empty cache; its figures and compile rows."""
    with tempfile.TemporaryDirectory(prefix="iwpfast-compile-cost-") as cache:
        env = dict(os.environ, IWPFAST_CACHE_DIR=cache, PYTHONPATH=str(ROOT))
        env.pop("NUMBA_DISABLE_JIT", None)
        out = subprocess.run([sys.executable, "-c", CHILD, str(n_classes)], env=env, cwd=ROOT,
                             capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the first fit failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.splitlines()[-1])


COLUMNS = ("seconds", "typing", "numba", "llvm_fn", "llvm_module", "machine", "cache_save")


def table(result: dict, width: int = 70) -> str:
    rows = sorted(result["rows"], key=lambda r: -(r["seconds"] + r["cache_save"]))
    lines = [f"first fit {result['fit_s']:.2f} s wall, {result['fit_cpu_s']:.2f} CPU s; "
             f"{len(rows)} compiles",
             f"{'function':<28} {'signature':<{width}} " + " ".join(f"{c:>11}" for c in COLUMNS)]
    for r in rows:
        signature = r["signature"] if len(r["signature"]) <= width else \
            r["signature"][:width - 3] + "..."
        lines.append(f"{r['function'][:28]:<28} {signature:<{width}} "
                     + " ".join(f"{r[c]:11.3f}" for c in COLUMNS))
    totals = {c: sum(r[c] for r in rows) for c in COLUMNS}
    lines.append(f"{'total':<28} {'':<{width}} " + " ".join(f"{totals[c]:11.3f}" for c in COLUMNS))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classes", type=int, default=2, help="label classes of the fit (2)")
    ap.add_argument("--passes", action="store_true", help="also the 25 costliest Numba passes")
    ap.add_argument("--json", action="store_true", help="one JSON line per compiled signature")
    ap.add_argument("--width", type=int, default=70, help="characters of a signature shown")
    a = ap.parse_args()
    result = measure(a.classes)
    if a.json:
        print(json.dumps({"fit_s": result["fit_s"], "fit_cpu_s": result["fit_cpu_s"]}))
        for row in result["rows"]:
            print(json.dumps(row))
    else:
        print(table(result, a.width))
    if a.passes:
        for key, seconds in sorted(result["passes"].items(), key=lambda kv: -kv[1])[:25]:
            print(f"pass {seconds:7.3f} s  {key}")


if __name__ == "__main__":
    main()
