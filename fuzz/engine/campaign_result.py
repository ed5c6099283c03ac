r"""What a campaign returns (:class:`CampaignResult`: its distinct bugs as :class:`Hit`\ s,
and its coverage counters), what it reports while it runs (:class:`Progress`), and how
one checked value set is counted (:func:`record_checked`, :func:`record_events`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import hypothesis

from fuzz.engine.check import Checked
from fuzz.model.attributes import classify
from fuzz.model.case import Case
from fuzz.oracle.signature import Signature
from fuzz.oracle.verdict import Finding

__all__ = ["CampaignResult", "Hit", "Progress", "record_checked", "record_events"]


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
    #: when shrinking starts: the new bug's finding and case, as first seen (not shrunk)
    new: tuple[Finding, Case] | None = None


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
    #: how often each (attribute combination, whether the pass fired) pair was run
    coverage: Counter[tuple[str, bool]] = field(default_factory=Counter)
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


def record_events(batch: list[Checked]) -> None:
    """Hypothesis events for one example: attribute combination and whether the pass fired
    (once per batch: its value sets share the structure)."""
    attrs = classify(batch[0].case)
    hypothesis.event(f"fired={any(c.execution.fired for c in batch)}")
    hypothesis.event(f"dtype={attrs['dtype']} layout={attrs['data_layout']}/{attrs['kernel_layout']}")
    for name in batch[0].gated:
        hypothesis.event(f"gated by opt level: {name}")


def record_checked(result: CampaignResult, checked: Checked, combo: str) -> None:
    """The campaign's own coverage counters for one checked value set (``combo``: its
    attribute combination, the same for a whole batch)."""
    verdict = checked.verdict
    fired = checked.execution.fired
    result.changed += checked.execution.changed
    result.coverage[combo, fired] += 1
    result.ratios.append(verdict.worst_ratio)
    if checked.execution.changed:
        result.pressures.append(checked.reference.fold_pressure)
    for low in verdict.lowering:
        result.lowering[f"{low.symptom.value}[dtype={checked.case.dtype}]"] += 1
    if verdict.skipped:
        result.skipped[verdict.skipped] += 1
    for name in checked.gated:
        result.gated[name] += 1
