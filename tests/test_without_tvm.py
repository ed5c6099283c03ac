"""What only reads and writes files works with TVM unimportable: the result types and the
oracle's symptoms, finding files, corpus entries, the run summary and its campaign report,
and filing issues; and the oracle, check, campaign, minimiser and reports import (``tvm``
and ``tvm_ffi`` are blocked in a fresh process, so importing either there raises)."""

from __future__ import annotations

from pathlib import Path

from without_tvm import run_without_tvm

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import tempfile
from pathlib import Path

import fuzz.campaign, fuzz.check, fuzz.minimize, fuzz.oracle, fuzz.replay, fuzz.report, fuzz.script
from fuzz.campaign_report import histograms, write_report
from fuzz.corpus import dumps_entry, load_entry
from fuzz.findings import FindingRecord, read_finding, write_finding
from fuzz.github import file_issues
from fuzz.issue import Issue
from fuzz.run import Part, RunConfig, summarise

path = Path("corpus/finite-to-nonfinite.json")
entry = load_entry(path)
assert dumps_entry(entry) == path.read_text()

out = Path(tempfile.mkdtemp())
record = FindingRecord(
    signature=entry.signature, symptom=entry.symptom, stage=entry.stage, message=entry.message,
    case=entry.case, pass_name=entry.pass_name,
)
(out / "findings").mkdir()
written, stored = write_finding(out / "findings", record)
assert stored and read_finding(written) == record

finding = {"signature": entry.signature, "symptom": "finite-to-nonfinite", "stage": "compare",
           "error_type": "", "message": entry.message, "first_seconds": 1.0, "shrink_seconds": 0.5,
           "hits": 3, "attributes": {}}
part = Part(seed=0, examples=10, changed=8, seconds=2.0, batches=3, findings=[finding], lowering={},
            gated={}, coverage={"float32": {"runs": 10, "fired": 8}},
            histograms=histograms([0.5, 2.0], [-3.0]), interrupted=False, unwritten=[], tvm="0.27")
summary = summarise(RunConfig(pass_name="upstream"), [part], database=None, failed_workers=[],
                    interrupted=False)
report = write_report(summary, out / "report", out / "findings")
assert entry.signature in report.read_text()

class GitHub:
    def filed_signatures(self):
        return set()
    def create(self, title, body):
        return "https://github.example/issues/1"

issue = Issue("cause:weights-overflow", "[Bug] a title", "a body", (entry.signature,))
filing = file_issues([issue], GitHub(), apply=True)
assert [p.status for p in filing.plans] == ["filed"]
assert "tvm" not in [m for m in sys.modules if sys.modules[m] is not None]
print("ok")
"""


def test_storage_reports_and_filing_work_without_tvm() -> None:
    done = run_without_tvm(SCRIPT, ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "ok"


ORT_SCRIPT = """
from hypothesis import strategies as st

from fuzz.backends import resolve_fold
from fuzz.backends.onnxruntime import onnx_cases
from fuzz.campaign import run_campaign
from fuzz.case import OnnxForm
from fuzz.corpus import load_entry
from fuzz.report import issue_of

# graphs written one way only: the seam is under test here, not the search (a campaign over
# every form finds this class too: tests/test_onnxruntime.py, slow)
plain = onnx_cases(st.just(OnnxForm()))
result = run_campaign(resolve_fold("onnxruntime:basic"), max_examples=200, seed=0, cases=plain)
assert "onnxruntime:finite-to-nonfinite" in [str(h.signature) for h in result.hits], result.hits
entry = load_entry("corpus/onnxruntime/onnxruntime_finite-to-nonfinite.json")
assert issue_of([entry]).project == "microsoft/onnxruntime"
assert "tvm" not in [m for m in sys.modules if sys.modules[m] is not None]
print("ok")
"""


def test_an_onnxruntime_campaign_and_its_issue_need_no_tvm() -> None:
    # found, shrunk, simplified and rendered with tvm unimportable: the seam holds
    done = run_without_tvm(ORT_SCRIPT, ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "ok"
