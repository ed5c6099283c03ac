"""A pass under test that crashes the process on purpose, for the crash-isolation tests.

:class:`CrashOnTraining` is upstream's fold, except that it dereferences a null pointer
(a real SIGSEGV, not an exception) on a module with a training-mode batch_norm, and
never returns on one with ``center=False``. Resolve it as
``tests.crashing_pass:CrashOnTraining``.
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

import tvm
from tvm import relax

_BATCH_NORM = tvm.ir.Op.get("relax.nn.batch_norm")


def _batch_norm_attrs(mod: tvm.IRModule) -> list[Any]:
    found: list[Any] = []

    def visit(expr: Any) -> None:
        if isinstance(expr, relax.Call) and expr.op.same_as(_BATCH_NORM):
            found.append(expr.attrs)

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return found


@tvm.transform.module_pass(opt_level=0, name="CrashOnTraining")
def CrashOnTraining(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
    attrs = _batch_norm_attrs(mod)
    if any(bool(a.training) for a in attrs):
        ctypes.string_at(0)  # SIGSEGV
    if any(not bool(a.center) for a in attrs):
        while True:
            time.sleep(1)
    return relax.transform.FoldBatchnormToConv2D()(mod)
