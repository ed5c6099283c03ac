"""Faults: Ctrl-C of a campaign and ``kill -9`` of one of its workers lose no finding
written before, and the campaign still writes its summary (and report)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

#: every test here starts worker processes (or a whole campaign in a subprocess)
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def campaign(*args: str) -> Iterator[subprocess.Popen[str]]:
    """A ``bnfuzz run`` in its own process group (as a terminal's job is); whatever the
    test's outcome, the group is gone and its pipe closed afterwards."""
    process = subprocess.Popen(
        [sys.executable, "-m", "fuzz.cli", "run", "--pass", "upstream", *args, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    with process:
        try:
            yield process
        finally:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


def wait_for_findings(out: Path, process: subprocess.Popen[str], seconds: float = 600) -> dict[str, str]:
    """The finding files in ``out`` once there is one. Waits for that event (a file written),
    polling twice a second; ``seconds`` is only a generous cap for a campaign that never finds
    anything (upstream's bugs show within the first hundred examples)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        files = sorted(out.glob("*.json"))
        if files:
            return {f.name: f.read_text() for f in files}
        time.sleep(0.5)  # the poll interval of the wait above
    raise AssertionError(f"no finding was written within {seconds:g} s (exit code {process.poll()})")


def test_ctrl_c_keeps_every_finding_and_still_summarises_and_reports(tmp_path: Path) -> None:
    out, report = tmp_path / "findings", tmp_path / "report"
    with campaign("--budget", "600", "--out", str(out), "--report", str(report)) as process:
        before = wait_for_findings(out, process)
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches the whole group
        stdout, _ = process.communicate(timeout=300)
    assert process.returncode == 130
    summary = json.loads(stdout)
    assert summary["interrupted"] is True
    on_disk = {json.loads(f.read_text())["signature"] for f in out.glob("*.json")}
    assert {json.loads(text)["signature"] for text in before.values()} <= on_disk
    assert on_disk == {f["signature"] for f in summary["findings"]}
    assert (report / "report.md").exists() and (report / "report.png").exists()


@pytest.mark.nightly  # twenty seconds; the Ctrl-C test above covers a stopped campaign in make test
def test_kill_9_of_a_worker_keeps_its_findings_and_the_others_report(tmp_path: Path) -> None:
    out, report = tmp_path / "findings", tmp_path / "report"
    database = str(tmp_path / "db")
    # No time budget: the workers run until the test stops them, so both are alive when one is
    # killed, however slow the machine (an example count this large is never reached).
    with campaign(
        "--workers", "2", "--max-examples", "1000000", "--out", str(out), "--database", database,
        "--report", str(report),
    ) as process:  # fmt: skip
        before = wait_for_findings(out, process)
        pids = subprocess.run(  # the workers, not the filter of TVM's log (fuzz/engine/native_log.py)
            ["pgrep", "-P", str(process.pid), "-f", "fuzz.cli run"], capture_output=True, text=True
        ).stdout.split()
        assert len(pids) == 2
        os.kill(int(pids[0]), signal.SIGKILL)
        os.killpg(process.pid, signal.SIGINT)  # then Ctrl-C: the other worker stops and reports
        stdout, _ = process.communicate(timeout=400)
    summary = json.loads(stdout)
    assert len(summary["failed_workers"]) == 1 and len(summary["per_worker"]) == 1
    assert summary["interrupted"] is True
    for name, text in before.items():  # written before the kill: still there, still whole
        assert json.loads((out / name).read_text())["signature"] == json.loads(text)["signature"]
    assert process.returncode == 130
    assert (report / "report.md").exists() and (report / "report.png").exists()
