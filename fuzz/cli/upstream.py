"""Commands that take bugs and the fix to TVM: ``file-issues``, ``upstream-patch``."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fuzz.cli.common import (
    EXIT_CLEAN,
    entry_files,
)
from fuzz.errors import UsageError

__all__ = ["COMMANDS", "add_parsers"]


def add_parsers(sub: Any) -> None:
    """This module's commands, added to the ``bnfuzz`` parser's subcommands."""
    file_issues = sub.add_parser(
        "file-issues",
        help="one GitHub issue per root cause not filed yet (a dry run, printing each issue, by default)",
        description="Group the entries by root cause (entries that fail at the same line of the pass for "
        "the same reason are one issue, listing each as a variant), list the repository's open issues, "
        "skip those already filed (markers in the issue body name the root cause and the signatures), "
        "and print each issue that would be filed, whole. Declines (expected behaviour) and entries "
        "that need a pass other than TVM's are never filed. With --apply, file them through the GitHub "
        "REST API with the token in GITHUB_TOKEN. Offline, a dry run still prints every issue and says "
        "that the check for issues already filed was skipped.",
        epilog="Exit codes: 0 done, 2 usage error (an unreadable file, no token for --apply, the API "
        "refused or could not be reached with --apply).",
    )
    file_issues.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="corpus entries or findings, or folders of them (subfolders included)",
    )
    file_issues.add_argument("--repo", required=True, metavar="OWNER/NAME", help="the repository to file in")
    file_issues.add_argument(
        "--apply", action="store_true", help="file the issues (default: only print them)"
    )
    file_issues.add_argument(
        "--api",
        default="https://api.github.com",
        metavar="URL",
        help="the REST API's address (default GitHub's; another one for GitHub Enterprise or a test server)",
    )
    patch = sub.add_parser(
        "upstream-patch",
        help="the fixed pass as a unified diff against TVM's pass file, with tests in TVM's style",
        description="Write a unified diff, to apply at the root of TVM's repository (git apply), that "
        "replaces python/tvm/relax/transform/fold_batch_norm_to_conv2d_for_inference.py (as the "
        "installed TVM ships it) by the fixed pass, and extends "
        "tests/python/relax/test_transform_fold_batch_norm_to_conv2d.py: training=False in the "
        "batch_norm its existing tests build (they mean an inference batch_norm; a training-mode one "
        "must not be folded), and one test per corpus entry (each upstream defect class and each "
        "decline), TVMScript Before and Expected modules compared with assert_structural_equal.",
        epilog="Exit codes: 0 written, 2 usage error (an unwritable --out, no ruff to format the tests).",
    )
    patch.add_argument(
        "--out", type=Path, metavar="FILE", help="write the diff to FILE (default: standard output)"
    )


def _file_issues(args: argparse.Namespace) -> int:
    from fuzz.engine.promote import read_as_entry
    from fuzz.render.github import GitHub, GitHubError, file_issues
    from fuzz.render.report import issues, reproducing
    from fuzz.store.corpus import EntryError

    if not re.fullmatch(r"[\w.-]+/[\w.-]+", args.repo):  # user input: OWNER/NAME
        raise UsageError(f"--repo {args.repo!r}: expected OWNER/NAME")
    token = os.environ.get("GITHUB_TOKEN") or None
    if args.apply and token is None:
        raise UsageError("--apply needs a token in GITHUB_TOKEN (with permission to create issues)")
    entries = []
    for path in entry_files(args.paths):
        try:
            entries.append(read_as_entry(path))
        except EntryError as exc:
            raise UsageError(str(exc)) from None
    shown, checks, unshown = reproducing(entries)  # what does not reproduce here is not filed
    for left in unshown:
        print(
            f"bnfuzz: not shown: {left.entry.signature} ({left.entry.pass_name}): {left.why}", file=sys.stderr
        )
    try:
        filing = file_issues(
            issues(shown, checks), GitHub(args.repo, token, args.api), apply=args.apply, repo=args.repo
        )
    except GitHubError as exc:
        raise UsageError(f"GitHub API: {exc}") from None
    rule = "=" * 100
    for plan in filing.plans:
        if plan.status == "to file":  # a dry run: the whole issue, for a person to review
            print(f"{rule}\nto file: {plan.key}\n{rule}\n# {plan.title}\n\n{plan.body}")
        else:
            where = f" {plan.url}" if plan.url else ""
            why = f" ({plan.why})" if plan.why else ""
            print(f"{plan.status:13} {plan.key}{where}{why}\n              {plan.title}")
    counts = {
        s: sum(p.status == s for p in filing.plans)
        for s in ("filed", "to file", "already filed", "not filed")
    }
    if filing.unchecked is not None:
        print(
            f"bnfuzz: the check for issues already filed in {args.repo} was skipped: the API could not be "
            f"reached ({filing.unchecked}); every issue above is shown as to file",
            file=sys.stderr,
        )
    print(
        f"{len(entries)} entries, {len(filing.plans)} root causes: "
        + ", ".join(f"{n} {s}" for s, n in counts.items())
    )
    return EXIT_CLEAN


def _upstream_patch(args: argparse.Namespace) -> int:
    from fuzz.render.upstream_patch import upstream_patch
    from fuzz.store.storage import write_atomic

    diff = upstream_patch()
    if args.out is None:
        print(diff, end="")
        return EXIT_CLEAN
    try:
        write_atomic(args.out, diff)
    except OSError as exc:
        raise UsageError(f"--out {args.out}: cannot write the patch ({exc.strerror or exc})") from None
    print(f"wrote {args.out}; apply it at the root of TVM's repository with: git apply {args.out}")
    return EXIT_CLEAN


#: Command name -> the function that runs it.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "file-issues": _file_issues,
    "upstream-patch": _upstream_patch,
}
