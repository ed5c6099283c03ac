"""The campaign: every distinct bug once, each shrunk; budgets; our own bugs surface."""

from __future__ import annotations

import os
import signal
from dataclasses import replace

import numpy as np
import pytest
import tvm
from cases import make_case
from hypothesis import strategies as st

from fuzz.backends.tvm.compile_cache import CompileCache
from fuzz.backends.tvm.passes import resolve_pass
from fuzz.engine.campaign import StopCampaign, run_campaign
from fuzz.engine.campaign_control import SHRINK_DEADLINE
from fuzz.engine.campaign_result import Progress
from fuzz.engine.check import Checked, check
from fuzz.model.case import Case, Topology
from fuzz.model.pipeline import Pipeline
from fuzz.oracle.execution import Stage
from fuzz.oracle.verdict import Finding, Symptom, Verdict

SMALL = {"c_in": 1, "c_out": 1, "height": 1, "width": 1, "kh": 1, "kw": 1}
SCALE_OFF = make_case(**SMALL, scale=False, values={"gamma": 2.0})
IOHW = make_case(**SMALL, kernel_layout="IOHW")
CLEAN = make_case(**SMALL)


@pytest.mark.slow
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


def test_the_installed_hypothesis_has_the_shrink_deadline_the_campaign_caps() -> None:
    # the one Hypothesis internal the campaign sets; a release without it leaves shrinking
    # uncapped (a warning), and this test says so before a campaign does
    from hypothesis.internal.conjecture import engine

    assert isinstance(getattr(engine, SHRINK_DEADLINE), int | float)


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


def ctrl_c_inside_a_python_pass() -> tvm.ir.transform.Pass:
    """A pass that TVM's C++ calls back into, pressing Ctrl-C while it runs (as a user's
    Ctrl-C most often lands: upstream's fold is such a pass)."""

    @tvm.ir.transform.module_pass(opt_level=0)
    def press_ctrl_c(mod: tvm.IRModule, _ctx: object) -> tvm.IRModule:
        os.kill(os.getpid(), signal.SIGINT)  # Python runs the handler before the next line
        return mod

    return press_ctrl_c


def test_ctrl_c_inside_the_pass_stops_the_campaign_instead_of_reading_as_a_crash() -> None:
    # TVM's FFI turns a KeyboardInterrupt raised in a Python callback into an empty
    # RuntimeError: without the campaign's own handler this is a "pass-exception" finding
    # and the campaign runs on to its budget.
    before = signal.getsignal(signal.SIGINT)  # Python's default, or SIG_IGN in a background job
    result = run_campaign(ctrl_c_inside_a_python_pass, max_examples=20, cases=st.sampled_from([CLEAN, IOHW]))
    assert result.interrupted and result.hits == [] and result.examples == 1
    assert signal.getsignal(signal.SIGINT) is before  # put back


def test_a_second_ctrl_c_stops_at_once() -> None:
    presses = 0

    def press_twice(case: Case, pipeline: object) -> object:
        nonlocal presses
        presses += 1
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # the second one raises here, mid-check
        raise AssertionError("not reached")

    result = run_campaign(
        resolve_pass("identity"), max_examples=20, cases=st.just(CLEAN), checker=press_twice
    )  # type: ignore[arg-type]
    assert result.interrupted and result.hits == [] and presses == 1


def test_a_large_failing_case_does_not_end_the_campaign_with_a_repr_warning() -> None:
    # Hypothesis warns when it builds a repr over 30 kB for its (discarded) report of the
    # failing example, as when shrinking stopped early; the test suite makes warnings errors.
    big = make_case(topology=Topology.CHAIN, c_in=16, c_out=16, height=8, width=8, kernel_layout="IOHW")
    assert len(repr((None, (big,)))) > 30_000  # about as long as Hypothesis prints the example
    result = run_campaign(resolve_pass("upstream"), max_examples=3, cases=st.just(big))
    assert [hit.finding.symptom.value for hit in result.hits] == ["pass-exception"]


def test_a_shrink_checks_each_passing_value_set_once() -> None:
    # A synthetic bug (any |x| > 8) on top of the fixed pass's real checks: while the first
    # finding is shrunk, Hypothesis replays a batch's earlier value sets again and again;
    # each is checked once and remembered (the pass is deterministic).
    cache = CompileCache()
    shrinking = False
    passed: list[tuple[Case, object]] = []

    def checker(case: Case, pipeline: Pipeline | None) -> Checked:
        checked = check(case, resolve_pass("fixed"), cache.run, pipeline, lowering=False)
        if float(np.max(np.abs(case.data.float64()))) > 8:
            synthetic = Finding(Symptom.OUT_OF_TOLERANCE, Stage.COMPARE, "synthetic: |x| > 8")
            checked = replace(checked, verdict=Verdict((synthetic,)))
        elif shrinking:
            passed.append((case, pipeline))
        return checked

    def on_progress(progress: Progress) -> None:
        nonlocal shrinking
        shrinking = shrinking or progress.shrinking
        if progress.hits:
            raise StopCampaign("the first bug is shrunk")  # before a second round starts

    result = run_campaign(
        resolve_pass("fixed"),
        max_examples=2000,
        seed=3,
        checker=checker,
        on_progress=on_progress,
        shrink_seconds=600,  # never reached: the shrink ends on its own, however slow the machine
    )
    assert [hit.finding.message for hit in result.hits] == ["synthetic: |x| > 8"]
    assert len(passed) > 3  # the shrink did check passing value sets ...
    assert len(set(passed)) == len(passed)  # ... each once
