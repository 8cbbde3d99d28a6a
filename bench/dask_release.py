"""The Dask release on 1 and on 2 workers, same files, same run.

    python bench/dask_release.py --files 8 --rows 2000000 --repeat 3

Writes ``--files`` raw Parquet files of ``--rows`` rows (p = 10 float32 features in [-1, 1] and a
0/1 label) under ``--dir``, starts two local Dask clusters (1 worker and 2 workers, one thread
each), warms both up (imports, first release in each worker), then alternates
``iwpfast.distributed.release_files(client, raw/, out/, spec, seed=...)`` on each, ``--repeat``
times (order reversed every other round).  Prints one JSON line per run and the medians in
M rows/s with the 2-worker / 1-worker ratio (goal >= 1.6x), the CPU model and the load average
(the machine is shared: say how loaded it was).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from iwpfast.benchmarks import cpu_model  # noqa: E402


def _process_cpu_seconds() -> float:
    """User + system CPU seconds of this (worker) process, all threads."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def make_raw(directory, files, rows, p=10):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(directory, exist_ok=True)
    for i in range(files):
        path = os.path.join(directory, f"raw-{i:03d}.parquet")
        if os.path.exists(path) and pq.ParquetFile(path).metadata.num_rows == rows:
            continue
        r = np.random.default_rng(i)
        cols = {f"x{j}": r.uniform(-1, 1, rows).astype(np.float32) for j in range(p)}
        cols["y"] = r.integers(0, 2, rows).astype(np.int8)
        pq.write_table(pa.table(cols), path, compression="none")


def main():
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/iwpfast-bench-dask")
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    import iwpfast
    from iwpfast.distributed import release_files

    p = 10
    raw = os.path.join(args.dir, "raw")
    make_raw(raw, args.files, args.rows, p)
    spec = iwpfast.ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=p ** 0.5, epsilon_y=1.0,
                               ranges={f"x{j}": (-1, 1) for j in range(p)})
    features = [f"x{j}" for j in range(p)]
    clusters = {n: LocalCluster(n_workers=n, threads_per_worker=1, dashboard_address=None)
                for n in (1, 2)}
    clients = {n: Client(c) for n, c in clusters.items()}
    total = args.files * args.rows
    times = {1: [], 2: []}

    cpu = {1: [], 2: []}

    def run(n, tag):
        out = os.path.join(args.dir, f"out-{n}") + "/"
        before = clients[n].run(_process_cpu_seconds)
        t0 = time.perf_counter()
        res = release_files(clients[n], raw, out, spec, features=features, label="y", seed=5,
                            overwrite=True)
        dt = time.perf_counter() - t0
        after = clients[n].run(_process_cpu_seconds)
        per_worker = [after[w] - before[w] for w in after]
        assert res.rows_written == total
        print(json.dumps({"workers": n, "run": tag, "rows": total, "seconds": round(dt, 3),
                          "M_rows_per_s": round(total / dt / 1e6, 3),
                          "worker_cpu_s": [round(c, 2) for c in per_worker],
                          "loadavg": os.getloadavg()[0]}), flush=True)
        if tag != "warm-up":
            cpu[n].append(per_worker)
        return dt

    try:
        for n in (1, 2):
            run(n, "warm-up")
        for rnd in range(args.repeat):
            for n in ((1, 2) if rnd % 2 == 0 else (2, 1)):
                times[n].append(run(n, rnd))
    finally:
        for c in clients.values():
            c.close()
        for c in clusters.values():
            c.close()
    med = {n: total / statistics.median(v) for n, v in times.items()}
    print(f"\nCPU: {cpu_model()} ({os.cpu_count()} cores); load average {os.getloadavg()}; "
          f"{args.files} files x {args.rows:,} rows, p = {p}; medians of {args.repeat} runs")
    for n in (1, 2):
        print(f"{n} worker(s): {med[n] / 1e6:7.2f} M rows/s")
    print(f"2 workers / 1 worker: {med[2] / med[1]:.2f}x (wall clock, this machine as loaded)")
    # CPU seconds the worker processes spent (all their threads): what the release costs, apart
    # from how much of the machine the other processes left; on an idle 2-core machine the
    # 2-worker run takes about max(per-worker CPU) and the 1-worker run sum(CPU)
    one = statistics.median(sum(c) for c in cpu[1])
    two_total = statistics.median(sum(c) for c in cpu[2])
    two_max = statistics.median(max(c) for c in cpu[2])
    print(f"worker CPU seconds (medians): 1 worker {one:.2f}; 2 workers {two_total:.2f} in all, "
          f"{two_max:.2f} on the busier worker; CPU-time speedup "
          f"{one / two_max:.2f}x (1 worker's CPU time / the busier worker's of 2)")
    shutil.rmtree(os.path.join(args.dir, "out-1"), ignore_errors=True)
    shutil.rmtree(os.path.join(args.dir, "out-2"), ignore_errors=True)


if __name__ == "__main__":
    main()
