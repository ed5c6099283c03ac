"""ONNX Runtime's Conv+BatchNormalization fusion as a backend: hand-made cases with a known
verdict either way, its unfolded run against the bound, the command line, and a missing
onnxruntime."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cases import make_case
from hypothesis import given, settings
from test_bound_soundness import CASES as BOUND_CASES

from fuzz.backends import BACKENDS, backend_of, resolve_fold
from fuzz.backends.onnxruntime import OrtFold, RuntimeRejects
from fuzz.cli import main
from fuzz.engine.check import check
from fuzz.engine.replay import replay
from fuzz.model.case import Case
from fuzz.model.form import Form, Importer
from fuzz.oracle.signature import Signature
from fuzz.oracle.verdict import Symptom
from fuzz.render.github import file_issues
from fuzz.render.report import issue_of
from fuzz.store.corpus import load_entry

ROOT = Path(__file__).resolve().parent.parent
EPS32 = float(np.float32(1e-5))
ONE = {"c_in": 1, "c_out": 1, "height": 1, "width": 1, "kh": 1, "kw": 1}
BASIC = resolve_fold("onnxruntime:basic")


def onnx_case(**kwargs: Any) -> Case:
    return make_case(form=Form(Importer.ONNX), epsilon=kwargs.pop("epsilon", EPS32), **kwargs)


def test_names_resolve_to_their_backend() -> None:
    assert backend_of("onnxruntime:basic").key == "onnxruntime" and backend_of("upstream").key == "tvm"
    assert backend_of("fuzz.backends.tvm.passes:identity").key == "tvm"  # MODULE:ATTR stays TVM's
    assert isinstance(BASIC, OrtFold) and BASIC.framework == "onnxruntime" and not BASIC.complete_fold
    assert set(BACKENDS) == {
        "tvm",
        "onnxruntime",
        "onnxoptimizer",
        "onnxslim",
        "onnxsim",
        "openvino",
        "torch",
    }


def test_the_same_case_unfolded_is_not_a_finding() -> None:
    # the same magnitudes with a weight that keeps W * s finite: no finding
    case = onnx_case(**ONE, values={"x": 0.0, "weight": 1e20, "gamma": 1e10, "mean": 1.0, "var": 1.0})
    assert check(case, BASIC).verdict.findings == ()


def test_a_case_the_runtime_cannot_run_is_outside_the_backend() -> None:
    with pytest.raises(RuntimeRejects, match="unfolded"):
        check(onnx_case(dtype="float64"), BASIC)  # no float64 Conv kernel on the CPU provider
    with pytest.raises(RuntimeRejects, match="ONNX form"):
        check(make_case(), BASIC)


@settings(max_examples=25, deadline=None)
@given(BASIC.cases())
def test_the_drawn_cases_are_ones_the_runtime_runs(case: Case) -> None:
    assert case.form.importer is Importer.ONNX and case.dtype in ("float32", "float16")
    check(case, BASIC)  # raises RuntimeRejects otherwise


def test_the_runtime_s_own_batch_norm_kernel_overflows_where_the_exact_result_is_finite() -> None:
    # conv = 2^61 * 2^61 = 2^122 and mean = 2^122: the exact output is 0. ONNX Runtime's
    # BatchNormalization CPU kernel computes x * s + (beta - mean * s) with s = 65 (to rounding),
    # and mean * s = 3.5e38 overflows float32: the unfolded run gives NaN, a defect of the
    # runtime's kernel, judged as one (against the lowering, not the fold).
    case = onnx_case(
        **ONE,
        values={"x": 2.0**61, "weight": 2.0**61, "gamma": 65.0, "beta": 0.0, "mean": 2.0**122, "var": 1.0},
    )
    verdict = check(case, BASIC).verdict
    assert [f.symptom for f in verdict.lowering] == [Symptom.BASELINE_OUT_OF_TOLERANCE]
    assert "unfolded program gives nan, reference 0.0" in verdict.lowering[0].message
    assert verdict.findings == ()  # the folded run is no worse: no finding against the fold


#: The bound-soundness cases ONNX can say (conv-bn, NCHW, scale and bias, float32 or float16).
ONNX_BOUND_CASES = [
    "subnormal-denominator",
    "cancellation",
    "underflowing-products",
    "float16-huge",
    "gamma-times-q-past-max",
]


@pytest.mark.parametrize("name", ONNX_BOUND_CASES)
def test_the_unfolded_run_is_within_its_bound(name: str) -> None:
    case = BOUND_CASES[name]
    bn = case.blocks[0].bn
    case = replace(
        case,
        form=Form(Importer.ONNX),
        blocks=(replace(case.blocks[0], bn=replace(bn, epsilon=float(np.float32(bn.epsilon)))),),
    )
    verdict = check(case, BASIC).verdict
    misses = [f for f in verdict.lowering if f.symptom is Symptom.BASELINE_OUT_OF_TOLERANCE]
    assert misses == [], misses[0].message if misses else ""


def test_an_unknown_level_exits_2_naming_the_levels(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--pass", "onnxruntime:fast", "--max-examples", "1"]) == 2
    err = capsys.readouterr().err
    assert "onnxruntime:basic, onnxruntime:extended, onnxruntime:all" in err


def test_pipelines_are_refused_for_onnxruntime(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--pass", "onnxruntime:basic", "--pipelines", "--max-examples", "1"]) == 2
    assert "pipelines are TVM's" in capsys.readouterr().err


@pytest.mark.slow
def test_without_onnxruntime_the_fold_name_says_which_extra_to_install() -> None:
    script = (
        "import sys\n"
        "sys.modules['onnxruntime'] = None\n"
        "from fuzz.cli import main\n"
        "sys.exit(main(['run', '--pass', 'onnxruntime:basic', '--max-examples', '1']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 2, done.stderr
    assert "pip install -e '.[onnxruntime]'" in done.stderr


ORT_ENTRIES = sorted((ROOT / "corpus" / "onnxruntime").glob("*.json"))


@pytest.mark.parametrize("path", ORT_ENTRIES, ids=[p.name for p in ORT_ENTRIES])
def test_an_entry_replays_as_it_expects(path: Path) -> None:
    entry = load_entry(path)
    assert entry.pass_name == "onnxruntime:basic" and entry.expect[entry.pass_name] == "fails"
    for name, status in entry.expect.items():
        assert replay(entry, name).as_expected, (name, status)


def test_the_overflow_entry_s_issue_follows_onnx_runtime_s_template() -> None:
    entry = load_entry(ROOT / "corpus" / "onnxruntime" / "onnxruntime_finite-to-nonfinite.json")
    issue = issue_of([entry])
    assert issue.project == "microsoft/onnxruntime" and issue.title.startswith(
        "[Bug] Conv+BatchNormalization"
    )
    headings = [line for line in issue.body.splitlines() if line.startswith("### ")]
    assert headings == [
        "### Describe the issue", "### To reproduce", "### Urgency", "### Platform", "### OS Version",
        "### ONNX Runtime Installation", "### ONNX Runtime Version or Commit ID", "### ONNX Runtime API",
        "### Architecture", "### Execution Provider",
    ]  # fmt: skip
    assert "`ConvBNFusion` (`onnxruntime/core/optimizer/conv_bn_fusion.cc`)" in issue.body
    assert "import tvm" not in issue.body
    plans = file_issues([issue], _NoIssuesFiled(), apply=False, repo="apache/tvm").plans
    assert [p.status for p in plans] == ["not filed"] and "--repo microsoft/onnxruntime" in plans[0].why


class _NoIssuesFiled:
    def filed_signatures(self) -> set[str]:
        return set()

    def create(self, title: str, body: str) -> str:
        raise AssertionError("a dry run files nothing")


@pytest.mark.slow
def test_bench_has_a_row_for_onnxruntime(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--pass", "onnxruntime:basic", "--seconds", "1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["framework"].startswith("ONNX Runtime ")
    assert summary["checked"]["value_sets"] >= 1 and summary["checked"]["per_second"] > 0
    assert summary["campaign"]["value_sets"] >= 1


def test_bench_options_of_tvm_alone_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--pass", "onnxruntime:basic", "--campaign-seconds", "5"]) == 2
    assert "for TVM's passes" in capsys.readouterr().err


def test_signatures_keep_backends_apart() -> None:
    case = onnx_case(**ONE, values={"x": 0.0, "weight": 1e30, "gamma": 1e10, "mean": 1.0, "var": 1.0})
    finding = check(case, BASIC).verdict.primary
    assert finding is not None
    ort_signature = Signature.of(finding, case, None, "onnxruntime")
    tvm_signature = Signature.of(finding, case)
    assert str(ort_signature) == "onnxruntime:finite-to-nonfinite"  # the form is ONNX Runtime's own
    assert str(tvm_signature) == "finite-to-nonfinite[form=onnx]"
    assert ort_signature.covers(finding, case) and tvm_signature.covers(finding, case)


def test_the_issue_s_platform_and_architecture_are_the_entry_s_machine() -> None:
    from dataclasses import replace

    entry = load_entry(ROOT / "corpus" / "onnxruntime" / "onnxruntime_finite-to-nonfinite.json")
    body = issue_of([entry]).body
    assert "### Platform\n\nLinux\n" in body and "### Architecture\n\nX64\n" in body  # x86_64, Linux
    machine = {
        **entry.provenance["machine"],
        "cpu": {**entry.provenance["machine"]["cpu"], "arch": "aarch64"},
    }
    arm = replace(entry, provenance={**entry.provenance, "machine": machine, "platform": "macOS-14.2-arm64"})
    body = issue_of([arm]).body
    assert "### Platform\n\nmacOS\n" in body and "### Architecture\n\nARM64\n" in body
