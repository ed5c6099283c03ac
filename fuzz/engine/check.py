"""Check: one case through one pass (or through a pipeline with the pass in it), judged.

:func:`check` is the unit every other stage builds on: the campaign checks each drawn
value set with it, minimisation re-checks simplified cases, the corpus replays entries,
the benchmarks time it. It runs the case through the fold's backend
(:meth:`fuzz.backends.Fold.execute`), computes the float64 reference
(:func:`fuzz.oracle.reference.reference`) and asks the oracle for a verdict
(:func:`fuzz.oracle.verdict.judge`), and returns all three as a :class:`Checked`. It imports no
framework: the backend does.

The floating-point environment is pinned (:func:`fuzz.fpenv.pinned`): the fold runs with
subnormals kept unless ``flush`` asks for them flushed, whatever the process had set, and
the reference and the oracle always keep them; :attr:`Checked.flush` records what the fold
ran with.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from fuzz.backends import FoldLike, Runner, as_fold, scope_of
from fuzz.fpenv import flush_requested, pinned
from fuzz.model.case import Case
from fuzz.model.pipeline import Pipeline
from fuzz.oracle.execution import Execution, Failure, Outputs, Stage
from fuzz.oracle.reference import Reference, reference
from fuzz.oracle.verdict import Finding, Symptom, Verdict, judge, within_bound

__all__ = ["Checked", "check"]


@dataclass(frozen=True)
class Checked:
    """A case, what running it did, and the verdict; for a pipeline, the pipeline and
    the passes its ``Sequential`` skipped by opt-level gating."""

    case: Case
    execution: Execution
    reference: Reference
    verdict: Verdict
    pipeline: Pipeline | None = None
    gated: tuple[str, ...] = ()
    #: the signature scope of the fold it went through (:meth:`fuzz.backends.Backend.scope`)
    scope: str = ""
    #: the flush settings the fold ran with (:func:`fuzz.fpenv.flush_state`)
    flush: dict[str, Any] = field(default_factory=dict)


def check(
    case: Case,
    under_test: FoldLike,
    runner: Runner | None = None,
    pipeline: Pipeline | None = None,
    *,
    complete_fold: bool | None = None,
    lowering: bool = True,
    flush: bool | None = None,
) -> Checked:
    """Run one case through the fold ``under_test`` (:class:`fuzz.backends.Fold`, or a
    factory of TVM passes taken as one), or through ``pipeline`` with the fold in it, and
    judge it (``runner``: the backend's, see :meth:`fuzz.backends.Fold.runner`).

    ``complete_fold``: judge the ``missed-fold`` property (default: if the fold claims a
    complete fold); never inside a pipeline.
    ``lowering=False``: judge the pass only, not the framework's lowering: where the pass
    changed nothing, build and run nothing (only the IR is judged), and run the unfolded
    program only where the folded outputs alone do not clear the numeric rules
    (:func:`fuzz.oracle.verdict.within_bound`; the verdict on the pass is the same either way).
    For a pipeline with nothing gated, the ``Sequential`` and the direct calls must give
    structurally equal modules (``sequential-direct-mismatch``).
    ``flush``: run the fold with subnormals flushed to zero (FTZ and DAZ); a verdict must
    not change with it (None: as ``BNFUZZ_FLUSH_DENORMALS`` says, else kept).
    """
    fold = as_fold(under_test)
    flush = flush_requested() if flush is None else flush
    with pinned():
        ref = reference(case)

    def needed(folded: Outputs) -> bool:
        with pinned():
            return not within_bound(ref, folded)

    if pipeline is None:
        with pinned(flush) as state:
            execution = fold.execute(
                case, runner, unchanged=lowering, baseline_needed=None if lowering else needed
            )
        complete = fold.complete_fold if complete_fold is None else complete_fold
        with pinned():
            verdict = judge(case, execution, ref, complete_fold=complete)
        return Checked(case, execution, ref, verdict, scope=scope_of(fold.name), flush=state)
    mixed = pipeline.mixed_precision  # outputs judged by shape alone, against the unfolded ones
    with pinned(flush) as state:
        execution = fold.execute(
            case,
            runner,
            pipeline=pipeline,
            unchanged=lowering,
            baseline_needed=None if lowering or mixed else needed,
        )
    with pinned():
        verdict = judge(case, execution, ref, in_pipeline=True, numbers=not mixed)
    skipped = fold.gated(pipeline)
    if not skipped and not isinstance(execution.folded, Failure) and not verdict.findings:
        with pinned(flush):
            mismatch = fold.sequential_mismatch(case, pipeline)
        if mismatch is not None:
            verdict = replace(verdict, findings=(Finding(Symptom.SEQUENTIAL_MISMATCH, Stage.PASS, mismatch),))
    return Checked(case, execution, ref, verdict, pipeline, skipped, scope_of(fold.name), state)
