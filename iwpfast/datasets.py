"""Datasets for examples, tests and the paper's experiments (NumPy only; no scikit-learn needed).

* :func:`make_classification` -- scikit-learn's ``make_classification`` algorithm (Gaussian clusters
  on the vertices of a hypercube, random covariance per cluster, label flips, shuffling) rewritten on
  ``numpy.random.Generator``, followed by the paper's preprocessing: every feature min-max scaled to
  [-1, 1] and labels in {-1, +1}.
* :func:`load_acs` -- the shipped ACS 2024 person data (Florida, New York, Pennsylvania), with the
  paper's feature sets and *declared* public ranges (:data:`ACS_FEATURE_RANGES`), never ranges read
  from the data: a range computed from private data would leak it.
* :func:`scale_to_unit` -- clip raw columns to declared ranges and map them affinely onto [-1, 1]
  (the release's :class:`~iwpfast.privacy.RangeScaler` on arrays).

Example::

    >>> from iwpfast.datasets import make_classification, load_acs, scale_to_unit
    >>> X, y = make_classification(1000, n_features=2, random_state=0)
    >>> X.shape, float(X.min()), float(X.max()), sorted(set(y.tolist()))
    ((1000, 2), -1.0, 1.0, [-1.0, 1.0])
    >>> acs = load_acs("income")
    >>> acs.features
    ('AGEP', 'SEX', 'SCHL', 'WKHP')
    >>> Xs = scale_to_unit(acs.X, acs.ranges_array)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources

import numpy as np

from .exceptions import InvalidInputError

__all__ = [
    "make_classification",
    "load_acs",
    "scale_to_unit",
    "ACSData",
    "ACS_FEATURES",
    "ACS_FEATURE_RANGES",
    "ACS_TARGET_RANGES",
]

# --------------------------------------------------------------------------------------------------
# Synthetic data
# --------------------------------------------------------------------------------------------------


def _hypercube_vertices(n_vertices: int, dimensions: int, rng: np.random.Generator) -> np.ndarray:
    """``n_vertices`` distinct vertices of {0, 1}^dimensions, drawn without replacement.

    scikit-learn's ``_generate_hypercube`` does the same with ``sample_without_replacement`` on the
    integers [0, 2^d) and unpacks their bits.
    """
    if dimensions > 62:
        raise InvalidInputError(
            f"n_informative={dimensions} is too large for the hypercube construction; use at most 62"
        )
    codes = rng.choice(2**dimensions, size=n_vertices, replace=False)
    bits = (codes[:, None] >> np.arange(dimensions - 1, -1, -1)[None, :]) & 1
    return bits.astype(np.float64)


def make_classification(
    n_samples: int = 100,
    n_features: int = 2,
    *,
    n_informative: int = 2,
    n_redundant: int = 0,
    n_clusters_per_class: int = 2,
    class_sep: float = 1.0,
    flip_y: float = 0.01,
    shuffle: bool = True,
    scale: bool = True,
    random_state: int | np.random.Generator | None = None,
    structure_random_state: int | np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Binary classification data following scikit-learn's ``make_classification``.

    The algorithm (two classes, equal weights, ``hypercube=True``, no repeated features):
    ``2 * n_clusters_per_class`` cluster centres are distinct vertices of the hypercube of side
    ``2 * class_sep`` in the ``n_informative`` first dimensions; each cluster's points are standard
    normal, multiplied by a random matrix ``A`` with entries in [-1, 1) (random covariance) and shifted
    to the centre; clusters alternate between the classes. Redundant features are random linear
    combinations of the informative ones, the rest are standard normal noise. A fraction ``flip_y``
    of labels is replaced by a uniformly random class. Features get a random shift and scale, then
    rows and features are shuffled. The random stream is NumPy's ``Generator``, so draws differ from
    scikit-learn's ``RandomState`` ones for the same seed; the distribution is the same.

    With ``scale=True`` (the paper's preprocessing) each feature is then min-max scaled to [-1, 1]
    over the generated rows, which also removes the random shift and scale. (Min-max from the data is
    fine for a simulation; on private data use declared ranges, see :func:`scale_to_unit`.)

    ``structure_random_state`` (not in scikit-learn) separates the *distribution* from the *sample*:
    when given, the cluster centres, covariance factors, redundant mixing, shift, scale and feature
    order are drawn from it, and only the rows, label flips and row order from ``random_state``. So
    draws with one structure seed and several sample seeds are fresh samples of one distribution
    (what repeated experiments need); with ``None`` everything comes from ``random_state``.

    Returns ``X`` (n_samples, n_features) float64 and ``y`` (n_samples,) float64 in {-1, +1}.
    """
    n_samples = int(n_samples)
    if n_samples < 2:
        raise InvalidInputError(f"n_samples={n_samples}: need at least 2 rows")
    if n_informative < 1:
        raise InvalidInputError(f"n_informative={n_informative}: need at least 1 informative feature")
    if n_redundant < 0 or n_informative + n_redundant > n_features:
        raise InvalidInputError(
            f"n_informative ({n_informative}) + n_redundant ({n_redundant}) must be in "
            f"[1, n_features={n_features}]; raise n_features or lower the others"
        )
    n_classes = 2
    n_clusters = n_classes * int(n_clusters_per_class)
    if n_clusters > 2**n_informative:
        raise InvalidInputError(
            f"n_classes * n_clusters_per_class = {n_clusters} must be <= 2**n_informative = "
            f"{2**n_informative}; raise n_informative or lower n_clusters_per_class"
        )
    if not 0.0 <= flip_y <= 1.0:
        raise InvalidInputError(f"flip_y={flip_y} must be a probability in [0, 1]")
    rng = random_state if isinstance(random_state, np.random.Generator) \
        else np.random.default_rng(random_state)
    if structure_random_state is None:
        srng = rng
    elif isinstance(structure_random_state, np.random.Generator):
        srng = structure_random_state
    else:
        srng = np.random.default_rng(structure_random_state)

    # Equal class weights: samples split evenly over clusters, the remainder to the first ones.
    per_cluster = [n_samples // n_clusters] * n_clusters
    for i in range(n_samples - sum(per_cluster)):
        per_cluster[i % n_clusters] += 1

    X = np.zeros((n_samples, n_features))
    y = np.zeros(n_samples, dtype=np.int64)
    centroids = _hypercube_vertices(n_clusters, n_informative, srng)
    centroids *= 2.0 * class_sep
    centroids -= class_sep

    X[:, :n_informative] = rng.standard_normal(size=(n_samples, n_informative))
    stop = 0
    for k, centroid in enumerate(centroids):
        start, stop = stop, stop + per_cluster[k]
        y[start:stop] = k % n_classes
        block = X[start:stop, :n_informative]
        covariance_factor = 2.0 * srng.uniform(size=(n_informative, n_informative)) - 1.0
        block[...] = block @ covariance_factor
        block += centroid

    if n_redundant > 0:
        mixing = 2.0 * srng.uniform(size=(n_informative, n_redundant)) - 1.0
        X[:, n_informative:n_informative + n_redundant] = X[:, :n_informative] @ mixing
    n_useful = n_informative + n_redundant
    if n_features > n_useful:
        X[:, n_useful:] = rng.standard_normal(size=(n_samples, n_features - n_useful))

    if flip_y > 0.0:
        flip = rng.uniform(size=n_samples) < flip_y
        y[flip] = rng.integers(n_classes, size=int(flip.sum()))

    X += (2.0 * srng.uniform(size=n_features) - 1.0) * class_sep
    X *= 1.0 + 100.0 * srng.uniform(size=n_features)

    if shuffle:
        order = rng.permutation(n_samples)
        X, y = X[order], y[order]
        X = X[:, srng.permutation(n_features)]

    if scale:
        lo, hi = X.min(axis=0), X.max(axis=0)
        width = np.where(hi > lo, hi - lo, 1.0)
        X = 2.0 * (X - lo) / width - 1.0
    return np.ascontiguousarray(X), np.where(y == 1, 1.0, -1.0)


# --------------------------------------------------------------------------------------------------
# ACS 2024 (real data shipped with the package)
# --------------------------------------------------------------------------------------------------

ACS_FILES = {
    "income": "acs2024_income_FL_NY_PA.parquet",
    "pubcov": "acs2024_pubcov_FL_NY_PA.parquet",
}

#: The paper's feature sets (Sec. 5): AGEP, SEX, SCHL plus WKHP (income) or PINCP (public coverage).
ACS_FEATURES = {
    "income": ("AGEP", "SEX", "SCHL", "WKHP"),
    "pubcov": ("AGEP", "SEX", "SCHL", "PINCP"),
}

#: Declared public ranges (never computed from the data). Each is the natural domain of the
#: variable in the ACS PUMS codebook or the task's public definition:
#: AGEP age 0..99 (PUMS top-codes age at 99 or below); SEX code 1..2; SCHL attainment code 1..24;
#: WKHP usual hours per week 0..99 (PUMS caps it at 99); PINCP in the public-coverage task:
#: -20000..30000 dollars (PUMS floors losses at -19999; the task keeps PINCP <= 30000).
ACS_FEATURE_RANGES = {
    "income": {"AGEP": (0.0, 99.0), "SEX": (1.0, 2.0), "SCHL": (1.0, 24.0), "WKHP": (0.0, 99.0)},
    "pubcov": {"AGEP": (0.0, 99.0), "SEX": (1.0, 2.0), "SCHL": (1.0, 24.0),
               "PINCP": (-20000.0, 30000.0)},
}

#: Declared range of the continuous target of the regression variant (ACSIncome, target PINCP):
#: 0..200000 dollars; incomes above are clipped (about 5% of the rows; the 95th percentile of a
#: national income distribution is public knowledge, not read from these rows).
ACS_TARGET_RANGES = {"income": ("PINCP", (0.0, 200000.0))}


@dataclass(frozen=True)
class ACSData:
    """One ACS task: raw feature columns, ±1 labels, declared ranges, and the raw income.

    ``X``: (n, p) float64 raw values in the order of ``features``; ``y``: (n,) float64 in {-1, +1};
    ``ranges``: {feature: (lo, hi)} declared public ranges; ``ranges_array``: (p, 2) of the same;
    ``income``: (n,) raw PINCP (the regression variant's target); ``state``: (n,) FIPS codes.
    """

    task: str
    X: np.ndarray
    y: np.ndarray
    features: tuple[str, ...]
    ranges: dict[str, tuple[float, float]]
    income: np.ndarray
    state: np.ndarray = field(repr=False)

    @property
    def ranges_array(self) -> np.ndarray:
        return np.array([self.ranges[f] for f in self.features], dtype=np.float64)

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])


def acs_path(task: str):
    """Traversable of the shipped Parquet file of ``task`` ("income" or "pubcov")."""
    if task not in ACS_FILES:
        raise InvalidInputError(
            f"task={task!r} is not an ACS task; use one of {sorted(ACS_FILES)}"
        )
    return resources.files("iwpfast") / "data" / ACS_FILES[task]


def load_acs(task: str = "income") -> ACSData:
    """Load the shipped ACS 2024 task ``"income"`` (ACSIncome) or ``"pubcov"`` (ACSPublicCoverage).

    Features are the paper's (see :data:`ACS_FEATURES`), raw and unscaled; labels are mapped from
    {0, 1} to {-1, +1}. Scale them with ``scale_to_unit(data.X, data.ranges_array)``.
    """
    import pyarrow.parquet as pq  # imported here: ``import iwpfast.datasets`` must stay light

    features = ACS_FEATURES.get(task)
    if features is None:
        raise InvalidInputError(f"task={task!r} is not an ACS task; use one of {sorted(ACS_FILES)}")
    with resources.as_file(acs_path(task)) as path:
        table = pq.read_table(path)
    columns = {name: table.column(name).to_numpy() for name in (*features, "PINCP", "y", "ST")}
    X = np.column_stack([columns[f].astype(np.float64) for f in features])
    y = np.where(columns["y"] == 1, 1.0, -1.0)
    return ACSData(
        task=task,
        X=X,
        y=y,
        features=tuple(features),
        ranges=dict(ACS_FEATURE_RANGES[task]),
        income=columns["PINCP"].astype(np.float64),
        state=np.asarray(columns["ST"]),
    )


def scale_to_unit(X: np.ndarray, ranges) -> np.ndarray:
    """Map raw columns onto [-1, 1] from declared ranges, clipping values outside a range to it.

    ``X`` is (n, p) or (n,); ``ranges`` is (p, 2) (or one (lo, hi) pair for a 1-D ``X``). The map
    is the release's own (:class:`iwpfast.privacy.RangeScaler`), so clean data scaled here lines up
    with a released file to the last bit; the result is float64 and bounded whatever the raw data
    holds -- the release's norm bound depends on it.
    """
    from .privacy import RangeScaler, parse_ranges

    X = np.asarray(X, dtype=np.float64)
    ranges = np.asarray(ranges, dtype=np.float64)
    one_d = X.ndim == 1
    X2 = X[:, None] if one_d else X
    ranges = ranges.reshape(-1, 2)
    if ranges.shape[0] != X2.shape[1]:
        raise InvalidInputError(
            f"ranges has {ranges.shape[0]} (lo, hi) pairs but X has {X2.shape[1]} columns; "
            "give one declared range per column"
        )
    names = [f"column {j}" for j in range(X2.shape[1])]
    scaler = RangeScaler(names, parse_ranges(dict(zip(names, ranges.tolist(), strict=True))))
    out = np.empty_like(X2)
    for j in range(X2.shape[1]):  # one vectorized pass per column
        scaler.scale_into(j, X2[:, j], out[:, j])
    return out[:, 0] if one_d else out
