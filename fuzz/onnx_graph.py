"""A case as an ONNX graph: what an exporter writes, for TVM's ONNX frontend to import.

:func:`onnx_graph` describes a :class:`~fuzz.case.Case` of the
:attr:`~fuzz.case.Importer.ONNX` form as plain data (an :class:`OnnxGraph`: nodes,
initializers, inputs, outputs); :func:`onnx_model` makes it an ``onnx.ModelProto``
with ``onnx.helper``. :mod:`fuzz.build` imports that with
``tvm.relax.frontend.onnx.from_onnx``, so the fold sees exactly the bindings the
frontend emits (the bias as a reshape and an add, the batch_norm tuple bound, its
statistics projected and left dead, casts and clips as the frontend writes them), and
:mod:`fuzz.script` writes the same graph into a reproducer.

Names follow :mod:`fuzz.program`: ``x``, ``skip``, ``weight0``, ``bias0``,
``gamma0``..``var0``. An operand the case lists in ``parameters`` is a graph input
(the frontend makes it a function parameter); every other one is an initializer
(a constant after import). Graph inputs come in :mod:`fuzz.program`'s parameter order.

Key idea: ONNX can say less than Relax (NCHW, OIHW, axis 1, scale and bias always on,
float32 epsilon); :class:`~fuzz.case.Case` refuses the rest, so everything here is a
direct translation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuzz.case import OPERANDS, Case, Epilogue, Importer, Tensor, Topology, conv_output_shape

__all__ = ["OPSET", "Node", "OnnxGraph", "onnx_graph", "onnx_model"]

#: The opset written: TVM's ONNX frontend converts BatchNormalization from version 15 on.
OPSET = 15
#: ONNX element types by dtype name (``onnx.TensorProto`` values).
ELEMENT_TYPES = {"float32": 1, "float16": 10, "float64": 11}


@dataclass(frozen=True)
class Node:
    """One ONNX node: ``outputs = op_type(*inputs, **attrs)``."""

    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OnnxGraph:
    """A whole graph: nodes in order, initializers, typed inputs, output names."""

    nodes: tuple[Node, ...]
    initializers: Mapping[str, Tensor]
    #: (name, dtype, shape) of each graph input, in order
    inputs: tuple[tuple[str, str, tuple[int, ...]], ...]
    #: (name, dtype, shape) of each graph output, in order
    outputs: tuple[tuple[str, str, tuple[int, ...]], ...]


def onnx_graph(case: Case) -> OnnxGraph:
    """The ONNX graph of ``case`` (whose form must be the ONNX importer's)."""
    if case.form.importer is not Importer.ONNX:
        raise ValueError("only a case of the ONNX form is written as an ONNX graph")
    dtype = case.dtype
    tensors: dict[str, Tensor] = {}
    nodes: list[Node] = []
    data = "x"
    shape = case.data.shape
    conv_shape = shape
    for i, block in enumerate(case.blocks):
        conv = block.conv
        assert conv is not None and block.weight is not None  # Case checks the ONNX form
        shape = conv_output_shape(conv, shape, block.weight.shape)
        if i == 0:
            conv_shape = shape
        for name in OPERANDS:
            tensor = block.operand(name)
            if tensor is not None:
                tensors[f"{name}{i}"] = tensor
        conv_inputs = [data, f"weight{i}"] + ([f"bias{i}"] if block.bias is not None else [])
        top, left, bottom, right = conv.padding
        nodes.append(
            Node(
                "Conv",
                tuple(conv_inputs),
                (f"conv{i}",),
                {
                    "strides": list(conv.strides),
                    "pads": [top, left, bottom, right],
                    "dilations": list(conv.dilation),
                    "group": conv.groups,
                },
            )
        )
        bn = block.bn
        nodes.append(
            Node(
                "BatchNormalization",
                (f"conv{i}", f"gamma{i}", f"beta{i}", f"mean{i}", f"var{i}"),
                (f"out{i}",),
                # The frontend hands momentum to Relax unchanged: write the case's.
                {"epsilon": bn.epsilon, "momentum": bn.momentum, "training_mode": int(bn.training)},
            )
        )
        data = f"out{i}"
        if case.topology is Topology.CHAIN and i == 0:
            nodes.append(Node("Relu", (data,), ("relu0",)))
            data = "relu0"
    if case.epilogue is Epilogue.RELU:
        nodes.append(Node("Relu", (data,), ("act",)))
        data = "act"
    elif case.epilogue is Epilogue.CLIP:
        tensors["clip_min"] = Tensor(dtype, (), (0.0,))
        tensors["clip_max"] = Tensor(dtype, (), (6.0,))
        nodes.append(Node("Clip", (data, "clip_min", "clip_max"), ("act",)))
        data = "act"
    elif case.epilogue is Epilogue.ADD:
        nodes.append(Node("Add", (data, "skip"), ("act",)))
        data = "act"
    outputs = [(data, dtype, shape)]
    if case.topology is Topology.CONV_SHARED:
        outputs.append(("conv0", dtype, conv_shape))
    inputs = [("x", dtype, case.data.shape)]
    for i, block in enumerate(case.blocks):
        for name in OPERANDS:
            tensor = block.operand(name)
            if name in case.parameters and tensor is not None:
                inputs.append((f"{name}{i}", tensor.dtype, tensor.shape))
    if case.residual is not None:
        inputs.append(("skip", dtype, case.residual.shape))
    initializers = {name: t for name, t in tensors.items() if name not in {n for n, _, _ in inputs}}
    return OnnxGraph(tuple(nodes), initializers, tuple(inputs), tuple(outputs))


def onnx_model(case: Case) -> Any:
    """``case`` as an ``onnx.ModelProto`` (checked by ``onnx.checker``)."""
    import onnx
    from onnx import helper, numpy_helper

    graph = onnx_graph(case)
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node(n.op_type, list(n.inputs), list(n.outputs), **n.attrs) for n in graph.nodes],
            "case",
            [helper.make_tensor_value_info(name, ELEMENT_TYPES[d], list(s)) for name, d, s in graph.inputs],
            [helper.make_tensor_value_info(name, ELEMENT_TYPES[d], list(s)) for name, d, s in graph.outputs],
            [numpy_helper.from_array(np.asarray(t.numpy()), name) for name, t in graph.initializers.items()],
        ),
        opset_imports=[helper.make_opsetid("", OPSET)],
    )
    onnx.checker.check_model(model)
    return model
