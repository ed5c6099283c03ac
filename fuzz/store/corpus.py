"""Corpus entries: one finding as a replayable JSON file, and what each pass should do on it.

An :class:`Entry` holds the case with exact values, the finding it showed (pass,
symptom, stage, signature, message), the *expected status* per pass (``fails``: the
pass has a finding on it; ``passes``: none), with a reason, and where it came from
(TVM version, Python, platform, the seed and command of the campaign that found it).
:func:`dumps_entry` writes it with sorted keys and a two-space indent, so a file
changes only when its content does.

:func:`fuzz.engine.promote.promote` makes entries from campaign findings;
:func:`fuzz.engine.replay.replay` checks an entry against one pass and says whether the pass did
what the entry expects. This module imports no TVM.

Key idea: a bad entry is reported as :class:`EntryError` naming the file and the field,
never as a traceback, and one bad file does not stop the others from replaying.
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

__all__ = [
    "DECLINED",
    "ENTRY_SCHEMA",
    "Entry",
    "EntryError",
    "dumps_entry",
    "load_entry",
]

#: 2 added ``error_type`` and ``stderr``; a schema-1 entry is read with both empty.
ENTRY_SCHEMA = 2
#: The symptom of an entry that shows no bug: a complete fold keeps the batch_norm for a
#: reason it can state (``bnfuzz declines``, ``corpus/declines/``): expected behaviour.
DECLINED = "declined"
EXPECTATIONS = ("fails", "passes")


class EntryError(BnfuzzError, ValueError):
    """A corpus file that cannot be read: names the file and the field."""

    field: str

    def __init__(self, path: Path | str, field: str, message: str) -> None:
        super().__init__(message, field=field, where=str(path))
        self.path = Path(path)


@dataclass(frozen=True)
class Entry:
    """One finding, replayable; see the module docstring."""

    case: Case
    pass_name: str
    #: the oracle's symptom; None for an entry that shows no bug (a stated decline, written
    #: as ``"declined"``)
    symptom: Symptom | None
    stage: Stage
    signature: str
    message: str
    #: the exception's type for pass-exception, the signal for crash, else ""
    error_type: str
    #: what the worker process printed to stderr before it died (crash), else ""
    stderr: str
    #: pass name -> "fails" or "passes"
    expect: dict[str, str]
    #: pass name -> why (the finding's message, or "no finding")
    reason: dict[str, str]
    #: tvm, tvm_commit, hypothesis, python, platform, seed, found_by
    provenance: dict[str, Any] = field(default_factory=dict)
    #: the pipeline the pass ran in (``bnfuzz run --pipelines``), or None: the pass alone
    pipeline: Pipeline | None = None

    @property
    def declined(self) -> bool:
        """Whether this entry shows expected behaviour (a stated decline), not a bug."""
        return self.symptom is None

    @property
    def symptom_name(self) -> str:
        """The symptom as written in the file: its value, or ``"declined"``."""
        return DECLINED if self.symptom is None else self.symptom.value

    @property
    def isolated(self) -> bool:
        """Whether checking this entry kills or hangs the process: then it is checked in a
        worker (:mod:`fuzz.engine.isolate`)."""
        return self.symptom in (Symptom.CRASH, Symptom.TIMEOUT)


def _to_json(entry: Entry) -> dict[str, Any]:
    pipeline = {} if entry.pipeline is None else {"pipeline": pipeline_to_json(entry.pipeline)}
    return pipeline | {
        "schema": ENTRY_SCHEMA,
        "case": case_to_json(entry.case),
        "pass": entry.pass_name,
        "symptom": entry.symptom_name,
        "stage": entry.stage.value,
        "signature": entry.signature,
        "message": entry.message,
        "error_type": entry.error_type,
        "stderr": entry.stderr,
        "expect": entry.expect,
        "reason": entry.reason,
        "provenance": entry.provenance,
    }


def dumps_entry(entry: Entry) -> str:
    """The stable text of an entry: sorted keys, two-space indent, trailing newline."""
    return json.dumps(_to_json(entry), sort_keys=True, indent=2) + "\n"


def _field(obj: dict[str, Any], name: str, kind: type, path: Path) -> Any:
    if name not in obj:
        raise EntryError(path, name, "missing")
    value = obj[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise EntryError(path, name, f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def load_entry(path: Path | str) -> Entry:
    """Read an entry; raises :class:`EntryError` naming the file and the field."""
    path = Path(path)
    try:
        obj = json.loads(path.read_text())
    except OSError as exc:
        raise EntryError(path, "file", exc.strerror or str(exc)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise EntryError(path, "file", f"not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise EntryError(path, "file", "expected a JSON object")
    schema = _field(obj, "schema", int, path)
    if schema not in (1, ENTRY_SCHEMA):
        raise EntryError(
            path, "schema", f"unknown schema version {schema}; this tool reads 1 and {ENTRY_SCHEMA}"
        )
    if schema == 1:  # before error_type and stderr were fields: `bnfuzz promote` rewrites it as 2
        obj = {"error_type": "", "stderr": ""} | obj
    try:
        case = case_from_json(obj.get("case"))
    except CaseError as exc:
        raise EntryError(path, exc.field, exc.detail) from None
    expect = _field(obj, "expect", dict, path)
    for name, status in expect.items():
        if status not in EXPECTATIONS:
            raise EntryError(path, f"expect.{name}", f"{status!r} is not one of {', '.join(EXPECTATIONS)}")
    return Entry(
        case=case,
        pass_name=_field(obj, "pass", str, path),
        symptom=_symptom(_field(obj, "symptom", str, path), path),
        stage=_stage(_field(obj, "stage", str, path), path),
        signature=_field(obj, "signature", str, path),
        message=_field(obj, "message", str, path),
        error_type=_field(obj, "error_type", str, path),
        stderr=_field(obj, "stderr", str, path),
        expect=expect,
        reason=_field(obj, "reason", dict, path),
        provenance=_field(obj, "provenance", dict, path),
        pipeline=_pipeline(obj.get("pipeline"), path),
    )


def _symptom(value: str, path: Path) -> Symptom | None:
    if value == DECLINED:
        return None
    try:
        return Symptom(value)
    except ValueError:
        names = ", ".join([*(s.value for s in Symptom), DECLINED])
        raise EntryError(path, "symptom", f"{value!r} is not one of {names}") from None


def _stage(value: str, path: Path) -> Stage:
    try:
        return Stage(value)
    except ValueError:
        raise EntryError(
            path, "stage", f"{value!r} is not one of {', '.join(s.value for s in Stage)}"
        ) from None


def _pipeline(obj: Any, path: Path) -> Pipeline | None:
    if obj is None:
        return None
    try:
        return pipeline_from_json(obj)
    except PipelineError as exc:
        raise EntryError(path, "pipeline" + (f".{exc.field}" if exc.field else ""), exc.detail) from None
