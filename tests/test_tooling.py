"""The safe edit loop: the Numba pin, the regenerable fast_exp coefficients."""
import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _numba_requirement() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    match = re.search(r'^\s*"(numba[^"]*)"', text, flags=re.MULTILINE)
    assert match, "pyproject.toml lists no numba dependency"
    return match.group(1)


def test_numba_is_pinned_with_both_bounds_and_installed_inside_them():
    # _kernels/_lowlevel.py emits LLVM IR through numba internals: an untested numba version
    # may compile different code, so the dependency has a lower and an upper bound, and the
    # numba this suite runs on must lie inside them (else the pin no longer says what CI tests)
    import numba
    from packaging.requirements import Requirement
    from packaging.version import Version

    requirement = Requirement(_numba_requirement())
    operators = {spec.operator for spec in requirement.specifier}
    assert operators & {">=", ">"} and operators & {"<", "<="}, (
        f"{requirement}: give numba a lower and an upper bound (pyproject.toml says how to move them)")
    installed = Version(numba.__version__.split("+")[0])
    assert requirement.specifier.contains(installed, prereleases=True), (
        f"numba {installed} is outside the tested range {requirement.specifier}; run the suite on "
        "it and move the bounds in pyproject.toml as its comment says")


def test_fast_exp_coefficients_regenerate():
    # tools/fastexp_coefficients.py recomputes the polynomial (mpmath.chebyfit) and measures the
    # relative error of the committed and regenerated coefficients in 40-digit arithmetic
    pytest.importorskip("mpmath")
    spec = importlib.util.spec_from_file_location("fastexp_coefficients",
                                                  ROOT / "tools" / "fastexp_coefficients.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    new, old = tool.regenerate(), tool.committed()
    assert new[:2] == old[:2] == [1.0, 1.0]               # fast_exp's Horner assumes them
    assert old[2:4] == [0.5000000000000019, 0.1666666666666668]
    assert all(abs(n / o - 1) < 1e-15 for n, o in zip(new[2:4], old[2:4], strict=True))
    # every coefficient within 1e-6 relative of the fit (P_10, P_11 differ most; their terms
    # weigh |r|^10 <= 2.5e-5 times less), and both sets far below one float64 rounding (1.1e-16)
    assert all(abs(n / o - 1) < 1e-6 for n, o in zip(new, old, strict=True))
    assert tool.max_relative_error(old, grid=1000) < tool.TOLERANCE
    assert tool.max_relative_error(new, grid=1000) < tool.TOLERANCE
    assert tool.main(["--check"]) == 0
