"""The command line's messages and checks before work, each reproduced as a user met it (every test
failed on the code before): --classes with spaces, outputs checked before any data are read, a
full disk named, the unpublished release's fix, Dask's dashboard and warnings, the discrete
Laplace metadata and calibration messages."""
import errno
import json
import os
import socket
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iwpfast.cli import main
from iwpfast.exceptions import InvalidInputError, ReleaseSpecError
from iwpfast.io import open_source
from iwpfast.privacy import ReleaseSpec, release
from iwpfast.privacy.laplace import LAPLACE_EPSILON_MAX, LAPLACE_EPSILON_MIN, calibrate_laplace

EDU = ["no diploma", "high school", "bachelor", "graduate"]


def _err(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("iwpfast: error:") and len(err.splitlines()) == 1, err
    return err


@pytest.fixture
def people(tmp_path):
    r = np.random.default_rng(0)
    n = 3000
    path = tmp_path / "people.parquet"
    pq.write_table(pa.table({"AGEP": r.integers(18, 90, n), "WKHP": r.integers(0, 80, n),
                             "edu": r.choice(EDU, n)}), path)
    return path


def test_usage_md_k_class_example_runs_with_four_classes(people, tmp_path, capsys):
    """docs/usage.md "k classes": `--classes "no diploma" "high school" bachelor graduate` is 4
    classes (it was split at the spaces into 6, and the release refused)."""
    out = tmp_path / "people_ldp.parquet"
    assert main(["release", str(people), str(out), "--features", "AGEP=0:99", "WKHP=0:99",
                 "--label", "edu", "--epsilon-x", "4", "--epsilon-y", "2", "--classes",
                 "no diploma", "high school", "bachelor", "graduate", "--no-progress"]) == 0
    capsys.readouterr()
    meta = open_source(out).release_metadata
    assert meta["classes"] == EDU
    assert main(["info", str(out)]) == 0
    assert "no diploma" in capsys.readouterr().out
    # commas still separate classes within one argument
    from iwpfast.commands.release import parse_classes
    assert parse_classes(["c0,c1", "c2"]) == ["c0", "c1", "c2"]
    assert parse_classes(["0", "1", "2"]) == [0, 1, 2]


# ---------------------------------------------------------------- outputs checked before work
@pytest.mark.parametrize("command", ["fit", "tune"])
def test_fit_and_tune_check_out_before_reading_data(people, tmp_path, capsys, monkeypatch,
                                                    command):
    import iwpfast.io.sources as sources
    read = []
    original = sources.open_source

    def watched(*args, **kwargs):
        src = original(*args, **kwargs)
        batches = src.located_batches

        def counted(*a, **k):
            read.append(1)
            return batches(*a, **k)
        src.located_batches = counted
        return src

    monkeypatch.setattr(sources, "open_source", watched)
    base = [command, str(people), "--features", "AGEP", "WKHP", "--label", "edu", "--noise-var",
            "1", "--no-progress", "--classes", *EDU]
    missing = tmp_path / "nowhere" / "m.json"
    assert main([*base, "--out", str(missing)]) == 73      # EX_CANTCREAT (issue 47)
    err = _err(capsys)
    assert str(missing) in err and "does not exist" in err and "mkdir" in err
    locked = _locked_folder(tmp_path, monkeypatch)
    assert main([*base, "--out", str(locked / "m.json")]) == 73
    err = _err(capsys)
    assert str(locked / "m.json") in err and "not writable" in err
    assert read == []                          # refused before a single batch was read


def _locked_folder(tmp_path, monkeypatch):
    """A folder this process may not write (permission bits, and os.access told so: root may
    write anywhere)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    access = os.access

    def denied(path, mode, *args, **kwargs):
        if os.path.abspath(path) == str(locked) and mode & os.W_OK:
            return False
        return access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", denied)
    return locked


def test_too_little_free_space_is_refused_before_the_release(people, tmp_path, capsys,
                                                             monkeypatch):
    real = os.statvfs

    class Full:
        def __init__(self, st):
            self.f_bavail, self.f_frsize, self.f_blocks = 10, st.f_frsize, st.f_blocks

    monkeypatch.setattr(os, "statvfs", lambda p: Full(real(p)))
    out = tmp_path / "rel.parquet"
    assert main(["release", str(people), str(out), "--features", "AGEP=0:99", "WKHP=0:99",
                 "--label", "edu", "--epsilon-x", "4", "--epsilon-y", "2", "--classes", *EDU,
                 "--no-progress"]) == 73
    err = _err(capsys)
    assert str(out) in err and "free" in err and "needs about" in err
    assert os.listdir(tmp_path) == ["people.parquet"]


def test_a_full_disk_during_the_release_names_the_destination(people, tmp_path, capsys,
                                                             monkeypatch):
    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_batch", full)
    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    out = tmp_path / "rel.parquet"
    assert main(["release", str(people), str(out), "--features", "AGEP=0:99", "WKHP=0:99",
                 "--label", "edu", "--epsilon-x", "4", "--epsilon-y", "2", "--classes", *EDU,
                 "--no-progress"]) == 73
    err = _err(capsys)
    assert str(out) in err and "No space left" in err and "free space" in err
    assert os.listdir(tmp_path) == ["people.parquet"]          # nothing left behind


def test_the_unpublished_release_error_names_resume_and_overwrite(people, tmp_path):
    from iwpfast.privacy import multipart

    folder = tmp_path / "rel"
    folder.mkdir()
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, classes=EDU,
                       ranges="AGEP=0:99,WKHP=0:99")
    table = pq.read_table(people)
    multipart.release_batches(table.to_batches(), folder, spec, features=["AGEP", "WKHP"],
                              label="edu", index=0, release_id=multipart.new_release_id())
    with pytest.raises(ReleaseSpecError, match="--resume.*--overwrite") as info:
        open_source(folder)
    assert "Run it again" not in str(info.value)


# ---------------------------------------------------------------- Dask
def test_workers_start_no_dashboard_and_resource_warnings_are_not_ours(capsys):
    pytest.importorskip("distributed")
    import urllib.error
    import urllib.request

    from iwpfast.commands import print_warnings
    from iwpfast.distributed import close_client, local_client

    busy = socket.socket()
    try:
        busy.bind(("127.0.0.1", 8787))
        busy.listen()
    except OSError:
        pass                                   # in use already: the case of the issue anyway
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            client = local_client(1)
            try:
                with pytest.raises(urllib.error.HTTPError):     # 404: no dashboard
                    urllib.request.urlopen(client.dashboard_link, timeout=10)
            finally:
                close_client(client)
    finally:
        busy.close()
    assert not [w for w in caught if "8787" in str(w.message)]
    caught.append(warnings.WarningMessage(ResourceWarning("unclosed <socket.socket fd=7>"),
                                          ResourceWarning, "x.py", 1))
    print_warnings(caught)
    assert "ResourceWarning" not in capsys.readouterr().err and "unclosed" not in \
        capsys.readouterr().err


# ---------------------------------------------------------------- discrete Laplace
def _laplace_release(tmp_path):
    r = np.random.default_rng(0)
    src = tmp_path / "raw.parquet"
    pq.write_table(pa.table({"a": r.uniform(-1, 1, 500), "b": r.uniform(-1, 1, 500),
                             "y": r.integers(0, 2, 500)}), src)
    spec = ReleaseSpec(epsilon_x=1.0, delta=0.0, bound=1.0, epsilon_y=1.0, mechanism="laplace",
                       ranges="a=-1:1,b=-1:1")
    out = tmp_path / "lap.parquet"
    release(src, out, spec, ["a", "b"], "y")
    return out


def test_a_doubled_laplace_rate_in_the_metadata_is_refused(tmp_path):
    out = _laplace_release(tmp_path)
    meta = open_source(out).release_metadata
    ReleaseSpec.from_metadata(meta)                                  # as written: accepted
    edited = json.loads(json.dumps(meta))
    edited["noise"]["rate_numerator"] *= 2                           # half the noise claimed
    with pytest.raises(ReleaseSpecError, match="noise.rate_numerator"):
        ReleaseSpec.from_metadata(edited)
    edited = json.loads(json.dumps(meta))
    edited["noise"]["l1_bound_grid_units"] //= 2
    with pytest.raises(ReleaseSpecError, match="l1_bound_grid_units"):
        ReleaseSpec.from_metadata(edited)


def test_epsilon_effective_is_exact_and_never_above_epsilon():
    from fractions import Fraction
    for eps in (1.0, 0.5, 2.0, 1e4, 3.7, LAPLACE_EPSILON_MAX):
        law = calibrate_laplace(eps, 1.0, 3)
        exact = Fraction(2 * law.n_max * law.rate, 2 ** 62)
        assert exact <= Fraction(eps)
        assert Fraction(law.epsilon_effective) >= exact                      # rounded up
        assert law.epsilon_effective <= eps                                   # never above
    assert calibrate_laplace(1.0, 1.0, 3).epsilon_effective == 1.0           # 2 N lambda = eps


def test_laplace_epsilon_limits_blame_epsilon_and_match_what_is_accepted():
    with pytest.raises(InvalidInputError, match=r"epsilon_x=1e-09 is outside .* use an "
                                                r"epsilon_x between 1e-05 and 100000") as info:
        calibrate_laplace(1e-9, 1.0, 3)
    assert "bound" not in str(info.value).split(";")[-1]
    for eps in (LAPLACE_EPSILON_MIN, 1e4, LAPLACE_EPSILON_MAX):
        for bound in (1e-6, 1.0, 1e6):
            for dtype in ("float32", "float64"):
                calibrate_laplace(eps, bound, 3, dtype)                       # accepted
    for eps in (np.nextafter(LAPLACE_EPSILON_MIN, 0), np.nextafter(LAPLACE_EPSILON_MAX, np.inf)):
        with pytest.raises(InvalidInputError, match="between 1e-05 and 100000"):
            calibrate_laplace(float(eps), 1.0, 3)


# ---------------------------------------------------------------- interrupts
FIRST_BATCH = """
import sys
from iwpfast.privacy import ReleaseSpec, release, file_release
assert "pandas" not in sys.modules
state = {"writing": False, "pandas_while_writing": None}
write_chunks = file_release._write_chunks

def watched(*args, **kwargs):
    state["writing"] = True
    return write_chunks(*args, **kwargs)

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" and state["pandas_while_writing"] is None:
            state["pandas_while_writing"] = state["writing"]
        return None

sys.meta_path.insert(0, Watch())
file_release._write_chunks = watched
spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, ranges="a=-1:1,b=-1:1")
release(sys.argv[1] + "/raw.parquet", sys.argv[1] + "/rel.parquet", spec, ["a", "b"], "y")
print(state["pandas_while_writing"])
"""


def test_the_release_imports_pandas_before_its_first_batch(tmp_path):
    """pyarrow imports pandas lazily on its first conversion: a Ctrl-C landing in that import
    (the first batch) was swallowed or gave a traceback of a half-imported pandas.  The release
    imports it before reading its first batch."""
    import subprocess
    import sys
    r = np.random.default_rng(0)
    pq.write_table(pa.table({"a": r.uniform(-1, 1, 500), "b": r.uniform(-1, 1, 500),
                             "y": r.integers(0, 2, 500)}), tmp_path / "raw.parquet")
    run = subprocess.run([sys.executable, "-c", FIRST_BATCH, str(tmp_path)], capture_output=True,
                         text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-1] == "False"     # imported, but not among the batches


def test_a_multipart_destination_is_checked_before_reading(people, tmp_path, monkeypatch):
    locked = _locked_folder(tmp_path, monkeypatch)
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, classes=EDU,
                       ranges="AGEP=0:99,WKHP=0:99")
    for target in (locked, locked / "rel"):       # into the folder, or a new folder in it
        with pytest.raises(InvalidInputError, match=f"{locked}.* is not writable"):
            release(people, str(target) + "/", spec, ["AGEP", "WKHP"], "edu")
    locked.chmod(0o700)
    assert os.listdir(locked) == []
