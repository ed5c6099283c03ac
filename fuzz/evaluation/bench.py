"""Benchmark: the naive path against compile-once-per-structure, side by side.

Both paths check the *same* generated value sets (drawn once, up front, from
:func:`strategies.case_batches` with a fixed seed), one after the other in one
process: first the naive path (build both graphs for every value set), then the
cached path from a cold, empty cache, then the cached path again, warm. Each
phase gets the same time slice. A value set counts as checked when it went
through the pass and the oracle judged it, checked as a campaign checks it (the pass
judged, not TVM's lowering: the unfolded program runs only where the folded outputs
alone miss the bound, see :func:`fuzz.engine.check.check`); then the cached path judging the
lowering too (both programs built and run for every value set), warmed up over the
same value sets first, then measured warm.

A growth table repeats the measurement on single float32 conv-bn layers of
growing size (channels 1 to 64, spatial 1 to 32), with fixed values.

Optionally (``campaign_seconds``) it runs the upstream campaign with each path
and reports the seconds to the first hit of every signature.

:func:`run_isolation_bench` measures what crash isolation costs: the same value sets
(each in a drawn pipeline, as ``bnfuzz run --pipelines`` checks them) checked in this
process and in a worker process (:class:`fuzz.engine.isolate.IsolatedChecker`), each with its
own compile cache, in alternating rounds, so both see the same machine load.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

import strategies
from fuzz.backends import Fold, FoldLike, Runner, backend_of, resolve_fold
from fuzz.engine.campaign import run_campaign
from fuzz.engine.check import check
from fuzz.model.case import BatchNormAttrs, Block, Case, Conv2dAttrs, Topology
from fuzz.model.pipeline import Pipeline
from fuzz.model.tensor import Tensor

__all__ = [
    "GROWTH",
    "collect_pipeline_cases",
    "collect_value_sets",
    "layer_case",
    "run_backend_bench",
    "run_bench",
    "run_isolation_bench",
]

T = TypeVar("T")

#: Batches of value sets drawn per second of a phase: more than the cached path checks
#: from a cold cache (a phase that runs out of them ends early, its rate still measured),
#: few enough that drawing them takes about as long as one phase.
BATCHES_PER_SECOND = 15
MIN_BATCHES = 20

#: (channels, spatial) of the growth table: channels in and out, height = width.
GROWTH = ((1, 1), (4, 8), (16, 8), (16, 32), (64, 8), (64, 32))


def _draw(strategy: st.SearchStrategy[T], count: int, seed: int) -> list[T]:
    """``count`` examples of ``strategy``, generated (not shrunk) from ``seed``."""
    drawn: list[T] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example: T) -> None:
        drawn.append(example)

    collect()
    return drawn


def collect_value_sets(count: int, seed: int) -> list[Case]:
    """``count`` batches from :func:`strategies.case_batches`, flattened, deterministic."""
    return [case for batch in _draw(strategies.case_batches(), count, seed) for case in batch]


def collect_pipeline_cases(count: int, seed: int) -> list[tuple[Case, Pipeline]]:
    """``count`` (pipeline, batch) draws as a pipeline campaign makes them, flattened."""
    drawn = _draw(st.tuples(strategies.pipelines(), strategies.case_batches()), count, seed)
    return [(case, pipeline) for pipeline, batch in drawn for case in batch]


def run_isolation_bench(
    pass_name: str,
    *,
    batches: int = 100,
    rounds: int = 3,
    seed: int = 0,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Seconds per round for in-process and isolated checking of the same value sets: for
    TVM's passes each in a drawn pipeline (what runs isolated by default), for another
    backend its own cases (:meth:`fuzz.backends.Fold.cases`) as a campaign checks them."""
    from fuzz.engine.isolate import IsolatedChecker

    fold = resolve_fold(pass_name)
    drawn: list[tuple[Case, Pipeline | None]]
    if backend_of(pass_name).tvm_passes:
        drawn = list(collect_pipeline_cases(batches, seed))
    else:
        drawn = [(case, None) for case in _draw(fold.cases(), batches, seed)]
    runner = fold.runner()
    rows = []
    # both sides judge as a campaign does: the fold, not the framework's own lowering
    with IsolatedChecker(pass_name, cache=True, lowering=False) as isolated:
        isolated(*drawn[0])  # start the worker outside the timed rounds (the framework's import)
        for r in range(rounds):
            start = time.perf_counter()
            for case, pipeline in drawn:
                check(case, fold, runner, pipeline, lowering=False)
            here = time.perf_counter() - start
            start = time.perf_counter()
            for case, pipeline in drawn:
                isolated(case, pipeline)
            there = time.perf_counter() - start
            log(f"round {r + 1}: in-process {here:.1f} s, isolated {there:.1f} s")
            rows.append({"in_process_seconds": round(here, 2), "isolated_seconds": round(there, 2)})
        starts = isolated.starts
    here_total = sum(r["in_process_seconds"] for r in rows)
    there_total = sum(r["isolated_seconds"] for r in rows)
    return {
        "pass": pass_name,
        "value_sets": len(drawn),
        "rounds": rows,
        "worker_starts": starts,
        "ratio": round(there_total / here_total, 3),
        "ratio_warm": round(
            sum(r["isolated_seconds"] for r in rows[1:]) / sum(r["in_process_seconds"] for r in rows[1:]), 3
        )
        if len(rows) > 1
        else None,
    }


def _throughput(
    cases: Sequence[Case],
    fold: FoldLike,
    runner: Runner | None,
    seconds: float,
    *,
    lowering: bool = False,
) -> tuple[int, float]:
    """Value sets checked in order within ``seconds`` (at least one), and the time taken.
    Checked as a campaign checks them (``lowering=False``: the pass judged, not TVM's
    lowering; see :func:`fuzz.engine.check.check`), unless ``lowering``."""
    start = time.perf_counter()
    done = 0
    for case in cases:
        check(case, fold, runner, lowering=lowering)
        done += 1
        if time.perf_counter() - start >= seconds:
            break
    return done, time.perf_counter() - start


def layer_case(channels: int, spatial: int) -> Case:
    """A float32 NCHW conv-bn layer, 3x3 kernel with padding 1, fixed ordinary values."""

    def values(shape: tuple[int, ...], scale: float, offset: float = 0.0) -> Tensor:
        n = int(np.prod(shape))
        v = ((np.arange(n) * 7) % 17 - 8) / 8 * scale + offset
        return Tensor.from_numpy(v.reshape(shape), "float32")

    c = channels
    data = values((1, c, spatial, spatial), 1.0)
    conv = Conv2dAttrs(padding=(1, 1, 1, 1))
    block = Block(
        bn=BatchNormAttrs(),
        gamma=values((c,), 0.25, 1.0),
        beta=values((c,), 0.5),
        mean=values((c,), 0.5),
        var=values((c,), 0.25, 1.5),
        conv=conv,
        weight=values((c, c, 3, 3), 0.1),
    )
    return Case(Topology.CONV_BN, data, (block,))


def run_bench(
    fold: FoldLike,
    *,
    seconds: float,
    seed: int = 0,
    growth_seconds: float = 5.0,
    campaign_seconds: float = 0.0,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Measure both paths of a TVM fold (the compile cache is TVM's); see the module
    docstring. Returns a JSON-ready summary."""
    from fuzz.backends.tvm.compile_cache import CompileCache

    began = time.perf_counter()
    batches = max(MIN_BATCHES, math.ceil(seconds * BATCHES_PER_SECOND))
    log(f"drawing {batches} batches of value sets")
    cases = collect_value_sets(batches, seed)
    log(f"naive path for {seconds:.0f} s")
    naive_n, naive_s = _throughput(cases, fold, None, seconds)
    log(f"cached path, cold, for {seconds:.0f} s")
    cache = CompileCache(capacity=4096)
    cold_n, cold_s = _throughput(cases, fold, cache.run, seconds)
    cold_stats = (cache.stats.hit_rate, cache.stats.builds)
    log(f"cached path, warm, over the same {cold_n} value sets")
    warm_n, warm_s = _throughput(cases[:cold_n], fold, cache.run, seconds)
    # The cold phase built no unfolded programs: warm them up first, then measure.
    log(f"cached path judging TVM's lowering too: warming up for {seconds:.0f} s")
    ready, _ = _throughput(cases[:cold_n], fold, cache.run, seconds, lowering=True)
    log(f"cached path judging TVM's lowering too, warm, over the same {ready} value sets")
    lowering_n, lowering_s = _throughput(cases[:ready], fold, cache.run, seconds, lowering=True)
    summary: dict[str, Any] = {
        "value_sets_drawn": len(cases),
        "naive": {
            "value_sets": naive_n,
            "seconds": round(naive_s, 2),
            "per_second": round(naive_n / naive_s, 2),
        },
        "cached_cold": {
            "value_sets": cold_n,
            "seconds": round(cold_s, 2),
            "per_second": round(cold_n / cold_s, 2),
            "hit_rate": round(cold_stats[0], 4),
            "structures_compiled": cold_stats[1],
        },
        "cached_warm": {
            "value_sets": warm_n,
            "seconds": round(warm_s, 2),
            "per_second": round(warm_n / warm_s, 2),
        },
        # every value set's unfolded program built and run too (--lowering)
        "cached_warm_lowering": {
            "value_sets": lowering_n,
            "seconds": round(lowering_s, 2),
            "per_second": round(lowering_n / lowering_s, 2),
        },
    }
    log(f"campaign for {seconds:.0f} s")
    campaign_cache = CompileCache()
    result = run_campaign(fold, budget_seconds=seconds, seed=seed, runner=campaign_cache.run)
    shrinking = sum(hit.shrink_seconds for hit in result.hits)
    summary["campaign"] = {
        "value_sets": result.examples,
        "seconds": round(result.seconds, 2),
        "per_second": round(result.examples / result.seconds, 2),
        "batches": result.batches,
        "shrink_seconds": round(shrinking, 2),
        "searching_per_second": round(result.examples / max(result.seconds - shrinking, 1e-9), 2),
        "findings": len(result.hits),
        "structures_compiled": campaign_cache.stats.builds,
    }
    summary["ratio_campaign_warm"] = round(
        summary["campaign"]["searching_per_second"] / summary["cached_warm"]["per_second"], 2
    )
    summary["ratio_cold"] = round(summary["cached_cold"]["per_second"] / summary["naive"]["per_second"], 2)
    summary["ratio_warm"] = round(summary["cached_warm"]["per_second"] / summary["naive"]["per_second"], 2)
    growth = []
    for channels, spatial in GROWTH:
        log(f"growth: {channels} channels, {spatial}x{spatial}")
        layer = [layer_case(channels, spatial)] * 1000
        n_naive, s_naive = _throughput(layer, fold, None, growth_seconds)
        layer_cache = CompileCache()
        check(layer[0], fold, layer_cache.run)  # warm it
        n_warm, s_warm = _throughput(layer, fold, layer_cache.run, growth_seconds)
        growth.append(
            {
                "channels": channels,
                "spatial": spatial,
                "naive_per_second": round(n_naive / s_naive, 2),
                "cached_warm_per_second": round(n_warm / s_warm, 2),
            }
        )
    summary["growth"] = growth
    if campaign_seconds > 0:
        detection: dict[str, dict[str, float]] = {}
        for path, runner in (("naive", None), ("cached", CompileCache().run)):
            log(f"{path} campaign for {campaign_seconds:.0f} s")
            result = run_campaign(fold, budget_seconds=campaign_seconds, seed=seed, runner=runner)
            for hit in result.hits:
                detection.setdefault(str(hit.signature), {})[path] = round(hit.first_seconds, 1)
        summary["first_hit_seconds"] = detection
    summary["total_seconds"] = round(time.perf_counter() - began, 1)
    return summary


def run_backend_bench(
    fold: Fold, *, seconds: float, seed: int = 0, log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """Value sets per second for a backend without a compile cache (ONNX Runtime: a session
    per value set): the fold's own cases checked one after another as a campaign checks
    them, then a campaign of ``seconds``. Returns a JSON-ready summary."""
    began = time.perf_counter()
    count = max(MIN_BATCHES, math.ceil(seconds * 400))  # more than a backend checks in ``seconds``
    log(f"drawing {count} value sets from the fold's cases")
    cases = _draw(fold.cases(), count, seed)
    log(f"checking them for {seconds:.0f} s")
    n, spent = _throughput(cases, fold, None, seconds)
    log(f"campaign for {seconds:.0f} s")
    result = run_campaign(fold, budget_seconds=seconds, seed=seed)
    shrinking = sum(hit.shrink_seconds for hit in result.hits)
    return {
        "framework": f"{backend_of(fold.name).framework} {fold.version()}",
        "value_sets_drawn": len(cases),
        "checked": {"value_sets": n, "seconds": round(spent, 2), "per_second": round(n / spent, 2)},
        "campaign": {
            "value_sets": result.examples,
            "seconds": round(result.seconds, 2),
            "per_second": round(result.examples / result.seconds, 2),
            "shrink_seconds": round(shrinking, 2),
            "searching_per_second": round(result.examples / max(result.seconds - shrinking, 1e-9), 2),
            "findings": len(result.hits),
        },
        "total_seconds": round(time.perf_counter() - began, 1),
    }
