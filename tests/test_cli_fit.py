"""CLI end to end on a small file: release -> fit -> info -> evaluate (clean and --private)."""
import json

import numpy as np
import pytest

from iwpfast.cli import main

pytestmark = pytest.mark.kernels


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(0)
    n = 4000
    age = rng.uniform(18, 90, n)
    hours = rng.uniform(0, 99, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-((age - 50) / 10 + (hours - 40) / 20)))).astype(np.int64)
    table = pa.table({"AGEP": age, "WKHP": hours, "y": y})
    pq.write_table(table.slice(0, 3000), d / "train.parquet")
    pq.write_table(table.slice(3000), d / "test.parquet")
    return d


def test_fit_info_evaluate_end_to_end(files, capsys):
    d = files
    ranges = ["AGEP=0:99", "WKHP=0:99"]
    assert main(["release", str(d / "train.parquet"), str(d / "train_ldp.parquet"), "--features", "AGEP",
                 "WKHP", "--ranges", *ranges, "--epsilon-x", "4", "--epsilon-y", "4",
                 "--bound", "1.5", "--seed", "1"]) == 0
    assert main(["release", str(d / "test.parquet"), str(d / "test_ldp.parquet"), "--features", "AGEP",
                 "WKHP", "--ranges", *ranges, "--epsilon-x", "4", "--epsilon-y", "4",
                 "--bound", "1.5", "--seed", "2"]) == 0
    capsys.readouterr()
    model = d / "model.json"
    assert main(["fit", str(d / "train_ldp.parquet"), "--out", str(model), "--alpha", "1",
                 "--learning-rate", "0.05", "--average", "tail", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "3,000 rows" in out and "iwp mode" in out and model.exists()

    assert main(["info", str(model)]) == 0
    out = capsys.readouterr().out
    assert "iwpfast model IWPClassifier" in out and "AGEP=" in out and "epsilon_x=4" in out

    # clean hold-out in raw units: scaled by the release's declared ranges automatically
    assert main(["evaluate", str(model), str(d / "test.parquet"), "--json"]) == 0
    clean = json.loads(capsys.readouterr().out)
    assert clean["kind"] == "clean" and 0.5 < clean["accuracy"] <= 1.0 and clean["rows"] == 1000

    assert main(["evaluate", str(model), str(d / "test_ldp.parquet"), "--private", "--json"]) == 0
    private = json.loads(capsys.readouterr().out)
    assert private["kind"] == "private" and private["rows"] == 1000 and private["stderr"] > 0
    # unbiased up to its standard error (1000 rows: generous 5 SE band, false alarm ~1e-6)
    assert abs(private["risk"] - clean["risk"]) < 5 * private["stderr"]


def test_fit_errors_are_one_line_with_the_fix(files, capsys):
    d = files
    assert main(["fit", str(d / "train.parquet"), "--out", str(d / "m.json"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iwpfast: error:") and "features=" in err
    assert main(["fit", str(d / "train.parquet"), "--out", str(d / "m.json"), "--loss", "hinge",
                 "--features", "AGEP", "WKHP", "--label", "y", "--no-progress"]) == 2
    assert "unknown loss 'hinge'" in capsys.readouterr().err
    assert main(["evaluate", str(d / "nope.json"), str(d / "test.parquet")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("extra,needles", [
    ([], ["no release metadata", "--features A B --label Y", "columns: AGEP, WKHP, y", "--noise-var"]),
    (["--features", "AGEP", "HOURS", "--label", "y"],
     ["feature column(s) 'HOURS' not in the source", "columns: AGEP, WKHP, y", "--features"]),
    (["--features", "AGEP", "WKHP", "--label", "PINCP"],
     ["label column 'PINCP' not in the source", "--label"]),
    (["--features", "AGEP", "WKHP"], ["label column is unknown", "--label"]),
    (["--features", "AGEP", "WKHP", "--label", "AGEP"],
     ["label column 'AGEP' has values", "needs two classes, {-1, 1}, {0, 1}", "recode it"]),
])
def test_fit_input_errors_are_one_line_naming_the_fix(files, capsys, extra, needles):
    """What a user meets on a plain (unreleased) file: exit 2, one `iwpfast: error:` line that names
    the column and the CLI option to fix it."""
    d = files
    assert main(["fit", str(d / "train.parquet"), "--out", str(d / "m.json"), "--no-progress", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iwpfast: error:") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, (needle, err)


def test_fit_resume_from_checkpoint(files, capsys, single_holdout):
    d = files
    main(["release", str(d / "train.parquet"), str(d / "r2.parquet"), "--features", "AGEP", "WKHP",
          "--ranges", "AGEP=0:99", "WKHP=0:99", "--epsilon-x", "4", "--epsilon-y", "4", "--seed", "3"])
    args = ["fit", str(d / "r2.parquet"), "--learning-rate", "0.05", "--no-progress"]
    assert main(args + ["--out", str(d / "a.json")]) == 0
    assert main(args + ["--out", str(d / "b.json"), "--checkpoint", str(d / "c.ckpt"),
                        "--checkpoint-every", "1000", "--keep-checkpoint"]) == 0
    capsys.readouterr()
    # the same command again: refused in one sentence that says both ways on (it read "or
    # pass --resume to continue from it, or --overwrite to restart to replace it")
    assert main(args + ["--out", str(d / "d.json"), "--checkpoint", str(d / "c.ckpt"),
                        "--checkpoint-every", "1000"]) == 2
    err = capsys.readouterr().err
    assert ("exists already; choose another path, or pass --resume to continue from it, or "
            "--overwrite to start the pass again (to continue: iwpfast fit ") in err, err
    # the exact command that resumes: this one with --resume (issue 47)
    assert err.rstrip().endswith("--checkpoint-every 1000 --resume)"), err
    assert main(args + ["--out", str(d / "c.json"), "--checkpoint", str(d / "c.ckpt"), "--resume"]) == 0
    a, c = (json.loads((d / f).read_text())["fitted"]["coef"] for f in ("a.json", "c.json"))
    assert a == c


def test_evaluate_refuses_a_feature_list_of_the_wrong_length(files, capsys, tmp_path):
    """--features must name one column per model feature: fewer used to score on a subset."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(files / "train.parquet")
    scaled = tmp_path / "scaled.parquet"    # clean data in the training scale: no release needed
    pq.write_table(table.set_column(0, "AGEP", pc.divide(table.column("AGEP"), 100.0))
                        .set_column(1, "WKHP", pc.divide(table.column("WKHP"), 100.0)), scaled)
    model = tmp_path / "m.json"
    assert main(["fit", str(scaled), "--out", str(model), "--features", "AGEP", "WKHP",
                 "--label", "y", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(model), str(scaled), "--features", "AGEP"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iwpfast: error:") and "names 1 columns but the model has 2" in err
    assert main(["evaluate", str(model), str(scaled), "--label", "income"]) == 2
    assert "no label column 'income'" in capsys.readouterr().err
