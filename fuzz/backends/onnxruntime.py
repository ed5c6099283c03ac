"""ONNX Runtime, the second backend: its graph optimizer's Conv+BatchNormalization fusion.

A case is written as an ONNX model (:func:`fuzz.onnx_graph.onnx_model`, the graph an
exporter writes) and run twice on the CPU execution provider: unfolded, with
``ORT_DISABLE_ALL``, and folded, at the level the fold names (``onnxruntime:basic``:
``ORT_ENABLE_BASIC``, where ``ConvBNFusion`` runs and which every ``InferenceSession``
uses by default; ``:extended``, ``:all``). The optimized graph is read back
(``optimized_model_filepath``) to count what was fused.

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
from fuzz.case import ONNX_TOPOLOGIES, Case, Importer
from fuzz.errors import BnfuzzError, UsageError
from fuzz.onnx_graph import onnx_graph, onnx_model
from fuzz.pipeline import Pipeline
from fuzz.program import named_tensors
from fuzz.results import Execution, Failure, Outputs, Stage

__all__ = ["DTYPES", "LEVELS", "OP_NAMES", "OrtFold", "RuntimeRejects", "count_ops", "resolve"]

#: Fold names after ``onnxruntime:`` and the optimization level each runs at.
LEVELS: dict[str, Any] = {
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
#: The dtypes the CPU execution provider has a Conv for (no float64 Conv kernel; float16
#: runs through inserted casts to float32).
DTYPES = ("float32", "float16")
#: ONNX operator -> the name :func:`fuzz.oracle` counts it by (as Relax names them).
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


class RuntimeRejects(BnfuzzError, ValueError):
    """ONNX Runtime cannot run the case even unfolded: the case is outside this backend."""


def count_ops(model: Any) -> dict[str, int]:
    """How many nodes of each counted operator the model's graph has (see :data:`OP_NAMES`)."""
    counts = dict.fromkeys(dict.fromkeys(OP_NAMES.values()), 0)
    for node in model.graph.node:
        if node.op_type in OP_NAMES:
            counts[OP_NAMES[node.op_type]] += 1
    return counts


def _session(model: bytes, level: Any, optimized: Path | None) -> Any:
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.intra_op_num_threads = 1  # one thread: the same bits every run
    options.log_severity_level = 3  # errors only
    if optimized is not None:
        options.optimized_model_filepath = str(optimized)
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _run(session: Any, feeds: dict[str, np.ndarray[Any, Any]]) -> Outputs | Failure:
    try:
        results = session.run(None, feeds)
    except Exception as exc:
        return Failure.from_exception(Stage.RUN, exc)
    arrays = [np.asarray(r) for r in results]
    return Outputs(
        values=tuple(a.astype(np.float64) for a in arrays),
        dtypes=tuple(str(a.dtype) for a in arrays),
        shapes=tuple(tuple(int(d) for d in a.shape) for a in arrays),
    )


@dataclass(frozen=True)
class OrtFold:
    """ONNX Runtime's graph optimizer at one level, as a :class:`fuzz.backends.Fold`."""

    name: str
    level: Any
    complete_fold: bool = False
    backend: str = "onnxruntime"

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
        not apply (the optimizer runs once per session); ``unchanged=False`` runs nothing
        where the optimizer left the graph's operators as they were."""
        if pipeline is not None:
            raise UsageError("pipelines are TVM's: --pipelines needs a TVM pass")
        if case.form.importer is not Importer.ONNX:
            raise RuntimeRejects("ONNX Runtime takes a case of the ONNX form only")
        model = onnx_model(case)
        data = model.SerializeToString()
        tensors = named_tensors(case)
        feeds = {name: tensors[name].numpy() for name, _, _ in onnx_graph(case).inputs}
        before = count_ops(model)
        with tempfile.TemporaryDirectory(prefix="bnfuzz-ort-") as folder:
            start = time.perf_counter()
            try:
                folded_session = _session(data, self.level, Path(folder) / "optimized.onnx")
            except Exception as exc:
                self._unfolded(data, feeds)  # raises RuntimeRejects where that fails too
                failure = Failure.from_exception(Stage.PASS, exc)
                return Execution(None, failure, False, False, None, time.perf_counter() - start, 0.0)
            pass_seconds = time.perf_counter() - start
            optimized = onnx.load(str(Path(folder) / "optimized.onnx"))
        after = count_ops(optimized)
        ops = ([n.op_type for n in model.graph.node], [n.op_type for n in optimized.graph.node])
        changed = ops[0] != ops[1]
        fired = after["batch_norm"] < before["batch_norm"]
        counts = (before, after)
        if not changed and not unchanged:
            return Execution(None, None, False, False, None, pass_seconds, 0.0, counts)
        start = time.perf_counter()
        folded = _run(folded_session, feeds)
        if baseline_needed is not None and isinstance(folded, Outputs) and not baseline_needed(folded):
            seconds = time.perf_counter() - start
            return Execution(None, folded, changed, fired, None, pass_seconds, seconds, counts, True)
        baseline = self._unfolded(data, feeds)
        seconds = time.perf_counter() - start
        return Execution(baseline, folded, changed, fired, None, pass_seconds, seconds, counts)

    def _unfolded(self, data: bytes, feeds: dict[str, np.ndarray[Any, Any]]) -> Outputs:
        try:
            session = _session(data, ort.GraphOptimizationLevel.ORT_DISABLE_ALL, None)
        except Exception as exc:
            raise RuntimeRejects(f"ONNX Runtime refuses the unfolded model: {exc}") from None
        outputs = _run(session, feeds)
        if isinstance(outputs, Failure):
            raise RuntimeRejects(f"ONNX Runtime cannot run the unfolded model: {outputs.message}")
        return outputs

    def cases(self) -> SearchStrategy[Case]:
        """Cases ONNX says and the CPU provider runs: the ONNX form, its topologies, float32
        and float16, inference mode (a training-mode BatchNormalization has other outputs)."""
        return strategies.cases(
            importers=st.just(Importer.ONNX),
            topologies=st.sampled_from(ONNX_TOPOLOGIES),
            dtypes=st.sampled_from(DTYPES),
            trainings=st.just(False),
        )

    def version(self) -> str:
        return str(ort.__version__)

    def runner(self, directory: Any = None) -> None:
        return None  # a session per value set: creating one costs milliseconds

    def gated(self, pipeline: Pipeline) -> tuple[str, ...]:
        return ()

    def sequential_mismatch(self, case: Case, pipeline: Pipeline) -> str | None:
        return None


def resolve(name: str, *, complete_fold: bool | None = None) -> OrtFold:
    """``onnxruntime:LEVEL`` as a fold; an unknown level is a :class:`fuzz.errors.UsageError`."""
    level = name.partition(":")[2]
    if level not in LEVELS:
        raise UsageError(
            f"unknown fold {name!r}: ONNX Runtime's levels are "
            + ", ".join(f"onnxruntime:{lv}" for lv in LEVELS)
        )
    return OrtFold(name, LEVELS[level], bool(complete_fold))
