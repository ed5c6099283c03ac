"""A campaign finding as a file: what ``bnfuzz run --out`` writes, ``promote`` and ``triage`` read.

One :class:`FindingRecord` type, one writer (:func:`write_finding`) and one reader
(:func:`read_finding`). The file is JSON with sorted keys; ``finding_schema`` is its
version (files written before it existed have none and read as version 0, the same
fields). Of two findings with one signature the one with the smaller case is the one
kept (:func:`smaller_wins`), in a findings folder and in the corpus alike: both are the
same bug, and the smaller case is the better reproducer.

Key idea: structure is stored as structure. A symptom is a :class:`Symptom`, a case a
:class:`Case`; nothing is recovered from a message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuzz.errors import BnfuzzError
from fuzz.model.case import Case
from fuzz.model.case_json import case_from_json, case_to_json
from fuzz.model.pipeline import Pipeline, PipelineError, pipeline_from_json, pipeline_to_json
from fuzz.model.tensor import CaseError
from fuzz.oracle.execution import Stage
from fuzz.oracle.verdict import Symptom
from fuzz.store.storage import file_name, write_atomic

__all__ = [
    "FINDING_SCHEMA",
    "FindingFileError",
    "FindingRecord",
    "finding_from_json",
    "finding_to_json",
    "read_finding",
    "smaller_wins",
    "write_finding",
]

FINDING_SCHEMA = 1


class FindingFileError(BnfuzzError, ValueError):
    """A file that is not a finding ``bnfuzz run --out`` wrote (or not a readable one)."""

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(f"not a finding written by bnfuzz run --out ({detail})", where=str(path))
        self.path = path


@dataclass(frozen=True)
class FindingRecord:
    """One distinct bug a campaign found: the shrunk case and what showed on it."""

    signature: str
    symptom: Symptom
    stage: Stage
    message: str
    case: Case
    pass_name: str
    error_type: str = ""
    #: what a worker process printed before it died (a crash), else ""
    stderr: str = ""
    pipeline: Pipeline | None = None
    seed: int | None = None
    tvm: str = ""
    #: seconds into the campaign of the first hit, and spent shrinking it
    first_seconds: float = 0.0
    shrink_seconds: float = 0.0
    #: how many value sets showed this bug
    hits: int = 1
    #: the case's classifying attributes (``fuzz.model.attributes.classify``)
    attributes: dict[str, Any] = field(default_factory=dict)
    #: the command that found it, where it is not ``bnfuzz run --pass P --seed S``
    found_by: str | None = None
    #: the machine it was found on: CPU, flush settings, threads (:func:`fuzz.fpenv.machine`)
    machine: dict[str, Any] = field(default_factory=dict)


def smaller_wins(kept: Case, new: Case) -> bool:
    """Whether ``new`` replaces ``kept`` as the case of one bug: only if it is smaller."""
    return new.size < kept.size


def finding_to_json(record: FindingRecord) -> dict[str, Any]:
    return {
        "finding_schema": FINDING_SCHEMA,
        "signature": record.signature,
        "symptom": record.symptom.value,
        "stage": record.stage.value,
        "error_type": record.error_type,
        "message": record.message,
        "stderr": record.stderr,
        "case": case_to_json(record.case),
        "pipeline": None if record.pipeline is None else pipeline_to_json(record.pipeline),
        "pass_name": record.pass_name,
        "seed": record.seed,
        "tvm": record.tvm,
        "first_seconds": round(record.first_seconds, 3),
        "shrink_seconds": round(record.shrink_seconds, 3),
        "hits": record.hits,
        "attributes": record.attributes,
        "found_by": record.found_by,
        "machine": record.machine,
    }


def finding_from_json(data: Any) -> FindingRecord:
    """A record from its JSON form; a ValueError (or KeyError, TypeError) names what is wrong."""
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    version = data.get("finding_schema", 0)
    if version not in (0, FINDING_SCHEMA):
        raise ValueError(f"finding_schema {version!r}: this bnfuzz reads 0 to {FINDING_SCHEMA}")
    if "schema" in data:
        raise ValueError("this is a corpus entry; give it to replay, render or promote as an entry")
    pipeline = data.get("pipeline")
    seed = data.get("seed")
    return FindingRecord(
        signature=str(data["signature"]),
        symptom=Symptom(data["symptom"]),
        stage=Stage(data["stage"]),
        message=str(data["message"]),
        case=case_from_json(data["case"]),
        pass_name=str(data["pass_name"]),
        error_type=str(data.get("error_type") or ""),
        stderr=str(data.get("stderr") or ""),
        pipeline=None if pipeline is None else pipeline_from_json(pipeline),
        seed=None if seed is None else int(seed),
        tvm=str(data.get("tvm", "")),
        first_seconds=float(data.get("first_seconds", 0.0)),
        shrink_seconds=float(data.get("shrink_seconds", 0.0)),
        hits=int(data.get("hits", 1)),
        attributes=dict(data.get("attributes") or {}),
        found_by=data.get("found_by"),
        machine=dict(data.get("machine") or {}),
    )


def read_finding(path: Path) -> FindingRecord:
    """The finding in ``path``; :class:`FindingFileError` if it is not one."""
    try:
        return finding_from_json(json.loads(path.read_text()))
    except OSError as exc:
        raise FindingFileError(path, exc.strerror or str(exc)) from None
    except (ValueError, KeyError, TypeError, CaseError, PipelineError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise FindingFileError(path, detail) from None


def write_finding(directory: Path, record: FindingRecord) -> tuple[Path, bool]:
    """Store ``record`` in ``directory`` under its signature's file name, unless a finding of
    that signature with a case no larger is already there (another worker's, or an earlier
    campaign's). Returns the path and whether this record was written. An OSError (a full
    disk) leaves the old file as it was."""
    target = directory / file_name(record.signature)
    try:
        there: FindingRecord | None = read_finding(target)
    except FindingFileError:
        there = None  # absent or unreadable: replaced
    if there is not None and not smaller_wins(there.case, record.case):
        return target, False
    write_atomic(target, json.dumps(finding_to_json(record), sort_keys=True, indent=2) + "\n")
    return target, True
