"""What every part of an estimator may read of the others: the names, for the type checker.

``IWPBase`` is assembled from parts (``ParamsMixin``, ``InputsMixin``, ``TunedFitMixin``,
``EvaluationMixin`` and the pass in ``_base``); each part reads hyper-parameters stored by
``__init__``, fitted attributes set by the pass and a few methods of the other parts.  They are
declared here once, as annotations only (no class attributes: an unfitted estimator still has no
``coef_``, and scikit-learn's ``clone`` sees only ``__init__``'s parameters).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._state import PassState


class EstimatorFields:
    """Annotations of the hyper-parameters, fitted attributes and shared methods of ``IWPBase``."""

    # hyper-parameters (stored as given by __init__; validated by ParamsMixin._validated)
    loss: str
    correction: str
    alpha: Any
    learning_rate: Any
    schedule: str
    mu: Any
    batch_size: Any
    radius: Any
    variance_cap: Any
    average: Any
    fit_intercept: bool
    truncation: Any
    chunk_rows: Any
    shuffle: bool
    random_state: Any
    progress: Any
    validation_fraction: Any
    class_weight: Any

    # the estimator's kind, and its pass: typed as there because every part reads it only once a
    # pass started (fit, partial_fit, load); before that it is None (IWPBase's class attribute)
    _task: str
    _losses: Sequence[str]
    _pass: PassState

    # fitted attributes
    coef_: Any
    intercept_: Any
    classes_: Any
    features_: list[str]
    label_: str | None
    n_features_in_: int
    feature_names_in_: Any
    n_rows_seen_: int
    n_iter_: int
    telemetry_: dict
    feature_ranges_: dict
    feature_bound_: float
    feature_map_: Any
    release_spec_: Any
    noise_var_: Any
    label_keep_prob_: float | None
    target_noise_var_: float
    radius_: float
    truncation_: int
    alpha_: Any
    learning_rate_: Any
    mode_: str
    tuning_: dict

    # methods one part calls on another
    _validated: Callable[..., dict]
    _check_fitted: Callable[[], None]
    _make_config: Callable[..., Any]
    _head_mode: Callable[..., str]
    _laplace_cap: Callable[..., float | None]
    _variance_cap: Callable[..., float]
    _start_pass: Callable[..., None]
    _set_scaling: Callable[..., None]
    _run: Callable[..., None]
    _update_fitted: Callable[[dict], None]
    _prepare_source: Callable[..., Any]
    _target_encoder: Callable[..., Any]
    _sample_weight_column: Callable[..., Any]
    _encode_targets_stream: Callable[..., Any]
    _encode_clean_targets: Callable[..., Any]
    _score_from: Callable[..., float]
    _risk_from: Callable[..., float]
    _resolve_truncation: Callable[..., Any]
    _average_start: Callable[..., int]

