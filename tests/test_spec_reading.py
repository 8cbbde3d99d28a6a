"""Issue 43 item 3: the ``ReleaseSpec`` is the only reader of a release's metadata.

- the noise model of a release is derived from its spec alone, and equals the one derived before
  from the metadata's fields (``_noise_by_fields``: the former field-by-field lookup, kept here as
  the regression target) for every kind of release;
- a categorical release builds its feature map once when written and at most twice when fitted
  and predicted (before: 11 builds to write, 6 to fit), and its metadata once per write;
- no module outside ``iwpfast/privacy`` reads a release metadata field by its key (the source is
  read, as tests/test_architecture.py reads the imports);
- the label-only and default-delta rules live in the spec's package (``privacy/spec_rules.py``),
  and ``iwpfast release`` and ``plan_release`` apply the same ones.
"""
from __future__ import annotations

import ast
import math
import pathlib
import warnings

import numpy as np
import pytest

import iwpfast
from iwpfast.exceptions import PrivacyLeakWarning, ReleaseSpecError
from iwpfast.privacy import ReleaseSpec, release
from iwpfast.privacy import feature_map as feature_map_module
from iwpfast.privacy.metadata_fields import _METADATA_FIELDS
from iwpfast.privacy.spec_reading import (
    column_noise_variances,
    release_spec_of,
    release_vector_bound,
)
from iwpfast.privacy.spec_rules import is_label_only, release_deltas
from iwpfast.privacy.writing import declared_label_classes, release_metadata
from iwpfast.sgd.driver import laplace_law_of, noise_from_release

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "iwpfast"
CATS = ["Private", "Self-emp, inc", "State gov"]


# ------------------------------------------------------------------ the noise model, regression
def _noise_by_fields(meta: dict, features: list) -> tuple:
    """The noise model as ``driver.noise_from_release`` and ``estimators._noise`` read it from
    the metadata's fields before the spec was their only reader (the regression target)."""
    released = list(meta["features"])
    law = meta.get("noise")
    per_column = meta.get("feature_noise_variance")
    if per_column is not None and len(per_column) == len(released):
        variance = {f: float(v) for f, v in zip(released, per_column, strict=True)}
    elif law is not None and law.get("variance") is not None:
        variance = {f: float(law["variance"]) for f in released}
    else:
        variance = {f: float(s) ** 2 for f, s in zip(released, meta["feature_noise_scale"],
                                                     strict=True)}
    nv = np.array([variance[f] for f in features], dtype=np.float64)
    keep = meta.get("label_keep_prob")
    target = meta.get("target_noise")
    ts = meta.get("target_noise_scale")
    tnv = float(target["variance"]) if target is not None and target.get("variance") is not None \
        else (0.0 if ts is None else float(ts) ** 2)
    if meta.get("feature_vector_bound") is not None:
        bound = float(meta["feature_vector_bound"])
    elif meta.get("feature_bound") is None and not meta.get("public_features"):
        bound = None
    else:
        bound = math.sqrt(float(meta.get("feature_bound") or 0.0) ** 2
                          + len(meta.get("public_features") or []))
    return nv, None if keep is None else float(keep), tnv, bound, laplace_law_of(law, len(features),
                                                                                  nv)


def _specs():
    two = dict(features=("a", "b", "c"), ranges={"a": (0, 1), "b": (0, 1), "c": (0, 10)},
               label="y")
    return {
        "discrete gaussian": ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, **two),
        "float gaussian": ReleaseSpec(epsilon_x=2.0, delta=1e-6, bound=2.0, epsilon_y=0.5,
                                      noise="float", **two),
        "public columns": ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                                      public_features=("b",), **two),
        "label-only": ReleaseSpec(epsilon_y=1.0, public_features=("a", "b", "c"), **two),
        "public labels": ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, **two),
        "laplace": ReleaseSpec(epsilon_x=2.0, delta=0.0, bound=1.0, epsilon_y=1.0,
                               mechanism="laplace", **two),
        "regression": ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0,
                                  task="regression", target_range=(0, 5), **two),
        "k classes": ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=2.0,
                                 classes=("u", "v", "w"), **two),
        "categorical": ReleaseSpec(epsilon_x=4.0, delta=1e-5, bound=1.0, epsilon_y=2.0,
                                   features=("a", "w"), ranges={"a": (0, 10)}, label="y",
                                   categories={"w": CATS}),
        "public categorical": ReleaseSpec(epsilon_x=4.0, delta=1e-5, bound=1.0, epsilon_y=2.0,
                                          features=("a", "w"), ranges={"a": (0, 10)}, label="y",
                                          categories={"w": CATS}, public_features=("w",)),
        "categorical rr": ReleaseSpec(epsilon_x=4.0, delta=1e-5, bound=1.0, epsilon_y=2.0,
                                      features=("a", "w"), ranges={"a": (0, 10)}, label="y",
                                      categories={"w": CATS}, categorical_mechanism="rr",
                                      epsilon_categorical=1.0),
    }


@pytest.mark.parametrize("kind", sorted(_specs()))
def test_the_noise_model_of_a_release_is_the_one_read_from_its_fields(kind):
    spec = _specs()[kind]
    meta = release_metadata(spec, 1000, None, declared_label_classes(spec))
    released = list(meta["features"])
    for features in (released, released[::-1], released[-1:]):
        nv, keep, tnv, bound, law = _noise_by_fields(meta, features)
        for source in (meta, spec):                  # the metadata is only read into its spec
            model = noise_from_release(source, features)
            np.testing.assert_array_equal(model.noise_var, nv)
            assert model.label_keep_prob == keep and model.target_noise_var == tnv
            assert model.feature_bound == bound
            assert (model.noise_law is None) == (law is None)
            if law is not None:                       # a pure-epsilon release's law
                np.testing.assert_array_equal(model.noise_law.scale, law.scale)
                np.testing.assert_array_equal(model.noise_law.grid, law.grid)
            assert model.spec == spec and model.origin == "release"
    assert np.array_equal(column_noise_variances(spec, released),
                          np.asarray(spec.feature_noise_variances()))
    assert release_vector_bound(spec) == _noise_by_fields(meta, released)[3]


def test_the_estimators_noise_model_carries_the_one_validated_spec():
    from iwpfast.estimators._noise import noise_from_metadata
    spec = _specs()["public columns"]
    meta = release_metadata(spec, 1000, None, declared_label_classes(spec))
    model = noise_from_metadata(meta, ["c", "a"])
    assert model.metadata is meta and model.spec == spec
    # one dict, one validation: the label's layers ask the same spec
    assert release_spec_of(meta) is model.spec
    # a dict edited in place is read again (and refused by its check)
    meta["label_keep_prob"] = 0.99
    with pytest.raises(ReleaseSpecError, match="label_keep_prob"):
        release_spec_of(meta)


# ------------------------------------------------------------------ the feature map, built once
def _categorical_table(n=2000, seed=0):
    from test_categorical import _table  # the same table as the categorical tests
    return _table(n, seed)


@pytest.fixture
def counted(monkeypatch):
    """{"maps": FeatureMap objects built, "metadata": ReleaseSpec.to_metadata calls}."""
    seen = {"maps": 0, "metadata": 0}
    init = feature_map_module.FeatureMap.__init__
    to_metadata = ReleaseSpec.to_metadata

    def counting_init(self, *args, **kwargs):
        seen["maps"] += 1
        return init(self, *args, **kwargs)

    def counting_metadata(self, *args, **kwargs):
        seen["metadata"] += 1
        return to_metadata(self, *args, **kwargs)
    monkeypatch.setattr(feature_map_module.FeatureMap, "__init__", counting_init)
    monkeypatch.setattr(ReleaseSpec, "to_metadata", counting_metadata)
    return seen


def test_a_categorical_release_builds_its_feature_map_at_most_twice(tmp_path, counted):
    df = _categorical_table()
    spec = ReleaseSpec(epsilon_x=8.0, delta=1e-5, bound=1.0, epsilon_y=2.0, ranges={"a": (0, 10)},
                       categories={"w": CATS})
    out = tmp_path / "r.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)          # seeded: a simulation
        release(df, out, spec, features=["a", "w"], label="y", seed=3, overwrite=True)
    # written: one map (before: 11) and one metadata dict (before: 2, the commit's again)
    assert counted == {"maps": 1, "metadata": 1}
    counted.update(maps=0, metadata=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = iwpfast.IWPClassifier(alpha=0.1).fit(out)
        model.predict(df.drop(columns="y"))
    # fitted and predicted: the map of the metadata and the spec's own (before: 6); the one
    # metadata dict is the spec's check of its stored fields
    assert counted["maps"] <= 2 and counted["metadata"] == 1, counted
    assert model.features_ == ["a", *(f"w={c}" for c in CATS)]


def test_the_spec_caches_its_feature_map_outside_its_identity():
    spec = _specs()["categorical"]
    assert spec.feature_map is spec.feature_map
    again = ReleaseSpec.from_metadata(spec.to_metadata(10))
    assert again == spec and repr(again) == repr(spec) and hash(again.features) == hash(spec.features)
    # another spec (other columns) builds its own map
    other = spec.with_columns(ranges={"a": (0, 20)})
    assert other.feature_map is not spec.feature_map
    assert other.with_counts(row_count=5).feature_map is other.feature_map


# ------------------------------------------------------------------ nobody else reads the fields
#: every field of the metadata contract, the version fields and what -1/+1 stand for
RELEASE_KEYS = set(_METADATA_FIELDS) | {"format_version", "library_version", "label_classes"}

#: the reads outside iwpfast/privacy that are still to move onto the spec, as (module, field):
#: none may be added (the io layer's part check sits below the spec and stays)
KNOWN_READS = {
    ("io/parts.py", "row_count"),
    ("commands/info.py", "format_version"), ("commands/info.py", "library_version"),
    ("commands/fit.py", "task"),
    ("distributed.py", "feature_bound"), ("distributed.py", "target_bound"),
    ("sgd/driver.py", "feature_bound"), ("sgd/driver.py", "target_bound"),
    ("estimators/_inputs.py", "features"), ("estimators/_inputs.py", "label"),
    ("estimators/_inputs.py", "categorical_rr"),
    ("estimators/_rr.py", "categorical_rr"), ("estimators/_rr.py", "label_classes"),
    ("estimators/_document.py", "noise"),
}


def _raw_reads():
    """(module, field, line) of every ``X[FIELD]`` and ``X.get(FIELD)`` outside iwpfast/privacy
    where FIELD is a release metadata field and X names metadata (``meta``, ``metadata``,
    ``release_metadata``...) or a ``release`` dict."""
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("privacy/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                receiver, key = node.value, node.slice.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "get" and node.args
                  and isinstance(node.args[0], ast.Constant)):
                receiver, key = node.func.value, node.args[0].value
            else:
                continue
            if key not in RELEASE_KEYS:
                continue
            text = ast.unparse(receiver).lower()
            if "meta" in text or text == "release":
                yield rel, key, node.lineno


def test_no_module_outside_privacy_reads_a_metadata_field():
    found = sorted(_raw_reads())
    new = [f"iwpfast/{m}:{line} reads the release metadata field {k!r}" for m, k, line in found
           if (m, k) not in KNOWN_READS]
    assert not new, ("read the release through its ReleaseSpec (iwpfast.privacy.spec_reading: "
                     "release_spec_of, source_release_spec), not its fields:\n" + "\n".join(new))
    # the modules this issue moved onto the spec stay there
    moved = {"estimators/_noise.py", "estimators/_multiclass.py", "estimators/classifier.py"}
    assert not [r for r in found if r[0] in moved]
    assert not [r for r in found if r[0] == "sgd/driver.py" and r[1] not in
                ("feature_bound", "target_bound")]


def test_the_checker_sees_a_raw_read(tmp_path, monkeypatch):
    fake = tmp_path / "iwpfast"
    (fake / "estimators").mkdir(parents=True)
    (fake / "estimators" / "bad.py").write_text(
        "def f(src):\n    return src.release_metadata.get('label_keep_prob')\n")
    (fake / "privacy").mkdir()
    (fake / "privacy" / "fine.py").write_text("def f(meta):\n    return meta['features']\n")
    monkeypatch.setitem(globals(), "PACKAGE", fake)
    assert list(_raw_reads()) == [("estimators/bad.py", "label_keep_prob", 2)]


# ------------------------------------------------------------------ label-only and default delta
def test_label_only_and_the_default_deltas():
    assert is_label_only(["a", "b"], ["a", "b"], None)
    assert not is_label_only(["a", "b"], ["a"], None)
    assert not is_label_only(["a", "b"], ["a", "b"], 1.0)
    assert not is_label_only(["a"], [], None)
    kw = dict(features=["a", "b"], bound=2.0)
    # features noised: the delta given, else the mechanism's default; the target takes it
    assert release_deltas(epsilon_x=1.0, public_features=[], task="classification", delta=None,
                          **kw) == {"delta": 1e-5, "bound": 2.0, "delta_y": None}
    assert release_deltas(epsilon_x=1.0, public_features=[], task="classification", delta=None,
                          mechanism="laplace", **kw)["delta"] == 0.0
    assert release_deltas(epsilon_x=1.0, public_features=[], task="regression", delta=1e-6,
                          **kw) == {"delta": 1e-6, "bound": 2.0, "delta_y": None}
    # label-only: no feature delta nor bound; a regression target's only delta
    only = dict(epsilon_x=None, public_features=["a", "b"], **kw)
    assert release_deltas(task="classification", delta=None, **only) == \
        {"delta": None, "bound": None, "delta_y": None}
    assert release_deltas(task="regression", delta=None, **only)["delta_y"] == 1e-5
    assert release_deltas(task="regression", delta=1e-7, **only)["delta_y"] == 1e-7
    assert release_deltas(task="regression", delta=1e-7, delta_y=1e-3, **only)["delta_y"] == 1e-3


def test_a_label_only_regression_plan_takes_the_release_commands_delta():
    from iwpfast.planning import plan_release
    plan = plan_release(epsilon_x=None, epsilon_y=1.0, delta=1e-5, bound=None, n_features=3,
                        n_public=3, task="regression")
    spec = ReleaseSpec(epsilon_y=1.0, public_features=("x0", "x1", "x2"),
                       features=("x0", "x1", "x2"), ranges={f"x{j}": (-1, 1) for j in range(3)},
                       label="y", task="regression", target_range=(-1, 1), delta_y=1e-5)
    assert plan.delta is None and plan.target_noise_scale == spec.target_noise_scale
