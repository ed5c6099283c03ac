"""The ``bnfuzz`` command line: its contract (exit codes, JSON summary) and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.cli import main
from fuzz.fpenv import flush_requested
from fuzz.model.case_json import SCHEMA_VERSION

FINDING_KEYS = {"signature", "symptom", "stage", "first_seconds", "attributes"}
ATTRIBUTE_KEYS = {"dtype", "data_layout", "kernel_layout", "axis", "center", "scale", "training", "groups"}


def test_help_explains_every_option() -> None:
    # the console script sits next to the interpreter the package is installed in
    exe = Path(sys.executable).with_name("bnfuzz")
    assert exe.exists(), f"the console script is installed with the package ({exe})"
    out = subprocess.run([str(exe), "run", "--help"], capture_output=True, text=True, check=True).stdout
    for option in (
        "--pass", "--budget", "--max-examples", "--seed", "--out", "--json", "--shrink-seconds",
        "--pipelines", "--isolate", "--timeout", "--workers", "--database", "--report",
    ):  # fmt: skip
        assert option in out
    assert "Exit codes" in out


@pytest.mark.parametrize(
    ("command", "options"),
    [
        (
            "bench",
            [
                "--pass",
                "--seconds",
                "--growth-seconds",
                "--campaign-seconds",
                "--seed",
                "--json",
                "--isolation",
                "--rounds",
                "--batches",
            ],
        ),
        ("effectiveness", ["--pass", "--rounds", "--number", "--json"]),
        ("promote", ["FINDING", "--corpus", "--passes"]),
        ("replay", ["PATH", "--pass", "--scripts", "--flush-denormals", "n/a"]),
        ("render", ["PATH", "--script", "--issue"]),
        ("triage", ["PATH"]),
        ("file-issues", ["PATH", "--repo", "--apply", "--api"]),
        ("upstream-patch", ["--out", "git apply", "training=False"]),
    ],
)
def test_every_command_documents_its_options_and_exit_codes(
    command: str, options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    for option in options:
        assert option in out, option
    assert "Exit codes" in out


def test_unknown_pass_exits_2_with_names_and_close_matches(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--pass", "upstrem", "--max-examples", "1"]) == 2
    err = capsys.readouterr().err
    assert "'upstrem'" in err and "Did you mean 'upstream'" in err and "identity" in err


@pytest.mark.parametrize("command", [["bench"], ["effectiveness"]])
def test_other_commands_reject_an_unknown_pass(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--pass", "fixd"]) == 2
    assert "Did you mean 'fixed'" in capsys.readouterr().err


def test_effectiveness_rejects_zero_rounds() -> None:
    assert main(["effectiveness", "--rounds", "0"]) == 2


@pytest.mark.parametrize(
    "args",
    [["--budget", "-1"], ["--max-examples", "0"], ["--max-examples", "many"], ["--seed", "x"]],
)
def test_bad_numbers_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--pass", "identity", *args]) == 2
    assert "error" in capsys.readouterr().err


def test_unwritable_out_dir_is_reported_before_the_campaign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert main(["run", "--pass", "identity", "--max-examples", "1", "--out", str(blocker / "out")]) == 2
    assert "--out" in capsys.readouterr().err


def test_clean_run_exits_0_with_a_json_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--pass", "identity", "--max-examples", "5", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["examples"] == 5 and summary["findings"] == []
    assert summary["seconds"] > 0


def test_upstream_run_finds_and_writes_findings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "run", "--pass", "upstream", "--max-examples", "40", "--shrink-seconds", "0",
            "--json", "--out", str(tmp_path),
        ]
    )  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert code == 1
    assert summary["findings"], "with seed 0, 40 examples hit several of upstream's defects"
    for finding in summary["findings"]:
        assert finding.keys() >= FINDING_KEYS
        assert finding["attributes"].keys() >= ATTRIBUTE_KEYS
    written = sorted(tmp_path.glob("*.json"))
    assert len(written) == len(summary["findings"])
    record = json.loads(written[0].read_text())
    assert record["case"]["schema"] == SCHEMA_VERSION
    # the machine it was found on: the CPU that selected the kernels, the flush settings pinned
    assert record["machine"]["cpu"]["model"] and isinstance(record["machine"]["cpu"]["flags"], list)
    flushed = flush_requested()  # BNFUZZ_FLUSH_DENORMALS=1 runs every check flushed
    assert record["machine"]["flush"]["ftz"] is flushed and record["machine"]["flush"]["daz"] is flushed


def test_identity_judged_as_a_complete_fold_misses_folds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "run",
            "--pass",
            "identity",
            "--must-fold",
            "--max-examples",
            "10",
            "--shrink-seconds",
            "0",
            "--json",
        ]
    )
    summary = json.loads(capsys.readouterr().out)
    assert code == 1 and summary["findings"][0]["symptom"] == "missed-fold"
    assert main(["run", "--pass", "identity", "--max-examples", "10", "--json"]) == 0  # not claimed: none
