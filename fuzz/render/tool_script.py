"""Reproducers and issues for the ONNX model tools (onnxoptimizer, onnxslim, onnxsim): a
script that needs only the tool, ``onnx``, ``onnxruntime`` and ``numpy``, and an issue in the
common GitHub bug shape (describe the bug, to reproduce, expected behavior, environment)
naming the code that folds.

The script writes the entry's model with ``onnx.helper`` (exact values), calls the tool
exactly as the fuzzer called it (:data:`fuzz.backends.MODEL_TOOLS`), runs the model given
and the model written on ONNX Runtime with every graph optimization off, prints both, and
exits 1 while the bug shows (the same checks as every script:
:func:`fuzz.render.script_parts.bug_lines`), 0 once it is fixed.
"""

from __future__ import annotations

from fuzz.backends import MODEL_TOOLS
from fuzz.render.script_parts import onnx_script_head, verdict_lines
from fuzz.store.corpus import Entry

__all__ = ["render_tool_script"]


def render_tool_script(entry: Entry) -> str:
    """A standalone reproducer for an entry found against a model tool."""
    tool = MODEL_TOOLS[entry.pass_name]
    version = entry.provenance.get(entry.pass_name, "")
    title = f"Reproducer: {entry.signature}: {tool.call}" + (
        f" ({tool.module} {version})." if version else "."
    )
    lines = [
        *onnx_script_head(
            entry, title, f"{tool.module}, onnx, onnxruntime and numpy", [f"import {tool.module}"]
        ),
        "def interface(m):",
        "    def typed(v):",
        "        t = v.type.tensor_type",
        "        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name",
        "        return v.name, dtype, [d.dim_value for d in t.shape.dim]",
        "",
        "    return [typed(v) for v in caller_inputs(m)], [typed(v) for v in m.graph.output]",
        "",
        "",
        "before_out = run(model)  # ONNX Runtime with every graph optimization off: the model as written",
        'print("the model as given:", *before_out, sep="\\n")',
        "given, given_interface = model.SerializeToString(), interface(model)",
        "try:",
        f"    written = {tool.call}",
        "except Exception as exc:",
        f'    print(f"BUG: {tool.call} raises {{type(exc).__name__}}: {{exc}}")',
        "    sys.exit(1)",
        "try:",
        "    onnx.checker.check_model(written, full_check=True)",
        "except Exception as exc:",
        f'    print(f"BUG: onnx.checker rejects the model {tool.module} wrote: {{exc}}")',
        "    sys.exit(1)",
        "try:",
        "    after_out = run(written)",
        "except Exception as exc:",
        f'    print(f"BUG: ONNX Runtime refuses the model {tool.module} wrote: {{exc}}")',
        "    sys.exit(1)",
        "if interface(written) != given_interface:",
        f'    print(f"BUG: {tool.module} changed the model\'s inputs and outputs from {{given_interface}} "',
        '          f"to {interface(written)}")',
        "    sys.exit(1)",
        "if model.SerializeToString() != given:",
        f'    print("BUG: {tool.call} changed the model it was given; its inputs are now:",',
        "          interface(model)[0])",
        "    sys.exit(1)",
        f'print("the model {tool.module} wrote:", *after_out, sep="\\n")',
        *verdict_lines(entry, f"{tool.module} behaves correctly on this model"),
    ]
    return "\n".join(lines) + "\n"
