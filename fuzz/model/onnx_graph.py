"""A case as an ONNX model: what an exporter writes, for TVM's ONNX frontend, ONNX Runtime
and the model tools.

:func:`onnx_graph` describes a :class:`~fuzz.model.case.Case` of the
:attr:`~fuzz.model.case.Importer.ONNX` form as plain data (an :class:`OnnxGraph`: nodes,
initializers, inputs, outputs, what is fed at run time); :func:`onnx_model` makes it an
``onnx.ModelProto`` with ``onnx.helper``. :mod:`fuzz.backends.tvm.build` imports that with
``tvm.relax.frontend.onnx.from_onnx``, so the fold sees exactly the bindings the
frontend emits (the bias as a reshape and an add, the batch_norm tuple bound, its
statistics projected and left dead, casts and clips as the frontend writes them), and
the reproducer scripts write the same graph.

Names follow :mod:`fuzz.model.program`: ``x``, ``skip``, ``weight0``, ``bias0``,
``gamma0``..``var0``. An operand the case lists in ``parameters`` is a graph input
(the frontend makes it a function parameter); every other one is an initializer
(a constant after import). Graph inputs come in :mod:`fuzz.model.program`'s parameter order.
How the model is written besides (opset, IR version, initializers also listed as inputs,
overridden defaults, ``spatial``, value_info) is the case's :class:`~fuzz.model.case.OnnxForm`.

Key idea: ONNX can say less than Relax (NCHW, OIHW, axis 1, scale and bias always on,
float32 epsilon); :class:`~fuzz.model.case.Case` refuses the rest, so everything here is a
direct translation, and the model computes the case's function of the values fed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuzz.model.case import Block, Case, Epilogue, Topology, conv_output_shape
from fuzz.model.form import ONNX_TRAINING_OPSET, Importer, OnnxForm
from fuzz.model.spelling import at_rank, transposed_weight
from fuzz.model.tensor import OPERANDS, CaseError, Tensor

__all__ = [
    "DEFAULTS",
    "Node",
    "OnnxGraph",
    "caller_inputs",
    "min_ir_versions",
    "newest_opset",
    "onnx_graph",
    "onnx_model",
]

#: Clip takes its bounds as inputs from this opset on (before: attributes).
CLIP_INPUTS_OPSET = 11
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
    """A whole model: nodes in order, initializers, typed inputs and outputs, what is fed."""

    nodes: tuple[Node, ...]
    #: the values stored in the model (an overridden operand's is its stale default)
    initializers: Mapping[str, Tensor]
    #: (name, dtype, shape) of each graph input, in order
    inputs: tuple[tuple[str, str, tuple[int, ...]], ...]
    #: (name, dtype, shape) of each graph output, in order
    outputs: tuple[tuple[str, str, tuple[int, ...]], ...]
    #: the inputs fed at run time, with their values (an initializer-input left unfed is not)
    feeds: Mapping[str, Tensor] = field(default_factory=dict)
    #: (name, dtype, shape) of intermediate tensors, where the form writes them
    value_info: tuple[tuple[str, str, tuple[int, ...]], ...] = ()
    opset: int = 15
    #: 0: the ``onnx`` package's own
    ir_version: int = 0
    #: the case's shape of each output (the model's may have another rank): what a run's
    #: outputs are read back as
    case_shapes: tuple[tuple[int, ...], ...] = ()


#: BatchNormalization's operands: per position where ``spatial`` is 0.
STATISTICS = ("gamma", "beta", "mean", "var")
#: The stale default an overridden operand's initializer holds: an untrained layer's values.
DEFAULTS = {"weight": 1.0, "bias": 0.0, "gamma": 1.0, "beta": 0.0, "mean": 0.0, "var": 1.0}


def onnx_graph(case: Case) -> OnnxGraph:
    """The ONNX graph of ``case`` (whose form must be the ONNX importer's)."""
    if case.form.importer is not Importer.ONNX:
        raise ValueError("only a case of the ONNX form is written as an ONNX graph")
    form = case.form.onnx
    dtype = case.dtype
    tensors: dict[str, Tensor] = {}
    stored: dict[str, Tensor] = {}  # initializers whose values differ from the case's
    nodes: list[Node] = []
    data = "x"
    shape = case.data.shape
    conv_shape = shape
    typed: list[tuple[str, str, tuple[int, ...]]] = []
    for i, block in enumerate(case.blocks):
        conv = block.conv
        assert conv is not None and block.weight is not None  # Case checks the ONNX form
        shape = conv_output_shape(conv, shape, block.weight.shape)
        if i == 0:
            conv_shape = shape
        for name in OPERANDS:
            tensor = block.operand(name)
            if tensor is None:
                continue
            if name == "weight":
                tensor = _written_weight(tensor, conv.groups, form)
            elif form.spatial is False and name in STATISTICS:
                tensor = _per_position(tensor, at_rank(shape, form.rank)[2:])
            tensors[f"{name}{i}"] = tensor  # as the model has it, fed or stored
            if name in form.overridden:
                stored[f"{name}{i}"] = _filled(tensor, DEFAULTS[name])
        conv_inputs = [data, f"weight{i}"] + ([f"bias{i}"] if block.bias is not None else [])
        op = "ConvTranspose" if form.transpose else "Conv"
        nodes.append(Node(op, tuple(conv_inputs), (f"conv{i}",), _conv_attrs(block, form)))
        bn = block.bn
        # The frontend hands momentum to Relax unchanged: write the case's.
        attrs: dict[str, Any] = {"epsilon": bn.epsilon, "momentum": bn.momentum}
        if form.opset >= ONNX_TRAINING_OPSET:
            attrs["training_mode"] = int(bn.training)
        if form.spatial is not None:
            attrs["spatial"] = int(form.spatial)
        nodes.append(
            Node(
                "BatchNormalization",
                (f"conv{i}", f"gamma{i}", f"beta{i}", f"mean{i}", f"var{i}"),
                # in training mode it has the running statistics as outputs too (unused here)
                (f"out{i}", f"running_mean{i}", f"running_var{i}") if bn.training else (f"out{i}",),
                attrs,
            )
        )
        typed += [
            (f"conv{i}", dtype, at_rank(shape, form.rank)),
            (f"out{i}", dtype, at_rank(shape, form.rank)),
        ]
        data = f"out{i}"
        if case.topology is Topology.CHAIN and i == 0:
            nodes.append(Node("Relu", (data,), ("relu0",)))
            data = "relu0"
            typed.append((data, dtype, at_rank(shape, form.rank)))
    if case.epilogue is Epilogue.RELU:
        nodes.append(Node("Relu", (data,), ("act",)))
        data = "act"
    elif case.epilogue is Epilogue.CLIP:
        if form.opset < CLIP_INPUTS_OPSET:  # Clip-6: the bounds are attributes
            nodes.append(Node("Clip", (data,), ("act",), {"min": 0.0, "max": 6.0}))
        else:
            tensors["clip_min"] = Tensor(dtype, (), (0.0,))
            tensors["clip_max"] = Tensor(dtype, (), (6.0,))
            nodes.append(Node("Clip", (data, "clip_min", "clip_max"), ("act",)))
        data = "act"
    elif case.epilogue is Epilogue.ADD:
        nodes.append(Node("Add", (data, "skip"), ("act",)))
        data = "act"
    outputs = [(data, dtype, at_rank(shape, form.rank))]
    case_shapes = [shape]
    if case.topology is Topology.CONV_SHARED:
        outputs.append(("conv0", dtype, at_rank(conv_shape, form.rank)))
        case_shapes.append(conv_shape)
    x = _reshaped(case.data, form.rank)
    fed: dict[str, Tensor] = {"x": x}
    inputs = [("x", dtype, x.shape)]
    for i in range(len(case.blocks)):
        for name in OPERANDS:
            tensor = tensors.get(f"{name}{i}")
            if (name in case.parameters or name in form.overridden) and tensor is not None:
                inputs.append((f"{name}{i}", tensor.dtype, tensor.shape))
                fed[f"{name}{i}"] = tensor
    if case.residual is not None:
        skip = _reshaped(case.residual, form.rank)
        inputs.append(("skip", dtype, skip.shape))
        fed["skip"] = skip
    params = {f"{name}{i}" for name in case.parameters for i in range(len(case.blocks))}
    initializers = {name: stored.get(name, t) for name, t in tensors.items() if name not in params}
    if form.initializer_inputs:
        inputs += [(name, t.dtype, t.shape) for name, t in initializers.items() if name not in fed]
    outputs_named = {name for name, _, _ in outputs}
    value_info = tuple(v for v in typed if v[0] not in outputs_named) if form.value_info else ()
    return OnnxGraph(
        tuple(nodes),
        initializers,
        tuple(inputs),
        tuple(outputs),
        fed,
        value_info,
        form.opset,
        form.ir_version,
        tuple(case_shapes),
    )


def _reshaped(tensor: Tensor, rank: int) -> Tensor:
    return Tensor(tensor.dtype, at_rank(tensor.shape, rank), tensor.values)


def _written_weight(weight: Tensor, groups: int, form: OnnxForm) -> Tensor:
    """The conv's OIHW weight as the model has it (:mod:`fuzz.model.spelling`)."""
    return _reshaped(transposed_weight(weight, groups) if form.transpose else weight, form.rank)


def _conv_attrs(block: Block, form: OnnxForm) -> dict[str, Any]:
    """Conv's (or ConvTranspose's) attributes at the form's rank."""
    conv, weight = block.conv, block.weight
    assert conv is not None and weight is not None
    top, left, bottom, right = conv.padding
    if form.transpose:  # padding k - 1 - p gives a ConvTranspose of stride 1 the conv's output
        kh, kw = weight.shape[2], weight.shape[3]
        top, left, bottom, right = kh - 1 - top, kw - 1 - left, kh - 1 - bottom, kw - 1 - right
    (sh, sw), (dh, dw) = conv.strides, conv.dilation
    if form.rank == 1:
        return {"strides": [sw], "pads": [left, right], "dilations": [dw], "group": conv.groups}
    if form.rank == 3:
        pads = [0, top, left, 0, bottom, right]
        return {"strides": [1, sh, sw], "pads": pads, "dilations": [1, dh, dw], "group": conv.groups}
    return {
        "strides": [sh, sw],
        "pads": [top, left, bottom, right],
        "dilations": [dh, dw],
        "group": conv.groups,
    }


def _filled(tensor: Tensor, value: float) -> Tensor:
    return Tensor(tensor.dtype, tensor.shape, (value,) * len(tensor.values))


def _per_position(tensor: Tensor, spatial: tuple[int, ...]) -> Tensor:
    """A per-channel tensor repeated over every position: shape ``(C, *spatial)``."""
    values = np.repeat(np.asarray(tensor.values, dtype=np.float64), int(np.prod(spatial)))
    return Tensor(tensor.dtype, (tensor.shape[0], *spatial), tuple(float(v) for v in values))


def caller_inputs(model: Any, ir_version: int | None = None) -> list[Any]:
    """A model's graph inputs a caller may feed: below IR version 4 (the model's, or
    ``ir_version``) an initializer listed as an input is a constant (the specification of
    those versions), so it is none of them."""
    if 0 < (model.ir_version if ir_version is None else ir_version) < 4:
        constants = {t.name for t in model.graph.initializer}
        return [i for i in model.graph.input if i.name not in constants]
    return list(model.graph.input)


def newest_opset() -> int:
    """The newest opset of the default domain the installed ``onnx`` writes."""
    import onnx

    return int(onnx.defs.onnx_opset_version())


def min_ir_versions() -> dict[int, int]:
    """Per opset from 7, the lowest IR version that can say it (``onnx.helper.VERSION_TABLE``)."""
    import onnx

    table = onnx.helper.VERSION_TABLE
    return {opset: min(ir for _, ir, o, *_ in table if o >= opset) for opset in range(7, newest_opset() + 1)}


def onnx_model(case: Case) -> Any:
    """``case`` as an ``onnx.ModelProto`` (checked by ``onnx.checker``, in full)."""
    import onnx
    from onnx import helper, numpy_helper

    graph = onnx_graph(case)

    def typed(name: str, dtype: str, shape: tuple[int, ...]) -> Any:
        return helper.make_tensor_value_info(name, ELEMENT_TYPES[dtype], list(shape))

    model = helper.make_model(
        helper.make_graph(
            [helper.make_node(n.op_type, list(n.inputs), list(n.outputs), **n.attrs) for n in graph.nodes],
            "case",
            [typed(*i) for i in graph.inputs],
            [typed(*o) for o in graph.outputs],
            [numpy_helper.from_array(np.asarray(t.numpy()), name) for name, t in graph.initializers.items()],
            value_info=[typed(*v) for v in graph.value_info],
        ),
        opset_imports=[helper.make_opsetid("", graph.opset)],
    )
    if graph.ir_version:
        model.ir_version = graph.ir_version
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise CaseError("form.onnx", f"the model is not valid ONNX: {exc}") from None
    return model
