"""``ReleaseSpec``: every public parameter of a release, its guarantee and its metadata form.

The spec is what the learner needs to debias (sigma per feature, label keep probability...) and
what a reader needs to know what was promised.  It is written as JSON into the schema metadata of
the released file under the key ``iwpfast.release`` (layout in docs/internals.md).  The seed is
deliberately not part of the spec.
"""
from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import ClassVar

from .._version import __version__
from ..exceptions import InvalidInputError, ReleaseSpecError
from ..io.formats import RELEASE_METADATA_KEY
from ..label_noise import check_classes
from ..noise_registry import law_record, mechanism_choices
from .calibration import check_delta
from .feature_map import FeatureMap, check_categories, check_unknown, with_catch_all
from .laplace import LaplaceFeatureMechanism
from .mechanisms import (
    GaussianFeatureMechanism,
    GaussianTargetMechanism,
    KaryRandomizedResponse,
    RandomizedResponse,
    check_noise,
)
from .metadata_check import check_against_parameters
from .metadata_fields import (
    FEATURE_DTYPES,
    TASKS,
    check_metadata_fields,
    noise_from_law,
)
from .rr_columns import (
    build_rr_mechanisms,
    check_numeric_part,
    rr_from_metadata,
    rr_metadata,
)
from .scaling import check_range, parse_ranges
from .spec_text import Guarantee, describe_spec, guarantee_metadata, spec_guarantee

# the schema metadata key (defined with the file formats, where the reader finds it) is also the
# "format" field's value inside the JSON
METADATA_KEY = RELEASE_METADATA_KEY
FORMAT_NAME = RELEASE_METADATA_KEY
FORMAT_VERSION = 1
#: the version of releases with public columns (``public_features``, ``feature_noise_variance``)
PUBLIC_FORMAT_VERSION = 2
#: the version of releases with categorical columns (``feature_map``: one-hot coordinates)
CATEGORICAL_FORMAT_VERSION = 3
#: the version of releases with categorical columns released by k-ary randomized response (one
#: integer code per column: a reader that does not know them would read the codes as numbers)
RR_FORMAT_VERSION = 4
READ_VERSIONS = (FORMAT_VERSION, PUBLIC_FORMAT_VERSION, CATEGORICAL_FORMAT_VERSION,
                 RR_FORMAT_VERSION)


@dataclass(frozen=True)
class ReleaseSpec:
    """Public parameters of a local-DP release (frozen; validated at construction).

    Each record's features are scaled into [-1, 1] per coordinate from the declared ``ranges``,
    clipped to the L2 ball of radius ``bound`` and noised by a Gaussian-type mechanism calibrated
    for (``epsilon_x``, ``delta``) with sensitivity 2 * bound; the label goes through randomized
    response (``epsilon_y``).  Guarantee per record: (epsilon_x + epsilon_y, delta)-LDP
    (regression: (epsilon_x + epsilon_y, delta + delta_y)); ``guarantee()`` states it.  Stored
    in the release's schema metadata (``to_metadata``), never with a seed.  An illegal value
    raises ``InvalidInputError`` naming it and the fix.

    Parameters
    ----------
    epsilon_x : float > 0
        Privacy budget of the feature vector.
    delta : float in (0, 1)
        The feature mechanism's delta (much smaller than 1 / number of records, e.g. 1e-5).
    bound : float > 0
        L2 bound B of the scaled feature vector (clipped to it).
    epsilon_y : float > 0 or None, default None
        Randomized response on the label (classification) or the Gaussian mechanism on the
        target (regression); None: the label is released without noise (public labels).
    features : sequence of str or None, default None
        Feature columns, in order (None: given later, e.g. to ``release(..., features=...)``).
    ranges : dict {name: (lo, hi)} or str "A=0:99,B=1:24", default {}
        Declared public ranges (lo < hi), never read from the data unless ``ranges_from_data``.
    label : str or None, default None
        Label / target column (None: features only).
    task : {"classification", "regression"}, default "classification"
        Classification labels are written as int8 in {-1, +1} (or class indices with ``classes``).
    calibration : {"analytic", "classic"}, default "analytic"
        Analytic Gaussian mechanism (Balle & Wang 2018), or the paper's formula (proven for
        epsilon < 1; refused where it misses delta).
    feature_dtype : {"float32", "float64"}, default "float32"
        dtype of the released features.
    ranges_from_data : bool, default False
        Compute missing ranges from the data at release time: leaks privacy
        (``PrivacyLeakWarning``).
    target_range : (lo, hi) or None, default None
        Regression only: the target's declared range (scaled into [-1, 1]).
    target_bound : float > 0, default 1.0
        Regression only: the scaled target is clipped to [-target_bound, target_bound].
    delta_y : float in (0, 1) or None, default None
        Regression only: the target mechanism's delta (None: ``delta``).
    classes : sequence of >= 2 distinct numbers or strings, or None, default None
        The label's public classes, in the order defining the class indices 0..k-1.  k >= 3:
        k-ary randomized response, written as the class index; k = 2: the binary mechanism
        (classes[0] -> -1, classes[1] -> +1).  None: binary labels {0, 1} / {-1, +1} / bool.
    noise : {"discrete", "float"}, default "discrete"
        "discrete": values snapped to a power-of-two grid plus exact discrete Gaussian noise
        from an AES-CTR keystream, a proven guarantee for the bits written (docs/release.md);
        "float": floating-point Gaussian noise (the paper's; its guarantee holds for real-valued
        noise only, the floating-point implementation leaks low-order bits).
    row_count : int or None
        Set by the release (rows written); not part of the spec's identity.
    seeded : bool
        Set by the release when its noise came from a user seed (simulations only); recorded as
        ``"seeded": true``, never the seed itself.
    mechanism : {"gaussian", "laplace"}, default "gaussian"
        "laplace": pure epsilon_x-LDP features (delta=0.0): ``bound`` is then an **L1** bound, the
        scaled vector is clipped to it, snapped to a power-of-two grid (clipped again in integers)
        and exact discrete Laplace noise is added from an AES-CTR keystream (docs/math.md "Pure
        epsilon").  Classification labels (randomized response) keep delta = 0; regression
        targets are not supported with it.
    categories : dict {column: [category, ...]}, default {}
        Categorical feature columns and their declared public categories (strings, or integer
        codes for an integer column), never read from the data.  Each is released as a one-hot
        block of coordinates named ``column=category`` (0/1, not scaled; no range needed).  The
        noise is calibrated for the structure: the private numeric part clipped to ``bound``
        and m private one-hot blocks have L2 sensitivity sqrt(4 bound^2 + 2 m) (Laplace: L1
        2 bound + 2 m); docs/release.md "Categorical columns".
    unknown_category : str, or dict {column: category}, default None
        Where a value outside a column's declared categories goes (added to the categories when
        not among them); None: such a value is an error naming column, value and row.
    categorical_mechanism : {"gaussian", "rr"}, default "gaussian"
        How the private categorical columns are released: "gaussian", their one-hot blocks
        noised with the numeric part (the structured sensitivity above); "rr", each column as
        ONE integer code (uint8 for k <= 256 categories, else uint16) by k-ary randomized
        response at its own ``epsilon_categorical`` (kept with q = e^eps/(e^eps + k - 1), each
        other category reported with r = 1/(e^eps + k - 1)), the numeric part by the feature
        mechanism at sensitivity 2 bound.  Learned with loss='exponential' (its exact inverse,
        docs/math.md "Categorical columns by randomized response").
    epsilon_categorical : float > 0, or dict {column: float > 0}, default None
        With ``categorical_mechanism="rr"``: each private categorical column's budget (one number
        for all of them, or one per column).  The record's budget composes: epsilon_x + the sum
        over the columns + epsilon_y (basic composition; ``guarantee()``).
    categories_from_data : sequence of str, default ()
        The categorical columns whose categories were read from the data (CLI
        ``--categories-from-data``): recorded and flagged like ``ranges_from_data``.

    Examples
    --------
    >>> from iwpfast.privacy import ReleaseSpec
    >>> spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
    ...                    features=["AGEP", "SEX"], ranges="AGEP=0:99,SEX=1:2", label="y")
    >>> spec.guarantee().epsilon, round(spec.label_keep_prob, 4)
    (2.0, 0.7311)
    """

    epsilon_x: float | None = None
    delta: float | None = None
    bound: float | None = None
    epsilon_y: float | None = None
    features: tuple[str, ...] | None = None
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    label: str | None = None
    task: str = "classification"
    calibration: str = "analytic"
    feature_dtype: str = "float32"
    ranges_from_data: bool = False
    target_range: tuple[float, float] | None = None
    target_bound: float = 1.0
    delta_y: float | None = None
    classes: tuple | None = None
    noise: str = "discrete"
    public_features: tuple[str, ...] = ()
    row_count: int | None = field(default=None, compare=False, repr=False)
    seeded: bool = field(default=False, compare=False, repr=False)
    mechanism: str = "gaussian"
    categories: Mapping[str, tuple] = field(default_factory=dict)
    unknown_category: object = None
    categorical_mechanism: str = "gaussian"
    epsilon_categorical: object = None
    categories_from_data: tuple[str, ...] = ()
    # built by __post_init__ (not dataclass fields: derived from the fields above); ClassVar only
    # tells the type checker what the instance attributes are
    _features_mech: ClassVar[GaussianFeatureMechanism | LaplaceFeatureMechanism | None]
    _label_mech: ClassVar[RandomizedResponse | KaryRandomizedResponse | GaussianTargetMechanism | None]
    _rr_mechs: ClassVar[dict[str, KaryRandomizedResponse]]

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "ranges", parse_ranges(self.ranges))
        categories = check_categories(self.categories)
        unknown = check_unknown(self.unknown_category, categories)
        set_(self, "categories", with_catch_all(categories, unknown))
        set_(self, "unknown_category", unknown or None)
        if self.features is not None:
            features = (self.features,) if isinstance(self.features, str) else tuple(self.features)
            set_(self, "features", tuple(str(f) for f in features))
            if len(set(self.features)) != len(self.features):
                raise InvalidInputError(f"features list names a column twice: {list(self.features)}")
            if not self.features:
                raise InvalidInputError("features is empty; name at least one feature column")
        if self.task not in TASKS:
            raise InvalidInputError(f"task must be one of {TASKS}, got {self.task!r}")
        if self.feature_dtype not in FEATURE_DTYPES:
            raise InvalidInputError(
                f"feature_dtype must be one of {FEATURE_DTYPES}, got {self.feature_dtype!r}"
            )
        check_noise(self.noise)
        if self.mechanism not in mechanism_choices():
            raise InvalidInputError(f"mechanism must be one of {mechanism_choices()}, got "
                                    f"{self.mechanism!r}; 'laplace' releases pure-epsilon features "
                                    "(delta=0.0)")
        self._check_public_features()
        self._check_categorical()
        # Building the mechanisms validates epsilon/delta/bound/calibration with errors naming the fix.
        # The discrete law depends on the number of noised features (snapping): 1 until features
        # are named.  Public columns are never noised: the mechanism covers the private ones.
        feature_mech: GaussianFeatureMechanism | LaplaceFeatureMechanism | None = None
        if self.epsilon_x is not None and self.mechanism == "laplace":
            self._check_laplace()
            blocks, _ = self._onehot_structure()
            l1_bound = self.bound
            if blocks:
                from .calibration import check_bound
                bound = check_bound(self.bound, "bound")
                set_(self, "bound", bound)
                # one-hot blocks (L1 norm 1 each, 2 apart) after the numeric part clipped to the
                # L1 ball of bound: the L1 sensitivity is 2 bound + 2 m, the generic one at
                # bound + m
                l1_bound = bound + blocks if self._private_numeric() else blocks
            feature_mech = LaplaceFeatureMechanism(self.epsilon_x, l1_bound,
                                                   dims=self._private_dims() or 1,
                                                   dtype=self.feature_dtype)
            set_(self, "epsilon_x", feature_mech.epsilon)
            if not blocks:
                set_(self, "bound", feature_mech.bound)
        elif self.epsilon_x is not None:
            if self.delta is None or self.bound is None:
                raise InvalidInputError(
                    "the feature mechanism needs delta and bound with epsilon_x (e.g. delta=1e-5, "
                    "bound=1; CLI: --delta, --bound)")
            check_numeric_part(self._rr_mechs, self.features, self._private_numeric())
            blocks, onehot_coords = self._onehot_structure()
            feature_mech = GaussianFeatureMechanism(
                self.epsilon_x, self.delta, self.bound, self.calibration, noise=self.noise,
                dims=self._private_dims() or 1, dtype=self.feature_dtype,
                onehot_blocks=blocks, onehot_coords=onehot_coords)
            set_(self, "epsilon_x", feature_mech.epsilon)
            set_(self, "delta", feature_mech.delta)
            set_(self, "bound", feature_mech.bound)
        else:
            from .mechanisms import _check_calibration
            _check_calibration(self.calibration)
        set_(self, "_features_mech", feature_mech)
        label_mech: KaryRandomizedResponse | RandomizedResponse | GaussianTargetMechanism | None = None
        if self.classes is not None:
            set_(self, "classes", check_classes(self.classes))
            if self.task != "classification":
                raise InvalidInputError("classes are for task='classification'; drop them for a "
                                        "regression target")
        if self.task == "classification":
            if self.target_range is not None or self.delta_y is not None:
                raise InvalidInputError(
                    "target_range/delta_y are for task='regression'; drop them for classification"
                )
            if self.epsilon_y is not None:
                if self.classes is not None and len(self.classes) > 2:
                    label_mech = KaryRandomizedResponse(self.epsilon_y, len(self.classes))
                else:
                    label_mech = RandomizedResponse(self.epsilon_y)
        else:
            if self.target_range is not None:
                set_(self, "target_range", check_range(self.label or "target", self.target_range))
            elif not self.ranges_from_data and self.label is not None:
                raise InvalidInputError(
                    f"regression needs the declared public range of the target {self.label!r}; "
                    f"give target_range=(lo, hi) (CLI: --target-range LO:HI)"
                )
            if self.epsilon_y is not None:
                if self.delta_y is None and self.delta is None:
                    raise InvalidInputError(
                        "the target's Gaussian mechanism needs a delta: give delta_y (e.g. "
                        "delta_y=1e-5; CLI: --delta-y, default 1e-5)")
                delta_y = self.delta if self.delta_y is None else check_delta(self.delta_y, "delta_y")
                set_(self, "delta_y", delta_y)
                label_mech = GaussianTargetMechanism(self.epsilon_y, delta_y, self.target_bound,
                                                     self.calibration, noise=self.noise,
                                                     dtype=self.feature_dtype)
            elif self.delta_y is not None:
                raise InvalidInputError("delta_y without epsilon_y: give epsilon_y, or drop delta_y")
        set_(self, "_label_mech", label_mech)
        if label_mech is not None:
            set_(self, "epsilon_y", label_mech.epsilon)
        self._check_something_private()
        if self.features is not None and not self.ranges_from_data:
            self.scaler_ranges()  # raises naming the missing ranges
        elif self.public_features and not self.ranges_from_data:
            missing = [f for f in self.public_features
                       if f not in self.ranges and f not in self.categories]
            if missing:
                raise InvalidInputError(
                    f"no declared range for public feature(s) {', '.join(missing)}: public columns "
                    "are scaled by their declared ranges and clipped to them; give e.g. "
                    + ",".join(f"{n}=LO:HI" for n in missing) + " (CLI: --ranges)")

    def _check_categorical(self) -> None:
        """The categorical columns among the features, without a range; ``categorical_mechanism``
        and ``epsilon_categorical`` checked; with "rr" the budgets normalized to {column: epsilon}
        and the mechanisms built (``rr_columns``)."""
        if self.features is not None:
            stray = [c for c in self.categories if c not in self.features]
            if stray:
                raise InvalidInputError(
                    f"categories are declared for column(s) {', '.join(stray)}, which are not among "
                    f"the features {list(self.features)}; add them to the features (CLI: --features)")
            both = [c for c in self.categories if c in self.ranges]
            if both:
                raise InvalidInputError(
                    f"column(s) {', '.join(both)} have both a range and categories; a categorical "
                    "column is one-hot (no range): drop its range")
        # which values occur is raw data: the columns so read are named in the release
        named = self.categories_from_data
        from_data = tuple(dict.fromkeys(map(str, (named,) if isinstance(named, str) else named)))
        unknown = [c for c in from_data if c not in self.categories]
        if unknown:
            raise InvalidInputError(
                f"categories_from_data names {', '.join(unknown)}, which has no categories; give "
                "the categories read from the data in categories={...} too")
        object.__setattr__(self, "categories_from_data", from_data)
        rr, budgets = build_rr_mechanisms(self.categorical_mechanism, self.epsilon_categorical,
                                          self.categories, self.public_features)
        if rr:
            object.__setattr__(self, "epsilon_categorical", budgets)
        object.__setattr__(self, "_rr_mechs", rr)

    @property
    def rr_mechanisms(self) -> dict:
        """{private categorical column: its KaryRandomizedResponse} (categorical_mechanism='rr');
        empty otherwise."""
        return dict(self._rr_mechs)

    def _is_rr(self, f: str) -> bool:
        return f in self._rr_mechs

    def _check_laplace(self) -> None:
        if isinstance(self.delta, bool) or not isinstance(self.delta, (int, float)) or self.delta != 0:
            raise InvalidInputError(
                f"mechanism='laplace' is pure epsilon: pass delta=0.0 (got delta={self.delta!r}); "
                "for (epsilon, delta) use mechanism='gaussian'")
        if self.bound is None:
            raise InvalidInputError("mechanism='laplace' needs bound (the L1 bound of the scaled "
                                    "feature vector; CLI: --bound)")
        if self.noise != "discrete":
            raise InvalidInputError("mechanism='laplace' adds exact discrete noise on a grid; drop "
                                    f"noise={self.noise!r} (noise='float' is for the Gaussian mechanism)")
        if self.task == "regression":
            raise InvalidInputError(
                "mechanism='laplace' releases classification data (features and randomized-response "
                "labels, delta = 0); a regression target's Gaussian mechanism needs delta > 0: use "
                "mechanism='gaussian' for regression")
        object.__setattr__(self, "delta", 0.0)

    def _check_public_features(self) -> None:
        public = self.public_features
        if isinstance(public, str):
            public = tuple(f.strip() for f in public.split(",") if f.strip())
        public = tuple(str(f) for f in (public or ()))
        object.__setattr__(self, "public_features", public)
        if len(set(public)) != len(public):
            raise InvalidInputError(f"public_features names a column twice: {list(public)}")
        if self.features is not None:
            unknown = [f for f in public if f not in self.features]
            if unknown:
                raise InvalidInputError(
                    f"public feature(s) {', '.join(unknown)} are not among the features "
                    f"{list(self.features)}: public columns are a subset of the features (CLI: "
                    "--public P... with P among --features)")
            # in the features' order, the order they are released in
            object.__setattr__(self, "public_features",
                               tuple(f for f in self.features if f in public))

    def _check_something_private(self) -> None:
        """Every feature public needs no epsilon_x (a label-only release); a private feature
        needs one; and a release protects something (private features or a noised label)."""
        all_public = self.features is not None and bool(self.public_features) and \
            len(self.public_features) == len(self.features)
        if self.epsilon_x is None:
            if not self.public_features:
                raise InvalidInputError(
                    "epsilon_x is missing: give the features' budget (e.g. epsilon_x=1; CLI: "
                    "--epsilon-x), or declare every feature public (public_features=...; CLI: "
                    "--public) for a label-only release")
            if self.features is not None and not all_public:
                private = [f for f in self.features if f not in self.public_features]
                raise InvalidInputError(
                    f"feature(s) {', '.join(private)} are private (not in public_features) but no "
                    "epsilon_x is given: give epsilon_x (CLI: --epsilon-x), or declare them public")
            if self._label_mech is None:
                raise InvalidInputError(
                    "nothing private to release: every feature is public and the label is "
                    + ("released without noise" if self.label is not None else "absent")
                    + "; give epsilon_y (CLI: --epsilon-y) for a label-only release, or keep "
                    "some features private with epsilon_x")
        elif all_public:
            raise InvalidInputError(
                "every feature is public, so epsilon_x would protect nothing: drop epsilon_x "
                "(CLI: --epsilon-x) for a label-only release, or keep some features private")

    @property
    def private_features(self) -> tuple[str, ...]:
        """The noised features (``features`` less ``public_features``), in order."""
        return tuple(f for f in self.features or () if f not in self.public_features)

    @property
    def label_only(self) -> bool:
        """Every feature public: only the label is protected."""
        return self._features_mech is None

    # --- derived quantities -------------------------------------------------------------------
    @property
    def feature_names(self) -> tuple[str, ...]:
        """``features``, for a spec bound to its columns (ReleaseSpecError when none are named)."""
        if self.features is None:
            raise ReleaseSpecError("the release spec names no features; pass features=[...] "
                                   "(CLI: --features)")
        return self.features

    @property
    def class_values(self) -> tuple:
        """``classes``, for a spec declaring them (ReleaseSpecError otherwise)."""
        if self.classes is None:
            raise ReleaseSpecError("the release spec declares no classes (classes=[...])")
        return self.classes

    @property
    def feature_mechanism(self) -> GaussianFeatureMechanism | LaplaceFeatureMechanism | None:
        """The private features' mechanism; None for a label-only release."""
        return self._features_mech

    @property
    def label_mechanism(self):
        """RandomizedResponse, GaussianTargetMechanism, or None (public labels)."""
        return self._label_mech

    @property
    def sigma(self) -> float:
        """The private features' noise scale (0 for a label-only release)."""
        return 0.0 if self._features_mech is None else self._features_mech.sigma

    def feature_noise_variances(self) -> list[float]:
        """Per released column (``released_features``), in order: the exact noise variance (0 for
        a public column, and for a column's randomized-response code, which carries no additive
        noise: ``rr_mechanisms`` says its law)."""
        mech = self._features_mech
        return [0.0 if (mech is None or f in self.public_features or self._is_rr(f))
                else mech.variance
                for f in self.feature_names for _ in range(self._width(f))]

    def feature_noise_scales(self) -> list[float]:
        """Per released column: sigma (0 for a public column and a randomized-response code)."""
        return [0.0 if (f in self.public_features or self._is_rr(f)) else self.sigma
                for f in self.feature_names for _ in range(self._width(f))]

    @property
    def label_keep_prob(self) -> float | None:
        """Probability that the label is kept: S(eps_y) (binary) or q (k classes); None if public."""
        mech = self._label_mech
        if isinstance(mech, (RandomizedResponse, KaryRandomizedResponse)):
            return mech.keep_probability
        return None

    @property
    def label_other_prob(self) -> float | None:
        """Probability of reporting one given other class: 1 - S (binary) or r (k classes)."""
        mech = self._label_mech
        if isinstance(mech, KaryRandomizedResponse):
            return mech.other_probability
        return 1.0 - mech.keep_probability if isinstance(mech, RandomizedResponse) else None

    @property
    def n_classes(self) -> int | None:
        """k for a label declared with its classes; None otherwise."""
        return None if self.classes is None else len(self.classes)

    @property
    def label_encoding(self) -> str | None:
        """How the released label column is written: 'pm1' (binary, -1/+1), 'class_index'
        (k >= 3 classes: the index 0..k-1 in ``classes``), None (regression / no label)."""
        if self.label is None or self.task == "regression":
            return None
        return "class_index" if (self.classes is not None and len(self.classes) > 2) else "pm1"

    @property
    def target_noise_scale(self) -> float | None:
        mech = self._label_mech
        return mech.sigma if isinstance(mech, GaussianTargetMechanism) else None

    @property
    def target_noise_variance(self) -> float:
        """The exact variance of the regression target's noise (0.0 without target noise)."""
        mech = self._label_mech
        return mech.variance if isinstance(mech, GaussianTargetMechanism) else 0.0

    def feature_noise_record(self) -> dict:
        """The ``noise`` field: the feature mechanism's law, grid, sigma and exact variance; a
        label-only release has no feature noise, the law still names the labels' randomness."""
        mech = self._features_mech
        if mech is None:
            return {"law": law_record("gaussian", self.noise).law, "grid": None, "sigma": 0.0,
                    "variance": 0.0}
        return mech.noise_metadata()

    def scaler_ranges(self) -> dict[str, tuple[float, float]]:
        """The declared ranges of the numeric ``features`` (categorical ones have categories, no
        range), raising (with the fix) when some are missing."""
        missing = [f for f in self.numeric_features if f not in self.ranges]
        if missing:
            raise InvalidInputError(
                f"no declared range for feature(s) {', '.join(missing)}; give public ranges, e.g. "
                + ",".join(f"{n}=LO:HI" for n in missing)
                + " (CLI: --ranges), or opt in to ranges from the data (leaks privacy)"
            )
        return {f: self.ranges[f] for f in self.numeric_features}

    # --- categorical columns --------------------------------------------------------------------
    @property
    def numeric_features(self) -> tuple[str, ...]:
        """The features that are not categorical, in order."""
        return tuple(f for f in self.features or () if f not in self.categories)

    @property
    def has_categorical(self) -> bool:
        return any(f in self.categories for f in self.features or ())

    @cached_property
    def feature_map(self) -> FeatureMap:
        """Input columns -> released coordinates (``iwpfast.privacy.feature_map``): built once
        per spec (it depends on fields a spec never changes; a copy with other columns is a new
        spec and builds its own)."""
        return FeatureMap.build(self.feature_names, self.ranges, self.categories,
                                self.public_features, self._unknown(), rr=self._rr_mechs)

    def _unknown(self) -> dict:
        """``unknown_category`` as normalized at construction: {column: catch-all}."""
        unknown = self.unknown_category
        return dict(unknown) if isinstance(unknown, Mapping) else {}

    @property
    def released_features(self) -> tuple[str, ...]:
        """The released columns: ``features`` with each categorical column replaced by its one-hot
        coordinates ``column=category`` (``features`` itself when none is categorical)."""
        if not self.has_categorical:
            return self.feature_names
        return self.feature_map.released_columns

    def _width(self, f: str) -> int:
        """The released columns of feature ``f``: its one-hot block, or one randomized code."""
        return len(self.categories[f]) if f in self.categories and not self._is_rr(f) else 1

    def _private_dims(self) -> int:
        """The noised coordinates: the private numeric features and the private one-hot blocks."""
        return sum(self._width(f) for f in self.private_features if not self._is_rr(f))

    def _private_numeric(self) -> int:
        return sum(1 for f in self.private_features if f not in self.categories)

    def _onehot_structure(self) -> tuple[int, int]:
        """(m, K): the private categorical columns noised as one-hot blocks and their coordinates."""
        cats = [f for f in self.private_features if f in self.categories and not self._is_rr(f)]
        return len(cats), sum(len(self.categories[f]) for f in cats)

    def with_columns(self, features=None, label=None, ranges=None, target_range=None) -> ReleaseSpec:
        """A copy bound to other feature/label columns or ranges (privacy parameters unchanged);
        the spec itself when they are the ones it has (nothing is validated or built again)."""
        changes: dict = {}
        if features is not None:
            changes["features"] = features
        if label is not None:
            changes["label"] = label
        if ranges is not None:
            changes["ranges"] = {**self.ranges, **parse_ranges(ranges)}
        if target_range is not None:
            changes["target_range"] = target_range
        if "features" in changes and not isinstance(features, str) \
                and tuple(features) == self.features:
            del changes["features"]
        for name in ("label", "ranges", "target_range"):
            if name in changes and changes[name] == getattr(self, name):
                del changes[name]
        return replace(self, **changes) if changes else self

    def with_counts(self, row_count: int | None = None, seeded: bool | None = None) -> ReleaseSpec:
        """A copy with the release's ``row_count`` and/or ``seeded`` set.  Neither is part of the
        spec's identity or of its validation, so the copy shares the validated fields and the
        calibrated mechanisms: nothing is checked or calibrated again."""
        out = copy.copy(self)
        if row_count is not None:
            object.__setattr__(out, "row_count", row_count)
        if seeded is not None:
            object.__setattr__(out, "seeded", bool(seeded))
        return out

    # --- guarantee (its words: spec_text.py) ------------------------------------------------------
    def _guarantee_metadata(self, g: Guarantee) -> dict:
        return guarantee_metadata(self, g)

    def guarantee(self) -> Guarantee:
        """Per-record ``(epsilon, delta)``-LDP by basic composition, with a one-line statement
        (``spec_text.spec_guarantee``: public columns, randomized-response columns, the laws)."""
        return spec_guarantee(self)

    # --- metadata ----------------------------------------------------------------------------------
    def to_metadata(self, row_count: int | None = None) -> dict:
        """The JSON-able dict written under ``iwpfast.release`` (never a seed)."""
        if row_count is None:
            row_count = self.row_count
        if self.features is None:
            raise InvalidInputError("the spec names no features; give features=[...] first")
        g = self.guarantee()
        regression = self.task == "regression"
        categorical = self.has_categorical
        fmap = self.feature_map if categorical else None
        meta = {
            "format": FORMAT_NAME,
            # public columns need a reader that knows them (an older one would debias them for
            # noise they never had): version 2; releases without any keep version 1, unchanged
            "format_version": (RR_FORMAT_VERSION if self._rr_mechs else
                               CATEGORICAL_FORMAT_VERSION if categorical else
                               PUBLIC_FORMAT_VERSION if self.public_features else FORMAT_VERSION),
            "library_version": __version__,
            "task": self.task,
            # the released columns (one-hot coordinates for a categorical column)
            "features": list(self.released_features),
            "label": self.label,
            "feature_bound": self.bound,
            "feature_ranges": {f: list(self.ranges[f]) for f in self.numeric_features},
            "ranges_from_data": bool(self.ranges_from_data),
            "feature_noise_scale": self.feature_noise_scales(),
            "feature_dtype": self.feature_dtype,
            "epsilon_x": self.epsilon_x,
            "delta_x": self.delta,
            "calibration": self.calibration,
            "epsilon_y": self.epsilon_y,
            "label_keep_prob": self.label_keep_prob,
            "label_other_prob": self.label_other_prob,
            "classes": None if self.classes is None else list(self.classes),
            "label_encoding": self.label_encoding,
            "target_bound": self.target_bound if regression else None,
            "target_range": list(self.target_range) if (regression and self.target_range) else None,
            "target_noise_scale": self.target_noise_scale,
            "delta_y": self.delta_y if regression else None,
            "guarantee": self._guarantee_metadata(g),
            "noise": self.feature_noise_record(),
            "target_noise": self._label_mech.noise_metadata()
            if isinstance(self._label_mech, GaussianTargetMechanism) else None,
            "seeded": bool(self.seeded),
            "row_count": None if row_count is None else int(row_count),
            "mechanism": self.mechanism,
        }
        if self.public_features or categorical:
            # public released columns (a public categorical column: its one-hot coordinates)
            meta["public_features"] = (list(self.public_features) if fmap is None
                                       else fmap.public_coordinates())
            meta["feature_noise_variance"] = self.feature_noise_variances()
        if fmap is not None:
            meta["feature_map"] = fmap.to_metadata()
            # beside the categories it qualifies (a release without categorical columns keeps
            # the bits it had before the field existed)
            meta["categories_from_data"] = list(self.categories_from_data)
            meta["feature_vector_bound"] = fmap.vector_bound(self.bound)
        meta.update(rr_metadata(self._rr_mechs))
        return meta

    def to_json(self, row_count: int | None = None) -> str:
        return json.dumps(self.to_metadata(row_count), sort_keys=True, allow_nan=False)

    @classmethod
    def from_metadata(cls, meta) -> ReleaseSpec:
        """Rebuild a spec from the metadata dict (or its JSON text/bytes), checking consistency."""
        if isinstance(meta, (bytes, str)):
            try:
                meta = json.loads(meta)
            except ValueError as exc:
                raise ReleaseSpecError(
                    f"release metadata is not valid JSON ({exc}); the file is corrupt") from None
        if not isinstance(meta, Mapping) or meta.get("format") != FORMAT_NAME:
            raise ReleaseSpecError(
                "no iwpfast release metadata (key 'iwpfast.release'); release the data with "
                "`iwpfast release` / iwpfast.release() first"
            )
        if meta.get("format_version") not in READ_VERSIONS:
            raise ReleaseSpecError(
                f"release format version {meta.get('format_version')!r} is not supported by this "
                f"iwpfast (reads versions {', '.join(map(str, READ_VERSIONS))}); upgrade iwpfast"
            )
        check_metadata_fields(meta)
        features = tuple(meta["features"])
        public = tuple(meta.get("public_features") or ())
        categories: dict = {}
        unknown = None
        if meta.get("feature_map") is not None:
            # a release with categorical columns: the spec's features are the input columns
            fmap = FeatureMap.from_metadata(meta["feature_map"])
            features = tuple(c.name for c in fmap.inputs)
            public = tuple(c.name for c in fmap.inputs if c.public)
            categories = {c.name: c.categories for c in fmap.categorical}
            unknown = fmap.unknown or None
        try:
            spec = cls(
                epsilon_x=meta["epsilon_x"],
                delta=meta["delta_x"],
                bound=meta["feature_bound"],
                epsilon_y=meta.get("epsilon_y"),
                features=features,
                ranges={k: tuple(v) for k, v in meta["feature_ranges"].items()},
                label=meta.get("label"),
                task=meta.get("task", "classification"),
                calibration=meta["calibration"],
                feature_dtype=meta.get("feature_dtype", "float32"),
                ranges_from_data=bool(meta.get("ranges_from_data", False)),
                categories_from_data=tuple(meta.get("categories_from_data") or ()),
                target_range=tuple(meta["target_range"]) if meta.get("target_range") else None,
                target_bound=meta.get("target_bound") or 1.0,
                delta_y=meta.get("delta_y"),
                classes=tuple(meta["classes"]) if meta.get("classes") is not None else None,
                # releases written before the discrete law carry no "noise": they were float
                noise=noise_from_law((meta.get("noise") or {}).get("law", "float_gaussian")),
                public_features=public,
                mechanism=meta.get("mechanism") or "gaussian",
                categories=categories,
                unknown_category=unknown,
                **rr_from_metadata(meta),
            )
        except InvalidInputError as exc:
            raise ReleaseSpecError(f"release metadata is invalid: {exc}") from None
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            # the field table above catches what the contract names; this is the net under it
            raise ReleaseSpecError(f"release metadata is invalid ({type(exc).__name__}: {exc}); "
                                   "re-create the release with `iwpfast release`") from None
        # what the data were noised with and what programs read (the guarantee, the delta
        # terms): recomputed from the parameters, an edit refused naming the field
        check_against_parameters(spec, meta)
        return spec.with_counts(row_count=meta.get("row_count"),
                                seeded=bool(meta.get("seeded", False)))

    def describe(self) -> str:
        """Multi-line human-readable description (used by ``iwpfast info``; ``spec_text``)."""
        return describe_spec(self)
