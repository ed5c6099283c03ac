"""Bad input: every out-of-range or malformed argument, and a missing or unsupported TVM,
is a one-line error naming the option (or TVM), exit 2, before any work starts; a
malformed corpus entry is an error naming the file and the field, and the others are
still replayed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cases import make_case

from fuzz.cli import main
from fuzz.cli.common import SUPPORTED_TVM
from fuzz.model.case_json import case_to_json
from fuzz.store.corpus import ENTRY_SCHEMA, EntryError, load_entry

ROOT = Path(__file__).resolve().parents[2]

BAD = [
    (["run", "--pass", "upstream", "--budget", "-1"], "argument --budget: must be positive, got -1"),
    (["run", "--pass", "upstream", "--budget", "nan"], "argument --budget: must be a finite number, got nan"),
    (["run", "--pass", "upstream", "--budget", "inf"], "argument --budget: must be a finite number, got inf"),
    (
        ["run", "--pass", "upstream", "--max-examples", "0"],
        "argument --max-examples: must be positive, got 0",
    ),
    (
        ["run", "--pass", "upstream", "--max-examples", "1.5"],
        "argument --max-examples: expected an integer, got '1.5'",
    ),
    (["run", "--pass", "upstream", "--workers", "0"], "argument --workers: must be positive, got 0"),
    (["run", "--pass", "upstream", "--timeout", "-3"], "argument --timeout: must be positive, got -3"),
    (
        ["run", "--pass", "upstream", "--shrink-seconds", "-1"],
        "argument --shrink-seconds: must be zero or positive, got -1",
    ),
    (["run", "--pass", "upstream", "--seed", "abc"], "argument --seed: invalid int value: 'abc'"),
    (["run", "--pass", "nonesuch"], "unknown pass 'nonesuch'"),
    (["run", "--pass", "mutant:nope"], "no mutant named 'nope'. The 25 mutants: mutant:scale_ignored, "),
    (["run", "--pass", "nowhere.x:Y"], "run bnfuzz from the folder that holds 'nowhere'"),
    (["run"], "the following arguments are required: --pass"),
    (["bench", "--rounds", "0", "--isolation"], "argument --rounds: must be positive, got 0"),
    (["effectiveness", "--number", "-2"], "argument --number: must be positive, got -2"),
    (["render", "corpus/missing.json", "--script"], "corpus/missing.json: file: No such file or directory"),
    (["promote", "corpus/missing.json", "--corpus", "x"], "corpus/missing.json: file:"),
    (["promote", "corpus/finite-to-nonfinite.json"], "the following arguments are required: --corpus"),
    (["file-issues", "corpus", "--repo", "no-slash"], "--repo 'no-slash': expected OWNER/NAME"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
]


@pytest.mark.parametrize(("argv", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_arguments_exit_2_naming_the_option(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err, err


FAKE_TVM = {
    "missing": "raise ImportError(\"No module named 'tvm'\")",
    "broken": "raise OSError('libtvm_runtime.so: undefined symbol: _ZN3tvm3ffi4json9Stringify')",
    "unsupported": "__version__ = '0.24.0'",
}


@pytest.mark.parametrize(
    ("tvm", "message"),
    [
        ("missing", "cannot import TVM: ImportError: No module named 'tvm'. Install a supported apache-tvm"),
        ("broken", "cannot import TVM: OSError: libtvm_runtime.so: undefined symbol"),
        ("unsupported", "TVM 0.24.0 is not supported (supported: 0.25, 0.26, 0.27)"),
    ],
)
def test_a_missing_or_unsupported_tvm_exits_2_before_any_work(tvm: str, message: str, tmp_path: Path) -> None:
    (tmp_path / "tvm").mkdir()
    (tmp_path / "tvm" / "__init__.py").write_text(FAKE_TVM[tvm] + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    env.pop("BNFUZZ_ANY_TVM", None)
    command = [sys.executable, "-m", "fuzz.cli", "run", "--pass", "upstream", "--max-examples", "1"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("bnfuzz: error: ") and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1  # one line, no traceback


def test_an_unsupported_tvm_can_be_tried_on_request(tmp_path: Path) -> None:
    (tmp_path / "tvm").mkdir()
    (tmp_path / "tvm" / "__init__.py").write_text("__version__ = '0.28.dev0'\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "BNFUZZ_ANY_TVM": "1"}
    command = [sys.executable, "-m", "fuzz.cli", "run", "--pass", "upstream", "--max-examples", "1"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    # past the check, the fake TVM fails at the first real use: not the version message
    assert "not supported" not in done.stderr and done.returncode != 0


def test_the_supported_releases_are_the_ones_the_makefile_can_install() -> None:
    installable = {p.stem.removeprefix("tvm-") for p in (ROOT / "constraints").glob("tvm-*.txt")}
    assert set(SUPPORTED_TVM) == installable


# Corpus entries: a truncated or hand-edited file is an error naming the file and the
# field; replay reports it (exit 2) and still replays the others.


def write_entry(tmp_path: Path, edit: object = None, text: str | None = None) -> Path:
    obj = {
        "schema": ENTRY_SCHEMA,
        "case": case_to_json(make_case(kernel_layout="IOHW")),
        "pass": "upstream",
        "symptom": "pass-exception",
        "stage": "pass",
        "signature": "pass-exception:AttributeError[kernel_layout=IOHW]",
        "message": "",
        "error_type": "AttributeError",
        "stderr": "",
        "expect": {"upstream": "fails", "fixed": "passes"},
        "reason": {},
        "provenance": {},
    }
    if callable(edit):
        edit(obj)
    path = tmp_path / "entry.json"
    path.write_text(text if text is not None else json.dumps(obj))
    return path


def test_a_good_entry_loads(tmp_path: Path) -> None:
    entry = load_entry(write_entry(tmp_path))
    assert entry.expect["upstream"] == "fails" and entry.error_type == "AttributeError"


def test_a_schema_1_entry_loads_without_error_type_and_stderr(tmp_path: Path) -> None:
    def older(obj: dict[str, object]) -> None:
        obj.update(schema=1)
        del obj["error_type"], obj["stderr"]

    entry = load_entry(write_entry(tmp_path, older))
    assert (entry.error_type, entry.stderr) == ("", "")
    with pytest.raises(EntryError, match="missing"):  # schema 2 requires both
        load_entry(write_entry(tmp_path, lambda o: o.pop("error_type")))


BAD_ENTRIES = {
    "truncated": (None, '{"schema": 1, "case": {', "file"),
    "schema": (lambda o: o.update(schema=99), None, "schema"),
    "case-schema": (lambda o: o["case"].update(schema=7), None, "case.schema"),
    "size": (lambda o: o["case"]["data"]["values"].pop(), None, "case.data"),
    "dtype": (lambda o: o["case"]["data"].update(dtype="float8"), None, "case.data.dtype"),
    "expect": (lambda o: o["expect"].update(fixed="works"), None, "expect.fixed"),
    "missing": (lambda o: o.pop("symptom"), None, "symptom"),
    "error_type": (lambda o: o.update(error_type=3), None, "error_type"),
}


@pytest.mark.parametrize("name", sorted(BAD_ENTRIES))
def test_bad_entries_name_the_file_and_the_field(tmp_path: Path, name: str) -> None:
    edit, text, field = BAD_ENTRIES[name]
    path = write_entry(tmp_path, edit, text)
    with pytest.raises(EntryError) as info:
        load_entry(path)
    assert str(path) in str(info.value) and info.value.field.startswith(field), str(info.value)


def test_replay_reports_a_bad_entry_and_replays_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write_entry(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["replay", str(bad), str(good)]) == 2
    captured = capsys.readouterr()
    assert f"{bad}: file: not valid JSON" in captured.err
    assert f"ok   {good} on upstream: fails (expected fails)" in captured.out
    assert f"ok   {good} on fixed: passes (expected passes)" in captured.out
