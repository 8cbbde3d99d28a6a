"""In-memory arrays as a training source, read without copying X.

``ArraySource(columns_of_X, labels, feature_names, label_name, encode=...)`` is what ``fit(X, y)``
hands the driver.  ``ChunkReader`` reads it through ``chunks()`` instead of Arrow batches:

- the features keep their dtype (float32 or float64; the kernel runs in it), and a column that is
  contiguous in memory -- every column of a Fortran-order (n, p) array, of a (p, n) array, of most
  DataFrames -- is passed as a view: no copy at all;
- a row-major (C-order) array, a strided column, an integer column or a shuffled order is copied
  one chunk at a time (the chunk is transposed into feature-major buffers): at most the chunks in
  flight (three, see ``ChunkReader``) are ever copied, never X;
- per chunk, in the reader's thread: ``encode(labels)`` (the label check and the mapping to what
  the kernel reads), and, when ``validate`` (prediction), the finiteness check of every column
  (one ``np.add.reduce`` each, the row found only when it fails).  Training leaves the finiteness
  to the kernel: a non-finite value makes the gradient NaN, and the driver then names the column
  and row (``iwpfast.sgd.scan._run_unit_chunk``) -- no pass of its own over X.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from ..exceptions import InvalidInputError
from .chunks import Chunk
from .source_base import BatchOrigin, Source

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
#: rows per chunk (default) when the reader copies the features (row-major X): a quarter of the
#: default chunk, so the (at most three) copies in flight stay below one default chunk
COPY_CHUNK_ROWS = 1 << 16


def feature_dtype(dtypes) -> np.dtype:
    """The kernel dtype of columns of these dtypes: float32 only when all are float32."""
    dtypes = [np.dtype(d) for d in dtypes]
    return np.dtype(np.float32) if dtypes and all(d == np.float32 for d in dtypes) else np.dtype(np.float64)


class ArraySource(Source):
    """Feature columns and labels held in memory (see the module docstring).

    X: an (n, p) NumPy array (any order) or a list of p 1-D arrays.  labels: 1-D, n values, given
    to ``encode(values, first_row, label_dtype)`` chunk by chunk (returns the kernel's labels).
    order: an optional permutation of the rows (``shuffle=True``), applied chunk by chunk.
    weights: optional sample weights (n values, checked by the caller), the column ``weight_name``.
    """

    cheap_decode = True
    rereadable = True

    def __init__(self, X, labels: np.ndarray | None, feature_names: Sequence[str],
                 label_name: str | None, *,
                 encode: Callable[[np.ndarray, int, np.dtype], np.ndarray] | None = None,
                 label_dtype=np.float64, order: np.ndarray | None = None,
                 description: str = "<arrays>", validate: bool = True,
                 weights: np.ndarray | None = None, weight_name: str | None = None):
        self.description = description
        self.feature_names = list(feature_names)
        self.label_name = label_name
        # sample weights (checked by the caller): a column ``weight_name`` read in the features'
        # dtype, as the kernel reads them (a view when they are already in it)
        self._weights = weights
        self.weight_name = weight_name if weights is not None else None
        self._labels = labels
        self._encode = encode
        self._order = order
        # check every value is finite while reading (one pass over each column); the training
        # driver turns it off: there a non-finite value shows as a divergence of the kernel and is
        # found then (iwpfast.sgd.scan._run_unit_chunk), so fit(X, y) reads X once
        self.validate = validate
        self._matrix: np.ndarray | None          # X as given when it is one array, else
        self._columns: list[np.ndarray] | None   # its columns
        if isinstance(X, np.ndarray):
            self._matrix = X
            self._columns = None
            n = X.shape[0]
            dtypes = [X.dtype]
        else:
            self._matrix = None
            self._columns = list(X)
            n = self._columns[0].shape[0] if self._columns else 0
            dtypes = [c.dtype for c in self._columns]
        self.dtype = feature_dtype(dtypes)
        self.label_dtype = np.dtype(label_dtype)
        fields = [pa.field(f, pa.from_numpy_dtype(self.dtype)) for f in self.feature_names]
        if label_name is not None:
            fields.append(pa.field(label_name, pa.from_numpy_dtype(self.label_dtype)))
        if self.weight_name is not None:
            fields.append(pa.field(self.weight_name, pa.from_numpy_dtype(self.dtype)))
        schema = pa.schema(fields)
        super().__init__(schema, None, 1 << 16, int(n))
        self._n_rows = int(n)

    def group_ends(self):
        return [self.num_rows]

    @property
    def copies(self) -> bool:
        """Whether reading copies the features (else every chunk's columns are views of X)."""
        if self._order is not None:
            return True
        if self._matrix is not None:
            m = self._matrix
            return not (m.dtype == self.dtype and (m.strides[0] == m.itemsize or m.shape[0] <= 1))
        return any(c.dtype != self.dtype or not c.flags.c_contiguous for c in self._columns or ())

    # ---------------------------------------------------------------- the columns of a row range
    def _label_rows(self, start: int, stop: int):
        """The raw labels of rows [start, stop) (in the shuffled order if any) and the encoder."""
        labels, encode = self._labels, self._encode
        assert labels is not None and encode is not None    # a label column was given
        rows = labels[start:stop] if self._order is None else labels[self._order[start:stop]]
        return rows, encode

    def _weight_rows(self, start: int, stop: int) -> np.ndarray:
        """The sample weights of rows [start, stop) (shuffled order if any), features' dtype."""
        w = self._weights
        assert w is not None
        rows = w[start:stop] if self._order is None else w[self._order[start:stop]]
        return np.ascontiguousarray(rows, dtype=self.dtype)

    def _feature_block(self, start: int, stop: int) -> tuple[list[np.ndarray], bool]:
        """The p feature columns of rows [start, stop) in ``self.dtype``, and whether they are
        views (no copy)."""
        dtype = self.dtype
        if self._order is not None:
            rows = self._order[start:stop]
            if self._matrix is not None:
                block = np.ascontiguousarray(self._matrix[rows].T, dtype=dtype)
                return list(block), False
            return [np.ascontiguousarray(c[rows], dtype=dtype) for c in self._columns or ()], False
        if self._matrix is not None:
            part = self._matrix[start:stop].T          # (p, rows) view
            if part.dtype == dtype and (part.strides[1] == part.itemsize or part.shape[1] <= 1):
                return list(part), True                 # Fortran-order X: each column contiguous
            return list(np.ascontiguousarray(part, dtype=dtype)), False   # one transposed copy
        out, views = [], True
        for c in self._columns or ():
            piece = c[start:stop]
            if piece.dtype != dtype or not piece.flags.c_contiguous:
                piece = np.ascontiguousarray(piece, dtype=dtype)
                views = False
            out.append(piece)
        return out, views

    def chunks(self, plan, start_row: int, chunk_rows: int, stats):
        """Yield ``Chunk`` objects (``iwpfast.io.reader``) of ``chunk_rows`` rows from ``start_row``."""
        index = {name: j for j, name in enumerate(self.feature_names)}
        n = self._n_rows
        for start in range(start_row, n, chunk_rows):
            stop = min(n, start + chunk_rows)
            columns, views = self._feature_block(start, stop)
            with np.errstate(over="ignore", invalid="ignore"):
                for j, c in enumerate(columns if self.validate else ()):
                    if not np.isfinite(np.add.reduce(c)) and not np.isfinite(c).all():
                        bad = start + int(np.flatnonzero(~np.isfinite(c))[0])
                        raise InvalidInputError(
                            f"non-finite value {float(c[bad - start])!r} in column "
                            f"{self.feature_names[j]!r} at "
                            f"row {bad} of {self.description}. Remove or fix the rows with NaN/inf.")
            labels = {}
            if self.label_name is not None:
                raw, encode = self._label_rows(start, stop)
                labels[self.label_name] = np.ascontiguousarray(
                    encode(raw, start, self.label_dtype), dtype=self.label_dtype)
            nbytes = 0 if views else sum(c.nbytes for c in columns)
            stats.zero_copy_columns += len(columns) if views else 0
            stats.copied_columns += 0 if views else len(columns)
            stats.copied_bytes += nbytes
            stats.copied_chunks += 0 if views else 1
            by_name = {name: columns[j] for name, j in index.items()}
            if self.weight_name is not None:
                by_name[self.weight_name] = self._weight_rows(start, stop)
            features = [tuple(by_name[name] for name in group) for group in plan.groups]
            yield Chunk(features, labels,
                        BatchOrigin(0, self.description, -1, start, start), stop - start)

    # ---------------------------------------------------------------- the plain batch view
    def _located(self, columns, start_row, batch_rows):
        n = self._n_rows
        for start in range(start_row, n, batch_rows):
            stop = min(n, start + batch_rows)
            block, _ = self._feature_block(start, stop)
            data = dict(zip(self.feature_names, block, strict=True))
            if self.label_name is not None:
                raw, encode = self._label_rows(start, stop)
                data[self.label_name] = np.asarray(encode(raw, start, self.label_dtype),
                                                   dtype=self.label_dtype)
            if self.weight_name is not None:
                data[self.weight_name] = self._weight_rows(start, stop)
            yield (BatchOrigin(0, self.description, -1, start, start),
                   pa.record_batch([pa.array(data[c]) for c in columns], names=list(columns)))


def check_feature_columns(columns: list[np.ndarray], names: Sequence[str]) -> None:
    """Each column 1-D, numeric, all of one length (the checks that need no pass over the data)."""
    for name, c in zip(names, columns, strict=True):
        if c.ndim != 1:
            raise InvalidInputError(f"feature {name!r} has shape {c.shape}; each column must be 1-D")
        if not (np.issubdtype(c.dtype, np.number) or c.dtype == np.bool_):
            raise InvalidInputError(f"feature {name!r} has dtype {c.dtype}; encode non-numeric columns "
                                    "as numbers first")
