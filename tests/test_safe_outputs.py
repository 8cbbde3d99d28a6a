"""Safe outputs: models and checkpoints never replace a file silently nor an input, and a checkpoint
is refused on other data with the same schema and row count."""
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_driver import heads, make_table

from iwpfast import IWPClassifier
from iwpfast.cli import main
from iwpfast.exceptions import CheckpointError, InvalidInputError
from iwpfast.sgd.driver import fit_stream

N = 2000


def _table(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, 2))
    y = np.where(x[:, 0] + 0.5 * rng.standard_normal(N) > 0, 1, 0).astype(np.int8)
    return pa.table({"a": x[:, 0], "b": x[:, 1], "y": y})


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "data.parquet"
    pq.write_table(_table(0), path)
    return path


def test_save_refuses_an_existing_file_unless_overwrite(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 2))
    model = IWPClassifier(alpha=1.0, learning_rate=0.01, progress=False).fit(X, X[:, 0] > 0)
    path = tmp_path / "m.json"
    path.write_text("precious")
    with pytest.raises(InvalidInputError, match="exists already.*overwrite=True"):
        model.save(path)
    assert path.read_text() == "precious"
    model.save(path, overwrite=True)
    assert path.read_text().startswith("{")


def test_cli_fit_refuses_existing_out_and_writing_onto_its_input(data, tmp_path, capsys):
    out = tmp_path / "model.json"
    out.write_text("precious")
    base = ["fit", str(data), "--features", "a", "b", "--label", "y", "--no-progress"]
    assert main([*base, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("iwpfast: error:") and "exists already" in err and "--overwrite" in err
    assert len(err.splitlines()) == 1 and out.read_text() == "precious"
    assert main([*base, "--out", str(out), "--overwrite"]) == 0
    assert out.read_text().startswith("{")
    before = data.read_bytes()
    # even with --overwrite: never the input
    assert main([*base, "--out", str(data), "--overwrite"]) == 2
    assert "input file" in capsys.readouterr().err
    assert data.read_bytes() == before


def test_cli_checkpoint_refused_when_it_exists_without_resume(data, tmp_path, capsys):
    ck = tmp_path / "run.ckpt"
    base = ["fit", str(data), "--features", "a", "b", "--label", "y", "--no-progress",
            "--checkpoint", str(ck)]
    assert main([*base, "--out", str(tmp_path / "m1.json"), "--keep-checkpoint"]) == 0
    assert main([*base, "--out", str(tmp_path / "m2.json")]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "m2.json"), "--resume"]) == 0
    assert main([*base, "--out", str(tmp_path / "m3.json"), "--overwrite"]) == 0
    assert main(["fit", str(data), "--features", "a", "b", "--label", "y", "--no-progress",
                 "--checkpoint", str(data), "--overwrite", "--out", str(tmp_path / "m4.json")]) == 2
    assert "input file" in capsys.readouterr().err


def test_resume_on_other_data_with_the_same_schema_and_row_count_is_refused(tmp_path):
    first, other = tmp_path / "first.parquet", tmp_path / "other.parquet"
    table = make_table()
    pq.write_table(table, first, row_group_size=400)
    shuffled = table.take(np.random.default_rng(1).permutation(table.num_rows))
    pq.write_table(shuffled, other, row_group_size=400)  # same metadata, types, rows; other content
    ck = tmp_path / "run.ckpt"
    fit_stream(str(first), heads(), engine="reference", progress=False, checkpoint=ck)
    with pytest.raises(CheckpointError, match="another dataset"):
        fit_stream(str(other), heads(), engine="reference", progress=False, checkpoint=ck,
                   resume=True)
    # the same content under another name is the same dataset
    moved = tmp_path / "moved.parquet"
    moved.write_bytes(first.read_bytes())
    fit_stream(str(moved), heads(), engine="reference", progress=False, checkpoint=ck, resume=True)


def test_fit_stream_refuses_to_replace_a_checkpoint_unless_asked(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(make_table(), path)
    ck = tmp_path / "run.ckpt"
    fit_stream(str(path), heads(), engine="reference", progress=False, checkpoint=ck)
    with pytest.raises(InvalidInputError, match="exists already"):
        fit_stream(str(path), heads(), engine="reference", progress=False, checkpoint=ck)
    fit_stream(str(path), heads(), engine="reference", progress=False, checkpoint=ck,
               overwrite=True)


def test_a_folder_is_refused_as_an_output_file_even_with_overwrite(tmp_path):
    """A model, a checkpoint or a release pointed at a folder: one refusal naming the folder (the
    release's suggests a file name in it), whatever overwrite says."""
    from iwpfast.io.outputs import check_output_path
    from iwpfast.io.writer import check_destination
    folder = tmp_path / "out"
    folder.mkdir()
    for overwrite in (False, True):
        with pytest.raises(InvalidInputError, match="'.*out' is a folder / prefix; give a file name$"):
            check_output_path(folder, what="model", overwrite=overwrite)
        with pytest.raises(InvalidInputError, match="is a folder / prefix; give a file name such as "
                                                    ".*out/release.parquet"):
            check_destination(folder, overwrite=overwrite)
    assert check_output_path(folder / "m.json", what="model", overwrite=False).endswith("m.json")
