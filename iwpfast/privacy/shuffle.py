"""The optional shuffle of a release: the rows in a uniformly random order from the release's key.

Row order is not protected by the noise (a source sorted by the label leaks the label through
position); ``release(..., shuffle=True)`` writes the rows in an order drawn from
``key.derive("shuffle")``, independent of the noise's keystreams.
"""
from __future__ import annotations

import os

import numpy as np

from .randomness import NoiseKey

#: a source up to this size (rows x columns x 8 bytes, estimated) is shuffled in memory
SHUFFLE_MEMORY_BYTES = 2 << 30


def shuffled_source(src, columns, batch_rows: int, seed):
    """The source's rows in a uniformly random order: (new source, temporary folder or None).

    The permutation comes from the release's key (``derive("shuffle")``: independent of the
    noise's keystreams): sorting uniform 64-bit keys gives a uniform permutation (ties, with
    probability < n^2 / 2^65, keep the input order).
    """
    import tempfile

    import pyarrow as pa

    from ..io.sources import open_source

    key = (seed if isinstance(seed, NoiseKey) else NoiseKey.coerce(seed)).derive("shuffle")
    schema = src.schema
    width = 8 * max(1, len(columns))
    if src.num_rows is not None and src.num_rows * width <= SHUFFLE_MEMORY_BYTES:
        table = pa.Table.from_batches(list(src.batches(columns=columns)), schema=schema)
        order = np.argsort(key.stream(0).words(table.num_rows), kind="stable")
        shuffled = table.take(pa.array(order)).replace_schema_metadata(schema.metadata)
        return _named(open_source(shuffled, columns=columns, record_batch_rows=batch_rows),
                      src), None
    # two passes: each row to one of k buckets at random, then each bucket permuted in memory
    import pyarrow.ipc as ipc

    estimate = (src.num_rows or 0) * width
    buckets = max(2, -(-estimate // (SHUFFLE_MEMORY_BYTES // 2))) if estimate else 64
    tmp = tempfile.TemporaryDirectory(prefix="iwpfast-shuffle-")
    try:
        paths = [os.path.join(tmp.name, f"bucket-{b:05d}.arrows") for b in range(buckets)]
        sinks = [pa.OSFile(p, "wb") for p in paths]
        writers = [ipc.new_stream(sink, schema) for sink in sinks]
        stream = key.stream(0)
        for batch in src.batches(columns=columns):
            words = stream.words(batch.num_rows)
            # multiply-shift: a uniform bucket from the top bits (bias < buckets / 2^64)
            bucket = ((words >> np.uint64(32)) * np.uint64(buckets)) >> np.uint64(32)
            for b in range(buckets):
                mask = bucket == b
                if mask.any():
                    writers[b].write_batch(batch.filter(pa.array(mask)))
        for w, sink in zip(writers, sinks, strict=True):
            w.close()
            sink.close()
    except BaseException:
        tmp.cleanup()
        raise

    def batches():
        for b, path in enumerate(paths):
            with pa.memory_map(path) as mm:
                table = ipc.open_stream(mm).read_all()
            order = np.argsort(key.stream(1 + b).words(table.num_rows), kind="stable")
            yield from table.take(pa.array(order)).to_batches(max_chunksize=batch_rows)

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    return _named(open_source(reader, columns=columns, record_batch_rows=batch_rows), src), tmp


def _named(shuffled, src):
    """The shuffled source, described by its origin so that errors name the user's file (the
    rows' positions are those of the shuffled stream)."""
    shuffled.description = f"{src.description} (shuffled)"
    return shuffled
