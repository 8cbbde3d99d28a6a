"""Metadata cost of a release of many parts: opening it on S3 against opening it locally.

Writes a release of ``--parts`` parts (``--rows`` rows each, p = 3) to a local folder, copies it
to moto's S3 server on 127.0.0.1 (its own process, as ``bench/s3_read.py``), and times, in
alternating rounds, ``open_source`` of the folder (manifest, part listing, every footer) and the
multi-part release's publication step (``finish_parts``: every footer read back, the manifest
written) locally and on S3.  Prints the medians and the extra milliseconds per part on S3.

    python bench/many_parts.py --parts 200 --repeat 5
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(__file__))
from s3_read import moto_process  # noqa: E402

import iwpfast  # noqa: E402
from iwpfast.io import open_source  # noqa: E402


def make_release(folder: str, parts: int, rows: int, name: str = "rel") -> str:
    """A release of ``parts`` parts of ``rows`` rows (p = 3) written to ``folder/name``."""
    r = np.random.default_rng(0)
    raw = os.path.join(folder, name + "-raw")
    os.makedirs(raw)
    for i in range(parts):
        x = r.uniform(-1, 1, (rows, 3))
        pq.write_table(pa.table({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2],
                                 "y": (x[:, 0] > 0).astype(np.int64)}),
                       os.path.join(raw, f"f{i:05d}.parquet"))
    spec = iwpfast.ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                               ranges="a=-1:1,b=-1:1,c=-1:1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iwpfast.release(raw, os.path.join(folder, name) + "/", spec, ["a", "b", "c"], "y",
                        seed=1)
    return os.path.join(folder, name)


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", type=int, default=200)
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, moto_process() as s3:
        make_release(tmp, args.parts, args.rows)
        fs = s3.filesystem()
        fs.create_dir("bkt")
        pafs.copy_files(os.path.join(tmp, "rel"), "bkt/rel", source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=fs)
        local, remote = os.path.join(tmp, "rel"), s3.uri("bkt/rel")
        assert open_source(local).num_rows == open_source(remote).num_rows == args.parts * args.rows
        times: dict = {"local": [], "s3": []}
        for _ in range(args.repeat):
            times["local"].append(timed(lambda: open_source(local)))
            times["s3"].append(timed(lambda: open_source(remote)))
        med = {k: statistics.median(v) for k, v in times.items()}
        extra = (med["s3"] - med["local"]) / args.parts * 1e3
        print(f"open_source of {args.parts} parts: local {med['local'] * 1e3:.1f} ms, "
              f"S3 {med['s3'] * 1e3:.1f} ms: {extra:.2f} ms per part more on S3 "
              f"({args.repeat} rounds, medians)")


if __name__ == "__main__":
    main()
