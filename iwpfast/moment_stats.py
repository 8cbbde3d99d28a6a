"""The release's debiased second moments: G-hat ~ E[z z^T] and b-hat ~ E[z y] in one pass.

z = (the released feature coordinates, 1).  For every release kind this library writes, the sums
over rows are corrected so that their expectation over the release's noise is the clean sum
(docs/math.md "The release's debiased second moments" derives each term):

- a numeric or one-hot coordinate with noise variance v_j (the metadata's
  ``feature_noise_variance``; 0 for public columns): off-diagonal products as released (the
  noise of two coordinates is independent and zero-mean), the diagonal x~_j^2 - v_j;
- a categorical attribute released by k-ary randomized response (keep q, each other r):
  e-hat = (e_c~ - r 1)/(q - r), unbiased for the clean one-hot; its own block diag(e-hat)
  (e_c e_c^T = diag(e_c), and e-hat e-hat^T is biased), against everything else e-hat as if clean;
- labels: binary randomized response y~/(2q - 1); k classes the one-hot e-hat per row, one
  right-hand side per class; a regression target as released; clean labels as they are.

These are the statistics of the moment learner (``moment_learner``, ``solver='moments'``).
``Moments`` holds the sums (they add across chunks, parts, folds and releases, each debiased by
its own law when it was read), saves and loads them; ``solve_ridge`` solves (G + alpha D) theta = b.
A pass makes one kernel call per chunk (``accumulate_runs``: ``_kernels/moments.py``'s
``moments_runs`` reads the float32 or float64 columns in place, tile by tile, and adds every run of
rows inside one fold block to its fold; BLAS's X X^T on a float64 copy only beyond
``KERNEL_GRAM_COLUMNS`` columns), ``accumulate_runs_numpy`` its twin; ``accumulate_chunk`` (BLAS
X X^T beside ``moments_chunk``) serves gathered rows (the per-class Grams), ``accumulate_numpy``
the twin of both kernels.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from .exceptions import InvalidInputError

#: the name of z's last coordinate, the constant 1
INTERCEPT = "(intercept)"
#: the saved file's format name and version (a reader refuses other versions)
FORMAT = "iwpfast.moments"
FORMAT_VERSION = 1
#: label kinds, the kernel's codes
NO_LABEL, SCALAR_LABEL, CLASS_LABEL = 0, 1, 2
#: rows per block of ``fold_moments``' parts
FOLD_BLOCK_ROWS = 1024


@dataclass(frozen=True, eq=False)
class Moments:
    """Debiased sums over ``rows`` rows: ``gram_sum`` (d, d) of z z^T and ``rhs_sum`` (d, K) of
    z y-hat, z's coordinates named by ``names`` (the last is ``INTERCEPT``), the K right-hand
    sides by ``targets``; ``debiased`` says, in words, what was corrected.  ``G`` and ``b`` are
    the means.  ``a + b`` merges two (the same names and targets)."""

    rows: int
    gram_sum: np.ndarray
    rhs_sum: np.ndarray
    names: tuple[str, ...]
    targets: tuple[str, ...]
    debiased: tuple[str, ...] = ()

    @property
    def G(self) -> np.ndarray:
        """G-hat, the debiased mean of z z^T, (d, d)."""
        return self.gram_sum / max(self.rows, 1)

    @property
    def b(self) -> np.ndarray:
        """b-hat, the debiased mean of z y-hat: (d,) for one right-hand side, else (d, K)."""
        b = self.rhs_sum / max(self.rows, 1)
        return b[:, 0] if b.shape[1] == 1 else b

    @property
    def n_targets(self) -> int:
        return len(self.targets)

    def __add__(self, other: Moments) -> Moments:
        if not isinstance(other, Moments):
            return NotImplemented
        if other.names != self.names or other.targets != self.targets:
            raise InvalidInputError(
                f"cannot add moments of coordinates {list(other.names)} / targets "
                f"{list(other.targets)} to moments of {list(self.names)} / {list(self.targets)}: "
                "read both with the same features and label")
        notes = self.debiased + tuple(n for n in other.debiased if n not in self.debiased)
        return Moments(self.rows + other.rows, self.gram_sum + other.gram_sum,
                       self.rhs_sum + other.rhs_sum, self.names, self.targets, notes)

    def update(self, batch, features=None, label=None, **read) -> Moments:
        """These moments plus those of ``batch`` (anything ``moments`` reads), as ``partial_fit``
        adds a batch: the same accumulation as a whole source."""
        return self + moments(batch, features, label, **read)

    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": FORMAT_VERSION, "rows": int(self.rows),
                "names": list(self.names), "targets": list(self.targets),
                "debiased": list(self.debiased), "gram_sum": self.gram_sum.tolist(),
                "rhs_sum": self.rhs_sum.tolist()}

    def save(self, path) -> None:
        """Write a small JSON (floats as Python's repr: they read back exactly; never a seed)."""
        tmp = f"{os.fspath(path)}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.to_dict(), f)
        os.replace(tmp, path)               # no half-written file at ``path``

    @classmethod
    def load(cls, path) -> Moments:
        with open(path) as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise InvalidInputError(f"{os.fspath(path)!r} is not a saved iwpfast moments file")
        if doc.get("version") != FORMAT_VERSION:
            raise InvalidInputError(
                f"{os.fspath(path)!r} is moments format version {doc.get('version')!r}; this "
                f"iwpfast reads version {FORMAT_VERSION}: upgrade iwpfast or accumulate again")
        d, k = len(doc["names"]), len(doc["targets"])
        return cls(int(doc["rows"]), np.asarray(doc["gram_sum"], np.float64).reshape(d, d),
                   np.asarray(doc["rhs_sum"], np.float64).reshape(d, k), tuple(doc["names"]),
                   tuple(doc["targets"]), tuple(doc.get("debiased", ())))


@dataclass
class MomentLayout:
    """What a chunk needs: the columns read, where each lands in z, and the laws to invert."""

    float_columns: list[str]
    float_index: np.ndarray
    variance: np.ndarray
    code_columns: list[str]
    offsets: np.ndarray
    sizes: np.ndarray
    keep: np.ndarray
    other: np.ndarray
    names: tuple[str, ...]
    label: str | None = None
    label_kind: int = NO_LABEL
    label_scale: float = 1.0
    label_q: float = 1.0
    label_r: float = 0.0
    targets: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _release_entries(spec, features) -> list[tuple]:
    """The release's features in the feature map's order: ("float", column, coordinate,
    variance) per released float column, ("rr", column, [coordinates], mechanism) per
    randomized-response attribute; kept to ``features`` (released column names, an attribute by
    its column name) when given."""
    fm = spec.feature_map
    rr = spec.rr_mechanisms
    variances = spec.feature_noise_variances()
    entries: list[tuple] = []
    for c in fm.inputs:
        a, b = fm.slices[c.name]
        ra, _ = fm.released_slices[c.name]
        if c.name in rr:
            entries.append(("rr", c.name, list(fm.coordinates[a:b]), rr[c.name]))
        else:
            entries += [("float", fm.released_columns[ra + j], fm.coordinates[a + j],
                         variances[ra + j]) for j in range(b - a)]
    if features is not None:
        known = [e[1] for e in entries]
        missing = [f for f in features if f not in known]
        if missing:
            raise InvalidInputError(f"features {missing} are not columns of the release; its "
                                    f"released columns are {known}")
        entries = [e for e in entries if e[1] in list(features)]
    return entries


def release_layout(spec, features, label) -> MomentLayout:
    names: list[str] = []
    floats, codes = [], []
    float_index, variance, offsets, sizes, keep, other = [], [], [], [], [], []
    for kind, column, coord, law in _release_entries(spec, features):
        if kind == "float":
            floats.append(column)
            float_index.append(len(names))
            variance.append(law)
            names.append(coord)
        else:
            codes.append(column)
            offsets.append(len(names))
            sizes.append(len(coord))
            keep.append(law.keep_probability)
            other.append(law.other_probability)
            names += coord
    law_name = spec.noise if spec.mechanism == "gaussian" else spec.mechanism
    notes = [f"features: diagonal minus the noise variance ({law_name} law)" if any(variance)
             else "features: public (no noise to correct)"]
    if codes:
        notes.append("randomized-response attributes: (e - r)/(q - r), own block diag")
    layout = MomentLayout(floats, np.asarray(float_index, np.int64),
                     np.asarray(variance, np.float64), codes,
                     np.asarray(offsets, np.int64), np.asarray(sizes, np.int64),
                     np.asarray(keep, np.float64), np.asarray(other, np.float64),
                     (*names, INTERCEPT), notes=tuple(notes))
    if label is not None and label != spec.label:
        raise InvalidInputError(f"label={label!r}: the release's label column is {spec.label!r}; "
                                "pass label=None")
    return _with_release_label(layout, spec)


def _with_release_label(layout: MomentLayout, spec) -> MomentLayout:
    """The release's label and the inverse of its law."""
    if spec.label is None:
        return layout
    layout.label = spec.label
    q, r = spec.label_keep_prob, spec.label_other_prob
    if spec.label_encoding == "class_index":
        k = len(spec.class_values)
        layout.label_kind, layout.targets = CLASS_LABEL, tuple(str(c) for c in spec.class_values)
        layout.label_q, layout.label_r = (1.0, 0.0) if q is None else (q, float(r or 0.0))
        if q is not None:
            layout.notes += (f"label: k-ary randomized response (k={k}), one-hot (e - r)/(q - r)",)
    else:
        layout.label_kind, layout.targets = SCALAR_LABEL, (spec.label,)
        if spec.label_encoding == "pm1" and q is not None:
            layout.label_scale = 1.0 / (2.0 * q - 1.0)
            layout.notes += ("label: binary randomized response y/(2q - 1)",)
        elif spec.label_encoding is None and spec.target_noise_scale is not None:
            layout.notes += ("target: as released (zero-mean independent noise)",)
    return layout


def _clean_layout(columns: list[str], features, label) -> MomentLayout:
    """A source that is not a release: every value as it is (no noise to correct)."""
    if label is None and "y" in columns:
        label = "y"                 # what (X, y) arrays are named
    if label is not None and label not in columns:
        raise InvalidInputError(f"label={label!r} is not a column of the source; its columns are "
                                f"{columns}")
    feats = [c for c in columns if c != label] if features is None else list(features)
    missing = [f for f in feats if f not in columns]
    if missing or not feats:
        raise InvalidInputError(f"features {missing or feats} are not columns of the source; its "
                                f"columns are {columns}")
    empty = np.zeros(0, np.int64)
    layout = MomentLayout(feats, np.arange(len(feats), dtype=np.int64), np.zeros(len(feats)), [],
                     empty, empty, np.zeros(0), np.zeros(0), (*feats, INTERCEPT),
                     notes=("clean data: nothing debiased",))
    if label is not None:
        layout.label, layout.label_kind, layout.targets = label, SCALAR_LABEL, (label,)
    return layout


def _checked_codes(chunk, layout: MomentLayout) -> np.ndarray:
    """The chunk's category codes (m, n) uint16; a code outside 0..k-1 is refused (the kernel
    indexes by it)."""
    n = chunk.n_rows
    codes = np.empty((len(layout.code_columns), n), np.uint16)
    for a, name in enumerate(layout.code_columns):
        column = chunk.labels[name]
        k = int(layout.sizes[a])
        if n and (int(column.max()) >= k or int(column.min()) < 0):
            i = int(np.flatnonzero((column < 0) | (column >= k))[0])
            raise InvalidInputError(f"randomized-response column {name!r} holds the code "
                                    f"{int(column[i])} at {chunk.describe(i)}, outside 0..{k - 1}: "
                                    "the release was edited or is corrupt")
        codes[a] = column
    return codes


def _checked_label(chunk, layout: MomentLayout) -> np.ndarray:
    if layout.label is None:
        return np.zeros(chunk.n_rows)
    y = np.asarray(chunk.labels[layout.label], np.float64)
    k = len(layout.targets)
    if layout.label_kind == CLASS_LABEL and y.size and (y.min() < 0 or y.max() >= k):
        i = int(np.flatnonzero((y < 0) | (y >= k))[0])
        raise InvalidInputError(f"label {layout.label!r} holds {y[i]} at {chunk.describe(i)}, "
                                f"not a class index 0..{k - 1}: the release is corrupt")
    return y


def accumulate_numpy(X, float_index, variance, codes, offsets, sizes, keep, other, y, label_kind,
                     label_scale, label_q, label_r, G, B) -> None:
    """The kernel's NumPy twin, straight from the formulas: z as a (d, n) matrix, G += Z Z^T, each
    attribute's block replaced by diag(sum of e-hat), the diagonal less n v_j; B += Z Y-hat^T."""
    n = X.shape[1]
    d, K = G.shape[0], B.shape[1]
    Z = np.zeros((d, n))
    Z[float_index] = X
    blocks = []
    for a in range(codes.shape[0]):
        onehot = np.zeros((int(sizes[a]), n))
        onehot[codes[a].astype(np.int64), np.arange(n)] = 1.0
        block = slice(int(offsets[a]), int(offsets[a] + sizes[a]))
        Z[block] = (onehot - other[a]) / (keep[a] - other[a])
        blocks.append(block)
    Z[d - 1] = 1.0
    gram = Z @ Z.T
    for block in blocks:
        gram[block, block] = np.diag(Z[block].sum(axis=1))
    gram[float_index, float_index] -= n * np.asarray(variance)
    G += gram
    if label_kind == SCALAR_LABEL:
        B += Z @ (label_scale * y)[:, None]
    elif label_kind == CLASS_LABEL:
        onehot = np.zeros((K, n))
        onehot[y.astype(np.int64), np.arange(n)] = 1.0
        B += Z @ ((onehot - label_r) / (label_q - label_r)).T


def accumulate_chunk(X, float_index, variance, codes, offsets, sizes, keep, other, y, label_kind,
                     label_scale, label_q, label_r, G, B) -> None:
    """One chunk into G and B (in place): the products of two float columns by BLAS (X X^T,
    1.4x the kernel's rate alone at p = 10, 1.7x at p = 100 on this project's 2-core EPYC:
    docs/performance-kernels.md, ``bench/moments.py``), everything else by one kernel call."""
    from ._kernels.moments import moments_chunk
    if X.shape[0]:
        G[np.ix_(float_index, float_index)] += X @ X.T
    moments_chunk(X, float_index, variance, codes, offsets, sizes, keep, other, y, label_kind,
                  label_scale, label_q, label_r, G, B, 0)


def privatized_table(result):
    """What ``privatize`` returned (the arrays and their spec) as a table carrying the release
    metadata, so that it is read like the file the same release would have written."""
    import pyarrow as pa

    from .privacy import METADATA_KEY
    spec = result.spec
    X = np.asarray(result.X)
    arrays = {}
    for j, name in enumerate(spec.released_features):
        arrays[name] = X[:, j].astype(np.uint16) if name in spec.rr_mechanisms else X[:, j]
    if spec.label is not None and result.y is not None:
        arrays[spec.label] = np.asarray(result.y)
    table = pa.table(arrays)
    return table.replace_schema_metadata({METADATA_KEY: spec.to_json(len(X))})


def _layout_of(source, features, label) -> MomentLayout:
    meta = source.release_metadata
    if meta:
        from .privacy import ReleaseSpec
        return release_layout(ReleaseSpec.from_metadata(meta), features, label)
    return _clean_layout(list(source.full_schema.names), features, label)


def moments(source, features=None, label=None, *, record_batch_rows: int | None = None,
            filesystem=None) -> Moments:
    """The debiased sums of z z^T and z y-hat over the rows of ``source``, in one pass.

    source: a release (file, multi-part folder, stream, what ``privatize`` returns) or a clean
        table: anything the readers accept (``iwpfast.io.sources.open_source``).  A release is
        debiased by the laws its metadata states; any other source is taken as clean.
    features: the released columns to use (a randomized-response attribute by its column name);
        None: all of them (a clean source: every column but the label).
    label: None: the release's label (a clean source: the column ``y`` when there is one, else no
        right-hand side).
    record_batch_rows: rows per chunk (one kernel call each; None: the reader's default).
    """
    return fold_moments(source, features, label, folds=1, record_batch_rows=record_batch_rows,
                        filesystem=filesystem)[0]


def fold_moments(source, features=None, label=None, *, folds: int = 1,
                 block_rows: int | None = None, record_batch_rows: int | None = None,
                 filesystem=None) -> list[Moments]:
    """``moments`` of ``folds`` disjoint parts of the rows, in the same one pass: row i belongs
    to part (i // block_rows) % folds (blocks of consecutive rows dealt in turn, so that every
    part samples the whole file, sorted or not; ``block_rows`` None: ``fold_block_rows`` of the
    rows the source declares).  Their sum is ``moments(source, ...)``."""
    from .io.sources import open_source
    if record_batch_rows is not None and int(record_batch_rows) < 1:
        raise InvalidInputError(f"record_batch_rows={record_batch_rows} must be a positive "
                                "number of rows")
    from .privacy.streams import Privatized
    if isinstance(source, Privatized):
        source = privatized_table(source)
    from .io.source_base import DEFAULT_BATCH_ROWS
    src = open_source(source, filesystem=filesystem, record_batch_rows=DEFAULT_BATCH_ROWS
                      if record_batch_rows is None else int(record_batch_rows))
    layout = _layout_of(src, features, label)
    reader = layout_reader(src, layout, record_batch_rows)
    if block_rows is None:
        block_rows = fold_block_rows(src.num_rows, folds)
    return accumulate_folds(reader, layout, folds, block_rows)


def fold_block_rows(n_rows: int | None, folds: int) -> int:
    """The rows per block of ``fold_moments``' parts: ``FOLD_BLOCK_ROWS`` (1,024), smaller for a
    table of fewer than one such block per part, or for a source that declares more rows a
    larger power of two that still deals every part at least 32 blocks (up to 65,536): small
    files keep every part spread over the file; the per-class Grams and the accuracy pass of
    the choice across learners, which take a block at a time, pay one call per 2^15 rows on
    large ones."""
    if folds <= 1:
        return 1 << 15          # one part: blocks only to keep a block's columns in cache
    if n_rows is None:
        return FOLD_BLOCK_ROWS
    if int(n_rows) < int(folds) * FOLD_BLOCK_ROWS:
        # a table too small to give every part a block: blocks of a power of two that deal
        # every part about 4 of them, so that alpha is chosen on every part (15 rows: blocks of
        # 1 row, 3 per part); from folds * 1,024 rows on, fit and a partial_fit without
        # n_rows_total deal the same blocks
        few = max(int(n_rows) // (4 * int(folds)), 1)
        return 1 << (few.bit_length() - 1)
    share = int(n_rows) // (32 * int(folds))
    return int(min(max(FOLD_BLOCK_ROWS, 1 << max(share.bit_length() - 1, 0)), 1 << 16))


def label_classes(y: np.ndarray, layout: MomentLayout, n_classes: int) -> np.ndarray:
    """Each row's released class: 0/1 for -1/+1 labels, the index for class labels."""
    if layout.label_kind == CLASS_LABEL:
        return y.astype(np.int64)
    bad = (y != 1.0) & (y != -1.0)
    if bad.any():
        raise InvalidInputError(f"label {layout.label!r} holds {y[np.flatnonzero(bad)[0]]}: "
                                "per-class moments need labels -1/+1 or class indices")
    return (y > 0).astype(np.int64)


def layout_reader(source, layout: MomentLayout, chunk_rows: int | None = None):
    """The ``ChunkReader`` of ``source`` for ``layout``: its float columns as one group, its
    randomized-response code columns and its label beside them."""
    from .io.reader import ChunkReader
    labels = layout.code_columns + ([layout.label] if layout.label is not None else [])
    return ChunkReader(source, [layout.float_columns], labels, chunk_rows)


def _runs(n: int, start: int, folds: int, block_rows: int):
    """(fold, a, b) for every run [a, b) of a chunk's n rows (source rows start..) in one block."""
    a = 0
    while a < n:
        b = min(n, (start + a) // block_rows * block_rows + block_rows - start)
        yield ((start + a) // block_rows) % folds, a, b
        a = b


def _block_runs(chunks, layout: MomentLayout, folds: int, block_rows: int, first_row: int):
    """(fold, columns, codes, labels, a, b) for every run [a, b) of a chunk's rows that lies in one
    block of ``block_rows`` rows (row i of the source in fold (i // block_rows) % folds)."""
    if int(folds) < 1 or int(block_rows) < 1:
        raise InvalidInputError(f"folds={folds} and block_rows={block_rows} must be >= 1")
    start = int(first_row)
    for chunk in chunks:
        n = chunk.n_rows
        codes, y = _checked_codes(chunk, layout), _checked_label(chunk, layout)
        columns = [np.asarray(c) for c in chunk.features[0]]
        for f, a, b in _runs(n, start, folds, block_rows):
            yield f, columns, codes, y, a, b
        start += n


def _add_rows(layout: MomentLayout, columns, codes, y, rows, G, B, label: bool = True) -> None:
    """The rows ``rows`` (a slice or an index array) into G and B: their columns copied once
    into a (P, m) block, one ``accumulate_chunk``; ``label=False`` adds no right-hand side."""
    X = np.empty((len(columns), len(y[rows])))
    for j, column in enumerate(columns):
        X[j] = column[rows]
    accumulate_chunk(X, layout.float_index, layout.variance, np.ascontiguousarray(codes[:, rows]),
                     layout.offsets, layout.sizes, layout.keep, layout.other, y[rows],
                     layout.label_kind if label else NO_LABEL, layout.label_scale,
                     layout.label_q, layout.label_r, G, B)


def accumulate_class_folds(chunks, layout: MomentLayout, folds: int, block_rows: int,
                           n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Per fold and per *released* class c, the debiased sums of z z^T over the rows released
    as c: (G (folds, C, d, d), rows (folds, C)).  Any per-row factor that is a function of the
    true class (a class weight, a weighted target) is then a linear combination of them with
    the label inverse (``class_weighted``): one Gram per observed class."""
    d = len(layout.names)
    G = np.zeros((folds, n_classes, d, d))
    rows = np.zeros((folds, n_classes), np.int64)
    none = np.zeros((d, 0))
    for f, columns, codes, y, a, b in _block_runs(chunks, layout, folds, block_rows, 0):
        cls = label_classes(y[a:b], layout, n_classes)
        for c in range(n_classes):
            take = a + np.flatnonzero(cls == c)
            if take.size:
                _add_rows(layout, columns, codes, y, take, G[f, c], none, label=False)
                rows[f, c] += take.size
    return G, rows


def class_weighted(G: np.ndarray, rows: np.ndarray, targets: np.ndarray, weights: np.ndarray,
                   keep: float, other: float, layout: MomentLayout) -> list[Moments]:
    """The class-weighted moments of each fold from its per-released-class Grams: the weighted
    Gram sum_c~ w-hat(c~) G_c~ and right-hand sides sum_c~ v-hat_t(c~) (sum of z over c~), with
    v_c = w_c targets[t, c] and, for any per-true-class quantity v, v-hat(c~) = (v_c~ -
    r sum_c v_c)/(q - r) (unbiased: q + (k - 1) r = 1; public labels q = 1, r = 0).  targets
    (K, C): the value of right-hand side t for true class c (+-1 for binary labels, one-hot for
    k classes)."""
    gap = keep - other

    def debiased(v):                                        # (..., C) -> (..., C)
        return (v - other * v.sum(axis=-1, keepdims=True)) / gap

    w_hat = debiased(np.asarray(weights, np.float64))                    # (C,)
    v_hat = debiased(np.asarray(targets, np.float64) * weights[None, :])  # (K, C)
    out = []
    for f in range(G.shape[0]):
        gram = np.einsum("c,cde->de", w_hat, G[f])
        rhs = G[f][:, :, -1].T @ v_hat.T                                  # (d, K)
        out.append(Moments(int(rows[f].sum()), gram, rhs, layout.names, layout.targets,
                           layout.notes + ("class weights: one Gram per released class, "
                                           "the weights' randomized-response inverse",)))
    return out


def accumulate_folds(chunks, layout: MomentLayout, folds: int = 1,
                     block_rows: int = FOLD_BLOCK_ROWS, first_row: int = 0) -> list[Moments]:
    """The moments of ``folds`` parts (see ``fold_moments``) of the rows of ``chunks`` (what
    ``layout_reader`` yields): one ``accumulate_runs`` per chunk, which adds every run of the
    chunk's rows inside one block to its fold, its columns read in place, never gathered.
    ``first_row``: the index of the chunks' first row in the whole source (a shard's rows keep
    the whole source's folds)."""
    folds, block_rows = int(folds), int(block_rows)
    if folds < 1 or block_rows < 1:
        raise InvalidInputError(f"folds={folds} and block_rows={block_rows} must be >= 1")
    d, K = len(layout.names), len(layout.targets)
    G, B = np.zeros((folds, d, d)), np.zeros((folds, d, K))
    rows = np.zeros(folds, np.int64)
    start = int(first_row)
    for chunk in chunks:
        codes, y = _checked_codes(chunk, layout), _checked_label(chunk, layout)
        accumulate_runs(layout, list(chunk.features[0]), codes, y, start, folds, block_rows,
                        G, B, rows)
        start += chunk.n_rows
    return [Moments(int(rows[f]), G[f], B[f], layout.names, layout.targets, layout.notes)
            for f in range(folds)]


#: at most this many float columns: their products in the kernel, tile by tile, on the columns
#: in place; more: BLAS's X X^T per run on a float64 copy.  Measured (2-core shared EPYC, load
#: about 4, M rows/s, kernel / BLAS + kernel): p = 10 55 / 24, 32 11.3 / 10.2, 48 5.6 / 6.3,
#: 100 1.4 / 2.1 with one BLAS thread, but with BLAS's default threads beside other work p >= 24
#: fell to 0.03-2.7 (its threads spin against the reader's) and the kernel leaves a core free
KERNEL_GRAM_COLUMNS = 128
#: the kernel's tile: rows of about 256 KiB of float64 columns (80 KiB of float32 at p = 10:
#: within the core's L2), 256..4096 rows; 1,024 to 8,192 rows measured alike at p = 10
TILE_BYTES = 256 << 10


def _tile_rows(p: int) -> int:
    rows = TILE_BYTES // (8 * max(int(p), 1))
    return int(min(4096, max(256, 1 << (rows.bit_length() - 1))))


def accumulate_runs(layout: MomentLayout, columns, codes, y, start: int, folds: int,
                    block_rows: int, G, B, rows) -> None:
    """One chunk (its float columns, 1-D arrays; codes (m, n); labels y (n,) float64; row 0 is
    the source's row ``start``) into the fold sums G (folds, d, d), B (folds, d, K) and rows
    (folds,): each run of rows inside one block of ``block_rows`` as one ``accumulate_chunk``
    of those rows into its fold (row i in fold (i // block_rows) % folds).  One kernel call for
    the whole chunk (``_kernels.moments.moments_runs``) reads float32 or float64 columns in place;
    with more than ``KERNEL_GRAM_COLUMNS`` columns the products of two float columns are BLAS's
    X X^T per run on a float64 copy.  ``accumulate_runs_numpy`` is its twin."""
    from ._kernels.moments import moments_runs
    n = len(y)
    dtype = np.float32 if columns and all(c.dtype == np.float32 for c in columns) else np.float64
    columns = [np.ascontiguousarray(c, dtype) for c in columns]
    addresses = np.array([c.ctypes.data for c in columns], np.int64)
    like = columns[0] if columns else np.zeros(0)
    p = len(columns)
    blas = p > KERNEL_GRAM_COLUMNS
    if blas:
        index = np.ix_(layout.float_index, layout.float_index)
        for f, a, b in _runs(n, start, folds, block_rows):
            X = np.empty((p, b - a))
            for j, column in enumerate(columns):
                X[j] = column[a:b]
            G[f][index] += X @ X.T
    moments_runs(addresses, like, n, layout.float_index, layout.variance, codes, layout.offsets,
                 layout.sizes, layout.keep, layout.other, y, layout.label_kind,
                 layout.label_scale, layout.label_q, layout.label_r, int(start), int(block_rows),
                 int(folds), G, B, rows, 0 if blas else 1, _tile_rows(p))


def accumulate_runs_numpy(layout: MomentLayout, columns, codes, y, start: int, folds: int,
                          block_rows: int, G, B, rows) -> None:
    """``accumulate_runs``' NumPy twin: ``accumulate_numpy`` on each run's rows, into its fold."""
    for f, a, b in _runs(len(y), start, folds, block_rows):
        X = np.array([np.asarray(c[a:b], np.float64) for c in columns]).reshape(len(columns),
                                                                               b - a)
        accumulate_numpy(X, layout.float_index, layout.variance, codes[:, a:b], layout.offsets,
                         layout.sizes, layout.keep, layout.other, y[a:b], layout.label_kind,
                         layout.label_scale, layout.label_q, layout.label_r, G[f], B[f])
        rows[f] += b - a


def layout_for_columns(features, noise_variance, label=None, *, label_kind: int = NO_LABEL,
                       label_scale: float = 1.0, label_q: float = 1.0, label_r: float = 0.0,
                       targets=(), notes=()) -> MomentLayout:
    """The layout of float feature columns with the given noise variances (0: clean) and a
    label already encoded (+-1 for ``SCALAR_LABEL`` with ``label_scale`` 1/(2q - 1) for binary
    randomized response; class indices for ``CLASS_LABEL`` with k-ary q and r): what an
    estimator's prepared source reads (arrays, tables without release metadata, a release read
    through the estimator's plan)."""
    feats = list(features)
    empty = np.zeros(0, np.int64)
    layout = MomentLayout(feats, np.arange(len(feats), dtype=np.int64),
                     np.asarray(noise_variance, np.float64).reshape(len(feats)), [], empty,
                     empty, np.zeros(0), np.zeros(0), (*feats, INTERCEPT), notes=tuple(notes))
    if label is not None:
        layout.label, layout.label_kind = label, int(label_kind)
        layout.label_scale, layout.label_q, layout.label_r = (float(label_scale), float(label_q),
                                                              float(label_r))
        layout.targets = tuple(targets) or (label,)
    return layout


def solve_ridge(moments: Moments, alpha: float, fit_intercept: bool = True):
    """(coef, intercept) of theta = (G + alpha D)^-1 b, D = diag(1, ..., 1, 0): alpha as the SGD
    estimators' ``alpha`` (the quadratic risk plus alpha/2 |w|^2), the intercept unpenalized.
    fit_intercept=False drops z's last coordinate (intercept 0).  One right-hand side: coef (p,)
    and a float; K: coef (K, p) and intercept (K,)."""
    alpha = float(alpha)
    if not np.isfinite(alpha) or alpha < 0:
        raise InvalidInputError(f"alpha={alpha} must be a finite number >= 0")
    if moments.n_targets == 0:
        raise InvalidInputError("the moments hold no label (no right-hand side): accumulate them "
                                "with label=...")
    G, B = moments.G, moments.rhs_sum / max(moments.rows, 1)
    penalty = np.ones(G.shape[0])
    penalty[-1] = 0.0
    if not fit_intercept:
        G, B, penalty = G[:-1, :-1], B[:-1], penalty[:-1]
    A = G + alpha * np.diag(penalty)
    try:
        np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        raise InvalidInputError(
            f"alpha={alpha}: G + alpha*D is not positive definite (the debiased Gram is "
            "indefinite on small or noisy data, or singular): raise alpha") from None
    theta = np.linalg.solve(A, B)           # (d, K)
    coef = theta[:-1] if fit_intercept else theta
    intercept = theta[-1] if fit_intercept else np.zeros(theta.shape[1])
    if theta.shape[1] == 1:
        return coef[:, 0], float(intercept[0])
    return coef.T.copy(), np.asarray(intercept)
