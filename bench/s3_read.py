"""Reading a Parquet release from an S3-compatible server on localhost: iwpfast vs pyarrow alone.

    python bench/s3_read.py --rows 4000000 --repeat 5

Starts moto's S3 server on 127.0.0.1 in its own process (``python -m moto.server``; the tests run
it in a thread of the test process instead: here that would make the benchmark's Python code
compete with the server's for the GIL, which no real object store does), writes one release of ``--rows``
rows, p = 10 float32 features + int8 label (``iwpfast.release``, row groups of 2^20 rows) into a
bucket, then reads it, interleaving in each round (order reversed every other round):

- ``pyarrow``: pyarrow alone with the same ``S3FileSystem``: ``pq.ParquetFile(fs.open_input_file
  (key), pre_buffer=True).iter_batches(batch_size=65536)`` over every column (the fastest of
  pyarrow's ways measured here; ``pq.read_table(key, filesystem=fs)`` is printed too);
  ``pyarrow_checksums``: the same with ``page_checksum_verification=True``, the check iwpfast
  makes on every page of a release;
- ``open_source``: ``iwpfast.io.open_source("s3://...?endpoint_override=...").batches()``;
- ``reader``: iwpfast's training reader (``ChunkReader``: validation, NumPy views, prefetch
  thread) over the same URI: what ``fit`` reads with.

Prints one JSON line per measurement and the medians with the ratios to pyarrow alone (goal:
iwpfast >= 0.8x), the CPU model and the load average.  The server is a single Python process
thread: it, not the network or pyarrow, bounds the throughput, and both sides pay it alike.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from iwpfast.benchmarks import cpu_model  # noqa: E402


def make_release(fs, uri, rows, p=10):
    import numpy as np
    import pyarrow as pa

    import iwpfast

    r = np.random.default_rng(0)
    cols = {f"x{j}": r.uniform(-1, 1, rows).astype(np.float32) for j in range(p)}
    cols["y"] = r.integers(0, 2, rows).astype(np.int8)
    spec = iwpfast.ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=p ** 0.5, epsilon_y=1.0,
                               ranges={f"x{j}": (-1, 1) for j in range(p)})
    iwpfast.release(pa.table(cols), uri, spec, features=[f"x{j}" for j in range(p)], label="y",
                    seed=1, overwrite=True)


def read_pyarrow(fs, key):
    import pyarrow.parquet as pq

    rows = 0
    with fs.open_input_file(key) as f:
        for batch in pq.ParquetFile(f, pre_buffer=True).iter_batches(batch_size=65536):
            rows += batch.num_rows
    return rows


def read_pyarrow_checksums(fs, key):
    """pyarrow alone doing what iwpfast does on every page: verify the CRC-32 page checksums that
    iwpfast releases carry (iwpfast always verifies them: a damaged file is an error, not noise)."""
    import pyarrow.parquet as pq

    rows = 0
    with fs.open_input_file(key) as f:
        for batch in pq.ParquetFile(f, pre_buffer=True, page_checksum_verification=True
                                    ).iter_batches(batch_size=65536):
            rows += batch.num_rows
    return rows


def read_table(fs, key):
    import pyarrow.parquet as pq

    return pq.read_table(key, filesystem=fs).num_rows


def read_open_source(uri):
    from iwpfast.io import open_source

    return sum(b.num_rows for b in open_source(uri).batches())


def read_reader(uri):
    from iwpfast.io import open_source
    from iwpfast.io.reader import ChunkReader

    src = open_source(uri)
    feats = [c for c in src.schema.names if c != "y"]
    rows = 0
    for chunk in ChunkReader(src, [feats], ["y"]):
        rows += chunk.n_rows
    return rows


class _Server:
    def __init__(self, port):
        self.endpoint = f"127.0.0.1:{port}"

    def filesystem(self):
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(endpoint_override=self.endpoint, scheme="http",
                                 allow_bucket_creation=True, access_key="testing",
                                 secret_key="testing", region="us-east-1")

    def uri(self, path):
        return f"s3://{path}?endpoint_override={self.endpoint}&scheme=http&region=us-east-1"


class moto_process:
    """moto's S3 server as a separate process on a free localhost port."""

    def __enter__(self):
        import socket
        import urllib.request

        os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"})
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                      "-p", str(port)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        return _Server(port)

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def main():
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with moto_process() as s3:
        fs = s3.filesystem()
        fs.create_dir("bench")
        key = "bench/release.parquet"
        uri = s3.uri(key)
        make_release(fs, uri, args.rows)
        size = fs.get_file_info(key).size
        steps = {"pyarrow": lambda: read_pyarrow(fs, key),
                 "pyarrow_checksums": lambda: read_pyarrow_checksums(fs, key),
                 "pyarrow_read_table": lambda: read_table(fs, key),
                 "open_source": lambda: read_open_source(uri),
                 "reader": lambda: read_reader(uri)}
        times = {k: [] for k in steps}
        read_pyarrow(fs, key)  # warm-up (server caches, imports)
        for rnd in range(args.repeat):
            order = list(steps) if rnd % 2 == 0 else list(reversed(steps))
            for name in order:
                t0 = time.perf_counter()
                n = steps[name]()
                dt = time.perf_counter() - t0
                assert n == args.rows, (name, n)
                times[name].append(dt)
                print(json.dumps({"step": name, "round": rnd, "rows": n, "seconds": round(dt, 4),
                                  "M_rows_per_s": round(n / dt / 1e6, 3),
                                  "loadavg": os.getloadavg()[0]}), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = args.rows / med["pyarrow"]
    print(f"\nCPU: {cpu_model()}; load average {os.getloadavg()}; object {size / 1e6:.1f} MB, "
          f"{args.rows:,} rows, p = 10 float32 + int8 label; medians of {args.repeat} rounds")
    for k, v in med.items():
        rate = args.rows / v
        print(f"{k:20s} {rate / 1e6:8.2f} M rows/s  ({size / v / 1e6:7.1f} MB/s)  "
              f"{rate / base:5.2f}x pyarrow alone")


if __name__ == "__main__":
    main()
