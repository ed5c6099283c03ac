"""Replaying a corpus entry (or a finding) on a pass: built, run and judged afresh.

:func:`check_entry` checks a case on a named pass, in a worker process where the entry's
bug kills or hangs the process; :func:`replay` says whether the pass did what the entry
expects of it (:class:`Replay`). Its reproducer script is run by
:func:`fuzz.render.script.run_script`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuzz.backends import resolve_fold
from fuzz.engine.check import Checked, check
from fuzz.model.case import Case
from fuzz.model.pipeline import Pipeline
from fuzz.store.corpus import Entry

__all__ = ["ISOLATED_TIMEOUT", "Replay", "check_entry", "replay"]

#: Seconds a worker may take on one entry before it counts as a hang.
ISOLATED_TIMEOUT = 120.0


def check_entry(
    case: Case, pass_name: str, pipeline: Pipeline | None, isolated: bool, *, flush: bool | None = None
) -> Checked:
    """Check a case on a pass (in a pipeline), in a worker process if ``isolated``;
    ``flush``: with subnormals flushed to zero while the fold runs."""
    if not isolated:
        return check(case, resolve_fold(pass_name), pipeline=pipeline, flush=flush)
    from fuzz.engine.isolate import IsolatedChecker

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
