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

* the pass raised (``pass-exception``) or produced ill-formed IR (``ill-formed``), judged
  from the IR alone (also where TVM cannot build the unfolded program), or the folded
  module failed to build or run where the unfolded one worked (``build-failure`` /
  ``run-failure``);
* a model tool wrote a model with other inputs or outputs than it was given
  (``io-change``), or changed the model it was handed (``mutates-input``);
* a graph the pass must leave alone (training-mode batch_norm, a batch_norm axis
  that is not the conv's output channel axis, operands that are not constants,
  a batch_norm with no conv before it) was rewritten: its operators changed
  (``must-not-fold``; removing dead bindings alone is no rewrite);
* for a pass that claims to be a complete fold (``complete_fold``): a batch_norm stayed
  with no reason :mod:`fuzz.model.decline_reasons` can state, or the fold left the wrong operators
  (a duplicated conv, batch_norm arithmetic computed at run time) (``missed-fold``);
* outputs changed in number, shape or dtype from both what the module declares
  and what the unfolded program returns (``signature-change``);
* applying the pass to its own output changed it again (``not-idempotent``);
* the folded output is non-finite where the unfolded program is robustly finite (and
  finite in fact) (``finite-to-nonfinite``);
* the folded error against the reference exceeds the reference's bound plus the
  unfolded program's own error (``out-of-tolerance``).

Oracles never print and never raise for TVM failures: those arrive as values.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fuzz.fpenv import keeps_subnormals
from fuzz.model.case import Case
from fuzz.model.decline_reasons import Decline, block_reasons
from fuzz.oracle.execution import Execution, Failure, Outputs, Stage
from fuzz.oracle.reference import Expected, Reference

__all__ = [
    "Finding",
    "Symptom",
    "Verdict",
    "describe",
    "judge",
    "missed_fold",
    "must_not_fold_reasons",
    "within_bound",
]


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
    #: a pass claiming a complete fold left a batch_norm it had no reason to keep
    MISSED_FOLD = "missed-fold"
    SIGNATURE_CHANGE = "signature-change"
    #: a model tool wrote a model with other inputs or outputs than the model it was given
    IO_CHANGE = "io-change"
    #: a model tool changed the model it was given (not only the one it returned)
    MUTATES_INPUT = "mutates-input"
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
    """One thing wrong. ``stage`` is where it showed: pass, well-formedness, build, run,
    compare, or a worker process."""

    symptom: Symptom
    stage: Stage
    message: str
    error_type: str = ""
    #: for a finding about one element: (output index, element index), else None
    element: tuple[int, tuple[int, ...]] | None = None
    #: what a worker process printed to stderr before it died (TVM's backtrace), else ""
    stderr: str = ""


@dataclass(frozen=True)
class Verdict:
    findings: tuple[Finding, ...]
    #: the unfolded program missed its own bound: TVM's lowering, not the pass.
    lowering: tuple[Finding, ...] = ()
    #: why the case could not be judged at all (the unfolded program failed), or "".
    skipped: str = ""
    #: why this graph must be left alone by a correct pass (empty if it may be folded).
    must_not_fold: tuple[Decline, ...] = ()
    #: largest |folded - reference| / allowed over judged elements (0 when none).
    worst_ratio: float = 0.0

    @property
    def primary(self) -> Finding | None:
        return self.findings[0] if self.findings else None


def must_not_fold_reasons(case: Case) -> tuple[Decline, ...]:
    """Why a correct pass must leave every batch_norm of this case in place.

    Empty when at least one block may be folded; a partly foldable graph is
    judged by its numbers instead.
    """
    per_block = [tuple(d for d in reasons if d.must_not_fold) for reasons in block_reasons(case)]
    if all(per_block):
        return tuple(dict.fromkeys(d for reasons in per_block for d in reasons))
    return ()


def missed_fold(case: Case, before: Mapping[str, int], after: Mapping[str, int]) -> Finding | None:
    """The ``missed-fold`` finding for a pass claiming a complete fold, given the operator
    counts (:data:`fuzz.backends.tvm.execute.COUNTED_OPS`) of the module before and after it, or None.

    Every block :mod:`fuzz.model.decline_reasons` states no reason for must lose its batch_norm, and a
    fold of ``k`` blocks keeps the number of conv2d, adds one bias ``add`` per block
    (taking over the conv's own bias ``add`` where it had one), at most one ``multiply``
    per block (a per-channel rescale), and computes no ``subtract``, ``divide`` or
    ``sqrt`` at run time: its constants are folded.
    """
    reasons = block_reasons(case)
    foldable = [i for i, r in enumerate(reasons) if not r]
    folded = before["batch_norm"] - after["batch_norm"]
    problems: list[str] = []
    if folded < len(foldable):
        left = ", ".join(f"block {i}" for i in foldable)
        declined = "; ".join(f"block {i}: {'; '.join(map(str, r))}" for i, r in enumerate(reasons) if r)
        problems.append(
            f"{after['batch_norm']} batch_norm(s) left of {before['batch_norm']}, but {left} "
            f"had no reason to stay" + (f" (reasons to stay: {declined})" if declined else "")
        )
    if after["conv2d"] != before["conv2d"]:
        problems.append(f"conv2d count changed from {before['conv2d']} to {after['conv2d']}")
    if folded > 0:
        biased = sum(b.bias is not None for b in case.blocks)
        plain = len(case.blocks) - biased
        low = before["add"] + folded - min(folded, biased)
        high = before["add"] + folded - max(0, folded - plain)
        if not low <= after["add"] <= high:
            problems.append(f"{after['add']} add(s) after folding {folded}; expected {low} to {high}")
        if not before["multiply"] <= after["multiply"] <= before["multiply"] + folded:
            problems.append(
                f"{after['multiply']} multiply(s) after folding {folded} (before: {before['multiply']})"
            )
        for op in ("subtract", "divide", "sqrt"):
            if after[op] > before[op]:
                problems.append(
                    f"{op} computed at run time ({before[op]} -> {after[op]}): constants not folded"
                )
    if not problems:
        return None
    return Finding(Symptom.MISSED_FOLD, Stage.PASS, "incomplete fold: " + "; ".join(problems))


#: Failures judged from the IR alone, without building anything: the pass raised, or
#: returned ill-formed IR (also where TVM cannot build the unfolded program).
_IR_STAGES = (Stage.PASS, Stage.WELL_FORMED)


def _failure_finding(failure: Failure) -> Finding:
    return Finding(_FAILURE_SYMPTOMS[failure.stage], failure.stage, failure.message, failure.error_type)


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
                    Stage.COMPARE,
                    f"output {i}{list(at)}: unfolded program gives {float(base[at])!r}, reference "
                    f"{float(ref[at])!r}, error {float(base_err[at]):.3g} "
                    f"> bound {float(expected.bound[at]):.3g}",
                    element=(i, at),
                )
            )
        # Only where the unfolded program really is finite: where it is not, although the
        # reference calls the element robust, the lowering is at fault (reported above).
        nonfinite = expected.robust & np.isfinite(base) & ~np.isfinite(fold)
        if nonfinite.any():
            at = _where(nonfinite)
            pass_findings.append(
                Finding(
                    Symptom.FINITE_TO_NONFINITE,
                    Stage.COMPARE,
                    f"output {i}{list(at)}: folded program gives {float(fold[at])!r} where the unfolded "
                    f"program is robustly finite ({float(base[at])!r}; reference {float(ref[at])!r})",
                    element=(i, at),
                )
            )
        allowed = expected.bound + np.where(np.isfinite(base_err), base_err, np.inf)
        checked = judged & np.isfinite(fold)
        ratio = _ratios(fold_err, allowed, checked)
        worst = float(np.max(ratio)) if ratio.size else 0.0
        off = checked & ~(fold_err <= allowed)
        if off.any():
            at = _where(ratio == np.max(ratio))
            pass_findings.append(
                Finding(
                    Symptom.OUT_OF_TOLERANCE,
                    Stage.COMPARE,
                    f"output {i}{list(at)}: folded program gives {float(fold[at])!r}, unfolded "
                    f"{float(base[at])!r}, reference {float(ref[at])!r}; error {float(fold_err[at]):.3g} "
                    f"> allowed {float(allowed[at]):.3g} (bound {float(expected.bound[at]):.3g} + unfolded "
                    f"error); {int(off.sum())} of {int(checked.sum())} judged elements off",
                    element=(i, at),
                )
            )
    return pass_findings, lowering, worst


@keeps_subnormals
def judge(
    case: Case,
    execution: Execution,
    reference: Reference,
    *,
    in_pipeline: bool = False,
    numbers: bool = True,
    complete_fold: bool = False,
) -> Verdict:
    """The verdict on one case run through one pass.

    ``in_pipeline``: the "pass" is a pipeline (:mod:`fuzz.model.pipeline`), which may remove
    batch_norm legitimately, so "must not fold" is not judged. ``numbers=False``: the
    pipeline changes the arithmetic's dtype on purpose (mixed precision); outputs must
    keep their shapes, and their dtypes and values are not judged. ``complete_fold``: the
    pass claims to be a complete fold (see :func:`missed_fold`). Both fold properties
    (must not fold, must fold) are judged from the IR, so also where TVM cannot build the
    unfolded program.
    """
    reasons = () if in_pipeline else must_not_fold_reasons(case)
    # Judged from the IR alone, so also where TVM cannot build the unfolded program.
    structural: list[Finding] = []
    folded = execution.folded
    ir_failure = isinstance(folded, Failure) and folded.stage in _IR_STAGES
    if isinstance(folded, Failure) and ir_failure:
        structural.append(_failure_finding(folded))
    rewrote = execution.op_counts is not None and execution.op_counts[0] != execution.op_counts[1]
    if reasons and execution.changed and rewrote:
        structural.append(
            Finding(
                Symptom.MUST_NOT_FOLD,
                Stage.PASS,
                "the pass changed a graph it must leave alone: " + "; ".join(map(str, reasons)),
            )
        )
    if execution.interface is not None:
        before, after = execution.interface
        structural.append(
            Finding(
                Symptom.IO_CHANGE,
                Stage.PASS,
                f"the model's inputs and outputs changed from {before} to {after}",
            )
        )
    if execution.mutated_input:
        structural.append(
            Finding(Symptom.MUTATES_INPUT, Stage.PASS, "the model given to the fold was changed")
        )
    if complete_fold and not in_pipeline and execution.op_counts is not None:
        missed = missed_fold(case, *execution.op_counts)
        structural += [missed] if missed is not None else []
    baseline = execution.baseline
    if execution.baseline_skipped and isinstance(folded, Outputs) and not ir_failure:
        # the folded outputs cleared every numeric rule alone (within_bound): the unfolded
        # program could only have widened what is allowed
        pairs = zip(reference.outputs, folded.values, strict=True)
        worst = max((_bound_ratio(e, v) for e, v in pairs), default=0.0)
        return Verdict(tuple(_ordered([*structural, *_idempotence(execution)])), (), "", reasons, worst)
    if baseline is None or folded is None or ir_failure:
        # nothing run (the pass changed nothing, raised, or returned ill-formed IR)
        return Verdict(tuple(_ordered(structural)), must_not_fold=reasons)
    if isinstance(baseline, Failure):
        return Verdict(
            tuple(_ordered(structural)),
            skipped=f"unfolded program failed at {baseline.stage.value}: {baseline.error_type}",
            must_not_fold=reasons,
        )
    findings: list[Finding] = list(structural)
    if isinstance(folded, Failure):
        findings.append(_failure_finding(folded))
    findings += _idempotence(execution)
    lowering: list[Finding] = []
    worst = 0.0
    declared = tuple((e.value.shape, e.dtype) for e in reference.outputs)
    if tuple(s for s, _ in _signature(baseline)) != tuple(s for s, _ in declared):
        raise AssertionError(
            f"reference shapes {[s for s, _ in declared]} != TVM's unfolded program's "
            f"{list(baseline.shapes)}: a bug in fuzz.oracle.reference or fuzz.backends.tvm.build"
        )
    if _signature(baseline) != declared:
        lowering.append(
            Finding(
                Symptom.BASELINE_SIGNATURE_CHANGE,
                Stage.RUN,
                f"the unfolded program returns {describe(baseline)} but declares "
                + ", ".join(f"{d}{list(s)}" for s, d in declared),
            )
        )
    if isinstance(folded, Outputs) and not numbers:
        if folded.shapes != baseline.shapes:
            findings.append(
                Finding(
                    Symptom.SIGNATURE_CHANGE,
                    Stage.COMPARE,
                    f"outputs changed from {describe(baseline)} to {describe(folded)}",
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
                    Stage.COMPARE,
                    f"outputs changed from {describe(baseline)} to {describe(folded)}",
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


def _idempotence(execution: Execution) -> list[Finding]:
    if execution.idempotent is False:
        return [
            Finding(
                Symptom.NOT_IDEMPOTENT, Stage.PASS, "applying the pass to its own output changed it again"
            )
        ]
    return []


@keeps_subnormals
def within_bound(reference: Reference, folded: Outputs) -> bool:
    """Whether the folded outputs alone clear every numeric rule of :func:`judge`: the
    declared dtypes and shapes, finite wherever the reference calls an element robust,
    and within the reference's bound wherever it judges one.

    Then the unfolded program cannot turn them into a finding against the pass (its own
    error only widens what is allowed, and ``finite-to-nonfinite`` needs a non-finite
    folded element), so it need run only to judge TVM's lowering."""
    if _signature(folded) != tuple((e.value.shape, e.dtype) for e in reference.outputs):
        return False
    with np.errstate(all="ignore"):
        for expected, value in zip(reference.outputs, folded.values, strict=True):
            fold = value.astype(expected.value.dtype)
            finite = np.isfinite(fold)
            if (expected.robust & ~finite).any():
                return False
            # the comparison judge makes (a ratio could round to 1 where the error is above)
            if (expected.judged & finite & ~(np.abs(fold - expected.value) <= expected.bound)).any():
                return False
    return True


def _bound_ratio(expected: Expected, folded: np.ndarray[Any, Any]) -> float:
    """The largest ``|folded - reference| / bound`` over judged finite elements (the
    worst ratio where the unfolded program did not run: at least the one against the
    bound plus the unfolded error)."""
    with np.errstate(all="ignore"):
        fold = folded.astype(expected.value.dtype)
        ratio = _ratios(np.abs(fold - expected.value), expected.bound, expected.judged & np.isfinite(fold))
        return float(np.max(ratio)) if ratio.size else 0.0


def _ratios(
    err: np.ndarray[Any, Any], allowed: np.ndarray[Any, Any], checked: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    """``err / allowed`` where ``checked`` (inf where nothing is allowed but the error is
    not 0; NaN where the error is), 0 elsewhere: above 1 is a miss."""
    ratio = np.where(checked & (allowed > 0), err / np.where(allowed > 0, allowed, 1), 0)
    return np.where(checked & (allowed == 0) & (err > 0), np.inf, ratio)


def _ordered(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: _ORDER.index(f.symptom))


def _signature(outputs: Outputs) -> tuple[tuple[tuple[int, ...], str], ...]:
    """(shape, dtype) of each output."""
    return tuple(zip(outputs.shapes, outputs.dtypes, strict=True))


def describe(outputs: Outputs) -> str:
    """The outputs as ``dtype[shape]`` items (what a signature change reports)."""
    return ", ".join(f"{d}{list(s)}" for s, d in zip(outputs.shapes, outputs.dtypes, strict=True))
