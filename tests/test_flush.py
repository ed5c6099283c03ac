"""Flushed subnormals: a correct program may replace a subnormal by zero at any operation
(flush-to-zero, denormals-are-zero), so no verdict may depend on whether a kernel does,
by the CPU's choice or the process's settings. The bound allows it (fuzz/oracle/reference.py),
the check pins the settings and records them (fuzz/fpenv.py), and every finding and entry
records the machine, so a replay elsewhere can say why it differs."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cases import make_case
from replays import CORPUS

from fuzz.backends import backend_of, resolve_fold
from fuzz.cli import main
from fuzz.engine.check import check
from fuzz.engine.replay import replay
from fuzz.fpenv import flush_state, machine, machine_differences, pinned
from fuzz.model.case import Case
from fuzz.model.form import Form, Importer, TorchForm
from fuzz.oracle.execution import Execution, Outputs
from fuzz.oracle.reference import reference
from fuzz.oracle.verdict import Symptom, judge
from fuzz.store.corpus import dumps_entry, load_entry

ONE = {"c_in": 1, "c_out": 1, "height": 1, "width": 1, "kh": 1, "kw": 1}
#: bfloat16's (and float32's) largest subnormal is below this
BF16_MIN_NORMAL = 2.0**-126
#: The case a flushing bfloat16 convolution kernel turned into a false alarm: gamma = 0, so
#: the folded weight is 0 and the folded bias is beta, a subnormal; the unfolded program
#: gives beta, a kernel that flushes gives 0.
SUBNORMAL_BIAS = {
    "x": 1.0,
    "weight": 1.0,
    "gamma": 0.0,
    "beta": 9.642727096589077e-39,
    "mean": 1.0,
    "var": 1.0,
}
X86 = platform.machine().lower() in ("x86_64", "amd64")
needs_x86 = pytest.mark.skipif(not X86, reason="the flush bits are set through x86-64's MXCSR")


def outputs(value: float, dtype: str) -> Outputs:
    return Outputs((np.full((1, 1, 1, 1), value),), (dtype,), ((1, 1, 1, 1),))


def verdict_symptoms(case: Case, unfolded: float, folded: float) -> list[Symptom]:
    """The oracle's symptoms for a one-element case given both programs' outputs."""
    execution = Execution(
        baseline=outputs(unfolded, case.dtype),
        folded=outputs(folded, case.dtype),
        changed=True,
        fired=True,
        idempotent=True,
        pass_seconds=0.0,
        build_seconds=0.0,
    )
    return [f.symptom for f in judge(case, execution, reference(case)).findings]


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_subnormal_bias_kept_or_flushed_is_no_finding(dtype: str) -> None:
    case = make_case(dtype=dtype, **ONE, values=SUBNORMAL_BIAS)
    beta = SUBNORMAL_BIAS["beta"]
    assert 0 < beta < BF16_MIN_NORMAL
    assert verdict_symptoms(case, beta, beta) == []  # neither flushes
    assert verdict_symptoms(case, beta, 0.0) == []  # the folded kernel flushes
    assert verdict_symptoms(case, 0.0, 0.0) == []  # both do (the process flushes)
    assert verdict_symptoms(case, 0.0, beta) == []  # only the unfolded one does


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_difference_above_what_flushing_explains_is_still_a_finding(dtype: str) -> None:
    case = make_case(dtype=dtype, **ONE, values=SUBNORMAL_BIAS)
    beta = SUBNORMAL_BIAS["beta"]
    # a thousand times the smallest normal: no flush of anything in this case gives that
    assert verdict_symptoms(case, beta, 1000 * BF16_MIN_NORMAL) == [Symptom.OUT_OF_TOLERANCE]
    assert verdict_symptoms(case, beta, -beta) == []  # within: the sign of a flushed value's error
    assert verdict_symptoms(case, beta, 1.0) == [Symptom.OUT_OF_TOLERANCE]


def test_an_operand_that_is_itself_subnormal_may_be_read_as_zero() -> None:
    # W = 2**-129 is subnormal in float32: a kernel that reads denormals as zero computes
    # (0 - mean) * s instead of (x * W - mean) * s; x * W = 2**-3 is far from 0.
    case = make_case(
        **ONE, values={"x": 2.0**126, "weight": 2.0**-129, "gamma": 1.0, "beta": 0.0, "mean": 0.0, "var": 1.0}
    )
    exact = float(reference(case).outputs[0].value.ravel()[0])
    assert exact == pytest.approx(0.125, rel=1e-4)
    assert verdict_symptoms(case, exact, 0.0) == []
    # a normal weight read as zero is no flush: found
    normal = make_case(
        **ONE, values={"x": 0.125, "weight": 1.0, "gamma": 1.0, "beta": 0.0, "mean": 0.0, "var": 1.0}
    )
    assert verdict_symptoms(normal, 0.125, 0.0) == [Symptom.OUT_OF_TOLERANCE]


def test_a_subnormal_folded_scale_that_costs_normal_range_precision_is_still_found() -> None:
    # TVM's subnormal-scale class: every operand normal, s = gamma / sqrt(var + eps) about
    # 3e-44 (subnormal), mean * s about 3e-31 (normal): a folded bias that lost its bits
    # is off by 1.6% of the output, far above anything flushing explains.
    entry = load_entry(CORPUS / "out-of-tolerance.json")
    for name in ("gamma", "beta", "mean", "var", "weight"):
        tensor = getattr(entry.case.blocks[0], name)
        assert all(v == 0 or abs(v) >= BF16_MIN_NORMAL for v in tensor.values), name
    exact = float(reference(entry.case).outputs[0].value.ravel()[0])
    assert abs(exact) > 1e-32
    assert verdict_symptoms(entry.case, exact, exact * 1.016) == [Symptom.OUT_OF_TOLERANCE]


@needs_x86
@pytest.mark.parametrize("flush", [False, True])
def test_the_subnormal_scale_entry_fails_on_upstream_and_passes_on_fixed_flushed_or_not(flush: bool) -> None:
    entry = load_entry(CORPUS / "out-of-tolerance.json")
    up = replay(entry, "upstream", flush=flush)
    assert up.status == "fails" and up.checked.verdict.primary is not None
    assert up.checked.verdict.primary.symptom is Symptom.OUT_OF_TOLERANCE
    assert up.checked.flush["ftz"] is flush
    assert replay(entry, "fixed", flush=flush).status == "passes"


def torch_case(**kwargs: Any) -> Case:
    return make_case(form=Form(Importer.TORCH, torch=TorchForm()), **kwargs)


@needs_x86
@pytest.mark.parametrize("flush", [False, True])
@pytest.mark.parametrize("name", ["torch:fuse_conv_bn_eval", "torch:fuse_modules", "torch:fx"])
def test_pytorch_s_folds_on_the_subnormal_bias_are_no_finding_flushed_or_not(name: str, flush: bool) -> None:
    pytest.importorskip("torch", reason="PyTorch's folds need the torch extra")
    checked = check(
        torch_case(dtype="bfloat16", **ONE, values=SUBNORMAL_BIAS), resolve_fold(name), flush=flush
    )
    assert checked.verdict.findings == (), checked.verdict.primary
    assert checked.flush["ftz"] is flush and checked.flush["daz"] is flush
    if flush:  # the flush really reached the kernels: the unfolded module's beta is gone too
        assert isinstance(checked.execution.baseline, Outputs)
        assert float(checked.execution.baseline.values[0].ravel()[0]) == 0.0


@needs_x86
def test_the_process_s_flush_settings_do_not_reach_the_check() -> None:
    case = torch_case(dtype="bfloat16", **ONE, values=SUBNORMAL_BIAS)
    fold = resolve_fold("torch:fuse_conv_bn_eval")
    pytest.importorskip("torch")
    quiet = check(case, fold, flush=False)
    with pinned(flush=True):  # as torch.set_flush_denormal(True) leaves a process
        assert flush_state()["ftz"] and flush_state()["daz"]
        loud = check(case, fold, flush=False)
        assert flush_state()["ftz"]  # the caller's settings come back
    assert loud.flush == quiet.flush and not loud.flush["ftz"] and not loud.flush["daz"]
    assert loud.execution.baseline == quiet.execution.baseline


@needs_x86
def test_pinned_sets_and_restores_the_flush_bits() -> None:
    def flushes() -> tuple[bool, bool]:
        with np.errstate(all="ignore"):
            return (
                bool(np.float32(2.0**-126) * np.float32(0.5) == 0),  # a subnormal result
                bool(np.float32(2.0**-149) * np.float32(2.0**30) == 0),  # a subnormal operand
            )

    before = flush_state()
    assert flushes() == (before["ftz"], before["daz"])
    with pinned(flush=True) as state:
        assert flushes() == (True, True) and state["ftz"] and state["daz"]
        with pinned() as inner:
            assert flushes() == (False, False) and not inner["ftz"]
        assert flushes() == (True, True)
    assert flush_state() == before


#: The quick tier's entries on PyTorch's folds and on ONNX Runtime (its own fold, and the
#: model tools whose models it runs): Inductor's compile per replay is the slow tier's.
FLUSH_ENTRIES = sorted(
    p
    for folder in ("torch", "onnxruntime", "onnx-tools")
    for p in (CORPUS / folder).glob("*.json")
    if "inductor" not in p.name
)


@needs_x86
@pytest.mark.parametrize("path", FLUSH_ENTRIES, ids=[p.stem for p in FLUSH_ENTRIES])
def test_torch_and_onnx_runtime_entries_give_the_same_verdicts_flushed_or_not(path: Path) -> None:
    entry = load_entry(path)
    names = [n for n in entry.expect if not backend_of(n).tvm_passes]
    assert names, "each of these entries records a PyTorch or ONNX expectation"
    for name in names:
        kept, flushed = replay(entry, name), replay(entry, name, flush=True)
        assert kept.status == flushed.status == entry.expect[name], name
        if kept.checked.verdict.primary is not None:
            assert flushed.checked.verdict.primary is not None
            assert kept.checked.verdict.primary.symptom == flushed.checked.verdict.primary.symptom, name


def test_the_machine_record_names_the_cpu_its_kernel_flags_and_the_flush_settings() -> None:
    record = machine()
    assert record["cpu"]["model"] and record["cpu"]["arch"] == platform.machine()
    assert isinstance(record["cpu"]["flags"], list) and record["cores"] >= 1
    assert set(record["flush"]) >= {"ftz", "daz"}
    json.dumps(record)  # stored as it is in findings and entries


def test_machine_differences_show_what_can_change_kernels() -> None:
    here = {
        "cpu": {"model": "AMD EPYC", "arch": "x86_64", "flags": ["avx2", "avx512f"]},
        "flush": {"ftz": False, "daz": False},
    }
    assert machine_differences(here, here) == []
    other = {
        "cpu": {"model": "Intel Xeon", "arch": "x86_64", "flags": ["avx2", "avx512f", "avx512_bf16"]},
        "flush": {"ftz": False, "daz": False},
    }
    lines = machine_differences(other, here)
    assert lines[0].startswith("recorded CPU: Intel Xeon") and "avx512_bf16" in lines[0]
    assert lines[1].startswith("this CPU:     AMD EPYC")
    assert lines[2] == "kernel flags missing here: avx512_bf16"
    flushed = machine_differences(here | {"flush": {"ftz": True, "daz": True}}, here)
    assert flushed == ["flush settings recorded: ftz on, daz on; here: ftz off, daz off"]
    assert machine_differences(None, here) == [
        "the entry records no machine (written before machines were recorded)"
    ]


def test_every_shipped_entry_records_its_machine() -> None:
    for path in sorted(CORPUS.rglob("*.json")):
        recorded = load_entry(path).provenance.get("machine")
        assert recorded, path
        assert recorded["cpu"]["model"] and "flags" in recorded["cpu"], path
        assert set(recorded["flush"]) >= {"ftz", "daz"}, path


def test_replay_says_an_entry_does_not_reproduce_on_this_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An entry measured elsewhere (another CPU, its bfloat16 kernel) that passes here.
    case = make_case(dtype="float32", **ONE, values=SUBNORMAL_BIAS)
    entry = load_entry(CORPUS / "out-of-tolerance.json")
    elsewhere = {
        "cpu": {"model": "Some Other CPU", "arch": "x86_64", "flags": ["avx512_bf16", "amx_bf16"]},
        "flush": {"ftz": False, "daz": False},
    }
    moved = replace(
        entry,
        case=case,
        signature="out-of-tolerance[elsewhere]",
        expect={"upstream": "fails"},
        provenance=entry.provenance | {"machine": elsewhere},
    )
    path = tmp_path / "elsewhere.json"
    path.write_text(dumps_entry(moved))
    assert main(["replay", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"FAIL {path} on upstream: passes (expected fails)" in out
    assert "does not reproduce on this CPU; the entry was measured on another machine:" in out
    assert "recorded CPU: Some Other CPU (x86_64; avx512_bf16 amx_bf16)" in out
    assert f"this CPU:     {machine()['cpu']['model']}" in out


@needs_x86
@pytest.mark.slow  # a fresh interpreter that imports torch
def test_the_flush_tool_flushes_every_process_it_starts_in() -> None:
    pytest.importorskip("torch")
    tool = Path(__file__).resolve().parent.parent / "tools" / "flush-denormal"
    code = "import json; from fuzz.fpenv import flush_state; print(json.dumps(flush_state()))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tool)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    state = json.loads(done.stdout)
    assert state["ftz"] is True and state["daz"] is True


@needs_x86
def test_the_library_keeps_subnormals_in_a_process_that_flushes() -> None:
    from fuzz.model.tensor import Tensor

    bits = round(1e-40 * 2.0**149)  # float32's bits of 1e-40: a subnormal, in units of 2**-149
    with pinned(flush=True):  # the process state torch.set_flush_denormal(True) leaves
        assert np.array([1e-40]).astype(np.float32).view(np.uint32)[0] == 0  # NumPy flushes
        tensor = Tensor.from_numpy(np.array([1e-40]), "float32")
        assert tensor.values[0] != 0.0
        assert tensor.numpy().view(np.uint32)[0] == bits
        case = make_case(dtype="float32", **ONE, values=SUBNORMAL_BIAS)
        assert float(reference(case).outputs[0].value.ravel()[0]) == SUBNORMAL_BIAS["beta"]
        assert flush_state()["ftz"]  # and the caller's setting is left as it was
