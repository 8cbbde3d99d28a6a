"""docs/extending.md's file lists, tested: a toy noise law, file format and loss, each written in a
module of its own (a temporary one, outside the package) and added through its registry only,
run end to end, then removed.

If one of these needs an edit to a module of the package, the extending guide's list is
incomplete: that is what this file checks.  The toys reuse the built-in pieces where the guide
says a new one may (a law's sampler and calibration, a loss's series), so that their results can be
compared with the built-in ones bit for bit.
"""
import importlib
import math
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

from iwpfast import IWPClassifier
from iwpfast.exceptions import InvalidInputError

# seeded releases (the bits are compared); the warning says what a real release must not do
pytestmark = pytest.mark.filterwarnings("ignore:seeded release")

P = 2
RANGES = {"a": (-1.0, 1.0), "b": (-1.0, 1.0)}

# The module a user would write: nothing of it is inside the package.
TOY_MODULE = r'''
import base64
import json

import pyarrow as pa

from iwpfast.io.formats import FileFormat
from iwpfast.io.source_base import BatchOrigin
from iwpfast.losses import LOSS_RECORDS
from iwpfast.noise_registry import NoiseLawRecord
from iwpfast.privacy.noise_laws import FloatGaussianLaw


# --- a noise law: the float Gaussian's sampler and calibration under a name of its own
class ToyGaussianLaw(FloatGaussianLaw):
    """What a new sampler subclasses (the privatizer never asks which law it has)."""


TOY_LAW = NoiseLawRecord(
    law="toy_gaussian", mechanism="gaussian", noise="toy", sampler=ToyGaussianLaw,
    calibrate="iwpfast.privacy.mechanisms:calibrate_float_gaussian",
    wording="the toy Gaussian noise",
    guarantee_words=lambda spec, mech: f"the toy Gaussian mechanism (sigma={spec.sigma:.4g})",
    noise_line=lambda mech: f"noise:         toy_gaussian (variance {mech.variance:.6g})",
    exact=False, help="toy (the float law under another name)")


# --- a file format: JSON lines, the Arrow schema (with the release metadata) on the first line
def _header(schema, rows):
    blob = base64.b64encode(schema.serialize().to_pybytes()).decode()
    return (json.dumps({"schema": blob, "rows": rows}) + "\n").encode()


class JsonLinesWriter:
    def __init__(self, sink, schema, compression, dictionary_columns):
        self.sink, self.schema, self.rows = sink, schema, 0
        self.sink.write(_header(schema, None))

    def write_batch(self, batch):
        for row in batch.to_pylist():
            self.sink.write((json.dumps(row) + "\n").encode())
        self.rows += batch.num_rows

    def close(self, metadata):
        # the header is rewritten once the metadata and the row count are known
        return {**(self.schema.metadata or {}), **metadata}

    def abort(self):
        pass

    @staticmethod
    def rewrite(source, sink, metadata):
        head, *lines = source.read().split(b"\n")[:-1]
        schema = _schema(json.loads(head)["schema"]).with_metadata(metadata)
        sink.write(_header(schema, len(lines)))
        for line in lines:
            sink.write(line + b"\n")


def _schema(blob):
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(blob)))


class JsonLinesReader:
    def __init__(self, loc, batch_rows, whole=False):
        self.path = loc.display
        with open(loc.path, "rb") as f:
            head = json.loads(f.readline())
        self.schema = _schema(head["schema"])
        self.num_rows = head["rows"]
        self.group_rows = None

    def located(self, file_index, columns, batch_rows, global_row, start_in_file):
        with open(self.path, "rb") as f:
            f.readline()
            rows = [json.loads(line) for line in f]
        table = pa.Table.from_pylist(rows, schema=self.schema.remove_metadata())
        table = table.select(list(columns))
        row = global_row
        for off in range(start_in_file, table.num_rows, batch_rows):
            batch = table.slice(off, batch_rows).combine_chunks().to_batches()[0]
            yield BatchOrigin(file_index, self.path, -1, off, row), batch
            row += batch.num_rows


TOY_FORMAT = FileFormat("jsonl", (".jsonl",), JsonLinesReader, JsonLinesWriter, ".jsonl")


# --- a loss: the logistic loss's record under another name (its series, its truncation table)
def toy_loss():
    from dataclasses import replace
    return replace(LOSS_RECORDS["logistic"], name="toy_logistic")
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy module, imported from a temporary folder; its pieces registered, then removed."""
    from iwpfast.io.formats import register_format, unregister_format
    from iwpfast.losses import register_loss, unregister_loss
    from iwpfast.noise_registry import register, unregister

    folder = tmp_path / "toy_plugin"
    folder.mkdir()
    (folder / "toy_iwpfast_plugin.py").write_text(textwrap.dedent(TOY_MODULE))
    monkeypatch.syspath_prepend(str(folder))
    module = importlib.import_module("toy_iwpfast_plugin")
    register(module.TOY_LAW)
    register_format(module.TOY_FORMAT)
    register_loss(module.toy_loss())
    try:
        yield module
    finally:
        unregister("toy_gaussian")
        unregister_format("jsonl")
        unregister_loss("toy_logistic")
        sys.modules.pop("toy_iwpfast_plugin", None)


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, P))
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-(X @ np.array([1.5, -1.0])))), 1, 0)
    return {"a": X[:, 0], "b": X[:, 1], "y": y}


def _spec(**kw):
    from iwpfast.privacy import ReleaseSpec
    return ReleaseSpec(**{**dict(epsilon_x=2.0, delta=1e-5, bound=math.sqrt(P), epsilon_y=2.0,
                                 features=tuple(RANGES), ranges=RANGES, label="y"), **kw})


def _model(**kw):
    return IWPClassifier(**{**dict(alpha=0.5, learning_rate=0.02, average=0.5, progress=False),
                            **kw})


def test_toy_noise_law_releases_and_is_learned_from(toy, tmp_path):
    import pyarrow.parquet as pq

    from iwpfast.privacy import read_release_spec, release

    toy_out, float_out = tmp_path / "toy.parquet", tmp_path / "float.parquet"
    release(_data(), toy_out, _spec(noise="toy"), seed=11)
    release(_data(), float_out, _spec(noise="float"), seed=11)
    spec = read_release_spec(toy_out)
    meta = spec.to_metadata()
    assert meta["noise"]["law"] == "toy_gaussian" and spec.noise == "toy"
    assert "the toy Gaussian mechanism" in spec.guarantee().statement
    assert meta["guarantee"]["holds_for"] == "real_valued_noise_only"
    assert "noise:         toy_gaussian" in spec.describe()
    # the same sampler and calibration as the float law: the same bits for the same seed
    assert pq.read_table(toy_out).drop(["y"]).equals(pq.read_table(float_out).drop(["y"]))
    toy_fit, float_fit = _model().fit(toy_out), _model().fit(float_out)
    np.testing.assert_array_equal(toy_fit.coef_, float_fit.coef_)
    assert toy_fit.noise_var_ == pytest.approx(spec.sigma ** 2 * np.ones(P))
    # the command line offers it (choices read from the registry when the parser is built)
    from iwpfast.cli import build_parser
    args = build_parser().parse_args(["release", "in.parquet", "out.parquet", "--noise", "toy",
                                      "--features", "a", "b", "--epsilon-x", "1"])
    assert args.noise == "toy"


def test_toy_file_format_writes_and_reads_back(toy, tmp_path):
    from iwpfast.io.formats import output_format
    from iwpfast.privacy import read_release_spec, release

    assert output_format("x.jsonl") == "jsonl"
    out, reference = tmp_path / "rel.jsonl", tmp_path / "rel.parquet"
    release(_data(), out, _spec(), seed=5)
    release(_data(), reference, _spec(), seed=5)
    first = out.read_bytes().split(b"\n", 1)[0]
    assert b'"rows": 600' in first                     # written by the toy's rewrite
    assert read_release_spec(out) == read_release_spec(reference)
    m_toy, m_ref = _model().fit(out), _model().fit(reference)
    np.testing.assert_array_equal(m_toy.coef_, m_ref.coef_)       # the same rows read back
    # a release in parts names its parts by the format's extension
    import pyarrow.parquet as pq

    from iwpfast.privacy.multipart import release_parts
    source, folder = tmp_path / "in.parquet", tmp_path / "parts"
    pq.write_table(pa.table(_data()), source, row_group_size=200)
    release_parts(source, folder, _spec(), seed=5, format="jsonl", max_part_rows=200)
    assert sorted(p.suffix for p in folder.glob("part-*")) == [".jsonl"] * 3
    assert read_release_spec(folder).row_count == 600          # the parts read back as one
    from iwpfast.cli import build_parser
    assert build_parser().parse_args(
        ["release", "a.parquet", "b", "--format", "jsonl", "--features", "a"]).format == "jsonl"


def test_toy_loss_fits_through_the_numpy_twin_and_the_kernel_refuses_it(toy, tmp_path,
                                                                       monkeypatch):
    from iwpfast.privacy import release

    path = tmp_path / "rel.parquet"
    release(_data(), path, _spec(), seed=3)
    # no kernel branch for a loss added this way: the kernel path says which files to extend
    with pytest.raises(InvalidInputError, match=r"toy_logistic.*_kernels/abi\.py.*_kernels/sgd\.py"):
        _model(loss="toy_logistic", truncation=1).fit(path)
    # so is a kernel code without its branches, which the kernel would run as the squared error
    from iwpfast._kernels import abi
    monkeypatch.setitem(abi.LOSS_CODES, "toy_logistic", max(abi.LOSS_CODES.values()) + 1)
    with pytest.raises(InvalidInputError, match=r"toy_logistic.*SGD_KERNEL_LOSS_CODES"):
        _model(loss="toy_logistic", truncation=1).fit(path)
    monkeypatch.delitem(abi.LOSS_CODES, "toy_logistic")
    monkeypatch.setenv("IWPFAST_ENGINE", "numpy")
    toy_fit = _model(loss="toy_logistic", truncation="auto").fit(path)
    logistic_fit = _model(loss="logistic", truncation="auto").fit(path)
    np.testing.assert_array_equal(toy_fit.coef_, logistic_fit.coef_)
    assert toy_fit.truncation_ == logistic_fit.truncation_
    X0 = np.array([[0.5, -0.5], [-1.0, 1.0]])
    np.testing.assert_array_equal(toy_fit.predict_proba(X0), logistic_fit.predict_proba(X0))


def test_a_truncated_loss_without_its_table_is_refused():
    from dataclasses import replace

    from iwpfast.losses import LOSS_RECORDS
    with pytest.raises(InvalidInputError, match="truncation_table"):
        replace(LOSS_RECORDS["logistic"], name="borrowed", truncation_table=None)


def test_registries_refuse_a_taken_name_and_forget_the_toys():
    from iwpfast.io.formats import FILE_FORMATS, FileFormat, register_format
    from iwpfast.losses import LOSSES, register_loss
    from iwpfast.noise_registry import NOISE_LAW_RECORDS, noise_choices, register

    assert "jsonl" not in FILE_FORMATS and "toy_logistic" not in LOSSES
    assert "toy_gaussian" not in NOISE_LAW_RECORDS and noise_choices() == ("discrete", "float")
    with pytest.raises(InvalidInputError, match="already registered"):
        register(NOISE_LAW_RECORDS["float_gaussian"])
    with pytest.raises(InvalidInputError, match="already registered"):
        register_format(FileFormat("ipc", (".x",), reader=None))
    from iwpfast.losses import LOSS_RECORDS
    with pytest.raises(InvalidInputError, match="already registered"):
        register_loss(LOSS_RECORDS["logistic"])


def test_a_misnamed_piece_is_refused_naming_it():
    """A record names its pieces lazily ("module:attribute"): a name without its colon is refused
    when the record is registered (nothing imported), one that does not import where it is first
    used, naming the piece; every built-in record's names import."""
    from dataclasses import replace

    from iwpfast.io.formats import FILE_FORMATS, FileFormat, register_format
    from iwpfast.noise_registry import NOISE_LAW_RECORDS, register
    from iwpfast.registry import resolve

    dotted = "iwpfast.privacy.noise_laws.FloatGaussianLaw"
    with pytest.raises(InvalidInputError, match=r"noise law 'typo'.*sampler=.*noise_laws\.Float"):
        register(replace(NOISE_LAW_RECORDS["float_gaussian"], law="typo", noise="typo",
                         sampler=dotted))
    with pytest.raises(InvalidInputError, match=r"file format 'typo'.*reader="):
        register_format(FileFormat("typo", (".typo",), reader="iwpfast.io.format_readers"))
    assert "typo" not in NOISE_LAW_RECORDS and "typo" not in FILE_FORMATS
    for ref in ("iwpfast.privacy.noise_laws:FloatGaussianLw", "iwpfast.no_such_module:x", dotted):
        with pytest.raises(ImportError, match=ref.replace(".", r"\.")):
            resolve(ref)
    pieces = [getattr(r, f) for r in NOISE_LAW_RECORDS.values()
              for f in ("sampler", "calibrate", "guarantee_words", "noise_line", "learner_law")]
    pieces += [getattr(f, name) for f in FILE_FORMATS.values() for name in ("reader", "writer")]
    for ref in pieces:
        assert ref is None or callable(resolve(ref)), ref


def test_the_guarantee_holds_for_what_the_specs_own_law_says():
    """``holds_for`` is read from the record of the spec's (mechanism, noise): a mechanism of its
    own whose noise is not exact is not described by the Gaussian law of the same noise name."""
    from dataclasses import replace
    from types import SimpleNamespace

    from iwpfast.noise_registry import NOISE_LAW_RECORDS, register, unregister
    from iwpfast.privacy.spec_text import Guarantee, guarantee_metadata

    register(replace(NOISE_LAW_RECORDS["discrete_laplace"], law="toy_inexact", mechanism="toy",
                     noise="discrete", exact=False))
    try:
        g = Guarantee(1.0, 0.0, "")
        toy = SimpleNamespace(mechanism="toy", noise="discrete", public_features=())
        assert guarantee_metadata(toy, g)["holds_for"] == "real_valued_noise_only"
        laplace = SimpleNamespace(mechanism="laplace", noise="discrete", public_features=())
        assert guarantee_metadata(laplace, g)["holds_for"] == "values_as_written"
    finally:
        unregister("toy_inexact")
