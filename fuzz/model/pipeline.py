"""Pipelines: the pass under test among its neighbours, as plain data.

A :class:`Pipeline` names a sequence of passes from :data:`NEIGHBOURS` (BN-relevant
Relax passes, each with fixed arguments) and ``"fold"`` (the pass under test), the
``PassContext`` opt level, and how the passes are applied: as one
``tvm.transform.Sequential`` or as direct calls, one after the other. It is plain,
JSON-able data, so a pipeline shrinks with Hypothesis, travels to a worker process and
is stored in a finding.

:mod:`fuzz.backends.tvm.pipeline` applies one to a module (and names the passes a
``Sequential`` skips by TVM's documented opt-level gating).

What the oracle may not expect of a pipeline (see :func:`fuzz.engine.campaign.check`): a
pipeline may remove batch_norm legitimately (``DecomposeOpsForInference``,
``LegalizeOps``), so "must not fold" and idempotence are not judged, and
``ToMixedPrecision`` computes in float16 on purpose, so its numbers are not judged
against a float32 bound (only that it runs, and keeps output shapes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fuzz.errors import BnfuzzError

__all__ = [
    "DEFAULT_PIPELINE",
    "FOLD",
    "MIXED_PRECISION",
    "NEIGHBOURS",
    "Pipeline",
    "PipelineError",
    "pipeline_from_json",
    "pipeline_to_json",
]

#: The name that stands for the pass under test in a pipeline.
FOLD = "fold"

#: The BN-relevant Relax passes a pipeline draws from, with the arguments they get,
#: as the Python a reproducer script writes (``relax.transform`` in scope).
NEIGHBOURS: Mapping[str, str] = {
    "FoldConstant": "relax.transform.FoldConstant()",
    "ConvertLayout(NHWC,OHWI)": 'relax.transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", "OHWI"]})',
    "ConvertLayout(NHWC,HWIO)": 'relax.transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", "HWIO"]})',
    "ConvertLayout(NCHW,OIHW)": 'relax.transform.ConvertLayout({"relax.nn.conv2d": ["NCHW", "OIHW"]})',
    "DecomposeOpsForInference": "relax.transform.DecomposeOpsForInference()",
    "LegalizeOps": "relax.transform.LegalizeOps()",
    "CanonicalizeBindings": "relax.transform.CanonicalizeBindings()",
    "DeadCodeElimination": "relax.transform.DeadCodeElimination()",
    "EliminateCommonSubexpr": "relax.transform.EliminateCommonSubexpr()",
    "ToMixedPrecision": "relax.transform.ToMixedPrecision()",
    "FuseOps": "relax.transform.FuseOps()",
    "FuseTIR": "relax.transform.FuseTIR()",
    "Normalize": "relax.transform.Normalize()",
}

MIXED_PRECISION = "ToMixedPrecision"


class PipelineError(BnfuzzError, ValueError):
    """A pipeline that cannot be read: names the field."""


@dataclass(frozen=True)
class Pipeline:
    """Passes (names from :data:`NEIGHBOURS`, or :data:`FOLD`), opt level, and mode."""

    passes: tuple[str, ...]
    opt_level: int = 3
    sequential: bool = True

    def __post_init__(self) -> None:
        for name in self.passes:
            if name != FOLD and name not in NEIGHBOURS:
                raise PipelineError(
                    f"unknown pass {name!r}; expected {FOLD!r} or one of {', '.join(NEIGHBOURS)}",
                    field="passes",
                )
        if not 0 <= self.opt_level <= 4:
            raise PipelineError(f"must be 0 to 4, got {self.opt_level}", field="opt_level")

    @property
    def mixed_precision(self) -> bool:
        return MIXED_PRECISION in self.passes

    @property
    def label(self) -> str:
        """Short text for signatures: ``ConvertLayout(NHWC,OHWI)+fold``, then `` O1`` for an
        opt level other than 3 and `` direct`` for direct calls."""
        return (
            "+".join(self.passes)
            + (f" O{self.opt_level}" if self.opt_level != 3 else "")
            + ("" if self.sequential else " direct")
        )

    def contains(self, part: Pipeline) -> bool:
        """Whether ``part`` (a signature's shrunk pipeline) is a part of this pipeline: its
        passes in order (not necessarily adjacent), and its opt level and mode unless they
        are the defaults (a pipeline shrunk to opt level 3 as a Sequential does not need
        gating or direct calls)."""
        if part.opt_level != 3 and part.opt_level != self.opt_level:
            return False
        if not part.sequential and self.sequential:
            return False
        rest = iter(self.passes)
        return all(name in rest for name in part.passes)

    def __str__(self) -> str:
        return self.label


def pipeline_to_json(pipeline: Pipeline) -> dict[str, Any]:
    return {
        "passes": list(pipeline.passes),
        "opt_level": pipeline.opt_level,
        "sequential": pipeline.sequential,
    }


def pipeline_from_json(obj: Any) -> Pipeline:
    """Read a pipeline; raises :class:`PipelineError` naming the field."""
    if not isinstance(obj, dict):
        raise PipelineError("expected a JSON object")
    passes, opt_level, sequential = obj.get("passes"), obj.get("opt_level"), obj.get("sequential")
    if not isinstance(passes, list) or not all(isinstance(p, str) for p in passes):
        raise PipelineError("expected a list of pass names", field="passes")
    if not isinstance(opt_level, int) or isinstance(opt_level, bool):
        raise PipelineError("expected an integer", field="opt_level")
    if not isinstance(sequential, bool):
        raise PipelineError("expected true or false", field="sequential")
    return Pipeline(tuple(passes), opt_level, sequential)


#: What a pipeline shrinks to: the pass under test alone, every pass enabled, Sequential.
DEFAULT_PIPELINE = Pipeline((FOLD,))
