"""One ``tuning_`` schema (issue 43): every learner writes its table through
``iwpfast.sgd.choice.tuning_table`` (docs/tuning.md "tuning_ schema"), so the common columns and
keys are present whatever learner chose the model."""
import warnings

import numpy as np
import pytest

from iwpfast import IWPClassifier
from iwpfast.privacy import ReleaseSpec, release
from iwpfast.sgd.choice import ENTRY_COLUMNS, LEARNERS, SEARCH_KEYS, entry_columns, tuning_table


def _check(t: dict, learners: set) -> None:
    for key in (*ENTRY_COLUMNS, *SEARCH_KEYS):
        assert key in t, key
    columns = entry_columns(t)
    n = len(t["alpha"])
    assert set(ENTRY_COLUMNS) <= set(columns) and all(len(v) == n for v in columns.values())
    assert set(t["learner"]) <= learners <= set(LEARNERS)
    assert t["folds"] is None or int(t["folds"]) >= 0


def test_the_builder_refuses_a_table_off_the_schema():
    entries = dict(alpha=[1.0], learning_rate=[0.1], risk=[0.5], stderr=[0.1], reliable=[True],
                   chosen=[True])
    kw = dict(rule="r", n_train=10, n_validation=2, passes=1.0, folds=0)
    t = tuning_table(entries, learner="sgd", **kw, heads=1)
    assert t["learner"] == ["sgd"] and t["edge"] is None and t["notes"] == [] and t["heads"] == 1
    with pytest.raises(ValueError, match="missing columns"):
        tuning_table({k: v for k, v in entries.items() if k != "chosen"}, learner="sgd", **kw)
    with pytest.raises(ValueError, match="not of 1 entries"):
        tuning_table(dict(entries, capped=[True, False]), learner="sgd", **kw)
    with pytest.raises(ValueError, match="unknown learners"):
        tuning_table(entries, learner="knn", **kw)
    with pytest.raises(ValueError, match="misplaced keys"):
        tuning_table(entries, learner="sgd", **kw, extra_column=[1.0])


def _data(n, k=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 3))
    y = (X @ np.array([2.0, -1.0, 0.5]) > 0).astype(int) if k == 2 else \
        np.digitize(X[:, 0] - X[:, 1], [-0.5, 0.5])
    return X + rng.normal(0, 0.3, X.shape), y


@pytest.mark.parametrize("case", ["sgd", "sgd k classes", "sgd untuned", "sgd k untuned",
                                  "moments", "rr"])
def test_every_learner_writes_the_common_schema(case, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case == "rr":
            rng = np.random.default_rng(1)
            import pandas as pd
            df = pd.DataFrame({"a": rng.uniform(0, 1, 2000), "c": rng.choice(["x", "y"], 2000)})
            df["y"] = ((df.c == "x") + df.a + rng.normal(0, 0.3, 2000) > 1).astype(int)
            out = str(tmp_path / "r.parquet")
            spec = ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                               ranges={"a": (0, 1)}, categories={"c": ["x", "y"]},
                               categorical_mechanism="rr", epsilon_categorical=1.0, label="y")
            release(df, out, spec, features=["a", "c"], label="y", seed=3)
            t = IWPClassifier(progress=False).fit(out).tuning_
            _check(t, {"rr"})
            assert t["folds"] == 0 and t["edge"] is None and "block_cap" in t
            return
        if case == "moments":
            X, y = _data(4000)
            t = IWPClassifier(solver="moments", loss="quadratic", progress=False).fit(
                X, y, noise_var=0.09, epsilon_y=2.0).tuning_
            _check(t, {"moments", "constant"})
            assert t["n_validation"] == t["n_train"] and t["folds"] >= 2
            return
        k = 3 if "k" in case.split() else 2
        n = 40 if "untuned" in case else 3000
        X, y = _data(n, k)
        t = IWPClassifier(progress=False, solver="sgd").fit(
            X, y, noise_var=0.09, epsilon_y=2.0, **({"classes": [0, 1, 2]} if k == 3 else {})
        ).tuning_
    _check(t, {"sgd"})
    assert len(t["learner"]) == len(t["alpha"]) == ((k if k > 2 else 1) if "untuned" in case
                                                          else len(t["alpha"]))
    assert t["folds"] is None if "untuned" in case else t["folds"] >= 0
    for key in ("heads", "variance_cap", "effective_rows", "noise_energy", "capped"):
        assert key in t                      # what `iwpfast fit` and `info` print
