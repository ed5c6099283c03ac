"""Issue texts: a corpus entry as a GitHub issue a TVM maintainer receives.

:func:`render_issue` wraps the entry's reproducer (:func:`fuzz.render.script.render_script`)
in an issue: title, expected and actual behaviour (with the numbers of a fresh run),
where upstream's pass goes wrong (the line, quoted from the installed TVM, and the
arithmetic of this case), environment, the script inline, and a minimality note from
:func:`fuzz.engine.minimize.minimality`, which simplifies each remaining attribute and value
on its own and re-checks the bug.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from fuzz.backends import MODEL_TOOLS, backend_of, resolve_fold
from fuzz.engine.check import Checked, check
from fuzz.engine.minimize import minimality
from fuzz.engine.replay import check_entry
from fuzz.fpenv import keeps_subnormals
from fuzz.model.attributes import ATTRIBUTE_DEFAULTS, classify
from fuzz.model.decline import block_reasons
from fuzz.model.pipeline import FOLD
from fuzz.oracle.results import Outputs
from fuzz.oracle.signature import Signature
from fuzz.oracle.verdict import Symptom, describe
from fuzz.render.causes import cause_of, root_cause
from fuzz.render.issue import Issue
from fuzz.render.openvino_issue import openvino_issue
from fuzz.render.ort_issue import ort_issue
from fuzz.render.script import pipeline_text, render_group_script, render_script
from fuzz.render.tool_issue import tool_issue
from fuzz.render.torch_issue import torch_issue
from fuzz.render.wording import wording
from fuzz.store.corpus import Entry

__all__ = ["addressed_to_upstream", "issue_of", "issues", "render_issue", "render_script"]

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
        checked = check(entry.case, resolve_fold(entry.pass_name), pipeline=entry.pipeline)
    ex, finding = checked.execution, checked.verdict.primary
    the = "the pass" if entry.pipeline is None else "the passes"
    if finding is None:
        return entry.message
    if finding.symptom is Symptom.ILL_FORMED and backend_of(entry.pass_name) != "tvm":
        checker = "`onnx.checker.check_model(written, full_check=True)`"
        return f"{checker} fails to accept the model written: {finding.message}"
    if finding.symptom is Symptom.PASS_EXCEPTION:
        raises = "The pass raises" if entry.pipeline is None else "Applying the passes raises"
        if backend_of(entry.pass_name) != "tvm":
            raises = "It raises"
        return f"{raises} `{finding.error_type}`: {finding.message}"
    before = ex.baseline if isinstance(ex.baseline, Outputs) else None
    after = ex.folded if isinstance(ex.folded, Outputs) else None
    if finding.symptom is Symptom.MUST_NOT_FOLD and before is not None and after is not None:
        reason = "; ".join(map(str, checked.verdict.must_not_fold))
        return f"The pass folds the batch_norm although {reason}. " + _difference(before, after, ex, the)
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


def _difference(before: Outputs, after: Outputs, ex: Any, the: str) -> str:
    """Where the outputs before and after the pass differ most, or, if they agree on this
    input, how the module changed (the operators it has before and after)."""
    b, a = before.values[0], after.values[0]
    first = [v.ravel()[:4].tolist() for v in (b, a)]
    if first[0] != first[1]:
        return f"Output 0 (first values) without the pass: {first[0]}; after {the}: {first[1]}."
    if b.shape == a.shape:
        with np.errstate(all="ignore"):
            gap = np.abs(a.astype(np.float64) - b.astype(np.float64))
        gap = np.where(np.isnan(gap), np.inf, gap)
        if gap.max() > 0:
            at = tuple(int(i) for i in np.unravel_index(int(np.argmax(gap)), gap.shape))
            where, was, now = ", ".join(map(str, at)), float(b[at]), float(a[at])
            return f"Output 0, element [{where}], without the pass: {was!r}; after {the}: {now!r}."
    counts = getattr(ex, "op_counts", None)
    changed = ""
    if counts is not None:
        ops = sorted(set(counts[0]) | set(counts[1]))
        changed = "; ".join(
            f"{op} {counts[0].get(op, 0)} -> {counts[1].get(op, 0)}"
            for op in ops
            if counts[0].get(op, 0) != counts[1].get(op, 0)
        )
    return (
        f"On this input the outputs happen to agree, but {the} rewrote the graph"
        + (f" (operators before -> after: {changed})" if changed else "")
        + ", so other inputs see the wrong result."
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


def _cause_section(entry: Entry) -> list[str]:
    cause = cause_of(entry)
    if cause is None:
        return []
    return ["### Where it goes wrong", "", *_upstream_line(cause.snippet), cause.text, ""]


@keeps_subnormals
def render_issue(entry: Entry, checked: Checked | None = None) -> str:
    """A GitHub issue for ``entry`` in the shape TVM maintainers receive (title line first).
    ``checked``: the entry's case already checked on its own pass (a replay), if the caller
    has it."""
    return issue_of([entry], {entry.signature: checked} if checked is not None else None).text


def addressed_to_upstream(entry: Entry) -> Entry:
    """An entry found against another of TVM's passes (a mutant of the fixed pass, a pass
    of the user's) that TVM's own pass fails too, as upstream's entry: its symptom,
    message and signature measured afresh on upstream, so it is previewed, grouped by its
    cause and titled as TVM's bug, its script running TVM's pass. Any other entry as it is."""
    if (
        entry.declined
        or entry.pass_name == "upstream"
        or backend_of(entry.pass_name) != "tvm"
        or entry.expect.get("upstream") != "fails"
    ):
        return entry
    finding = check_entry(entry.case, "upstream", entry.pipeline, entry.isolated).verdict.primary
    if finding is None:  # no longer fails there: as it was found
        return entry
    return replace(
        entry,
        pass_name="upstream",
        symptom=finding.symptom,
        stage=finding.stage,
        error_type=finding.error_type,
        message=finding.message,
        stderr=finding.stderr,
        signature=str(Signature.of(finding, entry.case, entry.pipeline)),
    )


@keeps_subnormals
def issues(entries: Sequence[Entry]) -> list[Issue]:
    """One issue per root cause (:func:`fuzz.render.causes.root_cause`), in the order the causes
    first appear; an issue of several entries lists each as a variant. An entry found
    against another of TVM's passes that TVM's own fails too is upstream's
    (:func:`addressed_to_upstream`)."""
    groups: dict[str, list[Entry]] = {}
    for entry in map(addressed_to_upstream, entries):
        groups.setdefault(root_cause(entry), []).append(entry)
    return [issue_of(group) for group in groups.values()]


def _variant_order(entry: Entry) -> tuple[int, int, str]:
    essentials = sum(ATTRIBUTE_DEFAULTS[k] != v for k, v in classify(entry.case).items())
    return essentials, entry.case.size, entry.signature


def _attributes(entry: Entry, skip: tuple[str, ...] = ()) -> str:
    """The entry's non-default attributes as ``k=v, ...``, but those in ``skip``."""
    attrs = classify(entry.case).items()
    return ", ".join(f"{k}={v}" for k, v in attrs if ATTRIBUTE_DEFAULTS[k] != v and k not in skip)


@keeps_subnormals
def issue_of(entries: Sequence[Entry], checked: Mapping[str, Checked | None] | None = None) -> Issue:
    """The issue for entries of one root cause (one entry: its own issue). ``checked``:
    replays already at hand, by signature."""
    if not entries:
        raise ValueError("an issue needs at least one entry")
    if entries[0].declined:
        return _decline_issue(entries[0])
    group = sorted(entries, key=_variant_order)
    first = group[0]
    replays = checked or {}
    if backend_of(first.pass_name) != "tvm":  # one entry per issue: no cause on record
        notes = [a.line() for a in minimality(first.case, resolve_fold(first.pass_name))]
        shown = _attributes(first, skip=("form",))  # every case there is in the backend's form
        what = _actual(first, replays.get(first.signature))
        if first.pass_name in MODEL_TOOLS:
            return tool_issue(first, what, notes, shown)
        if first.pass_name == "openvino":
            return openvino_issue(first, what, notes, shown)
        if backend_of(first.pass_name) == "torch":
            return torch_issue(first, what, notes, shown)
        return ort_issue(first, what, notes, shown)
    words = wording(first.symptom, first.symptom_name)
    expected = words.expected
    wrong_numbers = (Symptom.OUT_OF_TOLERANCE, Symptom.FINITE_TO_NONFINITE)
    if first.pipeline is not None and first.symptom in wrong_numbers:
        expected = "After the passes, outputs stay within rounding error of the module before them."
    tvm = first.provenance.get("tvm", "")
    subject = "FoldBatchnormToConv2D" if first.pipeline is None else f"`{pipeline_text(first)}`"
    needs_pass = first.pipeline is None or FOLD in first.pipeline.passes
    if first.pass_name != "upstream" and needs_pass:  # a fold of the fuzzer's own: named as such
        subject = (
            f"`{first.pass_name}` (bnfold-fuzz)"
            if first.pipeline is None
            else f"{subject} (with bnfold-fuzz's `{first.pass_name}` as the fold)"
        )
    variants = [_attributes(e) for e in group]
    shown = (
        "; ".join(dict.fromkeys(v or "default attributes" for v in variants))
        if len(group) > 1
        else variants[0]
    )
    headline = words.title(first.error_type)
    cause = cause_of(first)
    if cause is not None and len({(e.symptom, e.error_type) for e in group}) > 1:
        headline = cause.headline  # the variants fail in different ways: name what they share
    title = f"[Bug][Relax] {subject} {headline}" + (f" ({shown})" if shown else "")
    if len(group) == 1:
        actual = [_actual(first, replays.get(first.signature))]
        script = render_script(first)
        shows = words.shows
    else:
        actual = [
            f"The same failure in {len(group)} variants of one graph, which differ only in the "
            "attributes named:",
            "",
            *(
                f"- `{v or 'defaults'}`: {_actual(e, replays.get(e.signature))}"
                for v, e in zip(variants, group, strict=True)
            ),
        ]
        script = render_group_script(group)
        shows = "(it runs every variant and exits 1 while the bug shows in any)"
    where = _cause_section(first)
    if where and len(group) > 1:
        where = [*where[:-1], "The same line fails for the same reason in every variant.", ""]
    minimal: list[str] = []
    for v, e in zip(variants, group, strict=True):
        notes = (
            [
                "- not re-checked here: checking this graph kills or hangs the process; it is as Hypothesis "
                "shrank it"
            ]
            if e.isolated
            else [a.line() for a in minimality(e.case, resolve_fold(e.pass_name), e.pipeline)]
        ) or ["- nothing left to simplify: every attribute is at its default and every value is 1.0"]
        minimal += ([f"Variant `{v or 'defaults'}`:", ""] if len(group) > 1 else []) + notes + [""]
    signatures = tuple(e.signature for e in group)
    named = (
        f"is `{signatures[0]}`"
        if len(signatures) == 1
        else "are " + ", ".join(f"`{sig}`" for sig in signatures)
    )
    body = "\n".join(
        [
            "### Expected behavior",
            "",
            expected,
            "",
            "### Actual behavior",
            "",
            *actual,
            "",
            *where,
            "### Environment",
            "",
            f"- TVM: {tvm} (pip install apache-tvm=={tvm})" if tvm else "- TVM: unknown",
            f"- Python: {first.provenance.get('python', 'unknown')}",
            f"- Platform: {first.provenance.get('platform', 'unknown')}",
            "- Target: llvm, built with relax.pipeline.zero_pipeline()",
            "",
            "### Steps to reproduce",
            "",
            f"Save as `repro.py` and run `python repro.py` {shows}:",
            "",
            "```python",
            script.rstrip("\n"),
            "```",
            "",
            "### Minimality",
            "",
            "Shrunk and simplified by a property-based fuzzer (bnfold-fuzz). Each remaining non-default "
            "attribute and value was simplified once more on its own and the bug re-checked:",
            "",
            *minimal,
            f"(bnfold-fuzz generates conv2d + batch_norm graphs with Hypothesis, runs them through the "
            f"pass on the llvm Relax VM and judges the outputs against a wide-precision reference; "
            f"its signature{'s' if len(signatures) > 1 else ''} for this bug, used to avoid duplicate "
            f"reports, {named}.)",
            "",
        ]
    )
    return Issue(root_cause(first), title, body, signatures, first.pass_name, needs_pass)


def _decline_issue(entry: Entry) -> Issue:
    """A stated decline as what it is: expected behaviour, to read, never to file."""
    reason = "; ".join(dict.fromkeys(str(d) for block in block_reasons(entry.case) for d in block))
    found_by = entry.provenance.get("found_by", "bnfuzz declines")
    others = "; ".join(
        f"{name}: {entry.reason.get(name, status)}" for name, status in sorted(entry.expect.items())
    )
    body = "\n".join(
        [
            "This is not a bug: it documents a case where a correct fold must keep the batch_norm, "
            "and the reason it keeps it. `bnfuzz file-issues` never files it.",
            "",
            "### Expected behavior",
            "",
            f"A complete fold keeps this batch_norm and can say why: {reason}.",
            "",
            "### What each pass does",
            "",
            others,
            "",
            "### Steps to reproduce",
            "",
            "Save as `repro.py` and run `python repro.py` (it prints the outputs before and after the "
            f"pass; `{entry.pass_name}` keeps the graph as it is):",
            "",
            "```python",
            render_script(entry).rstrip("\n"),
            "```",
            "",
            f"(The smallest such case, found and shrunk by `{found_by}`; its signature is "
            f"`{entry.signature}`.)",
            "",
        ]
    )
    title = f"[Expected behaviour] {entry.pass_name} keeps the batch_norm: {reason}"
    return Issue(root_cause(entry), title, body, (entry.signature,), entry.pass_name, bug=False)
