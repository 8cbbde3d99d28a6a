"""Choices that reproduce (issue 47 item 4): the model file and ``iwpfast info`` record every
setting a fit used, ``resolved_params_`` gives them back as constructor parameters with 'auto'
resolved, and ``iwpfast fit REL --params-from MODEL`` trains with exactly those: the same
coefficients, bit for bit, as the 'auto' fit on the same file."""
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from iwpfast import IWPClassifier, load
from iwpfast.cli import main
from iwpfast.privacy import ReleaseSpec, privatize

#: small enough to be cross-validated (the chosen head is then trained again on every row)
ROWS = 6_000


@pytest.fixture(scope="module")
def release_file(tmp_path_factory):
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (ROWS, 3))
    y = (X[:, 0] - 0.5 * X[:, 2] + 0.3 * rng.standard_normal(ROWS) > 0.25).astype(int)
    spec = ReleaseSpec(features=["a", "b", "c"], label="y", epsilon_x=6.0, delta=1e-5, bound=1.0,
                       epsilon_y=2.0, ranges="a=0:1,b=0:1,c=0:1")
    path = tmp_path_factory.mktemp("rel") / "rel.parquet"
    pq.write_table(privatize(X, y, spec, seed=2).to_arrow(), path)
    return path


def _fitted(path):
    doc = json.loads(path.read_text())
    return doc["fitted"]


@pytest.mark.parametrize("extra", [["--solver", "sgd"], ["--solver", "moments"], []],
                         ids=["sgd", "moments", "default"])
def test_params_from_reproduces_the_auto_fit_bit_for_bit(release_file, tmp_path, extra, capsys):
    first, again = tmp_path / "auto.json", tmp_path / "again.json"
    assert main(["fit", str(release_file), "--out", str(first), "--progress", "none", *extra]) == 0
    assert main(["fit", str(release_file), "--out", str(again), "--progress", "none",
                 "--params-from", str(first)]) == 0
    a, b = _fitted(first), _fitted(again)
    assert a["coef"] == b["coef"] and a["intercept"] == b["intercept"]
    assert a.get("tuning") and not b.get("tuning")      # the second fit chose nothing
    resolved = load(first).resolved_params_
    assert isinstance(resolved["alpha"], float)
    if not extra:       # the default's choice across learners: the winner's parameters
        assert resolved["solver"] == load(first).solver_
    elif "moments" in extra:
        assert resolved["solver"] == "moments"
    else:
        # 'auto' resolved: its cap, tail average and step are numbers the file records
        assert resolved["variance_cap"] == 2.0 and isinstance(resolved["average"], int)
        assert resolved["average"] == a["average_start"] and resolved["truncation"] == 2
        assert resolved["learning_rate"] == a["learning_rate"] == b["learning_rate"]
    capsys.readouterr()
    assert main(["info", str(first)]) == 0
    text = capsys.readouterr().out
    assert "settings:" in text and "folds" in text and "--params-from" in text


def test_resolved_params_reproduce_the_fit_in_python(release_file, tmp_path):
    auto = IWPClassifier(progress=False).fit(release_file)
    path = tmp_path / "m.json"
    auto.save(path)
    loaded = load(path)
    assert loaded.resolved_params_ == auto.resolved_params_
    again = IWPClassifier(**loaded.resolved_params_).fit(release_file)
    assert np.array_equal(again.coef_, auto.coef_)
    assert np.array_equal(again.intercept_, auto.intercept_)
    # a fit with numbers resolves to itself
    assert again.resolved_params_ == auto.resolved_params_


def test_moments_resolved_alpha_is_a_number(release_file):
    auto = IWPClassifier(solver="moments", loss="quadratic", progress=False).fit(release_file)
    resolved = auto.resolved_params_
    assert resolved["solver"] == "moments" and isinstance(resolved["alpha"], float)
    again = IWPClassifier(**resolved).fit(release_file)
    assert np.array_equal(again.coef_, auto.coef_)
    assert np.array_equal(again.intercept_, auto.intercept_)


def test_params_from_refuses_hyper_parameter_options(release_file, tmp_path, capsys):
    model = tmp_path / "m.json"
    assert main(["fit", str(release_file), "--out", str(model), "--progress", "none",
                 "--alpha", "0.1", "--learning-rate", "0.1"]) == 0
    capsys.readouterr()
    assert main(["fit", str(release_file), "--out", str(tmp_path / "n.json"), "--progress",
                 "none", "--params-from", str(model), "--alpha", "1"]) == 2
    assert "drop --alpha" in capsys.readouterr().err


def test_unfitted_estimator_has_no_resolved_params():
    assert not hasattr(IWPClassifier(), "resolved_params_")
