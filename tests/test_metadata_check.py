"""What the release metadata claims, checked (issue 42, D4 and D5): categories read from the
data are recorded and flagged like ranges read from the data, and on read the stored guarantee,
delta terms, derived noise fields and row count are recomputed from the mechanism's parameters
(or the footer / manifest) and an edited one is refused naming the field."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from iwpfast import IWPClassifier
from iwpfast.cli import main
from iwpfast.exceptions import InvalidInputError, PrivacyLeakWarning, ReleaseSpecError
from iwpfast.io.parts import MANIFEST_NAME
from iwpfast.privacy import ReleaseSpec, read_release_spec, release
from iwpfast.privacy.spec import METADATA_KEY

KEY = METADATA_KEY.encode()
CATS = ["A", "B", "C"]


def _raw(tmp_path, n=3000):
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 10, n)
    w = rng.choice(CATS, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(a - 5) / 2))).astype(np.int64)
    path = tmp_path / "raw.parquet"
    pd.DataFrame({"a": a, "w": w, "y": y}).to_parquet(path, row_group_size=1000)
    return path


def _cli_release(tmp_path, *extra, out="rel.parquet"):
    args = ["release", str(_raw(tmp_path)), f"{tmp_path}/{out}", "--features", "a=0:10", "w",
            "--epsilon-x", "2", "--epsilon-y", "1", "--bound", "1", *extra]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return main(args)


def _meta(path) -> dict:
    return json.loads(pq.read_schema(path).metadata[KEY])


def _rewrite(src, dst, meta: dict) -> None:
    table = pq.read_table(src)
    table = table.replace_schema_metadata({**table.schema.metadata, KEY: json.dumps(meta).encode()})
    pq.write_table(table, dst)


def _model():
    return IWPClassifier(alpha=0.01, learning_rate=0.01, radius=0.5, progress=False)


# ------------------------------------------------------------------ D4: categories from the data
def test_categories_from_data_is_recorded_in_info_guarantee_and_model(tmp_path, capsys):
    assert _cli_release(tmp_path, "--categories-from-data", "w") == 0
    rel = tmp_path / "rel.parquet"
    assert _meta(rel)["categories_from_data"] == ["w"]
    spec = read_release_spec(rel)
    assert spec.categories_from_data == ("w",)
    assert "categories of w were read from the data and are not protected" in str(spec.guarantee())
    capsys.readouterr()
    assert main(["info", str(rel)]) == 0
    text = capsys.readouterr().out
    assert "categories read from the data: NOT protected" in text
    assert "WARNING: the categories of w were read from the data" in text
    assert main(["info", str(rel), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["categories_from_data"] == ["w"]
    # the model carries it where it carries ranges_from_data (its release's metadata)
    model = _model().fit(str(rel))
    model.save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["release"]["categories_from_data"] == ["w"]
    assert main(["info", str(tmp_path / "m.json")]) == 0
    assert "categories of w were read from the data" in capsys.readouterr().out


def test_declared_categories_record_none(tmp_path):
    assert _cli_release(tmp_path, "--categories", "w=A,B,C") == 0
    meta = _meta(tmp_path / "rel.parquet")
    assert meta["categories_from_data"] == [] and meta["ranges_from_data"] is False
    assert "read from the data" not in meta["guarantee"].get("caveat", "")
    assert "read from the data" not in str(read_release_spec(tmp_path / "rel.parquet").guarantee())


def test_categories_from_data_in_a_multipart_manifest(tmp_path):
    assert _cli_release(tmp_path, "--categories-from-data", "w", "--part-rows", "1000",
                        out="parts/") == 0
    manifest = json.loads((tmp_path / "parts" / MANIFEST_NAME).read_text())
    assert len(manifest["parts"]) > 1
    assert manifest["release"]["categories_from_data"] == ["w"]
    assert read_release_spec(tmp_path / "parts").categories_from_data == ("w",)


def test_categories_from_data_and_declared_for_one_column_is_refused(tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)   # refused before the data are read
        rc = _cli_release(tmp_path, "--categories", "w=A,B,C", "--categories-from-data", "w")
    assert rc == 2
    err = capsys.readouterr().err
    assert "'w'" in err and "--categories-from-data" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "rel.parquet").exists()
    (tmp_path / "cats.json").write_text(json.dumps({"w": CATS}))
    assert _cli_release(tmp_path, "--categories-file", str(tmp_path / "cats.json"),
                        "--categories-from-data", "w") == 2
    assert "'w'" in capsys.readouterr().err


def test_spec_categories_from_data_names_a_categorical_column():
    base = dict(epsilon_x=1.0, delta=1e-5, bound=1.0, features=["a", "w"], ranges="a=0:1")
    with pytest.raises(InvalidInputError, match="categories_from_data names w"):
        ReleaseSpec(**base, categories_from_data=["w"])
    spec = ReleaseSpec(**base, categories={"w": CATS}, categories_from_data="w")
    assert spec.categories_from_data == ("w",)
    assert ReleaseSpec.from_metadata(spec.to_metadata()).categories_from_data == ("w",)


# ------------------------------------------------------------------ D5: the stored claims checked
def _set(path: str, value):
    def edit(meta):
        *head, last = path.split(".")
        node = meta
        for key in head:
            node = node[key]
        node[last] = value
    return edit


EDITS = {
    "guarantee": _set("guarantee.epsilon", 0.1),
    "noise.delta_terms.total": _set("noise.delta_terms.total", 1e-9),
    "row_count": _set("row_count", 5),
    "noise.scale_grid_units": _set("noise.scale_grid_units", 1.0),
    "label_other_prob": _set("label_other_prob", 0.01),
    "guarantee.holds_for": _set("guarantee.holds_for", "anything"),
}


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("released")
    spec = ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=["a", "w"],
                       ranges="a=0:10", categories={"w": CATS}, label="y")
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"a": rng.uniform(0, 10, 3000), "w": rng.choice(CATS, 3000),
                       "y": rng.integers(0, 2, 3000)})
    release(df, tmp / "rel.parquet", spec)
    model = _model().fit(str(tmp / "rel.parquet"))
    model.save(tmp / "m.json")
    return tmp


@pytest.mark.parametrize("field", sorted(EDITS))
def test_an_edited_field_is_refused_by_info_fit_and_evaluate(released, tmp_path, capsys, field):
    meta = _meta(released / "rel.parquet")
    EDITS[field](meta)
    edited = tmp_path / "edited.parquet"
    _rewrite(released / "rel.parquet", edited, meta)
    for args in (["info", str(edited)], ["info", str(edited), "--json"],
                 ["evaluate", str(released / "m.json"), str(edited), "--private"]):
        capsys.readouterr()
        assert main(args) == 65, args                  # bad data, EX_DATAERR (issue 47)
        err = capsys.readouterr().err
        assert f"field '{field}'" in err and "edited" in err and "second noisy copy" in err, (args, err)
    with pytest.raises(ReleaseSpecError, match=f"field '{field}'"):
        _model().fit(str(edited))


def test_the_guarantee_error_names_both_claims(released, tmp_path):
    meta = _meta(released / "rel.parquet")
    meta["guarantee"]["epsilon"] = 0.1
    _rewrite(released / "rel.parquet", tmp_path / "e.parquet", meta)
    with pytest.raises(ReleaseSpecError, match=r"says \(0\.1, 1e-05\)-LDP but its mechanism's "
                                               r"parameters give \(3, 1e-05\)-LDP"):
        read_release_spec(tmp_path / "e.parquet")


def test_an_untouched_release_reads_as_before(released, tmp_path, capsys):
    rel = released / "rel.parquet"
    copy = tmp_path / "copy.parquet"
    _rewrite(rel, copy, _meta(rel))            # rewritten, not edited
    for path in (rel, copy):
        assert main(["info", str(path), "--json"]) == 0
        assert main(["evaluate", str(released / "m.json"), str(path), "--private"]) == 0
        assert read_release_spec(path).row_count == 3000


def test_fields_an_older_version_did_not_write_are_accepted(released, tmp_path):
    meta = _meta(released / "rel.parquet")
    for key in ("holds_for", "caveat"):
        meta["guarantee"].pop(key, None)
    for key in ("delta_terms", "scale_grid_units"):
        meta["noise"].pop(key)
    for key in ("label_other_prob", "feature_vector_bound", "row_count", "categories_from_data"):
        meta.pop(key, None)
    _rewrite(released / "rel.parquet", tmp_path / "old.parquet", meta)
    spec = read_release_spec(tmp_path / "old.parquet")
    assert spec.guarantee().epsilon == 3.0


def test_a_float_release_that_drops_its_caveat_is_refused(tmp_path):
    spec = ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=["a"],
                       ranges="a=0:1", label="y", noise="float")
    meta = spec.to_metadata(10)
    assert "caveat" in meta["guarantee"]
    said = meta["guarantee"].pop("caveat")
    with pytest.raises(ReleaseSpecError, match="field 'guarantee.caveat'"):
        ReleaseSpec.from_metadata(meta)
    with pytest.raises(ReleaseSpecError, match="field 'guarantee.caveat'"):
        ReleaseSpec.from_metadata({**meta, "guarantee": {**meta["guarantee"], "caveat": " "}})
    # another version's words for the same caveat read: only their absence overclaims
    reworded = {**meta["guarantee"], "caveat": said.upper()}
    assert ReleaseSpec.from_metadata({**meta, "guarantee": reworded}).noise == "float"


def test_a_multipart_row_count_edit_is_refused(tmp_path, capsys):
    assert _cli_release(tmp_path, "--categories", "w=A,B,C", "--part-rows", "1000",
                        out="parts/") == 0
    folder = tmp_path / "parts"
    manifest_path = folder / MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text())
    manifest["row_count"] += 1
    manifest_path.write_text(json.dumps(manifest))
    assert main(["info", str(folder), "--json"]) == 65
    assert "field 'row_count'" in capsys.readouterr().err
    manifest["row_count"] -= 1
    manifest_path.write_text(json.dumps(manifest))
    assert main(["info", str(folder)]) == 0
    # a part's own count against its footer (the parts read without the manifest)
    part = folder / manifest["parts"][1]["path"]
    meta = _meta(part)
    meta["row_count"] += 1
    _rewrite(part, part, meta)
    with pytest.raises(ReleaseSpecError, match="field 'row_count'"):
        read_release_spec(sorted(str(p) for p in folder.glob("part-*")))
