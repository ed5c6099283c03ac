"""``bnfuzz bench``: value sets per second, time to find, the cost of isolation."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from fuzz.backends import backend_of
from fuzz.cli import tables
from fuzz.cli.common import (
    EXIT_CLEAN,
    EXIT_FINDINGS,
    positive,
    resolve,
)
from fuzz.errors import UsageError

__all__ = ["COMMANDS", "add_parsers"]


def add_parsers(sub: Any) -> None:
    """This module's commands, added to the ``bnfuzz`` parser's subcommands."""
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
        type=positive(float),
        default=120.0,
        help="length of each of the six timed phases: naive, cold, warm, warming up and then warm with "
        "the lowering judged, campaign (default 120). It is not the total: before them the value sets "
        "are drawn (about as long as one phase), and after them the growth table takes 12 x "
        "--growth-seconds; the run prints its total at the end. A phase ends at its first check past "
        "SECONDS, or early when it runs out of value sets",
    )
    bench.add_argument(
        "--growth-seconds",
        type=positive(float),
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
        help="instead, measure crash isolation: the same value sets (for TVM's passes each in a drawn "
        "pipeline; for another backend, its own cases) checked in this process and in a worker "
        "process, in alternating rounds",
    )
    bench.add_argument(
        "--rounds", type=positive(int), default=3, help="with --isolation, rounds per side (default 3)"
    )
    bench.add_argument(
        "--batches",
        type=positive(int),
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
        type=positive(int),
        default=3,
        help="with --time-to-find, campaigns per target (default 3)",
    )
    bench.add_argument(
        "--budget",
        type=positive(float),
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


def _time_to_find(args: argparse.Namespace) -> int:
    from fuzz.evaluation.time_to_find import failed, run_time_to_find, targets

    only = [w for w in args.only.split(",") if w]  # user input: --only A,B
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

    print(tables.time_to_find_table(summary, args.seeds, args.budget))
    return EXIT_FINDINGS if failed(summary) else EXIT_CLEAN


def _bench(args: argparse.Namespace) -> int:
    from fuzz.evaluation.bench import run_backend_bench, run_bench, run_isolation_bench

    if args.time_to_find:
        return _time_to_find(args)
    fold = resolve(args.pass_name)
    tvm_passes = backend_of(fold.name).tvm_passes
    if not tvm_passes and args.campaign_seconds:
        raise UsageError(f"--campaign-seconds is for TVM's passes, not {args.pass_name}")
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
                f"{result['value_sets']} value sets of {args.pass_name}, {len(result['rounds'])} rounds: "
                f"isolated / in-process = {result['ratio']} overall, "
                f"{result['ratio_warm']} after the first round"
            )
        return EXIT_CLEAN
    if not tvm_passes:  # no compile cache, no growth table: checks and a campaign
        summary = run_backend_bench(
            fold,
            seconds=args.seconds,
            seed=args.seed,
            log=lambda message: print(f"bench: {message}", file=sys.stderr, flush=True),
        )
        print(json.dumps(summary, indent=2) if args.json else tables.backend_bench_table(summary))
        return EXIT_CLEAN
    summary = run_bench(
        fold,
        seconds=args.seconds,
        seed=args.seed,
        growth_seconds=args.growth_seconds,
        campaign_seconds=args.campaign_seconds,
        log=lambda message: print(f"bench: {message}", file=sys.stderr, flush=True),
    )
    if args.json:
        print(json.dumps(summary, indent=2))
        return EXIT_CLEAN
    print(tables.bench_table(summary))
    return EXIT_CLEAN


#: Command name -> the function that runs it.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"bench": _bench}
