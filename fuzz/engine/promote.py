"""From a campaign finding to a corpus entry: simplified, re-measured, expectations measured.

:func:`promote` reads a finding (:mod:`fuzz.store.findings`; a corpus entry is read the same
way, to re-promote it), makes its case simpler where the same bug survives
(:func:`fuzz.engine.minimize.simplify`), measures its message afresh, and measures the
expectation of each named pass by replaying the case on it: expectations are never
typed in. Of two entries with one signature the smaller case is kept
(:func:`fuzz.store.findings.smaller_wins`, the rule a findings folder follows too).
"""

from __future__ import annotations

import platform
from pathlib import Path

import hypothesis

from fuzz.backends import backend_of, resolve_fold
from fuzz.engine.check import Checked
from fuzz.engine.minimize import simplify
from fuzz.engine.replay import check_entry
from fuzz.fpenv import machine
from fuzz.oracle.verdict import Symptom
from fuzz.store.corpus import Entry, EntryError, dumps_entry, load_entry
from fuzz.store.findings import FindingFileError, FindingRecord, read_finding, smaller_wins
from fuzz.store.storage import file_name, write_atomic

__all__ = ["promote", "read_as_entry", "read_finding_or_entry"]


def _entry_or_why_not(path: Path, not_a_finding: FindingFileError) -> Entry:
    """The corpus entry in ``path``, which is not a finding; if it is no entry either, the
    error says why it is not a finding (the likelier intent) unless it is a broken entry."""
    try:
        return load_entry(path)
    except EntryError as exc:
        if exc.field == "schema" and exc.detail == "missing":  # no entry: say why not a finding
            raise EntryError(path, "file", not_a_finding.detail) from None
        raise


def read_finding_or_entry(path: Path) -> FindingRecord:
    """The finding in ``path``: a file ``bnfuzz run --out`` wrote, or a corpus entry in the
    same terms. :class:`fuzz.store.corpus.EntryError` if it is neither (or a broken entry)."""
    try:
        return read_finding(path)
    except FindingFileError as not_a_finding:
        entry = _entry_or_why_not(path, not_a_finding)
    if entry.symptom is None:
        raise EntryError(path, "symptom", "a decline entry shows expected behaviour, no finding to promote")
    return FindingRecord(
        signature=entry.signature,
        symptom=entry.symptom,
        stage=entry.stage,
        message=entry.message,
        case=entry.case,
        pass_name=entry.pass_name,
        error_type=entry.error_type,
        stderr=entry.stderr,
        pipeline=entry.pipeline,
        seed=entry.provenance.get("seed"),
        tvm=str(entry.provenance.get("tvm", "")),
        found_by=entry.provenance.get("found_by"),
        machine=dict(entry.provenance.get("machine") or {}),
    )


def read_as_entry(path: Path) -> Entry:
    """The corpus entry in ``path``, or the finding in it as an entry not yet promoted: its
    expectation is the one its campaign measured (its pass fails), its case as shrunk. So
    ``render`` and ``replay`` take findings and entries alike.
    :class:`fuzz.store.corpus.EntryError` if the file is neither."""
    try:
        record = read_finding(path)
    except FindingFileError as not_a_finding:
        return _entry_or_why_not(path, not_a_finding)
    return Entry(
        case=record.case,
        pass_name=record.pass_name,
        symptom=record.symptom,
        stage=record.stage,
        signature=record.signature,
        message=record.message,
        error_type=record.error_type,
        stderr=record.stderr,
        expect={record.pass_name: "fails"},
        reason={record.pass_name: f"{record.symptom.value} at {record.stage.value}: {record.message}"},
        provenance={
            "tvm": record.tvm,
            # the finding records no more of its environment: this one re-checks and renders it
            "python": platform.python_version(),
            "platform": platform.platform(),
            "seed": record.seed,
            "found_by": record.found_by
            or f"bnfuzz run --pass {record.pass_name} --seed {record.seed}"
            + (" --pipelines" if record.pipeline is not None else ""),
            # where the campaign saw it fail (a finding from before machines were recorded: none)
            **({"machine": record.machine} if record.machine else {}),
        },
        pipeline=record.pipeline,
    )


def _reason(checked: Checked) -> str:
    finding = checked.verdict.primary
    if finding is None:
        return "no finding: built, ran and stayed within the error bound"
    return f"{finding.symptom.value} at {finding.stage.value}: {finding.message}"


def promote(
    finding_path: Path,
    corpus: Path,
    passes: tuple[str, ...] = ("upstream", "fixed"),
    *,
    replace: bool = False,
) -> tuple[Path, str | None]:
    """Turn a ``bnfuzz run --out`` finding into a corpus entry in ``corpus``; return its path,
    and None, or what was done when an entry with the same signature was already there:
    it is kept as it is unless ``replace``, and then replaced only by a smaller case (the
    other one is the same bug).

    A corpus entry can be promoted again, to re-minimise it and re-measure its
    expectations on the installed TVM (with ``replace``, in place).
    """
    record = read_finding_or_entry(finding_path)
    case, pipeline = record.case, record.pipeline
    isolated = record.symptom in (Symptom.CRASH, Symptom.TIMEOUT)
    narrowed = None
    fold = resolve_fold(record.pass_name)
    if not isolated:  # a crash would end this process: such cases stay as Hypothesis shrank them
        case, pipeline, narrowed = simplify(case, fold, pipeline)
    signature = str(narrowed) if narrowed is not None else record.signature
    own = check_entry(case, record.pass_name, pipeline, isolated)
    found = own.verdict.primary
    expect: dict[str, str] = {}
    reason: dict[str, str] = {}
    for name in dict.fromkeys((record.pass_name, *passes)):  # its own pass first, always
        checked = check_entry(case, name, pipeline, isolated)
        expect[name] = "passes" if checked.verdict.primary is None else "fails"
        reason[name] = _reason(checked)
    entry = Entry(
        case=case,
        pass_name=record.pass_name,
        symptom=record.symptom,
        stage=found.stage if found else record.stage,
        signature=signature,
        message=found.message if found else record.message,
        error_type=found.error_type if found else record.error_type,
        stderr=found.stderr if found else record.stderr,
        expect=expect,
        reason=reason,
        provenance={backend_of(fold.name).key: fold.version()}
        | {
            "tvm": _tvm_version(),
            "tvm_commit": _tvm_commit(),
            "hypothesis": hypothesis.__version__,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "seed": record.seed,
            "found_by": record.found_by
            or f"bnfuzz run --pass {record.pass_name} --seed {record.seed}"
            + (" --pipelines" if pipeline is not None else ""),
            # where the expectations above were measured
            "machine": machine(own.flush),
        },
        pipeline=pipeline,
    )
    corpus.mkdir(parents=True, exist_ok=True)
    target = corpus / file_name(signature)
    kept = None
    if target.exists():
        try:
            there = load_entry(target)
        except EntryError:
            there = None
        if not replace:
            return target, "kept as it is (--replace to replace it by a smaller case)"
        if there is not None and there.signature == signature and target.resolve() != finding_path.resolve():
            if not smaller_wins(there.case, case):
                return target, f"kept its case ({there.case.size} values, this one {case.size})"
            kept = f"replaced its case ({there.case.size} values) by this smaller one ({case.size})"
    write_atomic(target, dumps_entry(entry))
    return target, kept


def _tvm_version() -> str:
    """The installed TVM's version (an entry's expectations may be measured on TVM's
    passes whatever backend found it), or why there is none."""
    try:
        from fuzz.backends.tvm.compat import tvm_version

        return tvm_version()
    except ImportError:
        return "not installed"


def _tvm_commit() -> str:
    """The TVM build's git commit, where the build records one (PyPI wheels do not)."""
    try:
        import tvm

        commit = tvm.support.libinfo().get("GIT_COMMIT_HASH", "")
    except Exception:
        commit = ""
    return str(commit) or "not recorded in this TVM build"
