"""Replaying a corpus entry (or a finding) on a pass: built, run and judged afresh.

:func:`check_entry` checks a case on a named pass, in a worker process where the entry's
bug kills or hangs the process; :func:`replay` says whether the pass did what the entry
expects of it (:class:`Replay`); :func:`run_script` runs the entry's reproducer script in a
fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fuzz.backends import resolve_fold
from fuzz.case import Case
from fuzz.check import Checked, check
from fuzz.corpus import Entry
from fuzz.pipeline import Pipeline
from fuzz.script import render_script

__all__ = ["ISOLATED_TIMEOUT", "Replay", "check_entry", "replay", "run_script"]

#: Seconds a worker may take on one entry before it counts as a hang.
ISOLATED_TIMEOUT = 120.0


def check_entry(
    case: Case, pass_name: str, pipeline: Pipeline | None, isolated: bool, *, flush: bool | None = None
) -> Checked:
    """Check a case on a pass (in a pipeline), in a worker process if ``isolated``;
    ``flush``: with subnormals flushed to zero while the fold runs."""
    if not isolated:
        return check(case, resolve_fold(pass_name), pipeline=pipeline, flush=flush)
    from fuzz.isolate import IsolatedChecker

    with IsolatedChecker(pass_name, timeout=ISOLATED_TIMEOUT, flush=flush) as checker:
        return checker(case, pipeline)


@dataclass(frozen=True)
class Replay:
    """One entry replayed on one pass: what happened against what was expected."""

    pass_name: str
    expected: str | None
    status: str  # "fails" or "passes"
    checked: Checked

    @property
    def as_expected(self) -> bool:
        return self.expected is None or self.expected == self.status


def replay(entry: Entry, pass_name: str, *, flush: bool | None = None) -> Replay:
    """Check the entry's case on ``pass_name`` (built, run and judged afresh; ``flush``:
    with subnormals flushed to zero while the fold runs)."""
    checked = check_entry(entry.case, pass_name, entry.pipeline, entry.isolated, flush=flush)
    status = "passes" if checked.verdict.primary is None else "fails"
    return Replay(pass_name, entry.expect.get(pass_name), status, checked)


def run_script(entry: Entry) -> int:
    """Run an entry's reproducer in a fresh interpreter (from this directory, so a script for
    ``fixed`` finds ``fuzz``); its exit code, negative for a signal."""
    with tempfile.TemporaryDirectory(prefix="bnfuzz-repro-") as tmp:
        script = Path(tmp) / "repro.py"
        script.write_text(render_script(entry))
        try:
            done = subprocess.run(
                [sys.executable, str(script)], capture_output=True, timeout=900, cwd=Path.cwd()
            )
        except subprocess.TimeoutExpired:
            return 124
    return done.returncode
