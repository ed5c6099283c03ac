"""``bnfuzz run`` as a function: one :class:`RunConfig` in, one summary out.

:func:`run` fuzzes the pass in this process (:func:`fuzz.engine.campaign.run_campaign`), writes
each shrunk finding to ``config.out`` as soon as it is shrunk (:func:`fuzz.store.findings.write_finding`),
and returns :class:`Outcome`: the summary and the output error, if an output could not be
written. :func:`run` with ``config.workers > 1`` starts that many ``bnfuzz run`` processes
instead, each on its own seed with its command line from :meth:`RunConfig.worker_argv`,
and merges their summaries. A summary is built by :func:`summarise` from per-process
:class:`Part` values in both cases, so a one-process run and a merged one have the same keys.

Key idea: the worker's command line comes from the same config the CLI built, option by
option in one place, so a new option reaches the workers by being added to
:class:`RunConfig` alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fuzz.backends import backend_of
from fuzz.engine.native_log import NativeLog
from fuzz.errors import UsageError

if TYPE_CHECKING:
    from fuzz.backends import Fold

__all__ = ["Outcome", "Part", "RunConfig", "check_out_dir", "merge_counts", "run", "summarise"]

#: A worker's exit codes that come with a JSON summary on its stdout (2: only when the
#: summary names an ``output_error``; 130: stopped by Ctrl-C).
WORKER_EXITS_WITH_SUMMARY = (0, 1, 2, 130)


@dataclass(frozen=True)
class RunConfig:
    """Everything ``bnfuzz run`` is told (``None``: the option was not given)."""

    pass_name: str
    complete_fold: bool | None = None
    budget: float | None = None
    max_examples: int | None = None
    seed: int = 0
    shrink_seconds: float | None = None
    out: Path | None = None
    pipelines: bool = False
    isolate: bool | None = None
    timeout: float = 60.0
    no_cache: bool = False
    cache_dir: Path | None = None
    lowering: bool | None = None
    database: str | None = None
    workers: int = 1

    @classmethod
    def from_namespace(cls, args: Any) -> RunConfig:
        """From parsed arguments whose names are this class's fields (and others, ignored)."""
        return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})

    @property
    def budget_seconds(self) -> float | None:
        """The time budget: 60 s when neither a budget nor an example count is given."""
        return 60.0 if self.budget is None and self.max_examples is None else self.budget

    @property
    def isolated(self) -> bool:
        """Checked in a worker process: asked for, or by default with pipelines (TVM's
        neighbour passes segfault) and for every backend whose registry row says why
        (:class:`fuzz.backends.Backend`: native code that can crash)."""
        if self.isolate is not None:
            return self.isolate
        return self.pipelines or bool(backend_of(self.pass_name).isolated_because)

    @property
    def judges_lowering(self) -> bool:
        return self.pass_name == "identity" if self.lowering is None else self.lowering

    def worker_argv(self, k: int, database: str) -> list[str]:
        """The ``bnfuzz run`` arguments of worker ``k``: its own seed and share of
        ``max_examples``, the shared ``database``, JSON on stdout, one process. Every field
        but ``workers`` is passed on (a test parses these back into the same config)."""
        argv = ["run", "--json", "--pass", self.pass_name, "--seed", str(self.seed + k)]
        argv += ["--database", database, "--timeout", repr(self.timeout)]
        if self.budget_seconds is not None:
            argv += ["--budget", repr(self.budget_seconds)]
        if self.max_examples is not None:
            share = self.max_examples // self.workers + (k < self.max_examples % self.workers)
            argv += ["--max-examples", str(max(share, 1))]
        for option, value in (
            ("--shrink-seconds", None if self.shrink_seconds is None else repr(self.shrink_seconds)),
            ("--out", self.out),
            ("--cache-dir", self.cache_dir),
        ):
            if value is not None:
                argv += [option, str(value)]
        argv += ["--pipelines"] if self.pipelines else []
        argv += ["--no-cache"] if self.no_cache else []
        for name, on in (
            ("must-fold", self.complete_fold),
            ("isolate", self.isolate),
            ("lowering", self.lowering),
        ):
            if on is not None:  # tri-state: both on and off are passed on, unset stays unset
                argv.append(f"--{name}" if on else f"--no-{name}")
        return argv


@dataclass(frozen=True)
class Part:
    """What one campaign process reports: its counts and its findings (as summary rows)."""

    seed: int
    examples: int
    changed: int
    seconds: float
    batches: int
    findings: list[dict[str, Any]]
    lowering: dict[str, int]
    gated: dict[str, int]
    coverage: dict[str, dict[str, int]]
    histograms: dict[str, Any]
    interrupted: bool
    unwritten: list[str]
    tvm: str
    worker_starts: int | None = None
    cache: dict[str, int] | None = None
    output_error: str | None = None
    #: TVM's native warnings counted, not printed (:mod:`fuzz.engine.native_log`), by name
    native_log: dict[str, int] = dataclasses.field(default_factory=dict)
    #: the framework of the fold and its version (``TVM 0.27.0.post1``, ``onnxruntime 1.32.0``)
    framework: str = ""

    @classmethod
    def from_summary(cls, summary: dict[str, Any]) -> Part:
        """The part a worker's one-process summary describes."""
        names = {f.name for f in dataclasses.fields(cls)}
        per = summary["per_worker"][0]
        fields = {k: v for k, v in summary.items() if k in names and k != "cache"}
        return cls(**dict(fields, cache=per.get("cache")))


@dataclass(frozen=True)
class Outcome:
    summary: dict[str, Any]
    #: an output that could not be written (a full disk): the run stopped; exit 2
    output_error: str | None


def merge_counts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Add up nested count dictionaries (per-worker coverage or histograms)."""
    merged: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict):
                merged[key] = merge_counts([merged.get(key, {}), value])
            else:
                merged[key] = merged.get(key, 0) + value
    return merged


def summarise(
    config: RunConfig,
    parts: list[Part],
    *,
    database: str | None,
    failed_workers: list[int],
    interrupted: bool,
) -> dict[str, Any]:
    """One summary of one or more campaign processes: counts added up, findings of one
    signature merged (hits added, the earliest first hit), per-process figures kept."""
    merged: dict[str, dict[str, Any]] = {}
    for part in parts:
        for f in part.findings:
            known = merged.get(f["signature"])
            if known is None:
                merged[f["signature"]] = dict(f)
            else:
                known["hits"] += f["hits"]
                known["first_seconds"] = min(known["first_seconds"], f["first_seconds"])
    caches = [p.cache for p in parts if p.cache is not None]
    cache = merge_counts(caches) if caches else None
    if cache is not None:
        cache["hit_rate"] = round(cache["hits"] / cache["lookups"], 4) if cache["lookups"] else 0.0
    starts = [p.worker_starts for p in parts if p.worker_starts is not None]
    return {
        "pass": config.pass_name,
        "seed": config.seed,
        "workers": config.workers,
        "database": database,
        "pipelines": config.pipelines,
        "isolated": config.isolated,
        "examples": sum(p.examples for p in parts),
        "changed": sum(p.changed for p in parts),
        "seconds": max(p.seconds for p in parts),
        "batches": sum(p.batches for p in parts),
        "findings": sorted(merged.values(), key=lambda f: f["first_seconds"]),
        "lowering": merge_counts([p.lowering for p in parts]),
        "gated": merge_counts([p.gated for p in parts]),
        "coverage": merge_counts([p.coverage for p in parts]),
        "histograms": merge_counts([p.histograms for p in parts]),
        "interrupted": interrupted or any(p.interrupted for p in parts),
        "worker_starts": sum(starts) if starts else None,
        "cache": cache,
        "failed_workers": failed_workers,
        "per_worker": [
            {"seed": p.seed, "examples": p.examples, "seconds": p.seconds, "cache": p.cache} for p in parts
        ],
        "tvm": parts[0].tvm,
        "framework": parts[0].framework or f"TVM {parts[0].tvm}",
        "unwritten": sorted({name for p in parts for name in p.unwritten}),
        "native_log": merge_counts([p.native_log for p in parts]),
    }


def check_out_dir(out: Path, option: str = "--out") -> None:
    """A usage error now, before any work, if ``out`` cannot be made or written."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".bnfuzz-probe-"):
            pass
    except OSError as exc:
        raise UsageError(f"{option} {out}: cannot write there ({exc.strerror or exc})") from None


def _open_database(where: str) -> Any:
    from fuzz.engine.campaign_control import example_database

    try:
        database: Any = example_database(where)
        if where.startswith(("redis://", "rediss://", "unix://")):
            database.redis.ping()
    except Exception as exc:  # an unreachable server, a folder that cannot be made
        raise UsageError(f"--database {where}: cannot open it ({type(exc).__name__}: {exc})") from None
    return database


def run(config: RunConfig, fold: Fold, on_progress: Callable[[Any], None] | None = None) -> Outcome:
    """Fuzz the fold ``fold`` (what ``config.pass_name`` resolved to) as ``config``
    says. ``on_progress`` sees each :class:`fuzz.engine.campaign_result.Progress`."""
    row = backend_of(fold.name)
    if config.pipelines and not row.tvm_passes:
        raise UsageError(
            f"--pipelines: pipelines are TVM's passes; {config.pass_name!r} is {row.framework}'s"
        )
    for where, option in ((config.out, "--out"), (config.cache_dir, "--cache-dir")):
        if where is not None:
            check_out_dir(where, option)
    if config.workers > 1:
        return _run_workers(config)
    part = _run_here(config, fold, on_progress)
    summary = summarise(config, [part], database=config.database, failed_workers=[], interrupted=False)
    return Outcome(summary, part.output_error)


def _run_here(config: RunConfig, fold: Fold, on_progress: Callable[[Any], None] | None) -> Part:
    from fuzz.backends.tvm.compat import tvm_version
    from fuzz.engine.campaign import StopCampaign, run_campaign
    from fuzz.engine.campaign_result import Hit, Progress
    from fuzz.engine.histograms import histograms
    from fuzz.fpenv import machine
    from fuzz.model.attributes import classify
    from fuzz.store.findings import FindingRecord, write_finding
    from fuzz.store.storage import file_name

    database = None if config.database is None else _open_database(config.database)

    def row(hit: Hit) -> dict[str, Any]:
        return {
            "signature": str(hit.signature),
            "symptom": hit.finding.symptom.value,
            "stage": hit.finding.stage.value,
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
            if config.out is None or str(hit.signature) in written:
                continue
            record = FindingRecord(
                signature=str(hit.signature),
                symptom=hit.finding.symptom,
                stage=hit.finding.stage,
                message=hit.finding.message,
                case=hit.checked.case,
                pass_name=config.pass_name,
                error_type=hit.finding.error_type,
                stderr=hit.finding.stderr,
                pipeline=hit.checked.pipeline,
                seed=config.seed,
                tvm=tvm_version(),
                first_seconds=hit.first_seconds,
                shrink_seconds=hit.shrink_seconds,
                hits=hit.hits,
                attributes=classify(hit.checked.case),
                machine=machine(hit.checked.flush),
            )
            try:
                write_finding(config.out, record)  # not written: another worker's case is smaller
            except OSError as exc:  # a full disk, a folder gone read-only: nothing half-written
                target = config.out / file_name(record.signature)
                raise StopCampaign(
                    f"--out {target}: cannot write a finding ({exc.strerror or exc})"
                ) from None
            written.add(str(hit.signature))

    def progress(p: Progress) -> None:
        write_new(p.hits)
        if on_progress is not None:
            on_progress(p)

    runner = None
    if not config.no_cache and not config.isolated:
        runner = fold.runner(config.cache_dir)
    cache = getattr(runner, "__self__", None)  # a compile cache's counters go into the summary
    pipelines = None
    if config.pipelines:
        import strategies

        pipelines = strategies.pipelines()
    with contextlib.ExitStack() as stack:
        native_log = stack.enter_context(NativeLog())
        checker = None
        if config.isolated:
            from fuzz.engine.isolate import IsolatedChecker

            checker = stack.enter_context(
                IsolatedChecker(
                    config.pass_name,
                    timeout=config.timeout,
                    cache=not config.no_cache,
                    cache_dir=config.cache_dir,
                    complete_fold=config.complete_fold,
                    lowering=config.judges_lowering,
                )
            )
        result = run_campaign(
            fold,
            runner=runner,
            budget_seconds=config.budget_seconds,
            max_examples=config.max_examples,
            seed=config.seed,
            shrink_seconds=config.shrink_seconds,
            on_progress=progress,
            pipelines=pipelines,
            checker=checker,
            database=database,
            lowering=config.judges_lowering,
        )
    output_error = result.stopped
    if output_error is None:
        try:
            write_new(result.hits)
        except StopCampaign as stop:
            output_error = str(stop)
    coverage: dict[str, dict[str, int]] = {}
    for (combo, fired), n in result.coverage.items():
        counts = coverage.setdefault(combo, {"runs": 0, "fired": 0})
        counts["runs"] += n
        counts["fired"] += n if fired else 0
    return Part(
        seed=config.seed,
        examples=result.examples,
        changed=result.changed,
        seconds=round(result.seconds, 3),
        batches=result.batches,
        findings=[row(hit) for hit in result.hits],
        lowering=dict(result.lowering),
        gated=dict(result.gated),
        coverage=coverage,
        histograms=histograms(result.ratios, result.pressures),
        interrupted=result.interrupted,
        unwritten=sorted(str(h.signature) for h in result.hits if str(h.signature) not in written)
        if config.out is not None
        else [],
        tvm=tvm_version(),
        framework=f"{backend_of(fold.name).framework} {fold.version()}",
        worker_starts=None if checker is None else checker.starts,
        cache=None
        if cache is None
        else {
            "structures": cache.stats.builds,
            "hits": cache.stats.hits + cache.stats.disk_hits,
            "lookups": cache.stats.lookups,
        },
        output_error=output_error,
        native_log=native_log.counts,
    )


def _run_workers(config: RunConfig) -> Outcome:
    """``workers`` ``bnfuzz run`` processes with seeds SEED..SEED+N-1, one database and one
    --out folder; their JSON summaries merged into one."""
    database = config.database or str(Path(".bnfuzz") / "examples")
    if "://" not in database:
        check_out_dir(Path(database), "--database")
    # TVM's thread pool spins on every core; N processes that each spin on every core slow one
    # another down, so each worker gets its share of the cores (unless TVM_NUM_THREADS is set).
    env = dict(os.environ)
    env.setdefault("TVM_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // config.workers)))
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "fuzz.cli", *config.worker_argv(k, database)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for k in range(config.workers)
    ]
    outputs: list[str] = []
    interrupted = False
    for child in children:
        while True:
            try:  # Ctrl-C reaches the workers too: wait for them to write their summaries
                outputs.append(child.communicate()[0])
                break
            except KeyboardInterrupt:
                interrupted = True
    parts, failed = [], []
    for k, (child, out) in enumerate(zip(children, outputs, strict=True)):
        try:
            summary = json.loads(out) if child.returncode in WORKER_EXITS_WITH_SUMMARY else None
            if summary is None or (child.returncode == 2 and not summary.get("output_error")):
                raise ValueError(f"exit code {child.returncode}")
            parts.append(Part.from_summary(summary))
        except ValueError as exc:  # killed, or crashed: its findings on disk are kept
            print(f"bnfuzz: worker {k} (seed {config.seed + k}) failed: {exc}", file=sys.stderr)
            failed.append(config.seed + k)
    if not parts:
        raise UsageError("every worker failed; see their messages above")
    summary = summarise(config, parts, database=database, failed_workers=failed, interrupted=interrupted)
    output_error = next((p.output_error for p in parts if p.output_error), None)
    return Outcome(summary, output_error)
