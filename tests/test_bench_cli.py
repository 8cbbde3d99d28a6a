import json

import numpy as np
import pytest

from iwpfast.benchmarks import format_bench, numpy_pass, run_bench
from iwpfast.exceptions import InvalidInputError


@pytest.mark.kernels
def test_bench_table_and_json(capsys):
    from iwpfast.cli import main

    assert main(["bench", "--rows", "3000", "--numpy-rows", "1000", "--repeats", "1",
                 "--features", "3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    names = [r["name"] for r in result["results"]]
    assert names[:3] == ["iwpfast IWP", "iwpfast clean", "NumPy (vectorized per batch)"]
    assert result["results"][0]["ratio_to_iwp"] == 1.0
    for r in result["results"]:
        assert r["rows_per_s"] > 0 and r["ratio_to_iwp"] > 0
    assert result["compile_seconds"] >= 0 and result["versions"]["numpy"] == np.__version__
    text = format_bench(result)
    assert "ratio to iwpfast IWP" in text and "compile" in text
    if result["versions"]["sklearn"]:
        assert "scikit-learn SGDClassifier.partial_fit" in names


@pytest.mark.kernels
def test_numpy_baseline_is_the_same_algorithm():
    # The NumPy row must compute what the kernel computes (else its speed means nothing).
    from iwpfast.sgd.reference import reference_finish, reference_run_chunk
    from iwpfast.sgd.state import HeadConfig, HeadState

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (3, 1000)) + 2.0 * rng.standard_normal((3, 1000))
    y = np.where(rng.uniform(size=1000) < 0.6, 1.0, -1.0)
    for loss in ("logistic", "exponential"):
        cfg = HeadConfig(loss=loss, mode="iwp", n_features=3, noise_var=np.full(3, 4.0),
                         label_keep_prob=0.73, batch_size=64, alpha=0.1, learning_rate=0.01,
                         radius=0.5)
        state = HeadState.new(cfg)
        reference_run_chunk(cfg, state, X, y)
        reference_finish(cfg, state)
        np.testing.assert_allclose(numpy_pass(cfg, X, y), state.theta, rtol=1e-10, atol=1e-14)


def test_bench_rejects_bad_arguments():
    with pytest.raises(InvalidInputError, match="loss"):
        run_bench(rows=1000, loss="squared_error")
    with pytest.raises(InvalidInputError, match="dtype"):
        run_bench(rows=1000, dtype="int8")
