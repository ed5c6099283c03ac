"""Campaign: run Hypothesis over generated cases against one pass, collecting every
distinct bug, each shrunk to a minimal case.

Hypothesis stops at the first failure and shrinks it. To find *all* bugs the
campaign runs rounds: in each round the test body raises only for a finding no
known :class:`~fuzz.signature.Signature` covers, and once one is raised it
keeps raising only for that symptom, so shrinking cannot drift to another bug.
The shrunk case defines a new signature, which is added to the known set, and
the next round starts. The campaign ends when the time budget or the example
budget is spent.

Each Hypothesis run lasts at most :data:`EPOCH_EXAMPLES` examples; the next one starts
from a fresh seed, so the search does not settle on a few graph structures.

Search guidance: ``hypothesis.target`` climbs toward overflow (the reference's
fold pressure: how close ``|s| * (|W| conv |X|)`` comes to the dtype max where
the unfolded program is robustly finite) and toward precision loss (the worst
error/allowed ratio); ``hypothesis.event`` records attribute combinations and
whether the pass fired (see ``pytest --hypothesis-show-statistics``).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import hypothesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase
from hypothesis.errors import Flaky, HypothesisWarning
from hypothesis.reporting import with_reporter

import strategies
from fuzz.build import build_module
from fuzz.case import Case
from fuzz.compat import structural_equal
from fuzz.execute import Execution, Failure, Runner, execute
from fuzz.oracle import Finding, Symptom, Verdict, judge
from fuzz.passes import PassFactory, claims_complete_fold
from fuzz.pipeline import Pipeline, PipelinePass, gated
from fuzz.reference import Reference, reference
from fuzz.signature import Signature, classify


@dataclass(frozen=True)
class Checked:
    """A case, what running it did, and the verdict; for a pipeline, the pipeline and
    the passes its ``Sequential`` skipped by opt-level gating."""

    case: Case
    execution: Execution
    reference: Reference
    verdict: Verdict
    pipeline: Pipeline | None = None
    gated: tuple[str, ...] = ()


def check(
    case: Case,
    make_pass: PassFactory,
    runner: Runner | None = None,
    pipeline: Pipeline | None = None,
    *,
    must_fold: bool | None = None,
) -> Checked:
    """Run one case through a pass, or through ``pipeline`` with the pass in it, and judge
    it (``runner``: see :func:`fuzz.execute.execute`).

    ``must_fold``: judge the ``missed-fold`` property (default: if the pass claims a
    complete fold, :func:`fuzz.passes.claims_complete_fold`); never inside a pipeline.
    For a pipeline with nothing gated, the ``Sequential`` and the direct calls must give
    structurally equal modules (``sequential-direct-mismatch``).
    """
    ref = reference(case)
    if pipeline is None:
        execution = execute(case, make_pass, runner)
        complete = claims_complete_fold(make_pass) if must_fold is None else must_fold
        return Checked(case, execution, ref, judge(case, execution, ref, must_fold=complete))
    execution = execute(case, lambda: PipelinePass(pipeline, make_pass), runner, idempotence=False)
    verdict = judge(case, execution, ref, in_pipeline=True, numbers=not pipeline.mixed_precision)
    skipped = gated(pipeline, make_pass)
    if not skipped and not isinstance(execution.folded, Failure) and not verdict.findings:
        mismatch = _sequential_mismatch(case, pipeline, make_pass)
        if mismatch is not None:
            verdict = replace(verdict, findings=(mismatch,))
    return Checked(case, execution, ref, verdict, pipeline, skipped)


def _sequential_mismatch(case: Case, pipeline: Pipeline, make_pass: PassFactory) -> Finding | None:
    module = build_module(case)
    try:
        as_sequential = PipelinePass(pipeline, make_pass, sequential=True)(module)
        as_calls = PipelinePass(pipeline, make_pass, sequential=False)(module)
    except Exception as exc:  # one mode raised where the other did not
        return Finding(Symptom.SEQUENTIAL_MISMATCH, "pass", f"one mode raised {type(exc).__name__}")
    if structural_equal(as_sequential, as_calls):
        return None
    return Finding(
        Symptom.SEQUENTIAL_MISMATCH,
        "pass",
        "Sequential and direct calls of the same passes, every pass enabled, give different modules",
    )


@dataclass
class Hit:
    """One distinct bug: its signature, shrunk case and how it was found."""

    signature: Signature
    finding: Finding
    checked: Checked
    first_seconds: float
    shrink_seconds: float
    hits: int = 1


@dataclass
class Progress:
    examples: int
    seconds: float
    hits: list[Hit]
    shrinking: bool


@dataclass
class CampaignResult:
    examples: int
    seconds: float
    hits: list[Hit]
    #: checked value sets whose module the pass changed, out of ``examples``
    changed: int = 0
    #: Hypothesis examples run (each a batch of value sets of one structure), shrinking aside
    batches: int = 0
    #: the campaign was stopped by Ctrl-C (what it found is kept)
    interrupted: bool = False
    #: why ``on_progress`` stopped the campaign early (:class:`StopCampaign`), if it did
    stopped: str | None = None
    #: how often each (attribute combination, fired) pair was run
    coverage: Counter[str] = field(default_factory=Counter)
    #: findings against TVM's lowering (the unfolded program), by symptom and dtype
    lowering: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    #: Hypothesis runs: one per distinct bug, plus the last one that found none
    rounds: int = 0
    #: passes a pipeline's Sequential skipped by opt-level gating (events, not bugs)
    gated: Counter[str] = field(default_factory=Counter)
    #: per checked value set: the worst error / allowed ratio, and (where the pass changed
    #: the module) the fold pressure, for the campaign report
    ratios: list[float] = field(default_factory=list)
    pressures: list[float] = field(default_factory=list)


#: Examples (batches) per Hypothesis run. ``target()`` makes a long run hill-climb on a
#: few graph structures (60 s of ``identity``: 103 structures with one run, 329 without
#: ``target()``); restarting with a fresh seed every epoch keeps both the climbing and
#: the breadth.
EPOCH_EXAMPLES = 500


class _CtrlC:
    """Ctrl-C during a campaign: the first one lets the case in hand finish, then stops the
    campaign; a second one stops it at once.

    Python's default handler raises ``KeyboardInterrupt`` wherever the interpreter is. Inside
    a Python pass that TVM's C++ calls back (upstream's fold is one), TVM's FFI turns that
    into a ``RuntimeError`` with an empty message, which the fuzzer would record as a crash
    of the pass, and the campaign would go on to its budget.
    """

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("bnfuzz: stopping after the case in hand (Ctrl-C again: at once)", file=sys.stderr)

    def raise_if_requested(self) -> None:
        if self.requested:
            raise KeyboardInterrupt

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Handle SIGINT for the block (signal handlers belong to the main thread only;
        elsewhere this does nothing)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGINT, self)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


class StopCampaign(BaseException):
    """Raised by an ``on_progress`` callback to end the campaign at once, keeping what it
    found (e.g. the output folder filled up). Not an ``Exception``, so Hypothesis does not
    take it for a failure of the case and shrink it."""


class _OutOfBudget(BaseException):
    """Ends a Hypothesis run from inside the test body without counting as a failure."""


class _Found(Exception):
    """The body's way to tell Hypothesis: this example shows a new bug."""


#: Checks one case, alone or inside a pipeline: :func:`check` with a pass and a runner
#: bound, or :class:`fuzz.isolate.IsolatedChecker` (in a worker process).
Checker = Callable[[Case, Pipeline | None], Checked]


@dataclass
class _Campaign:
    """The state shared by the rounds of one campaign."""

    checker: Checker
    database: ExampleDatabase | None
    budget_seconds: float | None
    max_examples: int | None
    shrink_seconds: float
    on_progress: Callable[[Progress], None] | None
    start: float = field(default_factory=time.monotonic)
    result: CampaignResult = field(default_factory=lambda: CampaignResult(0, 0.0, []))
    # the current round: the symptom being shrunk, the last case showing it, timings
    key: tuple[Any, str] | None = None
    last: tuple[Checked, Finding] | None = None
    round_examples: int = 0
    first_seconds: float = 0.0
    shrink_start: float = 0.0
    ctrl_c: _CtrlC = field(default_factory=_CtrlC)

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def exhausted(self) -> bool:
        over_time = self.budget_seconds is not None and self.elapsed() > self.budget_seconds
        over_count = self.max_examples is not None and self.result.examples >= self.max_examples
        return over_time or over_count

    def progress(self, shrinking: bool) -> None:
        if self.on_progress is not None:
            r = self.result
            self.on_progress(Progress(r.examples, self.elapsed(), r.hits, shrinking))

    def body(self, example: tuple[Pipeline | None, tuple[Case, ...]]) -> None:
        """The Hypothesis test body: checks a batch of value sets of one structure (in one
        pipeline, for a pipeline campaign) and raises :class:`_Found` for the round's new
        bug only."""
        pipeline, batch = example
        shrinking = self.key is not None
        if shrinking and time.monotonic() - self.shrink_start > self.shrink_seconds:
            return  # stop shrinking; the last failing case is kept
        if not shrinking and self.exhausted():
            raise _OutOfBudget
        if not shrinking:
            self.round_examples += 1
            self.result.batches += 1
        pressure, ratio = -1000.0, 0.0
        for case in batch:
            self.ctrl_c.raise_if_requested()
            if not shrinking:
                if self.exhausted():
                    break
                self.result.examples += 1
            checked = self.checker(case, pipeline)
            # A second Ctrl-C may have cut this check short: it proves nothing, drop it.
            self.ctrl_c.raise_if_requested()
            _record(self.result, checked, shrinking)
            if checked.execution.changed:
                pressure = max(pressure, checked.reference.fold_pressure)
            ratio = max(ratio, checked.verdict.worst_ratio)
            if not shrinking and self.result.examples % 10 == 0:
                self.progress(False)
            self._raise_if_new(checked, shrinking)
        # Only graphs the pass rewrote can overflow because of it: climb there.
        hypothesis.target(min(pressure, 1000.0), label="fold pressure (log2)")
        hypothesis.target(min(ratio, 1e6), label="error / allowed")

    def _raise_if_new(self, checked: Checked, shrinking: bool) -> None:
        finding = checked.verdict.primary
        if finding is None:
            return
        for hit in self.result.hits:
            if hit.signature.covers(finding, checked.case, checked.pipeline):
                hit.hits += 0 if shrinking else 1
                return
        key = (finding.symptom, finding.error_type)
        if self.key is None:
            self.key, self.first_seconds, self.shrink_start = key, self.elapsed(), time.monotonic()
            self.last = (checked, finding)  # kept even if the progress callback stops the campaign
            self.progress(True)
        if key == self.key:
            self.last = (checked, finding)
            raise _Found(finding.symptom.value)

    def run_round(
        self, strategy: st.SearchStrategy[tuple[Pipeline | None, tuple[Case, ...]]], seed: int
    ) -> Hit | None:
        """One Hypothesis run of at most :data:`EPOCH_EXAMPLES` examples: the next new bug,
        shrunk, or None (the epoch or the budget ended, or the strategy ran dry)."""
        self.result.rounds += 1
        self.key, self.last = None, None
        self.round_examples = 0
        remaining = self.max_examples - self.result.examples if self.max_examples is not None else 10**9
        test = settings(
            max_examples=max(min(remaining, EPOCH_EXAMPLES), 1),
            deadline=None,
            database=self.database,
            # With a shared database, each round first replays the failures saved there (by
            # this campaign's earlier rounds, or by other workers): known bugs are covered and
            # pass quietly, a bug another worker found is raised and recorded here too.
            phases=(Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
            if self.database is not None
            else (Phase.generate, Phase.target, Phase.shrink),
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False,
        )(hypothesis.seed(seed)(given(strategy)(self.body)))
        try:
            # Hypothesis's report of the failing example is discarded, and so is its warning
            # that the example's repr is large (a case shrinking stopped early): under
            # ``-W error`` that warning would end the campaign.
            with with_reporter(lambda _message: None), warnings.catch_warnings():
                warnings.filterwarnings("ignore", "Generating overly large repr", HypothesisWarning)
                test()
        except (_OutOfBudget, _Found):
            pass
        except Flaky:
            pass  # a capped shrink: the final replay no longer raised; self.last holds the case
        # Any other exception is a bug of ours (an invalid case, a crash in the oracle):
        # it propagates, with Hypothesis's minimal example attached.
        if self.last is None:
            return None
        checked, finding = self.last
        return Hit(
            Signature.of(finding, checked.case, checked.pipeline),
            finding,
            checked,
            first_seconds=self.first_seconds,
            shrink_seconds=time.monotonic() - self.shrink_start,
        )


def run_campaign(
    make_pass: PassFactory,
    *,
    budget_seconds: float | None = None,
    max_examples: int | None = None,
    seed: int = 0,
    shrink_seconds: float = 60.0,
    cases: st.SearchStrategy[Case] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    runner: Runner | None = None,
    pipelines: st.SearchStrategy[Pipeline] | None = None,
    checker: Checker | None = None,
    database: ExampleDatabase | None = None,
) -> CampaignResult:
    """Fuzz ``make_pass`` until a budget runs out; return every distinct bug found.

    ``runner`` compiles and runs modules: the naive :func:`fuzz.execute.compile_and_run`
    by default, or :meth:`fuzz.compile_cache.CompileCache.run`. ``pipelines``: run each
    case inside a drawn pipeline (:mod:`strategies.pipelines`) instead of through the pass
    alone. ``checker`` replaces :func:`check` (``make_pass`` and ``runner`` are then
    unused): :class:`fuzz.isolate.IsolatedChecker` runs each case in a worker process.
    ``database``: a Hypothesis example database shared with other campaigns (see
    :func:`example_database`); failures found anywhere are replayed here first.
    """
    if budget_seconds is None and max_examples is None:
        raise ValueError("give budget_seconds or max_examples (or both)")
    # Several value sets of one structure per example: with a compile cache they cost
    # one compilation; shrinking still ends at a single case.
    batches = cases.map(lambda case: (case,)) if cases is not None else strategies.case_batches()
    strategy = st.tuples(pipelines if pipelines is not None else st.none(), batches)
    if checker is None:

        def checker(case: Case, pipeline: Pipeline | None) -> Checked:
            return check(case, make_pass, runner, pipeline)

    campaign = _Campaign(checker, database, budget_seconds, max_examples, shrink_seconds, on_progress)
    try:
        with campaign.ctrl_c.installed():
            _run_rounds(campaign, strategy, seed)
    except (KeyboardInterrupt, StopCampaign) as stop:
        # Keep everything found, including a finding caught mid-shrink (as shrunk so far).
        if isinstance(stop, StopCampaign):
            campaign.result.stopped = str(stop)
        else:
            campaign.result.interrupted = True
        if campaign.last is not None:
            checked, finding = campaign.last
            signature = Signature.of(finding, checked.case, checked.pipeline)
            if all(str(hit.signature) != str(signature) for hit in campaign.result.hits):
                shrunk_for = time.monotonic() - campaign.shrink_start
                campaign.result.hits.append(
                    Hit(signature, finding, checked, campaign.first_seconds, shrunk_for)
                )
    campaign.result.interrupted |= campaign.ctrl_c.requested
    campaign.result.seconds = campaign.elapsed()
    return campaign.result


def _run_rounds(
    campaign: _Campaign, strategy: st.SearchStrategy[tuple[Pipeline | None, tuple[Case, ...]]], seed: int
) -> None:
    while not campaign.exhausted():
        campaign.ctrl_c.raise_if_requested()
        hit = campaign.run_round(strategy, seed * 1000 + campaign.result.rounds)
        if hit is None:
            if campaign.round_examples < EPOCH_EXAMPLES:
                return  # the budget is spent, or Hypothesis ran out of new examples
            continue  # the epoch ended: start afresh with the next seed
        campaign.result.hits.append(hit)
        campaign.progress(False)


def example_database(where: str) -> ExampleDatabase:
    """The example database at ``where``: a folder, or ``redis://HOST:PORT[/DB]`` for a Redis
    server that campaigns on many machines share (needs the ``redis`` package)."""
    if where.startswith(("redis://", "rediss://", "unix://")):
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase

        return RedisExampleDatabase(redis.Redis.from_url(where), key_prefix=b"bnfold-fuzz:")
    return DirectoryBasedExampleDatabase(where)


def _record(result: CampaignResult, checked: Checked, shrinking: bool) -> None:
    """Hypothesis events, and the campaign's own coverage counters."""
    verdict = checked.verdict
    attrs = classify(checked.case)
    combo = ",".join(f"{k}={v}" for k, v in attrs.items())
    fired = checked.execution.fired
    hypothesis.event(f"fired={fired}")
    hypothesis.event(f"dtype={attrs['dtype']} layout={attrs['data_layout']}/{attrs['kernel_layout']}")
    if shrinking:
        return
    result.changed += checked.execution.changed
    result.coverage[f"{combo},fired={fired}"] += 1
    result.ratios.append(verdict.worst_ratio)
    if checked.execution.changed:
        result.pressures.append(checked.reference.fold_pressure)
    for low in verdict.lowering:
        result.lowering[f"{low.symptom.value}[dtype={checked.case.dtype}]"] += 1
    if verdict.skipped:
        result.skipped[verdict.skipped] += 1
    for name in checked.gated:
        hypothesis.event(f"gated by opt level: {name}")
        result.gated[name] += 1
