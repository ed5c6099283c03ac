"""Campaign: run Hypothesis over generated cases against one pass, collecting every
distinct bug, each shrunk to a minimal case.

Hypothesis stops at the first failure and shrinks it. To find *all* bugs the
campaign runs rounds: in each round the test body raises only for a finding no
known :class:`~fuzz.oracle.signature.Signature` covers, and once one is raised it
keeps raising only for that symptom, so shrinking cannot drift to another bug.
The shrunk case defines a new signature, which is added to the known set, and
the next round starts. The campaign ends when the time budget or the example
budget is spent.

Each Hypothesis run lasts at most :data:`EPOCH_EXAMPLES` examples; the next one starts
from a fresh seed, so the search does not settle on a few graph structures.

Search guidance comes from the strategies, not from ``hypothesis.target``: value sets
are aimed at a fold's edges (:mod:`strategies.aim`) and the odds of every attribute
vary from case to case (swarm testing, :class:`strategies.attributes.Deviation`).
Hypothesis's targeting phase is not run: it spent up to half a campaign hill-climbing
on one structure and slowed every hard seeded defect down. ``hypothesis.event``
records attribute combinations and whether the pass fired (see ``pytest
--hypothesis-show-statistics``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import hypothesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.database import ExampleDatabase
from hypothesis.errors import Flaky, HypothesisWarning
from hypothesis.reporting import with_reporter

import strategies
from fuzz.backends import FoldLike, Runner, as_fold
from fuzz.engine.campaign_control import CtrlC, default_shrink_seconds, shrinking_capped
from fuzz.engine.campaign_result import CampaignResult, Hit, Progress, record_checked, record_events
from fuzz.engine.check import Checked, check
from fuzz.engine.minimize import simplify
from fuzz.engine.simplifications import with_defaults_except
from fuzz.model.attributes import classify
from fuzz.model.case import Case
from fuzz.model.pipeline import Pipeline
from fuzz.oracle.signature import Signature
from fuzz.oracle.verdict import Finding, Symptom

__all__ = [
    "BATCH_SIZE",
    "EPOCH_EXAMPLES",
    "FURTHER_COUNTS",
    "StopCampaign",
    "run_campaign",
]


#: The most value sets of one structure one example checks.
BATCH_SIZE = 64

#: How many further value sets a batch gets after its first (0 to ``BATCH_SIZE - 1``).
FURTHER_COUNTS = strategies.further_counts(BATCH_SIZE)

#: The most value sets a shrink remembers as checked without a finding.
MEMO_SIZE = 4096

#: Examples (batches) per Hypothesis run; the next run starts from a fresh seed, so a
#: long campaign does not settle on the structures one run's generator favours.
EPOCH_EXAMPLES = 500


class StopCampaign(BaseException):
    """Raised by an ``on_progress`` callback to end the campaign at once, keeping what it
    found (e.g. the output folder filled up). Not an ``Exception``, so Hypothesis does not
    take it for a failure of the case and shrink it."""


class _OutOfBudget(BaseException):
    """Ends a Hypothesis run from inside the test body without counting as a failure."""


class _Found(Exception):
    """The body's way to tell Hypothesis: this example shows a new bug."""


#: Checks one case, alone or inside a pipeline: :func:`check` with a pass and a runner
#: bound, or :class:`fuzz.engine.isolate.IsolatedChecker` (in a worker process).
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
    #: makes a round's shrunk hit simpler still (attributes, channels, values), or None
    simplifier: Callable[[Hit], Hit] | None = None
    start: float = field(default_factory=time.monotonic)
    result: CampaignResult = field(default_factory=lambda: CampaignResult(0, 0.0, []))
    # the current round: the symptom being shrunk, the last case showing it, timings
    key: tuple[Any, str] | None = None
    last: tuple[Checked, Finding] | None = None
    round_examples: int = 0
    first_seconds: float = 0.0
    shrink_start: float = 0.0
    ctrl_c: CtrlC = field(default_factory=CtrlC)
    #: value sets the current round's shrink has checked without a finding: whether the
    #: pass changed them (so a shrink step checks only what it changed)
    passing: dict[tuple[Case, Pipeline | None], bool] = field(default_factory=dict)

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def exhausted(self) -> bool:
        over_time = self.budget_seconds is not None and self.elapsed() > self.budget_seconds
        over_count = self.max_examples is not None and self.result.examples >= self.max_examples
        return over_time or over_count

    def progress(self, shrinking: bool, new: tuple[Finding, Case] | None = None) -> None:
        if self.on_progress is not None:
            r = self.result
            self.on_progress(Progress(r.examples, self.elapsed(), r.hits, shrinking, new))

    def body(self, example: tuple[Pipeline | None, Case, Any]) -> None:
        """The Hypothesis test body: checks value sets of one structure (in one pipeline,
        for a pipeline campaign) and raises :class:`_Found` for the round's new bug only.

        The first value set is drawn with the structure; further ones (up to
        :data:`BATCH_SIZE` in all) are drawn here, one at a time, and only if the pass
        rewrote the first: a structure the pass leaves alone costs one check, one the pass
        folds is compiled once and checked on many values. A batch ends at its first value
        set showing a known bug."""
        pipeline, first, data = example
        shrinking = self.key is not None
        if not shrinking and self.exhausted():
            raise _OutOfBudget
        if not shrinking:
            self.round_examples += 1
            self.result.batches += 1
        combo = ",".join(f"{k}={v}" for k, v in classify(first).items())
        done: list[Checked] = []
        # value sets of this batch checked without a finding (whether the pass changed them)
        passed: dict[tuple[Case, Pipeline | None], bool] = {}
        further = drawn = 0
        try:
            case = first
            while True:
                self.ctrl_c.raise_if_requested()
                drawn += 1
                known = self.passing.get((case, pipeline)) if shrinking else None
                if known is not None:
                    changed = known  # checked before in this shrink, without a finding
                else:
                    if not shrinking:
                        if self.exhausted():
                            break
                        self.result.examples += 1
                    checked = self.checker(case, pipeline)
                    # A second Ctrl-C may have cut this check short: it proves nothing, drop it.
                    self.ctrl_c.raise_if_requested()
                    done.append(checked)
                    if not shrinking:
                        record_checked(self.result, checked, combo)
                    if not shrinking and self.result.examples % 10 == 0:
                        self.progress(False)
                    self._raise_if_new(checked, shrinking)
                    # A known bug (a new one raised above): this structure has shown what it
                    # shows; the next structure is likelier to show something new.
                    if checked.verdict.primary is not None:
                        break
                    changed = checked.execution.changed
                    passed[(case, pipeline)] = changed
                if data is None or (drawn == 1 and not changed):
                    break
                if drawn == 1:
                    further = data.draw(FURTHER_COUNTS)
                if drawn > further:
                    break
                case = data.draw(strategies.value_sets(first))
        finally:
            # Shrinking replays the value sets before the failing one again and again:
            # each is checked once (the pass is deterministic), then remembered.
            if self.key is not None:
                if len(self.passing) > MEMO_SIZE:
                    self.passing.clear()
                self.passing.update(passed)
            if done:
                record_events(done)

    def _raise_if_new(self, checked: Checked, shrinking: bool) -> None:
        finding = checked.verdict.primary
        if finding is None:
            return
        for hit in self.result.hits:
            if hit.signature.covers(finding, checked.case, checked.pipeline):
                hit.hits += 0 if shrinking else 1
                return
        key = (finding.symptom, finding.error_type)
        if self.key is None and (known := self._known_under_other_attributes(checked, key)) is not None:
            known.hits += 1
            return
        if self.key is None:
            self.key, self.first_seconds, self.shrink_start = key, self.elapsed(), time.monotonic()
            self.last = (checked, finding)  # kept even if the progress callback stops the campaign
            self.progress(True, (finding, checked.case))
        if key == self.key:
            self.last = (checked, finding)
            raise _Found(finding.symptom.value)

    def _known_under_other_attributes(self, checked: Checked, key: tuple[Symptom, str]) -> Hit | None:
        """The known bug a new finding turns out to be, or None.

        A finding with the symptom of a known bug but some attribute that bug's signature
        lacks (the overflow again, now with a conv bias) would start a round and a shrink
        of its own, which keeps the attribute because the simpler case is covered already.
        So, for each known bug with the same symptom, the case's other attributes are set
        back to their defaults at once (:func:`fuzz.engine.simplifications.with_defaults_except`, values
        untouched) and checked again: if that bug's signature covers the result, it is
        that bug. One check per known bug instead of a shrink; a bug that needs the
        attribute stays new."""
        for hit in self.result.hits:
            if hit.signature.key != key:
                continue
            keep = {name for name, _ in hit.signature.essentials}
            simpler = with_defaults_except(checked.case, keep)
            if simpler == checked.case:
                continue  # nothing to reset: the signature did not cover it as it is
            try:
                again = self.checker(simpler, checked.pipeline)
            except ValueError:  # a combination TVM or the case model rejects
                continue
            finding = again.verdict.primary
            if finding is not None and hit.signature.covers(finding, simpler, checked.pipeline):
                return hit
        return None

    def run_round(
        self, strategy: st.SearchStrategy[tuple[Pipeline | None, Case, Any]], seed: int
    ) -> Hit | None:
        """One Hypothesis run of at most :data:`EPOCH_EXAMPLES` examples: the next new bug,
        shrunk, or None (the epoch or the budget ended, or the strategy ran dry)."""
        self.result.rounds += 1
        self.key, self.last = None, None
        self.passing.clear()
        self.round_examples = 0
        remaining = self.max_examples - self.result.examples if self.max_examples is not None else 10**9
        test = settings(
            max_examples=max(min(remaining, EPOCH_EXAMPLES), 1),
            deadline=None,
            database=self.database,
            # With a database, the first round first replays the failures saved there (by
            # earlier campaigns, or other workers), each raised and recorded here too. Later
            # rounds do not: a replayed bug they know passes, and Hypothesis would delete
            # from the database every saved failure that passes.
            phases=(Phase.reuse, Phase.generate, Phase.shrink)
            if self.database is not None and self.result.rounds == 1
            else (Phase.generate, Phase.shrink),
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False,
        )(hypothesis.seed(seed)(given(strategy)(self.body)))
        try:
            # Hypothesis's report of the failing example is discarded, and so is its warning
            # that the example's repr is large (a case shrinking stopped early): under
            # ``-W error`` that warning would end the campaign.
            with (
                with_reporter(lambda _message: None),
                warnings.catch_warnings(),
                shrinking_capped(self.shrink_seconds),
            ):
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
            Signature.of(finding, checked.case, checked.pipeline, checked.scope),
            finding,
            checked,
            first_seconds=self.first_seconds,
            shrink_seconds=time.monotonic() - self.shrink_start,
        )


def run_campaign(
    fold: FoldLike,
    *,
    budget_seconds: float | None = None,
    max_examples: int | None = None,
    seed: int = 0,
    shrink_seconds: float | None = None,
    cases: st.SearchStrategy[Case] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    runner: Runner | None = None,
    pipelines: st.SearchStrategy[Pipeline] | None = None,
    checker: Checker | None = None,
    database: ExampleDatabase | None = None,
    lowering: bool = False,
) -> CampaignResult:
    """Fuzz ``fold`` (a :class:`fuzz.backends.Fold`, or a factory of TVM passes) until
    a budget runs out; return every distinct bug found. The cases are drawn from the
    fold's :meth:`~fuzz.backends.Fold.cases` unless ``cases`` is given.

    ``runner`` compiles and runs modules: the naive :func:`fuzz.backends.tvm.execute.compile_and_run`
    by default, or :meth:`fuzz.backends.tvm.compile_cache.CompileCache.run`. ``pipelines``: run each
    case inside a drawn pipeline (:mod:`strategies.pipelines`) instead of through the pass
    alone. ``checker`` replaces :func:`check` (``fold`` and ``runner`` are then
    unused): :class:`fuzz.engine.isolate.IsolatedChecker` runs each case in a worker process.
    ``database``: a Hypothesis example database shared with other campaigns (see
    :func:`fuzz.engine.campaign_control.example_database`); failures found anywhere are replayed here first.
    ``lowering``: also judge TVM's own lowering (``baseline-*``) everywhere: build and run
    the graphs the pass leaves unchanged, and the unfolded program of every value set.
    Otherwise a structure the pass does not change costs no compilation, and the unfolded
    program is built and run only where the folded outputs alone do not clear the numeric
    rules (:func:`fuzz.oracle.verdict.within_bound`): the verdicts on the pass are the same, and the
    search moves on faster.

    ``shrink_seconds`` caps Hypothesis's shrinking of one finding (default
    :func:`fuzz.engine.campaign_control.default_shrink_seconds` of the budget); then, unless
    ``checker`` is given, each
    attribute the shrunk case still has is tried back at its default
    (:func:`fuzz.engine.minimize.simplify`, at most twice as long), so that an attribute the
    capped shrink left behind does not make a known bug look new.
    """
    if budget_seconds is None and max_examples is None:
        raise ValueError("give budget_seconds or max_examples (or both)")
    # Several value sets of one structure per example (drawn in the body, see
    # _Campaign.body): with a compile cache they cost one compilation; shrinking still
    # ends at a single case. Given ``cases``, one value set each.
    further = st.none() if cases is not None else st.data()
    strategy = st.tuples(
        pipelines if pipelines is not None else st.none(),
        cases if cases is not None else as_fold(fold).cases(),
        further,
    )
    in_process = checker is None
    if checker is None:

        def checker(case: Case, pipeline: Pipeline | None) -> Checked:
            return check(case, fold, runner, pipeline, lowering=lowering)

    cap = default_shrink_seconds(budget_seconds) if shrink_seconds is None else shrink_seconds
    simplifier = None
    if in_process:  # a crash of the pass would end this process: an isolated hit stays as shrunk

        def simplifier(hit: Hit) -> Hit:
            case, pipeline = hit.checked.case, hit.checked.pipeline
            start = time.monotonic()
            simpler, pipeline, narrowed = simplify(case, fold, pipeline, runner=runner, seconds=2 * cap)
            again = checker(simpler, pipeline)
            finding = again.verdict.primary
            if narrowed is None or finding is None:  # cannot happen for a deterministic pass
                return hit
            spent = hit.shrink_seconds + time.monotonic() - start
            return replace(hit, signature=narrowed, finding=finding, checked=again, shrink_seconds=spent)

    campaign = _Campaign(checker, database, budget_seconds, max_examples, cap, on_progress, simplifier)
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
            signature = Signature.of(finding, checked.case, checked.pipeline, checked.scope)
            if all(str(hit.signature) != str(signature) for hit in campaign.result.hits):
                shrunk_for = time.monotonic() - campaign.shrink_start
                campaign.result.hits.append(
                    Hit(signature, finding, checked, campaign.first_seconds, shrunk_for)
                )
    campaign.result.interrupted |= campaign.ctrl_c.requested
    campaign.result.seconds = campaign.elapsed()
    return campaign.result


def _run_rounds(
    campaign: _Campaign, strategy: st.SearchStrategy[tuple[Pipeline | None, Case, Any]], seed: int
) -> None:
    while not campaign.exhausted():
        campaign.ctrl_c.raise_if_requested()
        hit = campaign.run_round(strategy, seed * 1000 + campaign.result.rounds)
        if hit is None:
            if campaign.round_examples < EPOCH_EXAMPLES:
                return  # the budget is spent, or Hypothesis ran out of new examples
            continue  # the epoch ended: start afresh with the next seed
        if campaign.simplifier is not None:
            hit = campaign.simplifier(hit)
        same = next((h for h in campaign.result.hits if h.signature == hit.signature), None)
        if same is not None:  # simpler still, it is a known bug
            same.hits += 1
            continue
        campaign.result.hits.append(hit)
        campaign.progress(False)
