"""A newcomer's walk, scripted: the README's quick start, command by command, in a fresh
temporary folder, offline, with exit codes and the lines a newcomer looks for asserted.

``make fuzz`` is replaced by the ``bnfuzz run`` it runs (the Makefile's recipe is checked
to be that command), with its time budget swapped for an example count and uncapped
shrinking, so what it finds does not depend on the machine's speed; ``file-issues`` is
pointed at an address where nothing answers, as on a machine without network.
"""

from __future__ import annotations

import glob
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a campaign, and a process per command

ROOT = Path(__file__).resolve().parent.parent
BNFUZZ = Path(sys.executable).with_name("bnfuzz")
#: ``make fuzz`` as the test runs it: the Makefile's command, counted in examples.
FUZZ = "bnfuzz run --pass upstream --seed 0 --max-examples 60 --shrink-seconds 3600 --out findings"
NOWHERE = "http://127.0.0.1:9"
#: What TVM prints to stderr when a pass raises, which ``bnfuzz`` counts instead.
NOISE = "BlockBuilder destroyed with remaining blocks"


def quick_start() -> list[str]:
    """The ``bnfuzz`` commands of the README's quick start, in order."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    blocks = [block.split("\n```", 1)[0] for block in section.split("```sh\n")[1:]]
    lines = [line.split("  #", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [line.removeprefix(".venv/bin/") for line in lines if line.startswith(".venv/bin/bnfuzz ")]


def run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    expanded = [match for arg in argv[1:] for match in (sorted(glob.glob(arg, root_dir=cwd)) or [arg])]
    return subprocess.run([str(BNFUZZ), *expanded], capture_output=True, text=True, cwd=cwd, timeout=1800)


def test_the_makefile_runs_the_command_the_walk_stands_in_for() -> None:
    recipe = (ROOT / "Makefile").read_text().split("\nfuzz: setup\n", 1)[1].split("\n\n", 1)[0]
    assert "bnfuzz run --pass upstream --budget $(BUDGET) --out findings" in recipe


@pytest.mark.nightly  # 45 s of CPU; each command it walks through has its own test in make test
def test_the_quick_start_from_a_fresh_folder(tmp_path: Path) -> None:
    commands = quick_start()
    assert [c.split()[1] for c in commands] == ["triage", "render", "promote", "file-issues"]

    fuzz = run(FUZZ, tmp_path)
    assert fuzz.returncode == 1, fuzz.stderr  # findings
    printed = (fuzz.stdout + fuzz.stderr).splitlines()
    assert len(printed) <= 40, "\n".join(printed)
    assert NOISE not in fuzz.stderr
    wrote = re.search(r"^wrote (\d+) findings to findings/", fuzz.stdout, re.MULTILINE)
    assert wrote is not None and int(wrote.group(1)) == len(list((tmp_path / "findings").glob("*.json")))
    assert "next:" in fuzz.stdout and "triage findings" in fuzz.stdout

    triage, render, promote, file_issues = commands
    done = run(triage, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "must-not-fold[axis=non-channel]" in done.stdout

    done = run(render, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# [Bug][Relax] FoldBatchnormToConv2D ")
    assert "### Actual behavior" in done.stdout and "### Steps to reproduce" in done.stdout
    assert NOISE not in done.stderr

    done = run(render.replace("--issue", "--script"), tmp_path)
    assert done.returncode == 0 and done.stdout.startswith('"""Reproducer: ')

    done = run("bnfuzz replay findings", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr

    done = run(promote, tmp_path)
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "my-corpus").glob("*.json"))

    done = run(f"{file_issues} --api {NOWHERE}", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\n# [Bug][Relax] " in done.stdout  # every issue, whole
    assert "the check for issues already filed in apache/tvm was skipped" in done.stderr
    assert re.search(r"^\d+ entries, \d+ root causes: 0 filed, \d+ to file", done.stdout, re.MULTILINE)
