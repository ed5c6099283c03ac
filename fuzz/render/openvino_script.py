"""Reproducers for OpenVINO's fold: a script that needs only ``openvino``, ``onnx``,
``onnxruntime`` and ``numpy``.

The script writes the entry's model with ``onnx.helper`` (exact values), runs it on ONNX
Runtime with every graph optimization off (OpenVINO has no unfolded mode), compiles it for
OpenVINO's CPU at the model's precision (:data:`CONFIG`, as the backend does), runs that,
prints both, and exits 1 while the bug shows (the same checks as every script:
:func:`fuzz.render.script_parts.bug_lines`), 0 once it is fixed.
"""

from __future__ import annotations

from fuzz.backends import OPENVINO_CONFIG as CONFIG
from fuzz.render.script_parts import onnx_script_head, verdict_lines
from fuzz.store.corpus import Entry

__all__ = ["CONFIG", "RULES", "render_openvino_script"]

#: The transformations that fold a batch norm into a convolution, where OpenVINO's source has them.
RULES = (
    "`BatchNormDecomposition` (`src/common/transformations/src/transformations/op_conversions/"
    "batch_norm_decomposition.cpp`) and `ConvolutionMultiplyFusion` (`src/common/transformations/src/"
    "transformations/common_optimizations/conv_mul_fusion.cpp`)"
)


def render_openvino_script(entry: Entry) -> str:
    """A standalone reproducer for an entry found against ``openvino``."""
    version = entry.provenance.get("openvino", "")
    title = f"Reproducer: {entry.signature} in OpenVINO's CPU plugin" + (
        f" (openvino {version})." if version else "."
    )
    lines = [
        *onnx_script_head(entry, title, "openvino, onnx, onnxruntime and numpy", ["import openvino as ov"]),
        "before_out = run(model)  # ONNX Runtime with every graph optimization off: the model as written",
        'print("the model on ONNX Runtime, unoptimized:", *before_out, sep="\\n")',
        'onnx.save(model, "model.onnx")',
        "try:",
        "    # at the model's precision: by default the CPU plugin may compute in bfloat16",
        f'    compiled = ov.Core().compile_model("model.onnx", "CPU", {CONFIG!r})',
        "except Exception as exc:",
        '    print(f"BUG: OpenVINO cannot compile a model ONNX Runtime runs: {exc}")',
        "    sys.exit(1)",
        "names = [next((n for n in feeds if n in p.get_names()), p.get_any_name()) for p in compiled.inputs]",
        "given = [i.name for i in caller_inputs(model)]",
        "if names != given:",
        "    print(f\"BUG: the compiled model's inputs are {names}, the model's {given}\")",
        "    sys.exit(1)",
        "results = compiled(feeds)",
        "after_out = [np.asarray(results[port]) for port in compiled.outputs]",
        'print("compiled by OpenVINO for the CPU (the batch norm folded):", *after_out, sep="\\n")',
        *verdict_lines(entry, "OpenVINO's fold behaves correctly on this model"),
    ]
    return "\n".join(lines) + "\n"
