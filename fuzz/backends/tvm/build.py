"""Materialise a :class:`~fuzz.model.case.Case` as a Relax module (spec -> framework object).

- :func:`build_module` turns a case into an ``IRModule`` whose exported function is
  ``main``: for the ``relax`` importer it emits the bindings of
  :func:`fuzz.model.program.program` with ``relax.BlockBuilder`` (one binding per operator,
  the batch_norm tuple bound before it is projected, in the :class:`~fuzz.model.case.Form`
  the case asks for); for the ``onnx`` importer it writes the case as an ONNX model
  (:mod:`fuzz.model.onnx_graph`) and imports it with TVM's ``from_onnx``.
- :func:`runtime_inputs` gives the arrays to pass to ``main``, in parameter order.
- :func:`lift_constants` turns every constant into a trailing parameter (the form a
  compile-once cache keys on), through calls between functions; :func:`unfolded_program`
  is that lifted module memoised per structure, with the inputs to run it: a
  compile-once runner uses it for the baseline, one module object per structure, not
  one per value set.

Key idea: the parameter list is derived from the case alone
(:func:`fuzz.model.program.parameter_names`): ``x``, then for each block ``i`` each operand
named in ``case.parameters`` as ``f"{name}{i}"``, then ``skip``. Every other operand is
an inline ``relax.const``, which is exactly the form parameters take after
``relax.transform.BindParams``, the form ``FoldBatchnormToConv2D`` matches.
Attributes are copied verbatim (a negative batch_norm axis stays negative), so the
module is what the case says, not a normalised version of it.
"""

from __future__ import annotations

import contextlib
import io
from collections import OrderedDict
from typing import Any, Generic, TypeVar

import numpy as np
import tvm
from tvm import relax

from fuzz.backends.tvm.compat import VISIT_CONSTANT, TensorType, constant_tensor, to_device, type_of, var_name
from fuzz.errors import CaseOutsideBackend
from fuzz.model.attributes import classify
from fuzz.model.case import Case
from fuzz.model.form import Importer
from fuzz.model.onnx_graph import onnx_model
from fuzz.model.program import Binding, Function, named_tensors, program
from fuzz.model.program import parameter_names as program_parameters
from fuzz.model.tensor import OPERANDS, Tensor
from fuzz.oracle.execution import summarise_error

__all__ = [
    "DATA_NAME",
    "FUNCTION_NAME",
    "IdentityMemo",
    "ModuleError",
    "bound_module",
    "build_module",
    "device_tensor",
    "import_onnx",
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


class ModuleError(CaseOutsideBackend):
    """TVM rejected the module a case describes, while constructing it (no pass involved).

    The case is invalid for TVM (for example batch_norm operands whose dtype differs
    from the conv's ``out_dtype``); the original exception is the ``__cause__``.
    """


def parameter_names(case: Case) -> list[str]:
    """The names of ``main``'s parameters, in order (``x`` first)."""
    return list(program_parameters(case))


def _parameter_tensors(case: Case) -> list[Tensor]:
    tensors = named_tensors(case)
    return [tensors[name] for name in program_parameters(case)]


def runtime_inputs(case: Case) -> list[np.ndarray[Any, Any]]:
    """The arrays to pass to ``main``, in parameter order, each in its exact dtype."""
    return [tensor.numpy() for tensor in _parameter_tensors(case)]


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
    return [device_tensor(tensor) for tensor in _parameter_tensors(case)]


class _ConstantLifter(relax.PyExprMutator):
    """Replaces every tensor constant by a fresh parameter, in visiting order."""

    def __init__(self, mod: tvm.IRModule) -> None:
        super().__init__(mod)
        self.params: list[Any] = []
        self.values: list[Any] = []

    def _fresh(self, ty: Any, value: Any) -> Any:
        var = relax.Var(f"lifted{len(self.params)}", ty)
        self.params.append(var)
        self.values.append(value)
        return var

    def lift(self, op: Any) -> Any:
        return self._fresh(type_of(op), constant_tensor(op))


class _CallingLifter(_ConstantLifter):
    """:class:`_ConstantLifter` for a ``main`` that calls functions in ``callees`` (whose
    constants were lifted already): each such call passes those on as further fresh
    parameters. (A separate class: overriding ``visit_call_`` sends every call through
    Python, which costs the plain lifter a third of its time.)"""

    def __init__(self, mod: tvm.IRModule, callees: dict[str, tuple[Any, list[Any]]]) -> None:
        super().__init__(mod)
        self.callees = callees

    def visit_call_(self, call: Any) -> Any:
        known = self.callees.get(var_name(call.op)) if isinstance(call.op, tvm.ir.GlobalVar) else None
        if known is None:
            return super().visit_call_(call)
        gv, lifted = known
        args = [self.visit_expr(a) for a in call.args]
        args += [self._fresh(type_of(p), v) for p, v in lifted]
        return relax.Call(gv, args, call.attrs)


# TVM calls the method by a version-dependent name, and ``mutator`` reads the names when
# it wraps the class: name it first.
setattr(_ConstantLifter, VISIT_CONSTANT, _ConstantLifter.lift)
_LiftConstants = relax.expr_functor.mutator(_ConstantLifter)
_LiftConstantsThroughCalls = relax.expr_functor.mutator(_CallingLifter)


def _lifted_function(func: Any, lifter: Any) -> Any:
    body = lifter.visit_expr(func.body)
    return relax.Function(list(func.params) + lifter.params, body, None, func.is_pure, func.attrs)


def lift_constants(mod: tvm.IRModule) -> tuple[tvm.IRModule, list[Any]]:
    """``mod`` with every tensor constant of its Relax functions made a parameter, and
    the values ``main`` must now be given after its own parameters (the runtime tensors
    the constants held, not copied).

    A function ``main`` calls takes its constants as trailing parameters, and ``main``
    passes them on from trailing parameters of its own, in the order it meets the
    constants and calls. Other functions (a pipeline's legalized or fused ones) are kept.
    """
    callees: dict[str, tuple[Any, list[Any]]] = {}
    lifted_callees: dict[str, Any] = {}
    for gv, func in mod.functions.items():
        if not isinstance(func, relax.Function) or var_name(gv) == FUNCTION_NAME:
            continue
        lifter = _LiftConstants(mod)
        lifted = _lifted_function(func, lifter)
        if lifter.params:
            lifted_callees[var_name(gv)] = lifted
            callees[var_name(gv)] = (None, list(zip(lifter.params, lifter.values, strict=True)))
    if not callees:
        lifter = _LiftConstants(mod)
        functions = dict(mod.functions)
        functions[mod.get_global_var(FUNCTION_NAME)] = _lifted_function(mod[FUNCTION_NAME], lifter)
        return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos), lifter.values
    # A callee's signature changes: add it anew (the builder types its global variable).
    bb = relax.BlockBuilder(
        tvm.IRModule({gv: f for gv, f in mod.functions.items() if var_name(gv) not in callees})
    )
    for name, lifted in lifted_callees.items():
        callees[name] = (bb.add_func(lifted, name), callees[name][1])
    lifter = _LiftConstantsThroughCalls(bb.get(), callees)
    main = _lifted_function(mod[FUNCTION_NAME], lifter)
    bb.update_func(bb.get().get_global_var(FUNCTION_NAME), main)
    functions = dict(bb.get().functions)
    return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos), lifter.values


def structure_key(case: Case) -> tuple[Any, ...]:
    """Everything of ``case`` but its tensor values: equal keys give equal modules up to constants."""

    def shape(tensor: Tensor | None) -> tuple[str, tuple[int, ...]] | None:
        return None if tensor is None else (tensor.dtype, tensor.shape)

    blocks = tuple(
        (block.bn, block.conv, *(shape(block.operand(name)) for name in OPERANDS)) for block in case.blocks
    )
    return (case.topology, shape(case.data), case.parameters, blocks, case.epilogue, case.form)


#: Where each trailing parameter of a lifted module gets its value: the name of a case
#: tensor, or (for a constant the importer made itself, such as a clip's bounds) the
#: runtime tensor it always holds.
_Recipe = list[str | Any]
_UNFOLDED: OrderedDict[tuple[Any, ...], tuple[tvm.IRModule, _Recipe]] = OrderedDict()
_UNFOLDED_CAPACITY = 1024


def _recipe(case: Case, values: list[Any]) -> _Recipe:
    """Match the lifted constants of ``case``'s module, in order, to its constant operands
    (by exact value), the rest being the importer's own."""
    expected = [(name, t) for name, t in named_tensors(case).items() if name not in program_parameters(case)]
    recipe: _Recipe = []
    cursor = 0
    for value in values:
        array = value.numpy()
        if cursor < len(expected):
            name, tensor = expected[cursor]
            mine = tensor.numpy()
            if array.shape == mine.shape and array.dtype == mine.dtype and array.tobytes() == mine.tobytes():
                recipe.append(name)
                cursor += 1
                continue
        recipe.append(value)
    if cursor != len(expected):
        raise AssertionError(
            f"the module of this case holds {cursor} of its {len(expected)} constant operands in the "
            "expected order: a bug in fuzz.backends.tvm.build or fuzz.model.onnx_graph"
        )
    return recipe


def unfolded_program(case: Case) -> tuple[tvm.IRModule, list[Any]]:
    """``case``'s module with every constant a parameter, and the inputs to run it with
    (runtime tensors, see :func:`device_tensor`).

    The module is :func:`build_module`'s with its constants turned into trailing
    parameters in the order they are used (what :func:`lift_constants` makes of it), so
    it computes the same thing and, when a pass leaves a module unchanged, both compile
    to one entry. The module object is shared by all cases with one
    :func:`structure_key` (an LRU of 1024), so a cache can recognise it without hashing
    it again.
    """
    key = structure_key(case)
    known = _UNFOLDED.get(key)
    if known is None:
        mod, values = lift_constants(build_module(case))
        known = _UNFOLDED[key] = (mod, _recipe(case, values))
        while len(_UNFOLDED) > _UNFOLDED_CAPACITY:
            _UNFOLDED.popitem(last=False)
    _UNFOLDED.move_to_end(key)
    mod, recipe = known
    tensors = named_tensors(case)
    constants = [device_tensor(tensors[item]) if isinstance(item, str) else item for item in recipe]
    return mod, runtime_tensors(case) + constants


def bound_module(case: Case) -> tvm.IRModule:
    """:func:`build_module`'s module for ``case``, made faster where the structure was seen:
    the memoised lifted module (:func:`unfolded_program`) with this case's constants bound
    back in place by ``relax.transform.BindParams`` (structurally equal to building it
    anew; a test checks it). A module of two functions is built anew: binding ``main``'s
    parameters would leave the callee's constants as arguments, not constants."""
    if case.form.functions != 1:
        return build_module(case)
    mod, inputs = unfolded_program(case)
    params = list(mod[FUNCTION_NAME].params)
    given = len(program_parameters(case))
    bound = relax.transform.BindParams(FUNCTION_NAME, dict(zip(params[given:], inputs[given:], strict=True)))
    return bound(mod)


def _var(name: str, tensor: Tensor) -> relax.Var:
    return relax.Var(name, TensorType(tensor.shape, tensor.dtype))


def _expr(binding: Binding, env: dict[str, Any], constants: dict[str, Tensor], bb: relax.BlockBuilder) -> Any:
    """The Relax expression of one binding of a :class:`~fuzz.model.program.Program`."""

    def arg(name: str) -> Any:
        if name in env:
            return env[name]
        # Through a runtime tensor: ``relax.const`` would turn a float64 array into float32.
        return relax.const(device_tensor(constants[name]))

    args = [arg(a) for a in binding.args]
    attrs = binding.attrs
    op = binding.op
    if op == "conv2d":
        return relax.op.nn.conv2d(*args, **{**attrs, "out_dtype": attrs["out_dtype"] or None})
    if op == "batch_norm":
        return relax.op.nn.batch_norm(*args, **attrs)
    if op == "get":
        return relax.TupleGetItem(args[0], attrs["index"])
    if op == "add":
        return relax.op.add(*args)
    if op == "reshape":
        return relax.op.reshape(args[0], attrs["shape"])
    if op == "relu":
        return relax.op.nn.relu(args[0])
    if op == "clip":
        return relax.op.clip(args[0], attrs["min"], attrs["max"])
    if op == "tuple":
        return relax.Tuple(args)
    if op == "call":
        return relax.Call(bb.get().get_global_var(attrs["function"]), args)
    raise AssertionError(f"unknown op {op!r} in a program")


def _emit_function(bb: relax.BlockBuilder, func: Function, tensors: dict[str, Tensor], main: bool) -> None:
    params = [_var(name, tensors[name]) for name in func.params]
    env: dict[str, Any] = {name: var for name, var in zip(func.params, params, strict=True)}
    constants = {name: t for name, t in tensors.items() if name not in env}
    with bb.function(func.name, params, private=not main):
        if func.dataflow:
            with bb.dataflow():
                # The block ends with its output binding ``gv``: the returned tuple itself,
                # or an alias of the variable returned.
                last = func.bindings[-1]
                tail = last.op == "tuple" and last.var == func.output
                for binding in func.bindings[:-1] if tail else func.bindings:
                    env[binding.var] = bb.emit(_expr(binding, env, constants, bb), name_hint=binding.var)
                output = bb.emit_output(_expr(last, env, constants, bb) if tail else env[func.output])
        else:
            for binding in func.bindings:
                env[binding.var] = bb.emit(_expr(binding, env, constants, bb), name_hint=binding.var)
            output = env[func.output]
        bb.emit_func_output(output)


def build_module(case: Case) -> tvm.IRModule:
    """The Relax module (``tvm.IRModule``) computing ``case``; see the module docstring."""
    if case.form.importer is Importer.ONNX:
        return import_onnx(case)
    prog = program(case)
    bb = relax.BlockBuilder()
    for func in prog.functions:
        try:
            _emit_function(bb, func, dict(prog.tensors), main=func.name == FUNCTION_NAME)
        except Exception as exc:  # TVM's type inference rejected an operator
            # The scopes' __exit__ left a binding block and the parameter scope open;
            # close them, or TVM warns "BlockBuilder destroyed with remaining blocks!".
            bb._end_block()
            bb.end_scope()
            raise ModuleError(
                f"TVM rejects the module for this case ({classify(case)}): "
                f"{type(exc).__name__}: {summarise_error(exc)}"
            ) from exc
    return bb.get()


def import_onnx(case: Case) -> tvm.IRModule:
    """``case`` written as an ONNX model and imported by TVM's ``from_onnx``, parameters
    bound as constants (the frontend's default), as TVM users import networks."""
    from tvm.relax.frontend.onnx import from_onnx

    model = onnx_model(case)
    said = io.StringIO()  # the frontend prints the operator it failed on: kept out of our output
    try:
        with contextlib.redirect_stdout(said):
            return from_onnx(model)
    except Exception as exc:
        raise ModuleError(
            f"TVM's ONNX frontend rejects the model for this case ({classify(case)}): "
            f"{type(exc).__name__}: {summarise_error(exc)}"
        ) from exc
