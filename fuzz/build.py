"""Materialise a :class:`~fuzz.case.Case` as a Relax module (spec -> framework object).

Two functions, one per half of a call:

- :func:`build_module` turns a case into an ``IRModule`` with one function ``main``,
  written with ``relax.BlockBuilder`` the way a frontend writes it: one dataflow block,
  one binding per operator, ``TupleGetItem(batch_norm(...), 0)`` as its own binding.
- :func:`runtime_inputs` gives the arrays to pass to ``main``, in parameter order.
- :func:`lift_constants` turns every constant of ``main`` into a trailing parameter
  (the form a compile-once cache keys on); :func:`unfolded_program` is that lifted
  module memoised per structure, with the inputs to run it: a compile-once runner
  uses it for the baseline, one module object per structure, not one per value set.

Key idea: the parameter list is derived from the case alone. ``x`` comes first, then,
for each block ``i`` and each operand named in ``case.parameters`` (in
:data:`~fuzz.case.OPERANDS` order), a parameter ``f"{name}{i}"``. Every other operand
is an inline ``relax.const``, which is exactly the form parameters take after
``relax.transform.BindParams``, the form ``FoldBatchnormToConv2D`` matches.
Attributes are copied verbatim (a negative batch_norm axis stays negative), so the
module is what the case says, not a normalised version of it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Generic, TypeVar

import numpy as np
import tvm
from tvm import relax

from fuzz.case import OPERANDS, Block, Case, Tensor, Topology
from fuzz.compat import VISIT_CONSTANT, TensorType, constant_tensor, summarise_error, to_device, type_of

__all__ = [
    "DATA_NAME",
    "FUNCTION_NAME",
    "IdentityMemo",
    "ModuleError",
    "build_module",
    "device_tensor",
    "lift_constants",
    "parameter_names",
    "runtime_inputs",
    "runtime_tensors",
    "structure_key",
    "unfolded_program",
]

_V = TypeVar("_V")

#: The name of the function the module exports.
FUNCTION_NAME = "main"
#: The name of the data parameter (always the first parameter).
DATA_NAME = "x"


class ModuleError(ValueError):
    """TVM rejected the module a case describes, while constructing it (no pass involved).

    The case is invalid for TVM (for example batch_norm operands whose dtype differs
    from the conv's ``out_dtype``); the original exception is the ``__cause__``.
    """


def _operands(case: Case) -> list[tuple[str, Tensor]]:
    """``(parameter name, tensor)`` for every parameter after ``x``, in order."""
    out: list[tuple[str, Tensor]] = []
    for i, block in enumerate(case.blocks):
        for name in OPERANDS:
            tensor = block.operand(name)
            if name in case.parameters and tensor is not None:
                out.append((f"{name}{i}", tensor))
    return out


def parameter_names(case: Case) -> list[str]:
    """The names of ``main``'s parameters, in order (``x`` first)."""
    return [DATA_NAME] + [name for name, _ in _operands(case)]


def runtime_inputs(case: Case) -> list[np.ndarray[Any, Any]]:
    """The arrays to pass to ``main``, in parameter order, each in its exact dtype."""
    return [case.data.numpy()] + [tensor.numpy() for _, tensor in _operands(case)]


class IdentityMemo(Generic[_V]):
    """Values remembered per *object* (by ``id``), the ``capacity`` most recent kept.

    An entry holds its object, so the object's ``id`` cannot be reused by another one
    while the entry lives.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[int, tuple[object, _V]] = OrderedDict()

    def get(self, obj: object) -> _V | None:
        known = self._items.get(id(obj))
        if known is None or known[0] is not obj:
            return None
        self._items.move_to_end(id(obj))
        return known[1]

    def put(self, obj: object, value: _V) -> None:
        self._items[id(obj)] = (obj, value)
        self._items.move_to_end(id(obj))
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)


_DEVICE: IdentityMemo[Any] = IdentityMemo(64)


def device_tensor(tensor: Tensor) -> Any:
    """``tensor`` as a TVM runtime tensor on the CPU, made once per :class:`Tensor` object
    (the 64 most recent are kept): a module's constant and the same operand passed to a
    compiled program share one copy. Nothing writes to these tensors."""
    made = _DEVICE.get(tensor)
    if made is None:
        made = to_device(tensor.numpy())
        _DEVICE.put(tensor, made)
    return made


def runtime_tensors(case: Case) -> list[Any]:
    """:func:`runtime_inputs` as TVM runtime tensors (see :func:`device_tensor`)."""
    return [device_tensor(case.data)] + [device_tensor(tensor) for _, tensor in _operands(case)]


class _ConstantLifter(relax.PyExprMutator):
    """Replaces every tensor constant by a fresh parameter, in visiting order."""

    def __init__(self, mod: tvm.IRModule) -> None:
        super().__init__(mod)
        self.params: list[Any] = []
        self.values: list[Any] = []

    def lift(self, op: Any) -> Any:
        var = relax.Var(f"lifted{len(self.params)}", type_of(op))
        self.params.append(var)
        self.values.append(constant_tensor(op))
        return var


# TVM calls the method by a version-dependent name, and ``mutator`` reads the names when
# it wraps the class: name it first.
setattr(_ConstantLifter, VISIT_CONSTANT, _ConstantLifter.lift)
_LiftConstants = relax.expr_functor.mutator(_ConstantLifter)


def lift_constants(mod: tvm.IRModule) -> tuple[tvm.IRModule, list[Any]]:
    """``mod`` with every tensor constant of ``main`` made a trailing parameter, and their
    values as the runtime tensors the constants hold (ready for the VM, not copied).
    The module's other functions (a pipeline's legalized or fused ones) are kept."""
    func = mod[FUNCTION_NAME]
    lifter = _LiftConstants(mod)
    body = lifter.visit_expr(func.body)
    lifted = relax.Function(list(func.params) + lifter.params, body, None, func.is_pure, func.attrs)
    functions = dict(mod.functions)
    functions[mod.get_global_var(FUNCTION_NAME)] = lifted
    return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos), lifter.values


def structure_key(case: Case) -> tuple[Any, ...]:
    """Everything of ``case`` but its tensor values: equal keys give equal modules up to constants."""

    def shape(tensor: Tensor | None) -> tuple[str, tuple[int, ...]] | None:
        return None if tensor is None else (tensor.dtype, tensor.shape)

    blocks = tuple(
        (block.bn, block.conv, *(shape(block.operand(name)) for name in OPERANDS)) for block in case.blocks
    )
    return (case.topology, shape(case.data), case.parameters, blocks)


_UNFOLDED: OrderedDict[tuple[Any, ...], tvm.IRModule] = OrderedDict()
_UNFOLDED_CAPACITY = 1024


def unfolded_program(case: Case) -> tuple[tvm.IRModule, list[Any]]:
    """``case``'s module with every operand a parameter, and the inputs to run it with
    (runtime tensors, see :func:`device_tensor`).

    The module is :func:`build_module`'s with its constants turned into trailing
    parameters in the order they are used (what
    :func:`lift_constants` makes of it), so it computes the same
    thing and, when a pass leaves a module unchanged, both compile to one entry.
    The module object is shared by all cases with one :func:`structure_key` (an LRU
    of 1024), so a cache can recognise it without hashing it again.
    """
    key = structure_key(case)
    mod = _UNFOLDED.get(key)
    if mod is None:
        mod = _UNFOLDED[key] = lift_constants(build_module(case))[0]
        while len(_UNFOLDED) > _UNFOLDED_CAPACITY:
            _UNFOLDED.popitem(last=False)
    _UNFOLDED.move_to_end(key)
    # Constants in the order the module uses them: block by block, the conv's weight,
    # then batch_norm's gamma, beta, mean, var (the order of OPERANDS).
    constants = [
        device_tensor(tensor)
        for block in case.blocks
        for name in OPERANDS
        if name not in case.parameters and (tensor := block.operand(name)) is not None
    ]
    return mod, runtime_tensors(case) + constants


def _var(name: str, tensor: Tensor) -> relax.Var:
    return relax.Var(name, TensorType(tensor.shape, tensor.dtype))


def _emit_block(
    bb: relax.BlockBuilder, i: int, block: Block, data: relax.Expr, operands: dict[str, relax.Expr]
) -> tuple[relax.Expr, relax.Var]:
    """Emit ``batch_norm(conv2d(data, weight), ...)``; return (batch_norm input, its tuple)."""

    def operand(name: str) -> relax.Expr:
        key = f"{name}{i}"
        if key in operands:
            return operands[key]
        tensor = block.operand(name)
        assert tensor is not None, f"block {i} has no {name}"
        # Through a runtime tensor: ``relax.const`` would turn a float64 array into float32.
        return relax.const(device_tensor(tensor))

    if block.conv is not None:
        conv = block.conv
        data = bb.emit(
            relax.op.nn.conv2d(
                data,
                operand("weight"),
                strides=conv.strides,
                padding=conv.padding,
                dilation=conv.dilation,
                groups=conv.groups,
                data_layout=conv.data_layout,
                kernel_layout=conv.kernel_layout,
                out_layout=conv.data_layout,
                out_dtype=conv.out_dtype or None,
            ),
            name_hint=f"conv{i}",
        )
    bn = block.bn
    return data, bb.emit(
        relax.op.nn.batch_norm(
            data,
            operand("gamma"),
            operand("beta"),
            operand("mean"),
            operand("var"),
            axis=bn.axis,
            epsilon=bn.epsilon,
            center=bn.center,
            scale=bn.scale,
            momentum=bn.momentum,
            training=bn.training,
        ),
        name_hint=f"bn{i}",
    )


def build_module(case: Case) -> tvm.IRModule:
    """The Relax module (``tvm.IRModule``) computing ``case``; see the module docstring."""
    x = _var(DATA_NAME, case.data)
    operands = {name: _var(name, tensor) for name, tensor in _operands(case)}
    bb = relax.BlockBuilder()
    try:
        with bb.function(FUNCTION_NAME, [x, *operands.values()]):
            with bb.dataflow():
                result = _emit_body(bb, case, x, operands)
                output = bb.emit_output(result)
            bb.emit_func_output(output)
    except Exception as exc:  # TVM's type inference rejected an operator
        # The scopes' __exit__ left a binding block and the parameter scope open;
        # close them, or TVM warns "BlockBuilder destroyed with remaining blocks!".
        bb._end_block()
        bb.end_scope()
        raise ModuleError(
            f"TVM rejects the module for this case ({case.attributes()}): "
            f"{type(exc).__name__}: {summarise_error(exc)}"
        ) from exc
    return bb.get()


def _emit_body(
    bb: relax.BlockBuilder, case: Case, x: relax.Var, operands: dict[str, relax.Expr]
) -> relax.Expr:
    topology = case.topology
    first = case.blocks[0]
    if topology is Topology.CHAIN:
        _, bn0 = _emit_block(bb, 0, first, x, operands)
        out0 = bb.emit(relax.TupleGetItem(bn0, 0), name_hint="out0")
        relu = bb.emit(relax.op.nn.relu(out0), name_hint="relu0")
        _, bn1 = _emit_block(bb, 1, case.blocks[1], relu, operands)
        return bb.emit(relax.TupleGetItem(bn1, 0), name_hint="out1")
    conv, bn = _emit_block(bb, 0, first, x, operands)
    if topology in (Topology.CONV_BN, Topology.BN_ONLY):
        return bb.emit(relax.TupleGetItem(bn, 0), name_hint="out0")
    if topology is Topology.CONV_SHARED:
        out = bb.emit(relax.TupleGetItem(bn, 0), name_hint="out0")
        return relax.Tuple([out, conv])
    if topology is Topology.BN_STATS:
        items = [bb.emit(relax.TupleGetItem(bn, k), name_hint=f"out0_{k}") for k in range(3)]
        return relax.Tuple(items)
    raise AssertionError(f"unhandled topology {topology!r}")
