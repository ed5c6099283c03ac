"""``bnfuzz run``: fuzz one pass, print the summary and what to do next."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fuzz.backends import pass_help
from fuzz.cli import tables
from fuzz.cli.common import (
    EXIT_CLEAN,
    EXIT_FINDINGS,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    positive,
    resolve,
)
from fuzz.engine.run import check_out_dir

__all__ = ["COMMANDS", "add_parsers"]


def add_parsers(sub: Any) -> None:
    """This module's commands, added to the ``bnfuzz`` parser's subcommands."""
    run = sub.add_parser(
        "run",
        help="fuzz one pass and report every distinct bug, each shrunk to a minimal case",
        description="Generate conv+batch_norm graphs, run them through the pass on the llvm Relax VM, "
        "judge against a float64 reference, and shrink each distinct finding.",
        epilog="Exit codes: 0 no findings, 1 findings, 2 usage error or an output that could not be "
        "written (a full disk: the run stops, nothing is half-written, the summary lists every finding), "
        "130 interrupted by Ctrl-C (what was found so far is written and summarised). The first Ctrl-C "
        "lets the case in hand finish; a second one stops at once.",
    )
    run.add_argument(
        "--pass",
        dest="pass_name",
        required=True,
        metavar="P",
        help="the fold under test, by backend: " + pass_help(),
    )
    run.add_argument(
        "--must-fold",
        dest="complete_fold",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="judge the pass as a complete fold: a batch_norm it keeps without a reason the oracle "
        "can state (training, non-channel axis, non-constant operand, shared conv output, statistics "
        "in use, a folded constant out of range) is a 'missed-fold' finding (default: on for 'fixed')",
    )
    run.add_argument(
        "--lowering",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also judge TVM's own lowering (baseline-* counts) on every case: build and run the graphs "
        "the pass leaves unchanged, and the unfolded program wherever the folded one ran; slower "
        "(otherwise the unfolded program runs only where the folded outputs alone miss the bound; "
        "verdicts on the pass are the same) (default: on for 'identity', the control, off otherwise)",
    )
    limit = run.add_argument_group("budget (default: --budget 60)")
    limit.add_argument(
        "--budget",
        type=positive(float),
        metavar="SECONDS",
        help="stop generating new examples after this many seconds (shrinking may add a little)",
    )
    limit.add_argument(
        "--max-examples",
        type=positive(int),
        metavar="N",
        help="stop after N checked value sets (cases); shrinking steps are not counted",
    )
    run.add_argument("--seed", type=int, default=0, help="seed of the Hypothesis search (default 0)")
    run.add_argument(
        "--shrink-seconds",
        type=positive(float, zero=True),
        default=None,
        metavar="SECONDS",
        help="longest time Hypothesis spends shrinking one finding; simplifying its attributes then "
        "gets twice as long (default: a sixtieth of --budget, between 2 and 60; 60 without --budget); "
        "0 keeps each finding as first found, so what a run reports does not depend on the machine's speed",
    )
    run.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write each shrunk finding as a JSON file into DIR (created if missing)",
    )
    run.add_argument("--json", action="store_true", help="print one JSON summary object on stdout")
    run.add_argument(
        "--report",
        type=Path,
        metavar="DIR",
        help="also write a campaign report into DIR: report.md (findings with their files, attribute "
        "combinations run, error and overflow-headroom distributions) and report.png",
    )
    run.add_argument(
        "--no-cache",
        action="store_true",
        help="rebuild both graphs for every example instead of compiling once per structure",
    )
    run.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help="keep compiled structures in DIR as well, for later runs (default: memory only)",
    )
    run.add_argument(
        "--pipelines",
        action="store_true",
        help="run each case through a drawn pipeline of BN-relevant Relax passes around the pass "
        "(Sequential or direct calls, opt level 0 to 3) instead of through the pass alone",
    )
    run.add_argument(
        "--isolate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="check cases in a reused worker process, so a native crash or a hang becomes a "
        "'crash' or 'timeout' finding and the campaign goes on (default: on with --pipelines, and for "
        "every backend but TVM's pass alone: ONNX Runtime, the ONNX tools, OpenVINO and PyTorch run "
        "native code, which was seen to segfault; --no-isolate checks in process, faster)",
    )
    run.add_argument(
        "--workers",
        type=positive(int),
        default=1,
        metavar="N",
        help="run N campaigns in parallel processes (seeds SEED..SEED+N-1, --max-examples split "
        "between them) that share one example database and the --out folder; the summary merges them",
    )
    run.add_argument(
        "--database",
        metavar="DIR|URL",
        help="Hypothesis example database shared by campaigns: a folder, or redis://HOST:PORT/DB; "
        "each round first replays the failures saved there (default: none for one worker, "
        ".bnfuzz/examples with --workers)",
    )
    run.add_argument(
        "--timeout",
        type=positive(float),
        default=60.0,
        metavar="SECONDS",
        help="with --isolate, the longest one case may take before it is a 'timeout' finding (default 60)",
    )


class _Progress:
    """Progress of a run on standard error: on a terminal, one status line rewritten in
    place; otherwise (a log, a pipe) a line every :data:`PROGRESS_SECONDS`."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.last = time.monotonic()
        self.shown = False

    def __call__(self, p: Any) -> None:
        line = tables.progress_line(p)
        if self.tty:
            self.stream.write("\r\033[K" + line)
            self.shown = True
        elif time.monotonic() - self.last >= PROGRESS_SECONDS:
            self.last = time.monotonic()
            self.stream.write(line + "\n")
        self.stream.flush()

    def end(self) -> None:
        if self.shown:  # leave the terminal on a fresh line
            self.stream.write("\r\033[K")
            self.stream.flush()


#: Seconds between progress lines of ``bnfuzz run`` when standard error is not a terminal.
PROGRESS_SECONDS = 30.0


def _run(args: argparse.Namespace) -> int:
    from fuzz.engine.run import RunConfig, run

    config = RunConfig.from_namespace(args)
    fold = resolve(config.pass_name, config.complete_fold)
    if args.report is not None:
        check_out_dir(args.report, "--report")
    progress = _Progress(sys.stderr)
    try:
        outcome = run(config, fold, progress)
    finally:
        progress.end()
    interrupted = EXIT_INTERRUPTED if outcome.summary["interrupted"] else None
    return _finish(args, outcome.summary, outcome.output_error, interrupted)


def _program() -> str:
    """How the user ran ``bnfuzz`` (``.venv/bin/bnfuzz`` from a clone), to print commands
    they can paste."""
    invoked = Path(sys.argv[0])
    if invoked.name != "bnfuzz":
        return "bnfuzz"
    relative = os.path.relpath(invoked)
    return relative if not relative.startswith("..") and os.sep in relative else "bnfuzz"


def _next_steps(out: Path | None, summary: dict[str, Any]) -> list[str]:
    """What a run wrote and the commands that take its findings further."""
    from fuzz.store.storage import file_name

    if not summary["findings"]:
        return []
    exe = _program()
    if out is None:
        return [f"next: run again with --out DIR to keep each finding as a file ({exe} run --help)"]
    first = out / file_name(summary["findings"][0]["signature"])
    steps = [
        (f"{exe} triage {out}", "list them, grouped by signature"),
        (f"{exe} render {first} --issue", "the issue text for one (--script: its reproducer)"),
        (f"{exe} promote {out}/*.json --corpus my-corpus", "simplify, and measure upstream and fixed"),
        (f"{exe} file-issues my-corpus --repo apache/tvm", "preview the issues, one per root cause"),
    ]
    width = max(len(command) for command, _ in steps)
    return [
        f"wrote {len(summary['findings'])} findings to {out}/, one JSON file per distinct bug; next:",
        *(f"  {command.ljust(width)}  # {what}" for command, what in steps),
    ]


def _finish(
    args: argparse.Namespace, summary: dict[str, Any], output_error: str | None, exit_code: int | None
) -> int:
    """Write the report if asked, print the summary (JSON or a table), and return the exit
    code: ``exit_code`` if given, else by the findings. If an output could not be written
    (``output_error``, or the report now), the summary is still printed, every finding in
    it, then the error: exit 2."""
    if args.report is not None:
        from fuzz.render.campaign_summary import write_report

        try:
            summary["report"] = str(write_report(summary, args.report, args.out))
        except OSError as exc:
            failed = f"--report {args.report}: cannot write the report ({exc.strerror or exc})"
            output_error = failed if output_error is None else f"{output_error}; {failed}"
    summary["output_error"] = output_error
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(tables.run_table(summary))
        if summary.get("report"):
            print(f"report: {summary['report']}")
        native = tables.native_log_line(summary)
        if native:
            print(native)
        for line in _next_steps(args.out, summary):
            print(line)
    if output_error is not None:
        unwritten = summary.get("unwritten") or []
        lost = f"; not written, but in the summary above: {', '.join(unwritten)}" if unwritten else ""
        print(f"bnfuzz: error: {output_error}{lost}", file=sys.stderr)
        return EXIT_USAGE
    if exit_code is not None:
        return exit_code
    return EXIT_FINDINGS if summary["findings"] else EXIT_CLEAN


#: Command name -> the function that runs it.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"run": _run}
