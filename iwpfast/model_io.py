"""Model files: one small self-describing JSON document per fitted estimator.

Layout (``format_version`` 1)::

    {"format": "iwpfast.model", "format_version": 1, "library_version": "0.1.0",
     "numpy_version": "...", "estimator": "IWPClassifier", "params": {...},
     "fitted": {"coef": [...], "intercept": b, "features": [...], "label": "y" | null,
                "feature_names_in": [...] | null, "classes": [...] | null, "n_rows_seen": n,
                "noise_var": [...], "label_keep_prob": .. | null, "target_noise_var": ..,
                "radius": .., "truncation": K, "mode": "iwp", "average_start": t0,
                "schedule": "constant", "learning_rate": step, "telemetry": {...},
                "sample_weight": "w" | null  (the weight column of a weighted pass)},
     "release": {...the release metadata...} | null,
     "state": {"theta": [...], ...} | null,
     "sha256": "..."}

Floats are written with ``repr`` precision (JSON round-trips them exactly), so a loaded model
predicts bit for bit what the saved one did.  ``state`` is the streaming state of the pass (a
few vectors), so ``partial_fit`` can continue after a load.  ``sha256`` covers the canonical dump
of everything else: an edited or truncated file is reported as corrupt instead of silently
predicting something else.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os

import numpy as np

from ._version import __version__
from .exceptions import InvalidInputError

FORMAT = "iwpfast.model"
FORMAT_VERSION = 1


def _jsonable(value):
    """Hyper-parameters and telemetry as JSON (inf/nan become strings, NumPy scalars plain)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else repr(v)  # "inf", "-inf", "nan"
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, str):
        return value
    raise InvalidInputError(f"cannot store {value!r} ({type(value).__name__}) in a model file; use plain "
                            "numbers and strings for hyper-parameters")


def _float(value) -> float:
    return float(value)  # float("inf") / float("nan") parse the strings written by _jsonable


#: the hyper-parameters a one-vs-rest head may have of its own (saved per head)
PER_HEAD_FIELDS = ("alpha", "learning_rate", "mu", "radius", "variance_cap")


def _digest(doc: dict) -> str:
    body = {k: v for k, v in doc.items() if k != "sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def model_document(est) -> dict:
    """The JSON document of a fitted estimator (see the module docstring)."""
    est._check_fitted()
    state = est._pass.head
    ovr = est._pass.ovr
    fitted = {
        "coef": _jsonable(np.asarray(est.coef_, dtype=np.float64).reshape(-1)),
        "intercept": _jsonable(float(np.asarray(est.intercept_).reshape(-1)[0])),
        "features": list(est.features_),
        "label": est.label_,
        "feature_names_in": (None if not hasattr(est, "feature_names_in_")
                             else [str(c) for c in est.feature_names_in_]),
        "classes": None if not hasattr(est, "classes_") else _jsonable(np.asarray(est.classes_)),
        "n_rows_seen": int(est.n_rows_seen_),
        "n_iter": int(getattr(est, "n_iter_", 0)),
        "noise_var": _jsonable(np.asarray(est.noise_var_)),
        "label_keep_prob": _jsonable(est.label_keep_prob_),
        "target_noise_var": _jsonable(est.target_noise_var_),
        "radius": _jsonable(est.radius_),
        "truncation": int(est.truncation_),
        "mode": est.mode_,
        "average_start": int(est._pass.config.average_start),
        # the step the pass runs with: schedule='paper' is resolved into a constant step that the
        # hyper-parameters alone do not give back (partial_fit after load must continue with it)
        "schedule": est._pass.config.schedule,
        "learning_rate": _jsonable(est._pass.config.learning_rate),
        "telemetry": _jsonable(dict(est.telemetry_)),
        # the declared ranges raw data is scaled by (in the model's feature order) and the bound
        "feature_ranges": (None if not getattr(est, "feature_ranges_", None) else
                           [[n, *map(float, est.feature_ranges_[n])] for n in est.features_]),
        "feature_bound": _jsonable(getattr(est, "feature_bound_", None)),
        # hyper-parameters chosen by private validation ("auto"), and the step/alpha run
        "alpha": _jsonable(est._pass.config.alpha),
        "tuning": _jsonable(getattr(est, "tuning_", None)),
        # the cap the pass runs with ("auto" sets one when none is given)
        "variance_cap": _jsonable(est._pass.config.variance_cap),
        # alpha_/learning_rate_ of a k-class "auto" fit: one value per class
        "alpha_per_class": (_jsonable(np.asarray(est.alpha_)) if np.ndim(getattr(est, "alpha_", 0))
                            else None),
        "learning_rate_per_class": (_jsonable(np.asarray(est.learning_rate_))
                                    if np.ndim(getattr(est, "learning_rate_", 0)) else None),
        # the column of sample weights the pass reads (None: unweighted): a weighted pass carries
        # its rows' weights in its state, and partial_fit after load continues it with weights
        "sample_weight": est._pass.sample_weight,
    }
    release = None
    if getattr(est, "release_spec_", None) is not None:
        spec = est.release_spec_
        release = spec.to_metadata() if hasattr(spec, "to_metadata") else dict(spec)
    if ovr is not None:
        # k > 2 classes: one row of coefficients, one intercept and one SGD state per head
        fitted["coef"] = _jsonable(np.asarray(est.coef_, dtype=np.float64))
        fitted["intercept"] = _jsonable(np.asarray(est.intercept_, dtype=np.float64))
        fitted["label_weights"] = _jsonable(list(ovr.table))
        fitted["telemetry_per_class"] = _jsonable(list(est.telemetry_per_class_))
        # every head's own hyper-parameters ("auto" chooses them per class)
        fitted["head_configs"] = [
            {k: _jsonable(getattr(cfg, k)) for k in PER_HEAD_FIELDS} for cfg in ovr.configs]
        state = None
    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "library_version": __version__,
        "numpy_version": np.__version__,
        "estimator": type(est).__name__,
        "params": _jsonable(est.get_params()),
        "fitted": fitted,
        "release": _jsonable(release),
        "state": None if state is None else {k: _jsonable(np.asarray(v)) for k, v in state.arrays().items()
                                             if k not in ("trace", "trace_steps")},
    }
    if ovr is not None:
        doc["states"] = [{k: _jsonable(np.asarray(v)) for k, v in st.arrays().items()
                          if k not in ("trace", "trace_steps")} for st in ovr.states]
    doc["sha256"] = _digest(doc)
    return doc


def save_model(est, path, filesystem=None) -> None:
    """Write ``est`` to ``path`` atomically: a temporary file renamed into place, or on another
    filesystem (a URI such as ``s3://bucket/model.json``, or ``filesystem=``) a temporary key
    moved into place."""
    from .io.filesystem import resolve, write_bytes_atomic

    doc = model_document(est)
    data = (json.dumps(doc, indent=1, allow_nan=False) + "\n").encode("utf-8")
    write_bytes_atomic(resolve(path, filesystem), data)


def read_model_document(path, filesystem=None) -> dict:
    """Read and check a model file (a path or URI): format, version, checksum.  Raises
    InvalidInputError."""
    from .io.filesystem import resolve

    loc = resolve(path, filesystem)
    path = loc.display
    try:
        doc = json.loads(loc.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise InvalidInputError(f"model file {path!r} does not exist; save one with model.save(path) or "
                             "`iwpfast fit ... --out model.json`") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"model file {path!r} is corrupt (not valid JSON: {exc}); re-create it with "
                             "model.save(path) or `iwpfast fit`") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InvalidInputError(f"{path!r} is not an iwpfast model file (no \"format\": \"{FORMAT}\"); "
                             "`iwpfast info FILE` tells what it is")
    version = doc.get("format_version")
    if not isinstance(version, int):
        raise InvalidInputError(f"model file {path!r} is corrupt (format_version={version!r})")
    if version > FORMAT_VERSION:
        raise InvalidInputError(
            f"model file {path!r} has format version {version}, written by iwpfast "
            f"{doc.get('library_version', '?')}; this iwpfast {__version__} reads versions up to "
            f"{FORMAT_VERSION}: upgrade iwpfast (pip install -U iwpfast)")
    if doc.get("sha256") != _digest(doc):
        raise InvalidInputError(f"model file {path!r} is corrupt: its checksum does not match its content "
                             "(edited or truncated); re-create it with model.save(path) or `iwpfast fit`")
    return doc


def load_model(path, filesystem=None):
    """Rebuild the estimator saved at ``path`` (iwpfast.load; a path or URI)."""
    from . import estimators
    from .estimators._noise import NoiseModel
    from .estimators._state import ARRAY_LABEL, PassState
    from .sgd.state import HeadConfig, HeadState

    doc = read_model_document(path, filesystem)
    try:
        cls = {"IWPClassifier": estimators.IWPClassifier, "IWPRegressor": estimators.IWPRegressor}[
            doc["estimator"]]
        params = dict(doc["params"])
        for key in ("radius", "variance_cap", "alpha", "learning_rate", "mu"):
            if isinstance(params.get(key), str) and params[key] != "auto":
                params[key] = _float(params[key])
        est = cls(**params)
        f = doc["fitted"]
        p = len(f["features"])
        multiclass = isinstance(f["intercept"], list)
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
            est.intercept_ = np.array([_float(f["intercept"])])
            est.classes_ = np.asarray(f["classes"])
        else:
            est.coef_ = coef
            est.intercept_ = _float(f["intercept"])
        est.n_features_in_ = p
        est.features_ = list(f["features"])
        est.label_ = f["label"]
        if f.get("feature_names_in") is not None:
            est.feature_names_in_ = np.asarray(f["feature_names_in"], dtype=object)
        est.n_rows_seen_ = int(f["n_rows_seen"])
        est.n_iter_ = int(f.get("n_iter", 0))
        est.noise_var_ = np.array([_float(v) for v in f["noise_var"]])
        est.label_keep_prob_ = None if f["label_keep_prob"] is None else _float(f["label_keep_prob"])
        est.target_noise_var_ = _float(f["target_noise_var"])
        est.radius_ = _float(f["radius"])
        est.truncation_ = int(f["truncation"])
        est.mode_ = f["mode"]
        est.telemetry_ = {k: (_float(v) if isinstance(v, str) else v) for k, v in f["telemetry"].items()}
        if f.get("feature_ranges"):
            est.feature_ranges_ = {n: (_float(lo), _float(hi)) for n, lo, hi in f["feature_ranges"]}
            est.feature_bound_ = _float(f["feature_bound"])
        if f.get("tuning") is not None:
            est.tuning_ = f["tuning"]
        if f.get("alpha") is not None:
            est.alpha_ = _float(f["alpha"])
            est.learning_rate_ = _float(f["learning_rate"])
        if f.get("alpha_per_class") is not None:
            est.alpha_ = np.array([_float(a) for a in f["alpha_per_class"]])
            est.learning_rate_ = np.array([_float(a) for a in f["learning_rate_per_class"]])
        alpha_run = _float(f["alpha"]) if f.get("alpha") is not None else None
        release = doc.get("release")
        est.release_spec_ = None
        if release is not None:
            try:
                from .privacy import ReleaseSpec
                est.release_spec_ = ReleaseSpec.from_metadata(release)
            except ImportError:  # pragma: no cover
                est.release_spec_ = release
        v = est._validated()
        config = HeadConfig(
            loss=v["loss"], mode=est.mode_, n_features=p, noise_var=est.noise_var_,
            label_keep_prob=est.label_keep_prob_, target_noise_var=est.target_noise_var_,
            truncation=est.truncation_, batch_size=v["batch_size"],
            alpha=v["alpha"] if alpha_run is None else alpha_run,
            schedule=f.get("schedule", "constant" if est.schedule == "paper" else est.schedule),
            learning_rate=_float(f.get("learning_rate", v["learning_rate"])),
            mu=v["mu"] if v["mu"] is not None else alpha_run, radius=est.radius_,
            variance_cap=(_float(f["variance_cap"]) if f.get("variance_cap") is not None
                          else float("inf") if est.variance_cap is None else float(est.variance_cap)),
            fit_intercept=bool(est.fit_intercept), average_start=int(f.get("average_start", -1)),
            weighted=f.get("sample_weight") is not None)
        noise = NoiseModel(est.noise_var_, est.label_keep_prob_, est.target_noise_var_, None, release)
        def head_state(state):
            # np.array parses the "inf"/"nan" strings _jsonable wrote for non-finite floats
            arrays = {k: np.array(vv, dtype=np.int64 if k == "counters" else np.float64)
                      for k, vv in state.items()}
            arrays["trace"] = np.zeros((0, p + 1))
            arrays["trace_steps"] = np.zeros(0, dtype=np.int64)
            return HeadState.from_arrays(arrays)

        state = doc.get("state")
        head = None if state is None else head_state(state)
        ovr = None
        if multiclass:
            from .estimators._multiclass import OneVsRest
            ovr = OneVsRest(classes=est.classes_, table=tuple(_float(w) for w in f["label_weights"]))
            ovr.configs = ovr.head_configs(config)
            if f.get("head_configs"):
                ovr.configs = [dataclasses.replace(cfg, **{k: _float(v) for k, v in own.items()})
                               for cfg, own in zip(ovr.configs, f["head_configs"], strict=True)]
                config = ovr.configs[0]
            states = doc.get("states")
            ovr.states = None if states is None else [head_state(st) for st in states]
            head = None if ovr.states is None else ovr.states[0]
        est._pass = PassState(config=config, features=list(est.features_),
                              label=est.label_ if est.label_ is not None else ARRAY_LABEL,
                              noise=noise, head=head, ovr=ovr,
                              sample_weight=f.get("sample_weight"))
        return est
    except InvalidInputError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"model file {os.fspath(path)!r} is corrupt or incomplete ({exc!r}); "
                             "re-create it with model.save(path) or `iwpfast fit`") from None
