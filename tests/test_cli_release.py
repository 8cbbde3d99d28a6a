import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iwpfast.cli import main
from iwpfast.privacy import read_release_spec


@pytest.fixture
def small_parquet(tmp_path):
    r = np.random.default_rng(0)
    n = 3000
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"AGEP": r.integers(17, 95, n), "SCHL": r.integers(1, 25, n),
                             "y": r.integers(0, 2, n), "PINCP": r.integers(0, 200_000, n)}), path)
    return path


def test_cli_release_then_info(tmp_path, small_parquet, capsys):
    out = tmp_path / "out.parquet"
    rc = main(["release", str(small_parquet), str(out), "--features", "AGEP", "SCHL",
               "--ranges", "AGEP=0:99", "SCHL=1:24", "--epsilon-x", "1", "--epsilon-y", "0.5",
               "--delta", "1e-6", "--bound", "1.2", "--calibration", "classic", "--seed", "1"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "released 3,000 rows" in printed and "(1.5, 1e-06)-locally differentially private" in printed
    spec = read_release_spec(out)
    assert spec.features == ("AGEP", "SCHL") and spec.calibration == "classic"
    assert spec.bound == 1.2 and spec.epsilon_y == 0.5 and spec.row_count == 3000
    assert pq.read_table(out).num_rows == 3000

    assert main(["info", str(out)]) == 0
    info = capsys.readouterr().out
    assert "iwpfast release" in info and "keep probability" in info and "(1.5, 1e-06)" in info
    assert main(["info", str(out), "--json"]) == 0
    assert '"feature_noise_scale"' in capsys.readouterr().out


def test_cli_inline_ranges_ipc_and_overwrite(tmp_path, small_parquet, capsys):
    out = tmp_path / "out.arrow"
    args = ["release", str(small_parquet), str(out), "--features", "AGEP=0:99,SCHL=1:24",
            "--epsilon-x", "1", "--epsilon-y", "1", "--no-progress"]
    assert main(args) == 0
    assert read_release_spec(out).row_count == 3000
    capsys.readouterr()
    assert main(args) == 2  # exists
    err = capsys.readouterr().err
    assert err.startswith("iwpfast: error:") and "--overwrite" in err and "Traceback" not in err
    assert err.count("\n") == 1
    assert main(args + ["--overwrite"]) == 0


def test_cli_errors_are_one_line_with_the_fix(tmp_path, small_parquet, capsys):
    base = ["release", str(small_parquet), str(tmp_path / "o.parquet"), "--features", "AGEP", "SCHL"]
    assert main(base + ["--ranges", "AGEP=0:99", "--epsilon-x", "1", "--epsilon-y", "1"]) == 2
    assert "SCHL=LO:HI" in capsys.readouterr().err
    assert main(base + ["--ranges", "AGEP=0:99", "SCHL=1:24", "--epsilon-x", "1"]) == 2
    assert "--epsilon-y" in capsys.readouterr().err and not (tmp_path / "o.parquet").exists()
    assert main(base + ["--ranges", "AGEP=0:99", "SCHL=1:24", "--epsilon-x", "-1", "--public-labels"]) == 2
    assert "epsilon_x" in capsys.readouterr().err
    assert main(["info", str(small_parquet)]) == 0
    assert "not an iwpfast release" in capsys.readouterr().out


def test_cli_help_is_fast_and_light():
    code = ("import sys; from iwpfast.cli import build_parser; build_parser(); "
            "print(','.join(m for m in ('numba', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
    helptext = subprocess.run([sys.executable, "-m", "iwpfast.cli", "release", "--help"],
                              capture_output=True, text=True, check=True).stdout
    assert "examples:" in helptext and "--epsilon-x" in helptext



def test_release_help_says_a_failed_stream_to_stdout_is_to_discard():
    """Issue 42 (D3): an IPC stream cannot be retracted once sent; --help says so."""
    helptext = " ".join(subprocess.run([sys.executable, "-m", "iwpfast.cli", "release", "--help"],
                                       capture_output=True, text=True, check=True).stdout.split())
    assert "IPC stream cannot be retracted" in helptext and "no footer" in helptext
    assert "discard the output of a failed run" in helptext


@pytest.mark.parametrize("extra, delta_y", [
    (["--public", "all"], 1e-5),                                 # target-only: the default
    (["--public", "all", "--delta", "1e-6"], 1e-6),              # its only delta
    (["--epsilon-x", "2", "--delta", "1e-7", "--bound", "1"], 1e-7),          # the features' delta
    (["--public", "all", "--delta-y", "1e-8"], 1e-8),
])
def test_a_regression_target_takes_the_default_delta_like_features(tmp_path, small_parquet,
                                                                   extra, delta_y):
    """Issue 46 item 3: a target-only release refused the default delta ("the target's Gaussian
    mechanism needs a delta") where a feature release took 1e-5."""
    out = tmp_path / "rel.parquet"
    assert main(["release", str(small_parquet), str(out), "--features", "AGEP", "SCHL",
                 "--ranges", "AGEP=0:99", "SCHL=1:24", "--label", "PINCP", "--task", "regression",
                 "--target-range", "0:200000", "--epsilon-y", "2", "--no-progress", *extra]) == 0
    assert read_release_spec(out).delta_y == delta_y


def test_the_api_names_the_target_delta_it_needs():
    from iwpfast.exceptions import InvalidInputError
    from iwpfast.privacy import ReleaseSpec

    with pytest.raises(InvalidInputError, match=r"give delta_y \(e\.g\. delta_y=1e-5; CLI: --delta-y"):
        ReleaseSpec(epsilon_y=2, task="regression", features=["a"], ranges="a=0:1",
                    public_features=("a",), label="t", target_range=(0, 1))
