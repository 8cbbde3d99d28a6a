"""alpha/learning_rate = "auto" for k > 2 classes: every (grid point, class) pair is a head of the
same scan, scored on the same private hold-out, and each class chooses its own point by the
two-class rule (docs/tuning.md "k classes")."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import iwpfast
from iwpfast import IWPClassifier
from iwpfast.cli import main
from iwpfast.exceptions import InvalidInputError
from iwpfast.privacy import ReleaseSpec, release

FEATURES = ["f0", "f1", "f2"]
RANGES = {f: (-1.0, 1.0) for f in FEATURES}
NAMES = np.array(["a", "b", "c"])
W = np.array([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [-1.5, -1.5, 0.5]])


def _clean(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 3))
    y = np.argmax(X @ W.T + 0.3 * rng.standard_normal((n, 3)), axis=1)
    return X, y


def _spec(classes=("a", "b", "c")):
    return ReleaseSpec(epsilon_x=4, delta=1e-5, bound=1.7, epsilon_y=2.0, features=FEATURES,
                       ranges=RANGES, label="y", classes=list(classes))


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    X, y = _clean(4000, 0)
    df = pd.DataFrame(X, columns=FEATURES)
    df["y"] = NAMES[y]
    path = tmp_path_factory.mktemp("k") / "rel.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # seeded release: a test fixture
        release(df, path, _spec(), seed=3)
    return path


@pytest.fixture(scope="module")
def auto_model(released):
    return _fit(released)


def _fit(path, **fit_kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the tuning notes are asserted on tuning_
        return IWPClassifier(progress=False).fit(path, **fit_kw)


def test_auto_k_classes_from_a_release_learns_and_chooses_per_class(auto_model):
    model = auto_model
    k = 3
    assert model.alpha_.shape == (k,) and model.learning_rate_.shape == (k,)
    t = model.tuning_
    n_points = len(t["alpha"]) // k
    assert sorted(set(t["class"])) == ["a", "b", "c"]
    # small data: cross-validated (sgd/crossval.py), 10 folds of the grid on 9/10 of the rows
    # each, every row scored once, the chosen heads trained again on all of them
    assert t["n_validation"] == t["n_train"] == model.n_rows_seen_
    assert t["folds"] == 10
    assert t["heads"] <= 9 * k * n_points + k and t["passes"] <= 2 * 10 + 1 + 2
    for c, name in enumerate(["a", "b", "c"]):
        rows = [i for i, cls in enumerate(t["class"]) if cls == name]
        assert len(rows) == n_points
        chosen = [i for i in rows if t["chosen"][i]]
        assert len(chosen) == 1                 # every class chooses one of its own heads
        i = chosen[0]
        assert t["alpha"][i] == model.alpha_[c] and t["learning_rate"][i] == model.learning_rate_[c]
        # the fitted head runs with its own class's values
        cfg = model._pass.ovr.configs[c]
        assert (cfg.alpha, cfg.learning_rate, cfg.label_class) == (model.alpha_[c],
                                                                    model.learning_rate_[c], c)
    # accuracy on clean test data beats chance (the largest class share, <= 0.37 here) by 0.15:
    # over 6000 test rows the standard error of an accuracy is <= sqrt(0.25/6000) = 0.0065, so
    # the margin is > 20 standard errors (measured: 0.77)
    Xt, yt = _clean(6000, 1)
    chance = np.bincount(yt).max() / yt.size
    assert model.score(Xt, NAMES[yt]) >= chance + 0.15


def test_each_class_chooses_as_the_two_class_auto_on_class_against_rest():
    # with public labels a one-vs-rest head is a two-class head on (y == c): the k-class "auto"
    # must give, for every class, exactly the two-class "auto" model, table and choice
    X, y = _clean(1500, 2)
    Xn = X + np.random.default_rng(5).normal(0, 0.3, X.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ovr = IWPClassifier(progress=False).fit(Xn, y, noise_var=0.09)
        for c in range(3):
            two = IWPClassifier(progress=False).fit(Xn, (y == c).astype(int), noise_var=0.09)
            rows = [i for i, cls in enumerate(ovr.tuning_["class"]) if cls == c]
            np.testing.assert_array_equal(two.coef_[0], ovr.coef_[c])
            assert two.intercept_[0] == ovr.intercept_[c]
            assert (two.alpha_, two.learning_rate_) == (ovr.alpha_[c], ovr.learning_rate_[c])
            for key in ("alpha", "learning_rate", "risk", "stderr", "reliable", "chosen"):
                assert two.tuning_[key] == [ovr.tuning_[key][i] for i in rows], key


def test_auto_k_classes_is_deterministic_and_saved(released, auto_model, tmp_path):
    first, again = auto_model, _fit(released)
    np.testing.assert_array_equal(first.coef_, again.coef_)
    np.testing.assert_array_equal(first.alpha_, again.alpha_)
    assert first.tuning_["risk"] == again.tuning_["risk"]
    first.save(tmp_path / "m.json")
    loaded = iwpfast.load(tmp_path / "m.json")
    np.testing.assert_array_equal(loaded.alpha_, first.alpha_)
    np.testing.assert_array_equal(loaded.learning_rate_, first.learning_rate_)
    assert loaded.tuning_["class"] == first.tuning_["class"]
    for a, b in zip(loaded._pass.ovr.configs, first._pass.ovr.configs, strict=True):
        assert (a.alpha, a.learning_rate, a.mu, a.radius, a.variance_cap) == \
            (b.alpha, b.learning_rate, b.mu, b.radius, b.variance_cap)


def test_few_rows_use_the_centre_for_every_class():
    X, y = _clean(60, 3)
    with pytest.warns(iwpfast.NumericalWarning, match="too few to hold out"):
        model = IWPClassifier(progress=False).fit(X, y)
    assert model.alpha_.shape == (3,) and len(set(model.alpha_.tolist())) == 1
    assert model.tuning_["class"] == [0, 1, 2] and model.tuning_["heads"] == 3
    assert model.tuning_["chosen"] == [True] * 3


def test_validation_release_must_match_the_classes(released, tmp_path):
    X, y = _clean(800, 4)
    df = pd.DataFrame(X, columns=FEATURES)
    df["y"] = np.array(["a", "b", "d"])[y]
    other = tmp_path / "other.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release(df, other, _spec(classes=("a", "b", "d")), seed=4)
    with pytest.raises(InvalidInputError, match="same classes"):
        IWPClassifier(progress=False).fit(released, validation=other)


def test_cli_fit_a_k_class_release_with_the_defaults(released, tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["tune", str(released), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "alpha, learning rate per class (chosen by private validation): 'a':" in printed
    assert "x 3 classes" in printed
    chosen_lines = [line for line in printed.splitlines() if line.endswith("<- chosen")]
    assert len(chosen_lines) == 3 and all(not math.isnan(float(line.split()[3]))
                                          for line in chosen_lines)


def test_separate_validation_release_and_resume(released, tmp_path):
    X, y = _clean(1000, 6)
    df = pd.DataFrame(X, columns=FEATURES)
    df["y"] = NAMES[y]
    val = tmp_path / "val.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release(df, val, _spec(), seed=6)
    model = _fit(released, validation=val)
    # every training row trains, the whole validation release scores: 1 + 1000/4000 reads
    assert model.tuning_["n_validation"] == 1000 and model.tuning_["n_train"] == 4000
    assert model.tuning_["passes"] == pytest.approx(1.25)
    # a checkpointed k-class grid resumes to the same model
    ckpt = tmp_path / "ck.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = IWPClassifier(progress=False).fit(released, checkpoint=ckpt, checkpoint_every=1000,
                                                  keep_checkpoint=True)
        again = IWPClassifier(progress=False).fit(released, checkpoint=ckpt, resume=True)
    np.testing.assert_array_equal(first.coef_, again.coef_)
    np.testing.assert_array_equal(first.alpha_, again.alpha_)
