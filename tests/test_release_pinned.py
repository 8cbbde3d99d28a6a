"""Seeded releases pinned to their bits: a refactor of the release must not move a single one.

Each case releases a small fixed data set with a seed and hashes the released columns' values
(not the file bytes: the writer's version string and the metadata are not the noise). The digests
were taken on the code before the release was split into options / noise laws / privatizer /
writing modules; any change of a digest means the noise, the clipping, the scaling or
the label mechanism changed, which a seeded release promises not to do.  The NumPy and Numba
engines give the same bits (tests/test_release_kernel.py), so one digest serves both, and the
JIT-off run checks the twins against the same digests.
"""
import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iwpfast.privacy import ReleaseSpec, privatize, release


def _data(n=5000, seed=7):
    rng = np.random.default_rng(seed)
    x = {"a": rng.normal(0, 1, n).astype(np.float32), "b": rng.uniform(-3, 3, n),
         "c": rng.integers(0, 5, n).astype(np.int32)}
    y = (rng.random(n) < 0.4).astype(np.int64)
    return x, y


def _spec(noise, **kw):
    base = dict(epsilon_x=1.0, delta=1e-5, bound=1.2, epsilon_y=1.0, features=("a", "b", "c"),
                ranges={"a": (-3, 3), "b": (-3, 3), "c": (0, 4)}, noise=noise)
    base.update(kw)
    return ReleaseSpec(**base)


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str(a.dtype).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:24]


def _table_digest(table) -> str:
    return _digest(*[table.column(i).to_numpy() for i in range(table.num_columns)])


PINNED_MEMORY = {
    ("float", "numpy"): "d464806bb09596cd7fb1d12a",
    ("float", "numba"): "d464806bb09596cd7fb1d12a",
    ("discrete", "numpy"): "fab866ad8cef96af8c65aaaf",
    ("discrete", "numba"): "fab866ad8cef96af8c65aaaf",
}


@pytest.mark.parametrize("noise,engine", sorted(PINNED_MEMORY))
def test_privatize_bits_are_pinned(noise, engine):
    x, y = _data()
    X = np.column_stack([x["a"], x["b"], x["c"]])
    Xt, yt = privatize(X, y, _spec(noise, label="y"), seed=11, threads=2, engine=engine)
    assert _digest(Xt.T, yt) == PINNED_MEMORY[(noise, engine)]


PINNED_FILE = {
    ("float", "binary"): "a5dc6f5ef16583e83d212538",
    ("discrete", "binary"): "1105c9cafd8a699e84de00cd",
    ("float", "kary"): "fe8a67def4e68b37129a0649",
    ("discrete", "kary"): "42c49d0d91f03ddfdb07bd27",
    ("float", "regression"): "fcfc0bef1dcc1329e6af5763",
    ("discrete", "regression"): "5b4aedc44197b513e18854c2",
}


def _labelled(kind, n=5000):
    x, y = _data(n)
    rng = np.random.default_rng(3)
    if kind == "binary":
        return x, y, {}
    if kind == "kary":
        return x, np.array(["u", "v", "w"])[rng.integers(0, 3, n)], {"classes": ("u", "v", "w")}
    return x, rng.normal(0, 2, n), {"task": "regression", "target_range": (-5, 5)}


@pytest.mark.parametrize("engine", ["numpy", "numba"])
@pytest.mark.parametrize("noise,kind", sorted(PINNED_FILE))
def test_file_release_bits_are_pinned(tmp_path, noise, kind, engine):
    x, y, extra = _labelled(kind)
    src = tmp_path / "raw.parquet"
    pq.write_table(pa.table({**x, "y": y}), src, row_group_size=1500)
    out = tmp_path / "out.parquet"
    with pytest.warns(Warning):   # the seeded-release warning
        release(src, out, _spec(noise, label="y", **extra), seed=5, threads=2,
                record_batch_rows=2048, engine=engine)
    assert _table_digest(pq.read_table(out)) == PINNED_FILE[(noise, kind)]


PINNED_PARTS = {"float": "0c35fd919516e21c797c7b42", "discrete": "3b0159cc9affd06e72aac41c"}


@pytest.mark.parametrize("noise", sorted(PINNED_PARTS))
def test_multipart_release_bits_are_pinned(tmp_path, noise):
    x, y = _data(3000)
    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(3):
        part = {k: v[i * 1000:(i + 1) * 1000] for k, v in x.items()}
        pq.write_table(pa.table({**part, "y": y[i * 1000:(i + 1) * 1000]}), raw / f"f{i}.parquet")
    with pytest.warns(Warning):
        release(raw, str(tmp_path / "out") + "/", _spec(noise, label="y"), seed=9, threads=1)
    parts = sorted((tmp_path / "out").glob("part-*.parquet"))
    assert len(parts) == 3
    digests = [_table_digest(pq.read_table(p)) for p in parts]
    assert _digest(np.frombuffer("".join(digests).encode(), dtype=np.uint8)) == PINNED_PARTS[noise]
