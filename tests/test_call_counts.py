"""Each piece of work on the way down ``fit(path)`` and ``iwpfast release`` happens once (issue 37,
"parse once"): counters around the metadata's decoding, the spec's construction, the calibrations,
the folder listings and the destination check.  tools/call_counts.py prints the same counts (and
main's) with a profiler; these tests keep them from creeping back.

A calibration is a pure function of public parameters, computed once per process and parameter
set: the counters wrap fresh caches, so a count is what a fresh process computes.
"""
import json
import types
import warnings
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import iwpfast
from iwpfast.cli import main
from iwpfast.io import filesystem, source_base, writer
from iwpfast.privacy import calibration, discrete
from iwpfast.privacy.spec import ReleaseSpec

NAMES = ["x0", "x1", "x2"]


@pytest.fixture
def counts(monkeypatch):
    """A Counter-like dict of the work done while the test runs."""
    seen = {key: 0 for key in ("decoded", "from_metadata", "specs", "analytic", "discrete",
                               "listed", "destination")}

    def counting(key, fn):
        def wrapper(*args, **kwargs):
            seen[key] += 1
            return fn(*args, **kwargs)
        return wrapper

    def loads(*args, **kwargs):
        seen["decoded"] += 1
        return json.loads(*args, **kwargs)
    # the release metadata's one JSON decoding (io/source_base.parse_release_metadata)
    monkeypatch.setattr(source_base, "json", types.SimpleNamespace(
        loads=loads, JSONDecodeError=json.JSONDecodeError))
    monkeypatch.setattr(ReleaseSpec, "from_metadata", classmethod(
        counting("from_metadata", ReleaseSpec.from_metadata.__func__)))
    monkeypatch.setattr(ReleaseSpec, "__post_init__",
                        counting("specs", ReleaseSpec.__post_init__))
    # fresh caches around the counters: a call counted is a calibration computed
    monkeypatch.setattr(calibration, "_analytic_sigma", lru_cache(maxsize=None)(
        counting("analytic", getattr(calibration._analytic_sigma, "__wrapped__",
                                   calibration._analytic_sigma))))
    monkeypatch.setattr(discrete, "calibrate_discrete", lru_cache(maxsize=None)(
        counting("discrete", getattr(discrete.calibrate_discrete, "__wrapped__",
                                   discrete.calibrate_discrete))))
    monkeypatch.setattr(filesystem.Location, "listdir",
                        counting("listed", filesystem.Location.listdir))
    monkeypatch.setattr(writer, "check_destination",
                        counting("destination", writer.check_destination))
    return seen


def _raw_folder(tmp_path, n=2000):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 10, size=(n, len(NAMES)))
    y = (rng.random(n) < 1 / (1 + np.exp(-(X[:, 0] - X[:, 1]) / 3))).astype(np.int8)
    raw = tmp_path / "raw"
    raw.mkdir()
    pq.write_table(pa.table({**{c: X[:, j] for j, c in enumerate(NAMES)}, "y": y}),
                   raw / "part-0.parquet")
    return raw


def _release_command(raw, out):
    argv = ["release", str(raw), str(out), "--features", *NAMES,
            "--ranges", *(f"{c}=0:10" for c in NAMES), "--epsilon-x", "1", "--epsilon-y", "1",
            "--seed", "1"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the seeded-release warning: a simulation
        assert main(argv) == 0


def test_release_command_builds_and_calibrates_its_spec_once(tmp_path, counts, capsys):
    raw = _raw_folder(tmp_path)
    _release_command(raw, tmp_path / "r.parquet")
    # one spec, one calibration of each kind; before: 5 specs, each calibrating (580 evaluations)
    assert counts["specs"] == 1
    assert counts["analytic"] == 1 and counts["discrete"] == 1
    assert counts["from_metadata"] == 0            # nothing read back to be re-validated
    assert counts["listed"] == 1                   # the source folder (before: 4 times)
    assert counts["destination"] == 1              # (before: twice)


def test_fit_reads_the_metadata_once_and_calibrates_at_most_once(tmp_path, counts, capsys):
    raw = _raw_folder(tmp_path)
    path = tmp_path / "r.parquet"
    _release_command(raw, path)
    for key in counts:
        counts[key] = 0
    calibration._analytic_sigma.cache_clear()
    discrete.calibrate_discrete.cache_clear()
    est = iwpfast.IWPClassifier().fit(str(path))
    # decoded once, one spec validated once (its stored noise checked against one calibration
    # of its parameters); before: decoded 8 times, the spec built and calibrated twice
    assert counts["decoded"] == 1
    assert counts["from_metadata"] == 1 and counts["specs"] == 1
    assert counts["analytic"] == 1 and counts["discrete"] == 1
    assert est.release_spec_ == ReleaseSpec.from_metadata(
        pq.read_schema(path).metadata[b"iwpfast.release"])
    # a second fit of a release with the same parameters computes no calibration at all
    for key in counts:
        counts[key] = 0
    iwpfast.IWPClassifier(alpha=1e-2, learning_rate=0.1).fit(str(path))
    assert counts["decoded"] == 1 and counts["specs"] == 1
    assert counts["analytic"] == 0 and counts["discrete"] == 0


def test_auto_makes_one_config_per_grid_point(tmp_path, monkeypatch, capsys):
    raw = _raw_folder(tmp_path)
    path = tmp_path / "r.parquet"
    _release_command(raw, path)
    made = []
    make = iwpfast.IWPClassifier._make_config

    def counting(self, v, *args, **kwargs):
        made.append((v["alpha"], v["learning_rate"]))
        return make(self, v, *args, **kwargs)
    monkeypatch.setattr(iwpfast.IWPClassifier, "_make_config", counting)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = iwpfast.IWPClassifier(solver="sgd").fit(str(path))
    points = list(zip(est.tuning_["alpha"], est.tuning_["learning_rate"], strict=True))
    # no probe config before the grid (before: one at alpha = step = 1); one per grid point for
    # every fold of the cross-validation (this release is small, sgd/crossval.py) and the chosen
    # point's once more, for its pass over all the rows
    chosen = points[est.tuning_["chosen"].index(True)]
    assert sorted(made) == sorted([*points, chosen])
