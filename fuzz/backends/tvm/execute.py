"""The backend: run one case through one pass on the llvm VM, failures as values.

:func:`execute` builds the case's module from the spec. It is compiled and run
as is (the *baseline*), and it goes through the pass under test, whose output is
checked for well-formedness, then compiled and run the same way (the *folded*
program). Both go through one pipeline, ``relax.build(zero_pipeline()(mod),
target=TARGET)``, and the same inputs.

It returns the result types of :mod:`fuzz.oracle.execution` (:class:`~fuzz.oracle.execution.Execution`,
:class:`~fuzz.oracle.execution.Outputs`, :class:`~fuzz.oracle.execution.Failure` at a
:class:`~fuzz.oracle.execution.Stage`), which import no TVM.

Key idea: TVM failures never escape :func:`execute`; they become :class:`Failure`
values the oracle can judge. Failures of our own code (an invalid case, a bug here)
do raise. Native crashes cannot be caught in-process; callers that need isolation
run :func:`execute` in a subprocess.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tvm
from tvm import relax

from fuzz.backends.tvm.build import (
    FUNCTION_NAME,
    bound_module,
    build_module,
    runtime_inputs,
    runtime_tensors,
    unfolded_program,
)
from fuzz.backends.tvm.compat import RuntimeTensor, assert_well_formed, structural_equal, to_device
from fuzz.model.case import Case
from fuzz.oracle.execution import Execution, Failure, Outputs, Stage

__all__ = [
    "COUNTED_OPS",
    "TARGET",
    "Runner",
    "compile_and_run",
    "count_batch_norms",
    "count_ops",
    "execute",
    "outputs_of",
]

#: Plain llvm, no ``mcpu``: with a host CPU, LLVM contracts multiply-add into FMA and
#: outputs change bitwise. ``opt-level 0`` compiles 1.8x faster than the default
#: (149 builds: 11 s against 20 s; one float32 conv-bn execute(): 0.40 s against 0.48 s
#: for upstream) with bit-identical outputs in every dtype, huge values included
#: (149 of 149 builds, and tests/test_execute.py::test_opt_level_0_target_is_bit_identical).
TARGET = tvm.target.Target({"kind": "llvm", "opt-level": 0})


#: The operators :func:`count_ops` counts by default: what a fold removes, adds or keeps.
COUNTED_OPS = ("conv2d", "batch_norm", "add", "multiply", "subtract", "divide", "sqrt")


def count_ops(mod: tvm.IRModule, names: Sequence[str] = COUNTED_OPS) -> dict[str, int]:
    """How many calls of each operator in ``names`` (``conv2d``, ``add``: Relax operator
    names without ``relax.`` and ``nn.``) the module's Relax functions make."""
    counts = dict.fromkeys(names, 0)

    def visit(expr: Any) -> None:
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            name = str(expr.op.name).removeprefix("relax.").removeprefix("nn.")
            if name in counts:
                counts[name] += 1

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return counts


def count_batch_norms(mod: tvm.IRModule) -> int:
    """The number of ``relax.nn.batch_norm`` calls in the module's Relax functions."""
    return count_ops(mod, ("batch_norm",))["batch_norm"]


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, RuntimeTensor):
        return [value]
    return [leaf for item in value for leaf in _flatten(item)]


def outputs_of(value: Any) -> Outputs:
    """The VM's return value, flattened, as :class:`Outputs`."""
    return Outputs.of_arrays([t.numpy() for t in _flatten(value)])


def compile_and_run(
    mod: tvm.IRModule, inputs: Sequence[np.ndarray[Any, Any]]
) -> tuple[Outputs | Failure, float]:
    """Build ``mod`` for :data:`TARGET` and run ``main`` on ``inputs``.

    Also returns the seconds spent, VM creation included: that is where the LLVM
    module is loaded, and it costs about as much as ``relax.build`` itself.
    """
    start = time.perf_counter()
    try:
        exe = relax.build(relax.pipeline.zero_pipeline()(mod), target=TARGET)
    except Exception as exc:
        return Failure.from_exception(Stage.BUILD, exc), time.perf_counter() - start
    try:
        main = relax.VirtualMachine(exe, tvm.cpu())[FUNCTION_NAME]
        result = main(*[to_device(a) for a in inputs])
    except Exception as exc:
        return Failure.from_exception(Stage.RUN, exc), time.perf_counter() - start
    seconds = time.perf_counter() - start
    return outputs_of(result), seconds


def _shallow_copy(mod: tvm.IRModule) -> tvm.IRModule:
    """A new module holding the same (immutable) functions: a pass that assigns
    ``mod[name] = ...`` on its input changes the copy, not ``mod``."""
    return tvm.IRModule(dict(mod.functions), attrs=mod.attrs, global_infos=mod.global_infos)


def _idempotent(make_pass: Callable[[], Any], after: tvm.IRModule) -> bool:
    try:
        again = make_pass()(_shallow_copy(after))
    except Exception:
        return False
    return structural_equal(after, again)


#: Compiles and runs a module on inputs: :func:`compile_and_run` (naive) or
#: :meth:`fuzz.backends.tvm.compile_cache.CompileCache.run` (compile once per structure).
#: Inputs are NumPy arrays or TVM runtime tensors.
Runner = Callable[[tvm.IRModule, Sequence[Any]], tuple[Outputs | Failure, float]]


def execute(
    case: Case,
    make_pass: Callable[[], tvm.ir.transform.Pass],
    runner: Runner | None = None,
    *,
    idempotence: bool = True,
    unchanged: bool = True,
    baseline_needed: Callable[[Outputs], bool] | None = None,
) -> Execution:
    """Run ``case`` unfolded and through ``make_pass()``; see :class:`Execution`.

    ``runner`` compiles and runs both modules. Without one, both go through
    :func:`compile_and_run` and the baseline is the constant-bound module, exactly
    what the pass sees (the naive path). With one (a compile-once cache), the
    baseline is :func:`fuzz.backends.tvm.build.unfolded_program`: the same computation with every
    operand a parameter, one module object per structure, so the cache need not
    lift and hash it for every value set. ``tests/test_compile_cache.py`` checks
    that the two paths agree bit for bit.

    ``idempotence=False`` skips applying the pass a second time (``idempotent`` is
    then None): for a pipeline, where running FuseOps twice is no question of
    correctness. ``unchanged=False`` builds and runs nothing where the pass changed
    nothing (``baseline`` and ``folded`` are then None): the folded program would be the
    unfolded one, so only TVM's own lowering could be judged, at the price of a
    compilation per structure. ``baseline_needed``: asked with the folded outputs whether
    the unfolded program must run too; where it answers False, ``baseline`` is None and
    ``baseline_skipped`` True (the oracle's :func:`fuzz.oracle.verdict.within_bound`: the folded
    outputs alone show no bug, so only TVM's lowering could be judged, at the price of a
    second compilation per structure and a second run per value set).

    Raises :class:`fuzz.backends.tvm.build.ModuleError` if TVM rejects the case itself (no pass
    involved); every later TVM exception becomes a :class:`Failure`.
    """
    inputs: Sequence[Any]
    run: Runner
    if runner is None:
        before = build_module(case)
        run, inputs = compile_and_run, runtime_inputs(case)
        program: tuple[tvm.IRModule, Sequence[Any]] = (before, inputs)
    else:
        before = bound_module(case)
        run, inputs = runner, runtime_tensors(case)
        program = unfolded_program(case)

    start = time.perf_counter()
    try:
        after = make_pass()(_shallow_copy(before))
    except Exception as exc:  # judged from the exception alone: nothing is built
        return Execution(
            baseline=None,
            folded=Failure.from_exception(Stage.PASS, exc),
            changed=False,
            fired=False,
            idempotent=None,
            pass_seconds=time.perf_counter() - start,
            build_seconds=0.0,
        )
    pass_seconds = time.perf_counter() - start

    changed = not structural_equal(before, after)
    counts = (count_ops(before), count_ops(after))
    fired = changed and counts[1]["batch_norm"] < counts[0]["batch_norm"]
    if not changed and not unchanged:
        return Execution(None, None, False, False, True, pass_seconds, 0.0, counts)

    folded: Outputs | Failure
    # A compile cache checks well-formedness once per structure (it is structural; an
    # ill-formed structure is never cached, so it is checked every time).
    cache = getattr(run, "__self__", None)
    checked_run = getattr(cache, "run_well_formed", None)
    if checked_run is not None:
        folded, folded_seconds = checked_run(after, inputs)
    else:
        try:
            assert_well_formed(after)
        except Exception as exc:
            folded, folded_seconds = Failure.from_exception(Stage.WELL_FORMED, exc), 0.0
        else:
            folded, folded_seconds = run(after, inputs)
    idempotent = _idempotent(make_pass, after) if idempotence else None
    if isinstance(folded, Failure) and folded.stage is Stage.WELL_FORMED:
        # judged from the IR alone: the unfolded program need not be built
        return Execution(None, folded, changed, fired, idempotent, pass_seconds, folded_seconds, counts)
    if baseline_needed is not None and isinstance(folded, Outputs) and not baseline_needed(folded):
        return Execution(
            None,
            folded,
            changed,
            fired,
            idempotent,
            pass_seconds,
            folded_seconds,
            counts,
            baseline_skipped=True,
        )
    baseline, baseline_seconds = run(*program)
    return Execution(
        baseline=baseline,
        folded=folded,
        changed=changed,
        fired=fired,
        idempotent=idempotent,
        pass_seconds=pass_seconds,
        build_seconds=baseline_seconds + folded_seconds,
        op_counts=counts,
    )
