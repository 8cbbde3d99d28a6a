"""Issue 43 item 2 and issue 47 items 1 and 6: one home for the settings (``iwpfast.settings``:
the search's options passed down explicitly, ``IWPFAST_*`` overrides), local files read without a
memory map unless asked (``IWPFAST_MEMORY_MAP=1``, ``--memory-map``), and a default fit whose
routine events are log lines, not warnings."""
import logging
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from iwpfast.exceptions import InvalidInputError
from iwpfast.io.filesystem import resolve
from iwpfast.io.format_readers import open_file
from iwpfast.settings import SearchOptions, Settings, current


# ------------------------------------------------------------------------------ the settings
def test_the_defaults_and_the_environment_overrides():
    assert current({}) == Settings()
    assert Settings().engine == "numba" and Settings().memory_map is False
    s = current({"IWPFAST_ENGINE": "numpy", "IWPFAST_MEMORY_MAP": "1",
                 "IWPFAST_CROSS_VALIDATE": "off", "IWPFAST_PRUNE_AT": "0.125, 0.5",
                 "IWPFAST_PRUNE_MIN_ROWS": "500", "IWPFAST_HALVING_KEEP": "0.5",
                 "IWPFAST_HELD_VALIDATION_BYTES": "1_000"})
    assert s.engine == "numpy" and s.memory_map is True
    assert s.search == SearchOptions(cross_validate=False, prune_at=(0.125, 0.5),
                                     prune_min_rows=500, halving_keep=0.5,
                                     held_validation_bytes=1000)
    assert current({"IWPFAST_PRUNE_AT": ""}).search.prune_at == ()          # no rungs
    assert current({"IWPFAST_ENGINE": "reference"}).engine == "numpy"       # the synonym
    for name, value in (("IWPFAST_MEMORY_MAP", "maybe"), ("IWPFAST_CROSS_VALIDATE_MAX_ROWS", "x"),
                        ("IWPFAST_ENGINE", "cuda")):
        with pytest.raises(InvalidInputError, match=name):
            current({name: value})


def test_no_module_switch_is_left():
    """The switches of before live in ``iwpfast.settings`` only (issue 43: tests pass options
    or set the environment, they do not assign module attributes)."""
    from iwpfast.estimators import _state
    from iwpfast.io import format_readers, sources
    from iwpfast.sgd import crossval, grid, tuning
    gone = {tuning: ("PRUNE_RULE", "HALVING_CREDIT", "PRUNE_CREDIT", "PRUNE_AT", "PRUNE_MIN_ROWS",
                     "HALVING_KEEP", "HALVING_MIN", "HELD_VALIDATION_BYTES", "_noise_floor",
                     "derived_step"),
            crossval: ("CROSS_VALIDATE", "CROSS_VALIDATE_MAX_ROWS", "CROSS_VALIDATE_HELD_BYTES"),
            grid: ("derived_step", "smoothness"), _state: ("ENGINE",),
            format_readers: ("PARQUET_MEMORY_MAP",), sources: ("PARQUET_MEMORY_MAP",)}
    for module, names in gone.items():
        for name in names:
            assert not hasattr(module, name), f"{module.__name__}.{name}"


def test_a_cluster_s_search_follows_options_that_say_so():
    assert SearchOptions().on_cluster() == SearchOptions(prune_at=(), hold_validation=False,
                                                         cross_validate=False)


# ------------------------------------------------------------------------------ memory map
def _files(tmp_path):
    table = pa.table({"a": np.arange(5000, dtype=np.float64), "y": np.ones(5000, np.int8)})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=1000)
    with ipc.new_file(str(tmp_path / "t.arrow"), table.schema) as w:
        for b in table.to_batches(max_chunksize=1000):
            w.write_batch(b)
    with ipc.new_stream(str(tmp_path / "s.arrows"), table.schema) as w:
        w.write_table(table)
    return table


@pytest.fixture
def parquet_calls(monkeypatch):
    """The keyword arguments of every ``pyarrow.parquet.ParquetFile`` the readers open."""
    calls = []
    real = pq.ParquetFile

    def recording(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(pq, "ParquetFile", recording)
    return calls


def _read(path) -> pa.Table:
    f = open_file(resolve(str(path)), 1000)
    batches = [b for _, b in f.located(0, ["a", "y"], 1000, 0, 0)]
    return f, pa.Table.from_batches(batches)


@pytest.mark.parametrize("env", [None, "0", "1"])
def test_local_files_are_read_without_a_memory_map_unless_asked(tmp_path, monkeypatch,
                                                                parquet_calls, env):
    table = _files(tmp_path)
    if env is None:
        monkeypatch.delenv("IWPFAST_MEMORY_MAP", raising=False)
    else:
        monkeypatch.setenv("IWPFAST_MEMORY_MAP", env)
    mapped = env == "1"
    f, read = _read(tmp_path / "t.parquet")
    assert read.equals(table)
    assert parquet_calls and all(c["memory_map"] is mapped for c in parquet_calls)
    for name in ("t.arrow", "s.arrows"):
        f, read = _read(tmp_path / name)
        assert read.equals(table)
        assert isinstance(f.mm, pa.MemoryMappedFile) is mapped, name
        assert f.num_rows == (5000 if name == "t.arrow" else None)
        # a second pass reads the same rows
        assert pa.Table.from_batches([b for _, b in f.located(0, ["a"], 1000, 0, 0)]).equals(
            table.select(["a"]))


def test_the_cli_flag_memory_map(tmp_path, monkeypatch):
    from iwpfast.cli import build_parser
    monkeypatch.setenv("IWPFAST_MEMORY_MAP", "0")          # restored when the test ends
    args = build_parser().parse_args(["info", str(tmp_path / "x.parquet")])
    assert not current().memory_map and not args.memory_map
    args = build_parser().parse_args(["fit", "--memory-map", str(tmp_path / "x.parquet"),
                                      "--out", str(tmp_path / "m.json")])
    assert args.memory_map and current().memory_map


# ------------------------------------------------------------------------------ warnings
def test_a_default_fit_gives_no_warning_and_logs_its_routine_events(caplog):
    """``python -W error`` runs a default fit: 'auto' on a small private problem yields a model
    that is not constant, with its routine events (heads diverged, pruned or left out) in
    ``tuning_["notes"]`` and the log, never a warning."""
    from iwpfast import IWPClassifier
    from iwpfast.sgd.tuning import routine_note
    rng = np.random.default_rng(3)
    n, sigma, keep = 6000, 0.5, 0.85
    X = rng.uniform(-1, 1, (n, 3))
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-(X @ np.array([2.0, -1.5, 1.0])))), 1, 0)
    Xn = X + rng.normal(0, sigma, X.shape)
    yn = np.where(rng.random(n) < keep, y, 1 - y)
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, "iwpfast.progress"):
        warnings.simplefilter("error")
        # NUMBA_DISABLE_JIT=1 runs the kernels as Python, where a diverging head's NumPy scalar
        # arithmetic warns on overflow; compiled kernels cannot warn, so this changes nothing
        # for the jitted run
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"iwpfast\._kernels")
        model = IWPClassifier(progress=False, solver="sgd").fit(Xn, yn, noise_var=sigma ** 2,
                                                  label_keep_prob=keep,
                                                  feature_bound=float(np.sqrt(3)))
    assert np.any(model.coef_ != 0) and len(set(model.predict(X))) == 2
    routine = [n for n in model.tuning_["notes"] if routine_note(n)]
    assert any("diverged" in n for n in routine)          # the events are still told
    logged = [r.getMessage() for r in caplog.records if "auto hyper-parameters" in r.getMessage()]
    assert logged == [f"auto hyper-parameters: {n}" for n in routine]


def test_routine_notes_are_told_from_the_ones_to_act_on():
    from iwpfast.sgd.grid import GridPoint, edge_note
    from iwpfast.sgd.grid_scan import diverged_notes
    from iwpfast.sgd.tuning import routine_note
    assert routine_note(diverged_notes(["a"])[0])
    assert routine_note("class 'b': " + diverged_notes(["a"], points=True)[0])
    assert not routine_note(edge_note("largest step", GridPoint(0.1, 1.0)))
    assert not routine_note("no head's private validation risk is reliable (see tuning_)")
