"""iwpfast.io.formats: one definition of the metadata key, the suffixes and format detection,
shared by the reader, the writer and the release."""
import pyarrow as pa
import pytest

from iwpfast.exceptions import InvalidInputError
from iwpfast.io import formats, sources, writer
from iwpfast.privacy import spec


def test_reader_writer_and_release_share_one_definition():
    assert sources.RELEASE_METADATA_KEY == formats.RELEASE_METADATA_KEY_BYTES == b"iwpfast.release"
    assert spec.METADATA_KEY == formats.RELEASE_METADATA_KEY == spec.FORMAT_NAME
    assert sources.IPC_SUFFIXES is formats.IPC_SUFFIXES
    assert writer.output_format is formats.output_format


@pytest.mark.parametrize("suffix", formats.PARQUET_SUFFIXES + formats.IPC_SUFFIXES)
def test_every_suffix_the_reader_knows_the_writer_writes(suffix):
    # io/writer.py used to lack ".arrows": a release could not be written under a name it reads
    expected = "parquet" if suffix in formats.PARQUET_SUFFIXES else "ipc"
    assert formats.output_format("out" + suffix.upper()) == expected
    assert formats.input_format("s3://bucket/out" + suffix + "?region=x") == expected


def test_detection_and_errors():
    assert formats.input_format("a/b.csv.gz") == "csv" and formats.file_format("a/b.txt") is None
    assert formats.has_data_suffix("x.TSV") and not formats.has_data_suffix("x.json")
    assert formats.output_format("whatever", "feather") == "ipc"
    with pytest.raises(InvalidInputError, match="unknown file type.*'.parquet'"):
        formats.input_format("model.json")
    with pytest.raises(InvalidInputError, match="cannot tell the output format.*--format"):
        formats.output_format("out.csv")
    with pytest.raises(InvalidInputError, match="format must be 'parquet' or 'ipc'"):
        formats.output_format("out.parquet", "orc")


def test_a_release_written_as_arrows_reads_back(tmp_path):
    from iwpfast.io.sources import open_source
    from iwpfast.privacy import ReleaseSpec, release

    table = pa.table({"a": [0.1, 0.5, -0.3, 0.9], "y": [1, -1, 1, 1]})
    rel_spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, ranges="a=-1:1")
    out = tmp_path / "release.arrows"
    release(table, out, rel_spec, features=["a"], label="y", seed=1)
    src = open_source(out)
    assert src.num_rows == 4 and src.release_metadata["features"] == ["a"]
