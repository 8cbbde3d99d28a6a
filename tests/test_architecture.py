"""The layering of docs/design.md section 4, read from the imports of every module; and the size
limits of its modules and functions.

Each module of the package belongs to one layer; a layer may import only the layers listed for
it (imports inside functions count too: a lazy import is still a dependency).  A failure here
means a dependency that points the wrong way: move the code, or, if the design really changes,
change docs/design.md section 4 and this table together.

Outside ``iwpfast/_kernels/`` no module is longer than ``MAX_MODULE_LINES`` lines and no function
or method longer than ``MAX_FUNCTION_LINES`` (docs/design.md section 4, "Size limits").  Run this
file as a script (``python tests/test_architecture.py``) to list the largest of both.
"""
import ast
import pathlib
import sys

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "iwpfast"

# first component of the module path inside iwpfast -> layer
LAYER_OF = {
    "exceptions": "base", "_version": "base", "progress": "base", "engines": "base",
    "deprecation": "base", "registry": "base", "settings": "base",
    "_kernels": "kernels",
    "losses": "spec", "label_noise": "spec", "estimates": "spec", "transforms": "spec", "solvers": "spec",
    "laplace": "spec", "categorical_rr": "spec", "noise_registry": "spec", "holdout_verdict": "spec",
    "io": "io",
    "privacy": "privacy",
    "sgd": "sgd", "moment_stats": "sgd", "moment_learner": "sgd",
    "learner_choice": "sgd",
    "estimators": "api", "model_io": "api", "datasets": "api", "demo": "api",
    "experiments": "api", "benchmarks": "api", "distributed": "api", "spark": "api", "planning": "api",
    "metrics": "api",
    "cli": "cli", "commands": "cli",
}
BELOW_API = {"base", "kernels", "spec", "io", "privacy", "sgd"}
# layer -> layers it may import ("root": the lazy top-level package, iwpfast/__init__.py)
ALLOWED = {
    "base": {"base"},
    "kernels": {"kernels"},
    "spec": {"base", "spec"},
    "io": {"base", "io"},
    "privacy": {"base", "spec", "kernels", "io", "privacy"},
    "sgd": {"base", "spec", "kernels", "io", "privacy", "sgd"},
    "api": BELOW_API | {"api", "root"},
    "cli": BELOW_API | {"api", "cli", "root"},
    "root": BELOW_API | {"api", "cli", "root"},
}
# third-party modules that only the kernels may import (nothing compiles outside _kernels/)
KERNEL_ONLY = {"numba", "llvmlite"}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield path, parts


def _layer(parts: tuple) -> str:
    if len(parts) == 1:
        return "root"
    layer = LAYER_OF.get(parts[1])
    assert layer is not None, (
        f"module {'.'.join(parts)} belongs to no layer: add it to docs/design.md section 4 and to "
        "LAYER_OF in tests/test_architecture.py")
    return layer


def _is_module(parts: tuple) -> bool:
    path = PACKAGE.parent.joinpath(*parts)
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(path: pathlib.Path, parts: tuple):
    """(line, imported module path as a tuple) for every import in the file."""
    package = parts if path.name == "__init__.py" else parts[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, tuple(alias.name.split("."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = base + (tuple(node.module.split(".")) if node.module else ())
            else:
                target = tuple(node.module.split("."))
            if target and target[0] == "iwpfast":
                for alias in node.names:                 # "from . import engine": a submodule
                    if _is_module(target + (alias.name,)):
                        yield node.lineno, target + (alias.name,)
                    else:
                        yield node.lineno, target
            else:
                yield node.lineno, target


def _violations():
    found = []
    for path, parts in _modules():
        layer = _layer(parts)
        where = path.relative_to(PACKAGE.parent)
        for line, target in _imports(path, parts):
            if target[0] in KERNEL_ONLY and layer != "kernels":
                found.append(f"{where}:{line} imports {target[0]}: only iwpfast/_kernels/ may")
            if target[0] != "iwpfast":
                continue
            target_layer = _layer(target)
            if target_layer not in ALLOWED[layer]:
                found.append(f"{where}:{line} ({layer}) imports {'.'.join(target)} ({target_layer})")
    return found


def test_every_module_has_a_layer():
    for _, parts in _modules():
        _layer(parts)


def test_dependencies_point_one_way():
    violations = _violations()
    assert not violations, "imports against docs/design.md section 4:\n" + "\n".join(violations)


@pytest.mark.parametrize("layer,allowed", sorted(ALLOWED.items()))
def test_the_table_only_points_down(layer, allowed):
    # the table itself: the lower layers never reach up to the API or the CLI
    if layer in BELOW_API:
        assert not allowed & {"api", "cli", "root"}


def test_the_checker_sees_a_wrong_import(tmp_path, monkeypatch):
    # a kernel module importing the spec layer is caught (the check can fail)
    fake = tmp_path / "iwpfast"
    (fake / "_kernels").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "losses.py").write_text("")
    (fake / "_kernels" / "__init__.py").write_text("")
    (fake / "_kernels" / "bad.py").write_text("from ..losses import x\nimport numba\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    violations = _violations()
    assert any("bad.py:1 (kernels) imports iwpfast.losses (spec)" in v for v in violations)
    assert not any("numba" in v for v in violations)           # numba is fine in _kernels


# ---------------------------------------------------------------- no import loops inside a layer
def _module_of(target: tuple) -> tuple:
    """The module an import resolves to: the longest prefix of ``target`` that is a module
    (``from ..io import sources`` is the module io.sources; ``from ..io import Source``, the
    package io)."""
    while len(target) > 1 and not _is_module(target):
        target = target[:-1]
    return target


def _import_loops() -> list[list[str]]:
    """The import loops between modules of one layer (the layer table cannot see them): the
    strongly connected components of the import graph with more than one module (imports inside
    functions count, as above)."""
    graph: dict[tuple, set] = {}
    for path, parts in _modules():
        layer = _layer(parts)
        graph[parts] = {t for t in (_module_of(target) for _, target in _imports(path, parts)
                                    if target[0] == "iwpfast")
                        if t != parts and _layer(t) == layer}
    index: dict[tuple, int] = {}
    low: dict[tuple, int] = {}
    stack: list[tuple] = []
    loops = []

    def visit(v):                                   # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(".".join(w))
                if w == v:
                    break
            if len(component) > 1:
                loops.append(sorted(component))

    for v in list(graph):
        if v not in index:
            visit(v)
    return loops


def test_no_import_loops_inside_a_layer():
    loops = _import_loops()
    assert not loops, ("modules of one layer that import each other (directly or round a loop); "
                       "move the shared piece into a module both import:\n"
                       + "\n".join(" <-> ".join(loop) for loop in loops))


def test_the_loop_checker_sees_a_loop(tmp_path, monkeypatch):
    # two API modules importing each other, one of them lazily, are a loop; a one-way import
    # is not
    fake = tmp_path / "iwpfast"
    (fake / "estimators").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "estimators" / "__init__.py").write_text("")
    (fake / "estimators" / "a.py").write_text("from .b import x\n")
    (fake / "estimators" / "b.py").write_text("def f():\n    from .. import model_io\n")
    (fake / "estimators" / "c.py").write_text("from .a import y\n")
    (fake / "model_io.py").write_text("from .estimators import a\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert _import_loops() == [["iwpfast.estimators.a", "iwpfast.estimators.b", "iwpfast.model_io"]]


# ---------------------------------------------------------------- size limits outside _kernels/
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 120
# the kernels are exempt: a Numba kernel is one function on purpose (no calls in its hot loop)
SIZE_EXEMPT = ("_kernels",)


def _sized_modules():
    for path, parts in _modules():
        if not set(SIZE_EXEMPT) & set(parts[1:]):
            yield path


def _function_spans(tree: ast.AST):
    """(qualified name, first line, lines) of every function and method, nested ones included; a
    function's lines run from its first decorator to its last line (docstring and comments
    count)."""
    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                    yield name, first, child.end_lineno - first + 1
                yield from walk(child, name + ".")
            else:
                yield from walk(child, prefix)
    yield from walk(tree, "")


def _sizes():
    """(module lines per module, [(lines, "path:line name")] per function) outside _kernels/."""
    modules, functions = {}, []
    for path in _sized_modules():
        text = path.read_text()
        where = str(path.relative_to(PACKAGE.parent))
        modules[where] = len(text.splitlines())
        for name, first, lines in _function_spans(ast.parse(text, where)):
            functions.append((lines, f"{where}:{first} {name}"))
    return modules, functions


def _oversized():
    modules, functions = _sizes()
    return ([f"{where}: {n} lines" for where, n in sorted(modules.items()) if n > MAX_MODULE_LINES]
            + [f"{where}: {n} lines" for n, where in sorted(functions) if n > MAX_FUNCTION_LINES])


def test_no_module_or_function_over_the_size_limits():
    oversized = _oversized()
    assert not oversized, (
        f"modules over {MAX_MODULE_LINES} lines or functions over {MAX_FUNCTION_LINES} lines "
        "outside iwpfast/_kernels/: split them by responsibility (and name a new module in "
        "docs/design.md section 4):\n" + "\n".join(oversized))


def test_the_size_checker_sees_a_long_module_and_function(tmp_path, monkeypatch):
    # a long method (decorator to last line), a long nested function and a long module are
    # caught; the same in _kernels/ is not
    fake = tmp_path / "iwpfast"
    (fake / "_kernels").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (fake / "big.py").write_text(
        "class A:\n    @staticmethod\n    def f():\n" + body.replace("    ", "        ")
        + "def g():\n    def inner():\n" + body.replace("    ", "        ") + "    return inner\n"
        + "def short():\n" + "".join(f"    y{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 2))
        + "\n" * (MAX_MODULE_LINES - 2 * MAX_FUNCTION_LINES))
    (fake / "_kernels" / "kernel.py").write_text("def k():\n" + body + "\n" * MAX_MODULE_LINES)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    oversized = _oversized()
    n_big = len((fake / "big.py").read_text().splitlines())
    assert n_big > MAX_MODULE_LINES
    f, g = MAX_FUNCTION_LINES + 2, MAX_FUNCTION_LINES + 3       # A.f: decorator and def line
    assert sorted(oversized) == sorted([
        f"iwpfast/big.py: {n_big} lines",
        f"iwpfast/big.py:2 A.f: {f} lines",
        f"iwpfast/big.py:{2 + f} g: {g} lines",
        f"iwpfast/big.py:{2 + f + 1} g.inner: {MAX_FUNCTION_LINES + 1} lines"])
    # one line shorter is within the limits: "short" (MAX_FUNCTION_LINES - 1 lines) is not listed
    assert not any("short" in o for o in oversized)


if __name__ == "__main__":          # the largest modules and functions, to see what is near
    _modules_lines, _functions_lines = _sizes()
    print(f"modules (limit {MAX_MODULE_LINES} lines):")
    for _where, _n in sorted(_modules_lines.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {_n:5d}  {_where}")
    print(f"functions (limit {MAX_FUNCTION_LINES} lines):")
    for _n, _where in sorted(_functions_lines, reverse=True)[:10]:
        print(f"  {_n:5d}  {_where}")
