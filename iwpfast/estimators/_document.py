"""An estimator's own part of its model file: what ``save`` writes and ``iwpfast.load`` reads.

``iwpfast.model_io`` is the file format (the envelope, its version and checksum, the atomic write,
the checked read); this module fills and reads the part inside it (layout in model_io's
docstring): ``estimator``, ``params``, ``fitted``, ``release`` and the pass's ``state`` (one
head) or ``states`` (k one-vs-rest heads), so that a loaded model predicts the same bits and
``partial_fit`` continues its pass.  ``IWPBase._to_document`` / ``_from_document`` call it.

Every setting the pass ran with is in ``fitted`` ('auto' resolved): alpha, learning_rate and
schedule, variance_cap, average_start, radius, truncation, solver (absent: sgd), with
``params`` (batch_size, validation_fraction, ...) and ``tuning`` (the grid, the split or folds);
a loaded model's ``resolved_params_`` are built from them (``iwpfast fit --params-from``).
"""
from __future__ import annotations

import math

import numpy as np

from ..model_io import jsonable, parse_float
from ..sgd.state import HeadConfig, HeadState
from ._heads import Heads, OneVsRestHeads, SingleHead
from ._noise import NoiseModel
from ._state import ARRAY_LABEL, PassState

#: hyper-parameters that are floats unless "auto" (written as strings when not finite)
_FLOAT_PARAMS = ("radius", "variance_cap", "alpha", "learning_rate", "mu")


def _state_arrays(state: HeadState) -> dict:
    """A head's SGD state as JSON (the trace buffers are not part of a model)."""
    return {k: jsonable(np.asarray(v)) for k, v in state.arrays().items()
            if k not in ("trace", "trace_steps")}


def _head_state(arrays: dict, p: int) -> HeadState:
    # np.array parses the "inf"/"nan" strings jsonable wrote for non-finite floats
    out = {k: np.array(v, dtype=np.int64 if k == "counters" else np.float64)
           for k, v in arrays.items()}
    out["trace"] = np.zeros((0, p + 1))
    out["trace_steps"] = np.zeros(0, dtype=np.int64)
    return HeadState.from_arrays(out)


def to_document(est) -> dict:
    """The estimator's part of its model file (``model_io.seal`` adds the envelope)."""
    est._check_fitted()
    ps = est._pass
    cfg = ps.config
    fitted = {
        "coef": jsonable(np.asarray(est.coef_, dtype=np.float64).reshape(-1)),
        "intercept": jsonable(float(np.asarray(est.intercept_).reshape(-1)[0])),
        "features": list(est.features_),
        "label": est.label_,
        "feature_names_in": (None if not hasattr(est, "feature_names_in_")
                             else [str(c) for c in est.feature_names_in_]),
        "classes": None if not hasattr(est, "classes_") else jsonable(np.asarray(est.classes_)),
        "n_rows_seen": int(est.n_rows_seen_),
        "n_iter": int(getattr(est, "n_iter_", 0)),
        "noise_var": jsonable(np.asarray(est.noise_var_)),
        "label_keep_prob": jsonable(est.label_keep_prob_),
        "target_noise_var": jsonable(est.target_noise_var_),
        "radius": jsonable(est.radius_),
        "truncation": int(est.truncation_),
        "mode": est.mode_,
        "average_start": int(cfg.average_start),
        # the step the pass runs with: schedule='paper' is resolved into a constant step that the
        # hyper-parameters alone do not give back (partial_fit after load must continue with it)
        "schedule": cfg.schedule,
        "learning_rate": jsonable(cfg.learning_rate),
        "telemetry": jsonable(dict(est.telemetry_)),
        # the declared ranges raw data is scaled by (in the model's feature order) and the bound
        "feature_ranges": (None if not getattr(est, "feature_ranges_", None) else
                           [[n, *map(float, est.feature_ranges_[n])] for n in est.features_]),
        "feature_bound": jsonable(getattr(est, "feature_bound_", None)),
        # hyper-parameters chosen by private validation ("auto"), and the step/alpha run
        "alpha": jsonable(cfg.alpha),
        "tuning": jsonable(getattr(est, "tuning_", None)),
        # the cap the pass runs with ("auto" sets one when none is given)
        "variance_cap": jsonable(cfg.variance_cap),
        # alpha_/learning_rate_ of a k-class "auto" fit: one value per class
        "alpha_per_class": (jsonable(np.asarray(est.alpha_)) if np.ndim(getattr(est, "alpha_", 0))
                            else None),
        "learning_rate_per_class": (jsonable(np.asarray(est.learning_rate_))
                                    if np.ndim(getattr(est, "learning_rate_", 0)) else None),
        # the column of sample weights the pass reads (None: unweighted): a weighted pass carries
        # its rows' weights in its state, and partial_fit after load continues it with weights
        "sample_weight": ps.sample_weight,
    }
    if getattr(est, "feature_map_", None) is not None:
        # categorical columns: how raw tables map to the coordinates (absent otherwise, so
        # that models without one are written as before)
        fitted["feature_map"] = est.feature_map_.to_metadata()
    if getattr(est, "solver_", "sgd") != "sgd":
        # solved from the release's debiased moments (estimators/_moments.py): format version 2
        fitted["solver"] = est.solver_
    if getattr(est, "categorical_mechanism_", None) == "rr":
        # learned from randomized-response codes (estimators/_rr.py): the model itself is the
        # linear model over the feature map's one-hot coordinates above; these say how it was
        # learned (the release's spec below says what it was learned from)
        fitted["categorical_mechanism"] = "rr"
        fitted["block_cap"] = jsonable(est.block_cap_)
    release = None
    if getattr(est, "release_spec_", None) is not None:
        spec = est.release_spec_
        release = spec.to_metadata() if hasattr(spec, "to_metadata") else dict(spec)
    params = est.get_params()
    if params.get("class_weight", 0) is None:
        # a parameter newer than the format: written only when set, so that a model without
        # class weights keeps the document of before (older files load with its default)
        del params["class_weight"]
    if params.get("solver") == "sgd" or (params.get("solver") == "auto"
                                         and getattr(est, "solver_", "sgd") == "sgd"):
        # as class_weight: a version-1 document unless the model is the moment learner's
        del params["solver"]
    if params.get("release_spec", 0) is None:
        del params["release_spec"]  # as class_weight: written only when set (as its metadata)
    elif "release_spec" in params:
        params["release_spec"] = params["release_spec"].to_metadata()
    doc = {"estimator": type(est).__name__, "params": jsonable(params),
           "fitted": fitted, "release": jsonable(release)}
    # the heads write their part: one state, or k > 2 classes' rows of coefficients, label
    # weights, per-head hyper-parameters and states
    ps.heads.write(est, fitted, doc, jsonable, _state_arrays)
    return doc


def from_document(cls, doc: dict):
    """The estimator of class ``cls`` that ``doc`` describes, ready to predict and to continue its
    pass (raises KeyError, TypeError or ValueError on an incomplete document)."""
    params = dict(doc["params"])
    if params.get("release_spec") is not None:
        from ..privacy import ReleaseSpec
        params["release_spec"] = ReleaseSpec.from_metadata(params["release_spec"])
    for key in _FLOAT_PARAMS:
        if isinstance(params.get(key), str) and params[key] != "auto":
            params[key] = parse_float(params[key])
    est = cls(**params)
    f = doc["fitted"]
    p = len(f["features"])
    multiclass = isinstance(f["intercept"], list)
    _set_coefficients(est, f, p, multiclass)
    _set_fitted(est, f, p)
    release = doc.get("release")
    est.release_spec_ = None
    if release is not None:
        from ..privacy import ReleaseSpec
        est.release_spec_ = ReleaseSpec.from_metadata(release)
    # a pure-epsilon release's law travels with its metadata (partial_fit after load needs it)
    from ..sgd.driver import laplace_law_of
    law = None if release is None else laplace_law_of(release.get("noise"), p)
    config = _config(est, f, p, law)
    noise = NoiseModel(est.noise_var_, est.label_keep_prob_, est.target_noise_var_, None, release,
                       noise_law=law, spec=est.release_spec_)
    heads: Heads
    if multiclass:
        heads = OneVsRestHeads.read(f, doc, config, est.classes_, parse_float,
                                    lambda arrays: _head_state(arrays, p))
    else:
        if f.get("label_weights") is not None:       # a class-weighted binary head
            import dataclasses
            config = dataclasses.replace(
                config, label_weights=tuple(parse_float(w) for w in f["label_weights"]))
        state = doc.get("state")
        heads = SingleHead(configs=[config], states=None if state is None else [_head_state(state, p)],
                           task=est._task)
    for name, key in (("class_weight_", "class_weight"), ("class_shares_", "class_shares")):
        value = f.get(key)
        setattr(est, name, None if value is None else np.array([parse_float(w) for w in value]))
    est._pass = PassState(heads=heads, features=list(est.features_),
                          label=est.label_ if est.label_ is not None else ARRAY_LABEL,
                          noise=noise, sample_weight=f.get("sample_weight"))
    return est


def _set_coefficients(est, f: dict, p: int, multiclass: bool) -> None:
    coef = np.array(f["coef"], dtype=np.float64)      # parses "inf"/"nan" strings too
    if multiclass:
        if coef.ndim != 2 or coef.shape[1] != p or len(f["intercept"]) != coef.shape[0]:
            raise ValueError(f"coefficients of shape {coef.shape} for {p} features")
        est.coef_ = coef
        est.intercept_ = np.array(f["intercept"], dtype=np.float64)
        est.classes_ = np.asarray(f["classes"])
        est.telemetry_per_class_ = f.get("telemetry_per_class") or []
    elif coef.shape != (p,):
        raise ValueError(f"{coef.size} coefficients for {p} features")
    elif est._task == "classification":
        est.coef_ = coef.reshape(1, -1)
        est.intercept_ = np.array([parse_float(f["intercept"])])
        est.classes_ = np.asarray(f["classes"])
    else:
        est.coef_ = coef
        est.intercept_ = parse_float(f["intercept"])


def _set_fitted(est, f: dict, p: int) -> None:
    est.n_features_in_ = p
    est.features_ = list(f["features"])
    est.label_ = f["label"]
    if f.get("feature_names_in") is not None:
        est.feature_names_in_ = np.asarray(f["feature_names_in"], dtype=object)
    est.n_rows_seen_ = int(f["n_rows_seen"])
    est.n_iter_ = int(f.get("n_iter", 0))
    est.noise_var_ = np.array([parse_float(v) for v in f["noise_var"]])
    est.label_keep_prob_ = None if f["label_keep_prob"] is None else parse_float(f["label_keep_prob"])
    est.target_noise_var_ = parse_float(f["target_noise_var"])
    est.radius_ = parse_float(f["radius"])
    est.truncation_ = int(f["truncation"])
    est.mode_ = f["mode"]
    est.telemetry_ = {k: (parse_float(v) if isinstance(v, str) else v)
                      for k, v in f["telemetry"].items()}
    if f.get("feature_ranges"):
        est.feature_ranges_ = {n: (parse_float(lo), parse_float(hi)) for n, lo, hi in f["feature_ranges"]}
        est.feature_bound_ = parse_float(f["feature_bound"])
    if f.get("feature_map") is not None:
        from ..privacy.feature_map import FeatureMap
        est.feature_map_ = FeatureMap.from_metadata(f["feature_map"])
        est.feature_bound_ = parse_float(f["feature_bound"])
    est.solver_ = f.get("solver", "sgd")
    if f.get("categorical_mechanism") == "rr":
        est.categorical_mechanism_ = "rr"
        est.block_cap_ = parse_float(f["block_cap"])
        est.variance_cap_ = parse_float(f["variance_cap"])
    if f.get("tuning") is not None:
        est.tuning_ = f["tuning"]
    if f.get("alpha") is not None:
        est.alpha_ = parse_float(f["alpha"])
        # a moment model took no step: nan, as its fit left it (the file holds its config's)
        est.learning_rate_ = (math.nan if est.solver_ == "moments"
                              else parse_float(f["learning_rate"]))
    if f.get("alpha_per_class") is not None:
        est.alpha_ = np.array([parse_float(a) for a in f["alpha_per_class"]])
        est.learning_rate_ = np.array([parse_float(a) for a in f["learning_rate_per_class"]])


def _config(est, f: dict, p: int, noise_law=None) -> HeadConfig:
    """The configuration the saved pass ran with (its resolved step, alpha and cap)."""
    v = est._validated()
    # the alpha the pass ran with ("auto" resolved), which mu defaults to (as in _make_config)
    alpha = parse_float(f["alpha"]) if f.get("alpha") is not None else v["alpha"]
    return HeadConfig(
        loss=v["loss"], mode=est.mode_, n_features=p, noise_var=est.noise_var_,
        label_keep_prob=est.label_keep_prob_, target_noise_var=est.target_noise_var_,
        truncation=est.truncation_, batch_size=v["batch_size"],
        alpha=alpha,
        schedule=f.get("schedule", "constant" if est.schedule == "paper" else est.schedule),
        learning_rate=parse_float(f.get("learning_rate", v["learning_rate"])),
        mu=v["mu"] if v["mu"] is not None else alpha, radius=est.radius_,
        variance_cap=(parse_float(f["variance_cap"]) if f.get("variance_cap") is not None
                      else float("inf") if est.variance_cap is None else float(est.variance_cap)),
        fit_intercept=bool(est.fit_intercept), average_start=int(f.get("average_start", -1)),
        weighted=f.get("sample_weight") is not None,
        noise_law=noise_law if est.mode_ != "clean" else None)
