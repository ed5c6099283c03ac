"""Commands on findings and corpus entries: ``promote``, ``replay``, ``render``, ``triage``, ``declines``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fuzz.cli.common import (
    EXIT_CLEAN,
    EXIT_FINDINGS,
    EXIT_USAGE,
    entry_files,
    resolve,
)
from fuzz.engine.run import check_out_dir
from fuzz.errors import UsageError

__all__ = ["COMMANDS", "add_parsers"]


def add_parsers(sub: Any) -> None:
    """This module's commands, added to the ``bnfuzz`` parser's subcommands."""
    promote = sub.add_parser(
        "promote",
        help="turn findings written by 'run --out' into corpus entries, expectations measured by replay",
        description="Simplify each finding (or entry) where the same bug stays visible, replay it on "
        "every pass of --passes and write a corpus entry recording, per pass, whether it fails or passes "
        "and why.",
        epilog="Exit codes: 0 done, 2 usage error (unreadable finding, unknown pass).",
    )
    promote.add_argument(
        "findings", nargs="+", type=Path, metavar="FINDING", help="JSON files from 'run --out'"
    )
    promote.add_argument(
        "--corpus",
        type=Path,
        required=True,
        help="the corpus folder to write to (created if missing); give corpus/ to add to the shipped one",
    )
    promote.add_argument(
        "--replace",
        action="store_true",
        help="replace an entry of the same signature already in --corpus by this case if it is smaller "
        "(without it, an existing entry is never rewritten)",
    )
    promote.add_argument(
        "--passes",
        default="upstream,fixed",
        help="comma-separated passes to record an expectation for (default upstream,fixed)",
    )
    replay = sub.add_parser(
        "replay",
        help="replay corpus entries (files or folders) and compare with their expectations",
        description="Check each entry's case on each pass it records an expectation for (or only on --pass) "
        "and report whether the pass still fails or passes as expected. With --pass, an entry whose case "
        "the pass's backend cannot express (another importer's form, a model its frontend rejects) is "
        "listed as n/a with the reason, and counted apart.",
        epilog="Exit codes: 0 every applicable entry as expected, 1 some entry not as expected, 2 usage "
        "error (an unreadable entry is reported, named with its field, and the others still replay).",
    )
    replay.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="findings or corpus entries, or folders of them (subfolders included)",
    )
    replay.add_argument("--pass", dest="pass_name", metavar="P", help="replay on this pass only")
    replay.add_argument(
        "--scripts",
        action="store_true",
        help="also render each entry's reproducer script and run it in a fresh Python process: it "
        "must fail (exit non-zero, or die of a signal) while the entry's pass still fails",
    )
    replay.add_argument(
        "--flush-denormals",
        action="store_true",
        help="run the folds with subnormal numbers flushed to zero (FTZ and DAZ, as "
        "torch.set_flush_denormal(True) sets them; x86-64 only): a verdict must not change with it",
    )
    render = sub.add_parser(
        "render",
        help="print a corpus entry as a standalone reproducer script or as a GitHub issue",
        description="Render one corpus entry: --script prints a Python file that needs only tvm and numpy "
        "and exits 1 while the bug is present; --issue prints a GitHub issue with that script inline.",
        epilog="Exit codes: 0 done, 2 usage error (unreadable entry).",
    )
    render.add_argument(
        "path", type=Path, metavar="PATH", help="a finding (from run --out) or a corpus entry (JSON)"
    )
    form = render.add_mutually_exclusive_group(required=True)
    form.add_argument("--script", action="store_true", help="print the standalone reproducer script")
    form.add_argument("--issue", action="store_true", help="print the issue text (title, behaviour, script)")
    triage = sub.add_parser(
        "triage",
        help="group findings (from 'run --out' folders or corpus entries) by signature, smallest case first",
        description="Read every JSON finding or corpus entry under the paths, group them by signature and "
        "print one line per signature: how many files show it and the one with the smallest case.",
        epilog="Exit codes: 0 done, 2 some file could not be read (named; the others are still grouped).",
    )
    triage.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="finding files or folders of them"
    )
    declines = sub.add_parser(
        "declines",
        help="for each reason a fold may keep a batch_norm, the smallest case where the pass keeps it, "
        "as a corpus entry",
        description="Search the case space with Hypothesis for a case whose batch_norms have exactly one "
        "decline reason (training, non-channel axis, non-constant operand, shared conv output, "
        "statistics in use, a folded constant out of range, no conv) and which the pass leaves alone; "
        "shrink it; measure what each of --passes does on it; write it into --corpus.",
        epilog="Exit codes: 0 done (an entry per reason), 1 no such case found for some reason "
        "(named), 2 usage error.",
    )
    declines.add_argument("--pass", dest="pass_name", default="fixed", metavar="P", help="default: fixed")
    declines.add_argument(
        "--corpus", type=Path, default=Path("corpus") / "declines", help="default: corpus/declines"
    )
    declines.add_argument(
        "--passes", default="upstream,fixed", metavar="P,P", help="passes whose behaviour each entry records"
    )
    declines.add_argument("--seed", type=int, default=0, help="seed of the search (default 0)")


def _promote(args: argparse.Namespace) -> int:
    from fuzz.engine.promote import promote
    from fuzz.store.corpus import EntryError

    passes = tuple(p for p in args.passes.split(",") if p)  # user input: --passes A,B
    for name in passes:
        resolve(name)
    check_out_dir(args.corpus, "--corpus")
    for finding in args.findings:
        try:
            written, kept = promote(finding, args.corpus, passes, replace=args.replace)
        except EntryError as exc:
            raise UsageError(str(exc)) from None
        print(written if kept is None else f"{written} (already there with this signature: {kept})")
    return EXIT_CLEAN


def _replay(args: argparse.Namespace) -> int:
    from fuzz.engine.promote import read_as_entry
    from fuzz.engine.replay import replay
    from fuzz.errors import CaseOutsideBackend
    from fuzz.fpenv import FlushUnsupported, machine, machine_differences
    from fuzz.render.script import run_script
    from fuzz.store.corpus import EntryError

    if args.pass_name is not None:
        resolve(args.pass_name)
    here: dict[str, Any] | None = None
    bad = unexpected = replayed = outside = scripts_off = 0
    for path in entry_files(args.paths):
        try:
            entry = read_as_entry(path)
        except EntryError as exc:
            print(f"bnfuzz: error: {exc}", file=sys.stderr)
            bad += 1
            continue
        for name in [args.pass_name] if args.pass_name else sorted(entry.expect):
            try:
                result = replay(entry, name, flush=True if args.flush_denormals else None)
            except FlushUnsupported as exc:
                raise UsageError(f"--flush-denormals: {exc}") from None
            except CaseOutsideBackend as exc:
                if name in entry.expect:  # it was measured there: that it no longer runs is news
                    unexpected += 1
                    replayed += 1
                    print(f"FAIL {path} on {name}: cannot run the case any more ({exc})")
                else:
                    outside += 1
                    print(f"n/a  {path} on {name}: the case is outside this fold's backend ({exc})")
                continue
            replayed += 1
            unexpected += not result.as_expected
            mark = "ok  " if result.as_expected else "FAIL"
            wanted = f"expected {result.expected}" if result.expected else "no expectation"
            print(f"{mark} {path} on {name}: {result.status} ({wanted})")
            if not result.as_expected:
                here = here or machine(result.checked.flush)
                recorded = entry.provenance.get("machine")
                differs = machine_differences(recorded, here)
                if recorded and differs:
                    what = "does not reproduce" if result.expected == "fails" else "fails"
                    print(f"     {what} on this CPU; the entry was measured on another machine:")
                for line in differs:
                    print(f"     {line}")
        if args.scripts:
            code = run_script(entry)
            expected_code = entry.expect.get(entry.pass_name) == "fails"
            reproduces = code != 0
            scripts_off += reproduces != expected_code
            mark = "ok  " if reproduces == expected_code else "FAIL"
            shown = f"signal {-code}" if code < 0 else f"exit {code}"
            print(f"{mark} {path} script: {'reproduces' if reproduces else 'does not reproduce'} ({shown})")
    print(
        f"{replayed} replays: {replayed - unexpected} as expected, {unexpected} not"
        + (f"; {outside} not applicable (the case is outside the fold's backend)" if outside else "")
        + (f"; {scripts_off} script(s) not as expected" if scripts_off else "")
    )
    if bad:
        return EXIT_USAGE
    return EXIT_FINDINGS if unexpected or scripts_off else EXIT_CLEAN


def _render(args: argparse.Namespace) -> int:
    from fuzz.engine.promote import read_as_entry
    from fuzz.render.report import render_issue, render_script
    from fuzz.store.corpus import EntryError

    try:
        entry = read_as_entry(args.path)
    except EntryError as exc:
        raise UsageError(str(exc)) from None
    print(render_script(entry) if args.script else render_issue(entry), end="")
    return EXIT_CLEAN


def _triage(args: argparse.Namespace) -> int:
    from fuzz.engine.promote import read_as_entry
    from fuzz.store.corpus import EntryError

    groups: dict[str, list[tuple[int, Path]]] = {}
    bad = 0
    for path in entry_files(args.paths):
        try:
            entry = read_as_entry(path)
        except EntryError as exc:
            print(f"bnfuzz: error: {exc}", file=sys.stderr)
            bad += 1
            continue
        groups.setdefault(entry.signature, []).append((entry.case.size, path))
    for signature in sorted(groups):
        members = sorted(groups[signature])
        size, smallest = members[0]
        print(f"{len(members):5d}  {signature}  smallest: {smallest} ({size} values)")
    return EXIT_USAGE if bad else EXIT_CLEAN


def _declines(args: argparse.Namespace) -> int:
    from fuzz.engine.decline_entries import DeclineNotFound, decline_entry
    from fuzz.model.decline_reasons import Reason
    from fuzz.store.corpus import dumps_entry
    from fuzz.store.storage import file_name, write_atomic

    passes = tuple(p for p in args.passes.split(",") if p)  # user input: --passes A,B
    for name in (args.pass_name, *passes):
        resolve(name)
    check_out_dir(args.corpus, "--corpus")
    missing = 0
    for reason in Reason:
        try:
            entry = decline_entry(reason, args.pass_name, passes, seed=args.seed)
        except DeclineNotFound as exc:
            print(f"bnfuzz: {exc}", file=sys.stderr)
            missing += 1
            continue
        target = args.corpus / file_name(entry.signature)
        write_atomic(target, dumps_entry(entry))
        expected = ", ".join(f"{name} {status}" for name, status in entry.expect.items())
        print(f"{target} ({entry.case.size} values; {expected})")
    return EXIT_FINDINGS if missing else EXIT_CLEAN


#: Command name -> the function that runs it.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "promote": _promote,
    "replay": _replay,
    "render": _render,
    "triage": _triage,
    "declines": _declines,
}
