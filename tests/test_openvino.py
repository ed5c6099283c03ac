"""OpenVINO's CPU plugin as a backend: hand-made cases with a known verdict either way, a
missing OpenVINO, the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cases import make_case
from without_tvm import run_script_without_tvm

from fuzz.backends import backend_of, resolve_fold
from fuzz.backends.openvino import OpenVinoFold
from fuzz.engine.check import check
from fuzz.engine.replay import replay
from fuzz.errors import UsageError
from fuzz.model.case import Case, Topology
from fuzz.model.form import Form, Importer, OnnxForm
from fuzz.oracle.verdict import Symptom
from fuzz.render.report import issue_of
from fuzz.render.script import render_script
from fuzz.store.corpus import Entry, load_entry

ROOT = Path(__file__).resolve().parent.parent
EPS32 = float(np.float32(1e-5))
ONE = {"c_in": 1, "c_out": 1, "height": 1, "width": 1, "kh": 1, "kw": 1}
#: x = 0, W * gamma / sqrt(var + eps) = 1e30 * 1e10 overflows float32 (see test_onnx_tools.py)
OVERFLOW = {"x": 0.0, "weight": 1e30, "gamma": 1e10, "mean": 1.0, "var": 1.0}
OPENVINO = resolve_fold("openvino")


def onnx_case(form: OnnxForm | None = None, **kwargs: object) -> Case:
    kwargs.setdefault("values", {"gamma": 3.0, "mean": 0.5})
    return make_case(form=Form(Importer.ONNX, onnx=form or OnnxForm()), epsilon=EPS32, **kwargs)  # type: ignore[arg-type]


def test_the_name_resolves_to_the_backend() -> None:
    assert (
        isinstance(OPENVINO, OpenVinoFold) and OPENVINO.framework == backend_of("openvino").key == "openvino"
    )
    assert OPENVINO.version()[0].isdigit()
    with pytest.raises(UsageError, match="openvino"):
        resolve_fold("openvino:gpu")


@pytest.mark.parametrize("topology", [Topology.CONV_BN, Topology.CHAIN, Topology.CONV_SHARED])
def test_a_plain_case_has_no_finding(topology: Topology) -> None:
    checked = check(onnx_case(topology=topology), OPENVINO)
    assert checked.verdict.findings == () and checked.verdict.lowering == ()


def test_its_onnx_frontend_rejects_statistics_per_position() -> None:
    finding = check(onnx_case(OnnxForm(opset=7, spatial=False)), OPENVINO).verdict.primary
    assert finding is not None and finding.symptom is Symptom.PASS_EXCEPTION
    assert "BatchNormalization-7" in finding.message


def test_an_overridden_initializer_becomes_a_constant() -> None:
    findings = check(onnx_case(OnnxForm(overridden=("gamma",))), OPENVINO).verdict.findings
    assert [f.symptom for f in findings] == [Symptom.IO_CHANGE, Symptom.OUT_OF_TOLERANCE]
    assert "gamma0" in findings[0].message


def test_initializers_listed_as_inputs_are_no_inputs_of_the_compiled_model() -> None:
    findings = check(onnx_case(OnnxForm(initializer_inputs=True)), OPENVINO).verdict.findings
    assert [f.symptom for f in findings] == [Symptom.IO_CHANGE]  # the values are the stored ones
    assert "to inputs [x] outputs [out0]" in findings[0].message


def _entry(case: Case) -> Entry:
    finding = check(case, OPENVINO).verdict.primary
    assert finding is not None
    signature = f"openvino:{finding.symptom.value}"
    return Entry(
        case, "openvino", finding.symptom, finding.stage, signature, finding.message, finding.error_type, "",
        {"openvino": "fails"}, {"openvino": finding.message},
        {"openvino": OPENVINO.version(), "onnxruntime": "1.32.0", "python": "3", "platform": "linux"},
    )  # fmt: skip


def test_the_issue_follows_openvino_s_bug_template_and_names_the_code_at_fault() -> None:
    overflow = issue_of([_entry(onnx_case(values=OVERFLOW, **ONE))])  # type: ignore[arg-type]
    assert overflow.project == "openvinotoolkit/openvino" and overflow.title.startswith("[Bug]: ")
    headings = [line for line in overflow.body.splitlines() if line.startswith("### ")]
    assert headings == [
        "### OpenVINO Version", "### Operating System", "### Device used for inference", "### Framework",
        "### Model used", "### Issue description", "### Step-by-step reproduction", "### Relevant log output",
    ]  # fmt: skip
    assert "conv_mul_fusion.cpp" in overflow.body and "import tvm" not in overflow.body
    rejected = issue_of([_entry(onnx_case(OnnxForm(opset=7, spatial=False)))])
    assert "src/frontends/onnx/frontend/src/op/batch_norm.cpp" in rejected.body


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "line"),
    [
        (onnx_case(values=OVERFLOW, **ONE), "BUG: finite outputs became inf or NaN"),  # type: ignore[arg-type]
        (
            onnx_case(OnnxForm(opset=7, spatial=False)),
            "BUG: OpenVINO cannot compile a model ONNX Runtime runs",
        ),
        (onnx_case(OnnxForm(overridden=("gamma",))), "BUG: the compiled model's inputs are ['x']"),
    ],
    ids=["overflow", "spatial", "overridden"],
)
def test_the_script_needs_only_openvino_and_onnx_runtime(case: Case, line: str, tmp_path: Path) -> None:
    script = tmp_path / "repro.py"
    script.write_text(render_script(_entry(case)))
    done = run_script_without_tvm(script)
    assert done.returncode == 1 and line in done.stdout, done.stdout + done.stderr


def test_below_ir_version_4_initializers_listed_as_inputs_are_constants() -> None:
    ir3 = OnnxForm(opset=7, ir_version=3, initializer_inputs=True)  # the specification of IR 3
    assert check(onnx_case(ir3), OPENVINO).verdict.findings == ()


@pytest.mark.slow
def test_without_openvino_its_name_says_which_extra_to_install() -> None:
    script = (
        "import sys\n"
        "sys.modules['openvino'] = None\n"
        "from fuzz.cli import main\n"
        "sys.exit(main(['run', '--pass', 'openvino', '--max-examples', '1']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 2, done.stderr
    assert "pip install -e '.[openvino]'" in done.stderr


CORPUS_ENTRIES = sorted((ROOT / "corpus" / "openvino").glob("*.json"))


@pytest.mark.parametrize("path", CORPUS_ENTRIES, ids=[p.name for p in CORPUS_ENTRIES])
def test_a_corpus_entry_replays_as_it_expects(path: Path) -> None:
    entry = load_entry(path)
    assert entry.pass_name == "openvino" and entry.expect == {
        "openvino": "fails",
        "onnxruntime:basic": "passes",
    }
    for name in entry.expect:
        assert replay(entry, name).as_expected, name
