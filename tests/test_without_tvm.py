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

import fuzz.engine.campaign, fuzz.engine.check, fuzz.engine.minimize, fuzz.oracle.verdict, fuzz.engine.replay, fuzz.render.report, fuzz.render.script
from fuzz.engine.histograms import histograms
from fuzz.render.campaign_summary import write_report
from fuzz.store.corpus import dumps_entry, load_entry
from fuzz.store.findings import FindingRecord, read_finding, write_finding
from fuzz.render.github import file_issues
from fuzz.render.issue import Issue
from fuzz.engine.run import Part, RunConfig, summarise

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
from fuzz.engine.campaign import run_campaign
from fuzz.model.form import OnnxForm
from fuzz.store.corpus import load_entry
from fuzz.render.report import issue_of

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


#: What a module's docstring says when it exists for TVM alone and imports it at its top.
TVM_ALONE = "for tvm alone"

IMPORT_EACH = """
import importlib, json, sys
failed = {}
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except ImportError as exc:
        failed[name] = str(exc)
print(json.dumps(failed))
"""


def _modules() -> dict[str, bool]:
    """Every module of fuzz and strategies -> whether it says it exists for TVM alone (or
    lies under ``fuzz/backends/tvm/``)."""
    import ast

    out: dict[str, bool] = {}
    for package in ("fuzz", "strategies"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if name.endswith("__main__"):
                continue
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            out[name] = name.startswith("fuzz.backends.tvm.") or TVM_ALONE in " ".join(doc.lower().split())
    return out


def test_every_module_but_tvms_own_imports_without_tvm() -> None:
    import json
    import subprocess
    import sys

    from without_tvm import BLOCK_TVM

    modules = _modules()
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_TVM + IMPORT_EACH, json.dumps(sorted(modules))],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    failed = json.loads(done.stdout)
    wrongly = sorted(set(failed) - {m for m, alone in modules.items() if alone})
    assert not wrongly, {m: failed[m] for m in wrongly}
    # and the claim is true the other way: each module that says it needs TVM does
    says = [m for m, alone in modules.items() if alone and not m.startswith("fuzz.backends.tvm.")]
    assert len(says) >= 5  # effectiveness, timing, layers, time_to_find, declines
    stale = sorted(m for m in says if m not in failed)
    assert not stale, f"say they are for TVM alone but import without it: {stale}"
