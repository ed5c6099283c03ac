"""The ONNX model tools as backends (onnxoptimizer, onnxslim, onnxsim): hand-made cases with
a known verdict either way, a missing tool, the command line, reproducers and issues."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cases import make_case
from without_tvm import run_script_without_tvm

from fuzz.backends import MODEL_TOOLS, backend_of, resolve_fold
from fuzz.backends.onnx_tools import ToolFold
from fuzz.cli import main
from fuzz.engine.check import check
from fuzz.engine.replay import replay
from fuzz.model.case import Case
from fuzz.model.form import Form, Importer, OnnxForm
from fuzz.oracle.execution import Stage
from fuzz.oracle.verdict import Symptom
from fuzz.render.report import issue_of
from fuzz.render.script import render_script
from fuzz.store.corpus import Entry, load_entry

ROOT = Path(__file__).resolve().parent.parent
EPS32 = float(np.float32(1e-5))
ONE = {"c_in": 1, "c_out": 1, "height": 1, "width": 1, "kh": 1, "kw": 1}
TOOLS = sorted(MODEL_TOOLS)
#: W * gamma / sqrt(var + eps) = 1e30 * 1e10 overflows float32; x = 0 makes the conv 0, so
#: the model as given outputs beta - mean * s = -1e10, a folded one inf * 0 = NaN
OVERFLOW = {"x": 0.0, "weight": 1e30, "gamma": 1e10, "mean": 1.0, "var": 1.0}


def onnx_case(**kwargs: Any) -> Case:
    return make_case(form=Form(Importer.ONNX), epsilon=EPS32, **kwargs)


@pytest.mark.parametrize("name", TOOLS)
def test_a_tool_name_resolves_to_its_backend(name: str) -> None:
    fold = resolve_fold(name)
    assert isinstance(fold, ToolFold) and fold.framework == name == backend_of(name).key
    assert fold.version()[0].isdigit() and not fold.complete_fold


def written_as(form: OnnxForm) -> Case:
    return make_case(form=Form(Importer.ONNX, onnx=form), epsilon=EPS32, values={"gamma": 3.0, "mean": 0.5})


#: Ways of writing the model (fuzz.model.case.OnnxForm) and each tool's verdict on the plain case
#: written so: the primary symptom, or None. ONNX Runtime's fold runs every one correctly.
PER_POSITION = OnnxForm(opset=7, spatial=False)  # BatchNormalization-7 spatial=0, (C, H, W) statistics
IR3 = OnnxForm(opset=7, ir_version=3, initializer_inputs=True)  # every initializer also an input
LISTED = OnnxForm(initializer_inputs=True)  # initializers also inputs, not fed
OVERRIDDEN = OnnxForm(overridden=("gamma",))  # gamma an input with a stale default, fed at run time
FORM_VERDICTS = [
    ("onnxoptimizer", PER_POSITION, Symptom.PASS_EXCEPTION),
    ("onnxslim", PER_POSITION, Symptom.PASS_EXCEPTION),
    ("onnxsim", PER_POSITION, Symptom.PASS_EXCEPTION),
    ("onnxoptimizer", IR3, None),
    ("onnxslim", IR3, Symptom.ILL_FORMED),  # writes initializers that are not inputs, keeps IR 3
    ("onnxoptimizer", LISTED, None),
    ("onnxslim", LISTED, Symptom.IO_CHANGE),
    ("onnxsim", LISTED, Symptom.IO_CHANGE),  # documented: initializers are immutable by default
    ("onnxoptimizer", OVERRIDDEN, None),
    ("onnxslim", OVERRIDDEN, Symptom.IO_CHANGE),
    ("onnxsim", OVERRIDDEN, Symptom.IO_CHANGE),
    ("onnxruntime:basic", PER_POSITION, None),
    ("onnxruntime:basic", IR3, None),
    ("onnxruntime:basic", OVERRIDDEN, None),
]


@pytest.mark.parametrize(
    ("name", "form", "symptom"), FORM_VERDICTS, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(FORM_VERDICTS)]
)
def test_how_the_model_is_written_gives_the_tool_s_verdict(
    name: str, form: OnnxForm, symptom: Symptom | None
) -> None:
    primary = check(written_as(form), resolve_fold(name)).verdict.primary
    assert (primary.symptom if primary else None) is symptom, primary


def test_a_tool_that_drops_an_overridden_input_also_ignores_its_value() -> None:
    findings = check(written_as(OVERRIDDEN), resolve_fold("onnxslim")).verdict.findings
    assert [f.symptom for f in findings] == [
        Symptom.IO_CHANGE,
        Symptom.MUTATES_INPUT,
        Symptom.OUT_OF_TOLERANCE,
    ]
    assert "gamma0" in findings[0].message


def test_a_tool_raises_on_statistics_per_position_naming_its_own_code() -> None:
    finding = check(written_as(PER_POSITION), resolve_fold("onnxoptimizer")).verdict.primary
    assert finding is not None and "fuse_bn_into_conv.h" in finding.message


def test_a_tool_that_raises_is_a_finding_at_the_pass_stage() -> None:
    fold = resolve_fold("onnxslim")
    broken = ToolFold(name="onnxslim", framework="onnxslim", tool=MODEL_TOOLS["onnxslim"], module=_Raising())
    assert fold.tool == broken.tool
    finding = check(onnx_case(), broken).verdict.primary
    assert finding is not None and finding.symptom is Symptom.PASS_EXCEPTION and finding.stage is Stage.PASS


class _Raising:
    """A stand-in for a tool module whose every call raises."""

    def slim(self, model: object) -> object:
        raise RuntimeError("the tool gave up")


@pytest.mark.slow
def test_without_the_tool_its_name_says_which_extra_to_install() -> None:
    script = (
        "import sys\n"
        "sys.modules['onnxslim'] = None\n"
        "from fuzz.cli import main\n"
        "sys.exit(main(['run', '--pass', 'onnxslim', '--max-examples', '1']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 2, done.stderr
    assert "pip install -e '.[onnx-tools]'" in done.stderr


def _entry(name: str) -> Entry:
    case = onnx_case(**ONE, values=OVERFLOW)
    checked = check(case, resolve_fold(name))
    finding = checked.verdict.primary
    assert finding is not None
    return Entry(
        case, name, finding.symptom, finding.stage, f"{name}:finite-to-nonfinite", finding.message, "", "",
        {name: "fails"}, {name: finding.message},
        {name: resolve_fold(name).version(), "onnxruntime": "1.32.0", "python": "3", "platform": "linux"},
    )  # fmt: skip


@pytest.mark.parametrize("name", TOOLS)
def test_the_issue_goes_to_the_tool_s_tracker_and_names_the_code_at_fault(name: str) -> None:
    issue = issue_of([_entry(name)])
    assert issue.project == MODEL_TOOLS[name].project
    headings = [line for line in issue.body.splitlines() if line.startswith("### ")]
    assert headings == [
        "### Describe the bug", "### To Reproduce", "### Expected behavior", "### Environment",
        "### Additional context",
    ]  # fmt: skip
    assert MODEL_TOOLS[name].at_fault in issue.body and MODEL_TOOLS[name].call in issue.body
    assert "import tvm" not in issue.body


SCRIPT_LINES = [
    ("onnxoptimizer", PER_POSITION, "BUG: onnxoptimizer.optimize(model) raises RuntimeError"),
    ("onnxslim", IR3, "BUG: onnx.checker rejects the model onnxslim wrote"),
    ("onnxslim", OVERRIDDEN, "BUG: onnxslim changed the model's inputs and outputs"),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "form", "line"), SCRIPT_LINES, ids=[s[2].split(":")[1] for s in SCRIPT_LINES]
)
def test_the_script_shows_how_the_model_is_written_matters(
    name: str, form: OnnxForm, line: str, tmp_path: Path
) -> None:
    case = written_as(form)
    finding = check(case, resolve_fold(name)).verdict.primary
    assert finding is not None
    entry = Entry(
        case, name, finding.symptom, finding.stage, f"{name}:{finding.symptom.value}", finding.message,
        finding.error_type, "", {name: "fails"}, {name: finding.message}, {name: resolve_fold(name).version()},
    )  # fmt: skip
    script = tmp_path / "repro.py"
    script.write_text(render_script(entry))
    done = run_script_without_tvm(script)
    assert done.returncode == 1 and line in done.stdout, done.stdout + done.stderr


def test_pipelines_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--pass", "onnxsim", "--pipelines", "--max-examples", "1"]) == 2
    assert "pipelines are TVM's" in capsys.readouterr().err


CORPUS_ENTRIES = sorted((ROOT / "corpus" / "onnx-tools").glob("*.json"))


@pytest.mark.parametrize("path", CORPUS_ENTRIES, ids=[p.name for p in CORPUS_ENTRIES])
def test_a_corpus_entry_replays_as_it_expects(path: Path) -> None:
    entry = load_entry(path)
    assert entry.pass_name in MODEL_TOOLS and entry.expect[entry.pass_name] == "fails"
    for name in entry.expect:
        assert replay(entry, name).as_expected, name
