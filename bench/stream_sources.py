"""Releasing from Arrow streams: rows/s and peak memory of ``iwpfast.release`` from each source
kind, against the same rows read from a Parquet file.

Writes ``--rows`` rows (p = 4 float64 features + a 0/1 label) to a Parquet file, then releases
them (discrete Gaussian, seed 1, float32 output, to an IPC stream sink that drops the bytes: no
storage in the figure) from: the file, a polars LazyFrame (``pl.scan_parquet``, streamed), a DuckDB relation
(``duckdb.sql("select * from 'raw.parquet'")``, streamed), a generator of RecordBatches of 65,536
rows read from the file, an object exporting only ``__arrow_c_stream__``, and a generator
making its batches as they are asked for (``generated``: no file behind it, so its peak RSS is
the release's own memory).  Each kind runs in
its own process (``--kind``; the driver starts them), so the peak RSS (``VmHWM``) is that
kind's.  Also times ``release_stream`` read to its end from the file.

    python bench/stream_sources.py --rows 2000000
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

KINDS = ["parquet", "polars-lazy", "duckdb", "generator", "capsule", "release_stream", "generated"]


def make_raw(path: str, rows: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    r = np.random.default_rng(0)
    cols = {f"x{j}": r.uniform(-1, 1, rows) for j in range(4)}
    cols["y"] = (r.uniform(size=rows) > 0.5).astype(np.int64)
    pq.write_table(pa.table(cols), path)


class _Discard:
    """A sink that drops what it is given (the figure is the release, not the storage)."""

    def write(self, data) -> int:
        return memoryview(data).nbytes

    def flush(self) -> None:
        pass


class _Capsule:
    def __init__(self, reader):
        self.reader = reader

    def __arrow_c_stream__(self, requested_schema=None):
        return self.reader.__arrow_c_stream__(requested_schema)


def _generated(rows: int):
    """Batches made as they are asked for (no file behind them: the memory is the release's)."""
    import numpy as np
    import pyarrow as pa

    r = np.random.default_rng(0)
    for start in range(0, rows, 65536):
        n = min(65536, rows - start)
        cols = {f"x{j}": r.uniform(-1, 1, n) for j in range(4)}
        cols["y"] = (r.uniform(size=n) > 0.5).astype(np.int64)
        yield pa.RecordBatch.from_pydict(cols)


def source_of(kind: str, path: str, rows: int):
    import pyarrow.parquet as pq

    if kind in ("parquet", "release_stream"):
        return path
    if kind == "polars-lazy":
        import polars as pl
        return pl.scan_parquet(path)
    if kind == "duckdb":
        import duckdb
        return duckdb.sql(f"select * from '{path}'")
    if kind == "generated":
        return _generated(rows)
    batches = pq.ParquetFile(path).iter_batches(batch_size=65536)
    if kind == "generator":
        return (b for b in batches)
    import pyarrow as pa
    schema = pq.ParquetFile(path).schema_arrow
    return _Capsule(pa.RecordBatchReader.from_batches(schema, batches))


def run_kind(kind: str, path: str, rows: int) -> dict:
    import iwpfast
    from iwpfast.privacy import release_stream

    spec = iwpfast.ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=2.0, epsilon_y=1.0,
                               ranges={f"x{j}": (-1, 1) for j in range(4)},
                               features=tuple(f"x{j}" for j in range(4)), label="y")
    warnings.simplefilter("ignore")
    iwpfast.release(_generated(70_000), _Discard(), spec, seed=1, engine="numba")  # warm kernels
    source = source_of(kind, path, rows)
    t = time.perf_counter()
    if kind == "release_stream":
        n = sum(b.num_rows for b in release_stream(source, spec, seed=1, engine="numba"))
    else:
        n = iwpfast.release(source, _Discard(), spec, seed=1, engine="numba").rows_written
    seconds = time.perf_counter() - t
    assert n == rows
    return {"kind": kind, "rows": n, "seconds": round(seconds, 3),
            "M_rows_per_s": round(n / seconds / 1e6, 2),
            "peak_rss_MiB": peak_rss_mib()}


def peak_rss_mib() -> float:
    """This process's peak RSS (VmHWM: reset by exec, unlike ru_maxrss, which a child started by
    the driver inherits from the driver holding the data it wrote)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def main():
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--kind", choices=KINDS)
    ap.add_argument("--path")
    ap.add_argument("--read-ahead", type=int, default=None,
                    help="iwpfast.io.sources.STREAM_READ_AHEAD for the stream kinds (default: "
                         "the library's); --ab runs each kind with 0 and the default")
    ap.add_argument("--ab", action="store_true")
    args = ap.parse_args()
    if args.kind:
        import iwpfast.io.sources as sources
        if args.read_ahead is not None:
            sources.STREAM_READ_AHEAD = args.read_ahead
        out = run_kind(args.kind, args.path, args.rows)
        out["read_ahead"] = sources.STREAM_READ_AHEAD
        print(json.dumps(out))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "raw.parquet")
        make_raw(path, args.rows)
        for kind in KINDS:
            settings = ([["--read-ahead", "0"], []] if args.ab else
                        [[] if args.read_ahead is None else ["--read-ahead", str(args.read_ahead)]])
            for extra in settings:
                out = subprocess.run([sys.executable, __file__, "--kind", kind, "--path", path,
                                      "--rows", str(args.rows), *extra], capture_output=True,
                                     text=True)
                print(out.stdout.strip() or out.stderr.strip()[-500:])


if __name__ == "__main__":
    main()
