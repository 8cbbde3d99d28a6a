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


# ------------------------------------------------------------------ a new loss shape, a new law
# docs/extending.md counted: a loss whose derivatives are no built-in's and a law object of the
# learner, written outside the package and added through the documented path only.  The loss is
# the hinge max(0, 1 - v) smoothed by a Gaussian of width 1 (f = E max(0, 1 - v + Z)):
#     f(v) = (1 - v) Phi(w) + phi(w),  f'(v) = -Phi(w),  f^(n)(v) = He_{n-2}(w) phi(w)  (n >= 2)
# with w = 1 - v: its IWP series converges for 2 tau < 1 (it is then the hinge smoothed by
# 1 - 2 tau) and is truncated at K beyond, as the logistic one; it has no log-odds link.
SHAPE_MODULE = r'''
import math

import numpy as np

from iwpfast.laplace import DiscreteLaplace
from iwpfast.losses import Loss

_erfc = np.frompyfunc(math.erfc, 1, 1)


def _Phi(w):
    return 0.5 * np.asarray(_erfc(-np.asarray(w) / math.sqrt(2.0)), dtype=np.float64)


def _phi(w):
    return np.exp(-0.5 * w * w) / math.sqrt(2.0 * math.pi)


def _hermite(m, w):
    h0, h1 = np.ones_like(w), w
    if m == 0:
        return h0
    for k in range(1, m):
        h0, h1 = h1, w * h1 - k * h0
    return h1


def derivative(n, v):
    w = 1.0 - v
    if n == 0:
        return w * _Phi(w) + _phi(w)
    if n == 1:
        return -_Phi(w)
    return _hermite(n - 2, w) * _phi(w)


def series(j, v, tau, truncation):
    top = truncation - 1 if j == 2 else truncation
    total, coefficient = np.zeros_like(v), 1.0
    for k in range(top + 1):
        if k > 0:
            coefficient = coefficient * (-tau / k)
        total = total + coefficient * derivative(2 * k + j, v)
    return total


def hermite_table(truncation):
    """The kernel's table of a truncated series (required; the NumPy twin does not read it)."""
    return np.zeros((2 * truncation + 1, 1))


PROBIT_HINGE = Loss(
    "probit_hinge", "classification", derivative, series,
    f2_at_0=float(derivative(2, np.zeros(1))[0]), slope_at_0=float(_Phi(np.ones(1))[0]),
    derivative_bounds=lambda zmax, target_bound: (float(_Phi(np.array([1.0 + zmax]))[0]),
                                                  1.0 / math.sqrt(2.0 * math.pi)),
    truncated=True, truncation_table=hermite_table)


class ToyLaplace(DiscreteLaplace):
    """A law object of the learner under a record of its own (its support table, its inverse)."""
    law = "toy_laplace"
'''


@pytest.fixture
def shape(tmp_path, monkeypatch):
    from iwpfast.losses import register_loss, unregister_loss

    folder = tmp_path / "shape_plugin"
    folder.mkdir()
    (folder / "shape_iwpfast_plugin.py").write_text(SHAPE_MODULE)
    monkeypatch.syspath_prepend(str(folder))
    module = importlib.import_module("shape_iwpfast_plugin")
    register_loss(module.PROBIT_HINGE)
    try:
        yield module
    finally:
        unregister_loss("probit_hinge")
        sys.modules.pop("shape_iwpfast_plugin", None)


def _package_modules(source: str) -> set[str]:
    """The iwpfast modules a plug-in's source imports: the documented path it used."""
    import ast
    return {node.module for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("iwpfast")}


def _files_named(message: str) -> set[str]:
    import re
    return set(re.findall(r"iwpfast/[\w/]+\.py", message))


def _extending_md() -> str:
    from pathlib import Path
    return (Path(__file__).resolve().parent.parent / "docs" / "extending.md").read_text()


def _shape_release(path):
    from iwpfast.privacy import release

    n = 1200
    rng = np.random.default_rng(4)
    X = rng.uniform(-1, 1, size=(n, P))
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-(X @ np.array([3.0, -2.0])))), 1, 0)
    release({"a": X[:, 0], "b": X[:, 1], "y": y}, path, _spec(epsilon_x=4.0, noise="toy"), seed=8)
    return X, y


@pytest.mark.slow
def test_a_new_loss_shape_fits_with_the_default_auto_end_to_end(toy, shape, tmp_path, monkeypatch):
    """A loss of a new shape, released with a new law (the toy one), fitted by the default
    ``IWPClassifier(loss=...)`` ('auto': grid, folds, choice, refit) on the NumPy twin, beats
    the majority class on the clean rows (about 90 s on the twin: slow)."""
    path = tmp_path / "shape.parquet"
    X, y = _shape_release(path)
    monkeypatch.setenv("IWPFAST_ENGINE", "numpy")
    model = IWPClassifier(loss="probit_hinge", progress=False).fit(path)
    assert model.tuning_ is not None and model.truncation_ >= 0
    accuracy = float(np.mean(model.predict(X) == y))
    assert accuracy > max(y.mean(), 1 - y.mean()) + 0.1, accuracy


def test_the_extending_guide_counts_what_a_new_loss_and_law_need(toy, shape, tmp_path):
    """What the new shape and the toy law needed: the plug-ins import the documented modules
    only, the fused kernels refuse the loss (and a law's own inverse without a kernel code)
    naming the files a kernel needs, and docs/extending.md's counts are those files."""
    import re
    from dataclasses import replace

    from iwpfast.noise_registry import NOISE_LAW_RECORDS, register, unregister
    from iwpfast.sgd import state

    path = tmp_path / "shape.parquet"
    _shape_release(path)
    with pytest.raises(InvalidInputError, match="probit_hinge") as refused:
        _model(loss="probit_hinge", truncation=1).fit(path)
    loss_kernel_files = _files_named(str(refused.value))
    assert loss_kernel_files == {"iwpfast/_kernels/abi.py", "iwpfast/_kernels/sgd.py"}
    # a law with an inverse of its own and no kernel code for it: refused naming the same files
    register(replace(NOISE_LAW_RECORDS["discrete_laplace"], law="toy_laplace",
                     mechanism="toy_laplace", inverse="toy_inverse"))
    try:
        law = shape.ToyLaplace(0.5, 2.0**-6).broadcast(P)
        cfg = state.HeadConfig(loss="exponential", mode="iwp", n_features=P,
                               noise_var=law.variance, noise_law=law,
                               variance_cap=law.default_variance_cap())
        with pytest.raises(InvalidInputError, match="toy_inverse") as no_code:
            state.check_config(cfg)
    finally:
        unregister("toy_laplace")
    law_kernel_files = _files_named(str(no_code.value))
    assert law_kernel_files == loss_kernel_files
    # the plug-ins' path into the package: the loss's record type and registry; a law's learner
    # object (the protocol, here by subclassing the Laplace one) and its record
    assert _package_modules(SHAPE_MODULE) == {"iwpfast.losses", "iwpfast.laplace"}
    assert _package_modules(TOY_MODULE) >= {"iwpfast.noise_registry", "iwpfast.privacy.noise_laws"}
    doc = _extending_md()
    loss_files = int(re.search(r"## A loss \(1 record; (\d+) files with its kernel", doc).group(1))
    assert loss_files == 1 + len(loss_kernel_files)     # the record's module, then the kernel's
    law_files = int(re.search(r"inverse of its own needs (\d+) files", doc).group(1))
    assert law_files == 1 + len(law_kernel_files)       # the law object's module, the kernel's
    for title, end in (("## A loss", "## A noise law"), ("**Learning from it.**", "## A file")):
        section = doc.split(title, 1)[1].split(end, 1)[0]
        assert all(f.removeprefix("iwpfast/") in section for f in loss_kernel_files), title


def test_the_learner_asks_the_law_not_its_type(shape):
    """A law object under a record of its own (a support table without the quadratic loss)
    debiases by its record; the Gaussian law object gives the bits of plain variances."""
    from dataclasses import replace

    from iwpfast.estimates import iwp_gradient, iwp_loss
    from iwpfast.laplace import DiscreteLaplace, GaussianLaw
    from iwpfast.noise_registry import NOISE_LAW_RECORDS, LearnerLaw, register, unregister
    from iwpfast.sgd import state

    rng = np.random.default_rng(2)
    X, y, theta = rng.normal(size=(50, P)), np.where(rng.random(50) < 0.5, 1, -1), np.array([.3, -.2])
    register(replace(NOISE_LAW_RECORDS["discrete_laplace"], law="toy_laplace", mechanism="toy_laplace",
                     supports={"exponential": "product"}, refusal="toy law: no {loss!r}"))
    try:
        toy_law, laplace = shape.ToyLaplace(0.5, 2.0**-6), DiscreteLaplace(0.5, 2.0**-6)
        assert isinstance(toy_law, LearnerLaw) and isinstance(GaussianLaw(0.5), LearnerLaw)
        for f in (iwp_loss, iwp_gradient):
            np.testing.assert_array_equal(f(theta, X, y, loss="exponential", noise_law=toy_law),
                                          f(theta, X, y, loss="exponential", noise_law=laplace))
        with pytest.raises(InvalidInputError, match="toy law: no 'quadratic'"):
            iwp_loss(theta, X, y, loss="quadratic", noise_law=toy_law)
        with pytest.raises(InvalidInputError, match="toy law: no 'probit_hinge'"):
            iwp_loss(theta, X, y, loss="probit_hinge", noise_law=toy_law)
        cap = laplace.default_variance_cap()
        configs = [state.HeadConfig(loss="exponential", mode="iwp", n_features=P, variance_cap=cap,
                                    noise_var=law.broadcast(P).variance, noise_law=law)
                   for law in (toy_law, laplace)]
        a, b = (state.check_config(c) for c in configs)
        assert a.noise_law == b.noise_law and np.array_equal(a.noise_packed, b.noise_packed)
    finally:
        unregister("toy_laplace")
    for loss in ("probit_hinge", "logistic"):
        np.testing.assert_array_equal(
            iwp_gradient(theta, X, y, loss=loss, noise_law=GaussianLaw([0.5, 0.25])),
            iwp_gradient(theta, X, y, loss=loss, noise_var=[0.5, 0.25]))
