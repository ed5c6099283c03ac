"""The backend: each Execution field, each failure stage, and the TVM facts it relies on.

Every :func:`execute` call compiles two programs (0.2 to 0.4 s), so the cases are
few and small. The ``TestTvm`` class pins behaviour of TVM itself, the same in 0.25,
0.26 and 0.27 (not of our code); when one of those fails after an upgrade, revisit ``fuzz/backends/tvm/compat.py``
and the oracle's expectations.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
import tvm
from cases import make_case
from tvm import relax

import fuzz.backends.tvm.execute
from fuzz.backends.tvm.build import build_module, runtime_inputs
from fuzz.backends.tvm.compat import to_device, type_of
from fuzz.backends.tvm.execute import compile_and_run, count_batch_norms, execute
from fuzz.backends.tvm.passes import identity, resolve_pass
from fuzz.model.case import Topology
from fuzz.oracle.execution import Execution, Failure, Outputs, Stage

UPSTREAM = resolve_pass("upstream")

#: W * s = 1e26 is in range, x * (W * s) = 1e39 is not: folded inf - inf = NaN.
OVERFLOW = make_case(
    kh=1, kw=1, height=1, width=1, c_in=2, c_out=1,
    values={"x": 1e13, "weight": [1e13, -1e13], "gamma": 1e13, "mean": 0.0, "var": 1.0},
)  # fmt: skip


def outputs(result: Outputs | Failure) -> Outputs:
    assert isinstance(result, Outputs), result
    return result


def same_bits(a: Outputs, b: Outputs) -> bool:
    return (
        a.dtypes == b.dtypes
        and a.shapes == b.shapes
        and all(x.tobytes() == y.tobytes() for x, y in zip(a.values, b.values, strict=True))
    )


@pytest.fixture(scope="module")
def upstream_default() -> Execution:
    return execute(make_case(), UPSTREAM)


def test_upstream_fires_and_changes_the_default_case(upstream_default: Execution) -> None:
    ex = upstream_default
    assert ex.changed and ex.fired and ex.idempotent is True
    base, folded = outputs(ex.baseline), outputs(ex.folded)
    assert folded.shapes == base.shapes == ((1, 3, 3, 3),)
    assert folded.dtypes == base.dtypes == ("float32",)
    np.testing.assert_allclose(folded.values[0], base.values[0], rtol=1e-5, atol=1e-6)
    assert ex.pass_seconds > 0 and ex.build_seconds > ex.pass_seconds


@pytest.mark.parametrize("topology", list(Topology))
def test_identity_is_a_bit_exact_no_op_on_every_topology(topology: Topology) -> None:
    case = make_case(topology=topology)
    ex = execute(case, identity)
    assert (ex.changed, ex.fired, ex.idempotent) == (False, False, True)
    base = outputs(ex.baseline)
    assert same_bits(base, outputs(ex.folded))
    n_outputs = {Topology.CONV_SHARED: 2, Topology.BN_STATS: 3}.get(topology, 1)
    assert len(base.values) == n_outputs
    assert all(np.isfinite(v).all() for v in base.values)


def test_an_unchanged_module_need_not_be_built() -> None:
    case = make_case()
    ex = execute(case, identity, unchanged=False)
    assert (ex.baseline, ex.folded, ex.changed) == (None, None, False)
    assert ex.build_seconds == 0.0 and ex.op_counts is not None
    # a module the pass does change is built and run as before
    folded = execute(case, resolve_pass("fixed"), unchanged=False)
    assert folded.changed and isinstance(folded.baseline, Outputs) and isinstance(folded.folded, Outputs)


def test_outputs_are_float64_copies_with_runtime_dtypes_and_shapes() -> None:
    case = make_case(topology=Topology.BN_STATS, dtype="float64")
    result = outputs(execute(case, identity).baseline)
    assert result.dtypes == ("float64",) * 3
    assert result.shapes == ((1, 3, 3, 3), (3,), (3,))
    assert all(v.dtype == np.float64 for v in result.values)
    # inference mode: the statistics come back unchanged
    assert np.array_equal(result.values[1], case.blocks[0].mean.float64())
    assert np.array_equal(result.values[2], case.blocks[0].var.float64())


def test_upstream_on_iohw_fails_in_the_pass() -> None:
    ex = execute(make_case(kernel_layout="IOHW"), UPSTREAM)
    assert ex.folded == Failure(Stage.PASS, "AttributeError", "'Call' object has no attribute 'reshape'")
    assert (ex.changed, ex.fired, ex.idempotent) == (False, False, None)
    assert ex.baseline is None  # judged from the exception alone: nothing built


def test_upstream_on_float16_fails_in_the_pass_with_a_short_message() -> None:
    ex = execute(make_case(dtype="float16"), UPSTREAM)
    assert isinstance(ex.folded, Failure)
    assert (ex.folded.stage, ex.folded.error_type) == (Stage.PASS, "TypeError")
    assert ex.folded.message.startswith("Binary operators must have the same datatype")
    assert "Traceback" not in ex.folded.message and "Metadata omitted" not in ex.folded.message
    assert "\n" not in ex.folded.message


def test_upstream_ill_formed_output_is_a_well_formedness_failure() -> None:
    """Folding a 1-channel conv along H broadcasts the weight to 5 output channels."""
    case = make_case(topology=Topology.CHAIN, c_out=1, axis=2, height=7, width=7)
    ex = execute(case, UPSTREAM)
    assert isinstance(ex.folded, Failure)
    assert (ex.folded.stage, ex.folded.error_type) == (Stage.WELL_FORMED, "TypeError")
    assert "cannot be assigned to a variable of type" in ex.folded.message
    assert ex.changed and ex.fired
    assert ex.baseline is None  # judged from the IR alone: nothing built


def raising() -> Any:
    @relax.transform.function_pass(opt_level=0, name="Raising")
    def broken(func: Any, mod: Any, ctx: Any) -> Any:
        raise ValueError("no such binding")

    return broken


def test_a_raising_pass_is_a_pass_failure() -> None:
    ex = execute(make_case(), raising)
    assert ex.folded == Failure(Stage.PASS, "ValueError", "no such binding")


def test_a_raising_pass_factory_is_a_pass_failure() -> None:
    def factory() -> Any:
        raise RuntimeError("cannot construct")

    ex = execute(make_case(), factory)
    assert ex.folded == Failure(Stage.PASS, "RuntimeError", "cannot construct")


def counting() -> Any:
    """Changes nothing but a counter attribute: valid, same outputs, not idempotent."""

    @relax.transform.function_pass(opt_level=0, name="Counting")
    def count(func: Any, mod: Any, ctx: Any) -> Any:
        n = int(func.attrs["count"]) if "count" in func.attrs else 0
        return func.with_attr("count", n + 1)

    return count


def test_non_idempotent_pass() -> None:
    ex = execute(make_case(), counting)
    assert (ex.changed, ex.fired, ex.idempotent) == (True, False, False)
    assert same_bits(outputs(ex.baseline), outputs(ex.folded))


def in_place() -> Any:
    """A module pass that assigns ``mod["main"]`` on its input and returns it."""

    @tvm.transform.module_pass(opt_level=0, name="InPlace")
    def assign(mod: Any, ctx: Any) -> Any:
        mod["main"] = mod["main"].with_attr("touched", True)
        return mod

    return assign


def test_a_pass_that_edits_its_input_in_place_is_still_seen_to_change_it() -> None:
    ex = execute(make_case(), in_place)
    assert ex.changed and not ex.fired
    assert same_bits(outputs(ex.baseline), outputs(ex.folded))


def test_build_and_run_failures_are_values() -> None:
    case = make_case(axis=-3, training=True)  # see TestTvm: topi cannot legalize it
    built, seconds = compile_and_run(build_module(case), runtime_inputs(case))
    assert isinstance(built, Failure) and built.stage is Stage.BUILD and seconds > 0
    case = make_case(topology=Topology.BN_ONLY)
    ran, _ = compile_and_run(build_module(case), [])  # missing argument
    assert isinstance(ran, Failure) and ran.stage is Stage.RUN


def test_a_failed_pass_leaves_no_state_behind(upstream_default: Execution) -> None:
    execute(make_case(kernel_layout="IOHW"), UPSTREAM)  # raises inside a BlockBuilder
    again = execute(make_case(), UPSTREAM)
    assert same_bits(outputs(again.folded), outputs(upstream_default.folded))


@pytest.mark.parametrize(
    "case",
    [
        make_case(dtype="float16", topology=Topology.BN_ONLY),
        make_case(dtype="bfloat16", topology=Topology.BN_STATS),
        make_case(dtype="float64"),
        make_case(dtype="float16", topology=Topology.BN_ONLY, values={"x": 6e4, "var": 1e-3}),
        OVERFLOW,
    ],
    ids=["float16", "bfloat16", "float64", "huge-float16", "overflow-float32"],
)
def test_opt_level_0_target_is_bit_identical(monkeypatch: pytest.MonkeyPatch, case: Any) -> None:
    """The faster TARGET changes no bit, unfolded or folded."""
    modules = [build_module(case)]
    if case.dtype == "float32":
        modules.append(relax.transform.FoldBatchnormToConv2D()(build_module(case)))
    for mod in modules:
        fast, _ = compile_and_run(mod, runtime_inputs(case))
        monkeypatch.setattr(fuzz.backends.tvm.execute, "TARGET", tvm.target.Target("llvm"))
        plain, _ = compile_and_run(mod, runtime_inputs(case))
        monkeypatch.undo()
        assert same_bits(outputs(fast), outputs(plain))


class TestTvm:
    """What TVM (each of 0.25, 0.26 and 0.27) does with the cases we generate (the report's
    evidence)."""

    def test_bfloat16_round_trips_through_the_vm(self) -> None:
        values = np.array([1.0, -0.0, 2.0**-133, 3.3895313892515355e38], dtype=ml_dtypes.bfloat16)
        back = to_device(values).numpy()
        assert back.dtype == np.dtype(ml_dtypes.bfloat16)
        assert back.tobytes() == values.tobytes()

    @pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
    def test_half_batch_norm_output_comes_back_float32(self, dtype: str) -> None:
        """topi adds a float32 epsilon to var: the output is float32, the statistics not.

        The module's declared type says the half dtype; the VM does not check.
        """
        ex = execute(make_case(dtype=dtype, topology=Topology.BN_STATS), identity)
        assert outputs(ex.baseline).dtypes == ("float32", dtype, dtype)
        ret = type_of(build_module(make_case(dtype=dtype))["main"].body)
        assert str(ret.dtype) == dtype

    @pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
    def test_half_chain_cannot_build(self, dtype: str) -> None:
        """The float32 batch_norm output meets the second conv's half weight."""
        ex = execute(make_case(dtype=dtype, topology=Topology.CHAIN), identity)
        assert isinstance(ex.baseline, Failure)
        assert (ex.baseline.stage, ex.baseline.error_type) == (Stage.BUILD, "TypeError")
        assert f'dtype="{dtype}"' in ex.baseline.message and 'dtype="float32"' in ex.baseline.message

    @pytest.mark.parametrize("axis", [-1, -3])
    def test_negative_axis_training_cannot_build(self, axis: int) -> None:
        """topi.nn.batch_norm calls ``reduce_axes.remove(axis)`` with the negative axis."""
        ex = execute(make_case(axis=axis, training=True), identity)
        assert ex.baseline == Failure(Stage.BUILD, "ValueError", "list.remove(x): x not in list")

    def test_negative_axis_inference_builds(self) -> None:
        case = make_case(axis=-3)
        assert same_bits(
            outputs(execute(case, identity).baseline),
            outputs(execute(make_case(axis=1), identity).baseline),
        )

    def test_nhwc_data_with_oihw_kernel_builds(self) -> None:
        ex = execute(make_case(data_layout="NHWC", kernel_layout="OIHW"), identity)
        assert outputs(ex.baseline).shapes == ((1, 3, 3, 3),)

    def test_folded_weights_overflow_to_nan(self) -> None:
        """The overflow class: W * s = 1e26 is fine, x * (W * s) = 1e39 is not (inf - inf)."""
        ex = execute(OVERFLOW, UPSTREAM)
        assert np.isfinite(outputs(ex.baseline).values[0]).all()
        assert np.isnan(outputs(ex.folded).values[0]).all()

    def test_upstream_keeps_batch_norm_for_the_statistics(self) -> None:
        mod = build_module(make_case(topology=Topology.BN_STATS))
        after = UPSTREAM()(mod)
        assert count_batch_norms(after) == 1  # out[0] folded, out[1:] still need it
