"""The fuzz run: "no finding" as a Hypothesis property, parametrised over passes.

The example count comes from the Hypothesis profile (``HYPOTHESIS_PROFILE``:
``ci``, ``dev``, ``nightly``; see ``conftest.py``). ``identity`` and the narrow
correct fold in ``correct_fold.py`` and our fixed pass (``fuzz/backends/tvm/fold_batchnorm.py``)
must give no finding (for ``fixed``, which claims a complete fold, that includes the
must-fold property: no ``missed-fold``); TVM's upstream pass is known to be wrong, and
``identity`` claimed as a complete fold folds nothing, so their properties are strict
xfails: the test suite fails if the fuzzer ever stops finding those bugs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from cases import make_case
from correct_fold import CorrectFold
from hypothesis import Phase, event, given, settings
from hypothesis import strategies as st

import strategies
from fuzz.backends import FoldLike, resolve_fold
from fuzz.backends.tvm.compile_cache import CompileCache
from fuzz.backends.tvm.passes import PassFactory, resolve_pass
from fuzz.engine.check import check
from fuzz.model.case import Case
from fuzz.model.case_json import dumps
from fuzz.oracle.verdict import Symptom

#: One compile cache for the whole property run (bit-identical to rebuilding, see
#: test_compile_cache.py); structures recur across examples and passes.
RUNNER = CompileCache(capacity=1024).run

#: name on the command line -> factory
PASSES: dict[str, PassFactory] = {
    "fixed": resolve_pass("fixed"),
    "identity": resolve_pass("identity"),
    "tests.correct_fold:CorrectFold": CorrectFold,
}


def assert_no_finding(case: Case, make_pass: FoldLike, name: str) -> None:
    """Fail with a reproducer if the pass has a finding, or the unfolded program
    misses its own bound (a bug in TVM's lowering or in our reference: either way a
    result nobody should trust). TVM 0.27's float32 results from half-precision
    batch_norm (``baseline-signature-change``) are a known lowering defect, recorded
    as an event instead."""
    verdict = check(case, make_pass, RUNNER).verdict
    lowering = [f for f in verdict.lowering if f.symptom is Symptom.BASELINE_OUT_OF_TOLERANCE]
    for f in verdict.lowering:
        event(f"lowering: {f.symptom.value}")
    if verdict.primary is not None or lowering:
        found = verdict.findings + tuple(lowering)
        pytest.fail(
            f"pass {name!r}: {found[0].symptom.value} at {found[0].stage}: {found[0].message}\n"
            f"To reproduce: save the case below as case.json and run, from the repository root,\n"
            f'  python -c "from fuzz.model.case_json import loads; from fuzz.engine.check import check; '
            f"from fuzz.backends import resolve_fold; "
            f"print(check(loads(open('case.json').read()), resolve_fold('{name}')).verdict)\"\n" + dumps(case)
        )


@pytest.mark.parametrize("name", sorted(PASSES))
@given(case=strategies.cases())
def test_pass_has_no_finding(name: str, case: Case) -> None:
    assert_no_finding(case, PASSES[name], name)


@pytest.mark.xfail(
    strict=True, reason="TVM's FoldBatchnormToConv2D has known defects (the README lists them)"
)
@settings(phases=[Phase.explicit, Phase.reuse, Phase.generate])  # a hit is enough: no shrinking
@given(case=strategies.cases())
def test_upstream_has_no_finding(case: Case) -> None:
    verdict = check(case, resolve_pass("upstream"), RUNNER).verdict
    assert verdict.primary is None, verdict.primary


#: TVM users' ONNX path (from_onnx, then the pass), drawing every way of writing the model the
#: frontend imports
TVM_ONNX_FIXED = resolve_fold("tvm:onnx:fixed")
TVM_ONNX = resolve_fold("tvm:onnx")


@given(case=TVM_ONNX_FIXED.cases())
def test_fixed_pass_on_the_onnx_path_has_no_finding(case: Case) -> None:
    assert_no_finding(case, TVM_ONNX_FIXED, "tvm:onnx:fixed")


@pytest.mark.xfail(
    strict=True, reason="TVM's FoldBatchnormToConv2D has known defects (the README lists them)"
)
@settings(phases=[Phase.explicit, Phase.reuse, Phase.generate])  # a hit is enough: no shrinking
@given(case=TVM_ONNX.cases())
def test_upstream_on_the_onnx_path_has_no_finding(case: Case) -> None:
    verdict = check(case, TVM_ONNX, RUNNER).verdict
    assert verdict.primary is None, verdict.primary


@pytest.mark.xfail(strict=True, reason="identity folds nothing: the must-fold property catches it")
@settings(phases=[Phase.explicit, Phase.reuse, Phase.generate])  # a hit is enough: no shrinking
@given(case=strategies.cases())
def test_identity_claimed_as_a_complete_fold_has_no_missed_fold(case: Case) -> None:
    verdict = check(case, resolve_pass("identity", complete_fold=True), RUNNER).verdict
    assert Symptom.MISSED_FOLD not in [f.symptom for f in verdict.findings], verdict.primary


#: ONNX Runtime's fold at its default level (a backend without a compile cache).
ORT_BASIC = resolve_fold("onnxruntime:basic")


@pytest.mark.xfail(
    strict=True, reason="ONNX Runtime's ConvBNFusion overflows folded weights (docs/backends.md)"
)
# a hit is enough: no shrinking; up to 600 examples (the test ends at the first hit)
@settings(phases=[Phase.explicit, Phase.reuse, Phase.generate], max_examples=600)
@given(case=ORT_BASIC.cases())
def test_onnxruntime_has_no_finding(case: Case) -> None:
    verdict = check(case, ORT_BASIC).verdict
    assert verdict.primary is None, verdict.primary


def _largest_input(case: Case, index: int) -> float:
    """A bound on the magnitude of what reaches block ``index``'s batch_norm: the data's
    largest magnitude times the sum of the weights' (plus the bias's), for a block fed
    by the data; unbounded (inf) for one fed by another block."""
    if index > 0:
        return math.inf
    block = case.blocks[index]
    largest = float(np.max(np.abs(np.asarray(case.data.values, np.float64))))
    if block.conv is None or block.weight is None:
        return largest
    weights = float(np.sum(np.abs(np.asarray(block.weight.values, np.float64))))
    bias = 0.0 if block.bias is None else float(np.max(np.abs(np.asarray(block.bias.values, np.float64))))
    return largest * weights + bias


def bn_constants_out_of_range(case: Case) -> bool:
    """Whether ``s = gamma / sqrt(var + eps)`` or ``b = beta - mean * s`` (or ``mean * s``)
    leaves the dtype's normal range in some block. ONNX Runtime's BatchNormalization CPU
    kernel computes ``x * s + b``: it folds the batch norm's own constants, so its unfolded
    output is inf or NaN where the exact one is finite when they overflow, and loses the
    precision of a subnormal ``s`` (its own kernel defect; test_onnxruntime.py shows one)."""
    info = np.finfo(case.dtype)
    limit, tiny = float(info.max), float(info.tiny)
    for index, block in enumerate(case.blocks):
        gamma, beta, mean, var = (
            np.asarray(t.values, np.float64) for t in (block.gamma, block.beta, block.mean, block.var)
        )
        # without scale (center) the kernel's gamma is 1 (beta 0), whatever the case stores
        gamma = gamma if block.bn.scale else np.ones_like(gamma)
        beta = beta if block.bn.center else np.zeros_like(beta)
        if block.bn.training:  # batch statistics: the variance may be anything down to 0,
            var = np.zeros_like(var)  # the mean anything up to the largest input
            mean = np.full_like(mean, _largest_input(case, index))
        with np.errstate(all="ignore"):
            s = gamma / np.sqrt(var + block.bn.epsilon)
            for value in (s, mean * s, beta - mean * s):
                if not (np.abs(value) <= limit).all() or ((value != 0) & (np.abs(value) < tiny)).any():
                    return True
    return False


def test_the_helper_bounds_a_training_batch_norms_batch_mean() -> None:
    # batch statistics: the stored mean (1) is not what the kernel multiplies by s; the
    # batch mean can be as large as the conv's output, 8.8e12 * 2 here, and times
    # s = 1.7e38 / sqrt(0 + 1) that leaves float32's range (a case Hypothesis drew)
    values = {"x": 2.0**43, "weight": 1.0, "gamma": 1.7e38, "beta": 1.0, "mean": 1.0, "var": 1.0}
    common = dict(c_in=1, c_out=1, height=3, width=1, kh=2, kw=1, epsilon=1.0, values=values)
    assert bn_constants_out_of_range(make_case(training=True, **common))  # type: ignore[arg-type]
    assert not bn_constants_out_of_range(make_case(training=False, **common))  # type: ignore[arg-type]


@given(case=ORT_BASIC.cases())
def test_onnxruntime_unfolded_run_is_within_its_bound(case: Case) -> None:
    verdict = check(case, ORT_BASIC).verdict
    misses = [f for f in verdict.lowering if f.symptom is Symptom.BASELINE_OUT_OF_TOLERANCE]
    for f in verdict.lowering:
        event(f"onnxruntime unfolded: {f.symptom.value}")
    if misses and bn_constants_out_of_range(case):
        event("onnxruntime unfolded: the kernel's own BatchNormalization constants out of range")
        return
    assert misses == [], misses[0].message if misses else ""


@pytest.mark.xfail(
    strict=True,
    reason="each ONNX tool and OpenVINO has known defects, the overflow class first (docs/backends.md)",
)
@pytest.mark.parametrize("name", ["onnxoptimizer", "onnxslim", "onnxsim", "openvino"])
# a hit is enough: no shrinking; up to 2000 examples, as the first hit may need hundreds (the
# test ends at it; onnxoptimizer's, in a cheap case, more than a thousand)
@settings(phases=[Phase.explicit, Phase.reuse, Phase.generate], max_examples=2000)
@given(data=st.data())
def test_onnx_backend_has_no_finding(name: str, data: st.DataObject) -> None:
    fold = resolve_fold(name)
    case = data.draw(fold.cases())
    verdict = check(case, fold).verdict
    assert verdict.primary is None, verdict.primary
