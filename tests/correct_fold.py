"""A deliberately narrow, correct batch_norm fold: the fuzzer's no-false-alarm control.

It folds only what it can prove right and leaves everything else untouched:
float32 conv2d, NCHW data, OIHW kernel, no out_dtype change, batch_norm on the
channel axis (1 or -3) in inference mode, every operand a constant, and per
channel ``|s| <= 1`` with no folded weight underflowing (so the folded conv can
neither overflow nor lose precision where the unfolded one does not). Folded
constants are computed in float64 and rounded once. ``scale`` and ``center``
are honoured. Any finding of the fuzzer against this pass is a false alarm.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tvm import relax
from tvm.relax.dpl import TupleGetItemPattern, is_const, is_op, rewrite_call, wildcard

from fuzz.backends.tvm.compat import constant_value

FLOAT32_MIN_NORMAL = float(np.finfo(np.float32).tiny)


def _array(const: Any) -> np.ndarray[Any, Any]:
    return np.asarray(constant_value(const), dtype=np.float64)


@relax.transform.function_pass(opt_level=0)
class CorrectFold:
    def __init__(self) -> None:
        self.x = wildcard()
        self.w = is_const()
        self.conv = is_op("relax.nn.conv2d")(self.x, self.w)
        self.params = [is_const() for _ in range(4)]
        self.bn = is_op("relax.nn.batch_norm")(self.conv, *self.params)
        self.pattern = TupleGetItemPattern(self.bn, 0)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        if "Primitive" in func.attrs and func.attrs["Primitive"] != 0:
            return func
        return rewrite_call(self.pattern, self._rewrite, func)

    def _rewrite(self, expr: Any, matches: Any) -> Any:
        conv, bn = matches[self.conv], matches[self.bn]
        ca, ba = conv.attrs, bn.attrs
        w_const = matches[self.w]
        if (
            constant_value(w_const).dtype != np.float32
            or ca.data_layout != "NCHW"
            or ca.kernel_layout != "OIHW"
            or ca.out_layout != "NCHW"
            or str(ca.out_dtype) not in ("None", "", "float32", "void")
            or int(ba.axis) not in (1, -3)
            or bool(ba.training)
        ):
            return expr
        gamma, beta, mean, var = (_array(matches[p]) for p in self.params)
        eps = float(np.float32(float(ba.epsilon)))
        with np.errstate(all="ignore"):
            s = (gamma if ba.scale else 1.0) / np.sqrt(var + eps)
            w = _array(w_const)
            folded_w = w * s.reshape(-1, 1, 1, 1)
        if not np.all(np.isfinite(s)) or np.any(np.abs(s) > 1):
            return expr
        nonzero = folded_w[folded_w != 0]
        if np.any(np.abs(nonzero) < FLOAT32_MIN_NORMAL):
            return expr
        bias = (beta if ba.center else 0.0) - mean * s
        w_new = relax.const(folded_w.astype(np.float32))
        b_new = relax.const(bias.astype(np.float32).reshape(1, -1, 1, 1))
        return relax.op.add(relax.Call(conv.op, (matches[self.x], w_new), ca), b_new)
