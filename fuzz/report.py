"""Issue texts: a corpus entry as a GitHub issue a TVM maintainer receives.

:func:`render_issue` wraps the entry's reproducer (:func:`fuzz.script.render_script`)
in an issue: title, expected and actual behaviour (with the numbers of a fresh run),
where upstream's pass goes wrong (the line, quoted from the installed TVM, and the
arithmetic of this case), environment, the script inline, and a minimality note from
:func:`fuzz.minimize.minimality`, which simplifies each remaining attribute and value
on its own and re-checks the bug.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from fuzz.attributes import ATTRIBUTE_DEFAULTS, classify
from fuzz.case import Case, kernel_to_oihw
from fuzz.check import Checked, check
from fuzz.corpus import Entry
from fuzz.execute import Outputs
from fuzz.minimize import minimality
from fuzz.oracle import Symptom, describe
from fuzz.passes import resolve_pass
from fuzz.pipeline import DEFAULT_PIPELINE
from fuzz.script import pipeline_text, render_script
from fuzz.wording import wording

__all__ = ["render_issue", "render_script"]

# ---------------------------------------------------------------------------
# issue text


def _actual(entry: Entry, checked: Checked | None) -> str:
    """The actual behaviour in plain numbers a reader can check, from ``checked`` (the
    entry's case on its pass) or a fresh run."""
    if entry.isolated:
        stderr = entry.stderr
        tail = f"\n\nWhat the process printed to stderr:\n\n```\n{stderr}\n```" if stderr else ""
        return f"Checking this graph, {entry.message.removeprefix('the ')}.{tail}"
    if checked is None:
        checked = check(entry.case, resolve_pass(entry.pass_name), pipeline=entry.pipeline)
    ex, finding = checked.execution, checked.verdict.primary
    the = "the pass" if entry.pipeline is None else "the passes"
    if finding is None:
        return entry.message
    if finding.symptom is Symptom.PASS_EXCEPTION:
        raises = "The pass raises" if entry.pipeline is None else "Applying the passes raises"
        return f"{raises} `{finding.error_type}`: {finding.message}"
    before = ex.baseline if isinstance(ex.baseline, Outputs) else None
    after = ex.folded if isinstance(ex.folded, Outputs) else None
    if finding.symptom is Symptom.MUST_NOT_FOLD and before is not None and after is not None:
        first = [v.ravel()[:4].tolist() for v in (before.values[0], after.values[0])]
        reason = "; ".join(map(str, checked.verdict.must_not_fold))
        return (
            f"The pass folds the batch_norm although {reason}. Output 0 (first values) without the "
            f"pass: {first[0]}; after {the}: {first[1]}."
        )
    if finding.symptom is Symptom.SIGNATURE_CHANGE and before is not None and after is not None:
        return (
            f"Without {the} the function returns {describe(before)} (dtype[shape]); after {the} it "
            f"returns {describe(after)}, so anything downstream of this function sees a different tensor."
        )
    if finding.element is None or before is None or after is None:
        return finding.message
    k, index = finding.element
    where = f"output {k}, element [{', '.join(map(str, index))}]"
    b, a = float(before.values[k][index]), float(after.values[k][index])
    exact = float(checked.reference.outputs[k].value[index])
    bound = float(checked.reference.outputs[k].bound[index])
    dtype = entry.case.dtype
    if finding.symptom is Symptom.FINITE_TO_NONFINITE:
        return (
            f"Without {the}, {where} is {b!r}; after {the} it is {a!r}. The exact result is "
            f"{exact:.7g}, and every intermediate of the unfolded graph stays below half the largest "
            f"{dtype} value, so nothing but the fold can overflow."
        )
    return (
        f"Without {the}, {where} is {b!r}; after {the} it is {a!r}. The exact result "
        f"(computed in wider precision) is {exact!r}, and rounding in {dtype} can account for at most "
        f"{bound:.3g} of difference, so a change of {abs(a - b):.3g} is a bug, not rounding."
    )


#: Where upstream's pass lives in the apache-tvm wheel (and, under ``python/``, in TVM's tree).
UPSTREAM_MODULE = "tvm.relax.transform.fold_batch_norm_to_conv2d_for_inference"


def _upstream_line(snippet: str) -> list[str]:
    """The line of upstream's pass that contains ``snippet``, quoted with its place, or []
    when this TVM has no such line (another version, or the pass moved)."""
    spec = importlib.util.find_spec(UPSTREAM_MODULE)
    if spec is None or spec.origin is None:
        return []
    lines = Path(spec.origin).read_text().splitlines()
    number = next((n for n, line in enumerate(lines, 1) if snippet in line), None)
    if number is None:
        return []
    where = "python/" + UPSTREAM_MODULE.replace(".", "/") + ".py"
    return [f"`{where}`, line {number}:", "", "```python", lines[number - 1].strip(), "```", ""]


def _scale(case: Case) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Upstream's folded scale ``gamma / sqrt(var + eps)`` (eps rounded to float32, as it
    does) and folded weight ``W * scale`` in OIHW, both exact in float64."""
    block = case.blocks[0]
    assert block.conv is not None and block.weight is not None
    eps = float(np.float32(block.bn.epsilon))
    scale = block.gamma.float64() / np.sqrt(block.var.float64() + eps)
    weight = kernel_to_oihw(block.conv, block.weight.float64())
    return scale, weight * scale.reshape(-1, 1, 1, 1)


def _cause(entry: Entry) -> tuple[str, str] | None:
    """Why upstream's pass does this: a snippet of the line responsible, and an
    explanation with this case's numbers; None for a bug with no explanation on record."""
    case, essentials = entry.case, dict(classify(entry.case))
    block = case.blocks[0]
    conv = block.conv
    symptom, error_type = entry.kind, entry.error_type
    if entry.pass_name != "upstream" or conv is None or entry.pipeline not in (None, DEFAULT_PIPELINE):
        return None
    if symptom is Symptom.PASS_EXCEPTION and error_type == "TypeError" and block.var.dtype != "float32":
        return 'FloatImm("float32"', (
            f"The pass adds epsilon to the variance as a float32 scalar, whatever the variance's dtype "
            f"(here {block.var.dtype}"
            + (f", as the conv's out_dtype is {conv.out_dtype}" if essentials["out_dtype"] != "same" else "")
            + "). Relax binary operators need both operands in one dtype, so the pass raises instead of "
            "folding or leaving the graph alone."
        )
    if symptom is Symptom.PASS_EXCEPTION and essentials["kernel_layout"] == "IOHW":
        return "wt.reshape(", (
            "`wt` is a `relax.Call` expression, which has no `reshape` method; the OIHW branch just above "
            "uses `relax.op.reshape(wt, ...)`. Every IOHW kernel (the layout of transposed-conv weights "
            "imported from other frameworks) makes the pass raise."
        )
    if symptom is Symptom.MUST_NOT_FOLD:
        attrs_line = "bn_attrs = bn_op.attrs"
        if essentials["training"] == "True":
            return attrs_line, (
                "The rewriter reads only `epsilon` from the batch_norm's attributes; it never checks "
                "`training`. With training=True, batch_norm normalises with the mean and variance of the "
                "batch itself, not the moving statistics the fold bakes into the weights, so the fold "
                "changes the result."
            )
        if essentials["axis"] == "non-channel":
            return attrs_line, (
                f"The rewriter reads only `epsilon` from the batch_norm's attributes; it never checks "
                f"`axis`. Here batch_norm normalises axis {block.bn.axis}, while the fold scales the conv's "
                f"output channels (axis {conv.channel_axis} in {conv.data_layout})."
            )
    if symptom is Symptom.OUT_OF_TOLERANCE and essentials["scale"] == "False":
        scale, _ = _scale(case)
        ones = 1 / np.sqrt(block.var.float64() + float(np.float32(block.bn.epsilon)))
        return "wt = relax.op.divide(bn_weight, dino)", (
            f"The folded scale multiplies by gamma although scale=False tells batch_norm to ignore gamma: "
            f"the fold uses gamma / sqrt(var + eps) = {scale[0]:.7g} where batch_norm computes "
            f"1 / sqrt(var + eps) = {ones[0]:.7g} (channel 0)."
        )
    if symptom is Symptom.OUT_OF_TOLERANCE and essentials["center"] == "False":
        scale, _ = _scale(case)
        mean, beta = block.mean.float64()[0], block.beta.float64()[0]
        return "bs = relax.op.subtract(bn_bias", (
            f"The folded bias adds beta although center=False tells batch_norm to ignore beta: the fold "
            f"adds beta - mean * s = {beta - mean * scale[0]:.7g} where batch_norm adds "
            f"-mean * s = {-mean * scale[0]:.7g} (channel 0, s = gamma / sqrt(var + eps))."
        )
    if symptom is Symptom.SIGNATURE_CHANGE and essentials["data_layout"] != "NCHW":
        c = block.gamma.shape[0]
        return "bs_args = relax.op.reshape(bs", (
            f"The folded bias is reshaped to (1, {c}, 1, 1), the channel position of NCHW, whatever the "
            f"conv's data_layout. The conv's output here is {conv.data_layout}, so adding the bias "
            "broadcasts it along the wrong axis and changes the output's shape."
        )
    finfo = np.finfo(np.dtype(case.dtype)) if case.dtype != "bfloat16" else None
    if symptom is Symptom.FINITE_TO_NONFINITE and finfo is not None:
        scale, folded = _scale(case)
        return "wt_conv = relax.op.multiply(conv_weight, wt)", (
            f"The pass scales the weights before the convolution: W' = W * s with "
            f"s = gamma / sqrt(var + eps) = {scale.max():.7g}. The largest |W'| is "
            f"{np.abs(folded).max():.7g}, above the largest finite {case.dtype} ({float(finfo.max):.7g}), "
            f"so W' is inf, and the convolution turns inf into inf or NaN (inf * 0 from padding or a zero "
            f"input, inf - inf in a sum). Without the fold, the convolution's sum is scaled by s after it "
            f"is computed and stays finite."
        )
    if symptom is Symptom.OUT_OF_TOLERANCE and finfo is not None:
        scale, _ = _scale(case)
        smallest = float(np.abs(scale[scale != 0]).min()) if (scale != 0).any() else 0.0
        tiny = float(finfo.smallest_normal)
        if 0 < smallest < tiny:
            bits = int(np.floor(np.log2(smallest / float(finfo.smallest_subnormal)))) + 1
            return "wt = relax.op.divide(bn_weight, dino)", (
                f"The folded scale s = gamma / sqrt(var + eps) = {smallest:.4g} is below the smallest "
                f"normal {case.dtype} ({tiny:.4g}), so it is stored as a subnormal number with only "
                f"{bits} significant bits, and the folded weight and bias (beta - mean * s) carry that "
                f"error. The unfolded graph never forms s: it normalises first and then multiplies by gamma."
            )
    return None


def _cause_section(entry: Entry) -> list[str]:
    cause = _cause(entry)
    if cause is None:
        return []
    snippet, text = cause
    return ["### Where it goes wrong", "", *_upstream_line(snippet), text, ""]


def render_issue(entry: Entry, checked: Checked | None = None) -> str:
    """A GitHub issue for ``entry`` in the shape TVM maintainers receive. ``checked``: the
    entry's case already checked on its own pass (a replay), if the caller has it."""
    case = entry.case
    attrs = ", ".join(f"{k}={v}" for k, v in classify(case).items() if ATTRIBUTE_DEFAULTS[k] != v)
    words = wording(entry.kind, entry.symptom)
    expected = words.expected
    if entry.pipeline is not None and entry.kind in (Symptom.OUT_OF_TOLERANCE, Symptom.FINITE_TO_NONFINITE):
        expected = "After the passes, outputs stay within rounding error of the module before them."
    tvm = entry.provenance.get("tvm", "")
    simplified = (
        [
            "- not re-checked here: checking this graph kills or hangs the process; it is as Hypothesis "
            "shrank it"
        ]
        if entry.isolated
        else [a.line() for a in minimality(entry.case, resolve_pass(entry.pass_name), entry.pipeline)]
    )
    subject = "FoldBatchnormToConv2D" if entry.pipeline is None else f"`{pipeline_text(entry)}`"
    return "\n".join(
        [
            f"# [Bug][Relax] {subject} {words.title(entry.error_type)}" + (f" ({attrs})" if attrs else ""),
            "",
            "### Expected behavior",
            "",
            expected,
            "",
            "### Actual behavior",
            "",
            _actual(entry, checked),
            "",
            *_cause_section(entry),
            "### Environment",
            "",
            f"- TVM: {tvm} (pip install apache-tvm=={tvm})" if tvm else "- TVM: unknown",
            f"- Python: {entry.provenance.get('python', 'unknown')}",
            f"- Platform: {entry.provenance.get('platform', 'unknown')}",
            "- Target: llvm, built with relax.pipeline.zero_pipeline()",
            "",
            "### Steps to reproduce",
            "",
            f"Save as `repro.py` and run `python repro.py` {words.shows}:",
            "",
            "```python",
            render_script(entry).rstrip("\n"),
            "```",
            "",
            "### Minimality",
            "",
            "Shrunk and simplified by a property-based fuzzer (bnfold-fuzz). Each remaining non-default "
            "attribute and value was simplified once more on its own and the bug re-checked:",
            "",
            *(
                simplified
                or ["- nothing left to simplify: every attribute is at its default and every value is 1.0"]
            ),
            "",
            f"(bnfold-fuzz generates conv2d + batch_norm graphs with Hypothesis, runs them through the "
            f"pass on the llvm Relax VM and judges the outputs against a wide-precision reference; "
            f"its signature for this bug, used to avoid duplicate reports, is `{entry.signature}`.)",
            "",
        ]
    )
