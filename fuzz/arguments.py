"""The ``bnfuzz`` command line's arguments: every command, option, default and help text.

:func:`parser` only parses: it checks each value's form (a positive number, a known
choice) and nothing about the world (whether a pass exists, a folder is writable), which
the commands check when they run.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from fuzz.errors import UsageError

__all__ = ["comma_names", "parser"]


def _positive(kind: type, zero: bool = False) -> Any:
    """A parser of positive numbers of ``kind`` (or zero too, with ``zero``)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            expected = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(f"must be {'zero or ' if zero else ''}positive, got {text}")
        return value

    return parse


def parser() -> argparse.ArgumentParser:
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
        help="the pass under test: 'upstream' (TVM's FoldBatchnormToConv2D), 'fixed' (ours), "
        "'identity' (changes nothing), or MODULE:ATTR naming a pass class, factory or instance",
    )
    run.add_argument(
        "--must-fold",
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
        type=_positive(float),
        metavar="SECONDS",
        help="stop generating new examples after this many seconds (shrinking may add a little)",
    )
    limit.add_argument(
        "--max-examples",
        type=_positive(int),
        metavar="N",
        help="stop after N checked value sets (cases); shrinking steps are not counted",
    )
    run.add_argument("--seed", type=int, default=0, help="seed of the Hypothesis search (default 0)")
    run.add_argument(
        "--shrink-seconds",
        type=_positive(float, zero=True),
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
        "'crash' or 'timeout' finding and the campaign goes on (default: on with --pipelines)",
    )
    run.add_argument(
        "--workers",
        type=_positive(int),
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
        type=_positive(float),
        default=60.0,
        metavar="SECONDS",
        help="with --isolate, the longest one case may take before it is a 'timeout' finding (default 60)",
    )
    bench = sub.add_parser(
        "bench",
        help="measure checked value sets per second (naive, compile-once cold and warm, a campaign), "
        "or, with --time-to-find, the seconds to find each known bug and seeded defect",
        description="Draw value sets once, then check them with the naive path, the cached path from a "
        "cold cache, and the cached path warm (as a campaign checks: the pass judged, not TVM's lowering; "
        "then warmed up and measured once more judging the lowering too), each for --seconds; then run a "
        "campaign against the pass "
        "for --seconds (generation, shrinking and compilation included) and report its rate beside the "
        "warm one; then a growth table (12 slices of --growth-seconds). With --time-to-find: fresh "
        "campaigns per seed against upstream (each of its eight defect classes), against every mutant "
        "of the fixed pass (the time to kill it) and against fixed itself (never flagged), each for "
        "--budget seconds, one at a time.",
        epilog="Exit codes: 0 done, 1 (--time-to-find) a mutant survived a seed or fixed was flagged, "
        "2 usage error.",
    )
    bench.add_argument(
        "--pass",
        dest="pass_name",
        default="upstream",
        metavar="P",
        help="the pass to run (default upstream; same names as for run)",
    )
    bench.add_argument(
        "--seconds",
        type=_positive(float),
        default=120.0,
        help="length of each of the six timed phases: naive, cold, warm, warming up and then warm with "
        "the lowering judged, campaign (default 120). It is not the total: before them the value sets "
        "are drawn (about as long as one phase), and after them the growth table takes 12 x "
        "--growth-seconds; the run prints its total at the end. A phase ends at its first check past "
        "SECONDS, or early when it runs out of value sets",
    )
    bench.add_argument(
        "--growth-seconds",
        type=_positive(float),
        default=5.0,
        help="time slice per path and layer size in the growth table (default 5)",
    )
    bench.add_argument(
        "--campaign-seconds",
        type=float,
        default=0.0,
        help="also run the campaign with each path for this long and compare first hits (default 0: skip)",
    )
    bench.add_argument("--seed", type=int, default=0, help="seed of the drawn value sets (default 0)")
    bench.add_argument(
        "--isolation",
        action="store_true",
        help="instead, measure crash isolation: the same value sets, each in a drawn pipeline, checked "
        "in this process and in a worker process, in alternating rounds",
    )
    bench.add_argument(
        "--rounds", type=_positive(int), default=3, help="with --isolation, rounds per side (default 3)"
    )
    bench.add_argument(
        "--batches",
        type=_positive(int),
        default=100,
        help="with --isolation, drawn batches of value sets (default 100)",
    )
    bench.add_argument(
        "--time-to-find",
        action="store_true",
        help="instead, the seconds to the first hit of each upstream defect class and each mutant "
        "(median over --seeds), and whether fixed stays clean",
    )
    bench.add_argument(
        "--seeds",
        type=_positive(int),
        default=3,
        help="with --time-to-find, campaigns per target (default 3)",
    )
    bench.add_argument(
        "--budget",
        type=_positive(float),
        default=300.0,
        metavar="SECONDS",
        help="with --time-to-find, the longest one campaign runs (default 300)",
    )
    bench.add_argument(
        "--only",
        default="",
        metavar="T,T",
        help="with --time-to-find, only these targets: upstream, mutants, control, or mutant names "
        "(default: all)",
    )
    bench.add_argument("--json", action="store_true", help="print one JSON summary object on stdout")
    effect = sub.add_parser(
        "effectiveness",
        help="fold whole ONNX networks (ResNet, MobileNetV2, EfficientNet, ResNeXt) as TVM users import "
        "them: batch_norms left, error vs float64, per-fold verdicts, runtime vs upstream",
        description="Build the model zoo offline (ONNX, seeded values), import each model with TVM's ONNX "
        "frontend in each variant (nchw: float32; nhwc: float32 after ConvertLayout to NHWC/HWIO; "
        "float16), fold it with upstream's pass, the measured one and the bounded fold (fixed with "
        "assume_bounded_activations=True), and report per model and variant the batch_norms left, the "
        "error against a float64 reference of the unfolded and each folded network, how many of its "
        "conv+batch_norm layers the fuzzer's oracle flags for each pass, and the compiled runtimes timed "
        "side by side (zero_pipeline under PassContext(opt_level=3), llvm). Progress goes to stderr.",
        epilog="Exit codes: 0 done, 2 usage error.",
    )
    effect.add_argument(
        "--pass",
        dest="pass_name",
        default="fixed",
        metavar="P",
        help="the pass to measure against upstream (default fixed; same names as for run)",
    )
    effect.add_argument(
        "--models",
        metavar="M,M",
        help="comma-separated zoo models (default all: resnet18, resnet50, mobilenet_v2, efficientnet_b0, "
        "resnext50_32x4d)",
    )
    effect.add_argument(
        "--variants",
        metavar="V,V",
        help="comma-separated variants (default all: nchw, nhwc, float16)",
    )
    effect.add_argument(
        "--size",
        type=_positive(int),
        metavar="N",
        help="input resolution N x N, at least 32 (default 64; 224 is the published one)",
    )
    effect.add_argument("--seed", type=int, help="seed of the models' values and the inputs (default 0)")
    effect.add_argument(
        "--rounds", type=_positive(int), default=7, help="turns each program takes at being timed (default 7)"
    )
    effect.add_argument(
        "--number",
        type=_positive(int),
        default=5,
        help="calls per turn; a turn's time is their median (default 5)",
    )
    effect.add_argument(
        "--layers",
        action="store_true",
        help="instead, the single-layer benchmark: ResNet-50 and MobileNetV2 conv+batch_norm layers built "
        "by the fuzzer itself, NCHW and NHWC, float32 and float16, the pass against upstream",
    )
    effect.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (settings, wall time, rows) on stdout; with --layers, an array of rows",
    )
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
        "and report whether the pass still fails or passes as expected.",
        epilog="Exit codes: 0 every entry as expected, 1 some entry not as expected, 2 usage error "
        "(an unreadable entry is reported, named with its field, and the others still replay).",
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
    return parser


def comma_names(given: str | None, option: str, kind: str, known: list[str]) -> list[str]:
    """A comma-separated option's names, each checked against ``known`` (all if not given)."""
    if given is None:
        return known
    names = [name.strip() for name in given.split(",") if name.strip()]
    if not names:
        raise UsageError(f"{option} {given!r}: expected a comma-separated list of {', '.join(known)}")
    for name in names:
        if name not in known:
            raise UsageError(
                f"{option} {given!r}: unknown {kind} {name!r}; expected some of {', '.join(known)}"
            )
    return names
