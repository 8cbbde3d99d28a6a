"""Search without re-reads (issue 47 item 5): a grid head that diverges is dropped within the scan it
diverges in -- on one machine and on a Dask cluster's shards alike (a head that diverges on one
shard leaves the merge) -- and the shards hold their validation rows on their workers, so a
default 'auto' fit reads its data as often on a cluster as on one machine: once."""
import warnings

import numpy as np
import pyarrow.parquet as pq
import pytest

distributed = pytest.importorskip("distributed")

from iwpfast import IWPClassifier  # noqa: E402
from iwpfast.distributed import DaskStreams, fit_files  # noqa: E402
from iwpfast.privacy import ReleaseSpec, release  # noqa: E402
from iwpfast.sgd.driver import Head, fit_stream, streams_on  # noqa: E402
from iwpfast.sgd.state import HeadConfig  # noqa: E402

N = 20_000
FEATURES = [f"x{i}" for i in range(10)]


@pytest.fixture(scope="module")
def client():
    # the workers are threads of this process, so that ``file_rows_read`` counts their reads
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                       dashboard_address=":0",
                                       scheduler_kwargs={"dashboard": False})
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def diverging(tmp_path_factory):
    """A release whose default grid has diverging heads (little noise: the grid's largest steps
    are too large for it), in row groups of 1,000 rows: the 2 shards' cut (row 10,000) is a row
    group's edge, so no batch is decoded by both shards."""
    d = tmp_path_factory.mktemp("nr")
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (N, len(FEATURES)))
    w = rng.normal(0, 1, len(FEATURES))
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ w))).astype(np.int64)
    spec = ReleaseSpec(epsilon_x=8.0, delta=1e-5, bound=1.5, epsilon_y=2.0, features=FEATURES,
                       ranges={f: (-1, 1) for f in FEATURES}, label="y")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release({**{f: X[:, i] for i, f in enumerate(FEATURES)}, "y": y}, d / "one.parquet",
                spec, seed=1)
    path = d / "r.parquet"
    pq.write_table(pq.read_table(d / "one.parquet"), path, row_group_size=1000)
    return path


def _fit(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(IWPClassifier(progress=False, solver="sgd"))


@pytest.mark.parametrize("held_bytes", [None, 0])
def test_auto_reads_as_often_on_a_cluster_as_on_one_machine(client, diverging, monkeypatch,
                                                            file_rows_read, held_bytes):
    # small data is cross-validated on one machine (never on a cluster): a single hold-out here
    monkeypatch.setenv("IWPFAST_CROSS_VALIDATE", "0")
    if held_bytes is not None:      # no rows held: the validation part is read again, on both
        monkeypatch.setenv("IWPFAST_HELD_VALIDATION_BYTES", str(held_bytes))
    reads, models = {}, {}
    for where, fit in (("one", lambda m: m.fit(diverging)),
                       ("dask", lambda m: fit_files(client, diverging, m, shards=2))):
        file_rows_read[0] = 0
        models[where] = _fit(fit)
        reads[where] = file_rows_read[0]
    passes = 1.0 if held_bytes is None else 2.0
    assert reads["one"] == reads["dask"] == passes * N, reads
    for m in models.values():
        notes = m.tuning_["notes"]
        assert m.tuning_["passes"] == passes
        assert any("diverged and were dropped" in n for n in notes), notes
        assert not any("repeated" in n or "again" in n for n in notes), notes


def test_held_validation_on_the_shards_scores_the_rows_a_reread_scores(client, diverging,
                                                                       monkeypatch):
    # the hold-out held on the workers and the one read again: the same rows scored, so the same
    # choice, the same model and the same risks up to the order of the sums
    monkeypatch.setenv("IWPFAST_CROSS_VALIDATE", "0")
    held = _fit(lambda m: fit_files(client, diverging, m, shards=2))
    monkeypatch.setenv("IWPFAST_HELD_VALIDATION_BYTES", "0")
    reread = _fit(lambda m: fit_files(client, diverging, m, shards=2))
    assert held.tuning_["passes"] == 1.0 and reread.tuning_["passes"] == 2.0
    assert list(held.tuning_["chosen"]) == list(reread.tuning_["chosen"])
    assert held.tuning_["n_validation"] == reread.tuning_["n_validation"] > 0
    np.testing.assert_allclose(held.tuning_["risk"], reread.tuning_["risk"], rtol=1e-10)
    np.testing.assert_array_equal(held.coef_, reread.coef_)


def _config(step):
    return HeadConfig(loss="exponential", mode="clean", n_features=2, noise_var=np.zeros(2),
                      batch_size=16, learning_rate=step, alpha=0.01, radius=np.inf,
                      truncation=2)


def test_a_head_diverging_on_one_shard_leaves_the_merge_in_the_same_pass(client, tmp_path,
                                                                          file_rows_read):
    # the second shard's rows are 1,000 times larger: a step of 0.05 diverges there only; the pass
    # goes on with the other head, is read once, and drops the head from the merge with the row
    # of the pass where it diverged (after the first shard's rows)
    import pyarrow as pa
    rng = np.random.default_rng(1)
    n = 8000
    x = rng.uniform(-1, 1, (n, 2))
    x[n // 2:] *= 1000.0
    y = np.where(x[:, 0] + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": x[:, 0], "b": x[:, 1], "y": y}), path, row_group_size=500)
    heads = [Head("small", _config(1e-9), ["a", "b"], "y"),
             Head("big", _config(0.05), ["a", "b"], "y")]
    from iwpfast.io.sources import open_source
    path = open_source(path)
    file_rows_read[0] = 0
    runner = DaskStreams(client, 2)
    with streams_on(runner):
        result = fit_stream(path, heads, progress=False, drop_diverged=True)
    assert file_rows_read[0] == n
    assert set(result.diverged) == {"big"} and n // 2 < result.diverged["big"] <= n
    assert np.all(np.isfinite(result.states["small"].theta))
    # the head kept: the bits of a pass without the diverged one
    with streams_on(runner):
        alone = fit_stream(path, heads[:1], progress=False)
    for key in ("theta", "theta_avg", "intercept", "intercept_avg", "counters"):
        np.testing.assert_array_equal(getattr(result.states["small"], key),
                                      getattr(alone.states["small"], key))
    # the diverged head's telemetry counts the rows every shard trained it on
    assert n // 2 < result.telemetry["big"]["rows_seen"] <= n
    # without drop_diverged the pass stops with the divergence, as on one machine
    from iwpfast.exceptions import DivergenceError
    with streams_on(runner), pytest.raises(DivergenceError):
        fit_stream(path, heads, progress=False)
