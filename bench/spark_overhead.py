"""Where ``iwpfast.spark`` spends its time: rows/s of Spark ``local[N]`` against one CLI process
on the same rows.

Writes ``--rows`` rows (p = 4 float64 features in [-1, 1] + a 0/1 label with a signal) as
``--files`` Parquet files, read by Spark as one partition per file (no shuffle), then runs, in
``--repeat`` rounds:

- ``cli_release``: ``iwpfast release raw/ out.parquet`` in a subprocess (``M_rows_per_s``: the
  rate the CLI reports, reading to committing; ``wall_s``: the whole process, start-up and
  imports included);
- ``count``: Spark's own hand-over of the rows to Python: a ``mapInArrow`` that only counts them
  (what bounds anything done on the rows in Python workers);
- ``gather``: the hand-over plus gathering Spark's Arrow batches into batches of
  ``record_batch_rows`` (what ``release_batches`` does before the noise);
- ``release_dataframe`` (a folder of one part per partition; the first round's first job also
  pays the Python workers' import of iwpfast and the kernels' load: ``first``);
- ``cli_fit`` / ``fit_dataframe``: a fixed-hyper-parameter fit (alpha 1, step 0.002, tail
  averaging, variance cap 2) of the release, and with ``--auto`` the 'auto' fit too.

``--profile`` adds a cProfile of one release task (the executor's Python) and of the driver's
``fit_dataframe``.  Prints one JSON line per measurement, then the medians, the CPU model and
the load average (the machine may be shared: quote medians and the load).

    python bench/spark_overhead.py --rows 2000000 --repeat 3
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from iwpfast.benchmarks import cpu_model  # noqa: E402  (after the path: runs from a checkout)

FEATURES = ["x0", "x1", "x2", "x3"]
SPEC_ARGS = dict(epsilon_x=2.0, delta=1e-5, bound=2.0, epsilon_y=1.0)
FIT = dict(alpha=1.0, learning_rate=0.002, average="tail", variance_cap=2.0)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def make_raw(folder: str, rows: int, files: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(folder)
    r = np.random.default_rng(0)
    w = np.array([1.0, -0.5, 0.25, 0.0])
    for i in range(files):
        n = rows // files + (1 if i < rows % files else 0)
        x = r.uniform(-1, 1, (n, 4))
        y = (x @ w + 0.3 * r.standard_normal(n) > 0).astype(np.int64)
        cols = {f: x[:, j] for j, f in enumerate(FEATURES)}
        cols["y"] = y
        pq.write_table(pa.table(cols), os.path.join(folder, f"in-{i:03d}.parquet"))


def spec():
    import iwpfast

    return iwpfast.ReleaseSpec(**SPEC_ARGS, ranges={f: (-1, 1) for f in FEATURES},
                               features=tuple(FEATURES), label="y")


def cli(*args) -> tuple[float, str]:
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "iwpfast.cli", *args], capture_output=True,
                         text=True, env=env)
    wall = time.perf_counter() - t
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return wall, out.stdout + out.stderr


def cli_release(raw: str, out: str, rows: int) -> dict:
    import re

    ranges = [f"{f}=-1:1" for f in FEATURES]
    wall, text = cli("release", raw, out, "--features", *ranges, "--label", "y",
                     "--epsilon-x", "2", "--delta", "1e-5", "--bound", "2", "--epsilon-y", "1",
                     "--progress", "none", "--overwrite")
    seconds = float(re.search(r"in ([0-9.]+) s", text).group(1))
    return {"step": "cli_release", "rows": rows, "seconds": seconds, "wall_s": round(wall, 3),
            "M_rows_per_s": round(rows / seconds / 1e6, 3)}


def cli_fit(release: str, rows: int, model: str, auto: bool) -> dict:
    extra = [] if auto else ["--alpha", str(FIT["alpha"]), "--learning-rate",
                             str(FIT["learning_rate"]), "--average", FIT["average"],
                             "--variance-cap", str(FIT["variance_cap"])]
    wall, _ = cli("fit", release, "--out", model, "--progress", "none", "--overwrite", *extra)
    return {"step": "cli_fit_auto" if auto else "cli_fit", "rows": rows, "wall_s": round(wall, 3),
            "M_rows_per_s": round(rows / wall / 1e6, 3)}


def timed(step: str, rows: int, fn) -> dict:
    t = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t
    return {"step": step, "rows": rows, "seconds": round(seconds, 3),
            "M_rows_per_s": round(rows / seconds / 1e6, 3)}


def count_job(df) -> int:
    import pyarrow as pa

    def count(batches):
        n = 0
        for b in batches:
            n += b.num_rows
        yield pa.RecordBatch.from_pydict({"rows": [n]})

    return sum(r["rows"] for r in df.mapInArrow(count, "rows long").collect())


def gather_job(df, record_batch_rows: int) -> int:
    import pyarrow as pa

    def gather(batches):
        from iwpfast.privacy.multipart import _rebatched

        n = 0
        for b in _rebatched(batches, record_batch_rows):
            n += b.num_rows
        yield pa.RecordBatch.from_pydict({"rows": [n]})

    return sum(r["rows"] for r in df.mapInArrow(gather, "rows long").collect())


def profile_release_task(df, folder: str) -> str:
    """A cProfile of the release of each partition, in its task (executor side)."""
    import pyarrow as pa

    from iwpfast.privacy.multipart import new_release_id
    from iwpfast.spark import arrow_schema, release_partition

    schema, the_spec, rid = arrow_schema(df.select(*FEATURES, "y")), spec(), new_release_id()

    def task(batches):
        import cProfile
        import io
        import pstats

        from pyspark import TaskContext

        pid = TaskContext.get().partitionId()
        prof = cProfile.Profile()
        t = time.perf_counter()
        prof.enable()
        list(release_partition(pid, batches, folder, the_spec, rid, schema))
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(15)
        yield pa.RecordBatch.from_pydict(
            {"text": [f"partition {pid}: {time.perf_counter() - t:.3f} s\n{text.getvalue()}"]})

    return "\n".join(r["text"] for r in df.select(*FEATURES, "y").mapInArrow(
        task, "text string").collect())


def main():
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--files", type=int, default=4, help="input files = Spark partitions")
    ap.add_argument("--cores", type=int, default=2, help="Spark local[N]")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-records-per-batch", type=int, default=None,
                    help="spark.sql.execution.arrow.maxRecordsPerBatch (default: Spark's 10,000)")
    ap.add_argument("--auto", action="store_true", help="also the 'auto' fits")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--keep", help="work in this folder (kept) instead of a temporary one")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import iwpfast
    from iwpfast.spark import fit_dataframe, release_dataframe

    print(json.dumps({"cpu": cpu_model(), "cores": os.cpu_count(), "load": load(),
                      "rows": args.rows, "partitions": args.files, "spark": f"local[{args.cores}]",
                      "iwpfast": iwpfast.__version__}))
    tmp = args.keep or tempfile.mkdtemp(prefix="iwpfast-spark-bench-")
    raw = os.path.join(tmp, "raw")
    if not os.path.isdir(raw):
        make_raw(raw, args.rows, args.files)
    from pyspark.sql import SparkSession

    size = max(os.path.getsize(os.path.join(raw, f)) for f in os.listdir(raw))
    builder = (SparkSession.builder.master(f"local[{args.cores}]").appName("iwpfast-bench")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               # one partition per input file (Spark would otherwise pack small files together)
               .config("spark.sql.files.maxPartitionBytes", str(size + 1))
               .config("spark.sql.files.openCostInBytes", str(size + 1)))
    if args.max_records_per_batch:
        builder = builder.config("spark.sql.execution.arrow.maxRecordsPerBatch",
                                 str(args.max_records_per_batch))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    results: list[dict] = []

    def emit(r: dict, round_: int) -> None:
        r["round"] = round_
        r["load"] = load()
        results.append(r)
        print(json.dumps(r), flush=True)

    try:
        df = spark.read.parquet(raw)
        assert df.rdd.getNumPartitions() == args.files, df.rdd.getNumPartitions()
        the_spec = spec()
        rel = os.path.join(tmp, "rel") + "/"
        count_job(df)     # the Python workers started (not timed: no iwpfast imported yet)
        for k in range(args.repeat):
            emit(cli_release(raw, os.path.join(tmp, "cli.parquet"), args.rows), k)
            emit(timed("count", args.rows, lambda: count_job(df)), k)
            emit(timed("gather", args.rows, lambda: gather_job(df, 1 << 17)), k)
            shutil.rmtree(rel, ignore_errors=True)
            emit(timed("release_dataframe", args.rows, lambda: release_dataframe(
                df, rel, the_spec, features=FEATURES, label="y")), k)
            if k == 0:
                results[-1]["step"] = "release_dataframe_first"
            emit(cli_fit(rel, args.rows, os.path.join(tmp, "m.json"), False), k)
            emit(timed("fit_dataframe", args.rows, lambda: fit_dataframe(
                spark.read.parquet(rel), iwpfast.IWPClassifier(**FIT, progress=False))), k)
            if args.auto:
                emit(cli_fit(rel, args.rows, os.path.join(tmp, "m.json"), True), k)
                emit(timed("fit_dataframe_auto", args.rows, lambda: fit_dataframe(
                    spark.read.parquet(rel), iwpfast.IWPClassifier(progress=False))), k)
        if args.profile:
            prof = os.path.join(tmp, "prof")
            shutil.rmtree(prof, ignore_errors=True)
            os.makedirs(prof)
            print(profile_release_task(df, prof))
            import cProfile
            import pstats
            p = cProfile.Profile()
            p.enable()
            fit_dataframe(spark.read.parquet(rel), iwpfast.IWPClassifier(**FIT, progress=False))
            p.disable()
            pstats.Stats(p).sort_stats("cumulative").print_stats(25)
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    steps: dict = {}
    for r in results:
        steps.setdefault(r["step"], []).append(r["M_rows_per_s"])
    cli_rate = statistics.median(steps["cli_release"])
    summary = {s: {"median_M_rows_per_s": round(statistics.median(v), 3),
                   "runs": v, "x_cli_release": round(statistics.median(v) / cli_rate, 2)}
               for s, v in steps.items()}
    print(json.dumps({"summary": summary, "cpu": cpu_model(), "load": load()}, indent=1))


if __name__ == "__main__":
    main()
