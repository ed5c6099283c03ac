"""The campaign: every distinct bug once, each shrunk; budgets; our own bugs surface."""

from __future__ import annotations

import pytest
from cases import make_case
from hypothesis import strategies as st

from fuzz.campaign import run_campaign
from fuzz.case import Case
from fuzz.compile_cache import CompileCache
from fuzz.passes import resolve_pass

SMALL = {"c_in": 1, "c_out": 1, "height": 1, "width": 1, "kh": 1, "kw": 1}
SCALE_OFF = make_case(**SMALL, scale=False, values={"gamma": 2.0})
IOHW = make_case(**SMALL, kernel_layout="IOHW")
CLEAN = make_case(**SMALL)


def test_distinct_bugs_are_reported_once_each() -> None:
    result = run_campaign(
        resolve_pass("upstream"), max_examples=30, cases=st.sampled_from([CLEAN, SCALE_OFF, IOHW])
    )
    signatures = sorted(str(hit.signature) for hit in result.hits)
    assert signatures == [
        "out-of-tolerance[scale=False]",
        "pass-exception:AttributeError[kernel_layout=IOHW]",
    ]
    # a last round ran out of new examples (three cases in all) without a new bug
    assert result.rounds == 3 and result.examples <= 30
    # the bugs were hit again after they were known; each is still reported once
    assert sum(hit.hits for hit in result.hits) > 2


def test_a_bug_hit_hundreds_of_times_is_reported_once_with_its_smallest_case() -> None:
    iohw = st.builds(
        lambda c_out, x: make_case(**{**SMALL, "c_out": c_out}, kernel_layout="IOHW", values={"x": float(x)}),
        st.integers(1, 4),
        st.integers(1, 10**6),
    )
    result = run_campaign(resolve_pass("upstream"), max_examples=300, cases=iohw, runner=CompileCache().run)
    (hit,) = result.hits
    assert str(hit.signature) == "pass-exception:AttributeError[kernel_layout=IOHW]"
    assert hit.hits >= 200  # every later example showed it again; it is still one finding
    smallest = hit.checked.case
    assert smallest.blocks[0].gamma.shape == (1,) and smallest.data.values == (1.0,)


def test_a_correct_pass_has_no_hits() -> None:
    result = run_campaign(resolve_pass("identity"), max_examples=5, cases=st.sampled_from([CLEAN, IOHW]))
    # Hypothesis stops when the two cases are exhausted
    assert result.hits == [] and result.examples == 2 and result.changed == 0


def test_errors_in_our_own_code_propagate() -> None:
    def broken_cases(_: Case) -> Case:
        raise RuntimeError("a bug in a strategy")

    with pytest.raises(RuntimeError, match="a bug in a strategy"):
        run_campaign(resolve_pass("identity"), max_examples=3, cases=st.just(CLEAN).map(broken_cases))


def test_a_budget_is_required() -> None:
    with pytest.raises(ValueError, match="budget"):
        run_campaign(resolve_pass("identity"))
