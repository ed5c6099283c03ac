"""The materialised Relax module says exactly what the case says.

Most tests only construct modules (type inference, no compilation), so they are
fast; one compiles each data x kernel layout pair to pin TVM's conv2d weight
conventions against a NumPy convolution.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from cases import conv_output_shape, make_case
from tvm import relax

from fuzz.backends.tvm.build import ModuleError, build_module, parameter_names, runtime_inputs
from fuzz.backends.tvm.compat import Constant, constant_value, structural_equal, type_of, var_name
from fuzz.backends.tvm.execute import compile_and_run, count_batch_norms
from fuzz.model.case import KERNEL_LAYOUTS, Case, Topology, kernel_to_oihw
from fuzz.model.tensor import DTYPES, OPERANDS, Tensor, np_dtype
from fuzz.oracle.execution import Outputs


def calls(mod: Any, op_name: str) -> list[Any]:
    """The calls to ``op_name`` in ``main``, in post order."""
    found: list[Any] = []

    def visit(expr: Any) -> None:
        if isinstance(expr, relax.Call) and getattr(expr.op, "name", None) == op_name:
            found.append(expr)

    relax.analysis.post_order_visit(mod["main"], visit)
    return found


def test_parameters_follow_blocks_then_operand_order() -> None:
    case = make_case(topology=Topology.CHAIN, parameters=("var", "weight"))
    assert parameter_names(case) == ["x", "weight0", "var0", "weight1", "var1"]
    params = build_module(case)["main"].params
    assert [var_name(p) for p in params] == parameter_names(case)


def test_bn_only_has_no_weight_parameter() -> None:
    case = make_case(topology=Topology.BN_ONLY, parameters=OPERANDS)
    assert parameter_names(case) == ["x", "gamma0", "beta0", "mean0", "var0"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_runtime_inputs_match_parameter_types(dtype: str) -> None:
    case = make_case(dtype=dtype, parameters=OPERANDS)
    inputs = runtime_inputs(case)
    params = build_module(case)["main"].params
    assert len(inputs) == len(params)
    for array, param in zip(inputs, params, strict=True):
        ty = type_of(param)
        assert array.dtype == np_dtype(dtype)
        assert str(ty.dtype) == dtype
        assert tuple(int(d) for d in ty.shape) == array.shape
    assert np.array_equal(inputs[0].astype(np.float64), case.data.float64())
    if dtype == "bfloat16":
        assert inputs[0].dtype == np.dtype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("dtype", DTYPES)
def test_bound_operands_are_exact_constants(dtype: str) -> None:
    """No silent dtype change: ``relax.const`` alone would turn float64 into float32."""
    case = make_case(dtype=dtype, values={"gamma": [0.1, -3.0, 2.0**-20]})
    (conv,) = calls(build_module(case), "relax.nn.conv2d")
    (bn,) = calls(build_module(case), "relax.nn.batch_norm")
    block = case.blocks[0]
    assert block.weight is not None
    for expr, tensor in [
        (conv.args[1], block.weight),
        *zip(bn.args[1:], (block.gamma, block.beta, block.mean, block.var), strict=True),
    ]:
        assert isinstance(expr, Constant)
        value = constant_value(expr)
        assert value.dtype == np_dtype(dtype)
        assert value.tobytes() == tensor.numpy().tobytes()


def test_attributes_are_copied_verbatim() -> None:
    case = make_case(
        c_in=4,
        c_out=4,
        groups=2,
        strides=(2, 1),
        padding=(1, 0, 2, 1),
        dilation=(1, 2),
        data_layout="NHWC",
        kernel_layout="OHWI",
        out_dtype="float64",
        axis=-1,
        epsilon=0.25,
        center=False,
        scale=False,
        momentum=0.5,
        training=True,
        height=6,
        width=7,
    )
    mod = build_module(case)
    (conv,) = calls(mod, "relax.nn.conv2d")
    (bn,) = calls(mod, "relax.nn.batch_norm")
    c = conv.attrs
    assert [int(v) for v in c.strides] == [2, 1]
    assert [int(v) for v in c.padding] == [1, 0, 2, 1]
    assert [int(v) for v in c.dilation] == [1, 2]
    assert int(c.groups) == 2
    assert (c.data_layout, c.kernel_layout, c.out_layout) == ("NHWC", "OHWI", "NHWC")
    assert str(c.out_dtype) == "float64"
    b = bn.attrs
    assert int(b.axis) == -1  # kept negative, not normalised
    assert float(b.epsilon) == 0.25 and float(b.momentum) == 0.5
    assert (bool(b.center), bool(b.scale), bool(b.training)) == (False, False, True)


def test_unset_out_dtype_stays_unset() -> None:
    (conv,) = calls(build_module(make_case(dtype="float16")), "relax.nn.conv2d")
    assert not conv.attrs.out_dtype  # None; TVM 0.25 says unset with an empty (falsy) dtype


def test_building_is_deterministic() -> None:
    case = make_case(topology=Topology.CHAIN, parameters=("gamma",))
    assert structural_equal(build_module(case), build_module(case))


@pytest.mark.parametrize(
    ("topology", "n_conv", "n_bn", "n_outputs"),
    [
        (Topology.CONV_BN, 1, 1, 1),
        (Topology.CHAIN, 2, 2, 1),
        (Topology.CONV_SHARED, 1, 1, 2),
        (Topology.BN_STATS, 1, 1, 3),
        (Topology.BN_ONLY, 0, 1, 1),
    ],
)
def test_topology_shapes(topology: Topology, n_conv: int, n_bn: int, n_outputs: int) -> None:
    mod = build_module(make_case(topology=topology))
    assert len(calls(mod, "relax.nn.conv2d")) == n_conv
    assert count_batch_norms(mod) == n_bn
    assert len(calls(mod, "relax.nn.relu")) == (1 if topology is Topology.CHAIN else 0)
    ret = type_of(mod["main"].body.body)
    assert len(ret.fields) == n_outputs if n_outputs > 1 else not hasattr(ret, "fields")


def test_shared_conv_is_one_binding_with_two_consumers() -> None:
    mod = build_module(make_case(topology=Topology.CONV_SHARED))
    (conv,) = calls(mod, "relax.nn.conv2d")
    bindings = mod["main"].body.blocks[0].bindings
    conv_var = next(b.var for b in bindings if b.value.same_as(conv))
    (bn,) = calls(mod, "relax.nn.batch_norm")
    assert bn.args[0].same_as(conv_var)
    output = next(b.value for b in bindings if var_name(b.var) == var_name(mod["main"].body.body))
    assert output.fields[1].same_as(conv_var)


def test_upstream_pass_matches_the_default_case() -> None:
    """The frontend-style bindings are what FoldBatchnormToConv2D pattern-matches."""
    mod = build_module(make_case())
    after = relax.transform.FoldBatchnormToConv2D()(mod)
    assert count_batch_norms(mod) == 1 and count_batch_norms(after) == 0


@pytest.mark.parametrize("name", OPERANDS)
def test_upstream_pass_skips_non_constant_operands(name: str) -> None:
    mod = build_module(make_case(parameters=(name,), bias=name == "bias"))
    after = relax.transform.FoldBatchnormToConv2D()(mod)
    assert structural_equal(mod, after)


@pytest.mark.parametrize("kernel_layout", KERNEL_LAYOUTS)
@pytest.mark.parametrize(("c_in", "c_out", "groups"), [(2, 3, 1), (2, 6, 2), (6, 4, 2), (4, 4, 4)])
def test_tvm_accepts_every_kernel_shape(kernel_layout: str, c_in: int, c_out: int, groups: int) -> None:
    """``I = c_in // groups`` in every layout, IOHW included; output shape as computed."""
    case = make_case(c_in=c_in, c_out=c_out, groups=groups, kernel_layout=kernel_layout)
    (conv,) = calls(build_module(case), "relax.nn.conv2d")
    block = case.blocks[0]
    assert block.conv is not None
    expected = conv_output_shape(block.conv, case.data.shape, c_out, 3, 3)
    assert tuple(int(d) for d in type_of(conv).shape) == expected


def with_weight_shape(case: Case, shape: tuple[int, ...]) -> Case:
    block = case.blocks[0]
    weight = Tensor(case.dtype, shape, (0.5,) * int(np.prod(shape)))
    return replace(case, blocks=(replace(block, weight=weight),))


def test_transposed_conv_grouping_is_rejected_for_iohw() -> None:
    """conv2d_transpose's IOHW groups the O axis: (c_in, c_out // groups). conv2d's doesn't."""
    case = make_case(c_in=6, c_out=4, groups=2, kernel_layout="IOHW")
    assert case.blocks[0].weight is not None and case.blocks[0].weight.shape == (3, 4, 3, 3)
    with pytest.raises(ModuleError, match="channel size of the data"):
        build_module(with_weight_shape(case, (6, 2, 3, 3)))


def test_batch_norm_dtype_must_follow_out_dtype() -> None:
    case = make_case(out_dtype="float64")
    bad = make_case()  # batch_norm operands in float32, conv output in float64
    case = replace(case, blocks=(replace(case.blocks[0], gamma=bad.blocks[0].gamma),))
    with pytest.raises(ModuleError, match=r"requires all the input tensors to have the same dtype"):
        build_module(case)


def conv_nchw_oihw(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any], groups: int) -> np.ndarray[Any, Any]:
    """Stride 1, no padding, float64."""
    n, _, h, wd = x.shape
    o, i, kh, kw = w.shape
    out = np.zeros((n, o, h - kh + 1, wd - kw + 1))
    for oc in range(o):
        g = oc // (o // groups)
        for ic in range(i):
            for a in range(kh):
                for b in range(kw):
                    out[:, oc] += x[:, g * i + ic, a : a + h - kh + 1, b : b + wd - kw + 1] * w[oc, ic, a, b]
    return out


@pytest.mark.parametrize("data_layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("kernel_layout", KERNEL_LAYOUTS)
def test_conv_semantics_match_kernel_to_oihw(data_layout: str, kernel_layout: str) -> None:
    """Compiled: TVM's grouped conv2d equals NumPy's on the OIHW-transposed weight."""
    case = make_case(
        topology=Topology.CONV_SHARED,
        dtype="float64",
        c_in=6,
        c_out=4,
        groups=2,
        data_layout=data_layout,
        kernel_layout=kernel_layout,
    )
    outputs, _ = compile_and_run(build_module(case), runtime_inputs(case))
    assert isinstance(outputs, Outputs), outputs
    conv, x = outputs.values[1], case.data.float64()
    if data_layout == "NHWC":
        conv, x = conv.transpose(0, 3, 1, 2), x.transpose(0, 3, 1, 2)
    block = case.blocks[0]
    assert block.conv is not None and block.weight is not None
    expected = conv_nchw_oihw(x, kernel_to_oihw(block.conv, block.weight.float64()), 2)
    np.testing.assert_allclose(conv, expected, rtol=1e-14, atol=0)


def test_identity_memo_is_per_object_and_bounded() -> None:
    from fuzz.backends.tvm.build import IdentityMemo

    memo: IdentityMemo[str] = IdentityMemo(2)
    a, b, c = [1.5], [1.5], [1.5]  # equal, distinct objects
    memo.put(a, "a")
    assert memo.get(a) == "a" and memo.get(b) is None
    memo.put(b, "b")
    memo.put(c, "c")  # evicts a, the least recently used
    assert (memo.get(a), memo.get(b), memo.get(c)) == (None, "b", "c")
