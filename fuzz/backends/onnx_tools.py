"""The ONNX model tools, as backends: onnxoptimizer, onnxslim and onnxsim (the table is
:data:`fuzz.backends.MODEL_TOOLS`), each called as its users call it (the documented
default), the model it writes run on ONNX Runtime with every graph optimization off,
against the model it was given run the same way: what differs is the tool's rewrite alone.

A tool that raises on a model ONNX Runtime runs is a finding at the ``pass`` stage; a model
it writes that ONNX Runtime refuses, at ``build``. What a tool prints, and NumPy's overflow
warnings from its constant arithmetic, are not shown.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
from hypothesis.strategies import SearchStrategy

from fuzz.backends import MODEL_TOOLS, BackendMissing, ModelTool
from fuzz.backends.onnxruntime import DISABLE_ALL, Folded, FoldFailed, OnnxFold, onnx_cases, session
from fuzz.model.case import Case
from fuzz.model.onnx_graph import caller_inputs, min_ir_versions, newest_opset
from fuzz.oracle.execution import Stage
from strategies.onnx import onnx_forms

__all__ = ["ToolFold", "resolve"]


@dataclass(frozen=True)
class ToolFold(OnnxFold):
    """A model tool as a :class:`fuzz.backends.Fold`."""

    tool: ModelTool | None = None
    module: Any = None

    def fold(self, model: Any, folder: Path) -> Folded:
        assert self.tool is not None
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                # the call exactly as the reproducer script writes it
                written = eval(self.tool.call, {self.tool.module: self.module, "model": model})
        except Exception as exc:
            raise FoldFailed(Stage.PASS, exc) from None
        try:
            onnx.checker.check_model(written, full_check=True)
        except Exception as exc:
            raise FoldFailed(Stage.WELL_FORMED, exc) from None
        try:
            folded = session(written.SerializeToString(), DISABLE_ALL)
        except Exception as exc:
            raise FoldFailed(Stage.BUILD, exc) from None
        return Folded(folded, written)

    def interface(self, given: Any, written: Any) -> tuple[str, str] | None:
        # judged by the given model's IR version: below 4, initializers are no caller's inputs
        before, after = _interface(given, given.ir_version), _interface(written, given.ir_version)
        return None if before == after else (before, after)

    def cases(self) -> SearchStrategy[Case]:
        """:meth:`OnnxFold.cases`, without the cases that show what the tool documents (onnxsim:
        initializers also listed as inputs are constants to it)."""
        assert self.tool is not None
        if "initializers" not in self.tool.documented:
            return super().cases()
        forms = onnx_forms(
            max_opset=newest_opset(),
            min_ir_versions=min_ir_versions(),
            overridden=False,
            initializer_inputs=False,
        )
        return onnx_cases(forms)

    def version(self) -> str:
        return str(getattr(self.module, "__version__", "unknown")).removeprefix("v")


def _interface(model: Any, ir_version: int) -> str:
    """A model's graph inputs a caller may feed (:func:`fuzz.model.onnx_graph.caller_inputs`, at
    ``ir_version``) and its outputs: ``inputs [x: float32[1, 1, 3, 3]] outputs [...]``."""

    def typed(values: Any) -> str:
        out = []
        for v in values:
            t = v.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in t.shape.dim]
            out.append(f"{v.name}: {onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)}{dims}")
        return "[" + ", ".join(out) + "]"

    return f"inputs {typed(caller_inputs(model, ir_version))} outputs {typed(model.graph.output)}"


def resolve(name: str, *, complete_fold: bool | None = None) -> ToolFold:
    """The tool named ``name`` as a fold; :class:`fuzz.backends.BackendMissing` if it is not
    installed."""
    tool = MODEL_TOOLS[name]
    try:
        module = importlib.import_module(tool.module)
    except ImportError:
        raise BackendMissing(
            f"the {name} backend needs {tool.module!r}, which is not installed: "
            "pip install -e '.[onnx-tools]' (or `make setup`) installs it"
        ) from None
    return ToolFold(name=name, framework=name, complete_fold=bool(complete_fold), tool=tool, module=module)
