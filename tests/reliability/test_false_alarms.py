"""No false alarms: campaigns against passes that are correct find nothing.

``identity`` changes nothing and ``fixed`` is our fold; a finding against either is a
false alarm of the fuzzer (or a real bug in ``fixed``, which must be fixed before this
passes). The campaigns run as users run them (batches of value sets per structure, the
compile cache, ``target()``, a fresh seed every epoch), for as many value sets as the
Hypothesis profile's ``max_examples``: 40 under ``ci``, 20,000 under ``nightly`` (the
nightly workflow; docs/measurements.md has the counts of a run). The property tests
(``tests/test_property.py``) check the same passes on single fresh draws.
"""

from __future__ import annotations

import pytest
from hypothesis import settings

from fuzz.backends.tvm.compile_cache import CompileCache
from fuzz.backends.tvm.passes import resolve_pass
from fuzz.engine.campaign import run_campaign
from fuzz.oracle.verdict import Symptom


@pytest.mark.parametrize("name", ["identity", "fixed"])
def test_a_correct_pass_has_no_finding(name: str) -> None:
    count = settings.default.max_examples
    # lowering=True: every case is built and run, also where the pass changes nothing, so
    # that the unfolded program meets its bound on all of them
    result = run_campaign(
        resolve_pass(name), max_examples=count, seed=0, runner=CompileCache().run, lowering=True
    )
    assert [str(hit.signature) for hit in result.hits] == []
    assert result.examples == count
    # the unfolded program itself always met its bound (else the oracle, not TVM, is suspect)
    assert not [k for k in result.lowering if k.startswith(Symptom.BASELINE_OUT_OF_TOLERANCE.value)]
    if name == "fixed":
        assert result.changed > 0  # it did fold: zero findings is not from doing nothing
    print(f"{name}: {result.examples} value sets, {result.changed} changed, {result.batches} examples")
