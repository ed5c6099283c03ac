"""Determinism: every corpus entry replays bit for bit, three times, each in a fresh
process (same outputs before and after the pass, same verdict; for a crash, the same
symptom and signal)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Prints one line per entry: its name, a hash of both programs' outputs, the verdict.
FINGERPRINT = """
import hashlib, sys
from pathlib import Path
from fuzz.corpus import load_entry, replay
from fuzz.execute import Outputs
for path in sorted(Path("corpus").glob("*.json")) + sorted(Path("corpus/pipelines").glob("*.json")):
    entry = load_entry(path)
    checked = replay(entry, entry.pass_name).checked
    digest = hashlib.sha256()
    for result in (checked.execution.baseline, checked.execution.folded):
        if isinstance(result, Outputs):
            for value in result.values:
                digest.update(value.tobytes())
        else:
            digest.update(repr((result.stage, result.error_type)).encode())
    # A crash's message holds timing and addresses; its symptom and signal are what must agree.
    verdict = [
        (f.symptom.value, f.error_type, "" if entry.isolated else f.message) for f in checked.verdict.findings
    ]
    print(path.name, digest.hexdigest(), verdict)
"""


def test_every_entry_replays_bit_identically_in_three_fresh_processes() -> None:
    runs = [
        subprocess.run(
            [sys.executable, "-c", FINGERPRINT],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=600,
            check=True,
        ).stdout
        for _ in range(3)
    ]
    assert runs[0].count("\n") == len(list((ROOT / "corpus").glob("*.json"))) + len(
        list((ROOT / "corpus" / "pipelines").glob("*.json"))
    )
    assert runs[0] == runs[1] == runs[2]
