"""Issues: corpus entries as the GitHub issues their projects receive, one per root cause.

:func:`issues` groups entries by root cause (:func:`fuzz.render.causes.root_cause`) and
hands each group to the report module of its backend's registry row
(:attr:`fuzz.backends.Backend.report`: ``issue(entries, checked) -> Issue``, and, where a
backend re-addresses entries before grouping, ``addressed(entry) -> Entry``). What every
issue shares is :mod:`fuzz.render.skeleton`; a stated decline is rendered here, as expected
behaviour never to be filed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fuzz.backends import report_of, scope_of
from fuzz.engine.check import Checked
from fuzz.engine.replay import check_entry
from fuzz.errors import BnfuzzError
from fuzz.fpenv import keeps_subnormals
from fuzz.model.decline_reasons import block_reasons
from fuzz.oracle.signature import Signature
from fuzz.render.causes import root_cause
from fuzz.render.issue import Issue
from fuzz.render.script import render_script
from fuzz.render.skeleton import variant_order
from fuzz.store.corpus import Entry

__all__ = ["Unshown", "addressed", "issue_of", "issues", "render_issue", "render_script", "reproducing"]


def addressed(entry: Entry) -> Entry:
    """``entry`` as its backend files it (an entry of a TVM mutant that TVM's own pass
    fails too: as upstream's, :func:`fuzz.render.tvm.addressed`); most as they are."""
    readdress = getattr(report_of(entry.pass_name), "addressed", None)
    return entry if readdress is None else readdress(entry)


@dataclass(frozen=True)
class Unshown:
    """An entry left out of the issues: why (it does not reproduce on this machine)."""

    entry: Entry
    why: str


@keeps_subnormals
def reproducing(entries: Sequence[Entry]) -> tuple[list[Entry], dict[str, Checked], list[Unshown]]:
    """Each entry replayed on this machine (:func:`fuzz.engine.replay.check_entry`, in a
    worker where its bug kills the process): the entries whose bug shows here, their
    checks by signature (the issues reuse them), and the others with why each is left out.
    A stated decline is expected behaviour, kept as it is."""
    shown: list[Entry] = []
    checks: dict[str, Checked] = {}
    unshown: list[Unshown] = []
    for entry in entries:
        if entry.declined:
            shown.append(entry)
            continue
        try:
            checked = check_entry(entry.case, entry.pass_name, entry.pipeline, entry.isolated)
        except BnfuzzError as exc:  # a framework not installed, a case outside the backend
            unshown.append(Unshown(entry, f"not replayed here: {exc}"))
            continue
        finding = checked.verdict.primary
        here = (
            None
            if finding is None
            else str(Signature.of(finding, entry.case, entry.pipeline, scope_of(entry.pass_name)))
        )
        if here == entry.signature:
            shown.append(entry)
            checks[entry.signature] = checked
        elif here is None:
            unshown.append(
                Unshown(entry, f"does not reproduce on this machine: {entry.pass_name} passes it here")
            )
        else:
            unshown.append(Unshown(entry, f"shows another bug on this machine: {here}"))
    return shown, checks, unshown


@keeps_subnormals
def render_issue(entry: Entry, checked: Checked | None = None) -> str:
    """A GitHub issue for ``entry`` in the shape its project receives (title line first).
    ``checked``: the entry's case already checked on its own pass (a replay), if the caller
    has it."""
    return issue_of([entry], {entry.signature: checked} if checked is not None else None).text


@keeps_subnormals
def issues(entries: Sequence[Entry], checked: Mapping[str, Checked] | None = None) -> list[Issue]:
    """One issue per root cause (:func:`fuzz.render.causes.root_cause`), in the order the causes
    first appear; an issue of several entries lists each as a variant. An entry found
    against another of TVM's passes that TVM's own fails too is upstream's
    (:func:`addressed`). ``checked``: the entries' replays by signature, where at hand
    (:func:`reproducing`)."""
    groups: dict[str, list[Entry]] = {}
    for entry in map(addressed, entries):
        groups.setdefault(root_cause(entry), []).append(entry)
    return [issue_of(group, checked) for group in groups.values()]


@keeps_subnormals
def issue_of(entries: Sequence[Entry], checked: Mapping[str, Checked | None] | None = None) -> Issue:
    """The issue for entries of one root cause (one entry: its own issue). ``checked``:
    replays already at hand, by signature."""
    if not entries:
        raise ValueError("an issue needs at least one entry")
    if entries[0].declined:
        return _decline_issue(entries[0])
    group = sorted(entries, key=variant_order)
    issue: Issue = report_of(group[0].pass_name).issue(group, checked or {})
    return issue


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
