"""Issues for OpenVINO's fold, in the shape of OpenVINO's bug template (OpenVINO version,
operating system, device used for inference, framework, model used, issue description, step
by step reproduction, relevant log output), naming the transformations that fold
(:data:`fuzz.render.openvino_script.RULES`) or, for a model the ONNX frontend cannot read, its
BatchNormalization converter."""

from __future__ import annotations

from fuzz.model.attributes import classify
from fuzz.oracle.verdict import Symptom
from fuzz.render.issue import Issue
from fuzz.render.openvino_script import CONFIG, RULES, render_openvino_script
from fuzz.render.wording import wording
from fuzz.store.corpus import Entry

__all__ = ["openvino_issue"]

#: What a compile that raises should have done.
EXPECTED_COMPILE = (
    "The model compiles and runs, as it does on ONNX Runtime: it passes `onnx.checker`'s full check, "
    "and every BatchNormalization attribute in it is valid."
)
#: Where OpenVINO's ONNX frontend converts BatchNormalization (what fails on ``spatial=0``).
FRONTEND = (
    "the ONNX frontend's BatchNormalization converter (`src/frontends/onnx/frontend/src/op/batch_norm.cpp`)"
)


def openvino_issue(entry: Entry, actual: str, minimal: list[str], shown: str) -> Issue:
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
            "Save as `repro.py` and run `python repro.py` (it needs openvino, onnx, onnxruntime and numpy, "
            "and exits 1 while the bug shows):",
            "",
            "```python",
            render_openvino_script(entry).rstrip("\n"),
            "```",
            "",
            "The model was shrunk and simplified by a property-based fuzzer (bnfold-fuzz); each remaining "
            "non-default attribute and value was simplified once more and the bug re-checked:",
            "",
            *minimal,
            "",
            "### Relevant log output",
            "",
            "```shell",
            entry.message,
            "```",
            "",
            "(bnfold-fuzz's signature for this bug, used to avoid duplicate reports, is "
            f"`{entry.signature}`.)",
            "",
        ]
    )
    return Issue(
        f"openvino:{entry.signature}",
        title,
        body,
        (entry.signature,),
        entry.pass_name,
        project="openvinotoolkit/openvino",
    )
