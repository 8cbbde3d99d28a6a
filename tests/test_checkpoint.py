"""Checkpoints: atomic npz+JSON, resume bit-identical to an uninterrupted pass, refusals."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_driver import FEATURES, N, assert_same_states, heads, make_table

from iwpfast.exceptions import CheckpointError, InvalidInputError
from iwpfast.sgd.checkpoint import read_checkpoint, write_checkpoint
from iwpfast.sgd.driver import Head, fit_stream
from iwpfast.sgd.state import HeadConfig, HeadState


class Boom(Exception):
    pass


@pytest.fixture(scope="module")
def parquet(tmp_path_factory):
    d = tmp_path_factory.mktemp("ck")
    pq.write_table(make_table(), d / "f.parquet", row_group_size=400)
    return str(d / "f.parquet")


@pytest.fixture(scope="module")
def uninterrupted(parquet):
    return fit_stream(parquet, heads(), chunk_rows=250, engine="reference", progress=False)


def test_roundtrip_is_exact_and_leaves_no_temp_file(tmp_path):
    cfg = heads()[0].config
    st = HeadState.new(cfg, theta0=np.array([0.1, -0.2, 1 / 3]))
    st.counters[:] = [5, 2, 3, 0]
    path = tmp_path / "c.npz"
    write_checkpoint(path, {"iwp": st}, {"position": {"epoch": 0, "row": 77}})
    states, meta = read_checkpoint(path)
    assert meta["position"]["row"] == 77 and meta["heads"] == ["iwp"]
    for k, v in st.arrays().items():
        np.testing.assert_array_equal(states["iwp"].arrays()[k], v)
    assert os.listdir(tmp_path) == ["c.npz"]


def test_corrupt_checkpoint_is_refused(tmp_path):
    path = tmp_path / "c.npz"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="corrupt"):
        read_checkpoint(path)


@pytest.mark.parametrize("fail_after", [3, 7])  # checkpoints every 2 chunks of 250 rows
def test_resume_after_a_crash_is_bit_identical(parquet, uninterrupted, tmp_path, fail_after):
    ck = tmp_path / "run.ckpt"
    calls = []

    def crash(steps, params):  # called after each chunk's kernel calls: crash mid-stream
        calls.append(1)
        if len(calls) == fail_after:
            raise Boom

    with pytest.raises(Boom):
        fit_stream(parquet, heads(), chunk_rows=250, engine="reference", progress=False,
                   checkpoint=ck, checkpoint_every=500, trace_every=1, trace_callback=crash)
    _, meta = read_checkpoint(ck)
    assert 0 < meta["position"]["row"] < N and not meta["finished"]
    # resume with another chunk size: chunking does not change the model
    r = fit_stream(parquet, heads(), chunk_rows=333, engine="reference", progress=False,
                   checkpoint=ck, checkpoint_every=500, resume=True)
    assert r.resumed_from_row == meta["position"]["row"]
    assert_same_states(r, uninterrupted)
    # a finished checkpoint returns the same model without reading again
    again = fit_stream(parquet, heads(), engine="reference", progress=False, checkpoint=ck,
                       resume=True)
    assert_same_states(again, uninterrupted)


def test_mismatched_config_or_dataset_is_refused(parquet, tmp_path):
    ck = tmp_path / "run.ckpt"
    fit_stream(parquet, heads(), engine="reference", progress=False, checkpoint=ck)
    other = heads()
    other[0] = Head("iwp", HeadConfig(**{**other[0].config.__dict__, "learning_rate": 0.01}),
                    FEATURES, "y")
    with pytest.raises(CheckpointError, match="other heads or settings"):
        fit_stream(parquet, other, engine="reference", progress=False, checkpoint=ck,
                   resume=True)
    shorter = make_table(n=N - 1)
    with pytest.raises(CheckpointError, match="another dataset"):
        fit_stream(shorter, heads(), engine="reference", progress=False, checkpoint=ck,
                   resume=True)


def test_nan_mid_stream_keeps_the_last_checkpoint(tmp_path):
    t = make_table()
    c = t["c"].to_numpy().copy()
    c[2100] = np.nan
    t = t.set_column(2, "c", pa.array(c))
    path = tmp_path / "nan.parquet"
    pq.write_table(t, path, row_group_size=1000)
    ck = tmp_path / "run.ckpt"
    with pytest.raises(InvalidInputError) as info:
        fit_stream(str(path), heads(), chunk_rows=200, engine="reference", progress=False,
                   checkpoint=ck, checkpoint_every=400)
    msg = str(info.value)
    assert "nan.parquet" in msg and "row group 2" in msg and "'c'" in msg and "row 100" in msg
    states, meta = read_checkpoint(ck)  # intact and usable
    assert meta["position"]["row"] == 2000
    assert states["iwp"].telemetry[0] + states["iwp"].carry_n == 2000


CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
    from test_driver import heads
    from iwpfast.sgd.driver import fit_stream
    started = []
    def slow(steps, params):
        if not started:
            started.append(1)
            print("running", flush=True)
        time.sleep(0.02)
    fit_stream({parquet!r}, heads(), chunk_rows=50, engine="reference", progress=False,
               checkpoint={ck!r}, checkpoint_every=10**9, trace_every=1, trace_callback=slow)
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_writes_a_checkpoint_and_resume_is_bit_identical(parquet, uninterrupted,
                                                                tmp_path, sig):
    ck = str(tmp_path / "sig.ckpt")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = CHILD.format(root=root, tests=os.path.join(root, "tests"), parquet=parquet, ck=ck)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout.readline() == b"running\n"  # the pass has started (first chunk done)
    time.sleep(0.2)  # a few more 50-row chunks (each sleeps 20 ms)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    # checkpoint_every is huge: a checkpoint exists only because of the signal
    assert os.path.exists(ck), err.decode()[-2000:]
    if sig == signal.SIGINT:
        assert b"KeyboardInterrupt" in err
    else:
        assert proc.returncode == 128 + signal.SIGTERM
    _, meta = read_checkpoint(ck)
    assert 0 < meta["position"]["row"] < N
    r = fit_stream(parquet, heads(), chunk_rows=250, engine="reference", progress=False,
                   checkpoint=ck, resume=True)
    assert_same_states(r, uninterrupted)
