"""A whole fixed fit of a many-part release on S3 against the same fit locally, with and without
reading the parts ahead (``iwpfast.io.sources.REMOTE_PREFETCH_PARTS``).

Writes a release of ``--parts`` parts (``--rows`` rows each, p = 3) and one of 2 parts of
``--big-rows`` rows each to a local folder, copies both to moto's S3 server on 127.0.0.1 (its own
process, as ``bench/s3_read.py``), then times, in alternating rounds, ``IWPClassifier(alpha=1,
learning_rate=0.01).fit(...)`` (numbers: no tuning) locally, on S3 with prefetch and on S3
without it (``REMOTE_PREFETCH_PARTS = 0``: the parts read one after the other, as before).
Prints the medians, the extra milliseconds per part on S3, and checks the models are identical.

    python bench/s3_parts_fit.py --parts 200 --rows 1000 --big-rows 500000 --repeat 5
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
import pyarrow.fs as pafs

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from many_parts import make_release  # noqa: E402
from s3_read import moto_process  # noqa: E402

import iwpfast  # noqa: E402
import iwpfast.io.sources as sources  # noqa: E402


def fit(source):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        model = iwpfast.IWPClassifier(alpha=1.0, learning_rate=0.01, variance_cap=2.0,
                                      progress=False).fit(source)
        return time.perf_counter() - t, model.coef_


def main():
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", type=int, default=200)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--big-rows", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    default_prefetch = getattr(sources, "REMOTE_PREFETCH_PARTS", None)   # None: before it existed
    with tempfile.TemporaryDirectory() as tmp, moto_process() as s3:
        many = make_release(tmp, args.parts, args.rows, "many")
        two = make_release(tmp, 2, args.big_rows, "two")
        fs = s3.filesystem()
        fs.create_dir("bkt")
        for name, local in (("many", many), ("two", two)):
            pafs.copy_files(local, f"bkt/{name}", source_filesystem=pafs.LocalFileSystem(),
                            destination_filesystem=fs)
        fit(many)                                   # compile / warm the kernels
        for name, local, parts in (("many", many, args.parts), ("two", two, 2)):
            remote = s3.uri(f"bkt/{name}")
            times: dict = {"local": [], "s3 prefetch": [], "s3 sequential": []}
            coefs: dict = {}
            for k in range(args.repeat):
                order = list(times) if k % 2 == 0 else list(reversed(times))
                for what in order:
                    sources.REMOTE_PREFETCH_PARTS = 0 if what == "s3 sequential" else default_prefetch
                    seconds, coef = fit(local if what == "local" else remote)
                    times[what].append(seconds)
                    coefs[what] = coef
            sources.REMOTE_PREFETCH_PARTS = default_prefetch
            same = all(np.array_equal(c, coefs["local"]) for c in coefs.values())
            med = {k: statistics.median(v) for k, v in times.items()}
            line = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in med.items())
            extra = {k: (med[k] - med["local"]) / parts * 1e3 for k in ("s3 prefetch", "s3 sequential")}
            print(f"fit of {parts} parts x {args.rows if name == 'many' else args.big_rows} rows: "
                  f"{line}; per part over local: prefetch {extra['s3 prefetch']:.2f} ms, "
                  f"sequential {extra['s3 sequential']:.2f} ms ({args.repeat} rounds, medians); "
                  f"models identical: {same}")


if __name__ == "__main__":
    main()
