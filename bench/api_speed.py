"""The public calls against the engine, in one run: fit(X, y) vs run_chunk, fit(path) vs fit_stream
and pyarrow's decode-only time.

    python bench/make_data.py --rows 50000000 --p 10 --format parquet --no-metadata \\
        --out bench/data/r50m.parquet
    python bench/api_speed.py --rows 20000000 --parquet bench/data/r50m.parquet --repeat 3

Arrays (``--rows`` x p float32, labels int8 in {0, 1}, generated in memory):
- ``run_chunk``: the engine alone, one call over the feature-major (p, n) array (+-1 float32
  labels) and ``finish`` -- the baseline;
- ``fit_F`` / ``fit_C``: ``IWPClassifier(...).fit(X, y)`` with X in Fortran / C order;
  extra peak memory = the process's peak RssAnon during the call minus RssAnon before it.
Parquet (``--parquet``: make_data's file without release metadata: the estimator checks and
recodes the labels; noise given explicitly):
- ``decode``: pyarrow alone, ``ParquetFile(memory_map=True).iter_batches`` over the used columns;
- ``fit_stream``: the driver with one head;
- ``fit_path``: ``IWPClassifier(...).fit(path, features=..., label="y", noise_var=..., epsilon_y=...)``.
Each round runs every step once (odd rounds in reverse order); one JSON line per measurement,
then the medians and the ratios of the medians, of wall time and of CPU time (all threads of the
process: on a machine shared with other jobs the CPU seconds are the steadier figure).  Prints
the CPU model and the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from iwpfast.benchmarks import cpu_model  # noqa: E402


def rss_anon_mib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) // 1024
    return 0


class PeakAnon:
    """Peak RssAnon (MiB) while the block runs, sampled every 20 ms."""

    def __enter__(self):
        self.before = rss_anon_mib()
        self.peak = self.before
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_anon_mib())
            time.sleep(0.02)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, rss_anon_mib())




def main(argv=None):
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--p", type=int, default=10)
    ap.add_argument("--parquet", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-arrays", action="store_true")
    a = ap.parse_args(argv)

    from iwpfast import IWPClassifier
    from iwpfast.sgd import engine
    from iwpfast.sgd.driver import Head, fit_stream
    from iwpfast.sgd.state import HeadState

    print(f"# CPU: {cpu_model()}, {os.cpu_count()} cores visible; load average at start "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    p = a.p
    params = dict(alpha=1.0, learning_rate=1e-3, batch_size=128, progress=False)
    noise_var, epsilon_y = 0.25, float(np.log(0.9 / 0.1))
    engine.warmup(dtypes=("float32",))
    IWPClassifier(**params).fit(np.zeros((300, p), np.float32), np.arange(300) % 2,
                                noise_var=noise_var, epsilon_y=epsilon_y)   # compile outside timing

    steps = {}
    results: dict[str, list] = {}
    cpu_results: dict[str, list] = {}
    if not a.skip_arrays:
        rng = np.random.default_rng(0)
        XF = np.empty((a.rows, p), dtype=np.float32, order="F")
        for j in range(p):
            XF[:, j] = rng.standard_normal(a.rows, dtype=np.float32)
        y01 = (XF[:, 0] + 0.5 * XF[:, 1] > 0).astype(np.int8)
        XC = np.ascontiguousarray(XF)
        feature_major = XF.T                     # (p, n) C-contiguous view of the F-order array
        y_pm = np.where(y01 == 1, 1.0, -1.0).astype(np.float32)
        model = IWPClassifier(**params).fit(XF[:1000], y01[:1000], noise_var=noise_var,
                                            epsilon_y=epsilon_y)
        cfg = model._pass.config

        def run_engine():
            state = HeadState.new(cfg)
            engine.run_chunk(cfg, state, feature_major, y_pm)
            engine.finish(cfg, state)

        def fit_arrays(X):
            return lambda: IWPClassifier(**params).fit(X, y01, noise_var=noise_var, epsilon_y=epsilon_y)

        steps.update(run_chunk=(run_engine, a.rows), fit_F=(fit_arrays(XF), a.rows),
                     fit_C=(fit_arrays(XC), a.rows))

    if a.parquet:
        import pyarrow.parquet as pq
        path = a.parquet
        features = [f"x{j}" for j in range(p)]
        n_file = pq.ParquetFile(path).metadata.num_rows
        cfg_file = IWPClassifier(**params).fit(np.zeros((300, p), np.float32), np.arange(300) % 2,
                                               noise_var=noise_var, epsilon_y=epsilon_y)._pass.config

        def decode():
            pf = pq.ParquetFile(path, pre_buffer=False, memory_map=True)
            for _ in pf.iter_batches(batch_size=1 << 18, columns=[*features, "y"]):
                pass

        def stream():
            fit_stream(path, [Head("m", cfg_file, features, "y")], progress=False)

        def fit_path():
            IWPClassifier(**params).fit(path, features=features, label="y", noise_var=noise_var,
                                        epsilon_y=epsilon_y)

        decode()                                   # warm the page cache
        steps.update(decode=(decode, n_file), fit_stream=(stream, n_file), fit_path=(fit_path, n_file))

    names = list(steps)
    for r in range(a.repeat):
        for name in (names if r % 2 == 0 else names[::-1]):
            fn, rows = steps[name]
            with PeakAnon() as mem:
                t0 = time.perf_counter()
                c0 = time.process_time()
                fn()
                dt = time.perf_counter() - t0
                cpu = time.process_time() - c0
            results.setdefault(name, []).append(dt)
            cpu_results.setdefault(name, []).append(cpu)
            print(json.dumps({"step": name, "round": r, "rows": rows, "seconds": round(dt, 3),
                              "cpu_s": round(cpu, 3), "M_rows_per_s": round(rows / dt / 1e6, 2),
                              "extra_peak_anon_MiB": mem.peak - mem.before,
                              "loadavg": round(os.getloadavg()[0], 2)}), flush=True)
    summary = {}
    for kind, table in (("wall", results), ("cpu", cpu_results)):
        med = {k: statistics.median(v) for k, v in table.items()}
        summary.update({f"median_{kind}_{k}_s": round(v, 3) for k, v in med.items()})
        pairs = [("fit_F", "run_chunk"), ("fit_C", "run_chunk"), ("fit_path", "fit_stream"),
                 ("fit_path", "decode"), ("fit_stream", "decode")]
        for a_, b_ in pairs:
            if a_ in med and b_ in med:
                summary[f"{kind}:{a_}/{b_}"] = round(med[a_] / med[b_], 3)
    summary["one_chunk_MiB(262144 rows x p x 4 B)"] = round(262144 * p * 4 / 2**20, 1)
    summary["loadavg_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
