"""Outputs that cannot be written: a disk that fills up mid-campaign, a read-only output
folder. Each is a clear error (exit 2) with nothing half-written, and no finding is lost
from the summary.

A full disk is made two ways: a file-size limit (``RLIMIT_FSIZE``: writes past it fail
with EFBIG, which Python reports as an ``OSError`` like ENOSPC), which needs no privilege,
and, where this process may mount, a real 64 KiB tmpfs that fills up (ENOSPC).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fuzz.store.storage import write_atomic

ROOT = Path(__file__).resolve().parents[2]


def limit_file_size(size: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "finding.json"
    target.write_text("old")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    limit_file_size(1000)
    try:
        with pytest.raises(OSError, match="File too large"):
            write_atomic(target, "x" * 5000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["finding.json"]


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB filesystem, where this process may mount one (root in a container)."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()}); the RLIMIT variant runs")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def run_until_the_disk_is_full(
    out: Path, report: Path, **popen: object
) -> tuple[int, dict[str, object], str]:
    command = [sys.executable, "-m", "fuzz.cli", "run", "--pass", "upstream", "--budget", "120"]
    command += ["--out", str(out), "--report", str(report), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600, **popen)  # type: ignore[call-overload]
    return done.returncode, json.loads(done.stdout), done.stderr


def check_stopped_cleanly(code: int, summary: dict[str, object], stderr: str, out: Path) -> None:
    assert code == 2, stderr
    error = str(summary["output_error"])
    assert error.startswith(f"--out {out}/") and "cannot write a finding" in error
    (line,) = [line for line in stderr.splitlines() if line.startswith("bnfuzz: error:")]
    assert error in line
    # nothing half-written: every file in --out is a whole finding; no temporaries left
    written = {json.loads(f.read_text())["signature"] for f in out.glob("*.json")}
    assert not [f for f in out.iterdir() if f.name.startswith(".")]
    # nothing lost: every finding is in the summary, and those not on disk are named
    found = {str(f["signature"]) for f in summary["findings"]}  # type: ignore[attr-defined]
    assert found and written <= found and set(summary["unwritten"]) == found - written  # type: ignore[arg-type]
    assert set(summary["unwritten"]) <= {s for s in found if s in line}  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_disk_filling_up_mid_campaign_stops_it_with_a_clear_error(tmp_path: Path) -> None:
    out, report = tmp_path / "findings", tmp_path / "report"
    # 300 bytes: the output folders' checks pass (empty files), the first finding does not fit
    code, summary, stderr = run_until_the_disk_is_full(out, report, preexec_fn=lambda: limit_file_size(300))
    check_stopped_cleanly(code, summary, stderr, out)
    assert "File too large" in str(summary["output_error"])
    assert "--report" in str(summary["output_error"])  # the report did not fit either
    assert list(out.iterdir()) == [] and list(report.iterdir()) == []


@pytest.mark.slow
def test_a_real_full_filesystem(small_tmpfs: Path, tmp_path: Path) -> None:
    # fill it up: empty files (the output folder's check) still fit, a finding does not
    with open(small_tmpfs / "filler", "wb", buffering=0) as filler, pytest.raises(OSError):
        while True:
            filler.write(b"\0" * 1024)
    out = small_tmpfs / "findings"
    code, summary, stderr = run_until_the_disk_is_full(out, tmp_path / "report")
    check_stopped_cleanly(code, summary, stderr, out)
    assert "No space left on device" in str(summary["output_error"])


def test_a_read_only_output_folder_is_reported_before_the_campaign(small_tmpfs: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    command = [sys.executable, "-m", "fuzz.cli", "run", "--pass", "upstream", "--budget", "60"]
    done = subprocess.run(
        [*command, "--out", str(small_tmpfs / "findings")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert f"--out {small_tmpfs}/findings: cannot write there (Read-only file system)" in done.stderr
