"""Issues for ONNX Runtime's fold, in the shape of ONNX Runtime's bug template (describe
the issue, to reproduce, urgency, platform, OS version, installation, version, API,
architecture, execution provider), naming the rewrite at fault: ``ConvBNFusion`` in
``onnxruntime/core/optimizer/conv_bn_fusion.cc``, which folds at ``ORT_ENABLE_BASIC``.
"""

from __future__ import annotations

from fuzz.oracle.verdict import Symptom
from fuzz.render.issue import Issue
from fuzz.render.ort_script import RULE, level_name, render_ort_script
from fuzz.render.wording import wording
from fuzz.store.corpus import Entry

__all__ = ["ort_issue"]


def ort_issue(entry: Entry, actual: str, minimal: list[str], shown: str) -> Issue:
    """The issue for an entry found against ``onnxruntime:LEVEL``: ``actual`` is what the
    outputs show (:mod:`fuzz.render.report` words it), ``minimal`` the minimality notes, ``shown``
    the entry's non-default attributes."""
    level = level_name(entry)
    words = wording(entry.symptom, entry.symptom_name)
    version = entry.provenance.get("onnxruntime", "unknown")
    title = f"[Bug] Conv+BatchNormalization fusion at {level} {words.title(entry.error_type)}" + (
        f" ({shown})" if shown else ""
    )
    overflow = entry.symptom is Symptom.FINITE_TO_NONFINITE
    why = (
        [
            f"{RULE} multiplies the Conv weights by `scale / sqrt(var + epsilon)` in the model's "
            "dtype. Where that product leaves the dtype's range the folded weights are inf, and an "
            "input that meets them with a zero gives NaN: the unfused graph's output is finite.",
            "",
        ]
        if overflow
        else [f"The rewrite at fault is {RULE}, which runs at {level}.", ""]
    )
    body = "\n".join(
        [
            "### Describe the issue",
            "",
            f"With graph optimizations at `{level}` (the default of every `InferenceSession`), a "
            f"Conv followed by BatchNormalization gives other outputs than the same model with "
            f"`ORT_DISABLE_ALL`. Expected: {words.expected}",
            "",
            f"Actual: {actual}",
            "",
            *why,
            "### To reproduce",
            "",
            "Save as `repro.py` and run `python repro.py` (it needs onnx, onnxruntime and numpy, "
            "and exits 1 while the bug shows):",
            "",
            "```python",
            render_ort_script(entry).rstrip("\n"),
            "```",
            "",
            "The model was shrunk and simplified by a property-based fuzzer (bnfold-fuzz); each "
            "remaining non-default attribute and value was simplified once more and the bug re-checked:",
            "",
            *minimal,
            "",
            "### Urgency",
            "",
            "None (found by fuzzing; no deadline).",
            "",
            "### Platform",
            "",
            "Linux",
            "",
            "### OS Version",
            "",
            str(entry.provenance.get("platform", "unknown")),
            "",
            "### ONNX Runtime Installation",
            "",
            "Released Package",
            "",
            "### ONNX Runtime Version or Commit ID",
            "",
            str(version),
            "",
            "### ONNX Runtime API",
            "",
            "Python",
            "",
            "### Architecture",
            "",
            "X64",
            "",
            "### Execution Provider",
            "",
            "Default CPU",
            "",
            "(bnfold-fuzz's signature for this bug, used to avoid duplicate reports, is "
            f"`{entry.signature}`.)",
            "",
        ]
    )
    return Issue(
        f"onnxruntime:{entry.signature}",
        title,
        body,
        (entry.signature,),
        entry.pass_name,
        project="microsoft/onnxruntime",
    )
