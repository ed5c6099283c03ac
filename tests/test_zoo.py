"""The model zoo: every network builds as a valid ONNX model in float32 and float16, TVM's
frontend imports it with one batch_norm per BatchNormalization node, the values are
seeded and keep activations of order one, and the float64 reference agrees with TVM."""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
import tvm
from onnx import TensorProto, numpy_helper
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

from fuzz.backends.tvm.execute import count_batch_norms
from fuzz.evaluation.zoo import MIN_SIZE, MODELS, OPSET, as_float64, build_model, conv_bn_pairs, reference

TINY = MIN_SIZE
ELEMENT = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}


@functools.cache
def _tiny(name: str, dtype: str = "float32") -> onnx.ModelProto:
    """One build per model and dtype for the whole file (ResNet-50 takes seconds)."""
    return build_model(name, TINY, dtype)


def _batch_norm_nodes(model: onnx.ModelProto) -> int:
    return sum(node.op_type == "BatchNormalization" for node in model.graph.node)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", list(MODELS))
def test_every_model_builds_and_passes_the_checker(name: str, dtype: str) -> None:
    model = _tiny(name, dtype)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == OPSET >= 15  # TVM's BatchNormalization is _impl_v15
    graph = model.graph
    assert graph.value_info, "shape inference wrote the intermediate types, as an exporter does"
    infos = [*graph.input, *graph.output, *graph.value_info]
    assert {info.type.tensor_type.elem_type for info in infos} == {ELEMENT[dtype]}
    assert {init.data_type for init in graph.initializer} == {ELEMENT[dtype]}
    ops = {node.op_type for node in graph.node}
    assert {"Conv", "BatchNormalization", "GlobalAveragePool", "Flatten", "Gemm"} <= ops
    convs_before_bn = {pair.conv for pair in conv_bn_pairs(model)}
    assert all(len(node.input) == 2 for node in graph.node if node.name in convs_before_bn)
    assert len(convs_before_bn) == _batch_norm_nodes(model)


@pytest.mark.slow
def test_the_topologies_are_the_published_ones() -> None:
    counts = {name: _batch_norm_nodes(_tiny(name)) for name in MODELS}
    # torchvision's batch norm counts
    assert counts == {
        "resnet18": 20,
        "resnet50": 53,
        "mobilenet_v2": 52,
        "efficientnet_b0": 49,
        "resnext50_32x4d": 53,
    }
    groups = {name: {pair.group for pair in conv_bn_pairs(_tiny(name))} for name in MODELS}
    assert groups["resnet50"] == {1} and groups["resnext50_32x4d"] == {1, 32}
    mobilenet = conv_bn_pairs(_tiny("mobilenet_v2"))
    depthwise = [p for p in mobilenet if p.group > 1]
    assert len(depthwise) == 17 and all(p.group == p.input_shape[1] == p.weight.shape[0] for p in depthwise)
    efficientnet = _tiny("efficientnet_b0").graph
    with_bias = [node for node in efficientnet.node if node.op_type == "Conv" and len(node.input) == 3]
    assert len(with_bias) == 32  # squeeze-and-excite: two 1x1 convs with bias in each of 16 blocks
    assert {"Sigmoid", "Mul", "Add"} <= {node.op_type for node in efficientnet.node}


def test_nodes_and_initializers_are_named_as_the_exporter_names_them() -> None:
    graph = _tiny("resnet18").graph
    names = [node.name for node in graph.node]
    assert names[:4] == ["/conv1/Conv", "/bn1/BatchNormalization", "/relu/Relu", "/maxpool/MaxPool"]
    assert "/layer2/layer2.0/downsample/downsample.0/Conv" in names
    assert {"/layer1/layer1.0/relu/Relu", "/layer1/layer1.0/relu_1/Relu", "/layer1/layer1.0/Add"} <= set(
        names
    )
    inits = {init.name for init in graph.initializer}
    assert {"conv1.weight", "bn1.running_mean", "bn1.running_var", "fc.weight", "fc.bias"} <= inits


def test_values_are_seeded_and_realistic() -> None:
    model = build_model("mobilenet_v2", TINY, seed=3)
    again = build_model("mobilenet_v2", TINY, seed=3)
    other = build_model("mobilenet_v2", TINY, seed=4)
    assert model.SerializeToString() == again.SerializeToString()
    assert model.SerializeToString() != other.SerializeToString()
    for pair in conv_bn_pairs(model):
        assert ((pair.gamma >= 0.2) & (pair.gamma <= 2.0)).all()
        assert (pair.var >= 0).all() and np.isfinite(pair.var).all() and pair.epsilon == np.float32(1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_activations_stay_of_order_one_in_float16(name: str) -> None:
    """Calibrated statistics: no overflow however deep the network."""
    model = _tiny(name, "float16")
    image = np.random.default_rng(0).standard_normal((1, 3, TINY, TINY)).astype(np.float16)
    out = reference(model, image)
    assert out.shape == (1, 1000) and out.dtype == np.float64
    assert np.isfinite(out).all() and 0.1 < np.abs(out).max() < 1000


def test_as_float64_widens_exactly() -> None:
    model = _tiny("resnet18", "float16")
    wide = as_float64(model)
    onnx.checker.check_model(wide)
    for narrow, widened in zip(model.graph.initializer, wide.graph.initializer, strict=True):
        values = numpy_helper.to_array(widened)
        assert values.dtype == np.float64
        assert np.array_equal(values, numpy_helper.to_array(narrow).astype(np.float64))
    infos = [*wide.graph.input, *wide.graph.output, *wide.graph.value_info]
    assert {info.type.tensor_type.elem_type for info in infos} == {TensorProto.DOUBLE}
    assert model.graph.initializer[0].data_type == TensorProto.FLOAT16  # the original is untouched


@pytest.mark.parametrize("name", list(MODELS))
def test_from_onnx_imports_one_batch_norm_per_node(name: str) -> None:
    model = _tiny(name)
    mod = from_onnx(model)
    assert count_batch_norms(mod) == _batch_norm_nodes(model)


def test_the_float64_reference_agrees_with_tvm_unfolded() -> None:
    model = _tiny("resnet18")
    image = np.random.default_rng(0).standard_normal((1, 3, TINY, TINY)).astype(np.float32)
    with tvm.transform.PassContext(opt_level=3):
        exe = relax.build(relax.pipeline.zero_pipeline()(from_onnx(model)), target="llvm")
    out = relax.VirtualMachine(exe, tvm.cpu())["main"](tvm.runtime.tensor(image)).numpy()
    ref = reference(model, image)
    error = np.abs(out - ref).max() / np.abs(ref).max()
    assert 0 < error < 1e-4  # float32 through 20 conv layers, not bit-equal to float64


def test_build_model_names_what_it_expected() -> None:
    with pytest.raises(ValueError, match=r"unknown model 'resnet19'; expected one of resnet18, resnet50"):
        build_model("resnet19")
    with pytest.raises(ValueError, match=r"input size 16 is too small; expected at least 32"):
        build_model("resnet18", 16)
    with pytest.raises(ValueError, match=r"unknown dtype 'bfloat16'; expected one of float32, float16"):
        build_model("resnet18", 32, "bfloat16")
