"""The ``bnfuzz`` command line.

``bnfuzz run --pass P [--must-fold] [--budget SECONDS | --max-examples N] [--seed S] [--out DIR] [--json]``
``bnfuzz bench [--pass P] [--seconds S] [--json]``
``bnfuzz effectiveness [--pass P] [--models M,M] [--variants V,V] [--size N] [--seed S] [--rounds N]
[--number N] [--layers] [--json]``
``bnfuzz promote FINDING... [--corpus DIR] [--passes P,P]``
``bnfuzz replay PATH... [--pass P]``
``bnfuzz render PATH (--script | --issue)``
``bnfuzz triage PATH...``
``bnfuzz declines [--pass P] [--corpus DIR] [--passes P,P] [--seed S]``

Exit codes: 0 no findings, 1 findings, 2 usage error (bad arguments, unknown pass,
unwritable output folder, a missing or unsupported TVM) or an output that could not be
written mid-run (a full disk: the campaign stops, nothing is half-written, and the summary
still lists every finding), 130 for a ``run`` stopped by Ctrl-C (its findings so far are
written, summarised and reported).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fuzz.errors import EXIT_ERROR, BnfuzzError

__all__ = [
    "EXITS_WITH_SUMMARY",
    "EXIT_CLEAN",
    "EXIT_FINDINGS",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "SUPPORTED_TVM",
    "UsageError",
    "main",
]

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, EXIT_ERROR
#: Ctrl-C: the campaign stopped early; what it found is written and summarised.
EXIT_INTERRUPTED = 130
#: A worker's exit codes that come with a JSON summary on its stdout (2: only when the
#: summary names an ``output_error``).
EXITS_WITH_SUMMARY = (EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERRUPTED)


class UsageError(BnfuzzError):
    """Bad command-line input: reported in one line, exit 2."""


#: The TVM releases the fuzzer is tested on (``fuzz/compat.py`` keeps their differences;
#: the nightly matrix runs each). ``BNFUZZ_ANY_TVM=1`` tries another one, e.g. a build of
#: TVM's main branch.
SUPPORTED_TVM = ("0.25", "0.26", "0.27")


def _require_tvm() -> None:
    """A usage error, before any work, if TVM cannot be imported or is not a supported release."""
    try:
        import tvm
    except (ImportError, OSError) as exc:  # OSError: a TVM library that does not load
        raise UsageError(
            f"cannot import TVM: {type(exc).__name__}: {exc}. Install a supported apache-tvm "
            f"({', '.join(SUPPORTED_TVM)}) with `make setup` (or `make setup TVM=0.26`)"
        ) from None
    version = str(getattr(tvm, "__version__", "unknown"))
    supported = any(version.startswith(v + ".") for v in SUPPORTED_TVM)
    if not supported and os.environ.get("BNFUZZ_ANY_TVM") != "1":
        raise UsageError(
            f"TVM {version} is not supported (supported: {', '.join(SUPPORTED_TVM)}); "
            "set BNFUZZ_ANY_TVM=1 to try it anyway"
        )


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            expected = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    return parse


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bnfuzz",
        description="Hypothesis-driven fuzzer for batch-norm-folding passes (TVM Relax).",
        epilog="Exit codes: 0 no findings, 1 findings, 2 usage error.",
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
        type=_positive(float),
        default=None,
        metavar="SECONDS",
        help="longest time Hypothesis spends shrinking one finding; simplifying its attributes then "
        "gets twice as long (default: a sixtieth of --budget, between 2 and 60; 60 without --budget)",
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
        help="time slice of each of the six phases: naive, cold, warm, warming up and then warm with "
        "the lowering judged, campaign (default 120; the whole run takes about 6 x SECONDS + 12 x "
        "--growth-seconds)",
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
        description="Replay each finding on every pass of --passes and write a corpus entry recording, "
        "per pass, whether it fails or passes and why.",
        epilog="Exit codes: 0 done, 2 usage error (unreadable finding, unknown pass).",
    )
    promote.add_argument(
        "findings", nargs="+", type=Path, metavar="FINDING", help="JSON files from 'run --out'"
    )
    promote.add_argument(
        "--corpus", type=Path, default=Path("corpus"), help="the corpus folder to write to (default corpus/)"
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
    replay.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="entry files or folders of them")
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
    render.add_argument("path", type=Path, metavar="PATH", help="a corpus entry (JSON)")
    form = render.add_mutually_exclusive_group(required=True)
    form.add_argument("--script", action="store_true", help="print the standalone reproducer script")
    form.add_argument("--issue", action="store_true", help="print the issue text (title, behaviour, script)")
    file_issues = sub.add_parser(
        "file-issues",
        help="one GitHub issue per corpus entry whose signature is not filed yet (dry run by default)",
        description="Render each entry as an issue, list the repository's open issues, skip the "
        "signatures already filed (a marker in the issue body names it), and print what would be "
        "filed; with --apply, file it through the GitHub REST API with the token in GITHUB_TOKEN.",
        epilog="Exit codes: 0 done, 2 usage error (unreadable entry, no token for --apply, the API "
        "refused or could not be reached).",
    )
    file_issues.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="entry files or folders of them"
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
    return parser


def _resolve(name: str, complete_fold: bool | None = None) -> Any:
    """The factory for pass ``name``; an unknown name is a usage error (exit 2)."""
    from fuzz.passes import UnknownPass, resolve_pass

    try:
        return resolve_pass(name, complete_fold=complete_fold)
    except UnknownPass as exc:
        raise UsageError(str(exc)) from None


def _time_to_find(args: argparse.Namespace) -> int:
    from fuzz.time_to_find import failed, run_time_to_find, targets

    only = [w for w in args.only.split(",") if w]
    try:
        targets(only)
    except ValueError as exc:
        raise UsageError(f"--only: {exc}") from None
    summary = run_time_to_find(
        seeds=args.seeds,
        budget=args.budget,
        only=only,
        log=lambda message: print(f"bench: {message}", file=sys.stderr, flush=True),
    )
    if args.json:
        print(json.dumps(summary, indent=2))
        return EXIT_FINDINGS if failed(summary) else EXIT_CLEAN

    def seconds(values: list[float | None]) -> str:
        return ", ".join("-" if s is None else f"{s:.1f}" for s in values)

    def med(value: float | None) -> str:
        return "miss" if value is None else f"{value:.1f}"

    print(f"seconds to the first hit, per seed 0..{args.seeds - 1} (budget {args.budget:.0f} s each)")
    for row in summary.get("upstream", []):
        print(f"  upstream {row['class']:24} median {med(row['median']):>6}   {seconds(row['seconds'])}")
    if "upstream" in summary:
        print(f"  upstream: every class found in {summary['upstream_all_found_seeds']} of {args.seeds} seeds")
    for row in summary.get("mutants", []):
        first = next((k for k in row["kills"] if k), None)
        by = f"  ({first['symptom']})" if first else ""
        print(f"  mutant {row['mutant']:26} median {med(row['median']):>6}   {seconds(row['seconds'])}{by}")
    if "mutants" in summary:
        print(
            f"  mutants killed in every seed: {summary['mutants_killed']} of {len(summary['mutants'])}; "
            f"median of medians {med(summary['mutants_median'])} s, worst {med(summary['mutants_worst'])} s"
        )
    if "control_flagged" in summary:
        print(f"  control (fixed) flagged in {len(summary['control_flagged'])} of {args.seeds} seeds")
    return EXIT_FINDINGS if failed(summary) else EXIT_CLEAN


def _bench(args: argparse.Namespace) -> int:
    from fuzz.bench import run_bench, run_isolation_bench

    if args.time_to_find:
        return _time_to_find(args)
    make_pass = _resolve(args.pass_name)
    if args.isolation:
        result = run_isolation_bench(
            args.pass_name,
            batches=args.batches,
            rounds=args.rounds,
            seed=args.seed,
            log=lambda message: print(f"bench: {message}", file=sys.stderr, flush=True),
        )
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            print(
                f"{result['value_sets']} value sets in pipelines, {len(result['rounds'])} rounds: "
                f"isolated / in-process = {result['ratio']} overall, "
                f"{result['ratio_warm']} after the first round"
            )
        return EXIT_CLEAN
    summary = run_bench(
        make_pass,
        seconds=args.seconds,
        seed=args.seed,
        growth_seconds=args.growth_seconds,
        campaign_seconds=args.campaign_seconds,
        log=lambda message: print(f"bench: {message}", file=sys.stderr, flush=True),
    )
    if args.json:
        print(json.dumps(summary, indent=2))
        return EXIT_CLEAN
    for path in ("naive", "cached_cold", "cached_warm", "cached_warm_lowering", "campaign"):
        row = summary[path]
        print(
            f"{path:20} {row['value_sets']:7d} value sets in {row['seconds']:7.1f} s "
            f"= {row['per_second']:8.1f}/s"
        )
    campaign = summary["campaign"]
    print(
        f"campaign: {campaign['searching_per_second']:.1f}/s while searching "
        f"({campaign['shrink_seconds']:.1f} s shrinking {campaign['findings']} findings), "
        f"{campaign['structures_compiled']} structures compiled; "
        f"campaign / warm = {summary['ratio_campaign_warm']}"
    )
    print(
        f"cached/naive: {summary['ratio_cold']}x cold, {summary['ratio_warm']}x warm; "
        f"cold hit rate {summary['cached_cold']['hit_rate']:.1%}"
    )
    print("growth (float32 conv-bn, 3x3): channels spatial naive/s cached-warm/s")
    for g in summary["growth"]:
        print(
            f"  {g['channels']:4d} {g['spatial']:4d} {g['naive_per_second']:10.2f} "
            f"{g['cached_warm_per_second']:10.2f}"
        )
    for sig, times in summary.get("first_hit_seconds", {}).items():
        print(f"first hit {sig}: naive {times.get('naive', '-')} s, cached {times.get('cached', '-')} s")
    return EXIT_CLEAN


def _effectiveness(args: argparse.Namespace) -> int:
    make_pass = _resolve(args.pass_name)
    upstream = _resolve("upstream")

    def log(message: str) -> None:
        print(f"effectiveness: {message}", file=sys.stderr, flush=True)

    zoo_options = {
        "--models": args.models,
        "--variants": args.variants,
        "--size": args.size,
        "--seed": args.seed,
    }
    if args.layers:
        given = [option for option, value in zoo_options.items() if value is not None]
        if given:
            raise UsageError(f"{', '.join(given)}: only for the model zoo, not with --layers")
        return _layer_effectiveness(args, make_pass, upstream, log)
    from fuzz.effectiveness import DEFAULT_SIZE, VARIANTS, run_effectiveness
    from fuzz.zoo import MIN_SIZE, MODELS

    models = _names(args.models, "--models", "model", list(MODELS))
    variants = _names(args.variants, "--variants", "variant", list(VARIANTS))
    size = DEFAULT_SIZE if args.size is None else args.size
    if size < MIN_SIZE:
        raise UsageError(
            f"--size {size}: too small; every model needs at least {MIN_SIZE} (five stride-2 stages)"
        )
    seed = 0 if args.seed is None else args.seed
    start = time.perf_counter()
    rows = run_effectiveness(
        make_pass,
        upstream,
        models=models,
        variants=variants,
        size=size,
        seed=seed,
        rounds=args.rounds,
        number=args.number,
        log=log,
    )
    from fuzz.compat import tvm_version

    summary = {
        "pass": args.pass_name,
        "size": size,
        "seed": seed,
        "rounds": args.rounds,
        "number": args.number,
        "tvm": tvm_version(),
        "seconds": round(time.perf_counter() - start, 1),
        "rows": rows,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_zoo_table(summary)
    return EXIT_CLEAN


def _names(given: str | None, option: str, kind: str, known: list[str]) -> list[str]:
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


#: The passes of a zoo row, in table order (each beside the unfolded program).
_ZOO_PASSES = ("upstream", "pass", "bounded")


def _print_zoo_table(summary: dict[str, Any]) -> None:
    """One line per model and variant (fuzz/effectiveness.py says what each figure is),
    then a legend and notes: exceptions, failures, flagged folds."""
    rows = summary["rows"]
    print(
        f"model zoo at {summary['size']}x{summary['size']}, seed {summary['seed']}: pass {summary['pass']!r} "
        f"against upstream and bounded (TVM {summary['tvm']}), {len(rows)} rows in {summary['seconds']:.0f} s"
    )
    print(
        f"{'model':16} {'variant':8} {'bn':>3} | {'left':11} | {'error: unfolded':>15} {'upstream':>9} "
        f"{'pass':>9} {'bounded':>9} | {'flagged':11} | {'ms: unfolded':>12} {'upstream':>9} {'pass':>9} "
        f"{'bounded':>9} | {'right':5} | ratio"
    )
    notes = []
    for row in rows:
        label = f"{row['model']} {row['variant']}"
        entries = [row[key] for key in _ZOO_PASSES]
        starred = "decomposed" in row  # the unfolded network does not build: the decomposed one stands in
        baseline = row["decomposed"] if starred else row["unfolded"]
        if starred:
            notes.append(f"{label}: unfolded: {row['unfolded']['failure'][:150]}")
        for key, entry in zip(_ZOO_PASSES, entries, strict=True):
            notes += [
                f"{label}: {key}: {what}: {entry[what][:150]}"
                for what in ("exception", "failure")
                if what in entry
            ]
            if entry["folds"]["symptoms"]:
                listed = ", ".join(f"{n} {symptom}" for symptom, n in entry["folds"]["symptoms"].items())
                notes.append(f"{label}: {key}: flagged folds: {listed}")
        left = " ".join("x" if e["batch_norms"] is None else str(e["batch_norms"]) for e in entries)
        errors = [_figure(baseline.get("error"), starred)] + [_figure(e.get("error")) for e in entries]
        times = [_figure(baseline.get("ms"), starred, "{:.1f}")] + [
            _figure(e.get("ms"), fmt="{:.1f}") for e in entries
        ]
        flagged = " ".join(str(e["folds"]["findings"]) for e in entries)
        right = " ".join("y" if e["right"] else "n" for e in entries)
        print(
            f"{row['model']:16} {row['variant']:8} {row['batch_norms']:>3} | {left:11} | {errors[0]:>15} "
            f"{errors[1]:>9} {errors[2]:>9} {errors[3]:>9} | {flagged:11} | {times[0]:>12} {times[1]:>9} "
            f"{times[2]:>9} {times[3]:>9} | {right:5} | {row.get('ratio', '-')}"
        )
    print(
        "bn: batch_norms imported. left, flagged, right: for upstream, the pass, bounded. left: "
        "batch_norms after the fold (x: the pass raised). error: max|out - ref| / max|ref| against float64. "
        "flagged: conv+batch_norm layers the oracle finds a fault in. right: all folded, nothing flagged, "
        "error within 4x the unfolded one's. ratio: the pass's ms over upstream's, where upstream is right. "
        "*: the unfolded network does not build; the figure is the decomposed one's "
        "(DecomposeOpsForInference)."
    )
    for note in notes:
        print(f"  {note}")


def _figure(value: float | None, starred: bool = False, fmt: str = "{:.2e}") -> str:
    return "-" if value is None else fmt.format(value) + ("*" if starred else "")


def _layer_effectiveness(args: argparse.Namespace, make_pass: Any, upstream: Any, log: Any) -> int:
    from fuzz.effectiveness import run_layers

    rows = run_layers(make_pass, upstream, rounds=args.rounds, number=args.number, log=log)
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_CLEAN
    print(f"{'layer':48} {'pass: bn left, finding, ms':36} {'upstream: bn left, finding, ms':40} ratio")
    for row in rows:
        cells = []
        for name in ("pass", "upstream"):
            r = row.get(name, {})
            finding = r.get("finding") or "-"
            cells.append(f"{r.get('batch_norms', '?')!s:>2} {finding[:18]:18} {r.get('ms', '-')!s:>10}")
        print(f"{row['layer']:48} {cells[0]:36} {cells[1]:40} {row.get('ratio', '-')}")
    return EXIT_CLEAN


def _promote(args: argparse.Namespace) -> int:
    from fuzz.corpus import EntryError, promote

    passes = tuple(p for p in args.passes.split(",") if p)
    for name in passes:
        _resolve(name)
    _check_out_dir(args.corpus, "--corpus")
    for finding in args.findings:
        try:
            written, kept = promote(finding, args.corpus, passes)
        except EntryError as exc:
            raise UsageError(str(exc)) from None
        print(written if kept is None else f"{written} (already there with this signature: {kept})")
    return EXIT_CLEAN


def _entry_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    return files


def _replay(args: argparse.Namespace) -> int:
    from fuzz.corpus import EntryError, load_entry, replay

    if args.pass_name is not None:
        _resolve(args.pass_name)
    bad = unexpected = 0
    for path in _entry_files(args.paths):
        try:
            entry = load_entry(path)
        except EntryError as exc:
            print(f"bnfuzz: error: {exc}", file=sys.stderr)
            bad += 1
            continue
        for name in [args.pass_name] if args.pass_name else sorted(entry.expect):
            result = replay(entry, name)
            unexpected += not result.as_expected
            mark = "ok  " if result.as_expected else "FAIL"
            wanted = f"expected {result.expected}" if result.expected else "no expectation"
            print(f"{mark} {path} on {name}: {result.status} ({wanted})")
        if args.scripts:
            code = _run_script(entry)
            expected_code = entry.expect.get(entry.pass_name) == "fails"
            reproduces = code != 0
            unexpected += reproduces != expected_code
            mark = "ok  " if reproduces == expected_code else "FAIL"
            shown = f"signal {-code}" if code < 0 else f"exit {code}"
            print(f"{mark} {path} script: {'reproduces' if reproduces else 'does not reproduce'} ({shown})")
    if bad:
        return EXIT_USAGE
    return EXIT_FINDINGS if unexpected else EXIT_CLEAN


def _run_script(entry: Any) -> int:
    """Run an entry's reproducer in a fresh interpreter (from this directory, so a script for
    ``fixed`` finds ``fuzz``); its exit code, negative for a signal."""
    import subprocess

    from fuzz.report import render_script

    with tempfile.TemporaryDirectory(prefix="bnfuzz-repro-") as tmp:
        script = Path(tmp) / "repro.py"
        script.write_text(render_script(entry))
        try:
            done = subprocess.run(
                [sys.executable, str(script)], capture_output=True, timeout=900, cwd=Path.cwd()
            )
        except subprocess.TimeoutExpired:
            return 124
    return done.returncode


def _render(args: argparse.Namespace) -> int:
    from fuzz.corpus import EntryError, load_entry
    from fuzz.report import render_issue, render_script

    try:
        entry = load_entry(args.path)
    except EntryError as exc:
        raise UsageError(str(exc)) from None
    print(render_script(entry) if args.script else render_issue(entry), end="")
    return EXIT_CLEAN


def _declines(args: argparse.Namespace) -> int:
    from fuzz.corpus import dumps_entry, file_name, write_atomic
    from fuzz.decline import Reason
    from fuzz.declines import DeclineNotFound, decline_entry

    passes = tuple(p for p in args.passes.split(",") if p)
    for name in (args.pass_name, *passes):
        _resolve(name)
    _check_out_dir(args.corpus, "--corpus")
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


def _triage(args: argparse.Namespace) -> int:
    from fuzz.case import CaseError, case_from_json

    groups: dict[str, list[tuple[int, Path]]] = {}
    bad = 0
    for path in _entry_files(args.paths):
        try:
            record = json.loads(path.read_text())
            case = case_from_json(record["case"])
            signature = str(record["signature"])
        except (OSError, ValueError, KeyError, TypeError, CaseError) as exc:
            print(f"bnfuzz: error: {path}: {exc}", file=sys.stderr)
            bad += 1
            continue
        groups.setdefault(signature, []).append((case.size, path))
    for signature in sorted(groups):
        members = sorted(groups[signature])
        size, smallest = members[0]
        print(f"{len(members):5d}  {signature}  smallest: {smallest} ({size} values)")
    return EXIT_USAGE if bad else EXIT_CLEAN


def _check_out_dir(out: Path, option: str = "--out") -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".bnfuzz-probe-"):
            pass
    except OSError as exc:
        raise UsageError(f"{option} {out}: cannot write there ({exc.strerror or exc})") from None


def _run(args: argparse.Namespace) -> int:
    make_pass = _resolve(args.pass_name, args.must_fold)
    if args.out is not None:
        _check_out_dir(args.out)
    if args.report is not None:
        _check_out_dir(args.report, "--report")
    budget = args.budget
    if budget is None and args.max_examples is None:
        budget = 60.0
    if args.workers > 1:
        return _run_workers(args, budget)
    database = None
    if args.database is not None:
        from fuzz.campaign import example_database

        database = _open_database(args.database, example_database)

    from fuzz.attributes import classify
    from fuzz.campaign import Hit, Progress, StopCampaign, run_campaign
    from fuzz.campaign_report import histograms
    from fuzz.case import case_to_json
    from fuzz.compat import tvm_version
    from fuzz.corpus import file_name, write_atomic
    from fuzz.pipeline import pipeline_to_json

    last_print = [0.0]

    def progress(p: Progress) -> None:
        now = time.monotonic()
        if now - last_print[0] < 5 and not p.shrinking:
            return
        last_print[0] = now
        state = "shrinking a new finding" if p.shrinking else "searching"
        counts = "".join(f"\n    {hit.hits:6d}  {hit.signature}" for hit in p.hits)
        print(
            f"[{p.seconds:6.1f}s] {p.examples} examples, {len(p.hits)} distinct findings, {state}"
            + (counts if counts and not p.shrinking else ""),
            file=sys.stderr,
            flush=True,
        )

    def summarise(hit: Hit) -> dict[str, Any]:
        return {
            "signature": str(hit.signature),
            "symptom": hit.finding.symptom.value,
            "stage": hit.finding.stage,
            "error_type": hit.finding.error_type,
            "message": hit.finding.message,
            "first_seconds": round(hit.first_seconds, 3),
            "shrink_seconds": round(hit.shrink_seconds, 3),
            "hits": hit.hits,
            "attributes": classify(hit.checked.case),
        }

    written: set[str] = set()

    def write_new(hits: list[Hit]) -> None:
        """Each finding goes to --out as soon as it is shrunk, so a killed campaign loses none."""
        for hit in hits:
            if args.out is None or str(hit.signature) in written:
                continue
            target = args.out / file_name(str(hit.signature))
            if _smaller_there(target, hit.checked.case.size):
                written.add(str(hit.signature))  # another worker's case of this bug is smaller
                continue
            record = dict(
                summarise(hit),
                case=case_to_json(hit.checked.case),
                pipeline=None if hit.checked.pipeline is None else pipeline_to_json(hit.checked.pipeline),
                tvm=tvm_version(),
                pass_name=args.pass_name,
                seed=args.seed,
            )
            try:
                write_atomic(target, json.dumps(record, sort_keys=True, indent=2) + "\n")
            except OSError as exc:  # a full disk, a folder gone read-only: nothing half-written
                raise StopCampaign(
                    f"--out {target}: cannot write a finding ({exc.strerror or exc})"
                ) from None
            written.add(str(hit.signature))

    def on_progress(p: Progress) -> None:
        write_new(p.hits)
        progress(p)

    runner = None
    cache = None
    isolate = args.pipelines if args.isolate is None else args.isolate
    lowering = args.pass_name == "identity" if args.lowering is None else args.lowering
    if args.cache_dir is not None:
        _check_out_dir(args.cache_dir, "--cache-dir")
    if not args.no_cache and not isolate:
        from fuzz.compile_cache import CompileCache

        cache = CompileCache(directory=args.cache_dir)
        runner = cache.run
    pipelines = None
    if args.pipelines:
        import strategies

        pipelines = strategies.pipelines()
    with contextlib.ExitStack() as stack:
        checker = None
        if isolate:
            from fuzz.isolate import IsolatedChecker

            checker = stack.enter_context(
                IsolatedChecker(
                    args.pass_name,
                    timeout=args.timeout,
                    cache=not args.no_cache,
                    cache_dir=args.cache_dir,
                    complete_fold=args.must_fold,
                    lowering=lowering,
                )
            )
        result = run_campaign(
            make_pass,
            runner=runner,
            budget_seconds=budget,
            max_examples=args.max_examples,
            seed=args.seed,
            shrink_seconds=args.shrink_seconds,
            on_progress=on_progress,
            pipelines=pipelines,
            checker=checker,
            database=database,
            lowering=lowering,
        )
    output_error = result.stopped
    if output_error is None:
        try:
            write_new(result.hits)
        except StopCampaign as stop:
            output_error = str(stop)
    findings = [summarise(hit) for hit in result.hits]
    summary = {
        "pass": args.pass_name,
        "seed": args.seed,
        "examples": result.examples,
        "changed": result.changed,
        "seconds": round(result.seconds, 3),
        "findings": findings,
        "lowering": dict(result.lowering),
        "gated": dict(result.gated),
        "pipelines": args.pipelines,
        "isolated": isolate,
        "worker_starts": None if checker is None else checker.starts,
        "batches": result.batches,
        "interrupted": result.interrupted,
        "coverage": _coverage(result.coverage),
        "histograms": histograms(result.ratios, result.pressures),
        "cache": None
        if cache is None
        else {"structures": cache.stats.builds, "hit_rate": round(cache.stats.hit_rate, 4)},
        "tvm": tvm_version(),
        "unwritten": sorted(str(hit.signature) for hit in result.hits if str(hit.signature) not in written)
        if args.out is not None
        else [],
    }
    return _finish(args, summary, output_error, EXIT_INTERRUPTED if result.interrupted else None)


def _open_database(where: str, opener: Any) -> Any:
    try:
        database = opener(where)
        if where.startswith(("redis://", "rediss://", "unix://")):
            database.redis.ping()
    except Exception as exc:  # an unreachable server, a folder that cannot be made
        raise UsageError(f"--database {where}: cannot open it ({type(exc).__name__}: {exc})") from None
    return database


def _smaller_there(target: Path, size: int) -> bool:
    """Whether ``target`` already holds a finding of this signature with a case no larger."""
    from fuzz.case import case_from_json

    try:
        there = case_from_json(json.loads(target.read_text())["case"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return there.size <= size


def _run_workers(args: argparse.Namespace, budget: float | None) -> int:
    """``--workers N``: N ``bnfuzz run`` processes with seeds SEED..SEED+N-1, one database
    and one --out folder; their JSON summaries merged into one."""
    import subprocess

    database = args.database or str(Path(".bnfuzz") / "examples")
    if "://" not in database:
        _check_out_dir(Path(database), "--database")
    common = ["--pass", args.pass_name, "--database", database]
    common += ["--shrink-seconds", str(args.shrink_seconds)] if args.shrink_seconds is not None else []
    common += ["--budget", str(budget)] if budget is not None else []
    common += ["--out", str(args.out)] if args.out is not None else []
    common += ["--pipelines"] if args.pipelines else []
    common += [] if args.isolate is None else (["--isolate"] if args.isolate else ["--no-isolate"])
    common += ["--timeout", str(args.timeout)] + (["--no-cache"] if args.no_cache else [])
    common += ["--cache-dir", str(args.cache_dir)] if args.cache_dir is not None else []
    common += [] if args.must_fold is None else (["--must-fold"] if args.must_fold else ["--no-must-fold"])
    common += [] if args.lowering is None else (["--lowering"] if args.lowering else ["--no-lowering"])
    # TVM's thread pool spins on every core; N processes that each spin on every core slow one
    # another down, so each worker gets its share of the cores (unless TVM_NUM_THREADS is set).
    env = dict(os.environ)
    env.setdefault("TVM_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // args.workers)))
    children = []
    for k in range(args.workers):
        command = [sys.executable, "-m", "fuzz.cli", "run", *common, "--seed", str(args.seed + k), "--json"]
        if args.max_examples is not None:
            share = args.max_examples // args.workers + (k < args.max_examples % args.workers)
            command += ["--max-examples", str(max(share, 1))]
        children.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env))
    outputs: list[str] = []
    interrupted = False
    for child in children:
        while True:
            try:  # Ctrl-C reaches the workers too: wait for them to write their summaries
                outputs.append(child.communicate()[0])
                break
            except KeyboardInterrupt:
                interrupted = True
    summaries, failed = [], []
    for k, (child, out) in enumerate(zip(children, outputs, strict=True)):
        try:
            summary = json.loads(out) if child.returncode in EXITS_WITH_SUMMARY else None
            if summary is None or (child.returncode == EXIT_USAGE and not summary.get("output_error")):
                raise ValueError(f"exit code {child.returncode}")
            summaries.append(summary)
        except ValueError as exc:  # killed, or crashed: its findings on disk are kept
            print(f"bnfuzz: worker {k} (seed {args.seed + k}) failed: {exc}", file=sys.stderr)
            failed.append(args.seed + k)
    if not summaries:
        raise UsageError("every worker failed; see their messages above")
    interrupted = interrupted or any(s.get("interrupted") for s in summaries)
    merged: dict[str, dict[str, Any]] = {}
    for summary in summaries:
        for f in summary["findings"]:
            known = merged.get(f["signature"])
            if known is None:
                merged[f["signature"]] = dict(f)
            else:
                known["hits"] += f["hits"]
                known["first_seconds"] = min(known["first_seconds"], f["first_seconds"])
    lowering: dict[str, int] = {}
    gated: dict[str, int] = {}
    for summary in summaries:
        for key, counts in (("lowering", lowering), ("gated", gated)):
            for name, n in summary.get(key, {}).items():
                counts[name] = counts.get(name, 0) + n
    result = {
        "pass": args.pass_name,
        "seed": args.seed,
        "workers": args.workers,
        "database": database,
        "examples": sum(s["examples"] for s in summaries),
        "changed": sum(s["changed"] for s in summaries),
        "seconds": max(s["seconds"] for s in summaries),
        "findings": sorted(merged.values(), key=lambda f: f["first_seconds"]),
        "lowering": lowering,
        "gated": gated,
        "batches": sum(s["batches"] for s in summaries),
        "coverage": _merge_counts([s["coverage"] for s in summaries]),
        "histograms": _merge_counts([s["histograms"] for s in summaries]),
        "interrupted": interrupted,
        "failed_workers": failed,
        "per_worker": [
            {"seed": s["seed"], "examples": s["examples"], "seconds": s["seconds"]} for s in summaries
        ],
        "tvm": summaries[0]["tvm"],
        "unwritten": sorted({name for s in summaries for name in s.get("unwritten", [])}),
    }
    output_error = next((s["output_error"] for s in summaries if s.get("output_error")), None)
    return _finish(args, result, output_error, EXIT_INTERRUPTED if interrupted else None)


def _file_issues(args: argparse.Namespace) -> int:
    from fuzz.corpus import EntryError, load_entry
    from fuzz.github import GitHub, GitHubError, file_issues
    from fuzz.report import render_issue

    if not re.fullmatch(r"[\w.-]+/[\w.-]+", args.repo):
        raise UsageError(f"--repo {args.repo!r}: expected OWNER/NAME")
    token = os.environ.get("GITHUB_TOKEN") or None
    if args.apply and token is None:
        raise UsageError("--apply needs a token in GITHUB_TOKEN (with permission to create issues)")
    entries = []
    for path in _entry_files(args.paths):
        try:
            entries.append(load_entry(path))
        except EntryError as exc:
            raise UsageError(str(exc)) from None
    try:
        plans = file_issues(
            entries, GitHub(args.repo, token, args.api), apply=args.apply, render=render_issue
        )
    except GitHubError as exc:
        raise UsageError(f"GitHub API: {exc}") from None
    for plan in plans:
        where = f" {plan.url}" if plan.url else ""
        print(
            f"{plan.status:13} {plan.signature}{where}"
            + (f"\n              {plan.title}" if plan.title else "")
        )
    counts = {s: sum(p.status == s for p in plans) for s in ("filed", "to file", "already filed")}
    print(", ".join(f"{n} {s}" for s, n in counts.items()))
    return EXIT_CLEAN


def _coverage(counts: Any) -> dict[str, dict[str, int]]:
    """``combo,fired=B`` counts as {combo: {"runs": n, "fired": m}}."""
    rows: dict[str, dict[str, int]] = {}
    for key, n in counts.items():
        combo, _, fired = key.rpartition(",fired=")
        row = rows.setdefault(combo, {"runs": 0, "fired": 0})
        row["runs"] += n
        row["fired"] += n if fired == "True" else 0
    return rows


def _merge_counts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Add up nested count dictionaries (per-worker coverage or histograms)."""
    merged: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict):
                merged[key] = _merge_counts([merged.get(key, {}), value])
            else:
                merged[key] = merged.get(key, 0) + value
    return merged


def _finish(
    args: argparse.Namespace, summary: dict[str, Any], output_error: str | None, exit_code: int | None
) -> int:
    """Write the report if asked, print the summary (JSON or a table), and return the exit
    code: ``exit_code`` if given, else by the findings. If an output could not be written
    (``output_error``, or the report now), the summary is still printed, every finding in
    it, then the error: exit 2."""
    if args.report is not None:
        from fuzz.campaign_report import write_report

        try:
            summary["report"] = str(write_report(summary, args.report, args.out))
        except OSError as exc:
            failed = f"--report {args.report}: cannot write the report ({exc.strerror or exc})"
            output_error = failed if output_error is None else f"{output_error}; {failed}"
    summary["output_error"] = output_error
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_table(summary)
        if summary.get("report"):
            print(f"report: {summary['report']}")
    if output_error is not None:
        unwritten = summary.get("unwritten") or []
        lost = f"; not written, but in the summary above: {', '.join(unwritten)}" if unwritten else ""
        print(f"bnfuzz: error: {output_error}{lost}", file=sys.stderr)
        return EXIT_USAGE
    if exit_code is not None:
        return exit_code
    return EXIT_FINDINGS if summary["findings"] else EXIT_CLEAN


def _print_table(summary: dict[str, Any]) -> None:
    print(
        f"{summary['examples']} examples in {summary['seconds']:.0f} s against pass "
        f"{summary['pass']!r} (TVM {summary['tvm']}); the pass changed {summary['changed']} of them; "
        f"{len(summary['findings'])} distinct findings"
    )
    if not summary["findings"]:
        return
    rows = [("signature", "stage", "first hit", "hits", "message")]
    for f in summary["findings"]:
        rows.append(
            (
                f["signature"],
                f["stage"],
                f"{f['first_seconds']:.1f} s",
                str(f["hits"]),
                f["message"].splitlines()[0][:90] if f["message"] else "",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4])
    if summary["lowering"]:
        print("findings against TVM's lowering (the unfolded program, not the pass):")
        for sig, n in summary["lowering"].items():
            print(f"  {sig}: {n}")
    if summary.get("gated"):
        print("passes a Sequential skipped by opt-level gating (events, not bugs):")
        for name, n in summary["gated"].items():
            print(f"  {name}: {n} cases")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    try:
        _require_tvm()
        if args.command == "run":
            return _run(args)
        if args.command == "bench":
            return _bench(args)
        if args.command == "effectiveness":
            return _effectiveness(args)
        if args.command == "promote":
            return _promote(args)
        if args.command == "replay":
            return _replay(args)
        if args.command == "render":
            return _render(args)
        if args.command == "triage":
            return _triage(args)
        if args.command == "file-issues":
            return _file_issues(args)
        if args.command == "declines":
            return _declines(args)
    except BnfuzzError as exc:  # bad input or environment (UsageError among them): one line
        print(f"bnfuzz: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    parser.error(f"unknown command {args.command!r}")
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
