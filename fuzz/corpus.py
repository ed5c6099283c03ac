"""Corpus entries: one finding as a replayable JSON file, and what each pass should do on it.

An :class:`Entry` holds the case with exact values, the finding it showed (pass,
symptom, stage, signature, message), the *expected status* per pass (``fails``: the
pass has a finding on it; ``passes``: none), with a reason, and where it came from
(TVM version, Python, platform, the seed and command of the campaign that found it).
:func:`dumps_entry` writes it with sorted keys and a two-space indent, so a file
changes only when its content does.

:func:`promote` turns a campaign finding (a file ``bnfuzz run --out`` wrote) into an
entry: the expectations are not typed in but measured, by replaying the case on every
pass named (see :func:`replay`). :func:`replay` checks an entry against one pass and
says whether the pass did what the entry expects.

Key idea: a bad entry is reported as :class:`EntryError` naming the file and the field,
never as a traceback, and one bad file does not stop the others from replaying.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis

from fuzz.case import Case, CaseError, case_from_json, case_to_json
from fuzz.check import Checked, check
from fuzz.compat import tvm_version
from fuzz.errors import BnfuzzError
from fuzz.minimize import simplify
from fuzz.oracle import Symptom
from fuzz.passes import resolve_pass
from fuzz.pipeline import Pipeline, PipelineError, pipeline_from_json, pipeline_to_json

__all__ = [
    "ENTRY_SCHEMA",
    "Entry",
    "EntryError",
    "Replay",
    "check_entry",
    "dumps_entry",
    "file_name",
    "load_entry",
    "promote",
    "replay",
    "write_atomic",
]

ENTRY_SCHEMA = 1
#: Seconds a worker may take on one entry before it counts as a hang.
ISOLATED_TIMEOUT = 120.0
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
    symptom: str
    stage: str
    signature: str
    message: str
    #: pass name -> "fails" or "passes"
    expect: dict[str, str]
    #: pass name -> why (the finding's message, or "no finding")
    reason: dict[str, str]
    #: tvm, tvm_commit, hypothesis, python, platform, seed, found_by
    provenance: dict[str, Any] = field(default_factory=dict)
    #: the pipeline the pass ran in (``bnfuzz run --pipelines``), or None: the pass alone
    pipeline: Pipeline | None = None

    @property
    def isolated(self) -> bool:
        """Whether checking this entry kills or hangs the process: then it is checked in a
        worker (:mod:`fuzz.isolate`)."""
        return self.symptom in (Symptom.CRASH.value, Symptom.TIMEOUT.value)


def _to_json(entry: Entry) -> dict[str, Any]:
    pipeline = {} if entry.pipeline is None else {"pipeline": pipeline_to_json(entry.pipeline)}
    return pipeline | {
        "schema": ENTRY_SCHEMA,
        "case": case_to_json(entry.case),
        "pass": entry.pass_name,
        "symptom": entry.symptom,
        "stage": entry.stage,
        "signature": entry.signature,
        "message": entry.message,
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
    if schema != ENTRY_SCHEMA:
        raise EntryError(path, "schema", f"unknown schema version {schema}; this tool reads {ENTRY_SCHEMA}")
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
        symptom=_field(obj, "symptom", str, path),
        stage=_field(obj, "stage", str, path),
        signature=_field(obj, "signature", str, path),
        message=_field(obj, "message", str, path),
        expect=expect,
        reason=_field(obj, "reason", dict, path),
        provenance=_field(obj, "provenance", dict, path),
        pipeline=_pipeline(obj.get("pipeline"), path),
    )


def _pipeline(obj: Any, path: Path) -> Pipeline | None:
    if obj is None:
        return None
    try:
        return pipeline_from_json(obj)
    except PipelineError as exc:
        field, _, message = str(exc).partition(": ")
        raise EntryError(path, f"pipeline.{field}" if message else "pipeline", message or field) from None


def check_entry(case: Case, pass_name: str, pipeline: Pipeline | None, isolated: bool) -> Checked:
    """Check a case on a pass (in a pipeline), in a worker process if ``isolated``."""
    if not isolated:
        return check(case, resolve_pass(pass_name), pipeline=pipeline)
    from fuzz.isolate import IsolatedChecker

    with IsolatedChecker(pass_name, timeout=ISOLATED_TIMEOUT) as checker:
        return checker(case, pipeline)


@dataclass(frozen=True)
class Replay:
    """One entry replayed on one pass: what happened against what was expected."""

    pass_name: str
    expected: str | None
    status: str  # "fails" or "passes"
    checked: Checked

    @property
    def as_expected(self) -> bool:
        return self.expected is None or self.expected == self.status


def replay(entry: Entry, pass_name: str) -> Replay:
    """Check the entry's case on ``pass_name`` (built, run and judged afresh)."""
    checked = check_entry(entry.case, pass_name, entry.pipeline, entry.isolated)
    status = "passes" if checked.verdict.primary is None else "fails"
    return Replay(pass_name, entry.expect.get(pass_name), status, checked)


def _reason(checked: Checked) -> str:
    finding = checked.verdict.primary
    if finding is None:
        return "no finding: built, ran and stayed within the error bound"
    return f"{finding.symptom.value} at {finding.stage}: {finding.message}"


def file_name(signature: str) -> str:
    """The file a finding or entry with ``signature`` is stored in."""
    return "".join(c if c.isalnum() or c in "-_=" else "_" for c in signature)[:120] + ".json"


def _finding_record(path: Path) -> dict[str, Any]:
    """A ``bnfuzz run --out`` finding, or a corpus entry in the same terms (to re-promote it)."""
    try:
        record = json.loads(path.read_text())
        if "schema" in record:  # a corpus entry
            entry = load_entry(path)
            return {
                "case": case_to_json(entry.case),
                "pass_name": entry.pass_name,
                "signature": entry.signature,
                "message": entry.message,
                "stage": entry.stage,
                "symptom": entry.symptom,
                "seed": entry.provenance.get("seed"),
                "found_by": entry.provenance.get("found_by"),
                "pipeline": None if entry.pipeline is None else pipeline_to_json(entry.pipeline),
            }
        record["case"] = case_to_json(case_from_json(record["case"]))
        if record.get("pipeline") is not None:
            pipeline_from_json(record["pipeline"])  # validates it
        str(record["signature"])
        return dict(record)
    except EntryError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EntryError(path, "file", f"not a finding written by bnfuzz run --out ({exc})") from None


def promote(
    finding_path: Path, corpus: Path, passes: tuple[str, ...] = ("upstream", "fixed")
) -> tuple[Path, str | None]:
    """Turn a ``bnfuzz run --out`` finding into a corpus entry in ``corpus``; return its path,
    and None, or what was done when an entry with the same signature was already there:
    the smaller case is kept (the other one is the same bug).

    The case is first made simpler where the same bug survives
    (:func:`fuzz.minimize.simplify`), and its message is measured afresh. The
    expectation for each of ``passes`` is measured by replaying the case on it. A
    corpus entry can be promoted again, to re-minimise it and re-measure its
    expectations on the installed TVM.
    """
    record = _finding_record(finding_path)
    pass_name = str(record.get("pass_name", ""))
    case = case_from_json(record["case"])
    pipeline = pipeline_from_json(record["pipeline"]) if record.get("pipeline") is not None else None
    symptom = str(record.get("symptom", ""))
    isolated = symptom in (Symptom.CRASH.value, Symptom.TIMEOUT.value)
    narrowed = None
    if not isolated:  # a crash would end this process: such cases stay as Hypothesis shrank them
        case, pipeline, narrowed = simplify(case, resolve_pass(pass_name), pipeline)
    signature = str(narrowed) if narrowed is not None else str(record["signature"])
    found = check_entry(case, pass_name, pipeline, isolated).verdict.primary
    expect: dict[str, str] = {}
    reason: dict[str, str] = {}
    for name in passes:
        checked = check_entry(case, name, pipeline, isolated)
        expect[name] = "passes" if checked.verdict.primary is None else "fails"
        reason[name] = _reason(checked)
    entry = Entry(
        case=case,
        pass_name=pass_name,
        symptom=symptom,
        stage=found.stage if found else str(record.get("stage", "")),
        signature=signature,
        message=found.message if found else str(record.get("message", "")),
        expect=expect,
        reason=reason,
        provenance={
            "tvm": tvm_version(),
            "tvm_commit": _tvm_commit(),
            "hypothesis": hypothesis.__version__,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "seed": record.get("seed"),
            "found_by": record.get("found_by")
            or f"bnfuzz run --pass {pass_name} --seed {record.get('seed')}"
            + (" --pipelines" if pipeline is not None else ""),
        },
        pipeline=pipeline,
    )
    corpus.mkdir(parents=True, exist_ok=True)
    target = corpus / file_name(signature)
    kept = None
    if target.exists() and target.resolve() != finding_path.resolve():
        try:
            there = load_entry(target)
        except EntryError:
            there = None  # unreadable: replaced
        if there is not None and there.signature == signature:
            if there.case.size <= case.size:
                return target, f"kept its case ({there.case.size} values, this one {case.size})"
            kept = f"replaced its case ({there.case.size} values) by this smaller one ({case.size})"
    write_atomic(target, dumps_entry(entry))
    return target, kept


def _tvm_commit() -> str:
    """The TVM build's git commit, where the build records one (PyPI wheels do not)."""
    try:
        import tvm

        commit = tvm.support.libinfo().get("GIT_COMMIT_HASH", "")
    except Exception:
        commit = ""
    return str(commit) or "not recorded in this TVM build"


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` by a rename: readers see the old file or the new one, never
    half; if the write fails (a full disk), the old file stays and no temporary is left."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())  # on disk before the rename makes it visible
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
