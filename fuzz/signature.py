"""Signatures: what makes two findings the same bug.

A :class:`Signature` is the primary symptom (plus the exception type for
crashes) and the *essential attributes* of the shrunk case: the attributes that
differ from the simplest graph (float32, NCHW, OIHW, channel axis, scale and
center on, inference, one group, conv-bn, all operands constant, no conv bias, no
epilogue, written by the Relax builder in its default form). Hypothesis
shrinks every attribute that does not matter back to its default, so what is
left names the trigger: ``out-of-tolerance[scale=False]``,
``pass-exception:AttributeError[kernel_layout=IOHW]``, ``finite-to-nonfinite``.

A later failing case is *covered* by a known signature when it has the same
symptom and all of that signature's essential attributes; a signature with no
essential attributes covers only cases whose attributes are all default, so an
early value-only finding cannot mask the attribute-triggered ones.

In a pipeline campaign the shrunk pipeline is one more attribute, ``pipeline``, essential
unless it is the pass under test alone (:data:`fuzz.pipeline.DEFAULT_PIPELINE`):
``out-of-tolerance[pipeline=ConvertLayout(NHWC,OHWI)+fold]``. It covers a later
pipeline that runs those passes in that order, among others.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fuzz.case import Case
from fuzz.oracle import Finding
from fuzz.pipeline import DEFAULT_PIPELINE, Pipeline

__all__ = ["DEFAULTS", "Signature", "classify"]

#: The simplest graph's classifying attributes; Hypothesis shrinks toward these.
DEFAULTS: Mapping[str, str] = {
    "topology": "conv-bn",
    "dtype": "float32",
    "out_dtype": "same",
    "data_layout": "NCHW",
    "kernel_layout": "OIHW",
    "axis": "channel",
    "center": "True",
    "scale": "True",
    "training": "False",
    "groups": "1",
    "operands": "constants",
    "bias": "none",
    "epilogue": "none",
    "form": "default",
}


def classify(case: Case) -> dict[str, str]:
    """The classifying attributes of a case, as strings (see :data:`DEFAULTS`).

    Over several blocks, an attribute takes the first non-default value any block has.
    """

    def first_unusual(values: list[str], default: str) -> str:
        return next((v for v in values if v != default), default)

    convs = [b.conv for b in case.blocks if b.conv is not None]
    axes = ["channel" if channel else "non-channel" for channel in case.channel_axes()]
    return {
        "topology": case.topology.value,
        "dtype": case.dtype,
        "out_dtype": first_unusual(
            [c.out_dtype if c.out_dtype and c.out_dtype != case.dtype else "same" for c in convs], "same"
        ),
        "data_layout": first_unusual([c.data_layout for c in convs], "NCHW"),
        "kernel_layout": first_unusual([c.kernel_layout for c in convs], "OIHW"),
        "axis": first_unusual(axes, "channel"),
        "center": str(all(b.bn.center for b in case.blocks)),
        "scale": str(all(b.bn.scale for b in case.blocks)),
        "training": str(any(b.bn.training for b in case.blocks)),
        "groups": first_unusual(["1" if c.groups == 1 else "grouped" for c in convs], "1"),
        "operands": "parameters" if case.parameters else "constants",
        "bias": "conv-bias" if any(b.bias is not None for b in case.blocks) else "none",
        "epilogue": case.epilogue.value,
        "form": case.form.label,
    }


@dataclass(frozen=True)
class Signature:
    symptom: str
    error_type: str
    essentials: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, finding: Finding, case: Case, pipeline: Pipeline | None = None) -> Signature:
        attrs = classify(case)
        essentials = tuple((k, v) for k, v in attrs.items() if DEFAULTS[k] != v)
        if pipeline is not None and pipeline != DEFAULT_PIPELINE:
            essentials += (("pipeline", pipeline.label),)
        return cls(finding.symptom.value, finding.error_type, essentials)

    @property
    def key(self) -> tuple[str, str]:
        return (self.symptom, self.error_type)

    def covers(self, finding: Finding, case: Case, pipeline: Pipeline | None = None) -> bool:
        if (finding.symptom.value, finding.error_type) != self.key:
            return False
        attrs = classify(case)
        if not self.essentials:
            default_pipeline = pipeline is None or pipeline == DEFAULT_PIPELINE
            return default_pipeline and all(DEFAULTS[k] == v for k, v in attrs.items())
        return all(
            (pipeline is not None and pipeline.covered_by(v)) if k == "pipeline" else attrs[k] == v
            for k, v in self.essentials
        )

    def __str__(self) -> str:
        head = self.symptom + (f":{self.error_type}" if self.error_type else "")
        if self.essentials:
            head += "[" + ",".join(f"{k}={v}" for k, v in self.essentials) + "]"
        return head
