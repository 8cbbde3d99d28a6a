"""What a resumed release whose parts come from an engine's partitions checks: that each part it
keeps was released from the rows the partition holds now.

An engine's partition (a Spark partition) has no file to fingerprint, and its rows may change
from run to run (a shuffle without a fixed order, a source that changed).  So each task of a
resumable run writes, next to its part, a *row digest* of the rows it released: an
order-independent keyed digest of the partition's rows (a sum, modulo 2^64, of a keyed 64-bit
hash of each row, on two lanes, with the row count), in the owner-only sidecar
``_iwpfast_rows-<index>.json``.  A resumed run recomputes the digest of each kept partition and
publishes only when every one is unchanged: then every row of a kept part is in the same part
now, so none is released a second time (with other noise) in the parts the resumed run writes.

The key of the digests (16 random bytes) is kept in the release's owner-only plan file only;
the plan and the sidecars are removed when the release is published (a digest of raw rows is
never published).  Readers skip the sidecars ("_" names).
"""
from __future__ import annotations

import hashlib
import json
import re

import numpy as np

#: name of part i's row-digest sidecar
SIDECAR_PATTERN = re.compile(r"_iwpfast_rows-(\d{6})\.json")
_NULL_WORD = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def sidecar_name(index: int) -> str:
    return f"_iwpfast_rows-{int(index):06d}.json"


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on a uint64 array (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def _words(column, key: bytes) -> np.ndarray:
    """One uint64 per value of an Arrow column: its value as an int64 (integers), the bits of
    its value as a float64 (other numbers, booleans), a keyed hash of its text (strings, through
    its dictionary), a constant for null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        # a file read with dictionary-encoded columns: the values count, not their encoding
        column = column.dictionary_decode()
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        encoded = pc.dictionary_encode(column)
        table = np.array([int.from_bytes(hashlib.blake2b(str(v).encode(), key=key,
                                                         digest_size=8).digest(), "little")
                          for v in encoded.dictionary.to_pylist()] + [int(_NULL_WORD)],
                         dtype=np.uint64)
        idx = encoded.indices.to_numpy(zero_copy_only=False)
        idx = np.where(np.isnan(idx), len(table) - 1, idx).astype(np.int64) \
            if idx.dtype.kind == "f" else idx.astype(np.int64)
        return table[idx]
    if pa.types.is_integer(column.type):
        words = column.cast(pa.int64()).fill_null(0).to_numpy().astype(np.int64).view(np.uint64)
    else:
        values = column.cast(pa.float64()).to_numpy(zero_copy_only=False)
        words = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64).copy()
    if column.null_count:
        words[np.asarray(column.is_null())] = _NULL_WORD
    return words


class RowDigest:
    """The order-independent digest of the rows of a stream of Arrow record batches (all
    columns, in schema order), keyed by ``key`` (16 bytes): ``update`` per batch (array work,
    no Python per row), ``value()`` -> {"rows": n, "digest": 32 hex digits}."""

    def __init__(self, key: bytes):
        self.key = bytes(key)
        seeds = np.frombuffer(hashlib.blake2b(self.key, digest_size=16).digest(), dtype="<u8")
        self.seed1, self.seed2 = np.uint64(seeds[0]), np.uint64(seeds[1])
        self.rows = 0
        self.lanes = [0, 0]

    def update(self, batch) -> None:
        n = batch.num_rows
        if not n:
            return
        m = batch.num_columns
        words = np.empty((m, n), dtype=np.uint64)
        for j, column in enumerate(batch.columns):
            words[j] = _words(column, self.key)
        from .._kernels.digest import digest_lanes

        lanes = digest_lanes(words, column_salts(m), self.seed1, self.seed2)
        for lane, z in enumerate(lanes):
            self.lanes[lane] = (self.lanes[lane] + int(z)) % (1 << 64)
        self.rows += n

    def value(self) -> dict:
        return {"rows": int(self.rows), "digest": f"{self.lanes[0]:016x}{self.lanes[1]:016x}"}


def column_salts(m: int) -> np.ndarray:
    """Each column's salt (its place in the row): (j + 1) * MIX_2 modulo 2^64, j = 0..m-1."""
    return np.array([((j + 1) * int(_M2)) % (1 << 64) for j in range(m)], dtype=np.uint64)


def digest_lanes_numpy(words: np.ndarray, salts: np.ndarray, seed1, seed2) -> tuple:
    """The NumPy twin of ``iwpfast._kernels.digest.digest_lanes``, from the definition: per row
    h = seed1, then h = mix(h ^ (word_j + salt_j)) for each column j; the lanes are the sums of
    h and of mix(h ^ seed2) modulo 2^64 (NumPy's uint64 arithmetic and sums wrap)."""
    h = np.full(words.shape[1], seed1, dtype=np.uint64)
    for j in range(words.shape[0]):
        h = _mix(h ^ (words[j] + salts[j]))
    return (h.sum(dtype=np.uint64), _mix(h ^ np.uint64(seed2)).sum(dtype=np.uint64))


def digested(batches, digest: RowDigest):
    """``batches`` passed on, each added to ``digest`` on the way."""
    for batch in batches:
        digest.update(batch)
        yield batch


def write_sidecar(folder, index: int, release_id: str, value: dict) -> None:
    """Part ``index``'s row digest, written atomically next to it, owner-only where the
    filesystem has permissions."""
    loc = folder.child(sidecar_name(index))
    data = json.dumps({"release_id": release_id, "index": int(index), **value},
                      sort_keys=True).encode()
    write_private_atomic(loc, data)


def write_private_atomic(loc, data: bytes) -> None:
    """``data`` written to ``loc`` atomically and, on a local disk, owner-only (0600) for good:
    what a plan's digest key and the digests are (never published)."""
    from ..io.filesystem import write_bytes_atomic

    write_bytes_atomic(loc, data, overwrite=True, private=True)


def read_sidecars(folder, release_id: str) -> dict:
    """{index: {"rows", "digest"}} of the sidecars of release ``release_id`` in ``folder``."""
    out: dict = {}
    for entry in folder.listdir():
        match = SIDECAR_PATTERN.fullmatch(entry.name)
        if match is None:
            continue
        try:
            doc = json.loads(entry.read_bytes())
        except (OSError, ValueError):
            continue
        if (isinstance(doc, dict) and doc.get("release_id") == release_id
                and doc.get("index") == int(match.group(1))):
            out[int(match.group(1))] = {"rows": int(doc["rows"]), "digest": str(doc["digest"])}
    return out


def remove_sidecars(folder, keep=()) -> None:
    """Delete the row-digest sidecars in ``folder`` but those of the parts in ``keep``."""
    keep = {sidecar_name(i) for i in keep}
    for entry in folder.listdir():
        if SIDECAR_PATTERN.fullmatch(entry.name) and entry.name not in keep:
            entry.delete()
