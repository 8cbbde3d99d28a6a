"""The README's Python blocks run as written, in an empty folder (no file or name they do not
create), and warn of no privacy leak.  The release and fit block takes ~10 s jitted; as plain Python
(CI's NUMBA_DISABLE_JIT=1 pass) its 230,000-row 'auto' fit takes minutes and covers no kernel line
the kernel tests miss, so .ci/run deselects it there."""
import re
import warnings
from pathlib import Path

import pytest

from iwpfast.exceptions import PrivacyLeakWarning

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_its_python_blocks():
    assert len(BLOCKS) == 2
    assert "IWPClassifier()" in BLOCKS[0] and "iwp_gradient" in BLOCKS[1]


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs_as_written(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        exec(compile(BLOCKS[index], f"README.md python block {index}", "exec"), {"__name__": "readme"})
