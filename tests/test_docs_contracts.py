"""docs/internals.md states the driver's and the sources' signatures and fields; these tests keep
the page and the code in step (a new keyword or field must be documented there)."""
import dataclasses
import inspect
import pathlib
import re

import pytest

DOC = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "internals.md").read_text()


def _documented_call(name: str) -> str:
    """The text of ``name(...)`` in the page's code blocks (parentheses balanced)."""
    start = DOC.index(name + "(")
    depth = 0
    for k in range(start + len(name), len(DOC)):
        depth += {"(": 1, ")": -1}.get(DOC[k], 0)
        if depth == 0:
            return DOC[start + len(name) + 1:k]
    raise AssertionError(f"unbalanced {name}( in docs/internals.md")


def _names(text: str) -> list[str]:
    """Parameter names of a documented call: 'a, b: T, *, c=1' -> ['a', 'b', 'c']."""
    text = re.sub(r"\[[^\]]*\]|\{[^}]*\}|\([^)]*\)", "", text)     # drop annotations' brackets
    return [m.group(1) for part in text.split(",")
            if (m := re.match(r"\s*([A-Za-z_]\w*)", part.strip()))]


@pytest.mark.parametrize("module,name", [("iwpfast.sgd.driver", "fit_stream"),
                                         ("iwpfast.sgd.driver", "finish_states"),
                                         ("iwpfast.sgd.driver", "noise_from_release"),
                                         ("iwpfast.io.sources", "open_source")])
def test_documented_signatures_match_the_code(module, name):
    import importlib

    function = getattr(importlib.import_module(module), name)
    code = [p for p in inspect.signature(function).parameters
            if p not in ("rtol", "batch_rows")]            # internal tolerance, deprecated alias
    assert _names(_documented_call(name)) == code, f"docs/internals.md's {name} is out of date"


def test_documented_head_and_stream_result_fields_match_the_code():
    from iwpfast.sgd.driver import Head, StreamResult

    assert _names(_documented_call("Head")) == [f.name for f in dataclasses.fields(Head)]
    block = DOC[DOC.index("StreamResult:"):DOC.index("trace_callback(")]
    documented = re.findall(r"\.(\w+)", block)
    assert documented == [f.name for f in dataclasses.fields(StreamResult)]


def test_documented_release_metadata_lists_every_field():
    from iwpfast.privacy import ReleaseSpec

    block = DOC[DOC.index("## Release metadata"):DOC.index("Never a seed")]
    documented = set(re.findall(r'"(\w+)":', block))
    for spec in (ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=["a"],
                             ranges="a=0:1", label="y", classes=["p", "q", "r"]),
                 ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=["a"],
                             ranges="a=0:1", label="t", task="regression", target_range=(0, 1))):
        missing = set(spec.to_metadata()) - documented
        assert not missing, f"docs/internals.md's release metadata lacks {sorted(missing)}"
