"""Release a Spark DataFrame under local DP, one part per partition, read back by iwpfast as one release.

    pip install iwpfast pyspark
    python examples/spark_release.py --output /tmp/spark_release/      # a demo DataFrame
    python examples/spark_release.py --input s3a://bucket/raw/ --output s3://bucket/release/ ...

The work is ``iwpfast.spark.release_dataframe`` (pip install iwpfast[spark]): each Spark
partition is released by ``mapInArrow`` on its executor through iwpfast's per-batch release
(``iwpfast.privacy.multipart.release_batches``) into part ``part-<partition>.parquet`` of the
release, with the release metadata in the file (Spark's own writer would drop it); the driver
then writes the manifest, which publishes the release.  A rerun refuses an existing release and
leaves it readable; ``--overwrite`` replaces it whole; ``--resume`` makes a run resumable (a
failed run's finished parts are kept, and ``--resume`` again releases the others).  ``--fit``
then trains on the released DataFrame on the executors (``iwpfast.spark.fit_dataframe``, 'auto'
hyper-parameters).
``iwpfast.io.open_source(OUTPUT)`` or ``iwpfast fit OUTPUT`` read the folder as one release.

Keys: without ``--seed`` the driver draws one fresh key from OS entropy for the release and each
partition derives its own from it (``key.derive("part", i)``), so a retried task (Spark
speculation or failure) writes its part again from the same keystream, replacing the earlier
attempt under the part's one name; a killed attempt's owner-only staging file is removed before
the manifest (docs/release.md "No second noisy copy").  The key travels to the executors in the
job's closure: enable Spark's RPC encryption (``spark.network.crypto.enabled``) on a shared
network.  Nothing is published before the manifest.

A destination that already holds a release (or files of another run) is refused and left as it
is; with ``--overwrite`` the old release is replaced whole before any partition runs
(``iwpfast.privacy.multipart.prepare_release_folder``), so old and new parts never mix.
"""
from __future__ import annotations

import argparse

from iwpfast import ReleaseSpec
from iwpfast.spark import release_partition  # noqa: F401  (each task's work, Spark-free)


def demo_dataframe(spark, rows: int, partitions: int):
    import numpy as np
    import pandas as pd

    r = np.random.default_rng(0)
    x = r.uniform(-1, 1, (rows, 3))
    y = (x @ np.array([1.0, -0.5, 0.25]) + 0.3 * r.standard_normal(rows) > 0).astype("int64")
    pdf = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "y": y})
    return spark.createDataFrame(pdf).repartition(partitions)


def main(argv=None):
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", help="Parquet data Spark reads (default: a demo DataFrame)")
    ap.add_argument("--output", required=True, help="folder / prefix of the release")
    ap.add_argument("--features", default="a,b,c")
    ap.add_argument("--ranges", default="a=-1:1,b=-1:1,c=-1:1")
    ap.add_argument("--label", default="y")
    ap.add_argument("--public", default="",
                    help="public features (comma separated, among --features): scaled and clipped, "
                         "never noised, not protected")
    ap.add_argument("--epsilon-x", type=float, default=2.0,
                    help="budget of the private features (0: none, with every feature --public)")
    ap.add_argument("--epsilon-y", type=float, default=1.0)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rows", type=int, default=100_000, help="rows of the demo DataFrame")
    ap.add_argument("--seed", type=int, help="simulations only: reproducible noise")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing release whole")
    ap.add_argument("--resume", action="store_true",
                    help="a resumable run: a failed run keeps its finished parts, and --resume "
                         "again releases the other partitions (refused if a kept partition's "
                         "rows changed)")
    ap.add_argument("--progress", choices=["auto", "bar", "log", "none"], default="log",
                    help="rows of the finished partitions (log: a line every 5 s on stderr)")
    ap.add_argument("--fit", action="store_true",
                    help="then fit an IWPClassifier on the release on the executors")
    args = ap.parse_args(argv)
    from pyspark.sql import SparkSession

    from iwpfast.spark import fit_dataframe, release_dataframe

    spark = (SparkSession.builder.master(f"local[{args.partitions}]")
             .appName("iwpfast-release").getOrCreate())
    try:
        df = (spark.read.parquet(args.input).repartition(args.partitions) if args.input
              else demo_dataframe(spark, args.rows, args.partitions))
        features = [f for f in args.features.split(",") if f]
        public = tuple(f for f in args.public.split(",") if f)
        private = [f for f in features if f not in public]
        # the spec carries the public columns to every partition's release (release_batches)
        spec = ReleaseSpec(epsilon_x=args.epsilon_x if private else None,
                           delta=1e-5 if private else None,
                           bound=len(private) ** 0.5 if private else None,
                           epsilon_y=args.epsilon_y, features=tuple(features),
                           ranges=args.ranges, label=args.label, public_features=public)
        from iwpfast.progress import CLI_PROGRESS, log_to_stderr

        if args.progress in ("auto", "log"):
            log_to_stderr()
        manifest = release_dataframe(df, args.output, spec, features=features, label=args.label,
                                     seed=args.seed, overwrite=args.overwrite, resume=args.resume,
                                     progress=CLI_PROGRESS[args.progress])
        if args.fit:
            from iwpfast import IWPClassifier
            model = fit_dataframe(spark.read.parquet(args.output), IWPClassifier())
            print(f"fitted on {model.n_rows_seen_:,} rows in {model.telemetry_['shards']} shards: "
                  f"coef {model.coef_.ravel()}")
    finally:
        spark.stop()
    print(f"released {manifest['row_count']:,} rows in {len(manifest['parts'])} parts to "
          f"{args.output}")
    print(spec.guarantee().statement)


if __name__ == "__main__":
    main()
