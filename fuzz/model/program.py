"""The bindings a case is written as: framework-free, one description for every writer.

:func:`program` lowers a :class:`~fuzz.model.case.Case` (in the :class:`~fuzz.model.case.Importer`
``RELAX`` form) to a :class:`Program`: functions, each a list of :class:`Binding` in the
order they are emitted, naming their arguments. :mod:`fuzz.backends.tvm.build` turns it into a Relax
module with ``relax.BlockBuilder``; :mod:`fuzz.render.script` writes the same bindings as the
Python source of a standalone reproducer. So what a reproducer runs is what the fuzzer
ran, by construction.

Names: the data is ``x``, the residual ``skip``; a block operand is ``f"{name}{i}"``
(``weight0``, ``gamma1``), a function parameter if the case names it in
``parameters``, else a constant (see :meth:`Program.constants`). Bound variables are
named after what they hold: ``conv0``, ``bias0`` (the bias reshaped for broadcasting),
``biased0``, ``bn0`` (batch_norm's tuple), ``out0`` (its output 0), ``mean0``/``var0``
(its outputs 1 and 2), ``relu0``, ``act`` (the epilogue), ``layer0_out`` (a call of the function ``layer0``).

Key idea: a :class:`~fuzz.model.case.Form` changes only this lowering: the dataflow block,
dead projections of the statistics, a second function. Nothing downstream of it
branches on the form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fuzz.model.case import Block, Case, Epilogue, Topology
from fuzz.model.form import Importer
from fuzz.model.tensor import OPERANDS, Tensor

__all__ = [
    "DATA",
    "MAIN",
    "RESIDUAL",
    "Binding",
    "Function",
    "Program",
    "conv_output",
    "named_tensors",
    "parameter_names",
    "program",
]

#: The function every module exports, and its first parameter.
MAIN = "main"
DATA = "x"
#: The parameter an :attr:`~fuzz.model.case.Epilogue.ADD` adds.
RESIDUAL = "skip"


@dataclass(frozen=True)
class Binding:
    """``var = op(*args, **attrs)``. ``op`` is one of ``conv2d``, ``add``, ``reshape``,
    ``batch_norm``, ``get`` (a tuple item: ``attrs["index"]``), ``relu``, ``clip``,
    ``call`` (``attrs["function"]``) and ``tuple``; ``args`` are names of parameters,
    constants or earlier variables."""

    var: str
    op: str
    args: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Function:
    """A function: parameters, bindings, the variable it returns, and whether its
    bindings form one dataflow block."""

    name: str
    params: tuple[str, ...]
    bindings: tuple[Binding, ...]
    output: str
    dataflow: bool


@dataclass(frozen=True)
class Program:
    """The functions of a module (callees first, ``main`` last) and the tensors named."""

    functions: tuple[Function, ...]
    #: every named tensor: the data, the residual, each block's operands
    tensors: Mapping[str, Tensor]

    def parameters(self) -> tuple[str, ...]:
        """``main``'s parameters, in order."""
        return self.functions[-1].params

    def constants(self) -> dict[str, Tensor]:
        """The tensors no function takes as a parameter: bound as constants."""
        params = {p for f in self.functions for p in f.params}
        return {name: t for name, t in self.tensors.items() if name not in params}


def _per_channel(ndim: int, axis: int, length: int) -> tuple[int, ...]:
    shape = [1] * ndim
    shape[axis] = length
    return tuple(shape)


class _Writer:
    """Accumulates the bindings of one function."""

    def __init__(self) -> None:
        self.bindings: list[Binding] = []

    def emit(self, var: str, op: str, *args: str, **attrs: Any) -> str:
        self.bindings.append(Binding(var, op, args, attrs))
        return var


def _block(w: _Writer, case: Case, i: int, block: Block, data: str) -> str:
    """conv [+ bias], batch_norm, its projections; returns the name of output 0. The conv's
    output (its bias added, as an ONNX Conv's output is) is ``conv_output(i, block)``."""
    ndim = len(case.data.shape)
    if block.conv is not None:
        conv = block.conv
        data = w.emit(
            f"conv{i}",
            "conv2d",
            data,
            f"weight{i}",
            strides=conv.strides,
            padding=conv.padding,
            dilation=conv.dilation,
            groups=conv.groups,
            data_layout=conv.data_layout,
            kernel_layout=conv.kernel_layout,
            out_layout=conv.data_layout,
            out_dtype=conv.out_dtype,
        )
        if block.bias is not None:
            shape = _per_channel(ndim, conv.channel_axis, block.bias.shape[0])
            bias = w.emit(f"bias{i}_r", "reshape", f"bias{i}", shape=shape)
            data = w.emit(f"biased{i}", "add", data, bias)
    bn = block.bn
    tup = w.emit(
        f"bn{i}",
        "batch_norm",
        data,
        *(f"{name}{i}" for name in ("gamma", "beta", "mean", "var")),
        axis=bn.axis,
        epsilon=bn.epsilon,
        center=bn.center,
        scale=bn.scale,
        momentum=bn.momentum,
        training=bn.training,
    )
    out = w.emit(f"out{i}", "get", tup, index=0)
    if case.form.dead_statistics and not case.topology.uses_statistics:
        w.emit(f"mean{i}", "get", tup, index=1)
        w.emit(f"var{i}", "get", tup, index=2)
    return out


def conv_output(i: int, block: Block) -> str:
    """The variable holding block ``i``'s conv output, its bias included."""
    return f"biased{i}" if block.bias is not None else f"conv{i}"


def _block_parameters(case: Case, i: int) -> tuple[str, ...]:
    block = case.blocks[i]
    return tuple(f"{n}{i}" for n in OPERANDS if n in case.parameters and block.operand(n) is not None)


def named_tensors(case: Case) -> dict[str, Tensor]:
    """Every tensor of ``case`` by its name (the data, the residual, each block's operands)."""
    tensors: dict[str, Tensor] = {DATA: case.data}
    if case.residual is not None:
        tensors[RESIDUAL] = case.residual
    for i, block in enumerate(case.blocks):
        for name in OPERANDS:
            tensor = block.operand(name)
            if tensor is not None:
                tensors[f"{name}{i}"] = tensor
    return tensors


def parameter_names(case: Case) -> tuple[str, ...]:
    """``main``'s parameters, in order, whoever writes the module: ``x``, the operands
    named in ``parameters`` block by block (in :data:`~fuzz.model.case.OPERANDS` order), then
    ``skip``."""
    params = [DATA] + [p for i in range(len(case.blocks)) for p in _block_parameters(case, i)]
    if case.residual is not None:
        params.append(RESIDUAL)
    return tuple(params)


def program(case: Case) -> Program:
    """The bindings ``case`` is written as (see the module docstring)."""
    if case.form.importer is not Importer.RELAX:
        raise ValueError(f"a {case.form.importer.value} case is written by its importer, not as a program")
    tensors = named_tensors(case)
    params = parameter_names(case)

    functions: list[Function] = []
    w = _Writer()
    topology = case.topology
    first = case.blocks[0]
    if case.form.functions == 2:
        # The first block, and the relu after it in the chain, in a function of its own.
        inner = _Writer()
        out = _block(inner, case, 0, first, DATA)
        if topology is Topology.CHAIN:
            out = inner.emit("relu0", "relu", out)
        inner_params = (DATA, *_block_parameters(case, 0))
        functions.append(Function("layer0", inner_params, tuple(inner.bindings), out, case.form.dataflow))
        last = w.emit("layer0_out", "call", *inner_params, function="layer0")
    else:
        last = _block(w, case, 0, first, DATA)
        if topology is Topology.CHAIN:
            last = w.emit("relu0", "relu", last)
    if topology is Topology.CHAIN:
        last = _block(w, case, 1, case.blocks[1], last)
    elif topology is Topology.CONV_SHARED:
        last = w.emit("result", "tuple", last, conv_output(0, first))
    elif topology is Topology.BN_STATS:
        stats = [w.emit(f"out0_{k}", "get", "bn0", index=k) for k in (1, 2)]
        last = w.emit("result", "tuple", last, *stats)
    elif topology is Topology.STATS_CONSUMED:
        ndim = len(case.data.shape)
        mean = w.emit("mean0", "get", "bn0", index=1)
        shape = _per_channel(ndim, first.bn.axis % ndim, first.mean.shape[0])
        mean = w.emit("mean0_r", "reshape", mean, shape=shape)
        last = w.emit("result", "add", last, mean)
    if case.epilogue is Epilogue.RELU:
        last = w.emit("act", "relu", last)
    elif case.epilogue is Epilogue.CLIP:
        last = w.emit("act", "clip", last, min=0.0, max=6.0)
    elif case.epilogue is Epilogue.ADD:
        last = w.emit("act", "add", last, RESIDUAL)
    functions.append(Function(MAIN, params, tuple(w.bindings), last, case.form.dataflow))
    return Program(tuple(functions), tensors)
