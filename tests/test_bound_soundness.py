"""The error bound against TVM itself: on hand-made extreme cases the unfolded
program (no pass) must land within the reference's bound. Each case here once
exposed a missing term in the bound; a failure means a false alarm waiting to
happen (or a real lowering bug: read the message)."""

from __future__ import annotations

import pytest
from cases import make_case

from fuzz.backends.tvm.passes import resolve_pass
from fuzz.engine.check import check
from fuzz.model.case import Topology
from fuzz.oracle.reference import reference
from fuzz.oracle.verdict import Symptom

ONE = {"c_in": 1, "c_out": 1, "height": 1, "width": 1, "kh": 1, "kw": 1}

CASES = {
    # q = x / sqrt(var) underflows to 0 in float32, then meets gamma = -1.7e38.
    "underflow-times-huge-gamma": make_case(
        topology=Topology.BN_ONLY, c_in=1, height=1, width=3, epsilon=1e-30, center=False,
        values={"x": [2.35e-38, 4.9e-38, -2.36e-38], "gamma": -1.7e38, "mean": 0.0, "var": 3.8e18},
    ),
    # var + eps is subnormal: the scale's relative error is eta / (var + eps).
    "subnormal-denominator": make_case(
        **ONE, epsilon=0.0, values={"x": 1.0, "weight": 1.0, "gamma": 1e-20, "mean": 0.5, "var": 1e-44}
    ),
    # cancellation: the conv sums +w and -w over equal inputs.
    "cancellation": make_case(
        c_in=2, c_out=1, height=1, width=1, kh=1, kw=1,
        values={"x": 3.0, "weight": [[[[1e19]], [[-1e19]]]], "gamma": 1e10, "mean": 1.0, "var": 1.0},
    ),
    # products of tiny data and tiny weights underflow, then a huge scale.
    "underflowing-products": make_case(
        **ONE, values={"x": 1e-30, "weight": 1e-20, "gamma": 1e30, "mean": 0.0, "var": 1e-10}
    ),
    "float16-huge": make_case(
        dtype="float16", **ONE, values={"x": 200.0, "weight": 250.0, "gamma": 0.5, "mean": 1.0, "var": 3.0}
    ),
    # A float32 conv with out_dtype float64: the reference must compute wider than
    # float64, or its gamma / sqrt(var + eps) underflows to 0 where TVM's does not.
    "float64-out-dtype-subnormal-gamma": make_case(
        **ONE, out_dtype="float64", epsilon=1.0,
        values={"x": 8.0, "weight": 8.0, "gamma": 5e-324, "beta": -1.3571e-319, "mean": -6.5, "var": 6.5},
    ),
    # q * gamma passes float32's maximum, beta brings it back: TVM gives -inf, so the
    # element is not robust (and the fold is not blamed for its -inf)
    "gamma-times-q-past-max": make_case(
        **ONE, values={"x": -2.0, "weight": 2.0**65, "gamma": 4.25e37, "beta": 3.1e38, "mean": 1.0, "var": 6.4e37}
    ),
    "float64-near-max": make_case(
        dtype="float64", **ONE, values={"x": 1e154, "weight": 1e154, "gamma": 1.0, "mean": 0.0, "var": 4.0}
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_unfolded_program_is_within_its_bound(name: str) -> None:
    verdict = check(CASES[name], resolve_pass("identity")).verdict
    misses = [f for f in verdict.lowering if f.symptom is Symptom.BASELINE_OUT_OF_TOLERANCE]
    assert misses == [], misses[0].message if misses else ""
    assert verdict.findings == ()


def test_overflowing_batch_variance_is_not_robust() -> None:
    # x = 2^125 beside a padded zero: the squared deviations overflow float32, so the
    # new variance is inf in TVM too; no finiteness can be demanded of it.
    case = make_case(
        topology=Topology.BN_STATS, training=True, c_in=1, c_out=1, height=1, width=1, kh=1, kw=1,
        padding=(0, 0, 0, 1), values={"x": 2.0**125, "weight": 1.0, "gamma": 1.0, "beta": 1.0, "mean": 1.0, "var": 1.0},
    )  # fmt: skip
    verdict = check(case, resolve_pass("identity")).verdict
    assert verdict.findings == () and verdict.lowering == ()
    assert not reference(case).outputs[2].robust.any()
