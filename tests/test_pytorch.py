"""PyTorch's folds as a backend: the case as a module (every spelling computes the same),
hand-made cases with a known verdict either way for each fold, the unfolded run against
the bound, the property over drawn cases, and the command line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch backend needs torch: pip install -e '.[torch]'")

from cases import make_case  # noqa: E402
from hypothesis import Phase, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from script_batch import run_scripts  # noqa: E402
from test_property import bn_constants_out_of_range  # noqa: E402
from without_tvm import run_script_without_tvm  # noqa: E402

from fuzz.backends import backend_of, resolve_fold  # noqa: E402
from fuzz.backends.torch import TorchFold, TorchRejects, materialise, run_module  # noqa: E402
from fuzz.engine.check import check  # noqa: E402
from fuzz.engine.replay import replay  # noqa: E402
from fuzz.engine.run import RunConfig  # noqa: E402
from fuzz.errors import UsageError  # noqa: E402
from fuzz.model.case import Case, Epilogue, Topology  # noqa: E402
from fuzz.model.case_json import case_from_json, case_to_json  # noqa: E402
from fuzz.model.form import Form, Importer, TorchForm  # noqa: E402
from fuzz.model.tensor import CaseError  # noqa: E402
from fuzz.model.torch_model import FOLDS, fold_source, torch_model  # noqa: E402
from fuzz.oracle.execution import Failure, Outputs  # noqa: E402
from fuzz.oracle.verdict import Symptom  # noqa: E402
from fuzz.render.report import issue_of  # noqa: E402
from fuzz.render.script import render_script  # noqa: E402
from fuzz.render.torch import at_fault  # noqa: E402
from fuzz.store.corpus import Entry, load_entry  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ONE = {"c_in": 1, "c_out": 1, "height": 1, "width": 1, "kh": 1, "kw": 1}
NAMES = [f"torch:{name}" for name in FOLDS]
#: every fold, Inductor's marked slow: its first compile in a process takes tens of seconds
FOLDS_TIERED = [
    pytest.param(name, marks=pytest.mark.slow) if name == "torch:inductor" else name for name in NAMES
]


def torch_case(form: TorchForm | None = None, **kwargs: Any) -> Case:
    return make_case(form=Form(Importer.TORCH, torch=form or TorchForm()), **kwargs)


def unfolded(case: Case) -> Outputs | Failure:
    model = torch_model(case)
    return run_module(*materialise(model), model)


def test_names_resolve_to_the_torch_backend() -> None:
    for name in NAMES:
        fold = resolve_fold(name)
        assert isinstance(fold, TorchFold) and fold.framework == "torch" and backend_of(name).key == "torch"
    with pytest.raises(UsageError, match="torch:fuse_conv_bn_eval"):
        resolve_fold("torch:nothing")


def test_the_module_holds_the_case_values_exactly() -> None:
    case = torch_case(dtype="bfloat16", bias=True, values={"gamma": [1.5, -0.0078125, 3e38]})
    module, (x,) = materialise(torch_model(case))
    block = case.blocks[0]
    assert module.bn0.weight.dtype == torch.bfloat16 and module.training is False
    for got, tensor in [
        (module.bn0.weight, block.gamma),
        (module.conv0.weight, block.weight),
        (module.conv0.bias, block.bias),
        (x, case.data),
    ]:
        assert tensor is not None
        np.testing.assert_array_equal(got.detach().double().numpy(), tensor.float64())


def test_a_form_round_trips_through_json_and_a_module_cannot_say_everything() -> None:
    case = torch_case(TorchForm(rank=3, transpose=True, channels_last=True), bias=True)
    assert case_from_json(case_to_json(case)) == case
    assert "torch" not in case_to_json(torch_case())["form"]
    with pytest.raises(CaseError, match="affine"):
        torch_case(center=False)
    with pytest.raises(CaseError, match="no parameters"):
        torch_case(parameters=("gamma",))
    with pytest.raises(CaseError, match="two values or more"):
        torch_case(training=True, **ONE)
    with pytest.raises(CaseError, match="rank 2 and 3"):
        TorchForm(rank=1, channels_last=True)
    with pytest.raises(CaseError, match="keep it default"):
        Form(torch=TorchForm(rank=3))


#: convolutions a 1-D module can say (height 1, kernel height 1), with asymmetric padding
#: (a ZeroPad module), and grouped with symmetric padding
LINE = dict(c_in=2, c_out=4, height=1, width=5, kh=1, kw=3, padding=(0, 1, 0, 2))
GROUPED = dict(c_in=4, c_out=6, height=4, width=5, kh=2, kw=3, groups=2, padding=(1, 1, 1, 1))
FORMS = [
    TorchForm(rank=1),
    TorchForm(rank=3),
    TorchForm(transpose=True),
    TorchForm(rank=1, transpose=True),
    TorchForm(rank=3, transpose=True),
    TorchForm(channels_last=True),
    TorchForm(rank=3, channels_last=True),
]


@pytest.mark.parametrize("geometry", [LINE, GROUPED], ids=["line", "grouped"])
@pytest.mark.parametrize("form", FORMS, ids=str)
@pytest.mark.parametrize("topology", [Topology.CONV_BN, Topology.CHAIN, Topology.CONV_SHARED])
def test_every_spelling_computes_what_the_plain_module_computes(
    geometry: dict[str, Any], form: TorchForm, topology: Topology
) -> None:
    if form.rank == 1 and geometry is GROUPED:
        return  # height 4: refused (test_a_form_round_trips_through_json_...)
    plain = torch_case(topology=topology, bias=True, **geometry)
    written = torch_case(form, topology=topology, bias=True, **geometry)
    expected, got = unfolded(plain), unfolded(written)
    assert isinstance(expected, Outputs) and isinstance(got, Outputs), got
    assert got.shapes == expected.shapes
    for e, g in zip(expected.values, got.values, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)  # summation order differs


@pytest.mark.parametrize("name", FOLDS_TIERED)
def test_a_plain_case_has_no_finding_and_is_folded(name: str) -> None:
    case = torch_case(topology=Topology.CHAIN, bias=True, epilogue=Epilogue.RELU)
    checked = check(case, resolve_fold(name))
    assert checked.verdict.findings == (), checked.verdict
    assert checked.execution.fired and checked.execution.changed
    if name != "torch:inductor":  # a compiled graph has no modules to count
        before, after = checked.execution.op_counts or ({}, {})
        assert (before["batch_norm"], after["batch_norm"]) == (2, 0)


@pytest.mark.slow
def test_inductor_leaves_batch_statistics_and_fails_on_a_float64_conv() -> None:
    inductor = resolve_fold("torch:inductor")
    kept = check(torch_case(training=True, batch=2), inductor)
    assert kept.verdict.findings == () and not kept.execution.fired
    raised = check(torch_case(dtype="float64"), inductor).verdict.primary
    assert raised is not None and raised.symptom is Symptom.PASS_EXCEPTION
    assert "itensor_view_from_dense" in raised.message  # eager runs it: test_every_spelling...


@pytest.mark.parametrize("name", FOLDS_TIERED)
def test_folded_weights_out_of_range_turn_a_finite_output_into_nan(name: str) -> None:
    # W * gamma / sqrt(var + eps) = 1e30 * 1e10 overflows float32; x = 0 makes the conv 0,
    # so the unfolded output is beta - mean * s = -1e10, and the folded one inf * 0 = NaN.
    case = torch_case(**ONE, values={"x": 0.0, "weight": 1e30, "gamma": 1e10, "mean": 1.0, "var": 1.0})
    finding = check(case, resolve_fold(name)).verdict.primary
    assert finding is not None and finding.symptom is Symptom.FINITE_TO_NONFINITE, finding
    # the same magnitudes with a weight that keeps W * s finite: no finding
    case = torch_case(**ONE, values={"x": 0.0, "weight": 1e20, "gamma": 1e10, "mean": 1.0, "var": 1.0})
    assert check(case, resolve_fold(name)).verdict.findings == ()


def test_batch_statistics_are_left_alone_by_fx_and_raise_in_fuse_modules() -> None:
    case = torch_case(training=True, batch=2)
    fx = check(case, resolve_fold("torch:fx"))
    assert fx.verdict.findings == () and not fx.execution.fired
    raised = check(case, resolve_fold("torch:fuse_modules")).verdict.primary
    assert raised is not None and raised.symptom is Symptom.PASS_EXCEPTION
    assert raised.error_type == "AssertionError" and "running_mean" in raised.message


def test_fx_leaves_a_conv_whose_output_is_used_twice() -> None:
    checked = check(torch_case(topology=Topology.CONV_SHARED), resolve_fold("torch:fx"))
    assert checked.verdict.findings == () and not checked.execution.fired


def test_the_fold_source_is_what_a_user_writes() -> None:
    model = torch_model(torch_case(TorchForm(transpose=True), topology=Topology.CHAIN, kh=1, kw=1))
    source = fold_source("fuse_conv_bn_eval", model)
    assert "folded.conv1 = fuse_conv_bn_eval(folded.conv1, folded.bn1, transpose=True)" in source
    assert "fuse_modules(model, [['conv0', 'bn0', 'relu0'], ['conv1', 'bn1']])" in fold_source(
        "fuse_modules", model
    )
    with pytest.raises(ValueError, match="unknown PyTorch fold"):
        fold_source("inductor:max-autotune", model)


def test_a_case_of_another_importer_is_refused() -> None:
    with pytest.raises(TorchRejects, match="PyTorch form"):
        check(make_case(), resolve_fold("torch:fx"))


OVERFLOW = {"x": 0.0, "weight": 1e30, "gamma": 1e10, "mean": 1.0, "var": 1.0}


def _entry(case: Case, name: str) -> Entry:
    finding = check(case, resolve_fold(name)).verdict.primary
    assert finding is not None
    signature = f"{name}:{finding.symptom.value}"
    return Entry(
        case, name, finding.symptom, finding.stage, signature, finding.message, finding.error_type, "",
        {name: "fails"}, {name: finding.message},
        {"torch": str(torch.__version__), "python": "3", "platform": "linux"},
    )  # fmt: skip


def test_the_issue_follows_pytorch_s_bug_template_and_names_the_function_at_fault() -> None:
    overflow = issue_of([_entry(torch_case(values=OVERFLOW, **ONE), "torch:fx")])
    assert overflow.project == "pytorch/pytorch"
    assert overflow.title.startswith("`torch.fx.experimental.optimization.fuse` ")
    headings = [line for line in overflow.body.splitlines() if line.startswith("### ")]
    assert headings == ["### 🐛 Describe the bug", "### Versions"]
    assert "fuse_conv_bn_weights" in overflow.body and "import tvm" not in overflow.body
    raised = issue_of([_entry(torch_case(training=True, batch=2), "torch:fuse_modules")])
    assert "track_running_stats=False" in raised.body and "fuser_method_mappings.py" in raised.body
    # by the fold and an attribute, without running it: Inductor's float64 failure
    float64 = replace(
        _entry(torch_case(training=True, batch=2), "torch:fuse_modules"), pass_name="torch:inductor"
    )
    assert "_is_packable_convolution" not in at_fault(float64)
    assert "_is_packable_convolution" in at_fault(replace(float64, case=torch_case(dtype="float64")))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "name", "line"),
    [
        (
            torch_case(values=OVERFLOW, **ONE),
            "torch:fuse_conv_bn_eval",
            "BUG: finite outputs became inf or NaN",
        ),
        (
            torch_case(TorchForm(rank=3, transpose=True, channels_last=True), values=OVERFLOW, **ONE),
            "torch:fuse_conv_bn_eval",
            "BUG: finite outputs became inf or NaN",
        ),
        (torch_case(training=True, batch=2), "torch:fuse_modules", "raises on a module it should fold"),
    ],
    ids=["overflow", "transposed-3d-channels-last", "batch-statistics"],
)
def test_the_script_needs_only_torch_and_shows_the_bug(
    case: Case, name: str, line: str, tmp_path: Path
) -> None:
    script = tmp_path / "repro.py"
    entry = _entry(case, name)
    script.write_text(render_script(entry))
    done = run_script_without_tvm(script)
    assert done.returncode == 1 and line in done.stdout, done.stdout + done.stderr
    # the same script on a module whose folded weights stay in range shows no bug
    benign = torch_case(values=OVERFLOW | {"weight": 1e20}, **ONE)
    script.write_text(render_script(replace(entry, case=benign)))
    done = run_script_without_tvm(script)
    assert done.returncode == 0 and "no bug" in done.stdout.lower(), done.stdout + done.stderr


@given(data=st.data())
def test_the_unfolded_run_is_within_its_bound(data: st.DataObject) -> None:
    # PyTorch's batch-norm CPU kernel, like ONNX Runtime's, computes x * s + b with its own
    # constants: out of range, the unfolded output is not the exact one (its kernel's defect)
    fold = resolve_fold("torch:fx")
    case = data.draw(fold.cases())
    verdict = check(case, fold).verdict
    misses = [f for f in verdict.lowering if f.symptom is Symptom.BASELINE_OUT_OF_TOLERANCE]
    if misses and bn_constants_out_of_range(case):
        event("torch unfolded: the kernel's own batch-norm constants out of range")
        return
    assert misses == [], misses[0].message if misses else ""


@pytest.mark.xfail(strict=True, reason="each of PyTorch's folds overflows folded weights (docs/backends.md)")
@pytest.mark.parametrize(
    "name",
    # Inductor compiles each value set: a minute of CPU before its first hit
    [
        pytest.param(n, marks=[pytest.mark.slow, pytest.mark.nightly]) if n == "torch:inductor" else n
        for n in NAMES
    ],
)
# a hit is enough: no shrinking; up to 600 examples (the test ends at the first hit)
@settings(phases=[Phase.explicit, Phase.reuse, Phase.generate], max_examples=600)
@given(data=st.data())
def test_torch_fold_has_no_finding(name: str, data: st.DataObject) -> None:
    fold = resolve_fold(name)
    case = data.draw(fold.cases())
    verdict = check(case, fold).verdict
    assert verdict.primary is None, verdict.primary


def test_its_campaigns_check_in_a_worker_process_by_default() -> None:
    # oneDNN's convolution segfaulted in a campaign of torch:fuse_conv_bn_eval: a crash must
    # become a finding, not end the campaign
    assert RunConfig("torch:fuse_conv_bn_eval").isolated and not RunConfig("upstream").isolated
    assert not RunConfig("torch:fx", isolate=False).isolated


TORCH_ENTRIES = sorted((ROOT / "corpus" / "torch").glob("*.json"))


def _tiered(paths: list[Path]) -> list[Any]:
    """Inductor's entries marked slow: each replay compiles."""
    return [
        pytest.param(p, id=p.name, marks=pytest.mark.slow)
        if "inductor" in p.name
        else pytest.param(p, id=p.name)
        for p in paths
    ]


@pytest.mark.parametrize("path", _tiered(TORCH_ENTRIES))
def test_a_corpus_entry_replays_as_it_expects(path: Path) -> None:
    entry = load_entry(path)
    assert backend_of(entry.pass_name).key == "torch" and entry.expect[entry.pass_name] == "fails"
    for name in entry.expect:
        assert replay(entry, name).as_expected, name


@pytest.mark.slow
def test_every_corpus_entry_s_script_reproduces_with_torch_alone() -> None:
    """The quick sibling of the test below: every script in one interpreter where neither
    TVM nor this project can be imported."""
    entries = {path.name: load_entry(path) for path in TORCH_ENTRIES}
    runs = run_scripts(
        {name: render_script(entry) for name, entry in entries.items()},
        block=("tvm", "tvm_ffi", "fuzz", "strategies"),
    )
    for name, entry in entries.items():
        done = runs[name]
        assert done.returncode == 1 and "BUG:" in done.stdout, f"{name}:\n{done.stdout}{done.stderr}"
        issue = issue_of([entry])
        assert issue.project == "pytorch/pytorch" and at_fault(entry) in issue.body


@pytest.mark.slow
@pytest.mark.nightly  # each in its own interpreter: the batch above is the quick sibling
@pytest.mark.parametrize("path", TORCH_ENTRIES, ids=[p.name for p in TORCH_ENTRIES])
def test_a_corpus_entry_s_script_reproduces_with_torch_alone(path: Path, tmp_path: Path) -> None:
    entry = load_entry(path)
    script = tmp_path / "repro.py"
    script.write_text(render_script(entry))
    done = run_script_without_tvm(script)
    assert done.returncode == 1 and "BUG:" in done.stdout, done.stdout + done.stderr
    issue = issue_of([entry])
    assert issue.project == "pytorch/pytorch" and at_fault(entry) in issue.body
