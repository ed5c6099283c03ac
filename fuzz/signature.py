"""Signatures: what makes two findings the same bug.

A :class:`Signature` is the primary symptom (plus the exception type for
crashes) and the *essential attributes* of the shrunk case: the attributes that
differ from the simplest graph (float32, NCHW, OIHW, channel axis, scale and
center on, inference, one group, conv-bn, all operands constant). Hypothesis
shrinks every attribute that does not matter back to its default, so what is
left names the trigger: ``out-of-tolerance[scale=False]``,
``pass-exception:AttributeError[kernel_layout=IOHW]``, ``finite-to-nonfinite``.

A later failing case is *covered* by a known signature when it has the same
symptom and all of that signature's essential attributes; a signature with no
essential attributes covers only cases whose attributes are all default, so an
early value-only finding cannot mask the attribute-triggered ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fuzz.case import Case
from fuzz.oracle import Finding

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
}


def classify(case: Case) -> dict[str, str]:
    """The classifying attributes of a case, as strings (see :data:`DEFAULTS`)."""
    block = case.blocks[0]
    conv = block.conv
    ndim = len(case.data.shape)
    if conv is None:
        axis = "channel" if block.bn.axis % ndim == 1 else "non-channel"
    else:
        axis = "channel" if block.bn.axis % ndim == conv.channel_axis else "non-channel"
    return {
        "topology": case.topology.value,
        "dtype": case.dtype,
        "out_dtype": conv.out_dtype if conv and conv.out_dtype and conv.out_dtype != case.dtype else "same",
        "data_layout": conv.data_layout if conv else "NCHW",
        "kernel_layout": conv.kernel_layout if conv else "OIHW",
        "axis": axis,
        "center": str(all(b.bn.center for b in case.blocks)),
        "scale": str(all(b.bn.scale for b in case.blocks)),
        "training": str(any(b.bn.training for b in case.blocks)),
        "groups": "1" if conv is None or conv.groups == 1 else "grouped",
        "operands": "parameters" if case.parameters else "constants",
    }


@dataclass(frozen=True)
class Signature:
    symptom: str
    error_type: str
    essentials: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, finding: Finding, case: Case) -> Signature:
        attrs = classify(case)
        essentials = tuple((k, v) for k, v in attrs.items() if DEFAULTS[k] != v)
        return cls(finding.symptom.value, finding.error_type, essentials)

    @property
    def key(self) -> tuple[str, str]:
        return (self.symptom, self.error_type)

    def covers(self, finding: Finding, case: Case) -> bool:
        if (finding.symptom.value, finding.error_type) != self.key:
            return False
        attrs = classify(case)
        if not self.essentials:
            return all(DEFAULTS[k] == v for k, v in attrs.items())
        return all(attrs[k] == v for k, v in self.essentials)

    def __str__(self) -> str:
        head = self.symptom + (f":{self.error_type}" if self.error_type else "")
        if self.essentials:
            head += "[" + ",".join(f"{k}={v}" for k, v in self.essentials) + "]"
        return head
