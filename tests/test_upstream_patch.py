"""``bnfuzz upstream-patch``: the diff applies to a copy of TVM's files (the installed
release's pass, TVM's test of it), both patched files are clean under TVM's ruff settings,
the tests it adds pass against the patched pass, and every test of an upstream defect
class fails against the unpatched one."""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fuzz.cli import main
from fuzz.render.upstream_patch import (
    PASS_PATH,
    TEST_PATH,
    TVM_RUFF_CONFIG,
    TVM_TEST_FILE,
    generated_tests,
    upstream_source,
)

pytestmark = pytest.mark.slow  # TVM's tests run in subprocesses, twice

RUFF = Path(sys.executable).with_name("ruff")

#: Installs the patched pass as ``relax.transform.FoldBatchnormToConv2D`` for TVM's tests, as
#: the patched ``python/tvm`` would (the pass file is loaded from the patched copy).
CONFTEST = """
import importlib.util
import sys
from pathlib import Path

import tvm.relax.transform

_file = Path(__file__).parents[3] / "{pass_path}"
_spec = importlib.util.spec_from_file_location("patched_fold_batch_norm", _file)
_module = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _module
_spec.loader.exec_module(_module)
tvm.relax.transform.FoldBatchnormToConv2D = _module.FoldBatchnormToConv2D
"""


def tvm_tree(root: Path) -> Path:
    """A copy of the two files of TVM's repository the patch changes, at their paths."""
    (root / PASS_PATH).parent.mkdir(parents=True)
    (root / PASS_PATH).write_text(upstream_source())
    (root / TEST_PATH).parent.mkdir(parents=True)
    shutil.copy(TVM_TEST_FILE, root / TEST_PATH)
    return root


def outcomes(root: Path, report: Path) -> dict[str, bool]:
    """Each test of TVM's test file run with pytest in ``root``: passed or not."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--rootdir", str(root), f"--junitxml={report}", str(root / TEST_PATH)],
        capture_output=True, text=True, cwd=root, timeout=1800,
    )  # fmt: skip
    assert report.exists(), done.stdout + done.stderr
    cases = ET.parse(report).getroot().iter("testcase")
    # (an element without children is false: look for one, do not test its truth)
    return {
        c.attrib["name"]: next(c.iter("failure"), None) is None and next(c.iter("error"), None) is None
        for c in cases
    }


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tvm_tree(tmp_path_factory.mktemp("tvm"))
    diff = root.parent / "fix.diff"
    assert main(["upstream-patch", "--out", str(diff)]) == 0
    check = subprocess.run(["git", "apply", "--check", str(diff)], cwd=root, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    subprocess.run(["git", "apply", str(diff)], cwd=root, check=True)
    return root


def test_the_patch_applies_and_the_files_are_in_tvm_s_style(patched: Path) -> None:
    assert "training=False" in (patched / TEST_PATH).read_text()
    for path in (PASS_PATH, TEST_PATH):
        for command in (["check"], ["format", "--check"]):
            done = subprocess.run(
                [str(RUFF), *command, "--config", str(TVM_RUFF_CONFIG), str(patched / path)],
                capture_output=True, text=True,
            )  # fmt: skip
            assert done.returncode == 0, f"ruff {' '.join(command)} {path}:\n{done.stdout}{done.stderr}"


def test_the_tests_pass_on_the_patched_pass_and_fail_on_upstream_for_every_defect_class(
    patched: Path, tmp_path: Path
) -> None:
    conftest = patched / Path(TEST_PATH).parent / "conftest.py"
    conftest.write_text(CONFTEST.format(pass_path=PASS_PATH))
    fixed = outcomes(patched, tmp_path / "fixed.xml")
    generated = [t.name for t in generated_tests()]
    assert set(generated) <= set(fixed)
    assert all(fixed.values()), [name for name, ok in fixed.items() if not ok]

    conftest.unlink()  # the same tests on the installed, unpatched pass
    upstream = outcomes(patched, tmp_path / "upstream.xml")
    defect_classes = [name for name in generated if not name.startswith("test_keeps_batch_norm_")]
    assert len(defect_classes) == 12  # one per top-level corpus entry
    assert [name for name in defect_classes if upstream[name]] == []
