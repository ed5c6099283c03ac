"""Determinism: every corpus entry replays bit for bit, three times, each in a fresh
process (same outputs before and after the pass, same verdict; for a crash, the same
symptom and signal); and a campaign with the same seed checks the same cases, in the
same order, with the same verdicts, and reports the same findings, in a fresh process
(with its own hash seed) each time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
        elif result is None:  # not built: the pass raised, or its module is ill-formed
            digest.update(b"none")
        else:
            digest.update(repr((result.stage, result.error_type)).encode())
    # A crash's message holds timing and addresses; its symptom and signal are what must agree.
    verdict = [
        (f.symptom.value, f.error_type, "" if entry.isolated else f.message) for f in checked.verdict.findings
    ]
    print(path.name, digest.hexdigest(), verdict)
"""


def in_fresh_processes(script: str, times: int) -> list[str]:
    """What ``script`` prints, run ``times`` times, each in a fresh Python process."""
    run = [sys.executable, "-c", script]
    return [
        subprocess.run(run, capture_output=True, text=True, cwd=ROOT, timeout=900, check=True).stdout
        for _ in range(times)
    ]


def test_every_entry_replays_bit_identically_in_three_fresh_processes() -> None:
    runs = in_fresh_processes(FINGERPRINT, 3)
    assert runs[0].count("\n") == len(list((ROOT / "corpus").glob("*.json"))) + len(
        list((ROOT / "corpus" / "pipelines").glob("*.json"))
    )
    assert runs[0] == runs[1] == runs[2]


#: A campaign against upstream, fingerprinted: every case it checked, in order (during
#: generation and shrinking), with its verdict; then the signatures it reports.
CAMPAIGN = """
import hashlib
from fuzz.campaign import run_campaign
from fuzz.check import check
from fuzz.case_json import dumps
from fuzz.compile_cache import CompileCache
from fuzz.passes import resolve_pass
upstream, runner, digest, count = resolve_pass("upstream"), CompileCache().run, hashlib.sha256(), 0
def checker(case, pipeline):
    global count
    checked = check(case, upstream, runner, pipeline)
    findings = [(f.symptom.value, f.error_type, f.message) for f in checked.verdict.findings]
    digest.update(dumps(case).encode() + repr(findings).encode())
    count += 1
    return checked
result = run_campaign(upstream, max_examples=300, seed=7, shrink_seconds=3600, checker=checker)
print(count, digest.hexdigest(), sorted(str(hit.signature) for hit in result.hits))
"""


@pytest.mark.slow
def test_the_same_seed_checks_the_same_cases_with_the_same_verdicts() -> None:
    runs = in_fresh_processes(CAMPAIGN, 2)
    count, _, signatures = runs[0].split(" ", 2)
    assert int(count) > 300 and signatures.strip() != "[]"  # it shrank something
    assert runs[0] == runs[1]
