"""Every oracle verdict, on hand-made executions: one positive and one negative case each.

The executions are synthetic (no TVM build): the baseline is the reference rounded
to the dtype, and each test perturbs one thing, so a verdict can only come from the
rule under test.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from cases import PUBLIC_NAN_REPORT, make_case

from fuzz.backends.tvm.execute import COUNTED_OPS
from fuzz.model.case import Case, Topology
from fuzz.model.decline_reasons import Reason, block_reasons
from fuzz.oracle.execution import Execution, Failure, Outputs, Stage
from fuzz.oracle.reference import reference
from fuzz.oracle.verdict import Symptom, judge, must_not_fold_reasons, within_bound


def outputs_of(arrays: list[np.ndarray[Any, Any]], dtype: str = "float32") -> Outputs:
    return Outputs(
        tuple(np.asarray(a, dtype=np.float64) for a in arrays),
        tuple(dtype for _ in arrays),
        tuple(tuple(a.shape) for a in arrays),
    )


def rounded_reference(case: Case) -> Outputs:
    """What an exact program in float32 would print: the reference rounded once."""
    ref = reference(case)
    with np.errstate(over="ignore"):  # an output beyond float32's range prints as inf
        return outputs_of([e.value.astype(np.float32) for e in ref.outputs])


def counts(**changes: int) -> dict[str, int]:
    """Operator counts of a one-block conv + batch_norm module, with ``changes``."""
    return dict.fromkeys(COUNTED_OPS, 0) | {"conv2d": 1, "batch_norm": 1} | changes


#: A fold of one block: the batch_norm gone, one bias add, one per-channel multiply.
FOLDED = (counts(), counts(batch_norm=0, add=1, multiply=1))
UNCHANGED = (counts(), counts())


def execution(case: Case, folded: Outputs | Failure | None = None, **facts: Any) -> Execution:
    base = rounded_reference(case)
    defaults: dict[str, Any] = dict(
        changed=True, fired=True, idempotent=True, pass_seconds=0.0, build_seconds=0.0
    )
    defaults.update(facts)
    defaults.setdefault("op_counts", FOLDED if defaults["changed"] else UNCHANGED)
    return Execution(baseline=base, folded=base if folded is None else folded, **defaults)


def symptoms(case: Case, ex: Execution) -> list[Symptom]:
    return [f.symptom for f in judge(case, ex, reference(case)).findings]


CASE = make_case(kh=1, kw=1, height=2, width=2)


def test_clean_execution_has_no_finding() -> None:
    verdict = judge(CASE, execution(CASE), reference(CASE))
    assert verdict.findings == () and verdict.lowering == () and verdict.skipped == ""


@pytest.mark.parametrize(
    ("stage", "symptom"),
    [
        (Stage.PASS, Symptom.PASS_EXCEPTION),
        (Stage.WELL_FORMED, Symptom.ILL_FORMED),
        (Stage.BUILD, Symptom.BUILD_FAILURE),
        (Stage.RUN, Symptom.RUN_FAILURE),
    ],
)
def test_failures_of_the_folded_program(stage: Stage, symptom: Symptom) -> None:
    failure = Failure(stage, "TVMError", "boom")
    verdict = judge(CASE, execution(CASE, failure, idempotent=None), reference(CASE))
    assert verdict.primary is not None
    assert verdict.primary.symptom is symptom
    assert verdict.primary.error_type == "TVMError"
    assert symptoms(CASE, execution(CASE)) == []


@pytest.mark.parametrize(
    ("stage", "symptom"), [(Stage.PASS, Symptom.PASS_EXCEPTION), (Stage.WELL_FORMED, Symptom.ILL_FORMED)]
)
def test_a_pass_failure_stands_where_the_unfolded_program_fails_or_was_not_run(
    stage: Stage, symptom: Symptom
) -> None:
    raised = Failure(stage, "TypeError", "boom")
    for baseline in (Failure(Stage.BUILD, "TVMError", "no"), None):
        ex = replace(execution(CASE, raised, changed=False, op_counts=None), baseline=baseline)
        assert symptoms(CASE, ex) == [symptom]


def test_baseline_failure_is_skipped_not_blamed_on_the_pass() -> None:
    ex = replace(execution(CASE), baseline=Failure(Stage.BUILD, "TVMError", "no"))
    verdict = judge(CASE, ex, reference(CASE))
    assert verdict.findings == () and "build" in verdict.skipped


@pytest.mark.parametrize(
    "case",
    [
        make_case(training=True),
        make_case(axis=0, batch=3),  # non-channel axis, same length as C
        make_case(parameters=("gamma",)),
    ],
    ids=["training", "non-channel-axis", "parameter-operand"],
)
def test_must_not_fold(case: Case) -> None:
    assert must_not_fold_reasons(case)
    assert Symptom.MUST_NOT_FOLD in symptoms(case, execution(case, changed=True))
    assert Symptom.MUST_NOT_FOLD not in symptoms(case, execution(case, changed=False))


def test_removing_dead_bindings_alone_is_no_rewrite() -> None:
    training = make_case(training=True)
    # structurally changed (dead projections dropped), the same operators: not a fold
    assert Symptom.MUST_NOT_FOLD not in symptoms(
        training, execution(training, changed=True, op_counts=UNCHANGED)
    )
    assert Symptom.MUST_NOT_FOLD in symptoms(training, execution(training, changed=True, op_counts=FOLDED))


def test_foldable_graph_may_change() -> None:
    assert must_not_fold_reasons(CASE) == ()
    assert Symptom.MUST_NOT_FOLD not in symptoms(CASE, execution(CASE, changed=True))


def test_a_module_not_run_is_judged_from_its_ir_alone() -> None:
    # nothing built or run (the pass changed nothing): no numbers, but missed-fold stands
    ex = replace(execution(CASE, changed=False), baseline=None, folded=None)
    assert judge(CASE, ex, reference(CASE)).findings == ()
    missed = judge(CASE, ex, reference(CASE), complete_fold=True)
    assert [f.symptom for f in missed.findings] == [Symptom.MISSED_FOLD]


def test_signature_change() -> None:
    base = rounded_reference(CASE)
    wrong_shape = outputs_of([np.zeros((1, 3, 2, 1))])
    wrong_dtype = replace(base, dtypes=("float16",))
    assert symptoms(CASE, execution(CASE, wrong_shape)) == [Symptom.SIGNATURE_CHANGE]
    assert symptoms(CASE, execution(CASE, wrong_dtype)) == [Symptom.SIGNATURE_CHANGE]
    assert symptoms(CASE, execution(CASE, base)) == []


def test_a_model_tool_that_changes_the_model_s_inputs_or_outputs() -> None:
    interface = ("inputs [x, gamma0] outputs [out0]", "inputs [x] outputs [out0]")
    verdict = judge(CASE, execution(CASE, interface=interface), reference(CASE))
    assert [f.symptom for f in verdict.findings] == [Symptom.IO_CHANGE]
    assert (
        "from inputs [x, gamma0] outputs [out0] to inputs [x] outputs [out0]" in verdict.findings[0].message
    )
    assert symptoms(CASE, execution(CASE, interface=None)) == []


def test_a_model_tool_that_changes_the_model_it_was_given() -> None:
    assert symptoms(CASE, execution(CASE, mutated_input=True)) == [Symptom.MUTATES_INPUT]
    assert symptoms(CASE, execution(CASE, mutated_input=False)) == []


def test_not_idempotent() -> None:
    assert symptoms(CASE, execution(CASE, idempotent=False)) == [Symptom.NOT_IDEMPOTENT]
    assert symptoms(CASE, execution(CASE, idempotent=True)) == []


OVERFLOW = PUBLIC_NAN_REPORT


def test_finite_to_nonfinite() -> None:
    nan = outputs_of([np.full((1, 1, 1, 1), np.nan)])
    assert Symptom.FINITE_TO_NONFINITE in symptoms(OVERFLOW, execution(OVERFLOW, nan))
    assert symptoms(OVERFLOW, execution(OVERFLOW)) == []


def test_nonfinite_where_the_unfolded_program_is_not_robust_is_no_finding() -> None:
    # var = 0 and epsilon = 0: the unfolded program divides by zero.
    case = make_case(kh=1, kw=1, height=1, width=1, epsilon=0.0, values={"var": 0.0})
    ref = reference(case)
    assert not ref.outputs[0].robust.any()
    nan = outputs_of([np.full(ref.outputs[0].value.shape, np.nan)])
    assert symptoms(case, execution(case, nan)) == []


def test_nonfinite_where_the_unfolded_program_is_nonfinite_too_blames_the_lowering() -> None:
    # the reference calls the element robust, but TVM's unfolded program gives inf there:
    # the fold did not turn a finite output into inf; the lowering missed its bound
    inf = outputs_of([np.full((1, 1, 1, 1), np.inf)])
    ex = replace(execution(OVERFLOW, inf), baseline=inf)
    verdict = judge(OVERFLOW, ex, reference(OVERFLOW))
    assert verdict.findings == ()
    assert [f.symptom for f in verdict.lowering] == [Symptom.BASELINE_OUT_OF_TOLERANCE]


def test_out_of_tolerance() -> None:
    ref = reference(CASE).outputs[0]
    base = rounded_reference(CASE)
    far = outputs_of([base.values[0] + 10 * ref.bound.astype(np.float64)])
    near = outputs_of([(ref.value + 0.4 * ref.bound).astype(np.float64)])
    assert symptoms(CASE, execution(CASE, far)) == [Symptom.OUT_OF_TOLERANCE]
    assert symptoms(CASE, execution(CASE, near)) == []


def test_out_of_tolerance_allows_the_unfolded_programs_own_error() -> None:
    ref = reference(CASE).outputs[0]
    off = outputs_of([(ref.value + 3 * ref.bound).astype(np.float64)])
    # the baseline is as far off as the folded program: the fold added nothing.
    ex = replace(execution(CASE, off), baseline=off)
    verdict = judge(CASE, ex, reference(CASE))
    assert [f.symptom for f in verdict.findings] == []
    assert [f.symptom for f in verdict.lowering] == [Symptom.BASELINE_OUT_OF_TOLERANCE]


def test_baseline_out_of_tolerance_is_a_lowering_finding() -> None:
    ref = reference(CASE).outputs[0]
    bad = outputs_of([(ref.value + 5 * ref.bound).astype(np.float64)])
    good = execution(CASE)
    verdict = judge(CASE, replace(good, baseline=bad), reference(CASE))
    assert [f.symptom for f in verdict.lowering] == [Symptom.BASELINE_OUT_OF_TOLERANCE]
    assert judge(CASE, good, reference(CASE)).lowering == ()


def test_baseline_signature_change_is_a_lowering_finding() -> None:
    base = rounded_reference(CASE)
    as_f16 = replace(base, dtypes=("float16",))
    # the unfolded program returns another dtype than declared; the pass kept it as is
    verdict = judge(CASE, replace(execution(CASE, as_f16), baseline=as_f16), reference(CASE))
    assert [f.symptom for f in verdict.lowering] == [Symptom.BASELINE_SIGNATURE_CHANGE]
    assert verdict.findings == ()
    assert judge(CASE, execution(CASE), reference(CASE)).lowering == ()


def test_in_a_pipeline_removing_a_must_not_fold_batch_norm_is_not_a_finding() -> None:
    training = make_case(kh=1, kw=1, height=2, width=2, training=True)
    ex = execution(training, changed=True, fired=True)
    assert Symptom.MUST_NOT_FOLD in symptoms(training, ex)  # the pass alone: positive
    verdict = judge(training, ex, reference(training), in_pipeline=True)  # a pipeline may decompose it
    assert Symptom.MUST_NOT_FOLD not in [f.symptom for f in verdict.findings]


def test_without_numbers_only_output_shapes_are_judged() -> None:
    base = rounded_reference(CASE)
    half = outputs_of([v.astype(np.float16) for v in base.values], "float16")
    wrong = outputs_of([v + 1.0 for v in base.values])
    reshaped = outputs_of([v.reshape(-1) for v in base.values])
    for folded in (half, wrong):  # a dtype change, or float16 arithmetic: not judged
        verdict = judge(CASE, execution(CASE, folded), reference(CASE), in_pipeline=True, numbers=False)
        assert verdict.findings == ()
    verdict = judge(CASE, execution(CASE, wrong), reference(CASE), in_pipeline=True)
    assert [f.symptom for f in verdict.findings] == [Symptom.OUT_OF_TOLERANCE]  # with numbers: judged
    verdict = judge(CASE, execution(CASE, reshaped), reference(CASE), in_pipeline=True, numbers=False)
    assert [f.symptom for f in verdict.findings] == [Symptom.SIGNATURE_CHANGE]


def must_fold(case: Case, ex: Execution) -> list[Symptom]:
    return [f.symptom for f in judge(case, ex, reference(case), complete_fold=True).findings]


def test_missed_fold_when_a_foldable_batch_norm_stays() -> None:
    assert block_reasons(CASE) == ((),)
    assert must_fold(CASE, execution(CASE, changed=False)) == [Symptom.MISSED_FOLD]
    assert must_fold(CASE, execution(CASE)) == []
    # not claimed: no missed-fold
    assert symptoms(CASE, execution(CASE, changed=False)) == []


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        (make_case(training=True), Reason.TRAINING),
        (make_case(axis=0, batch=3), Reason.AXIS),
        (make_case(parameters=("mean",)), Reason.NON_CONSTANT),
        (make_case(bias=True, parameters=("bias",)), Reason.NON_CONSTANT),
        (make_case(topology=Topology.CONV_SHARED), Reason.SHARED_CONV),
        (make_case(topology=Topology.BN_STATS), Reason.STATISTICS),
        (make_case(topology=Topology.STATS_CONSUMED), Reason.STATISTICS),
        (make_case(topology=Topology.BN_ONLY), Reason.NO_CONV),
        (make_case(values={"gamma": 1e38, "var": 1e-30}, epsilon=0.0), Reason.RANGE),  # |s| ~ 1e53
        (make_case(values={"mean": 3e38, "gamma": 0.5}), Reason.RANGE),  # the folded bias ~ 1.5e38
        (make_case(values={"var": 0.0}, epsilon=0.0), Reason.RANGE),  # var + eps = 0
    ],
    ids=[
        "training",
        "axis",
        "parameter",
        "bias-parameter",
        "shared-conv",
        "statistics-returned",
        "statistics-consumed",
        "no-conv",
        "huge-scale",
        "huge-bias",
        "zero-variance",
    ],
)
def test_a_decline_with_a_stated_reason_is_no_missed_fold(case: Case, reason: Reason) -> None:
    (reasons,) = block_reasons(case)
    assert reason in {d.reason for d in reasons}
    assert Symptom.MISSED_FOLD not in must_fold(case, execution(case, changed=False))


def test_the_range_reason_has_slack_around_the_guard() -> None:
    # |bias| = max/4 exactly: a sound pass may fold it (its guard) or decline (slack)
    quarter = float(np.finfo(np.float32).max) / 4
    assert {
        d.reason
        for d in block_reasons(
            make_case(values={"mean": -quarter, "gamma": 1.0, "var": 1.0, "beta": 0.0}, epsilon=0.0)
        )[0]
    } == {Reason.RANGE}
    # a folded bias of 1e30 is ordinary: no reason
    assert block_reasons(make_case(values={"mean": -1e30, "gamma": 1.0, "var": 1.0}, epsilon=0.0)) == ((),)


def test_a_fold_that_duplicates_the_conv_is_a_missed_fold() -> None:
    duplicated = (counts(), counts(conv2d=2, batch_norm=0, add=1))
    assert must_fold(CASE, execution(CASE, op_counts=duplicated)) == [Symptom.MISSED_FOLD]


def test_batch_norm_arithmetic_left_at_run_time_is_a_missed_fold() -> None:
    # upstream's fold: the scale computed at run time (FoldConstant would remove it)
    symbolic = (counts(), counts(batch_norm=0, add=2, multiply=2, subtract=1, divide=1, sqrt=1))
    assert must_fold(CASE, execution(CASE, op_counts=symbolic)) == [Symptom.MISSED_FOLD]


def test_the_bias_add_of_a_conv_with_bias_is_taken_over() -> None:
    biased = make_case(bias=True, kh=1, kw=1, height=2, width=2)
    before = counts(add=1)
    assert must_fold(biased, execution(biased, op_counts=(before, counts(batch_norm=0, add=1)))) == []
    extra = (before, counts(batch_norm=0, add=2))  # the conv's bias add kept beside the new one
    assert must_fold(biased, execution(biased, op_counts=extra)) == [Symptom.MISSED_FOLD]


def test_missed_fold_is_judged_where_the_unfolded_program_fails() -> None:
    ex = replace(execution(CASE, changed=False), baseline=Failure(Stage.BUILD, "TVMError", "no"))
    verdict = judge(CASE, ex, reference(CASE), complete_fold=True)
    assert [f.symptom for f in verdict.findings] == [Symptom.MISSED_FOLD] and verdict.skipped


def test_must_not_fold_is_judged_where_the_unfolded_program_fails() -> None:
    # training mode with a negative axis does not lower in TVM: the fold is still wrong
    training = make_case(training=True, axis=-3)
    failed = Failure(Stage.BUILD, "ValueError", "list.remove(x): x not in list")
    verdict = judge(training, replace(execution(training), baseline=failed), reference(training))
    assert [f.symptom for f in verdict.findings] == [Symptom.MUST_NOT_FOLD] and verdict.skipped
    left_alone = replace(execution(training, changed=False), baseline=failed)
    assert judge(training, left_alone, reference(training)).findings == ()


def chain_with_one_parameter_bias() -> Case:
    """A chain whose first conv has a bias that is a function parameter and whose second
    conv has no bias: the second block is all constants."""
    case = make_case(topology=Topology.CHAIN, bias=True, parameters=("bias",))
    first, second = case.blocks
    return replace(case, blocks=(first, replace(second, bias=None)))


def test_the_parameter_reason_is_per_block() -> None:
    case = chain_with_one_parameter_bias()
    first, second = block_reasons(case)
    assert Reason.NON_CONSTANT in {d.reason for d in first}
    assert second == ()
    # one block may be folded: the graph is judged by its numbers, not as must-not-fold
    assert must_not_fold_reasons(case) == ()
    # both biases parameters: every block has the reason
    both = make_case(topology=Topology.CHAIN, bias=True, parameters=("bias",))
    assert all(Reason.NON_CONSTANT in {d.reason for d in r} for r in block_reasons(both))
    assert must_not_fold_reasons(both) != ()


def shifted(outputs: Outputs, k: int, index: tuple[int, ...], value: float) -> Outputs:
    """``outputs`` with element ``index`` of output ``k`` set to ``value``."""
    values = [v.copy() for v in outputs.values]
    values[k][index] = value
    return replace(outputs, values=tuple(values))


def test_within_bound_accepts_the_rounded_reference_and_nothing_off() -> None:
    ref = reference(CASE)
    good = rounded_reference(CASE)
    assert within_bound(ref, good)
    exact = float(ref.outputs[0].value[0, 0, 0, 0])
    bound = float(ref.outputs[0].bound[0, 0, 0, 0])
    at = (0, 0, 0, 0)
    assert not within_bound(ref, shifted(good, 0, at, exact + 4 * bound + 1e-3))  # out of the bound
    assert not within_bound(ref, shifted(good, 0, at, float("nan")))  # non-finite where robust
    assert not within_bound(ref, replace(good, dtypes=("float16",)))  # another dtype
    assert not within_bound(ref, outputs_of([good.values[0][:, :1]]))  # another shape


def test_a_skipped_unfolded_program_leaves_the_structural_findings() -> None:
    # the folded outputs cleared the numeric rules alone; the IR is still judged
    clean = replace(execution(CASE), baseline=None, baseline_skipped=True)
    assert judge(CASE, clean, reference(CASE)).findings == ()
    again = replace(clean, idempotent=False)
    assert symptoms(CASE, again) == [Symptom.NOT_IDEMPOTENT]
    training = make_case(kh=1, kw=1, height=2, width=2, training=True)
    folded = replace(execution(training), baseline=None, baseline_skipped=True)
    assert symptoms(training, folded) == [Symptom.MUST_NOT_FOLD]
