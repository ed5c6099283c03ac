"""TVM users' ONNX path as a backend (``tvm:onnx``): the model imported by TVM's ONNX frontend,
then the fold; it draws every way of writing the model the frontend imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cases import make_case
from hypothesis import given, settings

from fuzz.backends import backend_of, resolve_fold
from fuzz.backends.tvm.passes import UnknownPass
from fuzz.engine.check import check
from fuzz.model.case import Case
from fuzz.model.form import Form, Importer, OnnxForm
from fuzz.oracle.verdict import Symptom

ROOT = Path(__file__).resolve().parent.parent
EPS32 = float(np.float32(1e-5))
ONE = {"c_in": 1, "c_out": 1, "height": 1, "width": 1, "kh": 1, "kw": 1}
#: x = 0, W * gamma / sqrt(var + eps) = 1e30 * 1e10 overflows float32 (see test_onnx_tools.py)
OVERFLOW = {"x": 0.0, "weight": 1e30, "gamma": 1e10, "mean": 1.0, "var": 1.0}
TVM_ONNX = resolve_fold("tvm:onnx")


def test_the_onnx_path_ends_in_upstream_or_the_pass_named() -> None:
    assert TVM_ONNX.framework == backend_of("tvm:onnx").key == "tvm" and TVM_ONNX.onnx_only
    fixed = resolve_fold("tvm:onnx:fixed")
    assert fixed.onnx_only and fixed.name == "tvm:onnx:fixed" and fixed.complete_fold
    with pytest.raises(UnknownPass):
        resolve_fold("tvm:onnx:nonsense")


@settings(max_examples=60, deadline=None)
@given(case=TVM_ONNX.cases())
def test_it_draws_onnx_models_the_frontend_imports(case: Case) -> None:
    assert case.form.importer is Importer.ONNX
    assert case.form.onnx.spatial is not False and case.form.onnx.overridden == ()


@pytest.mark.parametrize(
    "form",
    [OnnxForm(opset=9), OnnxForm(opset=7, ir_version=3, initializer_inputs=True), OnnxForm(value_info=True)],
)
def test_the_overflow_class_through_the_frontend_and_not_in_our_pass(form: OnnxForm) -> None:
    case = make_case(form=Form(Importer.ONNX, onnx=form), epsilon=EPS32, values=OVERFLOW, **ONE)
    finding = check(case, TVM_ONNX).verdict.primary
    assert finding is not None and finding.symptom is Symptom.FINITE_TO_NONFINITE
    assert check(case, resolve_fold("tvm:onnx:fixed")).verdict.findings == ()


@pytest.mark.slow
def test_a_campaign_on_the_onnx_path(tmp_path: Path) -> None:
    command = ["run", "--pass", "tvm:onnx", "--max-examples", "200", "--shrink-seconds", "0", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "fuzz.cli", *command, "--out", str(tmp_path / "findings")],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    summary = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr
    assert "finite-to-nonfinite" in {f["symptom"] for f in summary["findings"]}, summary["findings"]
