"""Compatibility shims: every TVM API name that moved between 0.25, 0.26 and 0.27.

Other modules never spell a version-dependent TVM name themselves; they import it
from here. Each shim tries the 0.27 name first and falls back to the older one:

===========================  ===============================  =============================
what                         0.27                             older
===========================  ===============================  =============================
:data:`tirx`                 ``tvm.tirx``                     ``tvm.tir``
:data:`TensorType`           ``relax.TensorType``             ``relax.TensorStructInfo``
:func:`type_of`              ``expr.ty``                      ``expr.struct_info``
:func:`var_name`             ``var.name``                     ``var.name_hint``
:func:`to_device`            ``tvm.runtime.tensor``           ``tvm.nd.array``
:data:`RuntimeTensor`        ``tvm.runtime.Tensor``           ``tvm.nd.NDArray``
:data:`Constant`             ``tvm.ir.GenericConst``          ``relax.Constant``
:func:`constant_tensor`      ``const.value``                  ``const.data``
:func:`structural_equal`     ``tvm_ffi.structural_equal``     ``tvm.ir.structural_equal``
:func:`summarise_error`      message, backtrace apart         C++ backtrace in the message
:func:`assert_well_formed`   ``well_formed`` raises           ``well_formed`` returns bool
===========================  ===============================  =============================

Key idea: keep this module tiny and flat, so supporting another TVM version means
editing one table, not hunting through the fuzzer.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

import numpy as np
import tvm
from tvm import relax

__all__ = [
    "Constant",
    "NotWellFormed",
    "RuntimeTensor",
    "TensorType",
    "assert_well_formed",
    "constant_tensor",
    "constant_value",
    "structural_equal",
    "summarise_error",
    "tirx",
    "to_device",
    "tvm_version",
    "type_of",
    "var_name",
]


def _tirx() -> ModuleType:
    module = getattr(tvm, "tirx", None)
    if module is None:  # TVM < 0.27
        module = tvm.tir
    assert isinstance(module, ModuleType)
    return module


#: The TIR namespace (``tvm.tirx`` in 0.27, ``tvm.tir`` before).
tirx: ModuleType = _tirx()

#: The Relax tensor type constructor: ``TensorType(shape, dtype)``.
TensorType: Any = getattr(relax, "TensorType", None) or relax.TensorStructInfo


#: The class of Relax tensor constants (what ``relax.const`` returns).
Constant: Any = getattr(tvm.ir, "GenericConst", None) or relax.Constant


def constant_tensor(const: Any) -> Any:
    """The value of a Relax tensor constant, as the runtime tensor it holds (no copy)."""
    value = getattr(const, "value", None)
    return value if value is not None else const.data


def constant_value(const: Any) -> np.ndarray[Any, Any]:
    """The value of a Relax tensor constant, as a NumPy array of its own dtype."""
    array: np.ndarray[Any, Any] = constant_tensor(const).numpy()
    return array


#: The class of runtime tensors the VM returns.
RuntimeTensor: Any = getattr(tvm.runtime, "Tensor", None) or tvm.nd.NDArray


def tvm_version() -> str:
    """The installed TVM version string, e.g. ``"0.27.0.post1"``."""
    return str(tvm.__version__)


def type_of(expr: Any) -> Any:
    """The Relax type (struct info) of an expression."""
    ty = getattr(expr, "ty", None)
    return ty if ty is not None else expr.struct_info


def var_name(var: Any) -> str:
    """The name of a Relax variable."""
    name = getattr(var, "name", None)
    return str(name if name is not None else var.name_hint)


def to_device(array: np.ndarray[Any, Any], device: Any = None) -> Any:
    """Copy a NumPy array (any dtype, bfloat16 via ml_dtypes) to a TVM runtime tensor."""
    make = getattr(tvm.runtime, "tensor", None)
    if make is None:  # before the tvm-ffi rename
        make = tvm.nd.array
    return make(np.ascontiguousarray(array), device=device or tvm.cpu())


#: Longest message :func:`summarise_error` returns.
MAX_MESSAGE = 600

# Lines or fragments that carry no information for a reader of a Failure.
_NOISE = re.compile(r"# Metadata omitted\. Use show_meta=True in script\(\) method to show it\.\s*")
# ``ir.Op(span=None, ..., name="relax.nn.batch_norm", ...)`` -> ``Op(relax.nn.batch_norm)``
_OP_REPR = re.compile(r'ir\.Op\(span=.*?name="([^"]+)".*?support_level=\d+\)')
# Backtrace lines: Python's, or TVM's C++ frames (before tvm-ffi, TVM put the C++
# backtrace inside the message, ahead of the text that matters).
_BACKTRACE = re.compile(r"^\s*(Traceback \(|Stack trace:|File \"|\d+: |at |\[bt\])")


def summarise_error(exc: BaseException) -> str:
    """An exception's message on one line, without backtraces or IR metadata notes."""
    text = _OP_REPR.sub(r"Op(\1)", _NOISE.sub("", str(exc)))
    lines = [line.strip() for line in text.splitlines() if not _BACKTRACE.match(line)]
    message = " ".join(line for line in lines if line) or type(exc).__name__
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


class NotWellFormed(Exception):
    """Raised by :func:`assert_well_formed` where TVM's check only answers False."""


def assert_well_formed(mod: Any) -> None:
    """Raise if ``mod`` is not a well-formed Relax module.

    In 0.27 ``relax.analysis.well_formed`` raises on the first violation (with a
    precise message) and returns None; ``check_well_formed`` is the boolean form.
    Before, ``well_formed`` returned a bool.
    """
    if hasattr(relax.analysis, "check_well_formed"):
        relax.analysis.well_formed(mod)
    elif not relax.analysis.well_formed(mod):
        raise NotWellFormed("relax.analysis.well_formed returned False")


def structural_equal(lhs: Any, rhs: Any) -> bool:
    """Structural equality of two IR objects (modules, functions, expressions)."""
    try:
        import tvm_ffi
    except ImportError:  # before tvm-ffi was split out
        return bool(tvm.ir.structural_equal(lhs, rhs))
    return bool(tvm_ffi.structural_equal(lhs, rhs))
