"""Oracle: turn an execution and its reference into a typed verdict.

A :class:`Verdict` lists :class:`Finding` values, each with a :class:`Symptom`
(the names the CLI and reports use), the stage it showed in, and a message that
says what was given and what was expected. Findings against the pass come
first, most decisive first; findings against TVM's own lowering (the unfolded
program missing its own bound) are kept apart in ``Verdict.lowering``: the unfolded program missing its own
bound (``baseline-out-of-tolerance``) or returning other dtypes than its module
declares (``baseline-signature-change``; TVM 0.27 returns float32 from a float16
batch_norm).

The rules, in order:

* the pass raised (``pass-exception``), produced ill-formed IR (``ill-formed``),
  or the folded module failed to build or run where the unfolded one worked
  (``build-failure`` / ``run-failure``);
* a graph the pass must leave alone (training-mode batch_norm, a batch_norm axis
  that is not the conv's output channel axis, operands that are not constants,
  a batch_norm with no conv before it) was changed (``must-not-fold``);
* outputs changed in number, shape or dtype from both what the module declares
  and what the unfolded program returns (``signature-change``);
* applying the pass to its own output changed it again (``not-idempotent``);
* the folded output is non-finite where the unfolded program is robustly finite
  (``finite-to-nonfinite``);
* the folded error against the reference exceeds the reference's bound plus the
  unfolded program's own error (``out-of-tolerance``).

Oracles never print and never raise for TVM failures: those arrive as values.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import numpy as np

from fuzz.case import Case
from fuzz.execute import Execution, Failure, Outputs, Stage
from fuzz.reference import Expected, Reference


class Symptom(str, enum.Enum):
    #: the worker process running the case died (a native crash: segfault, abort)
    CRASH = "crash"
    #: the worker process did not answer within its time limit
    TIMEOUT = "timeout"
    PASS_EXCEPTION = "pass-exception"
    ILL_FORMED = "ill-formed"
    BUILD_FAILURE = "build-failure"
    RUN_FAILURE = "run-failure"
    MUST_NOT_FOLD = "must-not-fold"
    SIGNATURE_CHANGE = "signature-change"
    NOT_IDEMPOTENT = "not-idempotent"
    #: a pipeline applied as ``Sequential`` and as direct calls gives different modules
    SEQUENTIAL_MISMATCH = "sequential-direct-mismatch"
    FINITE_TO_NONFINITE = "finite-to-nonfinite"
    OUT_OF_TOLERANCE = "out-of-tolerance"
    BASELINE_OUT_OF_TOLERANCE = "baseline-out-of-tolerance"
    BASELINE_SIGNATURE_CHANGE = "baseline-signature-change"


_FAILURE_SYMPTOMS = {
    Stage.PASS: Symptom.PASS_EXCEPTION,
    Stage.WELL_FORMED: Symptom.ILL_FORMED,
    Stage.BUILD: Symptom.BUILD_FAILURE,
    Stage.RUN: Symptom.RUN_FAILURE,
}


@dataclass(frozen=True)
class Finding:
    """One thing wrong. ``stage`` is where it showed: pass, well-formedness, build, run, compare."""

    symptom: Symptom
    stage: str
    message: str
    error_type: str = ""


@dataclass(frozen=True)
class Verdict:
    findings: tuple[Finding, ...]
    #: the unfolded program missed its own bound: TVM's lowering, not the pass.
    lowering: tuple[Finding, ...] = ()
    #: why the case could not be judged at all (the unfolded program failed), or "".
    skipped: str = ""
    #: why this graph must be left alone by a correct pass (empty if it may be folded).
    must_not_fold: tuple[str, ...] = ()
    #: largest |folded - reference| / allowed over judged elements (0 when none).
    worst_ratio: float = 0.0

    @property
    def primary(self) -> Finding | None:
        return self.findings[0] if self.findings else None


def must_not_fold_reasons(case: Case) -> tuple[str, ...]:
    """Why a correct pass must leave every batch_norm of this case in place.

    Empty when at least one block may be folded; a partly foldable graph is
    judged by its numbers instead.
    """
    per_block: list[list[str]] = []
    for block in case.blocks:
        reasons = []
        if not case.topology.has_conv or block.conv is None:
            reasons.append("no conv2d feeds the batch_norm")
        else:
            ndim = len(case.data.shape)
            if block.bn.axis % ndim != block.conv.channel_axis:
                reasons.append(
                    f"batch_norm axis={block.bn.axis} is not the conv output's channel axis "
                    f"{block.conv.channel_axis} ({block.conv.data_layout})"
                )
        if block.bn.training:
            reasons.append("batch_norm has training=True (batch statistics, not moving ones)")
        if case.parameters:
            reasons.append(f"operands {', '.join(case.parameters)} are function parameters, not constants")
        per_block.append(reasons)
    if all(per_block):
        return tuple(dict.fromkeys(r for reasons in per_block for r in reasons))
    return ()


def _failure_finding(failure: Failure) -> Finding:
    return Finding(_FAILURE_SYMPTOMS[failure.stage], failure.stage.value, failure.message, failure.error_type)


def _where(mask: np.ndarray[Any, Any]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def _compare(
    i: int, expected: Expected, baseline: np.ndarray[Any, Any], folded: np.ndarray[Any, Any]
) -> tuple[list[Finding], list[Finding], float]:
    """Findings against the pass, findings against the lowering, worst ratio."""
    wide = expected.value.dtype
    ref = expected.value
    base = baseline.astype(wide)
    fold = folded.astype(wide)
    pass_findings: list[Finding] = []
    lowering: list[Finding] = []
    with np.errstate(all="ignore"):
        base_err = np.abs(base - ref)
        fold_err = np.abs(fold - ref)
        judged = expected.judged
        base_bad = judged & ~(base_err <= expected.bound)
        if base_bad.any():
            at = _where(base_bad)
            lowering.append(
                Finding(
                    Symptom.BASELINE_OUT_OF_TOLERANCE,
                    "compare",
                    f"output {i}{list(at)}: unfolded program gives {float(base[at])!r}, reference "
                    f"{float(ref[at])!r}, error {float(base_err[at]):.3g} "
                    f"> bound {float(expected.bound[at]):.3g}",
                )
            )
        nonfinite = expected.robust & ~np.isfinite(fold)
        if nonfinite.any():
            at = _where(nonfinite)
            pass_findings.append(
                Finding(
                    Symptom.FINITE_TO_NONFINITE,
                    "compare",
                    f"output {i}{list(at)}: folded program gives {float(fold[at])!r} where the unfolded "
                    f"program is robustly finite ({float(base[at])!r}; reference {float(ref[at])!r})",
                )
            )
        allowed = expected.bound + np.where(np.isfinite(base_err), base_err, np.inf)
        checked = judged & np.isfinite(fold)
        ratio = np.where(checked & (allowed > 0), fold_err / np.where(allowed > 0, allowed, 1), 0)
        ratio = np.where(checked & (allowed == 0) & (fold_err > 0), np.inf, ratio)
        worst = float(np.max(ratio)) if ratio.size else 0.0
        off = checked & ~(fold_err <= allowed)
        if off.any():
            at = _where(ratio == np.max(ratio))
            pass_findings.append(
                Finding(
                    Symptom.OUT_OF_TOLERANCE,
                    "compare",
                    f"output {i}{list(at)}: folded program gives {float(fold[at])!r}, unfolded "
                    f"{float(base[at])!r}, reference {float(ref[at])!r}; error {float(fold_err[at]):.3g} "
                    f"> allowed {float(allowed[at]):.3g} (bound {float(expected.bound[at]):.3g} + unfolded "
                    f"error); {int(off.sum())} of {int(checked.sum())} judged elements off",
                )
            )
    return pass_findings, lowering, worst


def judge(
    case: Case, execution: Execution, reference: Reference, *, in_pipeline: bool = False, numbers: bool = True
) -> Verdict:
    """The verdict on one case run through one pass.

    ``in_pipeline``: the "pass" is a pipeline (:mod:`fuzz.pipeline`), which may remove
    batch_norm legitimately, so "must not fold" is not judged. ``numbers=False``: the
    pipeline changes the arithmetic's dtype on purpose (mixed precision); outputs must
    keep their shapes, and their dtypes and values are not judged.
    """
    reasons = () if in_pipeline else must_not_fold_reasons(case)
    baseline = execution.baseline
    if isinstance(baseline, Failure):
        return Verdict(
            (),
            skipped=f"unfolded program failed at {baseline.stage.value}: {baseline.error_type}",
            must_not_fold=reasons,
        )
    findings: list[Finding] = []
    folded = execution.folded
    if isinstance(folded, Failure):
        findings.append(_failure_finding(folded))
    if reasons and execution.changed:
        findings.append(
            Finding(
                Symptom.MUST_NOT_FOLD,
                "pass",
                "the pass changed a graph it must leave alone: " + "; ".join(reasons),
            )
        )
    if execution.idempotent is False:
        findings.append(
            Finding(
                Symptom.NOT_IDEMPOTENT,
                "pass",
                "applying the pass to its own output changed it again",
            )
        )
    lowering: list[Finding] = []
    worst = 0.0
    declared = tuple((e.value.shape, e.dtype) for e in reference.outputs)
    if tuple(s for s, _ in _signature(baseline)) != tuple(s for s, _ in declared):
        raise AssertionError(
            f"reference shapes {[s for s, _ in declared]} != TVM's unfolded program's "
            f"{list(baseline.shapes)}: a bug in fuzz.reference or fuzz.build"
        )
    if _signature(baseline) != declared:
        lowering.append(
            Finding(
                Symptom.BASELINE_SIGNATURE_CHANGE,
                "run",
                f"the unfolded program returns {_describe(baseline)} but declares "
                + ", ".join(f"{d}{list(s)}" for s, d in declared),
            )
        )
    if isinstance(folded, Outputs) and not numbers:
        if folded.shapes != baseline.shapes:
            findings.append(
                Finding(
                    Symptom.SIGNATURE_CHANGE,
                    "compare",
                    f"outputs changed from {_describe(baseline)} to {_describe(folded)}",
                )
            )
    elif isinstance(folded, Outputs):
        # The folded program may match what the module declares, or what the unfolded
        # program really returns (a lowering that disagrees with its declaration is
        # reported above, not blamed on the pass).
        if _signature(folded) not in (declared, _signature(baseline)):
            findings.append(
                Finding(
                    Symptom.SIGNATURE_CHANGE,
                    "compare",
                    f"outputs changed from {_describe(baseline)} to {_describe(folded)}",
                )
            )
        else:
            for i, expected in enumerate(reference.outputs):
                found, low, ratio = _compare(i, expected, baseline.values[i], folded.values[i])
                findings.extend(found)
                lowering.extend(low)
                worst = max(worst, ratio)
    return Verdict(tuple(_ordered(findings)), tuple(lowering), "", reasons, worst)


_ORDER = list(Symptom)


def _ordered(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: _ORDER.index(f.symptom))


def _signature(outputs: Outputs) -> tuple[tuple[tuple[int, ...], str], ...]:
    """(shape, dtype) of each output."""
    return tuple(zip(outputs.shapes, outputs.dtypes, strict=True))


def _describe(outputs: Outputs) -> str:
    return ", ".join(f"{d}{list(s)}" for s, d in zip(outputs.shapes, outputs.dtypes, strict=True))
