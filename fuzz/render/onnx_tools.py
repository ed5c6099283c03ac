"""What goes to an ONNX model tool's project (onnxoptimizer, onnxslim, onnxsim): a
reproducer script that needs only the tool, ``onnx``, ``onnxruntime`` and ``numpy``, and an
issue in the shape their trackers ask for (describe the bug, to reproduce, expected
behavior, environment, additional context), naming the code that folds
(:data:`fuzz.backends.MODEL_TOOLS`).

The script writes the entry's model with ``onnx.helper`` (exact values), calls the tool
exactly as the fuzzer called it, runs the model given and the model written on ONNX
Runtime with every graph optimization off, prints both, and exits 1 while the bug shows
(the same checks as every script: :func:`fuzz.render.script_parts.bug_lines`), 0 once it
is fixed.
"""

from __future__ import annotations

from fuzz.backends import MODEL_TOOLS
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

__all__ = ["issue", "script"]


def script(entry: Entry) -> str:
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


def _issue(entry: Entry, actual: str, minimal: list[str], shown: str) -> Issue:
    """The issue for an entry found against a model tool: ``actual`` is what the outputs
    show (:mod:`fuzz.render.report` words it), ``minimal`` the minimality notes, ``shown`` the
    entry's non-default attributes."""
    if entry.symptom is Symptom.ILL_FORMED:
        checker = "`onnx.checker.check_model(written, full_check=True)`"
        actual = f"{checker} fails to accept the model written: {actual}"
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
            *steps(
                script(entry),
                f"(it needs {tool.module}, onnx, onnxruntime and numpy, and exits 1 while the bug shows)",
            ),
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
            MINIMALITY,
            "",
            *minimal,
            "",
            footnote([entry.signature]),
            "",
        ]
    )
    return one_entry_issue(entry, title, body)


#: The issue of an entry (one per issue: its signature is its root cause).
issue = one_entry(_issue)
