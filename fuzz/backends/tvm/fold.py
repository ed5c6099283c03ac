"""TVM Relax, the first backend: a pass (or a pipeline with the pass in it) on the llvm VM.

:class:`TvmFold` puts :mod:`fuzz.backends.tvm.passes` (names to pass factories),
:mod:`fuzz.backends.tvm.execute` (apply, check well-formedness, build, run),
:mod:`fuzz.backends.tvm.compile_cache` (compile once per structure) and
:mod:`fuzz.model.pipeline` (the pass among its neighbours) behind
:class:`fuzz.backends.Fold`.

``tvm:onnx`` is TVM users' ONNX path: a model imported with
``relax.frontend.onnx.from_onnx`` (its defaults: parameters bound as constants), then
``FoldBatchnormToConv2D`` (``tvm:onnx:fixed``: our pass). It draws ONNX cases only, written
in every way :class:`~fuzz.model.case.OnnxForm` has that the frontend imports: not BatchNormalization's
``spatial=0`` (the frontend rejects it), only 2-D Conv (the fold matches conv2d and the
case's Relax shapes are 2-D), and no overridden initializer (``from_onnx``
documents that without ``keep_params_in_input`` "parameters are treated as constant and folded
directly into the graph", so a value fed for one is not used, with or without the fold).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

import strategies
from fuzz.backends.tvm.build import build_module
from fuzz.backends.tvm.compat import structural_equal, tvm_version
from fuzz.backends.tvm.execute import execute
from fuzz.backends.tvm.passes import PassFactory, ResolvedPass, resolve_pass
from fuzz.backends.tvm.pipeline import PipelinePass
from fuzz.backends.tvm.pipeline import gated as gated_passes
from fuzz.errors import CaseOutsideBackend
from fuzz.model.case import ONNX_DTYPES, ONNX_TOPOLOGIES, Case
from fuzz.model.form import Importer
from fuzz.model.onnx_graph import min_ir_versions, newest_opset
from fuzz.model.pipeline import Pipeline
from fuzz.oracle.execution import Execution, Outputs
from strategies.onnx import onnx_forms

__all__ = ["TvmFold", "fold_of", "resolve"]


@dataclass(frozen=True)
class TvmFold:
    """A TVM pass factory as a :class:`fuzz.backends.Fold`."""

    name: str
    make: PassFactory
    complete_fold: bool = False
    framework: str = "tvm"
    #: draws ONNX cases only, imported by TVM's ONNX frontend (``tvm:onnx``)
    onnx_only: bool = False

    def __call__(self) -> Any:
        """A fresh pass (the fold is also its pass factory)."""
        return self.make()

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
        if case.form.importer is Importer.TORCH:
            raise CaseOutsideBackend(
                "TVM's passes take a Relax module or an ONNX model; a PyTorch module is not imported"
            )
        if pipeline is None:
            return execute(
                case,
                self.make,
                runner,
                idempotence=idempotence,
                unchanged=unchanged,
                baseline_needed=baseline_needed,
            )
        return execute(
            case,
            lambda: PipelinePass(pipeline, self.make),
            runner,
            idempotence=False,
            unchanged=unchanged,
            baseline_needed=baseline_needed,
        )

    def cases(self) -> SearchStrategy[Case]:
        if not self.onnx_only:
            return strategies.cases()
        forms = onnx_forms(
            max_opset=newest_opset(),
            min_ir_versions=min_ir_versions(),
            per_position=False,
            overridden=False,
            shapes=False,
        )
        return strategies.cases(
            importers=st.just(Importer.ONNX),
            topologies=st.sampled_from(ONNX_TOPOLOGIES),
            dtypes=st.sampled_from(ONNX_DTYPES),
            onnx_forms=forms,
        )

    def version(self) -> str:
        return tvm_version()

    def runner(self, directory: Any = None) -> Any:
        from fuzz.backends.tvm.compile_cache import CompileCache

        return CompileCache(directory=None if directory is None else Path(directory)).run

    def gated(self, pipeline: Pipeline) -> tuple[str, ...]:
        return gated_passes(pipeline, self.make)

    def sequential_mismatch(self, case: Case, pipeline: Pipeline) -> str | None:
        module = build_module(case)
        try:
            as_sequential = PipelinePass(pipeline, self.make, sequential=True)(module)
            as_calls = PipelinePass(pipeline, self.make, sequential=False)(module)
        except Exception as exc:  # one mode raised where the other did not
            return f"one mode raised {type(exc).__name__}"
        if structural_equal(as_sequential, as_calls):
            return None
        return "Sequential and direct calls of the same passes, every pass enabled, give different modules"


#: TVM users' ONNX path, and the passes it may end in (``tvm:onnx`` is ``tvm:onnx:upstream``).
ONNX_PATH = "tvm:onnx"


def resolve(name: str, *, complete_fold: bool | None = None) -> TvmFold:
    """The TVM fold named ``name`` (:func:`fuzz.backends.tvm.passes.resolve_pass`), or TVM's ONNX path
    ending in one (``tvm:onnx``, ``tvm:onnx:PASS``)."""
    if name == ONNX_PATH or name.startswith(ONNX_PATH + ":"):
        inner = name.removeprefix(ONNX_PATH).removeprefix(":") or "upstream"
        fold = fold_of(resolve_pass(inner, complete_fold=complete_fold))
        return replace(fold, name=name, onnx_only=True)
    return fold_of(resolve_pass(name, complete_fold=complete_fold))


def fold_of(make_pass: PassFactory) -> TvmFold:
    """A factory of TVM passes as a fold (named and claiming what a resolved pass says)."""
    if isinstance(make_pass, ResolvedPass):
        return TvmFold(make_pass.name, make_pass.make, make_pass.complete_fold)
    return TvmFold(getattr(make_pass, "__name__", "pass"), make_pass)
