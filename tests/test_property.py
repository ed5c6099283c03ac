"""The fuzz run: "no finding" as a Hypothesis property, parametrised over passes.

The example count comes from the Hypothesis profile (``HYPOTHESIS_PROFILE``:
``ci``, ``dev``, ``nightly``; see ``conftest.py``). ``identity`` and the narrow
correct fold in ``correct_fold.py`` and our fixed pass (``fuzz/fold_batchnorm.py``)
must give no finding (for ``fixed``, which claims a complete fold, that includes the
must-fold property: no ``missed-fold``); TVM's upstream pass is known to be wrong, and
``identity`` claimed as a complete fold folds nothing, so their properties are strict
xfails: the test suite fails if the fuzzer ever stops finding those bugs.
"""

from __future__ import annotations

import pytest
from correct_fold import CorrectFold
from hypothesis import Phase, event, given, settings

import strategies
from fuzz.case import Case
from fuzz.case_json import dumps
from fuzz.check import check
from fuzz.compile_cache import CompileCache
from fuzz.oracle import Symptom
from fuzz.passes import PassFactory, resolve_pass

#: One compile cache for the whole property run (bit-identical to rebuilding, see
#: test_compile_cache.py); structures recur across examples and passes.
RUNNER = CompileCache(capacity=1024).run

#: name on the command line -> factory
PASSES: dict[str, PassFactory] = {
    "fixed": resolve_pass("fixed"),
    "identity": resolve_pass("identity"),
    "tests.correct_fold:CorrectFold": CorrectFold,
}


def assert_no_finding(case: Case, make_pass: PassFactory, name: str) -> None:
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
            f'  python -c "from fuzz.case import loads; from fuzz.check import check; '
            f"from fuzz.passes import resolve_pass; "
            f"print(check(loads(open('case.json').read()), resolve_pass('{name}')).verdict)\"\n" + dumps(case)
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


@pytest.mark.xfail(strict=True, reason="identity folds nothing: the must-fold property catches it")
@settings(phases=[Phase.explicit, Phase.reuse, Phase.generate])  # a hit is enough: no shrinking
@given(case=strategies.cases())
def test_identity_claimed_as_a_complete_fold_has_no_missed_fold(case: Case) -> None:
    verdict = check(case, resolve_pass("identity", complete_fold=True), RUNNER).verdict
    assert Symptom.MISSED_FOLD not in [f.symptom for f in verdict.findings], verdict.primary
