"""fuzz/engine/check.py: judging the pass alone (``lowering=False``, what campaigns do) gives the
verdicts that judging the lowering too gives, while building and running less.

Without the lowering, the unfolded program runs only where the folded outputs alone do not
clear the numeric rules (``fuzz.oracle.verdict.within_bound``); these tests check that this never
changes a finding against the pass, on hand-made cases and on generated ones through
upstream's pass, ours and every mutant.
"""

from __future__ import annotations

import pytest
from cases import PUBLIC_NAN_REPORT, make_case
from hypothesis import given
from hypothesis import strategies as st

import strategies
from fuzz.backends.tvm.compile_cache import CompileCache
from fuzz.backends.tvm.mutants import MUTANTS
from fuzz.backends.tvm.mutants import load as load_mutant
from fuzz.backends.tvm.passes import PassFactory, resolve_pass
from fuzz.engine.check import check
from fuzz.model.case import Case
from fuzz.oracle.execution import Outputs

RUNNER = CompileCache(capacity=1024).run
FIXED = resolve_pass("fixed")
UPSTREAM = resolve_pass("upstream")


def both(case: Case, make_pass: PassFactory) -> tuple[tuple[object, ...], tuple[object, ...], bool]:
    """The findings judged with and without the lowering, and whether the unfolded
    program was skipped without it."""
    eager = check(case, make_pass, RUNNER, lowering=True)
    lazy = check(case, make_pass, RUNNER, lowering=False)
    return eager.verdict.findings, lazy.verdict.findings, lazy.execution.baseline_skipped


def test_a_correct_fold_runs_only_the_folded_program() -> None:
    eager, lazy, skipped = both(make_case(), FIXED)
    assert eager == lazy == () and skipped
    ex = check(make_case(), FIXED, RUNNER, lowering=False).execution
    assert ex.baseline is None and isinstance(ex.folded, Outputs)


def test_a_wrong_fold_runs_both_and_finds_the_same() -> None:
    eager, lazy, skipped = both(make_case(scale=False, values={"gamma": 7.0}), UPSTREAM)
    assert eager == lazy != () and not skipped
    eager, lazy, skipped = both(PUBLIC_NAN_REPORT, UPSTREAM)
    assert eager == lazy != () and not skipped


@pytest.mark.slow
@given(
    case=strategies.cases(),
    make_pass=st.sampled_from([UPSTREAM, FIXED, *(load_mutant(m.name) for m in MUTANTS)]),
)
def test_skipping_the_unfolded_program_changes_no_finding(case: Case, make_pass: PassFactory) -> None:
    eager, lazy, _ = both(case, make_pass)
    assert eager == lazy
