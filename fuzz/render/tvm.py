"""What goes to TVM: an entry found against one of its passes (or several entries of one
root cause) as a GitHub issue in the shape TVM maintainers receive: title, expected and
actual behaviour (with the numbers of a fresh run), where upstream's pass goes wrong (the
line, quoted from the installed TVM, and the arithmetic of this case,
:mod:`fuzz.render.causes`), environment, the script inline
(:mod:`fuzz.render.tvm_script`), and a minimality note.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from fuzz.engine.check import Checked
from fuzz.engine.replay import check_entry
from fuzz.model.pipeline import FOLD
from fuzz.oracle.signature import Signature
from fuzz.oracle.verdict import Symptom
from fuzz.render.causes import cause_of, root_cause
from fuzz.render.issue import Issue
from fuzz.render.skeleton import MINIMALITY, actual, attributes_shown, footnote, minimality_lines, steps
from fuzz.render.tvm_script import pipeline_text, render_group_script, render_script
from fuzz.render.wording import wording
from fuzz.store.corpus import Entry

__all__ = ["UPSTREAM_MODULE", "addressed", "issue", "script"]


def script(entry: Entry) -> str:
    """A standalone reproducer for ``entry`` (:func:`fuzz.render.tvm_script.render_script`)."""
    return render_script(entry)


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


def addressed(entry: Entry) -> Entry:
    """An entry found against another of TVM's passes (a mutant of the fixed pass, a pass
    of the user's) that TVM's own pass fails too, as upstream's entry: its symptom,
    message and signature measured afresh on upstream, so it is previewed, grouped by its
    cause and titled as TVM's bug, its script running TVM's pass. Any other entry as it is."""
    if entry.declined or entry.pass_name == "upstream" or entry.expect.get("upstream") != "fails":
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


def issue(entries: Sequence[Entry], checked: Mapping[str, Checked | None]) -> Issue:
    """The issue for entries of one root cause, simplest first (one entry: its own issue);
    ``checked``: their cases already checked, by signature, where the caller has them."""
    group = list(entries)
    first = group[0]
    replays = checked
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
    variants = [attributes_shown(e) for e in group]
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
        happened = [actual(first, replays.get(first.signature))]
        reproducer = render_script(first)
        shows = words.shows
    else:
        happened = [
            f"The same failure in {len(group)} variants of one graph, which differ only in the "
            "attributes named:",
            "",
            *(
                f"- `{v or 'defaults'}`: {actual(e, replays.get(e.signature))}"
                for v, e in zip(variants, group, strict=True)
            ),
        ]
        reproducer = render_group_script(group)
        shows = "(it runs every variant and exits 1 while the bug shows in any)"
    where = _cause_section(first)
    if where and len(group) > 1:
        where = [*where[:-1], "The same line fails for the same reason in every variant.", ""]
    minimal: list[str] = []
    for v, e in zip(variants, group, strict=True):
        notes = minimality_lines(e)
        minimal += ([f"Variant `{v or 'defaults'}`:", ""] if len(group) > 1 else []) + notes + [""]
    signatures = tuple(e.signature for e in group)
    body = "\n".join(
        [
            "### Expected behavior",
            "",
            expected,
            "",
            "### Actual behavior",
            "",
            *happened,
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
            *steps(reproducer, shows),
            "### Minimality",
            "",
            MINIMALITY,
            "",
            *minimal,
            footnote(signatures),
            "",
        ]
    )
    return Issue(root_cause(first), title, body, signatures, first.pass_name, needs_pass)
