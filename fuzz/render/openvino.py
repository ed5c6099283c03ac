"""What goes to OpenVINO (``openvino``): a reproducer script that needs only ``openvino``,
``onnx``, ``onnxruntime`` and ``numpy``, and an issue in the shape of OpenVINO's bug
template (OpenVINO version, operating system, device used for inference, framework, model
used, issue description, step by step reproduction, relevant log output), naming the
transformations that fold (:data:`RULES`) or, for a model the ONNX frontend cannot read,
its BatchNormalization converter.

The script writes the entry's model with ``onnx.helper`` (exact values), runs it on ONNX
Runtime with every graph optimization off (OpenVINO has no unfolded mode), compiles it for
OpenVINO's CPU at the model's precision (:data:`CONFIG`, as the backend does), runs that,
prints both, and exits 1 while the bug shows (the same checks as every script:
:func:`fuzz.render.script_parts.bug_lines`), 0 once it is fixed.
"""

from __future__ import annotations

from fuzz.backends import OPENVINO_CONFIG as CONFIG
from fuzz.model.attributes import classify
from fuzz.oracle.verdict import Symptom
from fuzz.render.issue import Issue
from fuzz.render.script_parts import onnx_script_head, verdict_lines
from fuzz.render.skeleton import (
    MINIMALITY,
    footnote,
    one_entry,
    one_entry_issue,
    steps,
)
from fuzz.render.wording import wording
from fuzz.store.corpus import Entry

__all__ = ["CONFIG", "RULES", "issue", "script"]

#: The transformations that fold a batch norm into a convolution, where OpenVINO's source has them.
RULES = (
    "`BatchNormDecomposition` (`src/common/transformations/src/transformations/op_conversions/"
    "batch_norm_decomposition.cpp`) and `ConvolutionMultiplyFusion` (`src/common/transformations/src/"
    "transformations/common_optimizations/conv_mul_fusion.cpp`)"
)


def script(entry: Entry) -> str:
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


#: What a compile that raises should have done.
EXPECTED_COMPILE = (
    "The model compiles and runs, as it does on ONNX Runtime: it passes `onnx.checker`'s full check, "
    "and every BatchNormalization attribute in it is valid."
)
#: Where OpenVINO's ONNX frontend converts BatchNormalization (what fails on ``spatial=0``).
FRONTEND = (
    "the ONNX frontend's BatchNormalization converter (`src/frontends/onnx/frontend/src/op/batch_norm.cpp`)"
)


def _issue(entry: Entry, actual: str, minimal: list[str], shown: str) -> Issue:
    """The issue for an entry found against ``openvino``: ``actual`` is what the outputs show
    (:mod:`fuzz.render.report` words it), ``minimal`` the minimality notes, ``shown`` the entry's
    non-default attributes."""
    words = wording(entry.symptom, entry.symptom_name)
    # a BatchNormalization with spatial=0 never reaches the fold: the frontend rejects it
    per_position = classify(entry.case)["spatial"] == "per-position"
    expected = EXPECTED_COMPILE if entry.symptom is Symptom.PASS_EXCEPTION else words.expected
    title = f"[Bug]: Conv+BatchNormalization on CPU {words.title(entry.error_type)}" + (
        f" ({shown})" if shown else ""
    )
    why = (
        [
            f"{RULES} multiply the Convolution weights by `scale / sqrt(var + epsilon)` in the model's "
            "precision. Where that product leaves the range the folded weights are inf, and an input "
            "that meets them with a zero gives NaN: the model's output is finite.",
        ]
        if entry.symptom is Symptom.FINITE_TO_NONFINITE
        else [f"The code at fault is {FRONTEND if per_position else RULES}."]
    )
    body = "\n".join(
        [
            "### OpenVINO Version",
            "",
            str(entry.provenance.get("openvino", "unknown")),
            "",
            "### Operating System",
            "",
            f"Other (Please specify in description): {entry.provenance.get('platform', 'unknown')}",
            "",
            "### Device used for inference",
            "",
            "CPU",
            "",
            "### Framework",
            "",
            "ONNX",
            "",
            "### Model used",
            "",
            "A Conv followed by BatchNormalization, written with `onnx.helper` in the script below.",
            "",
            "### Issue description",
            "",
            f"Compiling an ONNX model with a Conv followed by BatchNormalization for the CPU "
            f'(`core.compile_model(path, "CPU", {CONFIG!r})`, the model\'s precision) '
            f"{words.title(entry.error_type)}. Expected: {expected} (The reference is the same model on "
            "ONNX Runtime with every graph optimization off, which stays within rounding error of the "
            "exact result.)",
            "",
            f"Actual: {actual}",
            "",
            *why,
            "",
            "### Step-by-step reproduction",
            "",
            *steps(
                script(entry),
                "(it needs openvino, onnx, onnxruntime and numpy, and exits 1 while the bug shows)",
            ),
            MINIMALITY,
            "",
            *minimal,
            "",
            "### Relevant log output",
            "",
            "```shell",
            entry.message,
            "```",
            "",
            footnote([entry.signature]),
            "",
        ]
    )
    return one_entry_issue(entry, title, body)


#: The issue of an entry (one per issue: its signature is its root cause).
issue = one_entry(_issue)
