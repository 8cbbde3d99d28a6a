"""Streaming benchmark: one IWP pass end to end next to pyarrow's decode-only time, same run.

    python bench/stream.py bench/data/r300m.parquet --repeat 2
    /usr/bin/time -v python bench/stream.py bench/data/r300m.arrow --steps decode,fit_1  # peak RSS

Steps (``--steps``, comma-separated; a warm-up decode runs first so the page cache is warm, and
with ``--repeat`` odd rounds run the steps in reverse order):
- ``decode``: pyarrow alone -- Parquet: ``ParquetFile(pre_buffer=False).iter_batches`` over the
  used columns (``decode_mmap``: the same with ``memory_map=True``, as iwpfast reads); IPC:
  memory-mapped record batches with every column touched (a sum);
  CSV: ``pyarrow.csv.open_csv`` over all blocks.
- ``reader``: iwpfast's ChunkReader alone (prefetch thread, validation, views), no kernel;
  ``reader_4chunk``: the same with the 4-chunk source batches used before (comparison);
  ``reader_pread``: Parquet read with buffered reads instead of a memory map (comparison).
- ``kernel_1``: the Numba kernel alone, cycling over 8 chunks held in memory, same row count.
- ``fit_1``: ``fit_stream`` with 1 head (IWP, exponential loss); ``fit_3_seq``: 3 heads (IWP,
  naive, IWP with another step) in one scan, kernels one after the other (``head_threads=1``);
  ``fit_3_par``: the same with one thread per head (``head_threads=3``); ``fit_3``: the default
  (``default_head_threads``: parallel for IPC, sequential for Parquet/CSV on 2 cores).
Prints one JSON line per measurement: rows, seconds, M rows/s, the load average, and the
process's peak VmRSS and RssAnon (sampled every 50 ms from /proc/self/status: mapped file pages
are page cache, RssAnon is what the program itself holds).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


class MemorySampler:
    def __init__(self, period=0.05):
        self.period = period
        self.peak = {"VmRSS": 0, "RssAnon": 0}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def sample(self):
        with open("/proc/self/status") as f:
            for line in f:
                key = line.split(":")[0]
                if key in self.peak:
                    self.peak[key] = max(self.peak[key], int(line.split()[1]) // 1024)  # MiB

    def _run(self):
        while not self._stop.is_set():
            self.sample()
            time.sleep(self.period)

    def __enter__(self):
        self.peak = {"VmRSS": 0, "RssAnon": 0}
        self._stop.clear()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.sample()


def decode_only(path, columns, batch_rows, memory_map=False):
    import pyarrow as pa
    rows = 0
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq
        pf = pq.ParquetFile(path, pre_buffer=False, memory_map=memory_map)
        for b in pf.iter_batches(batch_size=batch_rows, columns=columns):
            rows += b.num_rows
    elif path.endswith(".arrow"):
        with pa.memory_map(path) as mm:
            r = pa.ipc.open_file(mm)
            for i in range(r.num_record_batches):
                b = r.get_batch(i)
                for c in b.columns:  # touch every byte: mmapped data is read lazily
                    np.add.reduce(c.to_numpy())
                rows += b.num_rows
    else:
        from pyarrow import csv
        with csv.open_csv(path, read_options=csv.ReadOptions(block_size=1 << 22)) as r:
            for b in r:
                rows += b.num_rows
    return rows


def report(name, path, rows, dt, mem, **extra):
    out = {"step": name, "file": os.path.basename(path), "rows": rows, "seconds": round(dt, 3),
           "M_rows_per_s": round(rows / dt / 1e6, 2), "peak_VmRSS_MiB": mem.peak["VmRSS"],
           "peak_RssAnon_MiB": mem.peak["RssAnon"], **extra}
    print(json.dumps(out), flush=True)
    return out


STEPS = ["decode", "decode_mmap", "reader", "reader_4chunk", "reader_pread", "kernel_1", "fit_1",
         "fit_3_seq", "fit_3_par", "fit_3"]


def main(argv=None):
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument("path")
    ap.add_argument("--steps", default="decode,reader,kernel_1,fit_1,fit_3_seq,fit_3_par",
                    help=f"comma-separated, from {STEPS}")
    ap.add_argument("--loss", default="exponential")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--chunk-rows", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds; odd rounds run the steps in reverse order")
    a = ap.parse_args(argv)
    steps = a.steps.split(",")
    unknown = [x for x in steps if x not in STEPS]
    if unknown:
        ap.error(f"unknown steps {unknown}; choose from {STEPS}")

    from iwpfast.io.reader import SOURCE_BATCH_CHUNKS, ChunkReader, default_chunk_rows
    from iwpfast.io.sources import open_source
    default_mmap = os.environ.get("IWPFAST_MEMORY_MAP")
    from iwpfast.sgd import engine
    from iwpfast.sgd.driver import Head, fit_stream, noise_from_release
    from iwpfast.sgd.state import HeadConfig, HeadState

    src = open_source(a.path)
    meta = src.release_metadata
    if meta is not None:
        features = list(meta["features"])
        noise = noise_from_release(meta, features)
    else:  # CSV carries no schema metadata: make_data.py's columns and defaults (sigma 0.5, q 0.9)
        features = [c for c in src.full_schema.names if c != "y"]
        noise = noise_from_release(None, features, noise_var=0.25, label_keep_prob=0.9)
    p = len(features)
    columns = features + ["y"]
    chunk_rows = a.chunk_rows or default_chunk_rows(4 * p + 1)
    mem = MemorySampler()

    def cfg(mode, lr):
        return HeadConfig(loss=a.loss, mode=mode, n_features=p,
                          noise_var=noise.noise_var if mode == "iwp" else np.zeros(p),
                          label_keep_prob=noise.label_keep_prob, batch_size=a.batch_size,
                          learning_rate=lr, alpha=1e-3, radius=2.0, average_start=-1)
    all_heads = [Head("iwp", cfg("iwp", 1e-3), features, "y"),
                 Head("naive", cfg("naive", 1e-3), features, "y"),
                 Head("iwp_small", cfg("iwp", 3e-4), features, "y")]
    # compile before timing (cached on disk by the engine)
    for h in all_heads:
        st = HeadState.new(h.config)
        engine.run_chunk(h.config, st, np.zeros((p, 300), np.float32), np.ones(300, np.int8))
    n_rows = src.num_rows
    # for kernel-only: 8 chunks copied into memory (~85 MiB at p = 10: more than the 32 MiB L3,
    # so the kernel reads from RAM as in a pass, not from cache)
    in_memory = []
    for ch in ChunkReader(open_source(a.path), [features], ["y"], chunk_rows, prefetch=False):
        in_memory.append(([np.array(c) for c in ch.features[0]], np.array(ch.labels["y"])))
        if len(in_memory) == 8:
            break

    def run(step):
        extra = {}
        if step in ("decode", "decode_mmap"):
            rows = decode_only(a.path, columns, chunk_rows, memory_map=step == "decode_mmap")
        elif step in ("reader", "reader_4chunk", "reader_pread"):
            os.environ["IWPFAST_MEMORY_MAP"] = str(int(step != "reader_pread"))
            try:
                r = ChunkReader(open_source(a.path), [features], ["y"], chunk_rows)
            finally:
                if default_mmap is None:
                    os.environ.pop("IWPFAST_MEMORY_MAP", None)
                else:
                    os.environ["IWPFAST_MEMORY_MAP"] = default_mmap
            if step == "reader_4chunk":  # the batch size used before: 4 chunks per source batch
                r.source_batch_rows = lambda: SOURCE_BATCH_CHUNKS * chunk_rows
            rows = sum(ch.n_rows for ch in r)
            extra = dict(copied_chunks=r.stats.copied_chunks, chunks=r.stats.chunks,
                         batch_rows=r.source_batch_rows())
        elif step == "kernel_1":
            # the kernel alone over the same number of rows (one in-memory chunk, re-run)
            h = all_heads[0]
            st = HeadState.new(h.config)
            rows = 0
            total = n_rows or 10 * chunk_rows
            i = 0
            while rows < total:
                X0, y0 = in_memory[i % len(in_memory)]
                k = min(y0.shape[0], total - rows)
                engine.run_chunk(h.config, st, [x[:k] for x in X0], y0[:k])
                rows += k
                i += 1
        else:
            k, threads = {"fit_1": (1, 1), "fit_3_seq": (3, 1), "fit_3": (3, None),
                          "fit_3_par": (3, 3)}[step]
            res = fit_stream(a.path, all_heads[:k], chunk_rows=chunk_rows, progress=False,
                             head_threads=threads)
            rows = res.n_rows
            extra = dict(wait_s=round(res.reader_stats.get("wait_s", 0), 3),
                         copied_chunks=res.reader_stats.get("copied_chunks"),
                         theta_iwp=[round(float(v), 6) for v in res.states["iwp"].theta[:3]])
        return rows, extra

    decode_only(a.path, columns, chunk_rows)  # warm the page cache (not reported)
    for rnd in range(a.repeat):
        for step in (steps if rnd % 2 == 0 else steps[::-1]):
            with mem:
                c0 = resource.getrusage(resource.RUSAGE_SELF)
                t0 = time.perf_counter()
                rows, extra = run(step)
                dt = time.perf_counter() - t0
                c1 = resource.getrusage(resource.RUSAGE_SELF)
            # CPU seconds of all threads: less sensitive than wall time to other users' load
            cpu = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
            report(step, a.path, rows, dt, mem, cpu_s=round(cpu, 2), round=rnd,
                   load=round(os.getloadavg()[0], 2), **extra)


if __name__ == "__main__":
    main()
