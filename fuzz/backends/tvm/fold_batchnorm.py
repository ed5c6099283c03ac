"""Fold inference-mode batch_norm into the conv2d before it, soundly.

Called as before, ``FoldBatchnormToConv2D()(mod)``; it imports only ``tvm`` and ``numpy``.
It rewrites ``TupleGetItem(batch_norm(conv2d(x, W) [+ b], gamma, beta, mean, var), 0)`` into
``conv2d(x, W * s_w) [* r] + bias`` where ``s = gamma / sqrt(var + eps)`` per output channel,
``s = s_w * r`` and ``bias = beta - (mean - b) * s``. All folded constants are computed at
compile time in float64, checked for range, then rounded once into their dtype. The batch_norm
is gone either way; ``r`` is a per-channel multiply that ``FuseOps`` fuses into the conv's
epilogue, emitted only when some channel needs it.

It sees through what importers write: unused statistics projections (``lv[1]``, ``lv[2]``), a
conv bias as an ``add`` of a (reshaped) per-channel constant, operands as ``permute_dims`` or
``reshape`` of a constant (as ``ConvertLayout`` leaves them), plain binding blocks, and every
Relax function. Bindings the fold leaves unused are removed; nothing else is.

What it folds, and what it leaves alone (unchanged, never wrong):

- inference only: ``training=True`` is never folded;
- the batch_norm axis (negative axes normalised) must be the conv output's channel axis for
  its ``out_layout``; data layouts NCHW and NHWC (any 4-D layout with one ``C``), kernel
  layouts OIHW, HWIO, OHWI and IOHW (any permutation of ``OIHW``), groups including depthwise
  (the scale always runs along the kernel's ``O`` axis);
- ``scale=False`` ignores gamma, ``center=False`` ignores beta;
- epsilon is rounded as TVM's batch_norm rounds it (float32 unless the data is float64);
  float16, bfloat16, float32 and float64, and a conv ``out_dtype`` that differs from the
  weight dtype;
- only constant weight, bias, gamma, beta, mean and var; only a conv whose output has no other
  consumer (the conv is never duplicated); only a batch_norm whose outputs 1 and 2 (the
  statistics) are unused.

Key idea: where the unfolded program is finite the folded one must be too. Folding a channel
scale ``|s| > 1`` into the weights is unsafe: ``|W * x|`` just under ``max / |s|`` is finite
before and overflows after. So each channel's scale is split:

- ``s_w = s, r = 1`` when ``|s| <= 1``, no nonzero folded weight of the channel falls below
  the weight dtype's smallest normal number, and the weights are stored in the conv's output
  dtype (so the rounding of ``W * s`` is one rounding of that dtype);
- otherwise ``s_w = 2**k`` with ``k <= 0`` as small as keeps every nonzero weight of the
  channel normal but no smaller than ``|s|`` allows (``2**k <= |s|``), and ``r = s / 2**k``:
  scaling by a power of two is exact, so the weights carry no new rounding at all, and ``|s_w|
  <= 1`` means the conv's partial sums cannot grow.

The bias must satisfy ``|bias| <= max / 4`` of the output dtype (then ``s * conv`` stays in
range wherever the unfolded result does), ``r`` and ``bias`` must be finite in that dtype, and
``var + eps`` must be positive; otherwise the pattern is left alone.

``FoldBatchnormToConv2D(assume_bounded_activations=True)`` is the opt-in for callers who can
bound their activations: it folds the whole scale into the weights (``r = 1``) whenever the
folded weights are finite, as upstream does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator
from tvm.relax.transform.transform import function_pass

__all__ = ["FoldBatchnormToConv2D"]

_CONV2D = tvm.ir.Op.get("relax.nn.conv2d")
_BATCH_NORM = tvm.ir.Op.get("relax.nn.batch_norm")
# ``relax.const`` returns ``tvm.ir.GenericConst`` from TVM 0.27 on, ``relax.Constant`` before.
_CONSTANTS = tuple(
    c for c in (getattr(tvm.ir, "GenericConst", None), getattr(relax, "Constant", None)) if c
)
_to_tensor = tvm.runtime.tensor
#: Folded biases stay below max / _BIAS_MARGIN of their dtype (see the module docstring).
_BIAS_MARGIN = 4.0


def _type(expr: Any) -> Any:
    ty = getattr(expr, "ty", None)
    return ty if ty is not None else expr.struct_info


def _value(const: Any) -> np.ndarray[Any, Any]:
    data = getattr(const, "value", None)
    return (data if data is not None else const.data).numpy()


def _const(array: np.ndarray[Any, Any]) -> Any:
    # Through a runtime tensor: ``relax.const`` would turn a float64 array into float32.
    return relax.const(_to_tensor(np.ascontiguousarray(array)))


def _finfo(dtype: np.dtype[Any]) -> tuple[float, float]:
    """(smallest normal, largest finite) of a NumPy float dtype, ml_dtypes' bfloat16 included."""
    if dtype.name == "bfloat16":
        return 2.0**-126, float(np.float32(3.3895313892515355e38))
    info = np.finfo(dtype)
    return float(info.tiny), float(info.max)


@dataclass(frozen=True)
class _Fold:
    """One foldable conv + batch_norm: what replaces the ``TupleGetItem(bn, 0)`` binding."""

    data: Any  # the conv's input expression
    conv: Any  # the conv2d call (op and attrs are reused)
    weight: np.ndarray[Any, Any]  # folded, in the weight dtype
    remainder: np.ndarray[Any, Any] | None  # per-channel multiply after the conv, or None
    bias: np.ndarray[Any, Any]  # in the conv's output dtype, broadcast shape


@mutator
class _Rewrite(PyExprMutator):
    """Replaces each planned ``bn[0]`` binding and drops the conv and batch_norm bindings."""

    def __init__(self, mod: Any, folds: dict[Any, _Fold], dropped: set[Any]) -> None:
        super().__init__(mod)
        self.folds = folds
        self.dropped = dropped

    def visit_var_binding_(self, binding: Any) -> None:
        if binding.var in self.dropped:
            return
        fold = self.folds.get(binding.var)
        if fold is None:
            super().visit_var_binding_(binding)
            return
        bb = self.builder_
        conv = bb.emit(
            relax.Call(_CONV2D, [self.visit_expr(fold.data), _const(fold.weight)], fold.conv.attrs)
        )
        if fold.remainder is not None:
            conv = bb.emit(relax.op.multiply(conv, _const(fold.remainder)))
        value = bb.normalize(relax.op.add(conv, _const(fold.bias)))
        # Same variable, same type: every later use stays valid.
        bb.emit_normalized(relax.VarBinding(binding.var, value))


def _channel_axis(layout: str) -> int | None:
    """The ``C`` axis of a plain 4-D layout (``NCHW``, ``NHWC``, ...), None otherwise."""
    if len(layout) == 4 and sorted(layout) == sorted("NCHW"):
        return layout.index("C")
    return None


def _scale(gamma: np.ndarray[Any, Any], denominator: np.ndarray[Any, Any]) -> tuple[Any, Any]:
    """``s = gamma / sqrt(denominator)`` as ``(m, e)`` with ``s = m * 2**e``, ``0.5 <= |m| < 1``
    (or ``m = 0``): one rounding, however small or large ``s`` is (a float64 ``s`` would
    round again where it is subnormal)."""
    g_m, g_e = np.frexp(gamma)
    m, q_e = np.frexp(g_m / np.sqrt(denominator))
    return m, g_e + q_e


def _split(
    m: np.ndarray[Any, Any],
    e: np.ndarray[Any, Any],
    w: np.ndarray[Any, Any],
    min_normal: float,
    exact_only: bool,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Per channel (axis 0 of ``w``) of ``s = m * 2**e``: whether the whole scale goes into
    the weights (``full``), and otherwise the exponent ``k`` of ``s_w = 2**k``."""
    full = np.zeros(m.shape, dtype=bool)
    k = np.zeros(m.shape, dtype=np.int64)
    log2_min = math.log2(min_normal)
    for c, weights in enumerate(w):
        nonzero = np.abs(weights[weights != 0])
        log2_smallest = math.log2(float(nonzero.min())) if nonzero.size else math.inf
        if m[c] == 0:
            full[c] = not exact_only  # zero weights, or keep them and multiply by 0
            continue
        log2_s = float(e[c]) + math.log2(abs(float(m[c])))
        if not exact_only and log2_s <= 0 and log2_smallest + log2_s >= log2_min:
            full[c] = True
            continue
        # The largest power of two 2**k <= min(|s|, 1) (|m| < 1, so floor(log2|s|) = e - 1) ...
        k_c = min(0, int(e[c]) - 1)
        # ... raised until every nonzero weight stays normal (never above 2**0).
        if math.isfinite(log2_smallest):
            k_c = max(k_c, math.ceil(log2_min - log2_smallest))
        k[c] = min(k_c, 0)
    return full, k


@dataclass(frozen=True)
class _Match:
    """A conv [+ bias] + batch_norm found in a function, operands resolved to arrays."""

    conv: Any
    bn: Any
    bn_input: Any  # the variable batch_norm normalises (the conv's, or the bias add's)
    weight: np.ndarray[Any, Any]
    operands: tuple[np.ndarray[Any, Any], ...]  # gamma, beta, mean, var
    conv_bias: np.ndarray[Any, Any] | None  # the bias add's constant, as bound
    #: bindings the fold makes unused: conv, bias add, batch_norm and its projections
    dropped: frozenset[Any]


def _plan(match: _Match, assume_bounded: bool) -> _Fold | None:
    """The fold of one match, or None when it cannot be folded soundly."""
    conv, bn = match.conv, match.bn
    ca, ba = conv.attrs, bn.attrs
    if bool(ba.training):
        return None
    out_layout = str(ca.out_layout) or str(ca.data_layout)
    channel = _channel_axis(out_layout)
    kernel_layout = str(ca.kernel_layout)
    if channel is None or sorted(kernel_layout) != sorted("OIHW"):
        return None
    if int(ba.axis) % 4 != channel:
        return None
    weight_raw = match.weight
    gamma_raw, beta_raw, mean_raw, var_raw = match.operands
    out_np = gamma_raw.dtype  # batch_norm's operands have the conv output's dtype
    if str(_type(match.bn_input).dtype) != out_np.name or len(var_raw.shape) != 1:
        return None
    conv_bias = _per_channel(match.conv_bias, channel, var_raw.shape[0], out_np)
    if match.conv_bias is not None and conv_bias is None:
        return None
    w_min_normal, w_max = _finfo(weight_raw.dtype)
    _, out_max = _finfo(out_np)

    eps = float(ba.epsilon)
    if out_np.name != "float64":
        eps = float(np.float32(eps))  # TVM adds epsilon as a float32 scalar
    o_axis = kernel_layout.index("O")
    channels = var_raw.shape[0]
    with np.errstate(all="ignore"):
        gamma = gamma_raw.astype(np.float64) if bool(ba.scale) else np.ones(channels)
        beta = beta_raw.astype(np.float64) if bool(ba.center) else 0.0
        denominator = var_raw.astype(np.float64) + eps
        if not np.all(denominator > 0) or not np.all(np.isfinite(denominator)):
            return None
        m, e = _scale(gamma, denominator)
        mean = mean_raw.astype(np.float64) - (conv_bias if conv_bias is not None else 0.0)
        mean_s = np.ldexp(mean * m, e)
        bias = beta - mean_s
        w = np.moveaxis(weight_raw.astype(np.float64), o_axis, 0)  # output channels first
        if w.shape[0] != channels or not (np.all(np.isfinite(m)) and np.all(np.isfinite(mean_s))):
            return None
        if assume_bounded:
            full, k = np.ones(channels, dtype=bool), np.zeros(channels, dtype=np.int64)
        else:
            exact_only = weight_raw.dtype != out_np  # W * s would round in another dtype
            full, k = _split(m, e, w, w_min_normal, exact_only)
        per_channel = (-1, 1, 1, 1)
        folded = np.where(
            full.reshape(per_channel),
            np.ldexp(w * m.reshape(per_channel), e.reshape(per_channel)),
            np.ldexp(w, k.reshape(per_channel)),
        )
        remainder = np.where(full, 1.0, np.ldexp(m, e - k))
    if not (np.all(np.isfinite(folded)) and np.all(np.abs(folded) <= w_max)):
        return None
    if not (
        np.all(np.abs(bias) <= out_max / _BIAS_MARGIN) and np.all(np.abs(remainder) <= out_max)
    ):
        return None
    shape = [1, 1, 1, 1]
    shape[channel] = channels
    return _Fold(
        data=conv.args[0],
        conv=conv,
        weight=np.moveaxis(folded, 0, o_axis).astype(weight_raw.dtype),
        remainder=None if np.all(remainder == 1) else remainder.astype(out_np).reshape(shape),
        bias=bias.astype(out_np).reshape(shape),
    )


def _per_channel(
    bias: np.ndarray[Any, Any] | None, channel: int, channels: int, dtype: np.dtype[Any]
) -> np.ndarray[Any, Any] | None:
    """A conv bias as one float64 value per output channel, or None: no bias, or one that
    does not broadcast along the channel axis alone without changing the output's shape."""
    if bias is None or bias.dtype != dtype or bias.ndim > 4:
        return None
    shape = (1,) * (4 - bias.ndim) + bias.shape
    if any(d != 1 for i, d in enumerate(shape) if i != channel) or shape[channel] not in (
        1,
        channels,
    ):
        return None
    return np.broadcast_to(bias.astype(np.float64).reshape(-1), (channels,)).copy()


_PERMUTE_DIMS = tvm.ir.Op.get("relax.permute_dims")
_RESHAPE = tvm.ir.Op.get("relax.reshape")
_ADD = tvm.ir.Op.get("relax.add")


def _is_call(value: Any, op: Any) -> bool:
    return isinstance(value, relax.Call) and value.op.same_as(op)


def _constant(expr: Any, values: dict[Any, Any]) -> np.ndarray[Any, Any] | None:
    """The array ``expr`` is known to hold at compile time: a constant, or a variable bound
    to ``permute_dims`` or ``reshape`` of one (what ``ConvertLayout`` and frontends
    leave), or None."""
    if isinstance(expr, _CONSTANTS):
        return _value(expr)
    value: Any = values.get(expr)
    if _is_call(value, _PERMUTE_DIMS):
        inner = _constant(value.args[0], values)
        axes = value.attrs.axes
        return (
            None
            if inner is None
            else np.transpose(inner, None if axes is None else [int(a) for a in axes])
        )
    if _is_call(value, _RESHAPE) and isinstance(value.args[1], relax.ShapeExpr):
        inner = _constant(value.args[0], values)
        shape = [getattr(d, "value", None) for d in value.args[1].values]  # IntImm, not a symbol
        if inner is None or not all(isinstance(d, int) for d in shape):
            return None
        return inner.reshape(shape)
    return None


def _refs(expr: Any) -> list[Any]:
    """The variables an expression refers to (each once)."""
    return list(relax.analysis.free_vars(expr))


class _Graph:
    """The bindings of one function: what each variable is bound to, and who uses it."""

    def __init__(self, func: Any) -> None:
        body = func.body
        bindings = (
            [b for block in body.blocks for b in block.bindings if isinstance(b, relax.VarBinding)]
            if isinstance(body, relax.SeqExpr)
            else []
        )
        self.values: dict[Any, Any] = {b.var: b.value for b in bindings}
        #: variable -> the bound variables whose values use it (None: the function's result)
        self.users: dict[Any, list[Any]] = {}
        #: whether any binding is a batch_norm (if not, there is nothing to fold)
        self.has_batch_norm = any(_is_call(v, _BATCH_NORM) for v in self.values.values())
        if not self.has_batch_norm:
            return
        for b in bindings:
            for ref in _refs(b.value):
                self.users.setdefault(ref, []).append(b.var)
        for ref in _refs(body.body if isinstance(body, relax.SeqExpr) else body):
            self.users.setdefault(ref, []).append(None)

    def uses(self, var: Any) -> list[Any]:
        return self.users.get(var, [])

    def match(self, var: Any) -> _Match | None:
        """The conv [+ bias] + batch_norm whose output 0 ``var`` is bound to, if the fold
        may take it: the batch_norm's tuple is used only by projections, those of the
        statistics unused; the conv output (and the bias add) used only on the way."""
        value: Any = self.values.get(var)
        if not (isinstance(value, relax.TupleGetItem) and int(value.index) == 0):
            return None
        bn_var = value.tuple_value
        bn: Any = self.values.get(bn_var)
        if not _is_call(bn, _BATCH_NORM):
            return None
        projections = self.uses(bn_var)
        dropped = {bn_var}
        for user in projections:
            item = self.values.get(user) if user is not None else None
            if not isinstance(item, relax.TupleGetItem) or (
                not user.same_as(var) and int(item.index) == 0
            ):
                return None  # the tuple itself is used, or output 0 is projected twice
            if not user.same_as(var):
                if self.uses(user):
                    return None  # a statistic in use
                dropped.add(user)
        bn_input = bn.args[0]
        conv_var, conv_bias = bn_input, None
        source: Any = self.values.get(bn_input)
        if _is_call(source, _ADD):
            if self.uses(bn_input) != [bn_var]:
                return None
            for conv_side, bias_side in ((0, 1), (1, 0)):
                if _is_call(self.values.get(source.args[conv_side]), _CONV2D):
                    conv_bias = _constant(source.args[bias_side], self.values)
                    if conv_bias is not None:
                        conv_var = source.args[conv_side]
                        break
            else:
                return None
            dropped.add(bn_input)
        conv: Any = self.values.get(conv_var)
        if not _is_call(conv, _CONV2D) or len(self.uses(conv_var)) != 1:
            return None  # no conv, or its output has another consumer
        dropped.add(conv_var)
        resolved = [_constant(arg, self.values) for arg in (conv.args[1], *bn.args[1:])]
        arrays = [r for r in resolved if r is not None]
        if len(arrays) != len(resolved):
            return None  # an operand not known at compile time
        return _Match(
            conv, bn, bn_input, arrays[0], tuple(arrays[1:]), conv_bias, frozenset(dropped)
        )

    def unused_after(self, dropped: set[Any]) -> set[Any]:
        """``dropped`` and every constant-valued binding (a weight's ``permute_dims``, a
        bias's ``reshape``) all of whose users are dropped, transitively. The conv's data
        is not constant, so it is never dropped: the folded conv still reads it."""
        dropped = set(dropped)
        grew = True
        while grew:
            grew = False
            for var in list(dropped):
                for ref in _refs(self.values[var]):
                    users = self.uses(ref)
                    if (
                        ref in self.values
                        and ref not in dropped
                        and all(u in dropped for u in users)
                        and _constant(ref, self.values) is not None
                    ):
                        dropped.add(ref)
                        grew = True
        return dropped


@function_pass(opt_level=0, name="FoldBatchnormToConv2D")
class FoldBatchnormToConv2D:
    """Fold inference-mode batch_norm into the conv2d before it, soundly (module docstring)."""

    def __init__(self, assume_bounded_activations: bool = False) -> None:
        self.assume_bounded_activations = assume_bounded_activations

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        if (
            func.attrs is not None
            and "Primitive" in func.attrs
            and int(func.attrs["Primitive"]) != 0
        ):
            return func
        graph = _Graph(func)
        if not graph.has_batch_norm:
            return func
        folds: dict[Any, _Fold] = {}
        dropped: set[Any] = set()
        for var in graph.values:
            match = graph.match(var)
            fold = _plan(match, self.assume_bounded_activations) if match is not None else None
            if match is not None and fold is not None:
                folds[var] = fold
                dropped |= match.dropped
        if not folds:
            return func
        return _Rewrite(mod, folds, graph.unused_after(dropped)).visit_expr(func)
