r"""Compatibility shims: every TVM API name that differs between 0.25, 0.26 and 0.27.

Other modules never spell a version-dependent TVM name themselves; they import it
from here. The table is what ``tools/probe_tvm_api.py`` printed for each version
(apache-tvm 0.25.0.post1, 0.26.0, 0.27.0.post1 from PyPI); every other name the
fuzzer uses is the same in all three:

========================  ========================  ========================  ======================
what                      0.25                      0.26                      0.27
========================  ========================  ========================  ======================
:data:`TensorType`        relax.TensorStructInfo    relax.TensorType          relax.TensorType
:func:`type_of`           expr.struct_info          expr.ty                   expr.ty
:func:`var_name`          var.name_hint             var.name                  var.name
:data:`Constant`          relax.Constant            relax.Constant            tvm.ir.GenericConst
:func:`constant_tensor`   const.data                const.data                const.value
:data:`VISIT_CONSTANT`    visit_constant\_          visit_constant\_          visit_generic_const\_
========================  ========================  ========================  ======================

In 0.25 ``relax.TensorType`` exists too, but is the old ``DynTensorType(ndim, dtype)``;
an unset conv2d ``out_dtype`` is None from 0.26 on and an empty (falsy) dtype in 0.25, so
code tests it for truth, never against None.
The three also need different ``apache-tvm-ffi`` releases: ``constraints/`` pins them.

Key idea: keep this module tiny and flat, so supporting another TVM version means
editing one table, not hunting through the fuzzer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm import relax

__all__ = [
    "VISIT_CONSTANT",
    "Constant",
    "RuntimeTensor",
    "TensorType",
    "assert_well_formed",
    "constant_tensor",
    "constant_value",
    "structural_equal",
    "to_device",
    "tvm_version",
    "type_of",
    "var_name",
]


#: The Relax tensor type constructor: ``TensorType(shape, dtype)``.
TensorType: Any = getattr(relax, "TensorStructInfo", None) or relax.TensorType


#: The class of Relax tensor constants (what ``relax.const`` returns).
Constant: Any = getattr(tvm.ir, "GenericConst", None) or relax.Constant

#: The name of the ``relax.PyExprMutator`` method TVM calls for a tensor constant.
VISIT_CONSTANT = "visit_generic_const_" if hasattr(tvm.ir, "GenericConst") else "visit_constant_"


def constant_tensor(const: Any) -> Any:
    """The value of a Relax tensor constant, as the runtime tensor it holds (no copy)."""
    value = getattr(const, "value", None)
    return value if value is not None else const.data


def constant_value(const: Any) -> np.ndarray[Any, Any]:
    """The value of a Relax tensor constant, as a NumPy array of its own dtype."""
    array: np.ndarray[Any, Any] = constant_tensor(const).numpy()
    return array


#: The class of runtime tensors the VM returns.
RuntimeTensor: Any = tvm.runtime.Tensor


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
    return tvm.runtime.tensor(np.ascontiguousarray(array), device=device or tvm.cpu())


def assert_well_formed(mod: Any) -> None:
    """Raise (with TVM's message for the first violation) if ``mod`` is not a
    well-formed Relax module. Same in all three versions."""
    relax.analysis.well_formed(mod)


def structural_equal(lhs: Any, rhs: Any) -> bool:
    """Structural equality of two IR objects (modules, functions, expressions)."""
    return bool(tvm_ffi.structural_equal(lhs, rhs))
