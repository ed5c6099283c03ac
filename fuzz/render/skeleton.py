"""What every issue says, whichever project it goes to: the actual behaviour in numbers
from a fresh run (:func:`actual`), the attributes that make the case, the minimality note
(:func:`minimality_lines`), the steps to reproduce (:func:`steps`) and the footnote with
the signatures (:func:`footnote`). Each backend's report module (:attr:`fuzz.backends.Backend.report`)
places these in its project's bug template and adds only what differs: headings, the code
at fault, environment lines.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from fuzz.backends import backend_of, resolve_fold
from fuzz.engine.check import Checked, check
from fuzz.engine.minimize import minimality
from fuzz.model.attributes import ATTRIBUTE_DEFAULTS, classify
from fuzz.model.numerics import dtype_facts
from fuzz.oracle.execution import Outputs
from fuzz.oracle.reference import RANGE_MARGIN
from fuzz.oracle.verdict import Symptom, describe
from fuzz.render.issue import Issue
from fuzz.render.script_parts import float_literal
from fuzz.store.corpus import Entry

__all__ = [
    "MINIMALITY",
    "actual",
    "attributes_shown",
    "footnote",
    "minimality_lines",
    "one_entry",
    "one_entry_issue",
    "steps",
    "variant_order",
]

#: How the case came to be as small as it is: the line before the minimality notes.
MINIMALITY = (
    "Shrunk and simplified by a property-based fuzzer (bnfold-fuzz). Each remaining non-default "
    "attribute and value was simplified once more on its own and the bug re-checked:"
)


def actual(entry: Entry, checked: Checked | None, *, raises: str | None = None) -> str:
    """The actual behaviour in plain numbers a reader can check, from ``checked`` (the
    entry's case on its pass) or a fresh run. ``raises``: how an exception of the fold is
    introduced (default: "The pass raises", or "Applying the passes raises" in a pipeline)."""
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
    if finding.symptom is Symptom.PASS_EXCEPTION:
        default = "The pass raises" if entry.pipeline is None else "Applying the passes raises"
        return f"{raises or default} `{finding.error_type}`: {finding.message}"
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
        # the claim the oracle checked at this element: every intermediate of the unfolded
        # graph, widened by its error bound, below max / RANGE_MARGIN (else it is not made)
        facts = dtype_facts(dtype)
        safe = (
            f", and every intermediate of the unfolded graph, with its rounding-error bound, stays "
            f"below {facts.max / RANGE_MARGIN:.7g} (1/{RANGE_MARGIN:g} of the largest {dtype} value, "
            f"{facts.max:.7g}), so nothing but the fold can overflow"
            if bool(checked.reference.outputs[k].robust[index])
            else ""
        )
        return (
            f"Without {the}, {where} is {_number(b)}; after {the} it is {_number(a)}. "
            f"The exact result is {exact:.7g}{safe}."
        )
    return (
        f"Without {the}, {where} is {_number(b)}; after {the} it is {_number(a)}. "
        f"The exact result (computed in wider precision) is {_number(exact)}, and rounding in "
        f"{dtype} can account for at most {bound:.3g} of difference, so a change of "
        f"{abs(a - b):.3g} is a bug, not rounding."
    )


def _number(value: float) -> str:
    """A value as prose says it: readable and exact where finite (``2.0**64``), else
    ``inf``, ``-inf`` or ``nan``."""
    return float_literal(value) if math.isfinite(value) else repr(value)


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
            return (
                f"Output 0, element [{where}], without the pass: {_number(was)}; after {the}: {_number(now)}."
            )
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


def attributes_shown(entry: Entry, skip: tuple[str, ...] = ()) -> str:
    """The entry's non-default attributes as ``k=v, ...``, but those in ``skip``."""
    attrs = classify(entry.case).items()
    return ", ".join(f"{k}={v}" for k, v in attrs if ATTRIBUTE_DEFAULTS[k] != v and k not in skip)


def variant_order(entry: Entry) -> tuple[int, int, str]:
    """Simplest first: fewest non-default attributes, then fewest values."""
    essentials = sum(ATTRIBUTE_DEFAULTS[k] != v for k, v in classify(entry.case).items())
    return essentials, entry.case.size, entry.signature


def minimality_lines(entry: Entry) -> list[str]:
    """The minimality notes of ``entry`` (:func:`fuzz.engine.minimize.minimality`): each
    remaining non-default attribute and value simplified on its own, the bug re-checked."""
    if entry.isolated:
        return [
            "- not re-checked here: checking this graph kills or hangs the process; it is as Hypothesis "
            "shrank it"
        ]
    notes = [a.line() for a in minimality(entry.case, resolve_fold(entry.pass_name), entry.pipeline)]
    return notes or ["- nothing left to simplify: every attribute is at its default and every value is 1.0"]


def steps(script: str, shows: str) -> list[str]:
    """The steps to reproduce: save and run ``script``; ``shows`` says, in parentheses, what
    it needs and what its exit code means."""
    return [
        f"Save as `repro.py` and run `python repro.py` {shows}:",
        "",
        "```python",
        script.rstrip("\n"),
        "```",
        "",
    ]


def footnote(signatures: Sequence[str]) -> str:
    """Who found it and the signatures ``file-issues`` recognises it by."""
    named = (
        f"is `{signatures[0]}`" if len(signatures) == 1 else "are " + ", ".join(f"`{s}`" for s in signatures)
    )
    return (
        "(bnfold-fuzz generates conv + batch_norm graphs with Hypothesis, folds them and judges the "
        "outputs against a wide-precision reference; its signature"
        f"{'s' if len(signatures) > 1 else ''} for this bug, used to avoid duplicate reports, {named}.)"
    )


def one_entry(
    render: Callable[[Entry, str, list[str], str], Issue],
) -> Callable[[Sequence[Entry], Mapping[str, Checked | None]], Issue]:
    """The ``issue`` of a report module whose issues hold one entry each (the signature is
    the root cause): ``render(entry, actual, minimal, shown)`` gets the actual behaviour
    (from ``checked``, the entry's replay where the caller has it), the minimality lines
    and the attributes shown (the form aside: every case of the backend has its one form)."""

    def issue(entries: Sequence[Entry], checked: Mapping[str, Checked | None]) -> Issue:
        entry = entries[0]
        found = actual(entry, checked.get(entry.signature), raises="It raises")
        return render(entry, found, minimality_lines(entry), attributes_shown(entry, skip=("form",)))

    return issue


def one_entry_issue(entry: Entry, title: str, body: str) -> Issue:
    """The record of an issue of one entry, whose signature is its root cause, for the
    project of the entry's backend."""
    row = backend_of(entry.pass_name)
    return Issue(
        f"{row.key}:{entry.signature}", title, body, (entry.signature,), entry.pass_name, project=row.project
    )
