"""Reproducer scripts: an entry's, written by its backend's report module
(:attr:`fuzz.backends.Backend.report`), and run in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from fuzz.backends import report_of
from fuzz.fpenv import keeps_subnormals
from fuzz.store.corpus import Entry

__all__ = ["render_script", "run_script"]


@keeps_subnormals
def render_script(entry: Entry) -> str:
    """A standalone reproducer for ``entry``, by the backend of the pass it was found on;
    it exits 1 while the bug shows."""
    script: str = report_of(entry.pass_name).script(entry)
    return script


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
