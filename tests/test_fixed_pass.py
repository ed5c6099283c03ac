"""Our FoldBatchnormToConv2D (fuzz/backends/tvm/fold_batchnorm.py): what it folds, what it leaves
alone, and that its output is correct, finite where it must be, and usable downstream.

Each defect class of the upstream pass has a case here that fails on ``upstream``
and passes on ``fixed`` (``test_fixes_the_upstream_defect``); ``corpus/`` holds the
same classes as minimal entries found by the fuzzer.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tvm
from cases import PUBLIC_NAN_REPORT, make_case
from tvm import relax

from fuzz.backends.tvm.build import build_module, runtime_inputs
from fuzz.backends.tvm.compat import assert_well_formed, constant_value, structural_equal
from fuzz.backends.tvm.execute import compile_and_run, count_batch_norms
from fuzz.backends.tvm.fold_batchnorm import FoldBatchnormToConv2D
from fuzz.backends.tvm.passes import resolve_pass
from fuzz.engine.check import check
from fuzz.model.case import Case, Epilogue, Topology
from fuzz.model.form import Form, Importer
from fuzz.oracle.execution import Outputs
from fuzz.oracle.reference import reference

FIXED = resolve_pass("fixed")
UPSTREAM = resolve_pass("upstream")


def ops(mod: Any) -> list[str]:
    names: list[str] = []

    def visit(expr: Any) -> None:
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            names.append(str(expr.op.name))

    relax.analysis.post_order_visit(mod["main"], visit)
    return names


def constants(mod: Any) -> list[np.ndarray[Any, Any]]:
    found: list[np.ndarray[Any, Any]] = []

    def visit(expr: Any) -> None:
        if isinstance(expr, relax.Call):
            for arg in expr.args:
                if type(arg).__name__ in ("GenericConst", "Constant"):
                    found.append(constant_value(arg))

    relax.analysis.post_order_visit(mod["main"], visit)
    return found


def test_the_module_depends_only_on_tvm_and_numpy() -> None:
    source = Path(__import__("fuzz.backends.tvm.fold_batchnorm", fromlist=["_"]).__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "collections", "dataclasses", "math", "typing", "numpy", "tvm"}


def test_called_like_upstream() -> None:
    made = FoldBatchnormToConv2D()
    assert isinstance(made, tvm.ir.transform.Pass)
    assert count_batch_norms(made(build_module(make_case()))) == 0


ONNX = Form(Importer.ONNX)
#: 1e-5 as ONNX stores it (a float32)
EPS32 = float(np.float32(1e-5))

LEAVE_ALONE = {
    "training": make_case(training=True),
    "axis-not-channel": make_case(axis=2, height=3, width=3),
    "conv-shared": make_case(topology=Topology.CONV_SHARED),
    "statistics-used": make_case(topology=Topology.BN_STATS),
    "bn-only": make_case(topology=Topology.BN_ONLY),
    "weight-parameter": make_case(parameters=("weight",)),
    "gamma-parameter": make_case(parameters=("gamma",)),
    "zero-variance-no-epsilon": make_case(epsilon=0.0, values={"var": 0.0}),
    "bias-out-of-range": make_case(values={"mean": 3e38, "gamma": 2.0, "var": 1.0}),
    "statistics-consumed": make_case(topology=Topology.STATS_CONSUMED),
    "bias-parameter": make_case(bias=True, parameters=("bias",)),
    "onnx-training": make_case(form=ONNX, epsilon=EPS32, training=True),
    "onnx-conv-shared": make_case(form=ONNX, epsilon=EPS32, topology=Topology.CONV_SHARED, bias=True),
}


@pytest.mark.parametrize("name", sorted(LEAVE_ALONE))
def test_leaves_unfoldable_graphs_unchanged(name: str) -> None:
    mod = build_module(LEAVE_ALONE[name])
    assert structural_equal(FIXED()(mod), mod)


FOLD = {
    "default": make_case(),
    "negative-axis": make_case(axis=-3),
    "nhwc": make_case(data_layout="NHWC", kernel_layout="HWIO"),
    "nhwc-oihw": make_case(data_layout="NHWC"),
    "iohw": make_case(kernel_layout="IOHW"),
    "ohwi": make_case(kernel_layout="OHWI"),
    "hwio": make_case(kernel_layout="HWIO"),
    "depthwise": make_case(c_in=4, c_out=4, groups=4),
    "grouped-iohw": make_case(c_in=4, c_out=6, groups=2, kernel_layout="IOHW"),
    "float16": make_case(dtype="float16"),
    "bfloat16": make_case(dtype="bfloat16"),
    "float64": make_case(dtype="float64"),
    "out-dtype": make_case(dtype="float16", out_dtype="float32"),
    "no-scale": make_case(scale=False, values={"gamma": 7.0}),
    "no-center": make_case(center=False, values={"beta": 7.0}),
    "chain": make_case(topology=Topology.CHAIN, c_in=3),
    "strided-padded-dilated": make_case(
        strides=(2, 1), padding=(1, 0, 2, 1), dilation=(1, 2), height=7, width=7
    ),
    # the shapes importers write
    "dead-statistics": make_case(form=Form(dead_statistics=True)),
    "no-dataflow": make_case(form=Form(dataflow=False, dead_statistics=True)),
    "two-functions": make_case(form=Form(functions=2)),
    "two-functions-chain": make_case(
        topology=Topology.CHAIN, c_in=3, form=Form(functions=2, dead_statistics=True)
    ),
    "conv-bias": make_case(bias=True, values={"bias": [0.5, -4.0, 1e3]}),
    "conv-bias-nhwc": make_case(bias=True, data_layout="NHWC", kernel_layout="HWIO"),
    "conv-bias-chain": make_case(bias=True, topology=Topology.CHAIN, c_in=3),
    "relu": make_case(epilogue=Epilogue.RELU),
    "clip": make_case(epilogue=Epilogue.CLIP, values={"beta": 5.0}),
    "residual-add": make_case(epilogue=Epilogue.ADD),
    "onnx": make_case(form=ONNX, epsilon=EPS32),
    "onnx-bias-relu": make_case(form=ONNX, epsilon=EPS32, bias=True, epilogue=Epilogue.RELU),
    "onnx-chain-clip": make_case(
        form=ONNX, epsilon=EPS32, topology=Topology.CHAIN, c_in=3, epilogue=Epilogue.CLIP
    ),
    "onnx-float64-add": make_case(form=ONNX, epsilon=EPS32, dtype="float64", epilogue=Epilogue.ADD),
    "onnx-grouped": make_case(form=ONNX, epsilon=EPS32, c_in=4, c_out=4, groups=2, bias=True),
}


@pytest.mark.parametrize("name", sorted(FOLD))
def test_folds_and_stays_within_the_bound(name: str) -> None:
    checked = check(FOLD[name], FIXED)
    ex = checked.execution
    assert ex.fired and ex.changed and ex.idempotent
    assert ex.op_counts is not None and ex.op_counts[1]["batch_norm"] == 0
    assert checked.verdict.primary is None, checked.verdict.primary  # missed-fold judged too
    assert isinstance(ex.folded, Outputs)


def test_removes_what_the_fold_leaves_unused_and_nothing_else() -> None:
    mod = folded(make_case(bias=True, form=Form(dead_statistics=True)))
    assert ops(mod) == ["relax.nn.conv2d", "relax.multiply", "relax.add"]
    names = [str(b.var.name) for block in mod["main"].body.blocks for b in block.bindings]
    assert "mean0" not in names and "var0" not in names and "bias0_r" not in names


def test_a_dead_binding_it_did_not_make_is_kept() -> None:
    training = build_module(make_case(training=True, form=Form(dead_statistics=True)))
    assert structural_equal(FIXED()(training), training)


@pytest.mark.parametrize("kernel_layout", ["OHWI", "HWIO"])
def test_folds_after_convert_layout(kernel_layout: str) -> None:
    """The NHWC path TVM users take: the ONNX frontend, ConvertLayout, then the fold;
    ConvertLayout leaves the weight as a permute_dims of a constant."""
    case = make_case(form=ONNX, epsilon=EPS32, bias=True, epilogue=Epilogue.RELU, values={"gamma": 1.75})
    mod = build_module(case)
    nhwc = relax.transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", kernel_layout]})(mod)
    after = FIXED()(nhwc)
    assert count_batch_norms(after) == 0 and "relax.permute_dims" in ops(nhwc)
    assert ops(after).count("relax.permute_dims") == 2  # the data's, in and out; the weight's is gone
    inputs = [a for a in runtime_inputs(case)]
    base, folded_out = (compile_and_run(m, inputs)[0] for m in (mod, after))
    assert isinstance(base, Outputs) and isinstance(folded_out, Outputs)
    ref = reference(case).outputs[0]
    assert np.all(np.abs(folded_out.values[0] - ref.value) <= ref.bound + np.abs(base.values[0] - ref.value))


# One case per upstream defect class (the README lists them): upstream has a finding,
# ours none.
UPSTREAM_DEFECTS = {
    "training": make_case(training=True),
    "axis": make_case(axis=2, height=3, width=3),
    "scale": make_case(scale=False, values={"gamma": 7.0}),
    "center": make_case(center=False, values={"beta": 7.0}),
    "nhwc": make_case(data_layout="NHWC"),  # OIHW kernel: upstream reshapes along axis 1
    "iohw": make_case(kernel_layout="IOHW"),
    "float16": make_case(dtype="float16"),
    "bfloat16": make_case(dtype="bfloat16"),
    "float64": make_case(dtype="float64"),
    "out-dtype": make_case(dtype="float16", out_dtype="float32"),
    "overflow": PUBLIC_NAN_REPORT,
}


@pytest.mark.parametrize("name", sorted(UPSTREAM_DEFECTS))
def test_fixes_the_upstream_defect(name: str) -> None:
    case = UPSTREAM_DEFECTS[name]
    assert check(case, UPSTREAM).verdict.primary is not None
    assert check(case, FIXED).verdict.primary is None


def folded(case: Case, **options: Any) -> Any:
    return FoldBatchnormToConv2D(**options)(build_module(case))


def test_scale_at_most_one_goes_into_the_weights_alone() -> None:
    mod = folded(make_case(values={"gamma": 0.5, "var": 1.0}))
    assert ops(mod) == ["relax.nn.conv2d", "relax.add"]


def test_scale_above_one_is_applied_after_the_conv() -> None:
    case = make_case(c_out=1, values={"gamma": 1e13, "var": 1.0, "weight": 0.5})
    mod = folded(case)
    assert ops(mod) == ["relax.nn.conv2d", "relax.multiply", "relax.add"]
    weight, remainder, _bias = constants(mod)
    assert np.all(weight == 0.5)  # unchanged: the whole scale is the remainder
    assert remainder.ravel()[0] == np.float32(1e13 / np.sqrt(1 + np.float32(1e-5)))


def test_the_opt_in_folds_everything_into_the_weights() -> None:
    case = make_case(c_out=1, values={"gamma": 8.0, "var": 1.0})
    assert ops(folded(case, assume_bounded_activations=True)) == ["relax.nn.conv2d", "relax.add"]


def test_small_scales_never_push_weights_below_the_normal_range() -> None:
    # s = 2**-100 would make 2**-30 * s = 2**-130 subnormal in float32.
    case = make_case(c_out=1, epsilon=0.0, values={"weight": 2.0**-30, "gamma": 2.0**-100, "var": 1.0})
    weight, remainder, _bias = constants(folded(case))
    assert np.all(np.abs(weight) >= np.finfo(np.float32).tiny)
    assert np.all(weight == 2.0**-30 * 2.0**-96)  # scaled by the power of two 2**-96 exactly
    assert remainder.ravel()[0] == 2.0**-4
    assert check(case, FIXED).verdict.primary is None


def test_huge_weights_with_a_scale_above_one() -> None:
    # Found by the nightly property run: float64 weights near 1e103 made
    # min_normal / weight underflow to 0 and log2(0) crashed the pass.
    case = make_case(
        dtype="float64", c_in=1, c_out=1, height=1, width=1, kh=1, kw=1,
        values={"x": 1.0, "weight": 8.958978968711217e102, "gamma": 1.0, "beta": 1.0, "mean": 1.0, "var": 0.0},
    )  # fmt: skip
    checked = check(case, FIXED)
    assert checked.verdict.primary is None, checked.verdict.primary
    assert checked.execution.fired


def test_a_subnormal_scale_is_not_rounded_twice() -> None:
    # Found by the nightly property run: gamma = 5e-324 makes s = gamma / sqrt(1 + eps)
    # subnormal in float64; computed as a float64 it lost the sqrt factor, and
    # mean * s (mean = 9e102) was off by 5e-6 relative, far outside the float64 bound.
    case = make_case(
        out_dtype="float64", c_in=1, c_out=2, height=1, width=1, kh=1, kw=1, center=False,
        values={"x": 1.0, "weight": 1.0, "gamma": 5e-324, "beta": 1.0, "mean": 8.958978968711217e102, "var": 1.0},
    )  # fmt: skip
    checked = check(case, FIXED)
    assert checked.verdict.primary is None, checked.verdict.primary
    assert checked.execution.fired


def test_weights_in_another_dtype_are_scaled_exactly() -> None:
    # float16 weights, float32 conv: W * s would round in float16, so s_w is a power of two.
    case = make_case(dtype="float16", out_dtype="float32", c_out=1, values={"gamma": 0.3, "var": 1.0})
    original = build_module(case)
    (w0,) = [c for c in constants(original) if c.ndim == 4]
    weight, remainder, _bias = constants(folded(case))
    assert weight.dtype == np.float16 and remainder.dtype == np.float32
    nonzero = w0 != 0
    ratio = weight[nonzero].astype(np.float64) / w0[nonzero].astype(np.float64)
    assert nonzero.any() and np.all(ratio == 0.25)  # 2**-2 <= 0.3 < 2**-1


@pytest.mark.parametrize("name", ["default", "nhwc", "float16", "depthwise", "chain"])
def test_output_feeds_later_passes_and_both_build_pipelines(name: str) -> None:
    mod = folded(FOLD[name], assume_bounded_activations=False)
    assert_well_formed(mod)
    mod = relax.transform.FoldConstant()(mod)
    mod = relax.transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", "OHWI"]})(mod)
    assert_well_formed(mod)
    with tvm.transform.PassContext(opt_level=3):
        relax.build(relax.pipeline.zero_pipeline()(mod), target="llvm")
        relax.build(mod, target="llvm")


def test_idempotent_on_a_folded_module() -> None:
    mod = folded(make_case(values={"gamma": 4.0}))
    assert structural_equal(FIXED()(mod), mod)


def test_folds_the_constant_block_of_a_chain_with_a_parameter_bias() -> None:
    # the first conv's bias is a function parameter, the second conv has none: the second
    # batch_norm is folded, the first stays, and the oracle judges numbers (no must-not-fold)
    case = make_case(topology=Topology.CHAIN, c_in=3, bias=True, parameters=("bias",))
    first, second = case.blocks
    case = replace(case, blocks=(first, replace(second, bias=None)))
    checked = check(case, FIXED)
    ex = checked.execution
    assert ex.changed and ex.op_counts is not None
    assert (ex.op_counts[0]["batch_norm"], ex.op_counts[1]["batch_norm"]) == (2, 1)
    assert checked.verdict.primary is None, checked.verdict.primary
    assert isinstance(ex.folded, Outputs)
