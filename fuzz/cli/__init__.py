"""The ``bnfuzz`` command line, a package of thin commands.

``bnfuzz run``, ``bench``, ``effectiveness``, ``promote``, ``replay``, ``render``,
``triage``, ``declines``, ``file-issues`` and ``upstream-patch``: each module here adds its
commands' arguments to the parser (``add_parsers``) and maps each command to a function
(``COMMANDS``) that parses nothing more, calls one function of the layers below and
prints. :func:`main` parses, dispatches through the table, and turns every
:class:`fuzz.errors.BnfuzzError` into one line on standard error and exit code 2.
TVM's native warnings are counted, not printed, for every command
(:mod:`fuzz.engine.native_log`). Exit codes per command are in each command's ``--help``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from fuzz.cli import bench, effectiveness, entries, run, upstream
from fuzz.cli.common import require_tvm
from fuzz.engine.native_log import NativeLog
from fuzz.errors import EXIT_ERROR, BnfuzzError
from fuzz.fpenv import keeps_subnormals

__all__ = ["COMMANDS", "build_parser", "main"]

#: The command modules, in the order ``bnfuzz --help`` lists their commands.
_GROUPS = (run, bench, effectiveness, entries, upstream)
#: Command name -> the function that runs it.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    name: command for group in _GROUPS for name, command in group.COMMANDS.items()
}


def build_parser() -> argparse.ArgumentParser:
    """The parser of every ``bnfuzz`` command; ``bnfuzz COMMAND --help`` prints its part."""
    parser = argparse.ArgumentParser(
        prog="bnfuzz",
        description="Hypothesis-driven fuzzer for batch-norm-folding passes (TVM Relax).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="""from a finding to an issue:
  bnfuzz run --pass upstream --budget 120 --out findings   # each distinct bug, shrunk, as a file
  bnfuzz triage findings                                   # the findings, grouped by signature
  bnfuzz render findings/FILE.json --issue                 # one as an issue text (--script: its reproducer)
  bnfuzz promote findings/*.json --corpus my-corpus        # simplified, measured on upstream and fixed
  bnfuzz file-issues my-corpus --repo apache/tvm           # preview: one issue per root cause

Exit codes differ per command (bnfuzz COMMAND --help lists them); 2 is always a usage
error (bad arguments or input files, an unknown pass, a missing or unsupported TVM).""",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for group in _GROUPS:
        group.add_parsers(sub)
    return parser


@keeps_subnormals  # a command computes as a fresh process does, whatever its caller has set
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    try:
        with NativeLog():  # TVM's C++ warnings: counted (by run, in its summary), not printed
            return _dispatch(parser, args)
    except BnfuzzError as exc:  # bad input or environment (UsageError among them): one line
        print(f"bnfuzz: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    require_tvm()
    command = COMMANDS.get(args.command)
    if command is None:
        parser.error(f"unknown command {args.command!r}")
    return command(args)
