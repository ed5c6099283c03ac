"""TVM's native log lines: counted, not printed (``fuzz/engine/native_log.py``); every other line on
descriptor 2 gets through, in order, even when the process dies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cases import make_case

from fuzz.backends.tvm.passes import resolve_pass
from fuzz.engine.check import check
from fuzz.engine.native_log import NOISE, NativeLog

WARNING = NOISE["BlockBuilder destroyed with remaining blocks"]


def test_noise_is_counted_and_every_other_line_passes_in_order(capfd: pytest.CaptureFixture[str]) -> None:
    with NativeLog() as log:
        os.write(2, b"first\n")
        os.write(2, f"[00:00:00] block_builder.cc:67: {WARNING}\n".encode())
        os.write(2, b"second\n")
        os.write(2, f"{WARNING}\n".encode())
        os.write(2, b"third, with no newline at the end")
    assert log.counts == {"BlockBuilder destroyed with remaining blocks": 2} and log.total == 2
    assert capfd.readouterr().err == "first\nsecond\nthird, with no newline at the end"
    os.write(2, b"after the block\n")
    assert capfd.readouterr().err == "after the block\n"


def test_tvm_s_warning_from_upstream_s_pass_is_counted(capfd: pytest.CaptureFixture[str]) -> None:
    with NativeLog() as log:
        checked = check(make_case(dtype="float16"), resolve_pass("upstream"))
        assert checked.verdict.primary is not None  # upstream raises TypeError on float16
        del checked
    assert log.total >= 1
    assert WARNING not in capfd.readouterr().err


def test_what_a_dying_process_printed_last_still_gets_through(tmp_path: Path) -> None:
    script = (
        "import os, signal\n"
        "from fuzz.engine.native_log import NativeLog\n"
        "import sys\n"
        "with NativeLog():\n"
        f"    os.write(2, b'{WARNING}\\n')\n"
        "    print('Python says', file=sys.stderr, flush=True)\n"
        "    os.write(2, b'last words\\n')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == -9
    assert done.stderr == "Python says\nlast words\n"
