"""Print the TVM API facts ``fuzz/backends/tvm/compat.py`` depends on, for the installed TVM.

Run it under each supported release (``make setup TVM=0.26 && .venv/bin/python
tools/probe_tvm_api.py``) and compare with the table in ``fuzz/backends/tvm/compat.py``. It imports
only TVM, so it runs on a release the fuzzer does not support yet.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax


def main() -> None:
    print("apache-tvm", tvm.__version__)
    tensor_type = getattr(relax, "TensorStructInfo", None) or relax.TensorType
    var = relax.Var("x", tensor_type((2,), "float32"))
    const = relax.const(np.ones((2,), "float32"))
    x = relax.Var("x", tensor_type((1, 1, 2, 2), "float32"))
    w = relax.Var("w", tensor_type((1, 1, 1, 1), "float32"))
    facts = {
        "relax.TensorStructInfo exists": hasattr(relax, "TensorStructInfo"),
        "relax.TensorType is": getattr(relax, "TensorType", None),
        "expr.ty / expr.struct_info": (hasattr(var, "ty"), hasattr(var, "struct_info")),
        "var.name / var.name_hint": (hasattr(var, "name"), hasattr(var, "name_hint")),
        "relax.const returns": type(const).__module__ + "." + type(const).__name__,
        "const.value / const.data": (hasattr(const, "value"), hasattr(const, "data")),
        "PyExprMutator constant method": [
            m for m in relax.PyExprMutator._tvm_metadata["methods"] if "const" in m
        ],
        "unset conv2d out_dtype": repr(relax.op.nn.conv2d(x, w).attrs.out_dtype),
        "tvm.runtime.tensor exists": hasattr(tvm.runtime, "tensor"),
        "well_formed raises (check_well_formed exists)": hasattr(relax.analysis, "check_well_formed"),
        "FoldBatchnormToConv2D exists": hasattr(relax.transform, "FoldBatchnormToConv2D"),
    }
    for what, value in facts.items():
        print(f"{what:48} {value}")


if __name__ == "__main__":
    main()
