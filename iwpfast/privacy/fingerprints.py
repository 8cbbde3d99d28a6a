"""What a resumed multi-part release checks of its inputs, so that no row is released twice.

Two checks, both keyed by the run's ``digest_key`` (16 random bytes drawn when the run starts,
kept in the owner-only plan file ``_iwpfast_plan.json`` only, removed when the release publishes):

- **At plan time**, each input's fingerprint (``input_fingerprint``): its size, its modification
  time, a SHA-256 of its Parquet footer (of its last 64 KiB for other formats) and a keyed
  BLAKE2b of ``SAMPLE_BLOCKS`` blocks of ``SAMPLE_BLOCK_BYTES`` at key-derived offsets spread over
  the file, the first and last block always among them (the whole file when it is smaller).  The
  footer alone misses two uncompressed inputs holding the same rows in another order (their
  footers can be byte-identical); the samples see the data pages.  One stat and 1 MiB read per
  input: cheap next to a release (``bench/resume_fingerprint.py``).
- **While each part is released**, the order-independent keyed digest of every row it reads
  (``iwpfast.privacy.part_rows.RowDigest``), written after the part to its owner-only sidecar
  ``_iwpfast_rows-<index>.json`` (per-part files: parallel workers each write their own, as the
  Spark path does).  A resumed run reads each kept part's input rows again (without noise) and
  keeps the part only while their digest is unchanged: a change the samples missed (rows moved
  between two parts of one input, an edit between two sampled blocks) is refused, naming the input
  and the part.
"""
from __future__ import annotations

import hashlib
import os

#: bytes at the end of a non-Parquet input that its fingerprint hashes
FINGERPRINT_TAIL_BYTES = 1 << 16
#: a Parquet footer longer than this is hashed over its last FINGERPRINT_TAIL_BYTES only
FINGERPRINT_FOOTER_MAX = 1 << 24
#: the keyed sample of an input's bytes: this many blocks of this size (1 MiB in all; a file no
#: larger is hashed whole)
SAMPLE_BLOCKS = 16
SAMPLE_BLOCK_BYTES = 1 << 16


def input_fingerprint(loc, key: bytes | None = None) -> dict:
    """What a resume compares of one input file: its size, its modification time, a SHA-256 of
    its Parquet footer (row groups, row counts, column statistics and offsets) -- of its last
    64 KiB for other formats -- and, with a ``key``, the keyed sample of its bytes
    (``"sampled"``, ``sampled_digest``).  One stat and reads of about 1 MiB, never a decode."""
    mtime: int | None
    if loc.local:
        st = os.stat(loc.path)
        size, mtime = int(st.st_size), int(st.st_mtime_ns)
    else:
        info = loc.fs.get_file_info(loc.path)
        size = int(info.size or 0)
        mtime = None if info.mtime is None else int(info.mtime.timestamp() * 1e9)
    tail = min(size, FINGERPRINT_TAIL_BYTES)
    with (open(loc.path, "rb") if loc.local else loc.open_input_file()) as fh:
        fh.seek(size - tail)
        end = fh.read(tail)
        what = "tail"
        if size >= 12 and end[-4:] == b"PAR1":
            footer = int.from_bytes(end[-8:-4], "little") + 8
            if footer <= min(size, FINGERPRINT_FOOTER_MAX):
                fh.seek(size - footer)
                end = fh.read(footer)
                what = "parquet_footer"
        out = {"size": size, "mtime_ns": mtime, what: hashlib.sha256(end).hexdigest()}
        if key is not None:
            out["sampled"] = sampled_digest(fh, size, key)
    return out


def sample_offsets(size: int, key: bytes) -> list[int]:
    """Where ``sampled_digest`` reads: the first and the last block, and one block at a
    key-derived place in each of the ``SAMPLE_BLOCKS - 2`` equal strata between them (spread
    over the file; unknown to whoever does not hold the key)."""
    span = size - SAMPLE_BLOCK_BYTES
    draws = hashlib.blake2b(size.to_bytes(8, "little"), key=key, person=b"iwpfast-offsets",
                            digest_size=64).digest()
    inner = SAMPLE_BLOCKS - 2
    offsets = [0]
    for j in range(inner):
        lo, hi = span * j // inner, span * (j + 1) // inner
        r = int.from_bytes(draws[4 * j:4 * j + 4], "little")
        offsets.append(lo + r % max(hi - lo, 1))
    return offsets + [span]


def sampled_digest(fh, size: int, key: bytes) -> str:
    """The keyed BLAKE2b (128 bits) of the sampled blocks of the open file ``fh`` (of all its
    bytes when it holds no more than ``SAMPLE_BLOCKS`` blocks), each with its offset."""
    h = hashlib.blake2b(size.to_bytes(8, "little"), key=key, person=b"iwpfast-sample",
                        digest_size=16)
    if size <= SAMPLE_BLOCKS * SAMPLE_BLOCK_BYTES:
        fh.seek(0)
        h.update(fh.read(size))
        return h.hexdigest()
    for offset in sample_offsets(size, key):
        fh.seek(offset)
        h.update(offset.to_bytes(8, "little"))
        h.update(fh.read(SAMPLE_BLOCK_BYTES))
    return h.hexdigest()


def fingerprints(inputs, key: bytes | None) -> list:
    """[[display, fingerprint], ...] of the distinct input files, in order."""
    from ..io.filesystem import map_bounded

    unique = list({loc.display: loc for loc in inputs}.values())
    return [[loc.display, fp] for loc, fp in zip(
        unique, map_bounded(lambda loc: input_fingerprint(loc, key), unique), strict=True)]


def changed_input(stored, current) -> str | None:
    """The first input whose fingerprint differs, said with what changed (None: all the same)."""
    if not isinstance(stored, list):
        return ("the unfinished run's plan records no fingerprint of its inputs (written by an "
                "older iwpfast), so they cannot be checked")
    before = {str(name): fp for name, fp in stored if isinstance(fp, dict)}
    for name, fp in current:
        old = before.get(name)
        if old is None:
            return f"the input {name!r} is not among the unfinished run's inputs"
        changes = []
        if old.get("size") != fp["size"]:
            changes.append(f"size {old.get('size')} -> {fp['size']} bytes")
        for key, said in (("parquet_footer", "Parquet footer"), ("tail", "last 64 KiB"),
                          ("sampled", "sampled content")):
            if key in fp or key in old:
                if old.get(key) != fp.get(key):
                    changes.append(f"its {said} differs")
        if old.get("mtime_ns") != fp["mtime_ns"]:
            changes.append("modification time changed")
        if changes:
            return f"the input {name!r} changed since the unfinished run started ({', '.join(changes)})"
    return None


def digested_source(src, digest):
    """``src`` (an ``iwpfast.io`` Source) whose batches are added to ``digest`` (a
    ``RowDigest``) as they are read: what a part's release reads, digested on the way."""
    from ..io.source_base import Source

    class _Digested(Source):
        def __init__(self):
            self.description = src.description
            self.cheap_decode = src.cheap_decode
            self.rereadable = False          # a second pass would count its rows twice
            super().__init__(src.full_schema, src.columns, src.batch_rows, src.num_rows,
                             release_metadata=src.release_metadata)

        def group_ends(self):
            return src.group_ends()

        def _located(self, columns, start_row, batch_rows):
            for origin, batch in src.located_batches(columns, start_row, batch_rows):
                digest.update(batch)
                yield origin, batch

    return _Digested()


def part_input_digest(plan, index: int, batch_rows: int) -> dict:
    """The row digest of what part ``index`` of ``plan`` releases, read again without noise:
    the columns the release reads, from the same file or row range."""
    from ..io.sources import open_source
    from .part_rows import RowDigest

    spec = plan.spec
    columns = list(spec.feature_names) + ([spec.label] if spec.label is not None else [])
    src = open_source(plan.part_source(index, batch_rows), columns=columns,
                      record_batch_rows=batch_rows)
    digest = RowDigest(plan.digest_key)
    for batch in src.batches():
        digest.update(batch)
    return digest.value()


def verified_parts(plan, finished: dict, batch_rows: int) -> dict:
    """The parts of ``finished`` ({index: rows}, whole parts of ``plan``'s release id) that a
    resumed run keeps: those whose input rows, read again, have the digest their run stored in
    the part's sidecar.  A part without a sidecar (killed between the part and its sidecar) is
    released again (its file replaced, never published); a part whose input rows changed is
    refused, naming the input and the part: releasing the others next to it could release some
    of its rows twice, with other noise."""
    from ..exceptions import InvalidInputError
    from ..io.filesystem import map_bounded
    from .part_rows import read_sidecars

    stored = read_sidecars(plan.folder, plan.release_id)
    checked = sorted(i for i in finished if i in stored and stored[i]["rows"] == finished[i])
    # reading is what costs (no noise is drawn): the parts' inputs are read side by side
    now = map_bounded(lambda i: part_input_digest(plan, i, batch_rows), checked,
                      threads=os.cpu_count() or 1)
    for i, value in zip(checked, now, strict=True):
        if value != stored[i]:
            loc = plan.inputs[i]
            rows = "" if plan.row_ranges is None or plan.row_ranges[i] is None else \
                f", rows {plan.row_ranges[i][0]}:{plan.row_ranges[i][1]}"
            raise InvalidInputError(
                f"resume: the input {loc.display!r} (part {i}{rows}) changed since the unfinished "
                f"run released it (its rows now differ from those part {i} holds a noisy copy "
                f"of), and resuming could release rows twice. Restore the input and resume, or "
                f"delete the unfinished run's parts: overwrite=True (CLI: --overwrite) deletes "
                f"them before any new part is written (a copy someone already read cannot be "
                f"retracted)")
    return {i: finished[i] for i in checked}
