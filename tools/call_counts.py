"""Count the work done on the way down a warm ``IWPClassifier().fit(path)`` and one ``iwpfast release``.

Generates a small raw table (``--rows`` x ``--features``, one Parquet file in a temporary folder:
the source of the release is that folder), runs the release command once in process
(``iwpfast.cli.main``) to warm the imports, then traces a second run; fits the release once to
warm the kernels, then traces a second default fit.  Before each traced call the calibrations
this process memoized are forgotten, so the counts are a fresh process's.  ``sys.setprofile``
sees every Python call (a Numba dispatcher reports its call as one of its Python function) and
counts:

- metadata JSON decoded (``json.loads`` called from iwpfast), ``ReleaseSpec.from_metadata``,
  ``check_metadata_fields`` (the field table's check), ``noise_from_release`` (the by-name lookup);
- ``ReleaseSpec`` objects built (``__post_init__``: each one validates and calibrates);
- calibrations: ``gaussian_noise_scale`` (the continuous Gaussian's, analytic or classic), the
  analytic bisections (``_analytic_sigma``) and their evaluations ``analytic_gaussian_delta``,
  ``calibrate_discrete`` and ``calibrate_laplace``;
- folder listings (``os.listdir`` / ``os.scandir`` / ``glob.glob`` called from iwpfast: the
  source's, and the destination folder's for a killed run's staging files) and destination
  checks (``check_destination``, ``refuse_existing``, ``check_writable_folder``);
- the call depth (frames, the kernel's own included) from ``fit`` to its first kernel call on the
  calling thread (the chunks' kernel calls run on the head threads, which the profile does not
  see), and the iwpfast modules and functions the traced call touched.

    python tools/call_counts.py                      # the table
    python tools/call_counts.py --rows 20000 --features 5 --json counts.json
    python tools/call_counts.py --why                # where the metadata is decoded, folders listed
    PYTHONPATH=/path/to/other/checkout python tools/call_counts.py   # another version's counts

tests/test_call_counts.py asserts the counts that must stay at once.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

#: (row label, the function names counted: "file suffix:qualified name")
COUNTED = [
    ("metadata JSON decoded", ["json/__init__.py:loads"]),
    ("ReleaseSpec.from_metadata", ["privacy/spec.py:ReleaseSpec.from_metadata"]),
    ("check_metadata_fields", ["privacy/metadata_fields.py:check_metadata_fields"]),
    ("noise_from_release", ["sgd/driver.py:noise_from_release"]),
    ("ReleaseSpec built", ["privacy/spec.py:ReleaseSpec.__post_init__"]),
    ("gaussian_noise_scale", ["privacy/calibration.py:gaussian_noise_scale"]),
    ("  analytic calibrations", ["privacy/calibration.py:_analytic_sigma"]),
    ("  analytic delta evaluations", ["privacy/calibration.py:analytic_gaussian_delta"]),
    ("calibrate_discrete", ["privacy/discrete.py:calibrate_discrete"]),
    ("calibrate_laplace", ["privacy/laplace.py:calibrate_laplace"]),
    ("source folder listings", ["<source listing>", "glob.py:glob"]),
    ("destination folder listings", ["<destination listing>"]),
    ("destination checks", ["io/writer.py:check_destination"]),
    ("  existing-output refusals", ["io/outputs.py:refuse_existing"]),
    ("  writable-folder checks", ["io/outputs.py:check_writable_folder"]),
]

#: calls whose callers are listed (``--why``): where the metadata is decoded, folders listed
TRACED_CALLERS = ("json/__init__.py:loads", "glob.py:glob")


class Trace:
    """A profile function counting calls by "file:qualname" (json.loads and os listings only
    when iwpfast calls them), the depth of the first kernel call below ``root``, and the iwpfast
    modules and functions entered."""

    def __init__(self, root: str, kernels: set):
        self.root = root                  # the qualified name of the traced entry point
        # (file, name) of the jitted kernels: a dispatcher reports its call with a code object
        # of its own, named after the Python function
        self.kernels = kernels
        self.calls: Counter = Counter()
        self.functions: set = set()
        self.modules: set = set()
        self.kernel_depth: int | None = None
        self.first_kernel: str | None = None
        self.depth = 0                    # Python frames entered and not left
        self.root_depth: int | None = None
        self.callers: Counter = Counter()  # "call <- its iwpfast callers" (TRACED_CALLERS, listings)
        import iwpfast  # the package imported (PYTHONPATH), not this file's
        self.package = str(Path(iwpfast.__file__).resolve().parent)

    def __call__(self, frame, event, arg):
        if event == "return":
            self.depth -= 1
            if self.root_depth is not None and self.depth < self.root_depth:
                self.root_depth = None
        elif event == "call":
            self.depth += 1
            code = frame.f_code
            name = code.co_filename
            if name.startswith(self.package):
                rel = os.path.relpath(name, self.package)
                self.modules.add(rel)
                self.functions.add((rel, code.co_firstlineno, code.co_qualname))
                self.calls[f"{rel}:{code.co_qualname}"] += 1
                if self.root_depth is None and code.co_qualname.endswith(self.root):
                    self.root_depth = self.depth
                if (name, code.co_name) in self.kernels and self.kernel_depth is None \
                        and self.root_depth is not None:
                    # frames below the entry point's, the kernel's own included
                    self.kernel_depth = self.depth - self.root_depth
                    self.first_kernel = code.co_qualname
            elif _caller_in(frame.f_back, self.package):
                key = f"{'/'.join(Path(name).parts[-2:])}:{code.co_qualname}"
                self.calls[key] += 1
                if key in TRACED_CALLERS:
                    self.callers[f"{key} <- {self._chain(frame.f_back)}"] += 1
        elif event == "c_call" and _caller_in(frame, self.package):
            qual = f"{getattr(arg, '__module__', None) or ''}.{getattr(arg, '__name__', '')}"
            if qual in ("posix.listdir", "posix.scandir", "os.listdir", "os.scandir"):
                chain = self._chain(frame, levels=12)
                # the destination's folder is listed for a killed run's staging files
                where = "destination" if "staging_leftovers" in chain else "source"
                self.calls[f"<{where} listing>"] += 1
                self.callers[f"<{qual}> <- {chain}"] += 1

    def count(self, names: list[str]) -> int:
        return sum(n for key, n in self.calls.items() for want in names
                   if key == want or key.endswith("/" + want))

    def _chain(self, frame, levels: int = 6) -> str:
        """The iwpfast functions on the stack above ``frame`` (innermost first)."""
        names = []
        while frame is not None and len(names) < levels:
            if frame.f_code.co_filename.startswith(self.package):
                names.append(frame.f_code.co_qualname)
            frame = frame.f_back
        return " < ".join(names)


def _caller_in(frame, package: str) -> bool:
    return frame is not None and frame.f_code.co_filename.startswith(package)


def kernel_codes() -> set:
    """(file, name) of every jitted function in ``iwpfast._kernels``."""
    import importlib
    import pkgutil

    import iwpfast._kernels as kernels
    codes = set()
    for info in pkgutil.iter_modules(kernels.__path__):
        module = importlib.import_module(f"iwpfast._kernels.{info.name}")
        for value in vars(module).values():
            py_func = getattr(value, "py_func", None)
            if py_func is not None and hasattr(py_func, "__code__"):
                codes.add((py_func.__code__.co_filename, py_func.__code__.co_name))
    return codes


def clear_calibrations() -> None:
    """Forget the calibrations this process made (as a fresh process would have none)."""
    from iwpfast.privacy import calibration, discrete
    for fn in (calibration._analytic_sigma, discrete.calibrate_discrete):
        getattr(fn, "cache_clear", lambda: None)()


def traced(fn, root: str) -> Trace:
    """Trace ``fn()``, whose entry point is named ``root``, after the calibrations are forgotten."""
    clear_calibrations()
    trace = Trace(root, kernel_codes())
    sys.setprofile(trace)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return trace


def write_raw(path: Path, rows: int, p: int) -> list[str]:
    """A raw table: p features uniform on [0, 10], a binary label from a logistic model."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 10.0, size=(rows, p))
    theta = np.linspace(-1.0, 1.0, p)
    y = (rng.random(rows) < 1.0 / (1.0 + np.exp(-(X - 5.0) @ theta / p))).astype(np.int8)
    names = [f"x{j}" for j in range(p)]
    pq.write_table(pa.table({**{n: X[:, j] for j, n in enumerate(names)}, "y": y}), path)
    return names


def release_argv(raw: Path, out: Path, names: list[str]) -> list[str]:
    return ["release", str(raw), str(out), "--features", *names,
            "--ranges", *(f"{n}=0:10" for n in names), "--epsilon-x", "1", "--epsilon-y", "1",
            "--label", "y", "--seed", "1", "--overwrite"]


def measure(rows: int, p: int) -> dict:
    import contextlib
    import io
    import warnings

    from iwpfast import IWPClassifier
    from iwpfast.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        # the raw data as a folder of one file (the source of a release is often a folder)
        raw, out = Path(tmp, "raw"), Path(tmp, "release.parquet")
        raw.mkdir()
        names = write_raw(raw / "part-0.parquet", rows, p)
        argv = release_argv(raw, out, names)
        quiet = contextlib.redirect_stdout(io.StringIO())
        with warnings.catch_warnings(), quiet, contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            main(argv)                                       # imports and kernels warm
            release = traced(lambda: main(argv), "main")
            IWPClassifier().fit(str(out))                     # the fit's kernels warm
            fit = traced(lambda: IWPClassifier().fit(str(out)), "fit")
    table = {}
    for label, names_ in COUNTED:
        table[label] = {"fit": fit.count(names_), "release": release.count(names_)}
    table["frames fit -> first kernel"] = {"fit": fit.kernel_depth, "release": None}
    table["why"] = {"fit": sorted(map(list, fit.callers.items())),
                                   "release": sorted(map(list, release.callers.items()))}
    table["iwpfast modules touched"] = {"fit": len(fit.modules), "release": len(release.modules)}
    table["iwpfast functions touched"] = {"fit": len(fit.functions),
                                          "release": len(release.functions)}
    return table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--features", type=int, default=5)
    parser.add_argument("--json", default=None, help="also write the counts as JSON here")
    parser.add_argument("--why", action="store_true",
                        help="also list the callers of each metadata decoding and folder listing")
    args = parser.parse_args(argv)
    table = measure(args.rows, args.features)
    print(f"{'work (calls)':34s} {'fit(path)':>10s} {'release':>10s}")
    for label, row in table.items():
        if label == "why":
            continue
        cells = ["-" if row[k] is None else str(row[k]) for k in ("fit", "release")]
        print(f"{label:34s} {cells[0]:>10s} {cells[1]:>10s}")
    if args.why:
        for where in ("fit", "release"):
            for chain, n in table["why"][where]:
                print(f"{where}: {n} x {chain}")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
