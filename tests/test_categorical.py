"""Categorical columns: declared categories, the FeatureMap (release -> model -> predict on raw
strings), unknown values, the structured sensitivity at its worst pair, public one-hot columns."""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import iwpfast
from iwpfast.exceptions import InvalidInputError, PrivacyLeakWarning
from iwpfast.privacy import ReleaseSpec, release
from iwpfast.privacy.calibration import analytic_gaussian_delta, gaussian_noise_scale
from iwpfast.privacy.discrete import grid_sensitivity
from iwpfast.privacy.feature_map import FeatureMap, parse_categories, read_categories_file

CATS = ["Private", "Self-emp, inc", "State gov"]


def _table(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0, 10, n)
    w = rng.choice(CATS, n)
    logit = (a - 5) / 2 + np.where(w == CATS[0], 1.5, np.where(w == CATS[1], -1.5, 0.0))
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    return pd.DataFrame({"a": a, "w": w, "y": y})


def _release(tmp_path, df, name="r.parquet", seed=3, **kw):
    spec = ReleaseSpec(epsilon_y=2.0, ranges={"a": (0, 10)}, categories={"w": CATS}, **kw)
    out = tmp_path / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)     # seeded: a simulation
        release(df, out, spec, features=["a", "w"], label="y", seed=seed, overwrite=True)
    return out


@pytest.mark.parametrize("column", ["string", "large_string", "dictionary"])
def test_column_types_release_one_hot(tmp_path, column):
    df = _table(300)
    w = pa.array(df["w"].tolist())
    if column == "large_string":
        w = w.cast(pa.large_string())
    elif column == "dictionary":
        w = pa.array(pd.Categorical(df["w"]))
    table = pa.table({"a": df["a"], "w": w, "y": df["y"]})
    out = _release(tmp_path, table, public_features=["w"], epsilon_x=4.0, delta=1e-5, bound=1.0)
    got = pq.read_table(out)
    assert got.schema.names == ["a", "w=Private", "w=Self-emp, inc", "w=State gov", "y"]
    onehot = np.column_stack([got.column(f"w={c}").to_numpy() for c in CATS])
    want = (df["w"].to_numpy()[:, None] == np.array(CATS)[None, :]).astype(np.float32)
    np.testing.assert_array_equal(onehot, want)


def test_integer_codes(tmp_path):
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"s": rng.integers(1, 4, 200), "y": rng.integers(0, 2, 200)})
    spec = ReleaseSpec(epsilon_y=1.0, categories={"s": ["1", "2", "3"]}, public_features=["s"])
    out = tmp_path / "codes.parquet"
    release(df, out, spec, features=["s"], label="y", overwrite=True)
    got = pq.read_table(out)
    for code in (1, 2, 3):
        want = (df["s"] == code).astype(np.float32)
        np.testing.assert_array_equal(got.column(f"s={code}").to_numpy(), want)


def test_round_trip_release_model_predict_raw_strings(tmp_path):
    df = _table(4000)
    out = _release(tmp_path, df, epsilon_x=8.0, delta=1e-5, bound=1.0)
    model = iwpfast.IWPClassifier(alpha=0.1).fit(out)
    assert model.features_ == ["a", "w=Private", "w=Self-emp, inc", "w=State gov"]
    by = model.coef_by_feature_
    assert set(by["w"]) == set(CATS) and by["a"] == pytest.approx(float(model.coef_[0, 0]))
    raw = df.drop(columns="y")
    # by hand: the coordinates of the release before noise, then the linear score
    a = np.clip((df["a"].to_numpy() - 5.0) / 5.0, -1, 1)
    a = a * np.minimum(1.0, 1.0 / np.maximum(np.abs(a), 1e-300))        # bound 1 on the numeric part
    onehot = (df["w"].to_numpy()[:, None] == np.array(CATS)[None, :]).astype(float)
    want = model.intercept_[0] + model.coef_[0, 0] * a + onehot @ model.coef_[0, 1:]
    np.testing.assert_allclose(model.decision_function(raw), want, rtol=1e-12, atol=1e-12)
    # the model file keeps the map: the loaded model reads raw strings alike
    path = tmp_path / "m.json"
    model.save(path)
    loaded = iwpfast.load(path)
    np.testing.assert_array_equal(loaded.predict(raw), model.predict(raw))
    assert loaded.score(df) == pytest.approx(model.score(df))
    doc = json.loads(path.read_text())
    assert "feature_map" in json.dumps(doc)


def test_unknown_value_error_names_column_value_row(tmp_path):
    df = _table(50)
    df.loc[17, "w"] = "Never-worked"
    with pytest.raises(InvalidInputError, match=r"column 'w' has 'Never-worked' at .*row 17"):
        _release(tmp_path, df, epsilon_x=4.0, delta=1e-5, bound=1.0)


def test_unknown_value_goes_to_catch_all(tmp_path):
    df = _table(50)
    df.loc[17, "w"] = "Never-worked"
    spec = ReleaseSpec(epsilon_y=2.0, ranges={"a": (0, 10)}, categories={"w": CATS},
                       unknown_category="Other", public_features=["w"], epsilon_x=4.0,
                       delta=1e-5, bound=1.0)
    assert spec.categories["w"] == (*CATS, "Other")
    out = tmp_path / "c.parquet"
    release(df, out, spec, features=["a", "w"], label="y", overwrite=True)
    other = pq.read_table(out).column("w=Other").to_numpy()
    assert other[17] == 1.0 and other.sum() == 1.0


def test_null_is_invalid_and_can_be_dropped(tmp_path):
    table = pa.table({"a": [1.0, 2.0, 3.0], "w": ["Private", None, "State gov"], "y": [0, 1, 1]})
    spec = ReleaseSpec(epsilon_y=2.0, ranges={"a": (0, 10)}, categories={"w": CATS},
                       epsilon_x=4.0, delta=1e-5, bound=1.0)
    with pytest.raises(InvalidInputError, match=r"column 'w' has a missing value \(null\) at .*row 1"):
        release(table, tmp_path / "n.parquet", spec, features=["a", "w"], label="y")
    result = release(table, tmp_path / "n.parquet", spec, features=["a", "w"], label="y",
                     on_invalid="drop")
    assert result.rows_written == 2


def test_string_column_without_categories_names_the_fix(tmp_path):
    spec = ReleaseSpec(epsilon_y=2.0, ranges={"a": (0, 10), "w": (0, 1)}, epsilon_x=4.0,
                       delta=1e-5, bound=1.0)
    with pytest.raises(InvalidInputError, match=r"--categories w=A,B,C"):
        release(_table(20), tmp_path / "x.parquet", spec, features=["a", "w"], label="y")


@pytest.mark.parametrize("noise", ["float", "discrete"])
@pytest.mark.parametrize("bound,m", [(1.0, 1), (0.5, 3), (2.0, 8)])
def test_structured_sensitivity_at_the_worst_pair(noise, bound, m):
    """The worst pair -- numeric parts at opposite ends of the ball, every category different --
    is exactly sqrt(4 B^2 + 2 m) apart, and the noise is calibrated for exactly that distance:
    the analytic Gaussian's delta (the exact privacy profile of N(0, sigma^2 I) at that
    distance) is delta, and larger at the generic bound 2 sqrt(B^2 + m)."""
    cats = {f"c{i}": ["u", "v", "w"] for i in range(m)}
    k = max(2, math.ceil(bound**2))          # enough numeric coordinates to reach the ball's edge
    numeric = [f"x{j}" for j in range(k)]
    spec = ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=bound, features=[*numeric, *cats],
                       ranges={f: (-1, 1) for f in numeric}, categories=cats, noise=noise)
    fm = spec.feature_map
    s = bound / math.sqrt(k)
    one = {**{f: [s] for f in numeric}, **{c: ["u"] for c in cats}}
    other = {**{f: [-s] for f in numeric}, **{c: ["v"] for c in cats}}
    x = np.array(fm.transform(pa.table(one), bound)).ravel()
    x2 = np.array(fm.transform(pa.table(other), bound)).ravel()
    distance = float(np.linalg.norm(x - x2))
    structured = math.sqrt(4 * bound**2 + 2 * m)
    # the release's L2 clip (which transform runs) aims 2^-20 inside the ball
    assert structured * (1 - 2.0**-19) <= distance <= structured
    mech = spec.feature_mechanism
    assert mech.sensitivity == pytest.approx(structured, rel=1e-12)
    # no pair is farther: random pairs of released clean vectors stay within the sensitivity
    rng = np.random.default_rng(0)
    rows = {**{f: rng.uniform(-3, 3, 500) for f in numeric},
            **{c: rng.choice(["u", "v", "w"], 500) for c in cats}}
    X = np.array(fm.transform(pa.table(rows), bound))
    d = np.linalg.norm(X[:, :250] - X[:, 250:], axis=0)
    assert d.max() <= structured * (1 + 1e-12)
    generic = 2 * math.sqrt(bound**2 + m)
    if noise == "float":
        assert mech.sigma == gaussian_noise_scale(2.0, 1e-5, structured / 2)
        assert analytic_gaussian_delta(mech.sigma, 2.0, structured) == pytest.approx(1e-5, rel=1e-6)
        assert analytic_gaussian_delta(mech.sigma, 2.0, generic) > 2e-5
    else:
        law = mech.discrete
        # the snapped worst pair in grid units: the numeric part moves by <= sqrt(k)/2 cells
        # each, the one-hot values are grid points
        want = math.sqrt((2 * bound / law.grid + math.sqrt(k)) ** 2 + 2 * m / law.grid**2)
        assert law.terms.sensitivity == pytest.approx(want, rel=1e-12)
        assert law.terms.sensitivity == grid_sensitivity(bound, law.grid, k + 3 * m, m, 3 * m)
        assert law.terms.total <= 1e-5
        # its continuous part at the snapped distance, with the smoothing's eta, is the delta
        assert analytic_gaussian_delta(law.s, 2.0 - 2 * law.terms.eta, want) <= 1e-5
        generic_spec = ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=math.sqrt(bound**2 + m),
                                   features=[f"x{j}" for j in range(k + 3 * m)],
                                   ranges={f"x{j}": (-1, 1) for j in range(k + 3 * m)})
        assert mech.sigma < generic_spec.sigma


def test_laplace_l1_structure():
    spec = ReleaseSpec(epsilon_x=2.0, delta=0.0, bound=1.0, mechanism="laplace", features=["a", "w"],
                       ranges={"a": (0, 10)}, categories={"w": CATS})
    mech = spec.feature_mechanism
    assert spec.bound == 1.0 and mech.bound == 2.0            # B + m with m = 1
    assert mech.sensitivity <= 2 * 1.0 + 2 * 1


def test_public_one_hot_bit_identical_to_hand_release(tmp_path):
    df = _table(3000)
    kw = dict(epsilon_x=4.0, delta=1e-5, bound=1.0)
    out = _release(tmp_path, df, public_features=["w"], **kw)
    hand = {"a": df["a"], **{f"w={c}": (df["w"] == c).astype(np.float64) for c in CATS}, "y": df["y"]}
    names = ["a"] + [f"w={c}" for c in CATS]
    spec = ReleaseSpec(epsilon_y=2.0, ranges={"a": (0, 10), **{f"w={c}": (-1, 1) for c in CATS}},
                       public_features=names[1:], **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        release(pd.DataFrame(hand), tmp_path / "hand.parquet", spec, features=names, label="y",
                seed=3, overwrite=True)
    a, b = pq.read_table(out), pq.read_table(tmp_path / "hand.parquet")
    assert a.schema.names == b.schema.names
    for name in a.schema.names:
        assert a.column(name).equals(b.column(name)), name


def test_label_only_with_categorical_columns(tmp_path):
    df = _table(2000)
    out = _release(tmp_path, df, public_features=["a", "w"])
    meta = iwpfast.privacy.read_release_spec(out)
    assert meta.label_only and meta.released_features[1:] == tuple(f"w={c}" for c in CATS)
    model = iwpfast.IWPClassifier(alpha=0.1).fit(out)
    assert model.score(df) > 0.6        # the signal is strong: chance is ~0.5


def test_old_release_metadata_still_read(tmp_path):
    """A release without categorical columns keeps its format (version 1/2, no feature map),
    and the metadata of such a release reads back to the same spec."""
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=["a", "b"],
                       ranges={"a": (0, 1), "b": (0, 2)}, label="y")
    meta = spec.to_metadata(10)
    assert meta["format_version"] == 1 and "feature_map" not in meta
    assert meta["features"] == ["a", "b"] and list(meta["feature_ranges"]) == ["a", "b"]
    assert ReleaseSpec.from_metadata(meta) == spec
    pub = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=["a", "b"],
                      ranges={"a": (0, 1), "b": (0, 2)}, label="y", public_features=["b"])
    assert pub.to_metadata(10)["format_version"] == 2
    assert ReleaseSpec.from_metadata(pub.to_metadata(10)) == pub
    cat = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, features=["a", "w"],
                      ranges={"a": (0, 1)}, categories={"w": CATS})
    meta3 = cat.to_metadata(10)
    assert meta3["format_version"] == 3 and ReleaseSpec.from_metadata(meta3) == cat
    meta3["features"] = meta3["features"][:-1]
    with pytest.raises(iwpfast.exceptions.ReleaseSpecError):
        ReleaseSpec.from_metadata(meta3)


def test_cli_parsing_and_file(tmp_path):
    assert parse_categories(["w=A,B", "s=1,2"]) == {"w": ["A", "B"], "s": ["1", "2"]}
    with pytest.raises(InvalidInputError, match="NAME=A,B,C"):
        parse_categories(["w"])
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"w": CATS}))
    assert read_categories_file(f) == {"w": CATS}
    fm = FeatureMap.from_metadata(ReleaseSpec(epsilon_y=1.0, features=["w"], categories={"w": CATS},
                                              public_features=["w"]).feature_map.to_metadata())
    assert fm.coordinates == tuple(f"w={c}" for c in CATS)


def test_cli_release_with_categories_file(tmp_path, capsys):
    from iwpfast.cli import main
    df = _table(300)
    src = tmp_path / "raw.parquet"
    df.to_parquet(src)
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"w": CATS[:2]}))
    out = tmp_path / "rel.parquet"
    rc = main(["release", str(src), str(out), "--features", "a=0:10", "w", "--categories-file", str(f),
               "--unknown-category", "Other", "--public", "w", "--epsilon-x", "4",
               "--epsilon-y", "2", "--bound", "1"])
    assert rc == 0
    names = pq.read_table(out).schema.names
    assert names == ["a", "w=Private", "w=Self-emp, inc", "w=Other", "y"]


def test_learner_sees_one_hot_as_private_and_the_released_vector_bound(tmp_path):
    df = _table(1000)
    out = _release(tmp_path, df, epsilon_x=4.0, delta=1e-5, bound=0.5)
    spec = iwpfast.privacy.read_release_spec(out)
    model = iwpfast.IWPClassifier(alpha=0.1, learning_rate=0.05).fit(out)
    # every released coordinate, one-hot ones included, debiased for its own noise variance
    np.testing.assert_allclose(model.noise_var_, spec.feature_noise_variances())
    assert model.noise_var_.min() > 0
    # the clean released vector: numeric part <= 0.5, one block of norm 1
    assert model._pass.noise.feature_bound == pytest.approx(math.sqrt(0.25 + 1))


def test_ranges_from_data_refuses_a_string_column(tmp_path):
    spec = ReleaseSpec(epsilon_y=2.0, epsilon_x=4.0, delta=1e-5, bound=1.0, ranges_from_data=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        with pytest.raises(InvalidInputError, match=r"column 'w' has type (large_)?string.*--categories w="):
            release(_table(20), tmp_path / "x.parquet", spec, features=["a", "w"], label="y")
        # declared categorical, the numeric range alone is read from the data
        spec = ReleaseSpec(epsilon_y=2.0, epsilon_x=4.0, delta=1e-5, bound=1.0,
                           ranges_from_data=True, categories={"w": CATS})
        release(_table(20), tmp_path / "x.parquet", spec, features=["a", "w"], label="y")


def test_cli_categories_from_data_refuses_stdin(tmp_path, capsys):
    # the values are a read of their own: stdin would be used up before the release
    from iwpfast.cli import main
    rc = main(["release", "-", str(tmp_path / "rel.arrow"), "--features", "a=0:10", "w",
               "--categories-from-data", "w", "--epsilon-x", "4", "--epsilon-y", "2",
               "--bound", "1"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--categories-from-data" in err and "stdin" in err and "--categories NAME" in err
    assert not (tmp_path / "rel.arrow").exists()


def _codes_table(n=400, seed=5):
    rng = np.random.default_rng(seed)
    return pa.table({"a": rng.uniform(0, 10, n), "c": pa.array(rng.integers(1, 3, n), pa.int8()),
                     "s": rng.choice(["x", "z"], n), "y": rng.integers(0, 2, n)})


def test_a_declared_code_outside_the_column_type_never_occurs(tmp_path):
    """Issue 42 (D6): an int8 column declared with code 300 gave a traceback (pyarrow's cast of
    the declared codes); 300 cannot occur in int8, so its coordinate is always 0, as a declared
    category absent from the data (300 first: the other codes keep their own coordinates)."""
    table = _codes_table()
    spec = ReleaseSpec(epsilon_y=1.0, categories={"c": ["300", "1", "2"]}, public_features=["c"])
    out = tmp_path / "codes.parquet"
    release(table, out, spec, features=["c"], label="y")
    got = pq.read_table(out)
    codes = table["c"].to_numpy()
    assert got.column("c=300").to_numpy().sum() == 0
    for code in (1, 2):
        np.testing.assert_array_equal(got.column(f"c={code}").to_numpy(),
                                      (codes == code).astype(np.float32))
    unsigned = table.set_column(1, "c", table["c"].cast(pa.uint8()))
    spec = ReleaseSpec(epsilon_y=1.0, categories={"c": [1, 2, -1]}, public_features=["c"])
    release(unsigned, tmp_path / "u.parquet", spec, features=["c"], label="y")
    assert pq.read_table(tmp_path / "u.parquet").column("c=-1").to_numpy().sum() == 0


def test_an_integer_code_declared_twice_is_refused(tmp_path, capsys):
    """Issue 42 (D9): --categories k=1,01,2 on an integer column declared code 1 twice (its
    second coordinate always 0); a string column keeps "1" and "01" apart."""
    from iwpfast.cli import main
    table = _codes_table()
    spec = ReleaseSpec(epsilon_y=1.0, categories={"c": ["1", "01", "2"]}, public_features=["c"])
    with pytest.raises(InvalidInputError, match=r"column 'c' .* '1' and '01' are the same code 1"):
        release(table, tmp_path / "o.parquet", spec, features=["c"], label="y")
    pq.write_table(table, tmp_path / "in.parquet")
    assert main(["release", str(tmp_path / "in.parquet"), str(tmp_path / "o.parquet"),
                 "--features", "c", "--categories", "c=1,01,2", "--public", "c",
                 "--epsilon-y", "1"]) == 2
    err = capsys.readouterr().err
    assert "column 'c'" in err and "'01'" in err and err.count("\n") == 1
    assert not (tmp_path / "o.parquet").exists()
    strings = pa.table({"s": ["1", "01", "1"], "y": [0, 1, 0]})
    spec = ReleaseSpec(epsilon_y=1.0, categories={"s": ["1", "01"]}, public_features=["s"])
    release(strings, tmp_path / "s.parquet", spec, features=["s"], label="y")
    assert pq.read_table(tmp_path / "s.parquet").column("s=01").to_pylist() == [0, 1, 0]


def test_nan_in_a_float_code_column_is_a_missing_value(tmp_path):
    """Issue 42 (D11): NaN in a float code column stopped the release ("non-integer values")
    even with on_invalid="drop"; it is a missing value, as in a numeric column."""
    table = _codes_table()
    codes = table["c"].to_numpy().astype(np.float64)
    codes[7] = np.nan
    table = table.set_column(1, "c", pa.array(codes))
    spec = ReleaseSpec(epsilon_y=1.0, categories={"c": [1, 2]}, public_features=["c"])
    with pytest.raises(InvalidInputError, match=r"column 'c' has a missing value .*NaN.* row 7"):
        release(table, tmp_path / "o.parquet", spec, features=["c"], label="y")
    result = release(table, tmp_path / "o.parquet", spec, features=["c"], label="y",
                     on_invalid="drop")
    assert result.rows_dropped == 1 and result.rows_written == table.num_rows - 1


def test_cli_unknown_category_leaves_integer_code_columns_strict(tmp_path, capsys):
    """Issue 42 (D7): --unknown-category Other added "Other" to the integer-code column c too,
    and the release failed ("declared categories are not integer codes"); codes stay strict,
    an integer catch-all goes to every column."""
    from iwpfast.cli import main
    pq.write_table(_codes_table(), tmp_path / "in.parquet")
    base = ["release", str(tmp_path / "in.parquet"), str(tmp_path / "o.parquet"), "--features",
            "c", "s", "--public", "c", "s", "--epsilon-y", "1", "--overwrite"]
    assert main(base + ["--categories", "c=1,2", "--categories", "s=x",
                        "--unknown-category", "Other"]) == 0, capsys.readouterr().err
    got = pq.read_table(tmp_path / "o.parquet")
    assert got.column_names == ["c=1", "c=2", "s=x", "s=Other", "y"]
    assert got.column("s=Other").to_numpy().sum() > 0
    capsys.readouterr()
    assert main(base + ["--categories", "c=1", "--categories", "s=x",
                        "--unknown-category", "Other"]) == 2
    err = capsys.readouterr().err
    assert "column 'c' has 2" in err and "--unknown-category CODE, an integer" in err
    assert main(base + ["--categories", "c=1", "--categories", "s=x",
                        "--unknown-category", "9"]) == 0
    assert pq.read_table(tmp_path / "o.parquet").column_names == ["c=1", "c=9", "s=x", "s=9", "y"]
