"""Runtime measured side by side (for TVM alone: it imports TVM): each program compiled
with one fusing pipeline
(``zero_pipeline`` under ``PassContext(opt_level=3)``, plain ``llvm``), then the programs
take turns, ``rounds`` times, each round's time the median of ``number`` calls, and the
figure the median over rounds (shared, noisy machines: only ratios of one run count)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import tvm
from tvm import relax

__all__ = ["SLOW_CALL_SECONDS", "compile_for_timing", "time_side_by_side"]

#: A program slower than this per call is timed in 3 rounds of 1 call.
SLOW_CALL_SECONDS = 0.5


def compile_for_timing(mod: tvm.IRModule) -> Any:
    with tvm.transform.PassContext(opt_level=3):
        exe = relax.build(relax.pipeline.zero_pipeline()(mod), target="llvm")
    return relax.VirtualMachine(exe, tvm.cpu())["main"]


def time_side_by_side(
    functions: dict[str, Any], inputs: list[Any], rounds: int, number: int
) -> dict[str, float]:
    """Median over ``rounds`` of each function's median time of ``number`` calls, in ms;
    the functions take turns within every round."""
    per_round: dict[str, list[float]] = {name: [] for name in functions}
    slowest = 0.0
    for main in functions.values():
        start = time.perf_counter()
        main(*inputs)  # warm up
        slowest = max(slowest, time.perf_counter() - start)
    if slowest > SLOW_CALL_SECONDS:  # emulated float16 convs take seconds per call
        rounds, number = min(rounds, 3), 1
    for _ in range(rounds):
        for name, main in functions.items():
            samples = []
            for _ in range(number):
                start = time.perf_counter()
                main(*inputs)
                samples.append(time.perf_counter() - start)
            per_round[name].append(float(np.median(samples)))
    return {name: round(float(np.median(times)) * 1e3, 4) for name, times in per_round.items()}
