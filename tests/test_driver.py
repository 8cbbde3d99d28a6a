"""fit_stream: chunk/file-split invariance, input types, heads, traces, noise parameters, schedules.

The default tests run the NumPy twin (engine="reference", identical semantics); the ones marked
`kernels` run the Numba engine on a few thousand rows."""
import itertools
import json
import math
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from pyarrow import csv

from iwpfast.exceptions import InvalidInputError, NumericalWarning, ReleaseSpecError
from iwpfast.sgd.driver import Head, fit_stream, noise_from_release
from iwpfast.sgd.schedules import default_radius, paper_learning_rate
from iwpfast.sgd.state import HeadConfig

N = 2503
FEATURES = ["a", "b", "c"]
META = {"format": "iwpfast.release", "features": FEATURES, "label": "y",
        "feature_bound": 1.0, "feature_noise_scale": [0.3, 0.4, 0.5], "label_keep_prob": 0.8,
        "row_count": N}


def make_table(n=N, seed=0, meta=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * 0.5
    y = np.where(X @ [1.0, -0.5, 0.2] + 0.3 * rng.normal(size=n) > 0, 1, -1).astype(np.int8)
    t = pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": y})
    if meta:
        t = t.replace_schema_metadata({b"iwpfast.release": json.dumps(META).encode()})
    return t


def heads():
    # META's noise (its sigmas squared, its keep probability), given explicitly: META is a
    # hand-made dict, not a release a spec can be read from
    iwp = HeadConfig(loss="logistic", mode="iwp", n_features=3,
                     noise_var=np.array(META["feature_noise_scale"]) ** 2,
                     label_keep_prob=META["label_keep_prob"], batch_size=16, learning_rate=0.05,
                     radius=3.0, average_start=20, fit_intercept=True)
    naive = HeadConfig(loss="exponential", mode="naive", n_features=2, noise_var=np.zeros(2),
                       batch_size=7, learning_rate=0.05, schedule="inverse", mu=0.1)
    return [Head("iwp", iwp, FEATURES, "y"), Head("naive", naive, ["a", "b"], "y")]


def assert_same_states(r1, r2):
    assert r1.states.keys() == r2.states.keys()
    for name in r1.states:
        a1, a2 = r1.states[name].arrays(), r2.states[name].arrays()
        for key in ("theta", "theta_avg", "intercept", "intercept_avg", "telemetry", "counters"):
            np.testing.assert_array_equal(a1[key], a2[key], err_msg=f"{name}.{key}")


@pytest.fixture(scope="module")
def table():
    return make_table()


@pytest.fixture(scope="module")
def baseline(table):
    return fit_stream(table, heads(), chunk_rows=N, engine="reference", progress=False)


def test_result_fields(baseline):
    assert baseline.n_rows == N and baseline.release_metadata == META
    tel = baseline.telemetry["iwp"]
    assert tel["rows_seen"] == N and tel["batches"] == math.ceil(N / 16)
    assert baseline.telemetry["naive"]["batches"] == math.ceil(N / 7)
    assert tel["grad_norm_mean"] > 0 and tel["grad_norm_var"] >= 0
    # sigma^2 |theta|^2 recorded for the IWP head, 0 for the naive one
    assert tel["max_noise_energy"] > 0 and baseline.telemetry["naive"]["max_noise_energy"] == 0
    # the model learned the sign pattern of the generating direction (1, -0.5, 0.2)
    theta = baseline.states["iwp"].theta
    assert theta[0] > 0 and theta[1] < 0


@pytest.mark.parametrize("chunk_rows", [1, 13, 256, 1000])
def test_chunk_size_invariance_is_bit_exact(table, baseline, chunk_rows):
    if chunk_rows == 1:
        table = table.slice(0, 300)  # 1-row chunks: keep the test fast
        ref = fit_stream(table, heads(), chunk_rows=300, engine="reference", progress=False)
    else:
        ref = baseline
    r = fit_stream(table, heads(), chunk_rows=chunk_rows, engine="reference", progress=False)
    assert_same_states(r, ref)


def test_file_split_and_row_groups_do_not_change_the_model(table, baseline, tmp_path):
    d = tmp_path / "parts"
    d.mkdir()
    cuts = [0, 1, 700, 701, 1999, N]
    for i, (lo, hi) in enumerate(itertools.pairwise(cuts)):
        pq.write_table(table.slice(lo, hi - lo), d / f"part-{i}.parquet", row_group_size=97 + i)
    r = fit_stream(str(d), heads(), chunk_rows=128, engine="reference", progress=False)
    assert_same_states(r, baseline)


def test_every_input_type_gives_the_same_model(table, baseline, tmp_path):
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=500)
    feather.write_feather(table, tmp_path / "f.arrow", chunksize=333)
    csv.write_csv(table, tmp_path / "f.csv")  # float64 values round-trip exactly through text
    X = np.column_stack([table[c].to_numpy() for c in FEATURES])
    inputs = {
        "parquet": str(tmp_path / "f.parquet"), "ipc": str(tmp_path / "f.arrow"),
        "csv": str(tmp_path / "f.csv"), "dataset": ds.dataset(str(tmp_path / "f.parquet")),
        "reader": pa.RecordBatchReader.from_batches(table.schema, table.to_batches(111)),
        "pandas": table.to_pandas(),
        "dict": {c: table[c].to_numpy() for c in table.column_names},
    }
    for src in inputs.values():
        r = fit_stream(src, heads(), chunk_rows=400, engine="reference", progress=False)
        assert_same_states(r, baseline)
    # (X, y) arrays: columns are called x0, x1, x2 and y
    renamed = [Head(h.name, h.config, [f"x{FEATURES.index(c)}" for c in h.features], "y")
               for h in heads()]
    r = fit_stream((X, table["y"].to_numpy()), renamed, chunk_rows=400, engine="reference",
                   progress=False)
    assert_same_states(r, baseline)


def test_heads_in_one_scan_equal_separate_scans(table, baseline):
    for h in heads():
        alone = fit_stream(table, [h], chunk_rows=500, engine="reference", progress=False)
        np.testing.assert_array_equal(alone.states[h.name].theta, baseline.states[h.name].theta)


def test_trace_callback_receives_theta_every_k_updates(table, baseline):
    got = {"iwp": [], "naive": []}
    steps = {"iwp": [], "naive": []}

    def cb(s, p):
        for name in s:
            steps[name].append(s[name])
            got[name].append(p[name])

    r = fit_stream(table, heads(), chunk_rows=300, engine="reference", progress=False,
                   trace_every=10, trace_callback=cb)
    assert_same_states(r, baseline)  # tracing does not change the model
    for name in ("iwp", "naive"):
        st = np.concatenate(steps[name])
        batches = r.telemetry[name]["batches"]
        np.testing.assert_array_equal(st, np.arange(10, batches + 1, 10))
        params = np.concatenate(got[name])
        assert params.shape == (len(st), len(r.states[name].theta) + 1)
    # the last recorded row is the final (theta, b) when the last update is a multiple of k
    short = make_table(n=160 * 16)  # 160 updates of 16 rows: the last one is recorded
    last = {}
    r2 = fit_stream(short, heads()[:1], chunk_rows=999, engine="reference", progress=False,
                    trace_every=10, trace_callback=lambda s, p: last.update(p))
    np.testing.assert_array_equal(last["iwp"][-1, :3], r2.states["iwp"].theta)
    assert last["iwp"][-1, 3] == r2.states["iwp"].intercept[0]


def test_states_continue_a_previous_pass(table, baseline):
    h = heads()[:1]  # batch 16: split at a multiple of 16 so no partial batch is run in between
    first = fit_stream(table.slice(0, 1600), h, engine="reference", progress=False)
    second = fit_stream(table.slice(1600), h, engine="reference", progress=False,
                        states=first.states)
    np.testing.assert_array_equal(second.states["iwp"].theta, baseline.states["iwp"].theta)


@pytest.mark.filterwarnings("ignore::iwpfast.exceptions.NumericalWarning")
def test_epochs_equal_the_data_repeated(table):
    h = heads()
    with pytest.warns(UserWarning, match="single pass"):
        two = fit_stream(table, h, epochs=2, chunk_rows=600, engine="reference", progress=False)
    twice = pa.concat_tables([table, table])
    ref = fit_stream(twice, h, chunk_rows=900, engine="reference", progress=False)
    assert_same_states(two, ref)


def test_missing_column_error_lists_the_columns_found(table):
    h = heads()[0]
    bad = Head("x", h.config, ["a", "b", "zz"], "y")
    with pytest.raises(InvalidInputError, match=r"'zz'.*\['a', 'b', 'c', 'y'\]"):
        fit_stream(table, [bad], engine="reference", progress=False)


def test_noise_from_release():
    from iwpfast.privacy import ReleaseSpec
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=FEATURES,
                       ranges={f: (0, 1) for f in FEATURES}, public_features=["b"], label="y")
    meta = spec.to_metadata(N)
    variance = spec.feature_mechanism.variance
    n = noise_from_release(meta, ["c", "b", "a"])
    np.testing.assert_array_equal(n.noise_var, [variance, 0.0, variance])   # b is public
    assert n.label_keep_prob == spec.label_keep_prob and n.origin == "release"
    assert n.spec == spec and n.metadata is meta and n.feature_bound == math.sqrt(2.0)
    # the spec itself gives the same model (the metadata is only read into it)
    by_spec = noise_from_release(spec, ["c", "b", "a"])
    np.testing.assert_array_equal(by_spec.noise_var, n.noise_var)
    assert by_spec.label_keep_prob == n.label_keep_prob and by_spec.metadata is None
    import iwpfast.sgd
    assert type(n) is iwpfast.sgd.NoiseModel is iwpfast.sgd.NoiseParameters   # new name and old
    with pytest.raises(ReleaseSpecError, match="no release metadata"):
        noise_from_release(None, ["a"])
    with pytest.warns(UserWarning, match="explicitly"):
        e = noise_from_release(None, ["a", "b"], noise_var=0.5, label_keep_prob=0.7)
    np.testing.assert_array_equal(e.noise_var, [0.5, 0.5])
    assert e.origin == "explicit"
    with pytest.raises(ReleaseSpecError, match="contradicts"):
        noise_from_release(meta, ["a"], noise_var=[1.0])
    with pytest.raises(ReleaseSpecError, match="not among the released"):
        noise_from_release(meta, ["a", "clean_a"])
    # a hand-made dict is no release: refused, not read field by field
    with pytest.raises(ReleaseSpecError, match="format version"):
        noise_from_release(META, ["a"])
    # a noise law this version has no record of: refused by name, not debiased as Gaussian noise
    future = {**meta, "noise": {"law": "future_law", "grid": 0.5, "scale": 1.0, "variance": 0.3}}
    with pytest.raises(ReleaseSpecError, match="unknown noise law 'future_law'"):
        noise_from_release(future, ["a"])


def test_paper_schedule_is_resolved_from_the_row_count(table):
    h = heads()[0]
    cfg = HeadConfig(**{**h.config.__dict__, "schedule": "paper", "alpha": 0.5})
    r = fit_stream(table, [Head("p", cfg, FEATURES, "y", paper_A=2.0, paper_smoothness=1.0)],
                   engine="reference", progress=False)
    used = r.configs["p"]
    n_updates = math.ceil(N / 16)
    expect = min(math.log(max(2, 0.5 ** 2 * 3.0 ** 2 * n_updates / 2.0)) / (0.5 * n_updates), 0.5)
    assert used.schedule == "constant" and used.learning_rate == pytest.approx(expect, rel=1e-15)
    # the row count of a RecordBatchReader is unknown
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
    with pytest.raises(InvalidInputError, match="row count"):
        fit_stream(reader, [Head("p", cfg, FEATURES, "y")], engine="reference", progress=False)


def test_schedule_helpers():
    # cap 1/(2K) wins for tiny n; the log term for large n
    assert paper_learning_rate(1.0, 1.0, 1, 1.0, 10.0) == pytest.approx(0.05)
    assert paper_learning_rate(0.1, 2.0, 10**6, 5.0, 1.0) == pytest.approx(
        math.log(0.01 * 4 * 1e6 / 5) / (0.1 * 1e6))
    assert default_radius("logistic", 2.0, 0.5) == 2.0
    assert default_radius("exponential", 2.0, 0.5) == 4.0
    with pytest.raises(InvalidInputError, match="mu > 0"):
        paper_learning_rate(0.0, 1.0, 10, 1.0, 1.0)


def test_warning_when_the_pass_ends_on_the_sphere(table):
    h = heads()[0]
    cfg = HeadConfig(**{**h.config.__dict__, "radius": 0.05, "learning_rate": 1.0})
    with pytest.warns(NumericalWarning, match="projection sphere"):
        r = fit_stream(table, [Head("s", cfg, FEATURES, "y")], engine="reference",
                       progress=False)
    assert r.telemetry["s"]["on_sphere"] and r.telemetry["s"]["projection_hits"] > 0


def test_warning_when_the_correction_factor_grows(table):
    big = HeadConfig(loss="exponential", mode="iwp", n_features=3, noise_var=np.full(3, 9.0),
                     batch_size=16, learning_rate=0.5, radius=2.0)
    with pytest.warns(NumericalWarning, match=r"exp\(sigma\^2 \|theta\|\^2\)"):
        r = fit_stream(table, [Head("e", big, FEATURES, "y")], engine="reference",
                       progress=False)
    assert r.telemetry["e"]["max_noise_energy"] > 8


def test_no_warning_on_a_healthy_run(table):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_stream(table, heads(), engine="reference", progress=False)


@pytest.mark.kernels
def test_numba_engine_matches_the_twin_and_is_chunk_invariant(table, baseline, tmp_path):
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=300)
    r1 = fit_stream(str(tmp_path / "f.parquet"), heads(), chunk_rows=128, progress=False)
    r2 = fit_stream(table, heads(), chunk_rows=1000, progress=False)
    assert_same_states(r1, r2)
    for name in r1.states:  # same formulas, float64 sums in another order: 1e-9 agreement
        np.testing.assert_allclose(r1.states[name].theta, baseline.states[name].theta,
                                   rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------ heads run in parallel threads
def three_heads():
    h = heads()
    third = HeadConfig(loss="exponential", mode="iwp", n_features=3,
                       noise_var=h[0].config.noise_var, label_keep_prob=0.8, batch_size=5,
                       learning_rate=0.002, radius=5.0)
    return h + [Head("iwp_exp", third, FEATURES, "y")]


@pytest.mark.parametrize("engine", ["reference",
                                    pytest.param("numba", marks=pytest.mark.kernels)])
def test_parallel_heads_are_bit_identical_to_sequential(table, engine):
    seq = fit_stream(table, three_heads(), chunk_rows=300, engine=engine, progress=False,
                     head_threads=1)
    for threads in (None, 2, 3, 8):
        par = fit_stream(table, three_heads(), chunk_rows=300, engine=engine, progress=False,
                         head_threads=threads)
        assert_same_states(par, seq)


def test_head_threads_must_be_positive(table):
    with pytest.raises(InvalidInputError, match="head_threads=0"):
        fit_stream(table, heads(), head_threads=0, engine="reference", progress=False)


def test_head_pool_raises_the_first_error_after_every_thread_finished():
    import threading
    import time
    from types import SimpleNamespace

    from iwpfast.sgd.scan import _HeadPool
    done = []
    lock = threading.Lock()

    def run_chunk(cfgs, sts, X, y, sample_weight=None):   # units of heads (here one head each)
        (cfg,) = cfgs
        if cfg == "slow":
            time.sleep(0.2)  # finishes long after the failing heads raised
        with lock:
            done.append((cfg, X))
        if cfg.startswith("bad") and X == 1:
            raise InvalidInputError(cfg)

    names = ["bad1", "slow", "bad2"]
    hs = [SimpleNamespace(name=c, config=c, label="y") for c in names]
    states = {c: SimpleNamespace(carry_n=0) for c in names}        # nothing carried
    pool = _HeadPool([[h] for h in hs], states, {c: (0, None) for c in names}, run_chunk, 3)
    try:
        for k in range(2):
            pool.submit(SimpleNamespace(features=[k], labels={"y": None}))
        with pytest.raises(InvalidInputError, match="bad1"):  # the first head in head order
            pool.wait()
        # chunk 0 done by all; chunk 1 done by all (the failing heads stop after it)
        assert sorted(done) == sorted((c, k) for c in names for k in range(2))
        with pytest.raises(InvalidInputError, match="bad1"):  # a failed pool refuses more work
            pool.submit(SimpleNamespace(features=[2], labels={"y": None}))
    finally:
        pool.close()
    assert not any(t.is_alive() for t in pool.threads)


def test_parallel_heads_with_trace_and_checkpoint_match_sequential(table, tmp_path):
    def run(threads, name):
        traces = []
        r = fit_stream(table, three_heads(), chunk_rows=256, engine="reference", progress=False,
                       head_threads=threads, trace_every=7,
                       trace_callback=lambda steps, params: traces.append(
                           {k: v.copy() for k, v in params.items()}),
                       checkpoint=str(tmp_path / name), checkpoint_every=1000)
        return r, traces

    seq, tr_seq = run(1, "seq.ckpt")
    par, tr_par = run(None, "par.ckpt")
    assert_same_states(par, seq)
    assert len(tr_seq) == len(tr_par) > 5
    for a, b in zip(tr_seq, tr_par, strict=True):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


def test_default_head_threads_keeps_a_core_for_decoding(table, tmp_path, monkeypatch):
    from iwpfast.io.sources import open_source
    from iwpfast.sgd import driver
    pq.write_table(table, tmp_path / "f.parquet")
    feather.write_feather(table, tmp_path / "f.arrow")
    parquet, ipc, mem = (open_source(str(tmp_path / "f.parquet")),
                         open_source(str(tmp_path / "f.arrow")), open_source(table))
    assert not parquet.cheap_decode and ipc.cheap_decode and mem.cheap_decode
    monkeypatch.setattr(driver, "usable_cores", lambda: 2)
    assert [driver.default_head_threads(3, s) for s in (parquet, ipc, mem)] == [1, 3, 3]
    assert driver.default_head_threads(1, ipc) == 1
    # heads fused into one unit: one thread per core (the unit cut in two); a grid of heads
    # takes both cores from Parquet too (the decoder shares)
    assert [driver.default_head_threads(3, s, 1) for s in (parquet, ipc, mem)] == [1, 2, 2]
    many = driver.MANY_HEADS
    assert [driver.default_head_threads(many, s, 1) for s in (parquet, ipc, mem)] == [2, 2, 2]
    monkeypatch.setattr(driver, "usable_cores", lambda: 3)
    assert driver.default_head_threads(3, parquet) == 3
    monkeypatch.setattr(driver, "usable_cores", lambda: 1)
    assert driver.default_head_threads(3, mem) == 1
    assert driver.default_head_threads(driver.MANY_HEADS, mem) == 1
