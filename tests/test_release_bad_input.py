import importlib
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iwpfast.exceptions import InvalidInputError
from iwpfast.privacy import ReleaseSpec, release

# the package exports the function ``release``, which shadows the module of the same name
release_module = importlib.import_module("iwpfast.privacy.privatizer")

FEATURES = ["age", "hours"]


def table(n=4000, seed=0, **overrides):
    r = np.random.default_rng(seed)
    cols = {"age": r.integers(17, 95, n).astype(np.float64), "hours": r.uniform(0, 99, n),
            "y": r.integers(0, 2, n)}
    cols.update(overrides)
    return pa.table(cols)


def spec(**kw):
    base = dict(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, ranges="age=0:99,hours=0:99")
    base.update(kw)
    return ReleaseSpec(**base)


def leftovers(directory):
    return sorted(os.listdir(directory))


@pytest.mark.parametrize("bad, word", [(np.nan, r"non-finite value \(nan\)"),
                                       (np.inf, r"non-finite value \(inf\)"), (None, "null")])
def test_invalid_feature_value_names_column_and_row(tmp_path, bad, word):
    hours = table()["hours"].to_pylist()
    hours[2345] = bad
    t = table(hours=pa.array(hours, pa.float64()))
    out = tmp_path / "o.parquet"
    with pytest.raises(InvalidInputError,
                       match=rf"'hours' has .*{word}.*row 2345 of the stream.*--on-invalid drop"):
        release(t, out, spec(), features=FEATURES, label="y", record_batch_rows=1000)
    assert leftovers(tmp_path) == []  # failed release: nothing at the destination, no temp file


def test_invalid_rows_dropped_and_counted(tmp_path):
    hours = table()["hours"].to_numpy().copy()
    hours[[3, 1999]] = np.nan
    ys = table()["y"].to_pylist()
    ys[7] = None
    t = table(hours=hours, y=pa.array(ys, pa.int64()))
    res = release(t, tmp_path / "o.parquet", spec(), features=FEATURES, label="y", on_invalid="drop")
    assert res.rows_dropped == 3 and res.rows_written == 3997
    assert pq.read_table(tmp_path / "o.parquet").num_rows == 3997


def test_labels_not_binary_list_values_seen(tmp_path):
    t = table(y=np.array([0, 1, 2] * 1000 + [0] * 1000))
    with pytest.raises(InvalidInputError, match=r"not binary.*values seen.*0, 1, 2"):
        release(t, tmp_path / "o.parquet", spec(), features=FEATURES, label="y")
    t = table(y=np.array([0.0, 0.5, 1.0, 1.0] * 1000))
    with pytest.raises(InvalidInputError, match=r"0\.5"):
        release(t, tmp_path / "o.parquet", spec(), features=FEATURES, label="y")
    t = table(y=pa.array(["a", "b"] * 2000))
    with pytest.raises(InvalidInputError, match=r"'a', 'b'"):
        release(t, tmp_path / "o.parquet", spec(), features=FEATURES, label="y")
    assert leftovers(tmp_path) == []


def test_mixed_label_encodings_across_batches(tmp_path):
    y = np.array([0, 1] * 1000 + [-1, 1] * 1000)
    with pytest.raises(InvalidInputError, match="mixes encodings"):
        release(table(y=y), tmp_path / "o.parquet", spec(), features=FEATURES, label="y",
                record_batch_rows=1000)


@pytest.mark.parametrize("kw, match", [
    (dict(epsilon_x=0.0), "epsilon_x.*> 0"),
    (dict(epsilon_x=-2.0), "epsilon_x.*> 0"),
    (dict(epsilon_y=0.0), "epsilon_y.*public labels"),
    (dict(delta=0.0), "delta.*between 0 and 1"),
    (dict(delta=1.5), "delta.*between 0 and 1"),
    (dict(bound=0.0), "bound.*sqrt"),
    (dict(bound=-1.0), "bound.*sqrt"),
])
def test_bad_privacy_parameters(kw, match):
    with pytest.raises(InvalidInputError, match=match):
        spec(**kw)


def test_missing_ranges_and_columns(tmp_path):
    with pytest.raises(InvalidInputError, match=r"no declared range for feature\(s\) hours.*hours=LO:HI"):
        release(table(), tmp_path / "o.parquet", spec(ranges="age=0:99"), features=FEATURES, label="y")
    with pytest.raises(InvalidInputError, match="nope"):
        release(table(), tmp_path / "o.parquet", spec(ranges="age=0:99,nope=0:1"),
                features=["age", "nope"], label="y")
    assert leftovers(tmp_path) == []


def test_destination_exists_refused_unless_overwrite(tmp_path):
    out = tmp_path / "o.parquet"
    out.write_bytes(b"precious")
    with pytest.raises(InvalidInputError, match="exists already.*overwrite"):
        release(table(), out, spec(), features=FEATURES, label="y")
    assert out.read_bytes() == b"precious"
    release(table(), out, spec(), features=FEATURES, label="y", overwrite=True)
    assert pq.read_table(out).num_rows == 4000


def test_interrupted_release_leaves_nothing(tmp_path, monkeypatch):
    calls = {"n": 0}
    original = release_module._Privatizer.run

    def interrupt_second_chunk(self, *a):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return original(self, *a)

    monkeypatch.setattr(release_module._Privatizer, "run", interrupt_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        release(table(), tmp_path / "o.parquet", spec(), features=FEATURES, label="y", record_batch_rows=1000)
    assert leftovers(tmp_path) == []
    with pytest.raises(KeyboardInterrupt):
        calls["n"] = 0
        release(table(), tmp_path / "o.arrow", spec(), features=FEATURES, label="y", record_batch_rows=1000)
    assert leftovers(tmp_path) == []


def test_release_of_a_release_refused(tmp_path):
    out = tmp_path / "o.parquet"
    release(table(), out, spec(), features=FEATURES, label="y")
    with pytest.raises(InvalidInputError, match="already an iwpfast release"):
        release(out, tmp_path / "again.parquet", spec(), features=FEATURES, label="y")


def test_unknown_output_extension_and_string_feature(tmp_path):
    with pytest.raises(InvalidInputError, match="format"):
        release(table(), tmp_path / "o.txt", spec(), features=FEATURES, label="y")
    t = table(hours=pa.array(["x"] * 4000))
    with pytest.raises(InvalidInputError, match="'hours' has type string.*numeric"):
        release(t, tmp_path / "o.parquet", spec(), features=FEATURES, label="y")
    assert leftovers(tmp_path) == []


def test_a_zero_row_next_to_clipped_rows_warns_nothing(tmp_path):
    """Issue 42 (D10): a row at the centre of its ranges (norm 0) in a chunk where most rows clip
    (the dense path of clip_l2_) gave a "divide by zero" RuntimeWarning."""
    import warnings

    from iwpfast.privacy.mechanisms import clip_l2_
    t = table(age=np.r_[49.5, np.full(3999, 99.0)], hours=np.r_[49.5, np.full(3999, 0.0)])
    X = np.array([[0.0, 3.0, 0.1], [0.0, 4.0, 0.2]], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert clip_l2_(X, 1.0) == 1
        release(t, tmp_path / "o.parquet", spec(bound=0.5), features=FEATURES, label="y",
                engine="numpy", record_batch_rows=1000)
    np.testing.assert_array_equal(X[:, [0, 2]], np.array([[0.0, 0.1], [0.0, 0.2]], np.float32))
    assert np.linalg.norm(X[:, 1]) <= 1.0
    assert pq.read_table(tmp_path / "o.parquet").num_rows == 4000


@pytest.mark.parametrize("kw, match", [
    (dict(epsilon_y=1e-300), r"epsilon_y=1e-300 is too small .* epsilon_y >= 1e-09"),
    (dict(epsilon_y=1e-12, classes=[0, 1, 2]), r"epsilon_y=1e-12 is too small"),
    (dict(categories={"w": ["a", "b"]}, categorical_mechanism="rr", epsilon_categorical=1e-300),
     r"epsilon_categorical\['w'\]=1e-300 is too small .* >= 1e-09 \(CLI: --epsilon-cat\)"),
])
def test_a_randomized_response_budget_lost_to_rounding_is_refused(kw, match):
    """Issue 42 (D11): --epsilon-cat 1e-300 was accepted (q == r) and the fit then failed with
    "theta became non-finite"; the smallest budget is MIN_RR_EPSILON, which still works."""
    with pytest.raises(InvalidInputError, match=match):
        spec(**kw)
    small = {k: (1e-9 if k.startswith("epsilon") else v) for k, v in kw.items()}
    assert spec(**small) is not None
