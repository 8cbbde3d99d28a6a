"""``FeatureMap``: input columns -> released coordinates, shared by the release and the model.

A numeric input column is one coordinate, scaled from its declared public range into [-1, 1]
(clipped to it), as releases always did.  A categorical input column with k declared (public)
categories is a one-hot block of k coordinates named ``column=category``, 0 or 1 (not scaled to
+-1: the block has norm exactly 1 whatever the category, which the privacy accounting uses:
docs/release.md "Categorical columns").  The map is written into a release's metadata (key
``feature_map``) and stored in the model, so that ``predict`` & co. read the raw table (strings)
and map it exactly as the release did.  A release without a feature map has one coordinate per
input column (every release written before categorical columns existed).

Categories are declared, never read from the data (``categories_from_data`` computes them with a
``PrivacyLeakWarning``, as ``ranges_from_data`` does for ranges).  A value outside the declared
categories is an error naming column, value and row, or goes to the declared catch-all category
(``unknown_category``).  A missing value (null) is invalid like a null in a numeric column: an
error naming column and row, or the row is dropped with ``on_invalid="drop"``; it never goes to
the catch-all (fill it with a category of its own before the release if it means something).
"""
from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..exceptions import InvalidInputError, PrivacyLeakWarning
from .scaling import RangeScaler, clip_vectors_

#: the kinds of input column
NUMERIC, CATEGORICAL = "numeric", "categorical"
#: how a private categorical column is released: its one-hot block noised with the numeric part
#: (Gaussian/Laplace), or one integer code by k-ary randomized response (docs/release.md
#: "Categorical columns by randomized response")
ONEHOT, RR = "onehot", "rr"
CATEGORICAL_MECHANISMS = ("gaussian", "rr")
#: the most categories of one column (codes are int16 inside the release)
MAX_CATEGORIES = 32767


def _category_value(column: str, value):
    """A declared category: a string or an integer (integer-code columns), checked."""
    if isinstance(value, (bool, np.bool_)):
        raise InvalidInputError(f"category {value!r} of column {column!r} is a bool; declare "
                                "strings or integer codes")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    if isinstance(value, str):
        return value
    raise InvalidInputError(f"category {value!r} of column {column!r} must be a string or an "
                            "integer code")


def check_categories(categories: Mapping | None) -> dict[str, tuple]:
    """``{column: (category, ...)}`` checked: at least one category each, no value twice."""
    if categories is None:
        return {}
    if not isinstance(categories, Mapping):
        raise InvalidInputError(
            f"categories must be a dict {{column: [category, ...]}}, got {type(categories).__name__}; "
            "e.g. categories={'workclass': ['Private', 'State-gov']}")
    out: dict[str, tuple] = {}
    for name, values in categories.items():
        name = str(name)
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise InvalidInputError(
                f"categories of {name!r} must be a list of values, got {values!r}; e.g. "
                f"categories={{{name!r}: ['a', 'b']}} (CLI: --categories {name}=a,b)")
        vals = tuple(_category_value(name, v) for v in values)
        if not vals:
            raise InvalidInputError(f"column {name!r} declares no category; give at least one")
        if len(set(vals)) != len(vals):
            seen: set = set()
            twice = [v for v in vals if v in seen or seen.add(v)]  # type: ignore[func-returns-value]
            raise InvalidInputError(f"column {name!r} declares category {twice[0]!r} twice")
        if len({type(v) for v in vals}) > 1:
            raise InvalidInputError(f"the categories of {name!r} mix strings and integers "
                                    f"({list(vals)[:6]}); declare them of the column's type")
        if len(vals) > MAX_CATEGORIES:
            raise InvalidInputError(f"column {name!r} declares {len(vals)} categories; at most "
                                    f"{MAX_CATEGORIES}")
        out[name] = vals
    return out


def check_unknown(unknown, categories: Mapping[str, tuple]) -> dict[str, object]:
    """``unknown_category`` (one catch-all for every categorical column of its type -- strings or
    integer codes --, or a dict per column)
    as ``{column: catch-all}``; a catch-all not among a column's categories is added to them by
    :func:`with_catch_all`."""
    if unknown is None:
        return {}
    if isinstance(unknown, Mapping):
        extra = [c for c in unknown if c not in categories]
        if extra:
            raise InvalidInputError(
                f"unknown_category names column(s) {extra} without declared categories; declare "
                "their categories (categories={...}; CLI: --categories)")
        return {str(c): _category_value(str(c), v) for c, v in unknown.items()}
    # one catch-all for every column whose categories are of its type (a string catch-all
    # leaves integer-code columns strict)
    value = _category_value("unknown_category", unknown)
    return {c: value for c, vals in categories.items() if isinstance(vals[0], type(value))}


def with_catch_all(categories: Mapping[str, tuple], unknown: Mapping[str, object]) -> dict[str, tuple]:
    """The categories with each column's catch-all appended when it is not declared already."""
    out = dict(categories)
    for c, v in unknown.items():
        vals = out[c]
        if v not in vals:
            if not isinstance(v, type(vals[0])):
                raise InvalidInputError(f"unknown_category {v!r} of column {c!r} is not of the type "
                                        f"of its categories ({type(vals[0]).__name__})")
            out[c] = vals + (v,)
    return out


_CAT_RE = re.compile(r"^\s*([^=]+?)\s*=(.*)$", re.S)


def parse_categories(items: Sequence[str] | None) -> dict[str, list[str]]:
    """CLI ``--categories NAME=A,B,C`` (repeatable) -> ``{NAME: [A, B, C]}``.  Values are strings
    (matched against integer-code columns by value); values holding commas or spaces go in
    ``--categories-file``."""
    out: dict[str, list[str]] = {}
    for item in items or ():
        m = _CAT_RE.match(item)
        if m is None or not m.group(2).strip():
            raise InvalidInputError(
                f"cannot parse categories {item!r}; write NAME=A,B,C, e.g. "
                "workclass=Private,Self-emp-inc (values with commas: --categories-file F.json)")
        name, values = m.group(1), [v.strip() for v in m.group(2).split(",")]
        if any(not v for v in values):
            raise InvalidInputError(f"categories of {name!r} hold an empty value ({item!r}); "
                                    "remove the extra comma")
        if name in out:
            raise InvalidInputError(f"categories of {name!r} given twice; give each column once")
        out[name] = values
    return out


def read_categories_file(path) -> dict[str, list]:
    """``--categories-file F.json``: a JSON object ``{"column": ["value", ...], ...}``."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise InvalidInputError(f"cannot read the categories file {str(path)!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise InvalidInputError(f"the categories file {str(path)!r} is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise InvalidInputError(f"the categories file {str(path)!r} must hold a JSON object "
                                '{"column": ["value", ...], ...}')
    return data


def categories_from_data(columns: Mapping[str, Iterable]) -> dict[str, tuple]:
    """The distinct values of each column, sorted (used only with an explicit opt-in): it leaks
    which categories occur in the private data."""
    warnings.warn(
        "categories computed from the private data leak it (which values occur, including rare "
        "ones, is released without noise): the release is not differentially private in the "
        "categories; declare them instead (e.g. --categories workclass=Private,State-gov)",
        PrivacyLeakWarning, stacklevel=3)
    return {c: tuple(sorted(set(v))) for c, v in columns.items()}


@dataclass(frozen=True)
class InputColumn:
    """One input column: numeric (its declared range) or categorical (its declared categories)."""

    name: str
    kind: str
    range: tuple[float, float] | None = None
    categories: tuple | None = None
    public: bool = False
    #: a categorical column's release: ``ONEHOT`` (its block) or ``RR`` (one randomized code)
    mechanism: str = ONEHOT

    @property
    def width(self) -> int:
        """The model's coordinates of the column (a categorical one: its one-hot block)."""
        return 1 if self.kind == NUMERIC else len(self.categories or ())

    @property
    def is_rr(self) -> bool:
        return self.kind == CATEGORICAL and self.mechanism == RR

    @property
    def released_width(self) -> int:
        """The released columns of the column: one code for randomized response, else ``width``."""
        return 1 if self.is_rr else self.width

    def coordinate_names(self) -> list[str]:
        if self.kind == NUMERIC:
            return [self.name]
        return [f"{self.name}={v}" for v in self.categories or ()]


class FeatureMap:
    """Input columns -> released coordinates (numeric: scaled by range; categorical: one-hot 0/1).

    ``unknown``: per categorical column, the catch-all category unknown values go to (it is one
    of the column's categories), or absent: unknown values are an error naming column, value and
    row.
    """

    def __init__(self, inputs: Sequence[InputColumn], unknown: Mapping[str, object] | None = None):
        self.inputs = tuple(inputs)
        self.unknown = dict(unknown or {})
        names = [c.name for c in self.inputs]
        if len(set(names)) != len(names):
            raise InvalidInputError(f"the feature map names a column twice: {names}")
        coords = [n for c in self.inputs for n in c.coordinate_names()]
        if len(set(coords)) != len(coords):
            dup = sorted({n for n in coords if coords.count(n) > 1})
            raise InvalidInputError(f"released coordinate name(s) {dup} occur twice (a feature named "
                                    "like a column=category pair); rename the column")
        self.coordinates = tuple(coords)
        starts = np.cumsum([0] + [c.width for c in self.inputs])
        self.slices = {c.name: (int(a), int(b)) for c, a, b in zip(self.inputs, starts[:-1], starts[1:],
                                                                   strict=True)}
        #: the released columns: the coordinates, except that a column released by randomized
        #: response is one column (its name) holding the randomized category's index
        self.released_columns = tuple(n for c in self.inputs
                                      for n in ([c.name] if c.is_rr else c.coordinate_names()))
        rstarts = np.cumsum([0] + [c.released_width for c in self.inputs])
        self.released_slices = {c.name: (int(a), int(b)) for c, a, b in
                                zip(self.inputs, rstarts[:-1], rstarts[1:], strict=True)}

    @classmethod
    def build(cls, features: Sequence[str], ranges: Mapping, categories: Mapping[str, tuple],
              public: Iterable[str] = (), unknown: Mapping[str, object] | None = None,
              rr: Iterable[str] = ()) -> FeatureMap:
        public, rr = set(public), set(rr)
        cols = []
        for f in features:
            if f in categories:
                cols.append(InputColumn(f, CATEGORICAL, None, tuple(categories[f]), f in public,
                                        RR if f in rr else ONEHOT))
            else:
                r = ranges.get(f)
                cols.append(InputColumn(f, NUMERIC, None if r is None else (float(r[0]), float(r[1])),
                                        None, f in public))
        return cls(cols, unknown)

    # --- what it is --------------------------------------------------------------------------
    @property
    def categorical(self) -> tuple[InputColumn, ...]:
        return tuple(c for c in self.inputs if c.kind == CATEGORICAL)

    @property
    def has_categorical(self) -> bool:
        return any(c.kind == CATEGORICAL for c in self.inputs)

    def private_blocks(self) -> int:
        """m: the private categorical columns noised as one-hot blocks (each of norm 1)."""
        return sum(1 for c in self.inputs if c.kind == CATEGORICAL and not c.public and not c.is_rr)

    @property
    def rr_columns(self) -> tuple[InputColumn, ...]:
        """The private categorical columns released by k-ary randomized response."""
        return tuple(c for c in self.inputs if c.is_rr and not c.public)

    def private_numeric(self) -> int:
        return sum(1 for c in self.inputs if c.kind == NUMERIC and not c.public)

    def public_coordinates(self) -> list[str]:
        return [n for c in self.inputs if c.public for n in c.coordinate_names()]

    def vector_bound(self, bound: float | None) -> float:
        """The L2 bound of a released clean vector: the private numeric part clipped to ``bound``
        (none: 0), each one-hot block (private or public) norm exactly 1, each public numeric
        coordinate at most 1."""
        b2 = 0.0 if bound is None or self.private_numeric() == 0 else float(bound) ** 2
        return math.sqrt(b2 + sum(1 for c in self.inputs if c.kind == CATEGORICAL or c.public))

    def groups(self) -> list[tuple[str, list[str]]]:
        """(input column, its coordinate names), in order: the readable per-feature view."""
        return [(c.name, c.coordinate_names()) for c in self.inputs]

    # --- metadata ------------------------------------------------------------------------------
    def to_metadata(self) -> dict:
        cols = []
        for c in self.inputs:
            d: dict = {"name": c.name, "kind": c.kind, "public": bool(c.public)}
            if c.kind == NUMERIC:
                d["range"] = None if c.range is None else list(c.range)
            else:
                d["categories"] = list(c.categories or ())
                if c.is_rr:
                    d["mechanism"] = RR
                if c.name in self.unknown:
                    d["unknown_category"] = self.unknown[c.name]
            cols.append(d)
        return {"version": 1, "inputs": cols, "coordinates": list(self.coordinates)}

    @classmethod
    def from_metadata(cls, meta) -> FeatureMap:
        if isinstance(meta, (str, bytes)):
            meta = json.loads(meta)
        try:
            cols, unknown = [], {}
            for d in meta["inputs"]:
                if d["kind"] == NUMERIC:
                    r = d.get("range")
                    cols.append(InputColumn(str(d["name"]), NUMERIC,
                                            None if r is None else (float(r[0]), float(r[1])), None,
                                            bool(d.get("public", False))))
                elif d["kind"] == CATEGORICAL:
                    cats = check_categories({d["name"]: d["categories"]})[d["name"]]
                    mech = d.get("mechanism", ONEHOT)
                    if mech not in (ONEHOT, RR):
                        raise ValueError(f"unknown mechanism {mech!r}")
                    cols.append(InputColumn(str(d["name"]), CATEGORICAL, None, cats,
                                            bool(d.get("public", False)), mech))
                    if d.get("unknown_category") is not None:
                        unknown[str(d["name"])] = d["unknown_category"]
                else:
                    raise ValueError(f"unknown kind {d['kind']!r}")
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            from ..exceptions import ReleaseSpecError
            raise ReleaseSpecError(f"the feature map in the metadata is invalid ({exc!r}); the file "
                                   "was edited or is corrupt") from None
        fm = cls(cols, unknown)
        if "coordinates" in meta and list(meta["coordinates"]) != list(fm.coordinates):
            from ..exceptions import ReleaseSpecError
            raise ReleaseSpecError("the feature map's coordinates do not match its inputs; the file "
                                   "was edited or is corrupt")
        return fm

    # --- mapping values ---------------------------------------------------------------------------
    def codes(self, name: str, arr, describe=None, on_invalid: str = "error"):
        """(index of each value of the categorical column ``name`` in its categories, int16; mask
        of rows that are invalid (null) or None).  Unknown values go to the catch-all, or raise
        naming column, value and row (``describe(row)`` says where the row is)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        col = next(c for c in self.inputs if c.name == name)
        cats = col.categories or ()
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        elif not isinstance(arr, pa.Array):
            arr = pa.array(np.asarray(arr) if not isinstance(arr, list) else arr)
        if pa.types.is_dictionary(arr.type):
            arr = arr.cast(arr.type.value_type)
        t = arr.type
        floats = pa.types.is_floating(t)
        ints = isinstance(cats[0], int)
        values: list
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            values = [str(v) for v in cats]
        elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
            values = list(cats) if ints else _integer_codes(name, t, cats)
            if floats:
                # NaN is a missing value (null), as in a numeric column: an error naming the
                # row, or dropped with on_invalid="drop"; inf too
                arr = pc.if_else(pc.is_finite(arr), arr, pa.scalar(None, arr.type))
            if floats or pa.types.is_boolean(t):
                t = pa.int64()
                try:
                    arr = arr.cast(t)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise InvalidInputError(
                        f"column {name!r} has non-integer values ({arr.type}): a categorical column "
                        "holds strings or integer codes") from None
        else:
            raise InvalidInputError(
                f"column {name!r} has type {t}; a categorical column holds strings "
                "(string/large_string), a pandas category (dictionary) or integer codes")
        # a declared code outside the column's integer type (300 in int8) cannot occur in it: it
        # stays a (public) category whose coordinate is always 0, as a declared category absent
        # from the data does
        fits = list(range(len(values))) if not pa.types.is_integer(t) else \
            [i for i, v in enumerate(values) if _fits(int(v), t)]
        value_set = pa.array([values[i] for i in fits]).cast(t)
        index = pc.index_in(arr, value_set=value_set)
        codes = index.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int16)
        if len(fits) != len(values):
            codes = np.asarray(fits or [0], dtype=np.int16)[codes]
        if not index.null_count:
            return codes, None
        null = np.asarray(arr.is_null(), dtype=bool) if arr.null_count else None
        unknown = np.asarray(index.is_null(), dtype=bool)
        if null is not None:
            unknown &= ~null
        if unknown.any():
            if name in self.unknown:
                codes[unknown] = cats.index(self.unknown[name])
            else:
                row = int(np.argmax(unknown))
                where = describe(row) if describe is not None else f"row {row}"
                shown = ", ".join(map(repr, cats[:8])) + (" ..." if len(cats) > 8 else "")
                catch_all = ("a catch-all code (unknown_category=CODE; CLI: --unknown-category "
                             "CODE, an integer: a catch-all name leaves integer codes strict)"
                             if pa.types.is_integer(t) else "a catch-all category "
                             "(unknown_category=NAME; CLI: --unknown-category NAME)")
                raise InvalidInputError(
                    f"column {name!r} has {arr[row].as_py()!r} at {where}, which is not one of its "
                    f"declared categories ({shown}); declare it (categories=...; CLI: --categories), "
                    f"or send unknown values to {catch_all}")
        if null is not None and null.any():
            if on_invalid == "error":
                row = int(np.argmax(null))
                where = describe(row) if describe is not None else f"row {row}"
                missing = "null or NaN" if floats else "null"
                raise InvalidInputError(
                    f"column {name!r} has a missing value ({missing}) at {where}; fill it with a "
                    "declared category, or drop such rows with on_invalid='drop' (CLI: --on-invalid "
                    "drop)")
            return codes, null
        return codes, None

    def one_hot_into(self, codes: np.ndarray, out: np.ndarray) -> None:
        """Write the one-hot rows of ``codes`` into ``out`` (k, n): 1 at the code's row, else 0."""
        out[...] = 0
        n = codes.shape[0]
        if n:
            out[codes.astype(np.intp), np.arange(n)] = 1

    def with_clip_norm(self, norm: str) -> FeatureMap:
        """This map, its ``transform`` clipping the private numeric part in ``norm`` (the
        release's: ``scaling.clip_norm_of(spec)``; "L1" for a discrete Laplace release)."""
        import copy

        if norm == self.clip_norm:
            return self
        other = copy.copy(self)
        other.clip_norm = norm
        return other

    #: the norm ``transform`` clips in (``with_clip_norm``); a map read from metadata says L2
    clip_norm = "L2"

    def transform(self, table, bound: float | None, describe=None) -> list[np.ndarray]:
        """The released clean coordinates of a raw table (anything with named columns: a pyarrow
        Table/RecordBatch, pandas or polars frame), float64, in coordinate order: numeric columns
        scaled by their ranges (clipped to them), the private numeric part clipped to the ball of
        ``bound`` in ``clip_norm`` (the release's own ``scaling.clip_vectors_``; a randomized-
        response column's categories one-hot, like the others), categorical columns one-hot.
        What the model reads its raw data through; what the release writes before its noise."""
        import pyarrow as pa

        if not isinstance(table, (pa.Table, pa.RecordBatch)):
            table = _to_arrow(table)
        names = set(table.schema.names)
        missing = [c.name for c in self.inputs if c.name not in names]
        if missing:
            raise InvalidInputError(
                f"the data lacks the model's input column(s) {missing} (its columns: "
                f"{sorted(names)}); the model maps the raw columns {[c.name for c in self.inputs]}")
        n = table.num_rows
        out: list[np.ndarray] = []
        private_numeric: list[int] = []
        for c in self.inputs:
            arr = table.column(c.name)
            if c.kind == NUMERIC:
                v = self._numeric_values(c, arr, describe)
                if c.range is not None:
                    scaled = np.empty(n)
                    RangeScaler([c.name], {c.name: c.range}).scale_into(0, v, scaled)
                    v = scaled
                if not c.public:
                    private_numeric.append(len(out))
                out.append(v)
            else:
                codes, _ = self.codes(c.name, arr, describe)
                block = np.zeros((c.width, n))
                self.one_hot_into(codes, block)
                out.extend(block)
        if private_numeric and bound is not None and n:
            block = np.array([out[j] for j in private_numeric])
            if clip_vectors_(block, float(bound), self.clip_norm, coords_in_unit=True):
                for row, j in enumerate(private_numeric):
                    out[j] = block[row]
        return out

    @staticmethod
    def _numeric_values(c: InputColumn, arr, describe) -> np.ndarray:
        import pyarrow as pa

        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if arr.null_count:
            row = int(np.argmax(np.asarray(arr.is_null())))
            raise InvalidInputError(f"column {c.name!r} has a missing value (null) at "
                                    f"{describe(row) if describe else f'row {row}'}")
        try:
            return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64)
        except (ValueError, TypeError):
            raise InvalidInputError(f"column {c.name!r} has type {arr.type}; the model reads "
                                    "it as a numeric feature") from None


def _integer_codes(name: str, t, cats) -> list[int]:
    """The declared categories (strings, as the CLI gives them) of the integer-code column
    ``name`` as codes: each must be an integer, and no two the same code ("1" and "01")."""
    codes: dict[int, str] = {}
    for v in cats:
        try:
            code = int(v)
        except ValueError:
            raise InvalidInputError(
                f"column {name!r} has type {t} but its declared categories are not integer "
                f"codes ({list(cats)[:6]}); declare the codes, or give the column's strings"
            ) from None
        if code in codes:
            raise InvalidInputError(
                f"column {name!r} holds integer codes ({t}) and its declared categories "
                f"{codes[code]!r} and {v!r} are the same code {code}; declare each code once")
        codes[code] = v
    return list(codes)


def _fits(value: int, t) -> bool:
    """Whether the integer ``value`` is representable in the Arrow integer type ``t``."""
    info = np.iinfo(t.to_pandas_dtype())
    return int(info.min) <= value <= int(info.max)


def _to_arrow(obj):
    import pyarrow as pa

    mod = type(obj).__module__
    if mod.startswith("pandas"):
        return pa.Table.from_pandas(obj, preserve_index=False)
    if mod.startswith("polars"):
        return obj.to_arrow()
    if isinstance(obj, Mapping):
        return pa.table({k: (v if isinstance(v, (pa.Array, pa.ChunkedArray)) else pa.array(v))
                         for k, v in obj.items()})
    raise InvalidInputError(f"a model with categorical columns reads a table with named columns "
                            f"(pandas/polars DataFrame, pyarrow Table, a file), not a "
                            f"{type(obj).__name__}")


def categories_from_source(source, columns: Sequence[str]) -> dict[str, tuple]:
    """The distinct values of ``columns`` in ``source`` (anything ``open_source`` reads), sorted,
    with a ``PrivacyLeakWarning``: which values occur is read from the private data (CLI
    ``--categories-from-data``).  Declare the categories instead for a real release."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..io.sources import open_source

    src = open_source(source)
    seen: dict[str, set] = {c: set() for c in columns}
    for batch in src.batches(columns=list(columns)):
        for c in columns:
            arr = batch.column(c)
            if pa.types.is_dictionary(arr.type):
                arr = arr.cast(arr.type.value_type)
            seen[c].update(v for v in pc.unique(arr).to_pylist() if v is not None)
    for c, vals in seen.items():
        if not vals:
            raise InvalidInputError(f"column {c!r} has no value to read categories from")
    return categories_from_data(seen)
