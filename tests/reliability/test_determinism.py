"""Determinism: every corpus entry replays bit for bit in a fresh process (same outputs
before and after the pass, same verdict; for a crash, the same symptom and signal) as in
this session; and a campaign with the same seed checks the same cases, in the same order,
with the same verdicts, and reports the same findings, in a fresh process (with its own
hash seed) each time."""

from __future__ import annotations

import subprocess
import sys

import pytest
from replays import FINGERPRINTED, ROOT, Replays

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("corpus")]


def in_fresh_processes(argv: list[str], times: int) -> list[str]:
    """What ``python ARGV`` prints, run ``times`` times, each in a fresh Python process."""
    return [
        subprocess.run(
            [sys.executable, *argv], capture_output=True, text=True, cwd=ROOT, timeout=900, check=True
        ).stdout
        for _ in range(times)
    ]


@pytest.mark.nightly  # twenty seconds of fresh processes; replays are checked in CI in process
def test_every_entry_replays_bit_identically_in_a_fresh_process(corpus: Replays) -> None:
    """The session's replays (shared with the corpus and report tests) against a fresh
    process's (``tests/replays.py`` run as a script)."""
    here = "".join(corpus.fingerprint(path) + "\n" for path in FINGERPRINTED)
    (there,) = in_fresh_processes([str(ROOT / "tests" / "replays.py")], 1)
    assert there.count("\n") == len(FINGERPRINTED)
    assert there == here


#: A campaign against upstream, fingerprinted: every case it checked, in order (during
#: generation and shrinking), with its verdict; then the signatures it reports.
CAMPAIGN = """
import hashlib
from fuzz.engine.campaign import run_campaign
from fuzz.engine.check import check
from fuzz.model.case_json import dumps
from fuzz.backends.tvm.compile_cache import CompileCache
from fuzz.backends.tvm.passes import resolve_pass
upstream, runner, digest, count = resolve_pass("upstream"), CompileCache().run, hashlib.sha256(), 0
def checker(case, pipeline):
    global count
    checked = check(case, upstream, runner, pipeline)
    findings = [(f.symptom.value, f.error_type, f.message) for f in checked.verdict.findings]
    digest.update(dumps(case).encode() + repr(findings).encode())
    count += 1
    return checked
result = run_campaign(upstream, max_examples=100, seed=7, shrink_seconds=3600, checker=checker)
print(count, digest.hexdigest(), sorted(str(hit.signature) for hit in result.hits))
"""


@pytest.mark.nightly  # minutes of CPU: the nightly workflow runs it (make test-all)
def test_the_same_seed_checks_the_same_cases_with_the_same_verdicts() -> None:
    runs = in_fresh_processes(["-c", CAMPAIGN], 2)
    count, _, signatures = runs[0].split(" ", 2)
    assert int(count) > 100 and signatures.strip() != "[]"  # it shrank something
    assert runs[0] == runs[1]
