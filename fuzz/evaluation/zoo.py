"""The model zoo: whole ONNX networks with batch norms, built offline with ``onnx.helper``.

Each builder writes a ``ModelProto`` the way ``torch.onnx.export`` writes the
torchvision model when it keeps the batch norms (``training=TrainingMode.PRESERVE``; in
``TrainingMode.EVAL``, the default for a model in eval mode, the exporter fuses each
into its conv itself, pytorch/pytorch#49226):
``Conv`` without bias, then ``BatchNormalization`` (opset 17, the exporter's default,
whose BatchNormalization is TVM's ``_impl_v15``), then ``Relu``, ``Clip(0, 6)`` or
Swish (``x * Sigmoid(x)``), residual ``Add``, ``GlobalAveragePool``, ``Flatten`` and a
``Gemm`` classifier; nodes and initializers are named as the exporter names them
(``/layer1/layer1.0/conv1/Conv``, ``layer1.0.bn1.running_var``), and the value_info
comes from ONNX shape inference, as in an exported file.

Abstractions:

- :data:`MODELS`: the networks, by name, each at its published widths and depths (see
  each builder for its topology); only the input resolution is left to the caller;
- :func:`build_model`: one network as a checked ``ModelProto`` at an input resolution,
  in float32 or float16 (every initializer, input, output and value_info);
- :func:`as_float64`: the same model with every initializer and type widened to
  float64 (exactly: from the values the model's own dtype holds), for
  ``onnx.reference.ReferenceEvaluator``;
- :class:`ConvBn`: one ``Conv`` -> ``BatchNormalization`` pair of a model, with the
  values and attributes a single-layer fold check needs (:func:`conv_bn_pairs`).

Values: He-initialised weights (normal, deviation ``sqrt(2 / fan_in)``) times a
per-output-channel gain whose square is log-uniform in [1e-3, 2], so conv channels
range from nearly dead to lively as in a trained network; gamma uniform in [0.2, 2],
beta normal with deviation 0.5; the running mean and variance are those a trained
network has: the statistics of the conv's output channel, measured on a seeded
calibration batch of :data:`CALIBRATION_BATCH` standard normal images as the model is
built (in float64, by the ONNX reference interpreter, node by node). So every batch
norm normalises what it sees and activations stay of order one at any depth (drawn
statistics, variance uniform in [1e-3, 4], on plain He weights grow them about 1.5x
per batch norm: ResNet-50's logits reach 1e10, and float16 overflows half way). The
measured variances run from 0 (a channel that the ReLU before it zeroes on every
image) to about 80, and ``gamma / sqrt(var + eps)`` up to about 600. Everything is
seeded with ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

__all__ = [
    "CALIBRATION_BATCH",
    "DTYPES",
    "MIN_SIZE",
    "MODELS",
    "OPSET",
    "ConvBn",
    "as_float64",
    "build_model",
    "conv_bn_pairs",
    "reference",
]

#: The exporter's default opset; TVM's BatchNormalization converter needs 15 or newer.
OPSET = 17
#: Model dtypes and their ONNX element types.
DTYPES: dict[str, int] = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}
#: Images measured to set the running statistics of every batch norm.
CALIBRATION_BATCH = 4
#: The smallest input resolution every network accepts (five stride-2 stages).
MIN_SIZE = 32
_CLASSES = 1000
_INPUT, _OUTPUT = "input", "output"


class _Builder:
    """Appends exporter-style nodes and initializers, evaluating each node on the
    calibration batch as it goes (float64), so batch norms can measure their input."""

    def __init__(self, name: str, size: int, seed: int) -> None:
        self.name = name
        self.size = size
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, np.ndarray[Any, Any]] = {}
        self.values: dict[str, np.ndarray[Any, Any]] = {
            _INPUT: self.rng.standard_normal((CALIBRATION_BATCH, 3, size, size))
        }
        self.clip_bounds: tuple[str, str] | None = None
        self.calls: Counter[tuple[str, str]] = Counter()  # per (module path, op)

    def channels(self, x: str) -> int:
        return int(self.values[x].shape[1])

    def param(self, name: str, value: np.ndarray[Any, Any]) -> str:
        self.initializers[name] = value
        self.values[name] = value
        return name

    def node(self, op: str, scope: str, inputs: list[str], output: str | None = None, **attrs: Any) -> str:
        """Append ``op`` of module ``scope`` (dotted), named as the exporter names it; its
        output (named after the node unless given) is computed now, on the calibration batch."""
        shown: list[str] = []
        for part in scope.split(".") if scope else []:  # Sequential children read "features.0"
            shown.append(f"{shown[-1]}.{part}" if part.isdigit() and shown else part)
        path = "".join(f"/{part}" for part in shown)
        taken = self.calls[path, op]
        self.calls[path, op] += 1
        name = f"{path}_{taken}/{op}" if taken else f"{path}/{op}"  # a module called again: relu_1
        output = output or f"{name}_output_0"
        node = helper.make_node(op, inputs, [output], name=name, **attrs)
        self.nodes.append(node)
        (value,) = ReferenceEvaluator(node).run(None, {i: self.values[i] for i in inputs})
        self.values[output] = np.asarray(value)
        return output

    def conv(
        self, x: str, scope: str, c_out: int, k: int, stride: int = 1, groups: int = 1, bias: bool = False
    ) -> str:
        """A square ``k`` x ``k`` conv with "same" padding, He-initialised, scaled per
        output channel (see the module docstring); with ``bias`` (the squeeze-and-excite
        convs), a bias normal with deviation 0.1."""
        c_in = self.channels(x)
        fan_in = c_in // groups * k * k
        weight = self.rng.standard_normal((c_out, c_in // groups, k, k)) * math.sqrt(2.0 / fan_in)
        gain = np.sqrt(np.exp(self.rng.uniform(math.log(1e-3), math.log(2.0), c_out)))
        inputs = [x, self.param(f"{scope}.weight", weight * gain[:, None, None, None])]
        if bias:
            inputs.append(self.param(f"{scope}.bias", self.rng.normal(0.0, 0.1, c_out)))
        pad = k // 2
        return self.node(
            "Conv",
            scope,
            inputs,
            dilations=[1, 1],
            group=groups,
            kernel_shape=[k, k],
            pads=[pad] * 4,
            strides=[stride, stride],
        )

    def batch_norm(self, x: str, scope: str) -> str:
        """Inference BatchNormalization whose running statistics are those of ``x``."""
        measured = self.values[x]
        c = measured.shape[1]
        inputs = [
            x,
            self.param(f"{scope}.weight", self.rng.uniform(0.2, 2.0, c)),
            self.param(f"{scope}.bias", self.rng.normal(0.0, 0.5, c)),
            self.param(f"{scope}.running_mean", measured.mean(axis=(0, 2, 3))),
            self.param(f"{scope}.running_var", measured.var(axis=(0, 2, 3))),
        ]
        return self.node("BatchNormalization", scope, inputs, epsilon=1e-5, momentum=0.9)

    def conv_bn(
        self, x: str, conv: str, bn: str, c_out: int, k: int, stride: int = 1, groups: int = 1
    ) -> str:
        """Conv (module ``conv``, no bias) -> BatchNormalization (module ``bn``)."""
        return self.batch_norm(self.conv(x, conv, c_out, k, stride, groups), bn)

    def relu(self, x: str, scope: str) -> str:
        return self.node("Relu", scope, [x])

    def relu6(self, x: str, scope: str) -> str:
        """ReLU6 as the exporter writes it: ``Clip(x, 0, 6)``, the bounds shared initializers."""
        if self.clip_bounds is None:
            self.clip_bounds = (
                self.param("clip.min", np.array(0.0)),
                self.param("clip.max", np.array(6.0)),
            )
        return self.node("Clip", scope, [x, *self.clip_bounds])

    def swish(self, x: str, scope: str) -> str:
        """SiLU as the exporter writes it: ``x * Sigmoid(x)``."""
        return self.node("Mul", scope, [x, self.node("Sigmoid", scope, [x])])

    def add(self, a: str, b: str, scope: str) -> str:
        return self.node("Add", scope, [a, b])

    def max_pool(self, x: str, scope: str) -> str:
        return self.node(
            "MaxPool",
            scope,
            [x],
            ceil_mode=0,
            dilations=[1, 1],
            kernel_shape=[3, 3],
            pads=[1] * 4,
            strides=[2, 2],
        )

    def classifier(self, x: str, pool: str, linear: str) -> str:
        """GlobalAveragePool -> Flatten -> Gemm (a Linear layer, PyTorch's default init)."""
        flat = self.node("Flatten", "", [self.node("GlobalAveragePool", pool, [x])], axis=1)
        c = self.channels(x)
        bound = 1.0 / math.sqrt(c)
        weight = self.param(f"{linear}.weight", self.rng.uniform(-bound, bound, (_CLASSES, c)))
        bias = self.param(f"{linear}.bias", self.rng.uniform(-bound, bound, _CLASSES))
        return self.node("Gemm", linear, [flat, weight, bias], _OUTPUT, alpha=1.0, beta=1.0, transB=1)

    def model(self, dtype: str) -> onnx.ModelProto:
        """The graph in ``dtype`` (values rounded once from float64), shapes inferred,
        checked by ``onnx.checker``."""
        elem = DTYPES[dtype]
        graph = helper.make_graph(
            self.nodes,
            self.name,
            [helper.make_tensor_value_info(_INPUT, elem, [1, 3, self.size, self.size])],
            [helper.make_tensor_value_info(_OUTPUT, elem, [1, _CLASSES])],
            [numpy_helper.from_array(v.astype(dtype), name) for name, v in self.initializers.items()],
        )
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="bnfold-fuzz zoo"
        )
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        onnx.checker.check_model(model, full_check=True)
        return model


# ---------------------------------------------------------------------------
# The networks (torchvision's module names)


def _resnet_stem(b: _Builder) -> str:
    """7x7/2 conv (64) + BN + ReLU, then 3x3/2 max pool."""
    return b.max_pool(b.relu(b.conv_bn(_INPUT, "conv1", "bn1", 64, 7, 2), "relu"), "maxpool")


def _resnet(b: _Builder, depths: tuple[int, ...], bottleneck: bool, groups: int = 1, width: int = 64) -> str:
    """ResNet v1.5 (the stride on the 3x3 conv), torchvision's ``ResNet``: four stages of
    64, 128, 256, 512 planes; a block's 1x1 downsample conv + BN where its stride or
    width changes; ``groups`` and ``width`` (per group) make the bottleneck ResNeXt's."""
    x = _resnet_stem(b)
    expansion = 4 if bottleneck else 1
    for stage, (planes, depth) in enumerate(zip((64, 128, 256, 512), depths, strict=True)):
        for i in range(depth):
            m = f"layer{stage + 1}.{i}"
            stride = 2 if stage > 0 and i == 0 else 1
            c_out = planes * expansion
            if bottleneck:
                mid = planes * width // 64 * groups
                y = b.relu(b.conv_bn(x, f"{m}.conv1", f"{m}.bn1", mid, 1), f"{m}.relu")
                y = b.relu(b.conv_bn(y, f"{m}.conv2", f"{m}.bn2", mid, 3, stride, groups), f"{m}.relu")
                y = b.conv_bn(y, f"{m}.conv3", f"{m}.bn3", c_out, 1)
            else:
                y = b.relu(b.conv_bn(x, f"{m}.conv1", f"{m}.bn1", c_out, 3, stride), f"{m}.relu")
                y = b.conv_bn(y, f"{m}.conv2", f"{m}.bn2", c_out, 3)
            shortcut = x
            if stride != 1 or b.channels(x) != c_out:
                shortcut = b.conv_bn(x, f"{m}.downsample.0", f"{m}.downsample.1", c_out, 1, stride)
            x = b.relu(b.add(y, shortcut, m), f"{m}.relu")
    return b.classifier(x, "avgpool", "fc")


def _resnet18(b: _Builder) -> str:
    """ResNet-18, full size: basic blocks (3x3 + BN + ReLU, 3x3 + BN, Add, ReLU), [2, 2, 2, 2]."""
    return _resnet(b, (2, 2, 2, 2), bottleneck=False)


def _resnet50(b: _Builder) -> str:
    """ResNet-50, full size: bottlenecks (1x1, 3x3, 1x1 x4, each + BN), [3, 4, 6, 3]."""
    return _resnet(b, (3, 4, 6, 3), bottleneck=True)


def _resnext50(b: _Builder) -> str:
    """ResNeXt-50 32x4d, full size: ResNet-50 with the bottleneck's 3x3 grouped (32 groups
    of 4 channels in the first stage, doubling per stage to 32 of 32) and twice as wide."""
    return _resnet(b, (3, 4, 6, 3), bottleneck=True, groups=32, width=4)


def _mobilenet_v2(b: _Builder) -> str:
    """MobileNetV2 (width 1.0), full size: a 3x3/2 stem, 17 inverted residuals (1x1 expand
    + BN + ReLU6, 3x3 depthwise + BN + ReLU6, 1x1 project + BN, Add where the shape
    allows), a 1x1 conv to 1280 + BN + ReLU6, the classifier."""
    x = b.relu6(b.conv_bn(_INPUT, "features.0.0", "features.0.1", 32, 3, 2), "features.0.2")
    settings = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2))
    index = 1
    for t, c_out, n, s in (*settings, (6, 320, 1, 1)):
        for i in range(n):
            m = f"features.{index}.conv"
            c_in, stride = b.channels(x), s if i == 0 else 1
            y, j = x, 0
            if t != 1:
                y = b.relu6(b.conv_bn(y, f"{m}.0.0", f"{m}.0.1", c_in * t, 1), f"{m}.0.2")
                j = 1
            hidden = b.channels(y)
            y = b.relu6(b.conv_bn(y, f"{m}.{j}.0", f"{m}.{j}.1", hidden, 3, stride, hidden), f"{m}.{j}.2")
            y = b.conv_bn(y, f"{m}.{j + 1}", f"{m}.{j + 2}", c_out, 1)
            x = b.add(x, y, f"features.{index}") if stride == 1 and c_in == c_out else y
            index += 1
    x = b.relu6(b.conv_bn(x, f"features.{index}.0", f"features.{index}.1", 1280, 1), f"features.{index}.2")
    return b.classifier(x, "avgpool", "classifier.1")


def _efficientnet_b0(b: _Builder) -> str:
    """EfficientNet-B0, full size: a 3x3/2 stem + BN + Swish, 16 MBConv blocks (1x1 expand
    + BN + Swish, kxk depthwise + BN + Swish, squeeze-and-excite: GlobalAveragePool, 1x1
    conv with bias, Swish, 1x1 conv with bias, Sigmoid, Mul; 1x1 project + BN; Add where
    the shape allows; stochastic depth is the identity at inference), a 1x1 conv to 1280
    + BN + Swish, the classifier."""
    x = b.swish(b.conv_bn(_INPUT, "features.0.0", "features.0.1", 32, 3, 2), "features.0.2")
    stages = (
        (1, 3, 1, 16, 1),
        (6, 3, 2, 24, 2),
        (6, 5, 2, 40, 2),
        (6, 3, 2, 80, 3),
        (6, 5, 1, 112, 3),
        (6, 5, 2, 192, 4),
        (6, 3, 1, 320, 1),
    )  # (expansion, kernel, stride, channels out, blocks) per stage
    for stage, (t, k, s, c_out, n) in enumerate(stages, start=1):
        for i in range(n):
            m = f"features.{stage}.{i}.block"
            c_in, stride = b.channels(x), s if i == 0 else 1
            y, j = x, 0
            if t != 1:
                y = b.swish(b.conv_bn(y, f"{m}.0.0", f"{m}.0.1", c_in * t, 1), f"{m}.0.2")
                j = 1
            hidden = b.channels(y)
            y = b.swish(b.conv_bn(y, f"{m}.{j}.0", f"{m}.{j}.1", hidden, k, stride, hidden), f"{m}.{j}.2")
            se = f"{m}.{j + 1}"
            z = b.node("GlobalAveragePool", f"{se}.avgpool", [y])
            z = b.swish(b.conv(z, f"{se}.fc1", max(1, c_in // 4), 1, bias=True), f"{se}.activation")
            z = b.node("Sigmoid", f"{se}.scale_activation", [b.conv(z, f"{se}.fc2", hidden, 1, bias=True)])
            y = b.node("Mul", se, [y, z])
            y = b.conv_bn(y, f"{m}.{j + 2}.0", f"{m}.{j + 2}.1", c_out, 1)
            x = b.add(y, x, f"features.{stage}.{i}") if stride == 1 and c_in == c_out else y
    x = b.swish(b.conv_bn(x, "features.8.0", "features.8.1", 1280, 1), "features.8.2")
    return b.classifier(x, "avgpool", "classifier.1")


#: The networks by name; each builder appends its graph and returns the output's name.
MODELS: dict[str, Callable[[_Builder], str]] = {
    "resnet18": _resnet18,
    "resnet50": _resnet50,
    "mobilenet_v2": _mobilenet_v2,
    "efficientnet_b0": _efficientnet_b0,
    "resnext50_32x4d": _resnext50,
}


def build_model(name: str, size: int = 64, dtype: str = "float32", seed: int = 0) -> onnx.ModelProto:
    """Network ``name`` of :data:`MODELS` for ``1 x 3 x size x size`` images in ``dtype``."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {', '.join(MODELS)}")
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    if size < MIN_SIZE:
        raise ValueError(f"input size {size} is too small; expected at least {MIN_SIZE}")
    builder = _Builder(name, size, seed)
    MODELS[name](builder)
    return builder.model(dtype)


def as_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every initializer and every float32 or float16 type widened to
    float64, exactly (each value is the one the model's own dtype holds). The model's
    constants must all be initializers (as :func:`build_model` writes them)."""
    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    graph = wide.graph
    for i, init in enumerate(graph.initializer):
        graph.initializer[i].CopyFrom(
            numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float64), init.name)
        )
    for info in (*graph.input, *graph.output, *graph.value_info):
        if info.type.tensor_type.elem_type in DTYPES.values():
            info.type.tensor_type.elem_type = TensorProto.DOUBLE
    return wide


@dataclass(frozen=True)
class ConvBn:
    """One ``Conv`` -> ``BatchNormalization`` pair of a model: the conv's input shape
    (NCHW, batch 1), weight (OIHW) and attributes, the batch norm's parameters, all as
    stored in the model (its dtype)."""

    conv: str
    batch_norm: str
    input_shape: tuple[int, ...]
    weight: np.ndarray[Any, Any]
    strides: tuple[int, int]
    pads: tuple[int, int, int, int]
    dilations: tuple[int, int]
    group: int
    gamma: np.ndarray[Any, Any]
    beta: np.ndarray[Any, Any]
    mean: np.ndarray[Any, Any]
    var: np.ndarray[Any, Any]
    epsilon: float


def conv_bn_pairs(model: onnx.ModelProto) -> list[ConvBn]:
    """Every BatchNormalization fed by a bias-free 2-D Conv with explicit pads, whose
    weight, like the batch norm's parameters, is an initializer; in graph order. Shapes
    come from the graph's value_info (shape inference runs if there is none)."""
    if not model.graph.value_info:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    graph = model.graph
    values = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    shapes = {
        info.name: tuple(d.dim_value for d in info.type.tensor_type.shape.dim)
        for info in (*graph.input, *graph.value_info)
    }
    producers = {out: node for node in graph.node for out in node.output}
    pairs = []
    for bn in graph.node:
        conv = producers.get(bn.input[0]) if bn.op_type == "BatchNormalization" else None
        if conv is None or conv.op_type != "Conv" or len(conv.input) > 2:
            continue
        c = {a.name: helper.get_attribute_value(a) for a in conv.attribute}
        epsilon = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
        operands = [conv.input[1], *bn.input[1:]]
        if not all(name in values for name in operands) or c.get("auto_pad", b"NOTSET") != b"NOTSET":
            continue
        weight, gamma, beta, mean, var = (values[name] for name in operands)
        if weight.ndim != 4:
            continue
        pairs.append(
            ConvBn(
                conv=conv.name,
                batch_norm=bn.name,
                input_shape=(1, *shapes[conv.input[0]][1:]),
                weight=weight,
                strides=tuple(c.get("strides", (1, 1))),
                pads=tuple(c.get("pads", (0, 0, 0, 0))),
                dilations=tuple(c.get("dilations", (1, 1))),
                group=int(c.get("group", 1)),
                gamma=gamma,
                beta=beta,
                mean=mean,
                var=var,
                epsilon=float(epsilon),
            )
        )
    return pairs


def reference(model: onnx.ModelProto, data: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The model's (one) output on ``data`` in float64: :func:`as_float64` of it run by
    ``onnx.reference.ReferenceEvaluator`` on ``data`` widened exactly."""
    evaluator = ReferenceEvaluator(as_float64(model))
    with np.errstate(over="ignore", invalid="ignore"):  # its Sigmoid computes both branches
        (out,) = evaluator.run(None, {model.graph.input[0].name: data.astype(np.float64)})
    return np.asarray(out)
