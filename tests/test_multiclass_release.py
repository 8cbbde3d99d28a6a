"""k-ary randomized response and multiclass releases (issue 13)."""
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iwpfast.cli import main
from iwpfast.exceptions import InvalidInputError, ReleaseSpecError
from iwpfast.privacy import (
    KaryRandomizedResponse,
    ReleaseSpec,
    kary_probabilities,
    privatize,
    read_release_spec,
    release,
)

# Statistical checks compare an empirical frequency with its probability and allow 5 standard
# errors sqrt(p(1-p)/n) (two-sided false-alarm probability ~6e-7 per check); seeds are fixed.
Z = 5.0
RANGES = {"a": (-1.0, 1.0), "b": (-1.0, 1.0)}


def rng(seed=0):
    return np.random.Generator(np.random.SFC64(seed))


@pytest.mark.parametrize("k, eps", [(3, 1.0), (5, 2.0), (10, 0.5)])
def test_kary_keep_and_flip_rates_within_5_se(k, eps):
    mech = KaryRandomizedResponse(eps, k)
    q, r = mech.keep_probability, mech.other_probability
    assert math.isclose(q, math.exp(eps) / (math.exp(eps) + k - 1), rel_tol=1e-14)
    assert math.isclose(q + (k - 1) * r, 1.0, rel_tol=1e-14)
    n = 200_000
    for true in (0, k - 1):
        out = mech.apply(np.full(n, true, np.int8), rng(true + k))
        assert out.min() >= 0 and out.max() < k
        freq = np.bincount(out, minlength=k) / n
        for o in range(k):
            p = q if o == true else r
            assert abs(freq[o] - p) <= Z * math.sqrt(p * (1 - p) / n), (true, o, freq[o], p)


@pytest.mark.parametrize("k, eps", [(3, 1.0), (5, 0.3), (7, 4.0)])
def test_kary_neighbour_probability_ratios_at_most_e_eps(k, eps):
    q, r = kary_probabilities(eps, k)
    channel = np.full((k, k), r) + np.eye(k) * (q - r)        # P(output o | true y)
    np.testing.assert_allclose(channel.sum(axis=1), 1.0, rtol=1e-14)
    ratios = channel[:, None, :] / channel[None, :, :]       # P(o|y) / P(o|y') for all y, y', o
    assert ratios.max() <= math.exp(eps) * (1 + 1e-12)
    assert math.isclose(ratios.max(), math.exp(eps), rel_tol=1e-12)   # and the bound is tight
    # the empirical channel agrees with the matrix (5 SE per cell)
    n = 60_000
    mech = KaryRandomizedResponse(eps, k)
    for true in range(k):
        freq = np.bincount(mech.apply(np.full(n, true, np.int16), rng(100 + true)), minlength=k) / n
        se = np.sqrt(channel[true] * (1 - channel[true]) / n)
        assert np.all(np.abs(freq - channel[true]) <= Z * se + 1e-12)


def test_two_classes_is_the_binary_mechanism():
    q, r = kary_probabilities(1.3, 2)
    assert q == 1.0 / (1.0 + math.exp(-1.3)) and r == 1.0 - q
    spec = ReleaseSpec(epsilon_x=1, delta=1e-5, bound=1, epsilon_y=1.3, features=["a", "b"],
                       ranges=RANGES, label="y", classes=["no", "yes"])
    assert spec.label_encoding == "pm1" and spec.label_keep_prob == q


def _data(n=4000, k=3, seed=0, strings=True):
    g = np.random.default_rng(seed)
    X = g.uniform(-1, 1, (n, 2))
    codes = g.integers(0, k, n)
    names = np.array([f"c{j}" for j in range(k)])
    return X, (names[codes] if strings else codes * 10), codes


def test_release_strings_and_numbers_as_class_indices(tmp_path):
    X, y, codes = _data()
    spec = ReleaseSpec(epsilon_x=2, delta=1e-5, bound=1.4, epsilon_y=None, features=["a", "b"],
                       ranges=RANGES, label="y", classes=["c0", "c1", "c2"])
    _, released = privatize(X, y, spec, seed=3)
    assert released.dtype == np.int8
    np.testing.assert_array_equal(released, codes)           # public labels: every label kept
    # numbers (declared as ints, column of ints): the same indices
    _, y_num, _ = _data(strings=False)
    spec_num = ReleaseSpec(epsilon_x=2, delta=1e-5, bound=1.4, epsilon_y=None, features=["a", "b"],
                           ranges=RANGES, label="y", classes=[0, 10, 20])
    np.testing.assert_array_equal(privatize(X, y_num, spec_num, seed=3)[1], codes)
    # a file carries the classes, q and r; info's statement names the mechanism
    table = pa.table({"a": X[:, 0], "b": X[:, 1], "y": y})
    pq.write_table(table, tmp_path / "raw.parquet")
    spec1 = ReleaseSpec(epsilon_x=2, delta=1e-5, bound=1.4, epsilon_y=1.0, ranges=RANGES,
                        classes=["c0", "c1", "c2"])
    release(tmp_path / "raw.parquet", tmp_path / "rel.parquet", spec1, features=["a", "b"],
            label="y", seed=1)
    meta = read_release_spec(tmp_path / "rel.parquet").to_metadata()
    q, r = kary_probabilities(1.0, 3)
    assert meta["classes"] == ["c0", "c1", "c2"] and meta["label_encoding"] == "class_index"
    assert meta["label_keep_prob"] == q and meta["label_other_prob"] == r
    written = pq.read_table(tmp_path / "rel.parquet")
    assert written.schema.field("y").type == pa.int8()
    assert set(np.unique(written.column("y").to_numpy())) <= {0, 1, 2}
    assert "k-ary randomized response" in read_release_spec(tmp_path / "rel.parquet").guarantee().statement


def test_two_classes_keep_the_binary_file_bit_for_bit(tmp_path):
    X, y, codes = _data(k=2)
    base = dict(epsilon_x=2, delta=1e-5, bound=1.4, epsilon_y=0.7, features=["a", "b"], ranges=RANGES,
                label="y")
    named = privatize(X, y, ReleaseSpec(**base, classes=["c0", "c1"]), seed=5)
    binary = privatize(X, codes, ReleaseSpec(**base), seed=5)
    np.testing.assert_array_equal(named[0], binary[0])
    np.testing.assert_array_equal(named[1], binary[1])
    assert named[1].dtype == np.int8 and set(np.unique(named[1])) == {-1, 1}


def test_labels_outside_the_classes_error_naming_the_row_or_are_dropped(tmp_path):
    X, y, _ = _data()
    y = y.astype(object)
    y[17] = "oops"
    spec = ReleaseSpec(epsilon_x=2, delta=1e-5, bound=1.4, epsilon_y=1.0, features=["a", "b"],
                       ranges=RANGES, label="y", classes=["c0", "c1", "c2"])
    with pytest.raises(InvalidInputError, match=r"'oops' at .*row 17.*declared classes.*--on-invalid drop"):
        privatize(X, y, spec, seed=0)
    Xt, yt = privatize(X, y, spec, seed=0, on_invalid="drop")
    assert Xt.shape[0] == len(y) - 1 and yt.shape == (len(y) - 1,)
    pq.write_table(pa.table({"a": X[:, 0], "b": X[:, 1], "y": y}), tmp_path / "raw.parquet")
    result = release(tmp_path / "raw.parquet", tmp_path / "rel.parquet", spec, seed=0, on_invalid="drop")
    assert result.rows_dropped == 1 and "outside the declared classes" in result.summary()


def test_bad_class_declarations_name_the_fix():
    base = dict(epsilon_x=2, delta=1e-5, bound=1.4, epsilon_y=1.0, features=["a", "b"], ranges=RANGES,
                label="y")
    with pytest.raises(InvalidInputError, match="at least 2 classes"):
        ReleaseSpec(**base, classes=["a"])
    with pytest.raises(InvalidInputError, match="twice"):
        ReleaseSpec(**base, classes=["a", "b", "a"])
    with pytest.raises(InvalidInputError, match="mixes numbers and strings"):
        ReleaseSpec(**base, classes=["a", 1, 2])
    with pytest.raises(InvalidInputError, match="regression"):
        ReleaseSpec(**{**base, "epsilon_y": None}, classes=[1, 2, 3], task="regression",
                    target_range=(0, 1))
    X, y, _ = _data(strings=False)                  # an int column, classes that are not numbers
    with pytest.raises(InvalidInputError, match="not of that type"):
        privatize(X, y, ReleaseSpec(**base, classes=["x", "y", "z"]), seed=0)


def test_edited_class_probabilities_are_refused():
    spec = ReleaseSpec(epsilon_x=2, delta=1e-5, bound=1.4, epsilon_y=1.0, features=["a", "b"],
                       ranges=RANGES, label="y", classes=[1, 2, 3, 4])
    meta = spec.to_metadata()
    assert ReleaseSpec.from_metadata(meta).classes == (1, 2, 3, 4)
    meta["label_keep_prob"] = 0.9
    with pytest.raises(ReleaseSpecError, match="label_keep_prob"):
        ReleaseSpec.from_metadata(meta)


def test_cli_release_with_classes_and_info(tmp_path, capsys):
    X, y, _ = _data(n=2000, k=4)
    pq.write_table(pa.table({"a": X[:, 0], "b": X[:, 1], "y": y}), tmp_path / "raw.parquet")
    args = ["release", str(tmp_path / "raw.parquet"), str(tmp_path / "rel.parquet"), "--features",
            "a=-1:1", "b=-1:1", "--label", "y", "--epsilon-x", "2", "--epsilon-y", "1",
            "--classes", "c0", "c1", "c2", "--seed", "1", "--no-progress"]
    assert main(args) == 65          # bad data (EX_DATAERR): c3 is not a declared class
    assert "iwpfast: error: label column 'y' has 'c3'" in capsys.readouterr().err
    assert main(args + ["--on-invalid", "drop"]) == 0
    assert "3 classes" in capsys.readouterr().out
    assert main(["info", str(tmp_path / "rel.parquet")]) == 0
    shown = capsys.readouterr().out
    assert "k-ary randomized response" in shown and "'c0', 'c1', 'c2'" in shown
