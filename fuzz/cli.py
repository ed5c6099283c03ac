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
import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fuzz import arguments, tables
from fuzz.errors import EXIT_ERROR, BnfuzzError, UsageError
from fuzz.native_log import NativeLog
from fuzz.run import check_out_dir

__all__ = [
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

    print(tables.time_to_find_table(summary, args.seeds, args.budget))
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
    print(tables.bench_table(summary))
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

    models = arguments.comma_names(args.models, "--models", "model", list(MODELS))
    variants = arguments.comma_names(args.variants, "--variants", "variant", list(VARIANTS))
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
        print(tables.zoo_table(summary))
    return EXIT_CLEAN


def _layer_effectiveness(args: argparse.Namespace, make_pass: Any, upstream: Any, log: Any) -> int:
    from fuzz.layers import run_layers

    rows = run_layers(make_pass, upstream, rounds=args.rounds, number=args.number, log=log)
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_CLEAN
    print(tables.layer_table(rows))
    return EXIT_CLEAN


def _promote(args: argparse.Namespace) -> int:
    from fuzz.corpus import EntryError
    from fuzz.promote import promote

    passes = tuple(p for p in args.passes.split(",") if p)
    for name in passes:
        _resolve(name)
    check_out_dir(args.corpus, "--corpus")
    for finding in args.findings:
        try:
            written, kept = promote(finding, args.corpus, passes, replace=args.replace)
        except EntryError as exc:
            raise UsageError(str(exc)) from None
        print(written if kept is None else f"{written} (already there with this signature: {kept})")
    return EXIT_CLEAN


def _entry_files(paths: list[Path]) -> list[Path]:
    """The files named, and the JSON files in the folders named and their subfolders."""
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.rglob("*.json")) if path.is_dir() else [path])
    return files


def _replay(args: argparse.Namespace) -> int:
    from fuzz.corpus import EntryError
    from fuzz.promote import read_as_entry
    from fuzz.replay import replay
    from fuzz.script import run_script

    if args.pass_name is not None:
        _resolve(args.pass_name)
    bad = unexpected = 0
    for path in _entry_files(args.paths):
        try:
            entry = read_as_entry(path)
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
            code = run_script(entry)
            expected_code = entry.expect.get(entry.pass_name) == "fails"
            reproduces = code != 0
            unexpected += reproduces != expected_code
            mark = "ok  " if reproduces == expected_code else "FAIL"
            shown = f"signal {-code}" if code < 0 else f"exit {code}"
            print(f"{mark} {path} script: {'reproduces' if reproduces else 'does not reproduce'} ({shown})")
    if bad:
        return EXIT_USAGE
    return EXIT_FINDINGS if unexpected else EXIT_CLEAN


def _render(args: argparse.Namespace) -> int:
    from fuzz.corpus import EntryError
    from fuzz.promote import read_as_entry
    from fuzz.report import render_issue, render_script

    try:
        entry = read_as_entry(args.path)
    except EntryError as exc:
        raise UsageError(str(exc)) from None
    print(render_script(entry) if args.script else render_issue(entry), end="")
    return EXIT_CLEAN


def _declines(args: argparse.Namespace) -> int:
    from fuzz.corpus import dumps_entry
    from fuzz.decline import Reason
    from fuzz.declines import DeclineNotFound, decline_entry
    from fuzz.storage import file_name, write_atomic

    passes = tuple(p for p in args.passes.split(",") if p)
    for name in (args.pass_name, *passes):
        _resolve(name)
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


def _triage(args: argparse.Namespace) -> int:
    from fuzz.corpus import EntryError
    from fuzz.promote import read_finding_or_entry

    groups: dict[str, list[tuple[int, Path]]] = {}
    bad = 0
    for path in _entry_files(args.paths):
        try:
            record = read_finding_or_entry(path)
        except EntryError as exc:
            print(f"bnfuzz: error: {exc}", file=sys.stderr)
            bad += 1
            continue
        groups.setdefault(record.signature, []).append((record.case.size, path))
    for signature in sorted(groups):
        members = sorted(groups[signature])
        size, smallest = members[0]
        print(f"{len(members):5d}  {signature}  smallest: {smallest} ({size} values)")
    return EXIT_USAGE if bad else EXIT_CLEAN


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
    from fuzz.run import RunConfig, run

    config = RunConfig.from_namespace(args)
    make_pass = _resolve(config.pass_name, config.must_fold)
    if args.report is not None:
        check_out_dir(args.report, "--report")
    progress = _Progress(sys.stderr)
    try:
        outcome = run(config, make_pass, progress)
    finally:
        progress.end()
    interrupted = EXIT_INTERRUPTED if outcome.summary["interrupted"] else None
    return _finish(args, outcome.summary, outcome.output_error, interrupted)


def _file_issues(args: argparse.Namespace) -> int:
    from fuzz.corpus import EntryError
    from fuzz.github import GitHub, GitHubError, file_issues
    from fuzz.promote import read_as_entry
    from fuzz.report import issues

    if not re.fullmatch(r"[\w.-]+/[\w.-]+", args.repo):  # user input: OWNER/NAME
        raise UsageError(f"--repo {args.repo!r}: expected OWNER/NAME")
    token = os.environ.get("GITHUB_TOKEN") or None
    if args.apply and token is None:
        raise UsageError("--apply needs a token in GITHUB_TOKEN (with permission to create issues)")
    entries = []
    for path in _entry_files(args.paths):
        try:
            entries.append(read_as_entry(path))
        except EntryError as exc:
            raise UsageError(str(exc)) from None
    try:
        filing = file_issues(issues(entries), GitHub(args.repo, token, args.api), apply=args.apply)
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
    from fuzz.storage import write_atomic
    from fuzz.upstream_patch import upstream_patch

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
    from fuzz.storage import file_name

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


def main(argv: list[str] | None = None) -> int:
    parser = arguments.parser()
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
    _require_tvm()
    command = COMMANDS.get(args.command)
    if command is None:
        parser.error(f"unknown command {args.command!r}")
    return command(args)


#: Each command's function: it parses nothing more, calls the layer below, prints.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": _run,
    "bench": _bench,
    "effectiveness": _effectiveness,
    "promote": _promote,
    "replay": _replay,
    "render": _render,
    "triage": _triage,
    "file-issues": _file_issues,
    "declines": _declines,
    "upstream-patch": _upstream_patch,
}


if __name__ == "__main__":
    sys.exit(main())
