"""Issues for the ONNX model tools, in the shape their trackers ask for (describe the bug,
to reproduce, expected behavior, environment, additional context), naming the code that
folds (:data:`fuzz.backends.MODEL_TOOLS`) and going to the tool's own repository."""

from __future__ import annotations

from fuzz.backends import MODEL_TOOLS
from fuzz.model.attributes import classify
from fuzz.oracle.verdict import Symptom
from fuzz.render.issue import Issue
from fuzz.render.tool_script import render_tool_script
from fuzz.render.wording import wording
from fuzz.store.corpus import Entry

__all__ = ["tool_issue"]


#: Symptoms shown by the outputs of the model written (else by the model or the call itself).
NUMBERS = (Symptom.FINITE_TO_NONFINITE, Symptom.OUT_OF_TOLERANCE)


#: How a model tool's symptom is put where the shared wording speaks of IR.
HEADLINES = {Symptom.ILL_FORMED: "writes a model that onnx.checker's full check rejects"}


def _description(entry: Entry, call: str, headline: str) -> str:
    if entry.symptom in NUMBERS:
        return (
            f"`{call}` rewrites a Conv followed by BatchNormalization into a model whose outputs differ "
            "from the model it was given (both run on ONNX Runtime with every graph optimization off)."
        )
    return (
        f"`{call}` {headline} on a model with a Conv followed by BatchNormalization; the model passes "
        "`onnx.checker`'s full check and runs on ONNX Runtime."
    )


def tool_issue(entry: Entry, actual: str, minimal: list[str], shown: str) -> Issue:
    """The issue for an entry found against a model tool: ``actual`` is what the outputs
    show (:mod:`fuzz.render.report` words it), ``minimal`` the minimality notes, ``shown`` the
    entry's non-default attributes."""
    tool = MODEL_TOOLS[entry.pass_name]
    words = wording(entry.symptom, entry.symptom_name)
    versions = ", ".join(
        f"{name} {entry.provenance[name]}"
        for name in (entry.pass_name, "onnxruntime")
        if name in entry.provenance
    )
    headline = HEADLINES.get(entry.symptom) if entry.symptom is not None else None
    headline = headline or words.title(entry.error_type)
    title = f"[Bug] `{tool.call}` {headline} on a Conv followed by BatchNormalization" + (
        f" ({shown})" if shown else ""
    )
    overflow = (
        [
            "The fold multiplies the Conv weights by `scale / sqrt(var + epsilon)` in the model's dtype; "
            "where that product leaves the dtype's range the folded weights are inf, and an input that "
            "meets them with a zero gives NaN, while the model as given computes a finite output.",
            "",
        ]
        if entry.symptom is Symptom.FINITE_TO_NONFINITE
        else []
    )
    body = "\n".join(
        [
            "### Describe the bug",
            "",
            _description(entry, tool.call, headline),
            f"The code at fault is {tool.fault(classify(entry.case))}.",
            "",
            f"Actual: {actual}",
            "",
            *overflow,
            "### To Reproduce",
            "",
            f"Save as `repro.py` and run `python repro.py` (it needs {tool.module}, onnx, onnxruntime and "
            "numpy, and exits 1 while the bug shows):",
            "",
            "```python",
            render_tool_script(entry).rstrip("\n"),
            "```",
            "",
            "### Expected behavior",
            "",
            words.expected,
            "",
            "### Environment",
            "",
            f"- {versions or 'versions not recorded'}",
            f"- Python {entry.provenance.get('python', 'unknown')}, "
            f"{entry.provenance.get('platform', 'unknown')}",
            "",
            "### Additional context",
            "",
            "Found, shrunk and simplified by a property-based fuzzer (bnfold-fuzz); each remaining "
            "non-default attribute and value was simplified once more and the bug re-checked:",
            "",
            *minimal,
            "",
            "(bnfold-fuzz's signature for this bug, used to avoid duplicate reports, is "
            f"`{entry.signature}`.)",
            "",
        ]
    )
    return Issue(
        f"{entry.pass_name}:{entry.signature}",
        title,
        body,
        (entry.signature,),
        entry.pass_name,
        project=tool.project,
    )
