"""A pass under test that crashes the process on purpose, for the crash-isolation tests.

:class:`SegfaultOnTraining` is upstream's fold, except that it dereferences a null pointer
(a real SIGSEGV, not an exception) on a module with a training-mode batch_norm;
:class:`SegfaultOrHang` also never returns on one with ``center=False``. Resolve them as
``tests.crashing_pass:SegfaultOnTraining`` and ``tests.crashing_pass:SegfaultOrHang``.
"""

from __future__ import annotations

import ctypes
import threading
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


@tvm.transform.module_pass(opt_level=0, name="SegfaultOnTraining")
def SegfaultOnTraining(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
    if any(bool(a.training) for a in _batch_norm_attrs(mod)):
        ctypes.string_at(0)  # SIGSEGV
    return relax.transform.FoldBatchnormToConv2D()(mod)


@tvm.transform.module_pass(opt_level=0, name="SegfaultOrHang")
def SegfaultOrHang(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
    if any(not bool(a.center) for a in _batch_norm_attrs(mod)):
        threading.Event().wait()  # hangs for good: the isolation's timeout has to end it
    return SegfaultOnTraining(mod)
