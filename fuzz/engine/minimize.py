"""Minimise: make a shrunk case simpler still, and say which of its parts matter.

Hypothesis shrinks toward small choice sequences, which is not always the simplest
graph to read: a batch of two where one would do, a dilation that is not needed.
:func:`simplify` tries one-step simplifications (an attribute back to its default,
batch to one, an operand's values to all 1.0, the dtype to float32), keeps each one
after which the *same bug* (same signature) is still found, and repeats until none
applies. :func:`minimality` then tries each remaining simplification on its own and
says whether the bug survives it: the note an issue text carries.

Key idea: "the same bug" is the same symptom with no essential attribute the original
lacked (see :mod:`fuzz.oracle.signature`), not just the same symptom, so a simplification that
trades one bug for another is never taken, while one that shows an attribute was
incidental is, and the signature loses that attribute.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from fuzz.backends import FoldLike, Runner, as_fold
from fuzz.engine.check import check
from fuzz.engine.simplifications import simplifications
from fuzz.errors import CaseOutsideBackend
from fuzz.model.case import Case
from fuzz.model.pipeline import Pipeline
from fuzz.oracle.execution import Outputs
from fuzz.oracle.signature import Signature

__all__ = ["Attempt", "Bug", "found", "minimality", "simplify"]


@dataclass(frozen=True)
class Bug:
    """The bug a pass shows on a case: its signature, and whether the outputs show it."""

    signature: Signature
    #: False for a rewrite that is wrong but happens to give the same outputs here (a
    #: must-not-fold on a graph whose every axis has size one): a reproducer needs numbers.
    visible: bool


def found(
    case: Case, fold: FoldLike, pipeline: Pipeline | None = None, runner: Runner | None = None
) -> Bug | None:
    """The bug ``fold`` (inside ``pipeline``, if given) shows on ``case``, or None
    (``runner``: see :func:`fuzz.backends.tvm.execute.execute`)."""
    checked = check(case, fold, runner, pipeline)
    finding = checked.verdict.primary
    if finding is None:
        return None
    before, after = checked.execution.baseline, checked.execution.folded
    same = (
        isinstance(before, Outputs)
        and isinstance(after, Outputs)
        and len(before.values) == len(after.values)
        and all(
            b.shape == a.shape and np.array_equal(b, a, equal_nan=True)
            for b, a in zip(before.values, after.values, strict=True)
        )
    )
    visible = not same
    return Bug(Signature.of(finding, case, pipeline, checked.scope), visible)


def _same_bug(found: Signature, target: Signature) -> bool:
    """Same symptom and error type, and no essential attribute the target does not have
    (the pipeline aside: simplifying only removes passes from it)."""
    return found.key == target.key and set(found.essentials) <= set(target.essentials)


@dataclass(frozen=True)
class Attempt:
    """One simplification tried on its own, and what became of the bug."""

    description: str
    #: "remains" (the same bug), "hidden" (the same bug, but the outputs no longer show
    #: it), "disappears" (no bug, or another one), "invalid", "outside" (the backend cannot
    #: say the simpler case: not shown)
    outcome: str
    detail: str = ""

    def line(self) -> str:
        text = {
            "remains": "the bug remains (this does not matter)",
            "hidden": "the pass still rewrites it, but the outputs no longer differ (kept, to show them)",
            "disappears": "the bug disappears (it matters)",
            "invalid": f"cannot be tried, the graph would be invalid ({self.detail})",
            "outside": f"cannot be tried here ({self.detail})",
        }[self.outcome]
        return f"- {self.description}: {text}"


Change = Callable[[Case], Case]
#: What is simplified: a case, and the pipeline it runs in (None: the pass alone).
Subject = tuple[Case, Pipeline | None]
Step = Callable[[Subject], Subject]


def _steps(case: Case, pipeline: Pipeline | None) -> list[tuple[str, Step]]:
    """The case's simplifications, then the pipeline's: each pass left out, in turn; the
    opt level back to 3; direct calls back to a Sequential."""

    def on_case(change: Change) -> Step:
        return lambda subject: (change(subject[0]), subject[1])

    def on_pipeline(simpler: Pipeline) -> Step:
        return lambda subject: (subject[0], simpler)

    steps = [(d, on_case(change)) for d, change in simplifications(case)]
    if pipeline is not None:
        passes = pipeline.passes
        if len(passes) > 1:
            for i, name in enumerate(passes):
                without = replace(pipeline, passes=passes[:i] + passes[i + 1 :])
                steps.append(
                    (f"pipeline without {name} (pass {i + 1} of {len(passes)})", on_pipeline(without))
                )
        if pipeline.opt_level != 3:
            steps.append(
                (f"opt_level={pipeline.opt_level} -> 3", on_pipeline(replace(pipeline, opt_level=3)))
            )
        if not pipeline.sequential:
            steps.append(("direct calls -> one Sequential", on_pipeline(replace(pipeline, sequential=True))))
    return steps


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _attempt(
    subject: Subject,
    target: Bug,
    fold: FoldLike,
    description: str,
    step: Step,
    runner: Runner | None = None,
) -> tuple[Attempt, Subject, Bug | None]:
    try:
        simpler = step(subject)
        bug = found(simpler[0], fold, simpler[1], runner)
    except CaseOutsideBackend as exc:  # the backend cannot say the simpler case at all
        return Attempt(description, "outside", _first_line(exc)), subject, None
    except ValueError as exc:  # CaseError, or an empty conv output
        return Attempt(description, "invalid", _first_line(exc)), subject, None
    if bug is None or not _same_bug(bug.signature, target.signature):
        return Attempt(description, "disappears"), simpler, bug
    if target.visible and not bug.visible:
        return Attempt(description, "hidden"), simpler, bug
    return Attempt(description, "remains"), simpler, bug


def minimality(case: Case, fold: FoldLike, pipeline: Pipeline | None = None) -> list[Attempt]:
    """Each simplification of ``case`` (and ``pipeline``) tried on its own: does the bug survive?
    The attempts share the backend's runner (TVM: one compile cache, so the value steps of
    one structure compile it once; the same outputs bit for bit)."""
    runner = as_fold(fold).runner()
    target = found(case, fold, pipeline, runner)
    if target is None:
        return []
    subject = (case, pipeline)
    attempts = [_attempt(subject, target, fold, d, step, runner)[0] for d, step in _steps(case, pipeline)]
    # a step the backend cannot say (another form than its own) is no simplification of this case
    return [a for a in attempts if a.outcome != "outside"]


def simplify(
    case: Case,
    fold: FoldLike,
    pipeline: Pipeline | None = None,
    *,
    runner: Runner | None = None,
    seconds: float | None = None,
) -> tuple[Case, Pipeline | None, Signature | None]:
    """``case`` and ``pipeline`` with every one-step simplification applied that keeps the
    bug, and the bug's signature then (None if ``fold`` shows no bug on ``case``).

    A simplification that drops an essential attribute while the bug stays (a
    ``groups=2`` the underflow never needed) is kept, and the signature narrows with it;
    one after which the outputs no longer show the bug is not. Each simplification
    removes something for good (a non-default attribute, a batch item, a non-1.0
    operand, a pass), so the loop ends. ``runner``: compiles and runs (a compile cache
    makes it fast); ``seconds``: stop after about this long, keeping what is simplified.
    """
    start = time.monotonic()
    target = found(case, fold, pipeline, runner)
    subject: Subject = (case, pipeline)
    changed = target is not None
    while changed and target is not None:
        changed = False
        for description, step in _steps(*subject):
            if seconds is not None and time.monotonic() - start > seconds:
                break
            attempt, simpler, bug = _attempt(subject, target, fold, description, step, runner)
            if attempt.outcome == "remains" and bug is not None:
                subject, target, changed = simpler, bug, True
                break
    return subject[0], subject[1], None if target is None else target.signature
