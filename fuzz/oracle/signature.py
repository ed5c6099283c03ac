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
unless it is the pass under test alone (:data:`fuzz.model.pipeline.DEFAULT_PIPELINE`):
``out-of-tolerance[pipeline=ConvertLayout(NHWC,OHWI)+fold]``. It covers a later
pipeline that runs those passes in that order, among others.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuzz.model.attributes import ATTRIBUTE_DEFAULTS, classify
from fuzz.model.case import Case
from fuzz.model.pipeline import DEFAULT_PIPELINE, Pipeline
from fuzz.oracle.verdict import Finding, Symptom

__all__ = ["Signature"]


@dataclass(frozen=True)
class Signature:
    symptom: Symptom
    error_type: str
    #: the case's attributes that differ from the defaults
    essentials: tuple[tuple[str, str], ...]
    #: the shrunk pipeline, or None: the pass under test alone
    pipeline: Pipeline | None = None
    #: what the signature begins with: the backend, or the fold where each of a backend's
    #: folds is its own code (:meth:`fuzz.backends.Backend.scope`), "" for TVM's passes; a
    #: bug of one scope is never another's
    scope: str = ""

    @classmethod
    def of(cls, finding: Finding, case: Case, pipeline: Pipeline | None = None, scope: str = "") -> Signature:
        attrs = _attributes(case, scope)
        essentials = tuple((k, v) for k, v in attrs.items() if ATTRIBUTE_DEFAULTS[k] != v)
        shrunk = None if pipeline is None or pipeline == DEFAULT_PIPELINE else pipeline
        return cls(finding.symptom, finding.error_type, essentials, shrunk, scope)

    @property
    def key(self) -> tuple[Symptom, str]:
        return (self.symptom, self.error_type)

    def covers(self, finding: Finding, case: Case, pipeline: Pipeline | None = None) -> bool:
        if (finding.symptom, finding.error_type) != self.key:
            return False
        attrs = _attributes(case, self.scope)
        if not self.essentials and self.pipeline is None:
            default_pipeline = pipeline is None or pipeline == DEFAULT_PIPELINE
            return default_pipeline and all(ATTRIBUTE_DEFAULTS[k] == v for k, v in attrs.items())
        if self.pipeline is not None and (pipeline is None or not pipeline.contains(self.pipeline)):
            return False
        return all(attrs[k] == v for k, v in self.essentials)

    def __str__(self) -> str:
        head = f"{self.scope}:" if self.scope else ""
        head += self.symptom.value + (f":{self.error_type}" if self.error_type else "")
        shown = self.essentials + ((("pipeline", self.pipeline.label),) if self.pipeline else ())
        if shown:
            head += "[" + ",".join(f"{k}={v}" for k, v in shown) + "]"
        return head


def _attributes(case: Case, scope: str) -> dict[str, str]:
    """The classifying attributes that tell bugs apart in ``scope``: all of them for TVM's
    passes (""); for another backend, whose cases all have its one form, all but the form."""
    attrs = classify(case)
    if scope:
        attrs = {k: v for k, v in attrs.items() if k != "form"}
    return attrs
