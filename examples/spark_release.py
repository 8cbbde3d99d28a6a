"""Release a Spark DataFrame under local DP, one part per partition, read back by iwpfast as one release.

    pip install iwpfast pyspark
    python examples/spark_release.py --output /tmp/spark_release/      # a demo DataFrame
    python examples/spark_release.py --input s3a://bucket/raw/ --output s3://bucket/release/ ...

Each Spark partition is released by ``mapInArrow`` through iwpfast's per-batch release
(``iwpfast.privacy.multipart.release_batches``): the partition's Arrow record batches are
scaled, clipped and noised on the executor and written by iwpfast itself as part
``part-<partition>.parquet`` of the release, with the release metadata in the file (Spark's own
writer would drop it).  The function yields one summary row per partition; once Spark has run
every partition, the driver writes the manifest (``iwpfast.io.parts.write_manifest``), which
publishes the release.  ``iwpfast.io.open_source(OUTPUT)`` or ``iwpfast fit OUTPUT`` then read
the folder as one release.

Keys: without ``--seed`` the driver draws one fresh key from OS entropy for the release and each
partition derives its own from it (``key.derive("part", i)``), so a retried task (Spark
speculation or failure) writes its part again with the same noise, replacing the earlier attempt
(a leftover copy adds nothing).  The key travels to the executors in the job's closure: enable
Spark's RPC encryption (``spark.network.crypto.enabled``) on a shared network.  Nothing is
published before the manifest.

A destination that already holds a release (or files of another run) is refused; with
``--overwrite`` the old release is replaced whole before any partition runs
(``iwpfast.privacy.multipart.prepare_release_folder``), so old and new parts never mix.
"""
from __future__ import annotations

import argparse

import pyarrow as pa

from iwpfast import ReleaseSpec
from iwpfast.io.parts import write_manifest
from iwpfast.privacy.multipart import new_release_id, prepare_release_folder, release_batches
from iwpfast.privacy.randomness import NoiseKey

SUMMARY_SCHEMA = "part long, rows long"


def release_partition(index: int, batches, destination: str, spec: ReleaseSpec, release_id: str,
                      schema: pa.Schema, seed=None):
    """Release the record batches of one partition as part ``index``; yield its summary row.

    Spark-free on purpose: the Spark job below calls it from ``mapInArrow`` with the task's
    partition id, and the tests call it directly."""
    result = release_batches(batches, destination, spec, index=index, release_id=release_id,
                             schema=schema, seed=seed)
    yield pa.RecordBatch.from_pydict({"part": [index], "rows": [result.rows_written]})


def spark_release(df, destination: str, spec: ReleaseSpec, *, seed=None,
                  overwrite: bool = False) -> dict:
    """Release the Spark DataFrame ``df`` (its columns: the spec's features and label) into the
    folder ``destination``; returns the manifest.  ``overwrite``: replace a release already
    there, whole (else it is refused)."""
    from pyspark import TaskContext

    columns = list(spec.features) + ([spec.label] if spec.label else [])
    df = df.select(*columns)
    schema = _arrow_schema(df)
    release_id = new_release_id()
    prepare_release_folder(destination, overwrite=overwrite)
    if seed is None:       # one key for the release: a retried partition reuses its part's key
        seed = NoiseKey.from_os_entropy()

    def per_partition(batches):
        index = TaskContext.get().partitionId()
        yield from release_partition(index, batches, destination, spec, release_id, schema, seed)

    summary = df.mapInArrow(per_partition, SUMMARY_SCHEMA).collect()
    manifest = write_manifest(destination)
    assert manifest["row_count"] == sum(row["rows"] for row in summary)
    return manifest


def _arrow_schema(df) -> pa.Schema:
    """The Arrow schema of the batches mapInArrow hands out (also for empty partitions)."""
    from pyspark.sql import types as T

    to_arrow = {T.DoubleType: pa.float64(), T.FloatType: pa.float32(), T.LongType: pa.int64(),
                T.IntegerType: pa.int32(), T.ShortType: pa.int16(), T.ByteType: pa.int8(),
                T.BooleanType: pa.bool_()}
    fields = []
    for f in df.schema.fields:
        arrow_type = to_arrow.get(type(f.dataType))
        if arrow_type is None:
            raise TypeError(f"column {f.name!r} has type {f.dataType}; cast it to a number first")
        fields.append(pa.field(f.name, arrow_type))
    return pa.schema(fields)


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
    ap.add_argument("--overwrite", action="store_true",
                    help="replace a release already in --output, whole")
    args = ap.parse_args(argv)
    from pyspark.sql import SparkSession

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
        manifest = spark_release(df, args.output, spec, seed=args.seed, overwrite=args.overwrite)
    finally:
        spark.stop()
    print(f"released {manifest['row_count']:,} rows in {len(manifest['parts'])} parts to "
          f"{args.output}")
    print(spec.guarantee().statement)


if __name__ == "__main__":
    main()
