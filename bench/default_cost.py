"""What the default fit costs against one pass: every ratio of issue 20's goals, in one run.

    python bench/default_cost.py                 # the issue's sizes (~5-10 min on 2 cores)
    python bench/default_cost.py --quick         # small sizes, under a minute
    python bench/default_cost.py --decode-rows 10000000 --repeats 5

Prints the CPU (lscpu's Model name, whether the flags avx512f / avx2 are present), the load
average at the start and the end, then one line per measurement and the table of goals.  Every
ratio is a ratio of medians of repeats interleaved in one process (odd rounds in reverse order,
so that a slow phase of the machine hits all steps alike); the goals are ratios of wall-clock
seconds (``time.perf_counter``), the CPU seconds of the process (all threads) are printed beside
them (on a shared machine the steadier figure).

1. ``auto / fixed``: ``IWPClassifier(progress=False).fit(path)`` (the default: ``'auto'``, a grid
   of 28 heads raced in the training scan, the hold-out held in memory) against one fit with fixed
   alpha / learning_rate, on the same Parquet release of ``--rows`` x 10 (written by
   ``iwpfast.privacy.release``, float32 features, eps_x = 4, eps_y = 2).  Goal <= 2.0.
2. ``k=5 / binary``: ``fit(X, y, classes=[0..4])`` against ``fit(X, y)`` on the same ``--rows`` x
   10 float32 array (Fortran order: columns contiguous; features uniform on [-1, 1]), fixed
   alpha = 1, learning_rate = 1e-3 (those of ``bench/api_speed.py``), noise given
   (noise_var, epsilon_y); the same for the default ``'auto'`` (information only).  Goal <= 1.6.
3. ``fit(path) / decode``: a fixed fit of a Parquet file of ``--decode-rows`` x 10 float32 + an
   int8 label (``bench/make_data.py``'s data, uncompressed, row groups of 2^20, no release
   metadata: noise given) against pyarrow decoding the same columns (``iter_batches`` through a
   memory map, nothing else).  Goal <= 1.3.  ``--decode-in-turn`` adds the same fit with the
   Parquet column threads off (information).
4. ``first fit``: a fresh process with an empty ``IWPFAST_CACHE_DIR`` imports iwpfast and runs
   ``IWPClassifier(progress=False).fit`` on a 1000 x 3 float64 array; seconds of the fit (its
   CPU seconds and the import printed apart), median of ``--first-fit-repeats``.  Goal <= 3 s.
   The goal's row is the package as a regular install leaves it: built from this tree by
   ``pip install --no-deps --no-build-isolation --target TMP .`` (its build compiles the kernels
   it ships, setup.py; the seconds of that install are printed), the fit importing it from TMP.
   ``first fit, no prebuilt kernels`` (information) imports this tree itself, as an editable
   install does: every kernel compiles.  ``--first-fit-from`` picks one of them.  With
   ``--breakdown``, one more fit of this tree prints the seconds of each compiled function and
   signature (``bench/compile_cost.py``).
5. ``fit / read limit``: the binary fixed fit of 2. against ``np.add.reduce`` reading the same
   arrays (each feature column and the labels once): read-limit time / fit time.  Goal >= 0.65.

``k=5 auto / binary auto`` (issue 33's goal <= 2.0): the default ``'auto'`` of 2. for k = 5
against two classes; ``k=5 auto floor`` (information): the least that ratio can be when every
class keeps ``HALVING_MIN`` heads to the end for its paired choice (``classes_floor``).

After the timings, ``auto floor`` (information, with goal 1): what goal 1 would be if 'auto' cost
only the work it cannot skip, spread over the usable cores with nothing else running (no
reader, thread or Python overhead beyond the fixed fit's own).  One instrumented 'auto' fit
counts its head updates (head x training row, after the halving rungs; the kernel calls of
every unit, one-head units too) and times its hold-out scoring (CPU, the rungs' and the
final); one instrumented fixed fit times its kernel; the heads' kernel alone (one thread, the
fit's last chunk and surviving heads, fresh states) gives ns per head update.  floor = (fixed
CPU - its kernel CPU + head updates x ns + scoring CPU) / cores, against the fixed fit's wall
time.  The same line gives the heads' kernel CPU inside the fit.

Data files go to a temporary folder (removed at the end).  Not run by the test suite.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

GOALS = {"auto / fixed": ("<=", 2.0), "k=5 / binary": ("<=", 1.6),
         "k=5 auto / binary auto": ("<=", 2.0),
         "fit(path) / decode": ("<=", 1.3), "first fit (s)": ("<=", 3.0),
         "fit / read limit": (">=", 0.65)}

FIRST_FIT_CHILD = """
import time
t0 = time.perf_counter()
import numpy as np
import iwpfast
t1, c1 = time.perf_counter(), time.process_time()
X = np.random.default_rng(0).standard_normal((1000, 3))
iwpfast.IWPClassifier(progress=False).fit(X, (X[:, 0] > 0).astype(int))
t2, c2 = time.perf_counter(), time.process_time()
print(f"{t1 - t0!r} {t2 - t1!r} {c2 - c1!r}")
"""


def machine() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        out = ""
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    model = fields.get("Model name", "unknown").strip()
    flags = set(fields.get("Flags", "").split())
    return (f"CPU: {model}; avx512f: {'avx512f' in flags}; avx2: {'avx2' in flags}; "
            f"{os.cpu_count()} cores visible")


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def write_release(path: Path, n: int, p: int, seed: int = 0, release_seed: int = 1) -> None:
    """The release of goal 1 (``seed``: the data's, ``release_seed``: the noise's)."""
    from iwpfast.privacy import ReleaseSpec, release
    rng = np.random.default_rng(seed)
    names = [f"x{j}" for j in range(p)]
    X = rng.uniform(-1, 1, (n, p))
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ np.linspace(1.5, -1.0, p)))).astype(np.int8)
    spec = ReleaseSpec(epsilon_x=4.0, delta=1e-5, bound=2.0, epsilon_y=2.0, features=names,
                       ranges={f: (-1.0, 1.0) for f in names}, label="y")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # a seeded release (a benchmark, not a real one)
        release({**{f: X[:, j] for j, f in enumerate(names)}, "y": y}, path, spec,
                seed=release_seed)


def write_plain(path: Path, n: int, p: int) -> None:
    subprocess.run([sys.executable, str(ROOT / "bench" / "make_data.py"), "--rows", str(n), "--p",
                    str(p), "--format", "parquet", "--no-metadata", "--out", str(path)],
                   check=True, capture_output=True)


def install_into(target: Path) -> float:
    """A regular (non-editable) install of this tree into ``target``; returns its seconds."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_DISABLE_JIT", "PYTHONPATH")}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--target", str(target), str(ROOT)], env=env,
                   check=True, capture_output=True)
    seconds = time.perf_counter() - t0
    prebuilt = list((target / "iwpfast" / "_kernels" / "prebuilt").glob("kernels-*/*.nbi"))
    print(json.dumps({"step": "regular install (build compiles the kernels)",
                      "s": round(seconds, 1), "prebuilt_functions": len(prebuilt),
                      "load": os.getloadavg()[0]}), flush=True)
    return seconds


def first_fit(repeats: int, package: Path = ROOT,
              label: str = "first fit (empty cache)") -> tuple[list[float], list[float], list[float]]:
    fits, imports, cpus = [], [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="iwpfast-first-fit-") as cache:
            env = dict(os.environ, IWPFAST_CACHE_DIR=cache, PYTHONPATH=str(package))
            env.pop("NUMBA_DISABLE_JIT", None)
            out = subprocess.run([sys.executable, "-c", FIRST_FIT_CHILD], env=env, cwd=package,
                                 capture_output=True, text=True, check=True)
            imp, fit, fit_cpu = (float(v) for v in out.stdout.split())
            imports.append(imp)
            fits.append(fit)
            cpus.append(fit_cpu)
            print(json.dumps({"step": label, "import_s": round(imp, 3),
                              "fit_s": round(fit, 3), "fit_cpu_s": round(fit_cpu, 3),
                              "load": os.getloadavg()[0]}), flush=True)
    return fits, imports, cpus


def first_fits(repeats: int, where: str, results: dict, details: dict) -> None:
    """Goal 4: the first fit of a regular install, and / or of this tree (no prebuilt kernels)."""
    runs = []
    if where in ("install", "both"):
        with tempfile.TemporaryDirectory(prefix="iwpfast-install-") as target:
            install_s = install_into(Path(target))
            runs.append(("first fit (s)", first_fit(repeats, Path(target),
                                                    "first fit, regular install (empty cache)"),
                         f"; the install before it {install_s:.0f} s (its build compiles)"))
    if where in ("source", "both"):
        runs.append(("first fit, no prebuilt (s)",
                     first_fit(repeats, ROOT, "first fit, this tree (empty cache)"),
                     " (information: every kernel compiles)"))
    for key, (fits, imports, cpus), note in runs:
        results[key] = statistics.median(fits)
        details[key] = (f"fit {statistics.median(fits):.2f} s (CPU {statistics.median(cpus):.2f} "
                        f"s) + import {statistics.median(imports):.2f} s (medians of {len(fits)})"
                        f"{note}")


def _kernel_calls(fit, module, names) -> tuple[list, float]:
    """Run ``fit`` with the kernel wrappers ``module.<names>`` counted: ([(cfgs, X, y, thread
    CPU s)] per call, seconds of CPU in ``iwpfast.sgd.scoring.score_heads`` as the search and its
    halving rungs call it, all threads).  A one-head unit (``run_chunk``) is counted as a list of
    its one config."""
    from iwpfast.sgd import halving, tuning
    calls: list = []
    scoring: list[float] = []
    score = tuning.score_heads
    runs = {name: getattr(module, name) for name in names}

    def counted(run):
        def call(cfgs, states, X, y, *args, **kwargs):
            t0 = time.thread_time()
            out = run(cfgs, states, X, y, *args, **kwargs)
            calls.append((cfgs if isinstance(cfgs, list) else [cfgs], X, y,
                          time.thread_time() - t0))
            return out
        return call

    def timed(*args, **kwargs):
        c0 = time.process_time()
        try:
            return score(*args, **kwargs)
        finally:
            scoring.append(time.process_time() - c0)
    for name, run in runs.items():
        setattr(module, name, counted(run))
    tuning.score_heads = halving.score_heads = timed
    try:
        fit()
    finally:
        for name, run in runs.items():
            setattr(module, name, run)
        tuning.score_heads = halving.score_heads = score
    return calls, sum(scoring)


def auto_floor(auto_fit, fixed_fit, fixed_wall: float, fixed_cpu: float) -> tuple[float, str]:
    """(floor / fixed wall, how): goal 1 if 'auto' cost only its kernels' head updates at the
    kernel's speed alone and its scoring, over the usable cores (module doc)."""
    from iwpfast.sgd import engine
    from iwpfast.sgd.state import HeadState
    heads, scoring_cpu = _kernel_calls(auto_fit, engine, ("run_chunk_heads", "run_chunk"))
    fixed_calls, _ = _kernel_calls(fixed_fit, engine, ("run_chunk",))
    if not heads:
        return float("nan"), "(no kernel call to measure)"
    fixed_kernel = sum(c[3] for c in fixed_calls)
    updates = sum(len(c[0]) * len(c[2]) for c in heads)
    in_fit = sum(c[3] for c in heads)
    # the kernel alone: the last chunk's heads of every unit together (the several-heads
    # kernel), on one thread
    last = heads[-1][2]
    cfgs = [cfg for c in heads if c[2] is last for cfg in c[0]]
    X, y = heads[-1][1], heads[-1][2]
    alone = []
    for _ in range(3):
        states = [HeadState.new(cfg) for cfg in cfgs]
        t0 = time.thread_time()
        engine.run_chunk_heads(cfgs, states, X, y)
        alone.append((time.thread_time() - t0) / (len(cfgs) * len(y)))
    per_update = statistics.median(alone)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    floor_cpu = fixed_cpu - fixed_kernel + updates * per_update + scoring_cpu
    floor = floor_cpu / max(cores or 1, 1)
    how = (f"({fixed_cpu:.3f} - {fixed_kernel:.3f} fixed kernel + {updates / 1e6:.1f}M head "
           f"updates x {per_update * 1e9:.2f} ns alone + {scoring_cpu:.3f} scoring) / {cores} "
           f"cores = {floor:.3f} s vs fixed {fixed_wall:.3f} s; in the fit the heads' kernels "
           f"took {in_fit:.3f} CPU s ({in_fit / updates * 1e9:.2f} ns per update)")
    return floor / fixed_wall, how


def classes_floor(k_fixed_fit, k_auto_fit, k: int, binary_auto: tuple) -> tuple[float, str]:
    """(floor / binary 'auto' wall, how): the least a k-class 'auto' can cost against the binary
    'auto' measured (wall s, CPU s), when each class chooses by the paired standard-error
    rule among at least ``HALVING_MIN`` heads trained to the end: every head of the grid (k x G)
    up to the race's first rung, then k x HALVING_MIN head updates per training row, at the
    k-head kernel's speed (that of the fixed k-class fit, on one thread), over the usable cores,
    with no rung, scoring, reading or Python cost at all.  Also that CPU against the binary
    'auto''s CPU (a machine with one core)."""
    from iwpfast.settings import SearchOptions
    from iwpfast.sgd import engine
    calls, _ = _kernel_calls(k_fixed_fit, engine, ("run_chunk_heads", "run_chunk"))
    updates = sum(len(c[0]) * len(c[2]) for c in calls)
    per_update = sum(c[3] for c in calls) / max(updates, 1)
    table = k_auto_fit().tuning_
    n_train = int(table["n_train"])
    heads = len(table["alpha"])                        # k x G rows: (class, grid point)
    first = min((r for r in table["pruned_at_row"] if r is not None), default=0)
    cpu = (heads * first + k * SearchOptions().halving_min * (n_train - first)) * per_update
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    floor = cpu / max(cores or 1, 1)
    how = (f"({heads} heads x {first:,} rows to the first rung + {k} classes x "
           f"{SearchOptions().halving_min} heads x {(n_train - first) / 1e6:.2f}M rows) x "
           f"{per_update * 1e9:.2f} ns per update of the k-class kernel = {cpu:.3f} CPU s "
           f"({cpu / binary_auto[1]:.2f}x the binary auto's CPU {binary_auto[1]:.3f} s) / "
           f"{cores} cores = {floor:.3f} s vs binary auto {binary_auto[0]:.3f} s")
    return floor / binary_auto[0], how


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="small sizes (4e5 rows, 2e6 decode rows, 3 repeats, 1 first fit)")
    ap.add_argument("--rows", type=int, default=None, help="rows of goals 1, 2, 5 (4e6)")
    ap.add_argument("--decode-rows", type=int, default=None, help="rows of goal 3 (5e7)")
    ap.add_argument("--repeats", type=int, default=None, help="interleaved repeats (5)")
    ap.add_argument("--first-fit-repeats", type=int, default=None, help="fresh processes (3)")
    ap.add_argument("--first-fit-from", choices=("install", "source", "both"), default="both",
                    help="goal 4: a regular install of this tree (the goal), this tree itself "
                         "(no prebuilt kernels), or both (default)")
    ap.add_argument("--breakdown", action="store_true",
                    help="after the first fits, one more with the compile time of each function "
                         "and signature (bench/compile_cost.py)")
    ap.add_argument("--decode-in-turn", action="store_true",
                    help="also time goal 3's fit with PARQUET_DECODE_THREADS = 1 (information)")
    ap.add_argument("--skip", default="", help="comma-separated goals to skip: auto,k5,decode,"
                                               "first,read")
    a = ap.parse_args(argv)
    rows = a.rows or (400_000 if a.quick else 4_000_000)
    decode_rows = a.decode_rows or (2_000_000 if a.quick else 50_000_000)
    repeats = a.repeats or (3 if a.quick else 5)
    first_repeats = a.first_fit_repeats or (1 if a.quick else 3)
    skip = set(filter(None, a.skip.split(",")))
    p = 10
    print(f"# {machine()}")
    print(f"# {load()} at the start; rows {rows:,}, decode rows {decode_rows:,}, "
          f"repeats {repeats}", flush=True)

    results: dict[str, float] = {}
    details: dict[str, str] = {}
    if "first" not in skip:        # first: the other steps below would load the machine's cache
        first_fits(first_repeats, a.first_fit_from, results, details)
        if a.breakdown:
            from compile_cost import measure, table
            print(table(measure()), flush=True)

    import pyarrow.parquet as pq

    from iwpfast import IWPClassifier
    from iwpfast.sgd import engine

    engine.warmup(dtypes=("float32", "float64"))
    fixed = dict(alpha=0.5, learning_rate=0.03, variance_cap=2.0, progress=False)   # release
    fixed_plain = dict(alpha=1.0, learning_rate=1e-3, progress=False)   # arrays, plain file
    noise = dict(noise_var=0.25, epsilon_y=2.0)
    steps: dict[str, object] = {}
    tmp = Path(tempfile.mkdtemp(prefix="iwpfast-default-cost-"))
    try:
        if "auto" not in skip:
            release_path = tmp / "release.parquet"
            write_release(release_path, rows, p)
            steps["auto fit(path)"] = lambda: IWPClassifier(progress=False).fit(release_path)
            steps["fixed fit(path)"] = lambda: IWPClassifier(**fixed).fit(release_path)
        if "k5" not in skip or "read" not in skip:
            rng = np.random.default_rng(1)
            X = np.empty((rows, p), np.float32, order="F")
            for j in range(p):
                X[:, j] = rng.uniform(-1.0, 1.0, rows).astype(np.float32)
            score = X[:, :5] + rng.gumbel(size=(rows, 5)).astype(np.float32)
            y5 = np.argmax(score, axis=1).astype(np.int8)
            y2 = (y5 == 0).astype(np.int8)
            steps["binary fit(X, y)"] = lambda: IWPClassifier(**fixed_plain).fit(X, y2, **noise)
            if "k5" not in skip:
                steps["k=5 fit(X, y)"] = lambda: IWPClassifier(**fixed_plain).fit(
                    X, y5, classes=list(range(5)), **noise)
                steps["binary auto fit(X, y)"] = lambda: IWPClassifier(progress=False).fit(
                    X, y2, **noise)
                steps["k=5 auto fit(X, y)"] = lambda: IWPClassifier(progress=False).fit(
                    X, y5, classes=list(range(5)), **noise)
            if "read" not in skip:
                columns = X.T                    # (p, n) C-contiguous view: row j is column j

                def read_limit():
                    np.add.reduce(columns, axis=1)
                    np.add.reduce(y2)
                steps["read limit (np.add.reduce)"] = read_limit
        if "decode" not in skip:
            plain = tmp / "plain.parquet"
            write_plain(plain, decode_rows, p)
            features = [f"x{j}" for j in range(p)]

            def decode():
                pf = pq.ParquetFile(plain, pre_buffer=False, memory_map=True)
                for _ in pf.iter_batches(batch_size=1 << 18, columns=[*features, "y"]):
                    pass
            steps["decode-only (pyarrow)"] = decode
            steps["fixed fit(path), plain file"] = lambda: IWPClassifier(**fixed_plain).fit(
                plain, features=features, label="y", **noise)
            if a.decode_in_turn:
                from iwpfast.io import format_readers

                def fit_in_turn():
                    # each batch decoded when the reader asks, with pyarrow's threads (the
                    # reader before the column threads)
                    saved = format_readers.PARQUET_DECODE_THREADS
                    format_readers.PARQUET_DECODE_THREADS = 1
                    try:
                        IWPClassifier(**fixed_plain).fit(plain, features=features, label="y",
                                                         **noise)
                    finally:
                        format_readers.PARQUET_DECODE_THREADS = saved
                steps["fixed fit(path), decoded in turn"] = fit_in_turn
        print(f"# data written; {load()}", flush=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for fn in steps.values():          # compile, warm the page cache
                fn()
            times: dict[str, list[float]] = {name: [] for name in steps}
            cpu_times: dict[str, list[float]] = {name: [] for name in steps}
            names = list(steps)
            for r in range(repeats):
                for name in (names if r % 2 == 0 else names[::-1]):
                    t0, c0 = time.perf_counter(), time.process_time()
                    steps[name]()
                    dt, dc = time.perf_counter() - t0, time.process_time() - c0
                    times[name].append(dt)
                    cpu_times[name].append(dc)
                    print(json.dumps({"step": name, "round": r, "s": round(dt, 4),
                                      "cpu_s": round(dc, 4), "load": os.getloadavg()[0]}),
                          flush=True)
            if "k=5 auto fit(X, y)" in times:
                k5_floor = classes_floor(
                    steps["k=5 fit(X, y)"], steps["k=5 auto fit(X, y)"], 5,
                    (statistics.median(times["binary auto fit(X, y)"]),
                     statistics.median(cpu_times["binary auto fit(X, y)"])))
            if "auto fit(path)" in times:
                floor = auto_floor(steps["auto fit(path)"], steps["fixed fit(path)"],
                                   statistics.median(times["fixed fit(path)"]),
                                   statistics.median(cpu_times["fixed fit(path)"]))
    finally:
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()

    med = {name: statistics.median(ts) for name, ts in times.items()}
    cpu = {name: statistics.median(ts) for name, ts in cpu_times.items()}
    print("\n# medians: wall s, M rows/s; CPU s (all threads of the process)")
    for name, m in med.items():
        n = decode_rows if ("decode" in name or "plain" in name) else rows
        print(f"{name:30s} {m:8.3f} s  {n / m / 1e6:8.2f} M rows/s   CPU {cpu[name]:8.3f} s")
    cpu_ratio: dict[str, float] = {}

    def ratio(key, num, den, note=""):
        if num in med and den in med:
            results[key] = med[num] / med[den]
            cpu_ratio[key] = cpu[num] / cpu[den]
            details[key] = f"{num} / {den}{note}"

    ratio("auto / fixed", "auto fit(path)", "fixed fit(path)")
    if "auto fit(path)" in med:
        results["auto floor"], details["auto floor"] = floor[0], f"(information) {floor[1]}"
    ratio("k=5 / binary", "k=5 fit(X, y)", "binary fit(X, y)")
    ratio("k=5 auto / binary auto", "k=5 auto fit(X, y)", "binary auto fit(X, y)",
          " (issue 33)")
    if "k=5 auto fit(X, y)" in med:
        results["k=5 auto floor"], details["k=5 auto floor"] = \
            k5_floor[0], f"(information) {k5_floor[1]}"
    ratio("fit(path) / decode", "fixed fit(path), plain file", "decode-only (pyarrow)")
    ratio("in turn / decode", "fixed fit(path), decoded in turn", "decode-only (pyarrow)",
          " (information)")
    ratio("fit / read limit", "read limit (np.add.reduce)", "binary fit(X, y)")
    print(f"\n# goals ({load()} at the end)")
    print(f"{'ratio (wall)':26s} {'figure':>8s}  {'goal':8s} {'':7s} {'CPU':>6s}  how")
    for key, value in results.items():
        goal = GOALS.get(key)
        if goal is None:
            verdict, text = "", ""
        else:
            op, bound = goal
            met = value <= bound if op == "<=" else value >= bound
            verdict, text = ("met" if met else "missed"), f"{op} {bound:g}"
        cpu_text = f"{cpu_ratio[key]:6.2f}" if key in cpu_ratio else f"{'':6s}"
        print(f"{key:26s} {value:8.2f}  {text:8s} {verdict:7s} {cpu_text}  {details[key]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
