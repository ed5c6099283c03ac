"""OpenVINO, as a backend: its CPU plugin folds a Conv+BatchNormalization while it compiles a
model (``BatchNormDecomposition`` turns the batch norm into a multiply and an add,
``ConvolutionMultiplyFusion`` folds the multiply into the weights).

OpenVINO has no mode that leaves the model unfolded, so the unfolded run is ONNX Runtime's
with every graph optimization off (:class:`fuzz.backends.onnxruntime.OnnxFold`), and the
folded run is the model compiled for the CPU the way its users compile it,
``core.compile_model(path, "CPU", CONFIG)``, with one setting beyond the defaults: the
inference precision is the model's (``INFERENCE_PRECISION_HINT: f32``). By default the CPU
plugin computes in bfloat16 where the CPU has bfloat16 instructions (this machine's
``core.get_property("CPU", "INFERENCE_PRECISION_HINT")`` says ``bf16``), a documented
precision trade, not a fold defect: every value set would be out of tolerance. One inference
thread: the same bits every run.

A compile that raises on a model ONNX Runtime runs is a finding at the ``pass`` stage. No
model is written, so no operator counts: whether the fold fired is read from the compiled
graph (no batch-norm or elementwise layer left), and must-not-fold is judged by the numbers.
The compiled model's input and output names are compared with the model's (``io-change``).

Imports ``openvino``, ``onnx`` and ``onnxruntime``; no TVM.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import openvino as ov

from fuzz.backends import OPENVINO_CONFIG
from fuzz.backends.onnxruntime import Folded, FoldFailed, OnnxFold
from fuzz.errors import UsageError
from fuzz.fpenv import register_threads
from fuzz.model.onnx_graph import caller_inputs
from fuzz.oracle.execution import Stage

__all__ = ["CONFIG", "OpenVinoFold", "resolve"]

#: The compile settings beyond OpenVINO's defaults (see the module docstring).
CONFIG = OPENVINO_CONFIG
register_threads("openvino", lambda: int(CONFIG["INFERENCE_NUM_THREADS"]))
#: Layer types of the compiled graph that mean a batch norm was not folded into its conv.
UNFOLDED_LAYERS = frozenset({"BatchNormalization", "BatchNormInference", "Eltwise", "MVN"})


class _Compiled:
    """A compiled model with ONNX Runtime's ``run(None, feeds)``."""

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled

    def run(self, _: None, feeds: dict[str, np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
        results = self.compiled(feeds)
        return [np.asarray(results[output]) for output in self.compiled.outputs]


@dataclass(frozen=True)
class OpenVinoFold(OnnxFold):
    """OpenVINO's CPU plugin as a :class:`fuzz.backends.Fold`."""

    core: Any = None

    def fold(self, model: Any, folder: Path) -> Folded:
        path = folder / "model.onnx"
        onnx.save(model, str(path))
        try:
            compiled = self.core.compile_model(str(path), "CPU", CONFIG)
        except Exception as exc:
            raise FoldFailed(Stage.PASS, exc) from None
        runtime = compiled.get_runtime_model().get_ordered_ops()
        layers = {op.get_rt_info()["layerType"].astype(str) for op in runtime}
        # a port has a set of names (a fused output may take its producer's too): the model's
        # name is the one that counts where the port has it
        given = [i.name for i in caller_inputs(model)], [o.name for o in model.graph.output]
        ports = [_name(p, given[0]) for p in compiled.inputs], [_name(p, given[1]) for p in compiled.outputs]
        inputs = tuple(ports[0])
        interface = None if ports == given else (_names(*given), _names(*ports))
        return Folded(_Compiled(compiled), None, not UNFOLDED_LAYERS & layers, inputs, interface)

    def version(self) -> str:
        return str(ov.__version__).split("-")[0]


def _name(port: Any, wanted: list[str]) -> str:
    names = port.get_names()
    return next((n for n in wanted if n in names), port.get_any_name())


def _names(inputs: list[str], outputs: list[str]) -> str:
    return f"inputs [{', '.join(inputs)}] outputs [{', '.join(outputs)}]"


def resolve(name: str, *, complete_fold: bool | None = None) -> OpenVinoFold:
    """``openvino`` as a fold; any other name of this backend is a :class:`UsageError`."""
    if name != "openvino":
        raise UsageError(f"unknown fold {name!r}: OpenVINO's is `openvino` (its CPU plugin)")
    return OpenVinoFold(name=name, framework="openvino", complete_fold=bool(complete_fold), core=ov.Core())
