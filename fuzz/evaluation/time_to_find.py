"""Time to find: how many seconds a fresh campaign needs to hit a bug, over several seeds
(for TVM alone: it imports TVM, its targets are TVM's passes and their mutants).

``bnfuzz bench --time-to-find`` measures three kinds of target, each with fresh
campaigns (a new compile cache, no example database, nothing seeded) for seeds ``0`` to
``seeds - 1``, one campaign at a time:

- each defect *class* of upstream's pass (:data:`UPSTREAM_CLASSES`): one campaign per
  seed against ``upstream``, run as ``bnfuzz run`` runs it (shrinking included, so a
  later class waits while an earlier one shrinks, as in ``make fuzz``); a class is hit
  when a shrunk finding's signature shows it, at that finding's first sight;
- each seeded-defect mutant of the fixed pass (:mod:`fuzz.backends.tvm.mutants`): the seconds until a
  campaign against it first sees *any* finding (:func:`time_to_kill`), and what it was;
- the control, ``fixed`` itself, for the whole budget: it must never be flagged.

Key idea: the numbers are medians over seeds of wall-clock seconds, measured one
campaign at a time in one run, for a person to read and compare; no test asserts them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fuzz.backends.tvm.compile_cache import CompileCache
from fuzz.backends.tvm.mutants import MUTANTS
from fuzz.backends.tvm.passes import MUTANT_PREFIX, PassFactory, resolve_pass
from fuzz.engine.campaign import StopCampaign, run_campaign
from fuzz.engine.campaign_result import Hit, Progress
from fuzz.model.attributes import ATTRIBUTE_DEFAULTS, classify
from fuzz.model.case import Case
from fuzz.model.case_json import case_to_json
from fuzz.oracle.signature import Signature
from fuzz.oracle.verdict import Symptom

__all__ = [
    "UPSTREAM_CLASSES",
    "Kill",
    "failed",
    "first_hits",
    "median",
    "run_time_to_find",
    "targets",
    "time_to_kill",
]


def _has(signature: Signature, key: str, value: str) -> bool:
    return (key, value) in signature.essentials


_WRONG_NUMBERS = (Symptom.OUT_OF_TOLERANCE, Symptom.FINITE_TO_NONFINITE)

#: The eight defect classes of upstream's pass, each recognised by a shrunk signature
#: (a flag that stays in a shrunk signature is what the bug needs, whatever the symptom:
#: ignoring ``scale=False`` shows as a wrong result or, with a huge gamma, as an overflow).
UPSTREAM_CLASSES: Mapping[str, Callable[[Signature], bool]] = {
    "scale": lambda s: s.symptom in _WRONG_NUMBERS and _has(s, "scale", "False"),
    "center": lambda s: s.symptom in _WRONG_NUMBERS and _has(s, "center", "False"),
    "axis": lambda s: _has(s, "axis", "non-channel"),
    "training": lambda s: _has(s, "training", "True"),
    "layout": lambda s: _has(s, "data_layout", "NHWC"),
    "dtype": lambda s: (
        s.key == (Symptom.PASS_EXCEPTION, "TypeError")
        and any(k in ("dtype", "out_dtype") for k, _ in s.essentials)
    ),
    "iohw": lambda s: (
        s.key == (Symptom.PASS_EXCEPTION, "AttributeError") and _has(s, "kernel_layout", "IOHW")
    ),
    "overflow": lambda s: s.symptom is Symptom.FINITE_TO_NONFINITE,
}


@dataclass(frozen=True)
class Kill:
    """The first finding a campaign saw: when, its symptom, and the raw (unshrunk) case's
    non-default attributes."""

    seconds: float
    symptom: str
    attributes: str
    #: the finding's message and the case (as first seen), to replay a control flag
    message: str = ""
    case: Case | None = None

    def to_json(self, *, with_case: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "seconds": round(self.seconds, 2),
            "symptom": self.symptom,
            "attributes": self.attributes,
        }
        if with_case:
            out["message"] = self.message
            out["case"] = case_to_json(self.case) if self.case is not None else None
        return out


def median(seconds: Sequence[float | None]) -> float | None:
    """The median, a miss counting as longer than any hit (None if the median is a miss)."""
    ordered = sorted(seconds, key=lambda s: float("inf") if s is None else s)
    if not ordered:
        return None
    middle = ordered[(len(ordered) - 1) // 2 : len(ordered) // 2 + 1]
    if any(s is None for s in middle):
        return None
    return float(statistics.mean(s for s in middle if s is not None))


def time_to_kill(make_pass: PassFactory, *, budget: float, seed: int) -> Kill | None:
    """The first finding of a fresh campaign against ``make_pass``, or None within ``budget``."""
    seen: list[Kill] = []

    def on_progress(progress: Progress) -> None:
        if progress.new is not None:  # a new bug, seen just now
            finding, case = progress.new
            attrs = ",".join(f"{k}={v}" for k, v in classify(case).items() if ATTRIBUTE_DEFAULTS[k] != v)
            head = finding.symptom.value + (f":{finding.error_type}" if finding.error_type else "")
            seen.append(Kill(progress.seconds, head, attrs, finding.message, case))
            raise StopCampaign("killed")

    run_campaign(
        make_pass, budget_seconds=budget, seed=seed, runner=CompileCache().run, on_progress=on_progress
    )
    return seen[0] if seen else None


def first_hits(
    make_pass: PassFactory,
    classes: Mapping[str, Callable[[Signature], bool]],
    *,
    budget: float,
    seed: int,
) -> dict[str, float | None]:
    """Seconds to the first hit of each class in one fresh campaign of ``budget`` seconds
    (which stops early once every class is hit)."""
    hits: dict[str, float | None] = dict.fromkeys(classes)

    def record(found: Sequence[Hit]) -> None:
        for hit in found:
            for name, matches in classes.items():
                if hits[name] is None and matches(hit.signature):
                    hits[name] = hit.first_seconds

    def on_progress(progress: Progress) -> None:
        record(progress.hits)
        if all(s is not None for s in hits.values()):
            raise StopCampaign("every class hit")

    result = run_campaign(
        make_pass, budget_seconds=budget, seed=seed, runner=CompileCache().run, on_progress=on_progress
    )
    record(result.hits)  # the last one, found as the budget ran out
    return hits


#: ``--only`` words that stand for groups of targets.
GROUPS = ("upstream", "mutants", "control")


def targets(only: Sequence[str] = ()) -> tuple[bool, list[str], bool]:
    """(upstream classes?, mutant names, control?) for ``--only`` words (empty: all).
    Raises ValueError naming an unknown word."""
    names = [m.name for m in MUTANTS]
    if not only:
        return True, names, True
    unknown = [w for w in only if w not in GROUPS and w not in names]
    if unknown:
        raise ValueError(
            f"unknown targets {unknown}: use {', '.join(GROUPS)} or mutant names ({', '.join(names)})"
        )
    mutants = names if "mutants" in only else [n for n in names if n in only]
    return "upstream" in only, mutants, "control" in only


def run_time_to_find(
    *,
    seeds: int,
    budget: float,
    only: Sequence[str] = (),
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Measure every target of ``only`` (see :func:`targets`); a JSON-ready summary."""
    upstream, mutants, control = targets(only)
    started = time.monotonic()
    summary: dict[str, Any] = {"seeds": seeds, "budget": budget}
    if upstream:
        per_class: dict[str, list[float | None]] = {name: [] for name in UPSTREAM_CLASSES}
        make = resolve_pass("upstream")
        for seed in range(seeds):
            log(f"upstream, seed {seed}: a {budget:.0f} s campaign")
            for name, hit in first_hits(make, UPSTREAM_CLASSES, budget=budget, seed=seed).items():
                per_class[name].append(hit)
        summary["upstream"] = [
            {"class": name, "seconds": _rounded(found), "median": _round(median(found))}
            for name, found in per_class.items()
        ]
        summary["upstream_all_found_seeds"] = sum(
            all(per_class[name][seed] is not None for name in per_class) for seed in range(seeds)
        )
    rows: list[dict[str, Any]] = []
    medians: list[float | None] = []
    for name in mutants:
        mutant = next(m for m in MUTANTS if m.name == name)
        make = resolve_pass(MUTANT_PREFIX + name)
        kills = []
        for seed in range(seeds):
            kill = time_to_kill(make, budget=budget, seed=seed)
            log(
                f"mutant {name}, seed {seed}: "
                + (f"{kill.seconds:.1f} s, {kill.symptom}" if kill else "survived")
            )
            kills.append(kill)
        seconds = [k.seconds if k else None for k in kills]
        medians.append(median(seconds))
        rows.append(
            {
                "mutant": name,
                "mistake": mutant.mistake,
                "kills": [k.to_json() if k else None for k in kills],
                "seconds": _rounded(seconds),
                "median": _round(medians[-1]),
            }
        )
    if mutants:
        summary["mutants"] = rows
        summary["mutants_killed"] = sum(all(s is not None for s in r["seconds"]) for r in rows)
        summary["mutants_median"] = _round(median(medians))
        hits = [m for m in medians if m is not None]
        summary["mutants_worst"] = _round(max(hits)) if len(hits) == len(medians) else None
    if control:
        flagged = []
        for seed in range(seeds):
            log(f"control (fixed), seed {seed}: a {budget:.0f} s campaign")
            kill = time_to_kill(resolve_pass("fixed"), budget=budget, seed=seed)
            if kill is not None:
                log(f"control (fixed), seed {seed}: FLAGGED at {kill.seconds:.1f} s, {kill.symptom}")
            flagged.append({"seed": seed, **kill.to_json(with_case=True)} if kill else None)
        summary["control_flagged"] = [k for k in flagged if k is not None]
    summary["wall_seconds"] = round(time.monotonic() - started, 1)
    return summary


def _round(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


def _rounded(seconds: Sequence[float | None]) -> list[float | None]:
    return [_round(s) for s in seconds]


def failed(summary: Mapping[str, Any]) -> bool:
    """Whether a mutant survived a seed or the control was flagged."""
    survived = "mutants" in summary and summary["mutants_killed"] < len(summary["mutants"])
    return survived or bool(summary.get("control_flagged"))
