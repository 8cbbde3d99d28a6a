"""Issue 45 item 6: a model maps raw inputs exactly as its release did, for every mechanism.

A model fitted on a release reads raw rows (``decision_function``, ``predict``, ``score`` of raw
data) through the release's own map (``iwpfast.privacy.scaling``): each declared range onto
[-1, 1] (clipped), the private part of the row clipped to the ball of the bound in the release's
norm (L2 for the Gaussian mechanisms, L1 for the discrete Laplace one), public columns only
clipped to their ranges, categorical columns one-hot.  Each test compares the model's path end to
end against (a) the release itself with its noise switched off (``privatize`` with the noise
laws' ``add_numpy`` / ``finish_fused`` patched to add nothing) and (b) the formulas by hand, on
rows inside the bound, at every range's top, and far beyond the declared ranges.
"""
import math
import warnings

import numpy as np
import pandas as pd
import pytest

import iwpfast
from iwpfast.exceptions import NumericalWarning, PrivacyLeakWarning, UnitsWarning
from iwpfast.privacy import ReleaseSpec, noise_laws
from iwpfast.privacy.release import privatize, release

RANGES = {"a": (0.0, 10.0), "b": (-5.0, 5.0), "c": (100.0, 200.0)}
CATS = ("u", "v", "w")
#: the raw rows mapped: inside the bound, every feature at its range's top (and bottom), far
#: beyond the declared ranges, the centre, and (9, 9, ...) of the issue
RAW = pd.DataFrame({
    "a": [1.0, 10.0, 0.0, 60.0, -40.0, 5.0, 9.0, 7.5, 10.0],
    "b": [0.5, 5.0, -5.0, -90.0, 33.0, 0.0, 9.0, -1.0, 5.0],
    "c": [140.0, 200.0, 100.0, 1e6, -1e6, 150.0, 190.0, 150.0, 100.0],
    "k": ["u", "w", "v", "w", "u", "v", "u", "w", "v"],
})
BOUND = 1.2


def _spec(mechanism, features=("a", "b", "c"), **kw):
    if mechanism == "laplace":
        base = dict(epsilon_x=4.0, delta=0.0, bound=BOUND, mechanism="laplace")
    elif mechanism == "label-only":
        base = dict(public_features=tuple(features))
    else:
        base = dict(epsilon_x=4.0, delta=1e-5, bound=BOUND, noise=mechanism)
    base.update(kw)
    cats = {"k": CATS} if "k" in features else {}
    return ReleaseSpec(epsilon_y=2.0, features=list(features), label="y",
                       ranges={f: RANGES[f] for f in features if f in RANGES},
                       categories=cats, **base)


def _train_table(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.uniform(0, 10, n), "b": rng.uniform(-5, 5, n),
                       "c": rng.uniform(100, 200, n), "k": rng.choice(CATS, n)})
    logit = (df.a - 5) / 5 + 0.5 * df.b / 5 - (df.k == "w") * 0.8
    df["y"] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return df


def _fit(spec, folder=None):
    """A model fitted on a release of ``spec`` (in memory; into ``folder`` when given: a release
    with randomized-response columns is fitted from its file)."""
    df = _train_table()
    cols = list(spec.features)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)             # seeded: a simulation
        if folder is not None:
            released = str(folder / "r.parquet")
            release(df, released, spec, seed=1)
        else:
            released = privatize({c: df[c].to_numpy() for c in cols}, df["y"].to_numpy(), spec,
                                 seed=1)
        warnings.simplefilter("ignore", NumericalWarning)               # the fit is not the point
        return iwpfast.IWPClassifier(alpha=0.01, learning_rate=0.05).fit(released)


def _model_rows(model, raw):
    """(n, p) the model's map of ``raw`` (the path decision_function reads through), checked
    against decision_function itself."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnitsWarning)                   # rows beyond the ranges
        cols = [np.column_stack(c) for c in
                model._in_model_units(model._feature_columns(raw), False, "test")]
        scores = model.decision_function(raw)
    rows = np.concatenate(cols)
    coef = np.asarray(model.coef_, dtype=np.float64).reshape(-1)
    np.testing.assert_allclose(scores, rows @ coef + float(np.ravel(model.intercept_)[0]),
                               rtol=1e-12, atol=1e-12)
    return rows


@pytest.fixture
def noiseless(monkeypatch):
    """The release with its noise switched off: every law's noise step adds nothing (the fused
    float law writes the clipped value alone: sigma 0)."""
    for law in (noise_laws.FloatGaussianLaw, noise_laws.DiscreteGaussianLaw,
                noise_laws.DiscreteLaplaceLaw):
        monkeypatch.setattr(law, "add_numpy", lambda self, k, X, mech, scratch, kernels: None)

    def finish_without_noise(self, K, k, features, s, e, mids, inv_half, factor, clip, out, mech):
        for j in range(out.shape[0]):
            row = out[j, s:e]
            row[:] = 0.0
            K.finish_f32(features[j][s:e], mids[j], inv_half[j], factor, clip, np.float32(0.0), row)

    monkeypatch.setattr(noise_laws.FloatGaussianLaw, "finish_fused", finish_without_noise)

    def release(spec, raw, engine="numpy"):
        cols = {c: raw[c].to_numpy() for c in spec.features}
        y = np.zeros(len(raw), dtype=int)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            X, _ = privatize(cols, y, spec, seed=2, engine=engine)
        return np.asarray(X, dtype=np.float64)

    return release


def _by_hand(raw, spec, norm):
    """The release's map from its formulas: x -> clip((x - mid) / half, -1, 1), the private part
    scaled into the ball of the bound (L2: bound / ||s||_2 aimed 2^-20 inside; L1: bound /
    ||s||_1), public columns untouched; a categorical column its one-hot block."""
    numeric = [f for f in spec.features if f in RANGES]
    s = {f: np.clip((raw[f].to_numpy() - np.mean(RANGES[f])) / (0.5 * np.ptp(RANGES[f])), -1, 1)
         for f in numeric}
    private = [f for f in numeric if f not in spec.public_features]
    if private and not spec.label_only:
        block = np.column_stack([s[f] for f in private])
        if norm == "L2":
            limit = BOUND * (1 - 2.0**-20)
            size = np.linalg.norm(block, axis=1)
        else:
            limit = BOUND
            size = np.abs(block).sum(axis=1)
        factor = np.where(size > limit, limit / np.maximum(size, 1e-300), 1.0)
        for f in private:
            s[f] = s[f] * factor
    out = []
    for f in spec.features:
        if f in RANGES:
            out.append(s[f])
        else:
            out.extend((raw[f].to_numpy() == c).astype(float) for c in CATS)
    return np.column_stack(out)


CASES = {
    "gaussian-float": ("float", {}, "L2"),
    "gaussian-discrete": ("discrete", {}, "L2"),
    "laplace": ("laplace", {}, "L1"),
    "gaussian-public": ("float", {"public_features": ("c",)}, "L2"),
    "laplace-public": ("laplace", {"public_features": ("b",)}, "L1"),
    "label-only": ("label-only", {}, None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_numeric_model_maps_raw_rows_as_its_release(case, noiseless):
    mechanism, kw, norm = CASES[case]
    spec = _spec(mechanism, **kw)
    model = _fit(spec)
    got = _model_rows(model, RAW)
    # (a) the release itself, its noise switched off: float32 output, so equal to its rounding
    np.testing.assert_allclose(got, noiseless(spec, RAW), rtol=2e-7, atol=2e-7)
    # (b) the formulas
    np.testing.assert_allclose(got, _by_hand(RAW, spec, norm), rtol=1e-12, atol=1e-15)
    if norm is not None:
        private = [j for j, f in enumerate(spec.features) if f not in spec.public_features]
        size = (np.abs(got[:, private]).sum(axis=1) if norm == "L1"
                else np.linalg.norm(got[:, private], axis=1))
        assert np.all(size <= BOUND * (1 + 1e-12)) and np.max(size) > BOUND * (1 - 1e-5)


def test_fused_release_path_maps_alike(noiseless):
    """The float32 kernels of the Gaussian release (engine='numba') clip as the NumPy path."""
    spec = _spec("float")
    model = _fit(spec)
    np.testing.assert_allclose(_model_rows(model, RAW), noiseless(spec, RAW, engine="numba"),
                               rtol=2e-7, atol=2e-7)


@pytest.mark.parametrize("mechanism,norm", [("float", "L2"), ("laplace", "L1")])
@pytest.mark.parametrize("public", [(), ("b",), ("k",)])
def test_one_hot_model_maps_raw_rows_as_its_release(mechanism, norm, public, noiseless):
    spec = _spec(mechanism, features=("a", "b", "k"), public_features=public)
    model = _fit(spec)
    assert model.features_ == ["a", "b", "k=u", "k=v", "k=w"]
    got = _model_rows(model, RAW[["a", "b", "k"]])
    np.testing.assert_allclose(got, noiseless(spec, RAW), rtol=2e-7, atol=2e-7)
    np.testing.assert_allclose(got, _by_hand(RAW, spec, norm), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("mechanism,norm", [("float", "L2"), ("laplace", "L1")])
def test_rr_categorical_model_maps_raw_rows_as_its_release(mechanism, norm, noiseless, tmp_path):
    """A randomized-response column: the release writes its code (kept at a huge epsilon), the
    model reads its one-hot block; the numeric part as the other releases."""
    spec = _spec(mechanism, features=("a", "b", "k"), categorical_mechanism="rr",
                 epsilon_categorical=20.0)
    model = _fit(spec, tmp_path)
    assert model.features_ == ["a", "b", "k=u", "k=v", "k=w"]
    got = _model_rows(model, RAW[["a", "b", "k"]])
    released = noiseless(spec, RAW)
    codes = released[:, 2].astype(int)
    onehot = (codes[:, None] == np.arange(len(CATS))[None, :]).astype(float)
    np.testing.assert_allclose(got, np.column_stack([released[:, :2], onehot]), rtol=2e-7,
                               atol=2e-7)
    np.testing.assert_allclose(got, _by_hand(RAW, spec, norm), rtol=1e-12, atol=1e-15)


def test_saved_laplace_model_maps_alike(tmp_path):
    spec = _spec("laplace")
    model = _fit(spec)
    path = tmp_path / "m.json"
    model.save(path)
    loaded = iwpfast.load(path)
    np.testing.assert_array_equal(_model_rows(loaded, RAW), _model_rows(model, RAW))
    np.testing.assert_allclose(_model_rows(loaded, RAW), _by_hand(RAW, spec, "L1"), rtol=1e-12,
                               atol=1e-15)


def test_the_issues_row_is_mapped_in_l1():
    """The row (9, 9) of a two-feature Laplace release (ranges 0:10, bound 1): scaled (0.8, 0.8),
    L1-clipped (0.5, 0.5), not L2-clipped (0.707, 0.707)."""
    spec = ReleaseSpec(epsilon_x=4.0, delta=0.0, bound=1.0, mechanism="laplace", epsilon_y=2.0,
                       features=["a", "b"], ranges={"a": (0, 10), "b": (0, 10)}, label="y")
    model = _fit(spec)
    coef = model.coef_.reshape(-1)
    u = model.decision_function(np.array([[9.0, 9.0]]))[0]
    assert u == pytest.approx(coef @ [0.5, 0.5] + model.intercept_[0], rel=1e-12)
    assert u != pytest.approx(coef @ ([0.8 / math.sqrt(1.28)] * 2) + model.intercept_[0], rel=1e-3)


def test_clean_model_with_ranges_keeps_l2():
    """Without a release (clean arrays with ranges=) the map clips in L2 at the bound given."""
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 10, (3000, 2))
    y = (X[:, 0] > 5).astype(int)
    model = iwpfast.IWPClassifier(alpha=0.01, learning_rate=0.05, batch_size=16).fit(
        X, y, ranges={"x0": (0, 10), "x1": (0, 10)})
    raw = np.array([[9.0, 9.0], [60.0, -3.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnitsWarning)
        rows = np.concatenate([np.column_stack(c) for c in
                               model._in_model_units(model._feature_columns(raw), False, "t")])
    s = np.clip((raw - 5) / 5, -1, 1)
    bound = model.feature_bound_
    norms = np.linalg.norm(s, axis=1)
    want = s * np.where(norms > bound, bound * (1 - 2.0**-20) / norms, 1.0)[:, None]
    np.testing.assert_allclose(rows, want, rtol=1e-12)
