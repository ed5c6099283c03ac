"""Reproducers for ONNX Runtime's fold: a script that needs only ``onnx``, ``onnxruntime``
and ``numpy``.

The script writes the entry's model with ``onnx.helper`` (exact values), runs it with
``ORT_DISABLE_ALL`` and at the entry's level, prints both, and exits 1 while the bug shows
(the same checks as TVM's scripts: :func:`fuzz.render.script_parts.bug_lines`), 0 once it is
fixed.
"""

from __future__ import annotations

from fuzz.render.script_parts import onnx_script_head, verdict_lines
from fuzz.store.corpus import Entry

__all__ = ["LEVEL_NAMES", "RULE", "level_name", "render_ort_script"]

#: ``onnxruntime:LEVEL`` -> the optimization level's name in ONNX Runtime's API.
LEVEL_NAMES = {"basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}
#: The rewrite that fuses Conv and BatchNormalization, where ONNX Runtime's source has it.
RULE = "`ConvBNFusion` (`onnxruntime/core/optimizer/conv_bn_fusion.cc`)"


def level_name(entry: Entry) -> str:
    """The optimization level the entry's fold runs at, as ONNX Runtime's API names it."""
    return LEVEL_NAMES[entry.pass_name.partition(":")[2]]


def render_ort_script(entry: Entry) -> str:
    """A standalone reproducer for an entry found against ``onnxruntime:LEVEL``."""
    level = level_name(entry)
    version = entry.provenance.get("onnxruntime", "")
    title = f"Reproducer: {entry.signature} in ONNX Runtime's graph optimizer at {level}" + (
        f" (onnxruntime {version})." if version else "."
    )
    lines = [
        *onnx_script_head(entry, title, "onnx, onnxruntime and numpy", []),
        "before_out = run(model)",
        'print("without graph optimizations:", *before_out, sep="\\n")',
        "try:",
        f"    after_out = run(model, ort.GraphOptimizationLevel.{level})",
        "except Exception as exc:",
        f'    print(f"BUG: the session at {level} fails where the unoptimized one runs: {{exc}}")',
        "    sys.exit(1)",
        f'print("at {level} (Conv and BatchNormalization fused):", *after_out, sep="\\n")',
        *verdict_lines(entry, "the fusion behaves correctly on this model"),
    ]
    return "\n".join(lines) + "\n"
