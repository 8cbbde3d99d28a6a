"""Shared test fixtures: one seed, data factories and config factories.

Statistical tests use fixed seeds (a test that passes by luck must pass every time); the seed
comes from one place so that a whole run can be repeated with another one when hunting a
flaky bound: ``IWPFAST_TEST_SEED=7 python -m pytest``.  Tests that pin a value computed from a
particular draw keep their own literal seed.

Factories are functions (``make_linear_data``, ``make_head_config``, ``run_in_chunks``,
``make_release_spec``, ``make_feature_table``); the ones most tests want are also fixtures that
return them, so a test asks for ``linear_data`` and calls it with the sizes it needs:

    def test_something(linear_data, head_config):
        X, y = linear_data(n=500, p=3)                  # (n, p) rows, labels in {-1, +1}
        cfg = head_config(loss="logistic", batch_size=8)

Module-level helpers of a test file use the functions: ``from tests.conftest import
make_head_config, run_in_chunks``.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

#: the base seed of the shared fixtures (IWPFAST_TEST_SEED overrides it)
BASE_SEED = int(os.environ.get("IWPFAST_TEST_SEED", "0"))


def pytest_configure(config):
    """Before a whole-suite run in parallel processes (pyproject's addopts) on an empty kernel
    cache: ``iwpfast warmup`` compiles the common kernels once, one fit per core, instead of every
    test process compiling the same ones at its first fit.  Nothing on a warm cache, in a test
    process, for a run of chosen files, or with the JIT off."""
    import subprocess
    import sys

    workers = config.getoption("numprocesses", None) if config.pluginmanager.hasplugin("xdist") else None
    whole_suite = getattr(config, "args_source", None) == pytest.Config.ArgsSource.TESTPATHS
    if (hasattr(config, "workerinput") or not isinstance(workers, int) or workers < 2
            or not whole_suite or os.environ.get("NUMBA_DISABLE_JIT") == "1"):
        return
    from iwpfast._kernels._options import CACHE_FOLDER

    if CACHE_FOLDER is None or any(CACHE_FOLDER.glob("*.nbi")):
        return
    subprocess.run([sys.executable, "-m", "iwpfast.cli", "warmup", "--jobs", str(workers)],
                   check=False, cwd=config.rootpath)


def make_linear_data(n: int = 600, p: int = 3, *, seed: int = BASE_SEED, regression: bool = False,
                     layout: str = "rows", dtype=np.float64, label_noise: float = 0.4,
                     intercept: float = 0.0):
    """A linear problem: X uniform on [-1, 1]^p, weights linspace(1, -0.5, p).

    Classification: y = sign(X w + intercept + label_noise * N(0, 1)) in {-1.0, +1.0};
    regression (``regression=True``): y = X w + intercept + 0.2 N(0, 1).
    ``layout="rows"`` gives X as (n, p) (estimators, solvers); ``"features"`` gives the (p, n)
    feature-major array the kernels and the driver's heads take.
    """
    if layout not in ("rows", "features"):
        raise ValueError(f"layout={layout!r}: 'rows' or 'features'")
    generator = np.random.default_rng(seed)
    X = generator.uniform(-1.0, 1.0, (n, p))
    w = np.linspace(1.0, -0.5, p)
    if regression:
        y = X @ w + intercept + 0.2 * generator.standard_normal(n)
    else:
        y = np.where(X @ w + intercept + label_noise * generator.standard_normal(n) > 0, 1.0, -1.0)
    X = X.astype(dtype)
    return (np.ascontiguousarray(X.T) if layout == "features" else X), y


@pytest.fixture()
def linear_data():
    """Factory: ``linear_data(n=600, p=3, *, seed=BASE_SEED, regression=False, layout="rows",
    dtype=np.float64, label_noise=0.4, intercept=0.0) -> (X, y)``."""
    return make_linear_data


def make_head_config(**overrides):
    """An ``iwpfast.sgd.state.HeadConfig`` with small-test defaults: exponential loss, mode iwp,
    p = 3 (or ``n_features``), noise variance 0.09 per feature, minibatch 16, learning rate 0.05,
    alpha 0.01, truncation 2; any field can be overridden."""
    from iwpfast.sgd.state import HeadConfig

    p = overrides.pop("n_features", 3)
    base = dict(loss="exponential", mode="iwp", n_features=p, noise_var=np.full(p, 0.09),
                batch_size=16, learning_rate=0.05, alpha=0.01, truncation=2)
    base.update(overrides)
    return HeadConfig(**base)


@pytest.fixture()
def head_config():
    """Factory: ``head_config(**overrides) -> HeadConfig`` (see ``make_head_config``)."""
    return make_head_config


def run_in_chunks(run_chunk, finish, cfg, X, y, chunk: int, *, state=None, sample_weight=None,
                  **state_kw):
    """Feed feature-major ``X`` (a (p, n) array or a list of columns) and ``y`` (and the rows'
    ``sample_weight``, if given) to ``run_chunk`` in chunks of ``chunk`` rows, then ``finish``;
    returns the state (``state``, or a new one made with ``state_kw``: ``trace_capacity``,
    ``theta0``).

    Works for the kernel wrapper (``iwpfast.sgd.engine``) and its NumPy twin
    (``iwpfast.sgd.reference``) alike."""
    from iwpfast.sgd.state import HeadState

    state = state if state is not None else HeadState.new(cfg, **state_kw)
    for start in range(0, y.shape[0], chunk):
        part = ([c[start:start + chunk] for c in X] if isinstance(X, list)
                else X[:, start:start + chunk])
        if sample_weight is None:
            run_chunk(cfg, state, part, y[start:start + chunk])
        else:
            run_chunk(cfg, state, part, y[start:start + chunk],
                      sample_weight=sample_weight[start:start + chunk])
    finish(cfg, state)
    return state


@pytest.fixture()
def chunked_run():
    """Factory: ``chunked_run(run_chunk, finish, cfg, X, y, chunk, *, state=None, **state_kw)``."""
    return run_in_chunks


def make_release_spec(**overrides):
    """An ``iwpfast.privacy.ReleaseSpec`` for three features x0, x1, x2 in [-1, 1] with label y:
    (epsilon_x=2, delta=1e-5), epsilon_y=2, bound sqrt(3); any field can be overridden."""
    from iwpfast.privacy import ReleaseSpec

    ranges = {f"x{j}": (-1.0, 1.0) for j in range(3)}
    base = dict(epsilon_x=2.0, delta=1e-5, bound=float(np.sqrt(3.0)), epsilon_y=2.0,
                features=tuple(ranges), ranges=ranges, label="y")
    base.update(overrides)
    return ReleaseSpec(**base)


def make_feature_table(n: int = 2000, p: int = 3, *, seed: int = BASE_SEED):
    """A ``pyarrow.Table`` with float64 columns x0..x{p-1} uniform on [-1, 1] and int8 labels y
    in {-1, +1} from the linear problem of ``make_linear_data``; no release metadata."""
    import pyarrow as pa

    X, y = make_linear_data(n, p, seed=seed)
    columns = {f"x{j}": X[:, j] for j in range(p)}
    columns["y"] = y.astype(np.int8)
    return pa.table(columns)



def write_raw_parts(folder, rows, *, seed: int = 0, row_group_size: int = 100):
    """``folder`` created with one Parquet input per entry of ``rows`` (``f0.parquet``, ...):
    float64 features a, b uniform on [-1, 1] and a 0/1 label y -- the inputs of a multi-part
    release; returns ``folder``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir()
    r = np.random.default_rng(seed)
    for i, n in enumerate(rows):
        pq.write_table(pa.table({"a": r.uniform(-1, 1, n), "b": r.uniform(-1, 1, n),
                                 "y": r.integers(0, 2, n)}), folder / f"f{i}.parquet",
                       row_group_size=row_group_size)
    return folder


def fail_part(monkeypatch, index: int, run) -> None:
    """Call ``run()``, a multi-part release, with part ``index`` failing on bad data (as a
    resumable run keeps its finished parts): the release raises, warning that it kept them."""
    from iwpfast.exceptions import InvalidInputError
    from iwpfast.privacy import multipart

    original = multipart.release_file

    def failing(source, destination, *args, **kwargs):
        if kwargs["part"]["index"] == index:
            raise InvalidInputError(f"part {index} failed")
        return original(source, destination, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(multipart, "release_file", failing)
        with pytest.raises(InvalidInputError, match="failed"), pytest.warns(UserWarning):
            run()


def write_release_rows(table, start: int, length: int, path) -> None:
    """Rows ``start:start+length`` of a read release ``table`` written to ``path`` as a release
    of their own: its metadata's ``row_count`` set to the rows written (a reader refuses a file
    whose stored count differs from its footer's)."""
    import json

    import pyarrow.parquet as pq

    meta = json.loads(table.schema.metadata[b"iwpfast.release"])
    piece = table.slice(start, length)
    pq.write_table(piece.replace_schema_metadata(
        {**table.schema.metadata,
         b"iwpfast.release": json.dumps(dict(meta, row_count=piece.num_rows))}), path)


@pytest.fixture()
def single_holdout(monkeypatch):
    """'auto' with the single hold-out only (``IWPFAST_CROSS_VALIDATE=0``, ``iwpfast.settings``):
    for tests that compare a local fit of small data with a path that never cross-validates (a
    cluster's pass, a stream read once, a checkpointed scan) or that check the one split itself."""
    monkeypatch.setenv("IWPFAST_CROSS_VALIDATE", "0")


@pytest.fixture()
def file_rows_read(monkeypatch):
    """A one-item list counting the rows read from files (``FileSource`` batches) from now on:
    tests of how often a fit reads its data set it back to 0 between fits."""
    from iwpfast.io import sources
    read = [0]
    original = sources.Source.located_batches

    def counting(self, *a, **kw):
        for origin, batch in original(self, *a, **kw):
            if isinstance(self, sources.FileSource):
                read[0] += batch.num_rows
            yield origin, batch

    monkeypatch.setattr(sources.Source, "located_batches", counting)
    return read


def cli_env() -> dict:
    """The environment of a CLI subprocess: this process's sys.path, so it imports the same
    iwpfast (an editable install or the checkout)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def cli_command(*args) -> list:
    """``python -m iwpfast.cli ARGS`` with this interpreter."""
    return [sys.executable, "-m", "iwpfast.cli", *args]
