"""The default never fails (issue 45 item 3): no DivergenceError out of a default fit on a wide,
imbalanced, one-hot release; where every head of the derived grid diverges its steps are tried
smaller, and where nothing is left the fit is the best constant with one warning and a tuning_
entry of learner 'constant'."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import iwpfast
from iwpfast.cli import main
from iwpfast.exceptions import NumericalWarning, PrivacyLeakWarning
from iwpfast.privacy import ReleaseSpec, release

#: one-hot sizes of the categorical columns (KDD census-like: ~200 coordinates here, 7 numeric)
SIZES = [9, 17, 52, 47, 24, 15, 5, 10, 6, 3, 8, 6]
RANGES = {"age": (0, 90), "wage": (0, 10000), "cap_gain": (0, 100000), "cap_loss": (0, 5000),
          "dividends": (0, 100000), "weeks": (0, 52), "employers": (0, 6)}
CATS = {f"c{j}": [f"v{i}" for i in range(k)] for j, k in enumerate(SIZES)}


def _table(n: int, seed: int = 0) -> pd.DataFrame:
    """Heavy-tailed numeric columns, skewed categories, ~6% positives."""
    rng = np.random.default_rng(seed)
    age = rng.integers(0, 91, n).astype(float)
    num = {"age": age,
           "wage": np.where(rng.random(n) < 0.06, rng.gamma(2, 600, n), 0.0),
           "cap_gain": np.where(rng.random(n) < 0.04, rng.gamma(1, 5000, n), 0.0),
           "cap_loss": np.where(rng.random(n) < 0.02, rng.gamma(3, 500, n), 0.0).clip(0, 5000),
           "dividends": np.where(rng.random(n) < 0.1, rng.gamma(1, 2000, n), 0.0),
           "weeks": np.where(rng.random(n) < 0.5, 52.0, rng.integers(0, 53, n).astype(float)),
           "employers": rng.integers(0, 7, n).astype(float)}
    margin = (-3.3 + 0.04 * (age - 40) - 0.0006 * (age - 45) ** 2 + 0.03 * (num["weeks"] - 26)
              + 0.0002 * num["cap_gain"] + 0.0005 * num["dividends"] + 0.2 * num["employers"])
    cats = {}
    for j, (name, values) in enumerate(CATS.items()):
        k = len(values)
        codes = rng.choice(k, n, p=rng.dirichlet(np.full(k, 0.5)))
        margin = margin + rng.normal(0, 0.6 if j < 6 else 0.2, k)[codes]
        cats[name] = np.array(values)[codes]
    y = (rng.random(n) < 1 / (1 + np.exp(-margin))).astype(np.int64)
    return pd.DataFrame({**{k: v.clip(*RANGES[k]) for k, v in num.items()}, **cats, "y": y})


@pytest.fixture(scope="module")
def kdd_like(tmp_path_factory):
    """(label-only release at epsilon_y = 1, public-categorical release at (4, 2), clean test)."""
    d = tmp_path_factory.mktemp("kdd")
    full = _table(70_000)
    train, test = full.iloc[:60_000], full.iloc[60_000:].reset_index(drop=True)
    features = [*RANGES, *CATS]
    specs = {"label_only": ReleaseSpec(epsilon_y=1.0, ranges=RANGES, categories=CATS,
                                       public_features=tuple(features)),
             "public_cat": ReleaseSpec(epsilon_x=4.0, delta=1e-6, bound=1.0, epsilon_y=2.0,
                                       ranges=RANGES, categories=CATS,
                                       public_features=tuple(CATS))}
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)      # seeded: a simulation
        for i, (kind, spec) in enumerate(specs.items()):
            out[kind] = d / f"{kind}.parquet"
            release(train, out[kind], spec, features=features, label="y", seed=11 + i,
                    overwrite=True)
    return out, test


def _clean_risk(model, test):
    """The model's and the best constant's mean exponential loss on clean rows, and the SE of
    their paired difference."""
    u = model.decision_function(test)
    y = np.where(test["y"].to_numpy() > 0, 1.0, -1.0)
    p = float(np.mean(y > 0))
    b = 0.5 * math.log(p / (1 - p))
    diff = np.exp(-y * u) - np.exp(-y * b)
    return float(diff.mean()), float(diff.std(ddof=1) / math.sqrt(len(diff)))


@pytest.mark.parametrize("kind", ["label_only", "public_cat"])
def test_default_fit_never_diverges_on_wide_imbalanced_one_hot(kdd_like, kind):
    paths, test = kdd_like
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        model = iwpfast.IWPClassifier().fit(paths[kind])       # no DivergenceError
    assert np.all(np.isfinite(model.coef_)) and np.isfinite(model.intercept_).all()
    gap, se = _clean_risk(model, test)
    assert gap <= se, (gap, se)           # not worse than the constant by more than its SE
    majority = max(test["y"].mean(), 1 - test["y"].mean())
    assert model.score(test) >= majority - 0.01


def test_cli_fit_of_label_only_release(kdd_like, tmp_path, capsys):
    paths, _ = kdd_like
    out = tmp_path / "m.json"
    assert main(["fit", str(paths["label_only"]), "--out", str(out)]) == 0
    assert out.exists()
    assert "every head diverged" not in capsys.readouterr().out


def test_derived_grid_diverging_retries_smaller_steps(kdd_like, monkeypatch):
    """Every head of the derived grid diverges (its steps forced 1000 times larger): the same
    search tries the steps 1000 times smaller and chooses among those, with a note."""
    from iwpfast.sgd import grid
    paths, test = kdd_like
    monkeypatch.setattr(grid, "STEP_MULTIPLIERS", tuple(1e3 * m for m in grid.STEP_MULTIPLIERS))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        model = iwpfast.IWPClassifier().fit(paths["label_only"])
    t = model.tuning_
    assert "tried again 1000 times smaller" in t["notes"][0]
    assert set(t["learner"]) == {"sgd"} and sum(t["chosen"]) == 1
    gap, se = _clean_risk(model, test)
    assert gap <= se, (gap, se)


def test_every_head_diverging_returns_the_constant(kdd_like):
    paths, test = kdd_like
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        model = iwpfast.IWPClassifier(learning_rate=[1e6, 1e7]).fit(paths["label_only"])
    numerical = [w for w in got if issubclass(w.category, NumericalWarning)]
    assert len(numerical) == 1 and "constant" in str(numerical[0].message)
    assert np.all(model.coef_ == 0)
    t = model.tuning_
    assert t["learner"][-1] == "constant" and t["chosen"][-1]
    assert not any(t["chosen"][:-1]) and set(t["learner"][:-1]) == {"sgd"}
    # the best constant: half the log-odds of the (debiased) share, negative at ~6% positives
    p = test["y"].mean()
    assert model.intercept_[0] == pytest.approx(0.5 * math.log(p / (1 - p)), abs=0.15)
    assert model.score(test) == pytest.approx(1 - p)
