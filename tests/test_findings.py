"""The finding file (``fuzz/store/findings.py``): one reader, one writer, the smaller case wins."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cases import make_case

from fuzz.cli import main
from fuzz.engine.promote import read_as_entry, read_finding_or_entry
from fuzz.model.pipeline import FOLD, Pipeline
from fuzz.oracle.execution import Stage
from fuzz.oracle.verdict import Symptom
from fuzz.render.script import render_script
from fuzz.store.corpus import load_entry
from fuzz.store.findings import (
    FINDING_SCHEMA,
    FindingFileError,
    FindingRecord,
    finding_to_json,
    read_finding,
    write_finding,
)
from fuzz.store.storage import file_name


def record(channels: int = 3, **kw: object) -> FindingRecord:
    fields: dict[str, object] = {
        "signature": "out-of-tolerance[scale=False]",
        "symptom": Symptom.OUT_OF_TOLERANCE,
        "stage": Stage.COMPARE,
        "message": "output 0 element (0, 0, 0, 0): 1.0 vs 2.0",
        "case": make_case(c_out=channels),
        "pass_name": "upstream",
        "seed": 3,
    }
    return FindingRecord(**(fields | kw))  # type: ignore[arg-type]


def test_a_record_reads_back_as_written(tmp_path: Path) -> None:
    written = record(pipeline=Pipeline(("FoldConstant", FOLD), 2, False), error_type="ValueError", hits=4)
    path, stored = write_finding(tmp_path, written)
    assert stored and path == tmp_path / file_name(written.signature)
    assert read_finding(path) == written
    assert json.loads(path.read_text())["finding_schema"] == FINDING_SCHEMA


def test_a_file_from_before_the_schema_field_still_reads(tmp_path: Path) -> None:
    data = finding_to_json(record())
    del data["finding_schema"], data["found_by"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    assert read_finding(path) == record()


def test_the_smaller_case_of_one_bug_is_kept_and_a_larger_one_is_not(tmp_path: Path) -> None:
    small, large = record(channels=2), record(channels=6)
    assert write_finding(tmp_path, large)[1]
    assert write_finding(tmp_path, small)[1]  # smaller: replaces
    path, stored = write_finding(tmp_path, large)
    assert not stored and read_finding(path).case == small.case
    assert not write_finding(tmp_path, small)[1]  # the same size: the file is not rewritten


def test_files_follow_the_umask(tmp_path: Path) -> None:
    path, _ = write_finding(tmp_path, record())
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{", "Expecting property name"),
        ("[]", "expected a JSON object"),
        (json.dumps({"schema": 1, "case": {}}), "this is a corpus entry"),
        (json.dumps(finding_to_json(record()) | {"finding_schema": 9}), "finding_schema 9"),
        (
            json.dumps({k: v for k, v in finding_to_json(record()).items() if k != "case"}),
            "missing field 'case'",
        ),
        (json.dumps(finding_to_json(record()) | {"symptom": "wrong"}), "'wrong' is not a valid Symptom"),
    ],
)
def test_a_bad_file_is_one_error_naming_the_file(tmp_path: Path, content: str, says: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(FindingFileError) as raised:
        read_finding(path)
    assert str(raised.value).startswith(f"{path}: not a finding written by bnfuzz run --out")
    assert says in str(raised.value)


IOHW = (
    Path(__file__).resolve().parent.parent
    / "corpus"
    / "pass-exception_AttributeError_kernel_layout=IOHW_.json"
)


def test_render_and_replay_take_a_finding_as_they_take_an_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a finding as `bnfuzz run --out` writes it, in a subfolder: replay looks into subfolders
    (tmp_path / "sub").mkdir()
    path, _ = write_finding(tmp_path / "sub", read_finding_or_entry(IOHW))
    as_entry = read_as_entry(path)
    assert as_entry.expect == {"upstream": "fails"} and as_entry.case == load_entry(IOHW).case
    assert main(["render", str(path), "--script"]) == 0
    assert capsys.readouterr().out == render_script(as_entry)
    assert main(["replay", str(tmp_path)]) == 0
    assert f"ok   {path} on upstream: fails (expected fails)" in capsys.readouterr().out
