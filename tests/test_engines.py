"""One word for the implementation choice: engine= ("numba" | "numpy" | "auto"), with the old
keywords kernel= / backend= and the old values "fused" / "reference" still working."""
import warnings

import numpy as np
import pytest

from iwpfast.engines import engine_from_keywords, resolve_engine
from iwpfast.exceptions import InvalidInputError


def test_values_and_synonyms():
    assert resolve_engine("numba") == "numba" and resolve_engine("fused") == "numba"
    assert resolve_engine("reference") == "numpy"
    with pytest.raises(InvalidInputError, match="engine='gpu'; use one of 'numba', 'numpy'"):
        resolve_engine("gpu", allowed=("numba", "numpy"))


def test_old_keyword_warns_and_is_honoured():
    with warnings.catch_warnings():
        warnings.simplefilter("error")                     # the new keyword: no warning
        assert engine_from_keywords("numpy", None, "kernel", default="auto") == "numpy"
        assert engine_from_keywords(None, None, "kernel", default="auto") == "auto"
    with pytest.warns(DeprecationWarning, match="kernel= is deprecated; use engine="):
        assert engine_from_keywords(None, "fused", "kernel", default="auto") == "numba"
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidInputError, match="disagree"):
        engine_from_keywords("numpy", "fused", "kernel", default="auto")


def test_release_privatize_and_fit_stream_take_engine():
    from iwpfast.privacy import ReleaseSpec, privatize

    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, ranges="a=0:1,b=0:1",
                       features=("a", "b"), label="y")
    X = np.random.default_rng(0).uniform(0, 1, (300, 2))
    y = np.where(X[:, 0] > 0.5, 1, -1)
    new_X, new_y = privatize(X, y, spec, seed=4, engine="numpy")
    with pytest.warns(DeprecationWarning, match="kernel="):
        old_X, old_y = privatize(X, y, spec, seed=4, kernel="numpy")
    np.testing.assert_array_equal(new_X, old_X)
    np.testing.assert_array_equal(new_y, old_y)
    with pytest.raises(InvalidInputError, match="engine="):
        privatize(X, y, spec, seed=4, engine="cuda")


def test_record_batch_rows_is_the_name_and_batch_rows_still_works(tmp_path):
    # "batch" in the SGD code is the minibatch (batch_size); the Arrow unit is a record batch
    import pyarrow as pa

    from iwpfast.io.sources import open_source

    table = pa.table({"a": np.arange(1000, dtype=np.float64)})
    sizes = [b.num_rows for b in open_source(table, record_batch_rows=300).batches()]
    assert max(sizes) <= 300 and sum(sizes) == 1000
    with pytest.warns(DeprecationWarning, match="batch_rows= is deprecated; use record_batch_rows="):
        old = [b.num_rows for b in open_source(table, batch_rows=300).batches()]
    assert old == sizes
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidInputError, match="disagree"):
        open_source(table, record_batch_rows=100, batch_rows=300)
