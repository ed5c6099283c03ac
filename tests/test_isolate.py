"""Crash isolation: a worker gives the same verdicts as in-process checking, a segfault and
a hang become findings, the worker restarts, and a whole campaign survives a pass that
segfaults on purpose (``tests/crashing_pass.py``) and keeps every finding."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cases import make_case
from hypothesis import strategies as st

import strategies
from fuzz.backends.tvm.passes import resolve_pass
from fuzz.cli import main
from fuzz.engine.campaign import run_campaign
from fuzz.engine.check import check
from fuzz.engine.isolate import IsolatedChecker
from fuzz.engine.promote import read_as_entry
from fuzz.model.pipeline import Pipeline
from fuzz.oracle.verdict import Symptom
from fuzz.render.script import render_script
from fuzz.store.corpus import load_entry

#: every test here starts worker processes (or a whole campaign in a subprocess)
pytestmark = pytest.mark.slow

CRASHING = "tests.crashing_pass:SegfaultOnTraining"
CRASHING_OR_HANGING = "tests.crashing_pass:SegfaultOrHang"


def test_the_worker_agrees_with_checking_in_process() -> None:
    upstream = resolve_pass("upstream")
    with IsolatedChecker("upstream") as isolated:
        for case, pipeline in [
            (make_case(kernel_layout="IOHW"), None),
            (make_case(scale=False), None),
            (make_case(), Pipeline(("FoldConstant", "fold"))),
        ]:
            here, there = check(case, upstream, pipeline=pipeline), isolated(case, pipeline)
            assert here.verdict.findings == there.verdict.findings
        assert isolated.starts == 1  # one worker served every case


def test_a_segfault_and_a_hang_become_findings_and_the_worker_restarts() -> None:
    # the timeout is the cap that turns the hang into a finding; a case that does not hang
    # answers in well under a second (the worker's start is not counted), so 10 s leaves
    # room for a loaded machine
    with IsolatedChecker(CRASHING_OR_HANGING, timeout=10) as isolated:
        crashed = isolated(make_case(training=True), None).verdict.primary
        assert crashed is not None and crashed.symptom is Symptom.CRASH and crashed.error_type == "SIGSEGV"
        assert "Segfault" in crashed.stderr and "Segfault" not in crashed.message  # the backtrace
        hung = isolated(make_case(center=False), None).verdict.primary
        assert hung is not None and hung.symptom is Symptom.TIMEOUT
        fine = isolated(make_case(), None)
        assert fine.verdict.findings == () and isolated.starts == 3


@pytest.mark.nightly  # minutes of CPU: the nightly workflow runs it (make test-all)
def test_a_campaign_survives_a_segfaulting_pass_and_keeps_every_finding() -> None:
    cases = strategies.cases(
        dtypes=st.just("float32"),
        kernel_layouts=st.sampled_from(["OIHW", "IOHW"]),
        trainings=st.booleans(),
        centers=st.just(True),
    )
    with IsolatedChecker(CRASHING, timeout=30) as isolated:
        # shrink_seconds=0: each finding as first found (shrinking a crash starts a worker per
        # step, and how far it gets in some seconds would depend on the machine's load)
        result = run_campaign(
            resolve_pass("upstream"), max_examples=30, shrink_seconds=0, cases=cases, checker=isolated
        )
    found = {str(hit.signature) for hit in result.hits}
    crashes = [hit.signature for hit in result.hits if hit.signature.key == (Symptom.CRASH, "SIGSEGV")]
    assert crashes and all(("training", "True") in s.essentials for s in crashes), found
    assert any(s.startswith("pass-exception:AttributeError[") and "kernel_layout=IOHW" in s for s in found)


@pytest.mark.nightly  # half a minute; test_a_segfault_and_a_hang_... covers the worker in CI
def test_the_cli_writes_crash_findings_and_promote_replays_them_isolated(tmp_path: Path) -> None:
    out = tmp_path / "findings"
    code = main(
        ["run", "--pass", CRASHING, "--isolate", "--timeout", "30", "--max-examples", "40",
         "--shrink-seconds", "0", "--out", str(out)]
    )  # fmt: skip
    assert code == 1
    crash = sorted(out.glob("crash_SIGSEGV_*.json"))[0]
    assert (
        main(["promote", str(crash), "--corpus", str(tmp_path / "corpus"), "--passes", f"{CRASHING},fixed"])
        == 0
    )
    entry = load_entry(tmp_path / "corpus" / crash.name)
    assert entry.expect == {CRASHING: "fails", "fixed": "passes"}
    assert main(["replay", str(tmp_path / "corpus")]) == 0


def _native_crash_campaign(name: str, tmp_path: Path) -> None:
    """``bnfuzz run --pass NAME`` with its framework crashing (SIGSEGV) on every case fed a
    value of 2**60 or more (tests/crash_hooks), as a user runs it: by default the campaign
    checks in a worker, finishes, writes its summary, and the crash is a finding whose
    reproducer script dies of the same signal."""
    hooks = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).parent / "crash_hooks"),
        "BNFUZZ_TEST_CRASH": name.partition(":")[0],
    }
    out = tmp_path / "findings"
    done = subprocess.run(
        [sys.executable, "-m", "fuzz.cli", "run", "--pass", name, "--max-examples", "60",
         "--shrink-seconds", "0", "--out", str(out), "--json"],
        capture_output=True, text=True, cwd=Path(__file__).parent.parent, env=hooks, timeout=900,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    summary = json.loads(done.stdout)  # the summary is written: the campaign outlived the crash
    assert summary["isolated"] is True and summary["examples"] == 60
    crashes = [f for f in summary["findings"] if f["symptom"] == "crash"]
    assert crashes and crashes[0]["error_type"] == "SIGSEGV", summary["findings"]
    finding = next(out.glob("*crash_SIGSEGV*.json"))
    script = tmp_path / "repro.py"
    script.write_text(render_script(read_as_entry(finding)))
    ran = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=hooks, timeout=300
    )
    assert ran.returncode == -11, ran.stdout + ran.stderr  # the script dies of it too


def test_an_onnx_runtime_campaign_outlives_a_native_crash_by_default(tmp_path: Path) -> None:
    _native_crash_campaign("onnxruntime:basic", tmp_path)


@pytest.mark.nightly  # OpenVINO's worker starts slowly; ONNX Runtime's test above covers the path in CI
def test_an_openvino_campaign_outlives_a_native_crash_by_default(tmp_path: Path) -> None:
    _native_crash_campaign("openvino", tmp_path)
