"""Check: one case through one pass (or through a pipeline with the pass in it), judged.

:func:`check` is the unit every other stage builds on: the campaign checks each drawn
value set with it, minimisation re-checks simplified cases, the corpus replays entries,
the benchmarks time it. It runs the case (:func:`fuzz.execute.execute`), computes the
float64 reference (:func:`fuzz.reference.reference`) and asks the oracle for a verdict
(:func:`fuzz.oracle.judge`), and returns all three as a :class:`Checked`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fuzz.build import build_module
from fuzz.case import Case
from fuzz.compat import structural_equal
from fuzz.execute import Runner, execute
from fuzz.oracle import Finding, Symptom, Verdict, judge, within_bound
from fuzz.passes import PassFactory, claims_complete_fold
from fuzz.pipeline import Pipeline, PipelinePass, gated
from fuzz.reference import Reference, reference
from fuzz.results import Execution, Failure, Stage

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


def check(
    case: Case,
    make_pass: PassFactory,
    runner: Runner | None = None,
    pipeline: Pipeline | None = None,
    *,
    must_fold: bool | None = None,
    lowering: bool = True,
) -> Checked:
    """Run one case through a pass, or through ``pipeline`` with the pass in it, and judge
    it (``runner``: see :func:`fuzz.execute.execute`).

    ``must_fold``: judge the ``missed-fold`` property (default: if the pass claims a
    complete fold, :func:`fuzz.passes.claims_complete_fold`); never inside a pipeline.
    ``lowering=False``: judge the pass only, not TVM's lowering: where the pass changed
    nothing, build and run nothing (only the IR is judged), and run the unfolded program
    only where the folded outputs alone do not clear the numeric rules
    (:func:`fuzz.oracle.within_bound`; the verdict on the pass is the same either way).
    For a pipeline with nothing gated, the ``Sequential`` and the direct calls must give
    structurally equal modules (``sequential-direct-mismatch``).
    """
    ref = reference(case)
    needed = None if lowering else (lambda folded: not within_bound(ref, folded))
    if pipeline is None:
        execution = execute(case, make_pass, runner, unchanged=lowering, baseline_needed=needed)
        complete = claims_complete_fold(make_pass) if must_fold is None else must_fold
        return Checked(case, execution, ref, judge(case, execution, ref, must_fold=complete))
    if pipeline.mixed_precision:  # outputs judged by shape alone, against the unfolded ones
        needed = None
    execution = execute(
        case,
        lambda: PipelinePass(pipeline, make_pass),
        runner,
        idempotence=False,
        unchanged=lowering,
        baseline_needed=needed,
    )
    verdict = judge(case, execution, ref, in_pipeline=True, numbers=not pipeline.mixed_precision)
    skipped = gated(pipeline, make_pass)
    if not skipped and not isinstance(execution.folded, Failure) and not verdict.findings:
        mismatch = _sequential_mismatch(case, pipeline, make_pass)
        if mismatch is not None:
            verdict = replace(verdict, findings=(mismatch,))
    return Checked(case, execution, ref, verdict, pipeline, skipped)


def _sequential_mismatch(case: Case, pipeline: Pipeline, make_pass: PassFactory) -> Finding | None:
    module = build_module(case)
    try:
        as_sequential = PipelinePass(pipeline, make_pass, sequential=True)(module)
        as_calls = PipelinePass(pipeline, make_pass, sequential=False)(module)
    except Exception as exc:  # one mode raised where the other did not
        return Finding(Symptom.SEQUENTIAL_MISMATCH, Stage.PASS, f"one mode raised {type(exc).__name__}")
    if structural_equal(as_sequential, as_calls):
        return None
    return Finding(
        Symptom.SEQUENTIAL_MISMATCH,
        Stage.PASS,
        "Sequential and direct calls of the same passes, every pass enabled, give different modules",
    )
