import subprocess
import sys

import iwpfast


def test_version_is_a_string():
    assert isinstance(iwpfast.__version__, str) and iwpfast.__version__.count(".") == 2


def test_import_compiles_nothing_and_is_lazy():
    code = (
        "import sys, iwpfast; "
        "bad = [m for m in ('numba', 'pyarrow', 'iwpfast._kernels', 'pyspark', 'distributed') "
        "if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"import iwpfast pulled in: {out.stdout.strip()}"


def test_unknown_attribute_raises():
    import pytest

    with pytest.raises(AttributeError):
        _ = iwpfast.does_not_exist
