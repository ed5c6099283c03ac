"""A pipeline (:class:`fuzz.model.pipeline.Pipeline`) as one TVM pass.

:class:`PipelinePass` applies a pipeline to a module, with a given pass factory standing
in for ``"fold"``. :func:`gated` names the passes a ``Sequential`` skips at the
pipeline's opt level (a pass whose own opt level is higher); direct calls run them
anyway. That is TVM's documented gating, recorded as an event, never as a bug.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import relax

from fuzz.backends.tvm.passes import PassFactory
from fuzz.model.pipeline import FOLD, NEIGHBOURS, Pipeline

__all__ = ["PipelinePass", "gated"]


def _neighbour(name: str) -> Any:
    """A fresh instance of the neighbour pass ``name``, made from its script source."""
    return eval(NEIGHBOURS[name], {"relax": relax})


def _instances(pipeline: Pipeline, make_pass: PassFactory) -> list[Any]:
    return [make_pass() if name == FOLD else _neighbour(name) for name in pipeline.passes]


def gated(pipeline: Pipeline, make_pass: PassFactory) -> tuple[str, ...]:
    """The passes a ``Sequential`` at the pipeline's opt level skips (none in direct mode)."""
    if not pipeline.sequential:
        return ()
    return tuple(
        name
        for name, p in zip(pipeline.passes, _instances(pipeline, make_pass), strict=True)
        if p.info.opt_level > pipeline.opt_level
    )


class PipelinePass:
    """A pipeline as one callable pass: ``PipelinePass(pipeline, make_pass)(mod)``."""

    def __init__(self, pipeline: Pipeline, make_pass: PassFactory, *, sequential: bool | None = None) -> None:
        self.pipeline = pipeline
        self.make_pass = make_pass
        self.sequential = pipeline.sequential if sequential is None else sequential

    def __call__(self, mod: Any) -> Any:
        passes = _instances(self.pipeline, self.make_pass)
        with tvm.transform.PassContext(opt_level=self.pipeline.opt_level):
            if self.sequential:
                return tvm.transform.Sequential(passes)(mod)
            for p in passes:
                mod = p(mod)
            return mod
