"""ONNX Runtime, the second backend: its graph optimizer's Conv+BatchNormalization fusion;
and what every ONNX backend shares (:class:`OnnxFold`).

A case is written as an ONNX model (:func:`fuzz.model.onnx_graph.onnx_model`, the graph an
exporter writes) and run on the CPU execution provider. The unfolded run is the model with
``ORT_DISABLE_ALL``. For ONNX Runtime's own fold (:class:`OrtFold`) the folded run is the
same model at the level the fold names (``onnxruntime:basic``: ``ORT_ENABLE_BASIC``, where
``ConvBNFusion`` runs and which every ``InferenceSession`` uses by default; ``:extended``,
``:all``), and the optimized graph is read back (``optimized_model_filepath``) to count what
was fused; the model tools (:mod:`fuzz.backends.onnx_tools`) rewrite the model instead.

What a failure is: a session the runtime refuses, or a run that raises, is a finding of
the folded run only where the unfolded run of the same model succeeded; where the
unfolded run fails too, the runtime cannot run the case at all (float64 Conv has no CPU
kernel), and the case is outside this backend (:class:`RuntimeRejects`).

Imports ``onnx``, ``onnxruntime`` and NumPy, no TVM.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

import strategies
from fuzz.errors import CaseOutsideBackend, UsageError
from fuzz.fpenv import register_threads
from fuzz.model.case import ONNX_TOPOLOGIES, Case
from fuzz.model.form import Importer, OnnxForm
from fuzz.model.onnx_graph import min_ir_versions, newest_opset, onnx_graph, onnx_model
from fuzz.model.pipeline import Pipeline
from fuzz.oracle.execution import Execution, Failure, Outputs, Stage
from strategies.onnx import onnx_forms

__all__ = [
    "DISABLE_ALL",
    "DTYPES",
    "LEVELS",
    "OP_NAMES",
    "FoldFailed",
    "Folded",
    "OnnxFold",
    "OrtFold",
    "RuntimeRejects",
    "count_ops",
    "onnx_cases",
    "resolve",
    "session",
]

#: Fold names after ``onnxruntime:`` and the optimization level each runs at.
LEVELS: dict[str, Any] = {
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
#: The level of every unfolded run (and of a model tool's output).
DISABLE_ALL = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
#: Intra-op threads of every session: one, the calling thread, so every run gives the same
#: bits and the kernels obey the flush settings the check pins (fuzz.fpenv).
THREADS = 1
register_threads("onnxruntime", lambda: THREADS)
#: The dtypes the CPU execution provider has a Conv for (no float64 Conv kernel; float16
#: runs through inserted casts to float32).
DTYPES = ("float32", "float16")
#: ONNX operator -> the name :func:`fuzz.oracle.verdict` counts it by (as Relax names them).
OP_NAMES = {
    "Conv": "conv2d",
    "FusedConv": "conv2d",
    "BatchNormalization": "batch_norm",
    "Add": "add",
    "Mul": "multiply",
    "Sub": "subtract",
    "Div": "divide",
    "Sqrt": "sqrt",
}


class RuntimeRejects(CaseOutsideBackend):
    """ONNX Runtime cannot run the case even unfolded: the case is outside this backend."""


@dataclass(frozen=True)
class Folded:
    """What a fold gave: something that runs (``run(None, feeds)`` -> arrays, as an ONNX Runtime
    session does), and the ONNX model it wrote (to count its operators, read its inputs), or
    None where the fold compiles the model and writes none (then ``fired`` says whether the
    compiled graph lost its batch norms)."""

    runnable: Any
    model: Any = None
    fired: bool = False
    #: where no model is written: the names of the compiled model's inputs, and its inputs
    #: and outputs before and after described where they differ
    inputs: tuple[str, ...] = ()
    interface: tuple[str, str] | None = None


class FoldFailed(Exception):
    """The fold failed at ``stage`` (the pass itself, or the model it wrote)."""

    def __init__(self, stage: Stage, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.stage = stage
        self.cause = cause


def count_ops(model: Any) -> dict[str, int]:
    """How many nodes of each counted operator the model's graph has (see :data:`OP_NAMES`)."""
    counts = dict.fromkeys(dict.fromkeys(OP_NAMES.values()), 0)
    for node in model.graph.node:
        if node.op_type in OP_NAMES:
            counts[OP_NAMES[node.op_type]] += 1
    return counts


def session(model: bytes, level: Any, optimized: Path | None = None) -> Any:
    """An ``InferenceSession`` on the CPU provider at ``level``, one thread (the same bits
    every run), errors only in its log; ``optimized``: where to write the optimized model."""
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.intra_op_num_threads = THREADS
    options.log_severity_level = 4  # fatal only: a failure comes back as an exception
    if optimized is not None:
        options.optimized_model_filepath = str(optimized)
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


#: per output, (the model's shape, the case's shape)
Shapes = tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]


def _run(runnable: Any, feeds: dict[str, np.ndarray[Any, Any]], shapes: Shapes) -> Outputs | Failure:
    """The outputs, read back in the case's shapes where they have the model's (a 1-D or 3-D
    model's have another rank: the same values in the same order; any other shape is left
    as it is, for the oracle to see); a failure where the run raises."""
    try:
        results = runnable.run(None, feeds)
    except Exception as exc:
        return Failure.from_exception(Stage.RUN, exc)
    arrays = [np.asarray(r) for r in results]
    if len(arrays) == len(shapes):
        pairs = zip(arrays, shapes, strict=True)
        arrays = [a.reshape(case) if a.shape == model else a for a, (model, case) in pairs]
    return Outputs.of_arrays(arrays)


def _unfolded(data: bytes, feeds: dict[str, np.ndarray[Any, Any]], shapes: Shapes) -> Outputs:
    try:
        unfolded = session(data, DISABLE_ALL)
    except Exception as exc:
        raise RuntimeRejects(f"ONNX Runtime refuses the unfolded model: {exc}") from None
    outputs = _run(unfolded, feeds, shapes)
    if isinstance(outputs, Failure):
        raise RuntimeRejects(f"ONNX Runtime cannot run the unfolded model: {outputs.message}")
    return outputs


@dataclass(frozen=True)
class OnnxFold:
    """What every ONNX backend shares: the case as a model, the unfolded run, the cases
    drawn, the judgement's facts. A backend says how it folds (:meth:`fold`)."""

    name: str
    framework: str
    complete_fold: bool = False

    def fold(self, model: Any, folder: Path) -> Folded:
        """The fold of ``model`` (a ModelProto of its own, which a tool might change), in
        ``folder`` (a temporary directory); :class:`FoldFailed` where the fold or its model
        fails."""
        raise NotImplementedError

    def interface(self, given: Any, written: Any) -> tuple[str, str] | None:
        """The model's inputs and outputs before and after the fold, where the fold's
        output is the product and they differ (see :class:`fuzz.oracle.execution.Execution`)."""
        return None

    def execute(
        self,
        case: Case,
        runner: Any = None,
        *,
        pipeline: Pipeline | None = None,
        idempotence: bool = True,
        unchanged: bool = True,
        baseline_needed: Callable[[Outputs], bool] | None = None,
    ) -> Execution:
        """Run ``case`` unfolded and folded (see the module docstring). ``idempotence`` does
        not apply (each fold runs once); ``unchanged=False`` runs nothing where the fold left
        the graph's operators as they were."""
        if pipeline is not None:
            raise CaseOutsideBackend("pipelines are TVM's: --pipelines needs a TVM pass")
        if case.form.importer is not Importer.ONNX:
            raise RuntimeRejects(f"{self.framework} takes a case of the ONNX form only")
        model = onnx_model(case)
        data = model.SerializeToString()
        graph = onnx_graph(case)
        feeds = {name: tensor.numpy() for name, tensor in graph.feeds.items()}
        shapes = tuple(zip((s for _, _, s in graph.outputs), graph.case_shapes, strict=True))
        before = count_ops(model)
        given = onnx.ModelProto()
        given.CopyFrom(model)
        with tempfile.TemporaryDirectory(prefix="bnfuzz-onnx-") as folder:
            start = time.perf_counter()
            try:
                done = self.fold(given, Path(folder))
            except FoldFailed as failed:
                _unfolded(data, feeds, shapes)  # raises RuntimeRejects where that fails too
                failure = Failure.from_exception(failed.stage, failed.cause)
                return Execution(None, failure, False, False, None, time.perf_counter() - start, 0.0)
            pass_seconds = time.perf_counter() - start
        written = done.model
        counts: tuple[dict[str, int], dict[str, int]] | None = None
        interface = None
        if written is None:  # compiled: nothing to read back but its inputs and batch norms
            changed, fired, interface = True, done.fired, done.interface
            feeds_after = {k: v for k, v in feeds.items() if k in done.inputs}
        else:
            after = count_ops(written)
            changed = [n.op_type for n in model.graph.node] != [n.op_type for n in written.graph.node]
            fired = after["batch_norm"] < before["batch_norm"]
            counts = (before, after)
            interface = self.interface(model, written)
            # the inputs the folded model still has are fed as before (one it lost is not)
            names = {i.name for i in written.graph.input}
            feeds_after = {k: v for k, v in feeds.items() if k in names}
        mutated = given.SerializeToString() != data
        if not changed and not unchanged and interface is None and not mutated:
            return Execution(None, None, False, False, None, pass_seconds, 0.0, counts)
        start = time.perf_counter()
        folded = _run(done.runnable, feeds_after, shapes)
        if baseline_needed is not None and isinstance(folded, Outputs) and not baseline_needed(folded):
            seconds = time.perf_counter() - start
            return Execution(
                None, folded, changed, fired, None, pass_seconds, seconds, counts, True, interface, mutated
            )
        baseline = _unfolded(data, feeds, shapes)
        seconds = time.perf_counter() - start
        return Execution(
            baseline, folded, changed, fired, None, pass_seconds, seconds, counts, False, interface, mutated
        )

    def cases(self) -> SearchStrategy[Case]:
        """Cases ONNX says and the CPU provider runs (:func:`onnx_cases`), written in every way
        :class:`~fuzz.model.case.OnnxForm` has."""
        return onnx_cases(onnx_forms(max_opset=newest_opset(), min_ir_versions=min_ir_versions()))

    def version(self) -> str:
        return str(ort.__version__)

    def runner(self, directory: Any = None) -> None:
        return None  # a session per value set: creating one costs milliseconds

    def gated(self, pipeline: Pipeline) -> tuple[str, ...]:
        return ()

    def sequential_mismatch(self, case: Case, pipeline: Pipeline) -> str | None:
        return None


def onnx_cases(forms: SearchStrategy[OnnxForm]) -> SearchStrategy[Case]:
    """Cases ONNX says and the CPU provider runs, written as ``forms`` draws: the ONNX form,
    its topologies, float32 and float16, inference mode (on a training-mode BatchNormalization,
    ONNX Runtime's optimization levels disagree where nothing is fused: docs/backends.md)."""
    return strategies.cases(
        importers=st.just(Importer.ONNX),
        topologies=st.sampled_from(ONNX_TOPOLOGIES),
        dtypes=st.sampled_from(DTYPES),
        trainings=st.just(False),
        onnx_forms=forms,
    )


@dataclass(frozen=True)
class OrtFold(OnnxFold):
    """ONNX Runtime's graph optimizer at one level, as a :class:`fuzz.backends.Fold`."""

    level: Any = None

    def fold(self, model: Any, folder: Path) -> Folded:
        try:
            folded = session(model.SerializeToString(), self.level, folder / "optimized.onnx")
        except Exception as exc:
            raise FoldFailed(Stage.PASS, exc) from None
        return Folded(folded, onnx.load(str(folder / "optimized.onnx")))


def resolve(name: str, *, complete_fold: bool | None = None) -> OrtFold:
    """``onnxruntime:LEVEL`` as a fold; an unknown level is a :class:`fuzz.errors.UsageError`."""
    level = name.partition(":")[2]
    if level not in LEVELS:
        raise UsageError(
            f"unknown fold {name!r}: ONNX Runtime's levels are "
            + ", ".join(f"onnxruntime:{lv}" for lv in LEVELS)
        )
    return OrtFold(name=name, framework="onnxruntime", complete_fold=bool(complete_fold), level=LEVELS[level])
