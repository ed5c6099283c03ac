"""A drop-in, correct ``FoldBatchnormToConv2D`` for Relax.

Standalone: this file imports only ``tvm`` and ``numpy`` (nothing from the fuzzer),
so it can be proposed upstream as one file. Use it as upstream's pass is used::

    mod = FoldBatchnormToConv2D()(mod)

It rewrites ``TupleGetItem(batch_norm(conv2d(x, W), gamma, beta, mean, var), 0)``
into ``conv2d(x, W * s_w) [* r] + bias`` where ``s = gamma / sqrt(var + eps)`` per
output channel, ``s = s_w * r`` and ``bias = beta - mean * s``. All folded constants
are computed at compile time in float64, checked for range, then rounded once into
their dtype. The batch_norm is gone either way; ``r`` is a per-channel multiply that
``FuseOps`` fuses into the conv's epilogue, emitted only when some channel needs it.

What it folds, and what it leaves alone (unchanged, never wrong):

- inference only: ``training=True`` is never folded;
- the batch_norm axis (negative axes normalised) must be the conv output's channel
  axis for its ``out_layout``; data layouts NCHW and NHWC (any 4-D layout with one
  ``C``), kernel layouts OIHW, HWIO, OHWI and IOHW (any permutation of ``OIHW``),
  groups including depthwise (the scale always runs along the kernel's ``O`` axis);
- ``scale=False`` ignores gamma, ``center=False`` ignores beta;
- epsilon is rounded as TVM's batch_norm rounds it (float32 unless the data is
  float64); float16, bfloat16, float32 and float64, and a conv ``out_dtype`` that
  differs from the weight dtype;
- only constant weight, gamma, beta, mean and var; only a conv whose output has no
  other consumer (the conv is never duplicated); only a batch_norm whose outputs 1
  and 2 (the statistics) are unused.

Key idea: where the unfolded program is finite the folded one must be too. Folding a
channel scale ``|s| > 1`` into the weights is unsafe: ``|W * x|`` just under
``max / |s|`` is finite before and overflows after. So each channel's scale is split:

- ``s_w = s, r = 1`` when ``|s| <= 1``, no nonzero folded weight of the channel falls
  below the weight dtype's smallest normal number, and the weights are stored in the
  conv's output dtype (so the rounding of ``W * s`` is one rounding of that dtype);
- otherwise ``s_w = 2**k`` with ``k <= 0`` as small as keeps every nonzero weight of
  the channel normal but no smaller than ``|s|`` allows (``2**k <= |s|``), and
  ``r = s / 2**k``: scaling by a power of two is exact, so the weights carry no new
  rounding at all, and ``|s_w| <= 1`` means the conv's partial sums cannot grow.

The bias must satisfy ``|bias| <= max / 4`` of the output dtype (then ``s * conv``
stays in range wherever the unfolded result does), ``r`` and ``bias`` must be finite
in that dtype, and ``var + eps`` must be positive; otherwise the pattern is left alone.

``FoldBatchnormToConv2D(assume_bounded_activations=True)`` is the opt-in for callers
who can bound their activations: it folds the whole scale into the weights
(``r = 1``) whenever the folded weights are finite, as upstream does.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, PyExprVisitor, mutator, visitor

__all__ = ["FoldBatchnormToConv2D"]

_CONV2D = tvm.ir.Op.get("relax.nn.conv2d")
_BATCH_NORM = tvm.ir.Op.get("relax.nn.batch_norm")
# ``relax.const`` returns ``tvm.ir.GenericConst`` from TVM 0.27 on, ``relax.Constant`` before.
_CONSTANTS = tuple(c for c in (getattr(tvm.ir, "GenericConst", None), getattr(relax, "Constant", None)) if c)
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


@visitor
class _Uses(PyExprVisitor):
    """How often each variable is used (definitions not counted)."""

    def __init__(self) -> None:
        self.count: Counter[Any] = Counter()

    def visit_var_(self, op: Any) -> None:
        self.count[op] += 1

    def visit_dataflow_var_(self, op: Any) -> None:
        self.count[op] += 1


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


def _plan(conv: Any, conv_var: Any, bn: Any, assume_bounded: bool) -> _Fold | None:
    """The fold of one matched pair, or None when it cannot be folded soundly."""
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
    operands = [conv.args[1], *bn.args[1:]]
    if not all(isinstance(op, _CONSTANTS) for op in operands):
        return None
    weight_raw, gamma_raw, beta_raw, mean_raw, var_raw = (_value(op) for op in operands)
    out_np = gamma_raw.dtype  # batch_norm's operands have the conv output's dtype
    if str(_type(conv_var).dtype) != out_np.name:
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
        mean_s = np.ldexp(mean_raw.astype(np.float64) * m, e)
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
    if not (np.all(np.abs(bias) <= out_max / _BIAS_MARGIN) and np.all(np.abs(remainder) <= out_max)):
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


def _bindings(func: Any) -> dict[Any, Any]:
    """Variable -> bound value, for the bindings of the function body's blocks."""
    body = func.body
    if not isinstance(body, relax.SeqExpr):
        return {}
    return {
        b.var: b.value for block in body.blocks for b in block.bindings if isinstance(b, relax.VarBinding)
    }


@relax.transform.function_pass(opt_level=0, name="FoldBatchnormToConv2D")
class FoldBatchnormToConv2D:
    """Fold inference-mode batch_norm into the conv2d before it, soundly (module docstring)."""

    def __init__(self, assume_bounded_activations: bool = False) -> None:
        self.assume_bounded_activations = assume_bounded_activations

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        if func.attrs is not None and "Primitive" in func.attrs and int(func.attrs["Primitive"]) != 0:
            return func
        values = _bindings(func)
        uses = _Uses()
        uses.visit_expr(func)
        folds: dict[Any, _Fold] = {}
        dropped: set[Any] = set()
        for var, value in values.items():
            if not (isinstance(value, relax.TupleGetItem) and int(value.index) == 0):
                continue
            bn_var = value.tuple_value
            bn = values.get(bn_var)
            if not (isinstance(bn, relax.Call) and bn.op.same_as(_BATCH_NORM)):
                continue
            conv_var = bn.args[0]
            conv = values.get(conv_var)
            if not (isinstance(conv, relax.Call) and conv.op.same_as(_CONV2D)):
                continue
            if uses.count[bn_var] != 1 or uses.count[conv_var] != 1:
                continue  # statistics in use, or the conv output has another consumer
            fold = _plan(conv, conv_var, bn, self.assume_bounded_activations)
            if fold is not None:
                folds[var] = fold
                dropped.update((bn_var, conv_var))
        if not folds:
            return func
        return _Rewrite(mod, folds, dropped).visit_expr(func)
