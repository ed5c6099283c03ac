"""Pipelines: the spec, gating, the pipeline oracles on real TVM passes (each with a
positive and a negative case), signatures and shrinking, and reproducer scripts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cases import make_case
from hypothesis import find
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import strategies
from fuzz.backends.tvm.compile_cache import CompileCache
from fuzz.backends.tvm.passes import resolve_pass
from fuzz.backends.tvm.pipeline import gated
from fuzz.cli import main
from fuzz.engine.check import check
from fuzz.model.case_json import case_to_json
from fuzz.model.pipeline import (
    DEFAULT_PIPELINE,
    NEIGHBOURS,
    Pipeline,
    PipelineError,
    pipeline_from_json,
    pipeline_to_json,
)
from fuzz.oracle.execution import Stage
from fuzz.oracle.signature import Signature
from fuzz.oracle.verdict import Finding, Symptom
from fuzz.render.report import render_issue, render_script
from fuzz.store.corpus import load_entry

ROOT = Path(__file__).resolve().parent.parent
FIXED = resolve_pass("fixed")
UPSTREAM = resolve_pass("upstream")
SMALL = dict(c_in=1, c_out=1, height=1, width=1, kh=1, kw=1)


def test_a_pipeline_round_trips_and_bad_ones_name_the_field() -> None:
    p = Pipeline(("ConvertLayout(NHWC,OHWI)", "fold"), 1, False)
    assert pipeline_from_json(json.loads(json.dumps(pipeline_to_json(p)))) == p
    with pytest.raises(PipelineError, match="passes: unknown pass 'Fold'"):
        Pipeline(("Fold",))
    with pytest.raises(PipelineError, match="opt_level: must be 0 to 4"):
        Pipeline(("fold",), 7)
    with pytest.raises(PipelineError, match="sequential"):
        pipeline_from_json({"passes": ["fold"], "opt_level": 3, "sequential": "yes"})


def test_a_pipeline_contains_its_parts() -> None:
    long = Pipeline(("FoldConstant", "LegalizeOps", "fold"), 2, False)
    assert long.label == "FoldConstant+LegalizeOps+fold O2 direct"
    assert long.contains(Pipeline(("LegalizeOps",))) and long.contains(
        Pipeline(("FoldConstant", "fold"), 3, False)
    )
    assert not long.contains(Pipeline(("fold", "LegalizeOps")))  # order matters
    assert not long.contains(Pipeline(("LegalizeOps",), 1))
    assert not Pipeline(("LegalizeOps",)).contains(Pipeline(("LegalizeOps",), 3, False))  # direct only


def test_gating_is_named_for_a_sequential_only() -> None:
    low = Pipeline(("DeadCodeElimination", "fold", "Normalize"), 0)
    assert gated(low, FIXED) == ("DeadCodeElimination", "Normalize")
    assert gated(Pipeline(low.passes, 0, sequential=False), FIXED) == ()
    assert gated(Pipeline(low.passes, 1), FIXED) == ()


def test_a_gated_pass_is_an_event_not_a_finding() -> None:
    checked = check(make_case(), FIXED, pipeline=Pipeline(("DeadCodeElimination", "fold"), 0))
    assert checked.verdict.findings == () and checked.gated == ("DeadCodeElimination",)


def test_decompose_for_inference_on_training_mode_is_a_finding() -> None:
    decompose = Pipeline(("DecomposeOpsForInference",))
    training = check(make_case(training=True), FIXED, pipeline=decompose)
    assert training.verdict.primary is not None
    assert training.verdict.primary.symptom is Symptom.OUT_OF_TOLERANCE
    assert check(make_case(), FIXED, pipeline=decompose).verdict.findings == ()  # inference: fine


def test_sequential_and_direct_calls_must_agree() -> None:
    flaky = resolve_pass("tests.flaky_pass:make")
    checked = check(make_case(**SMALL), flaky, pipeline=Pipeline(("fold", "CanonicalizeBindings")))
    assert [f.symptom for f in checked.verdict.findings] == [Symptom.SEQUENTIAL_MISMATCH]
    steady = check(make_case(**SMALL), FIXED, pipeline=Pipeline(("fold", "CanonicalizeBindings")))
    assert steady.verdict.findings == ()


def test_mixed_precision_is_judged_by_shapes_only() -> None:
    huge = make_case(values={"x": 1e30})  # inf in float16: not a finding of the pass
    checked = check(huge, FIXED, pipeline=Pipeline(("ToMixedPrecision", "fold")))
    assert checked.verdict.findings == ()


def test_legalized_functions_survive_the_compile_cache() -> None:
    # Regression: lifting constants for the cache dropped the module's PrimFuncs.
    cache = CompileCache()
    for passes in (
        ("LegalizeOps",),
        ("LegalizeOps", "FuseOps", "FuseTIR"),
        ("FuseOps", "fold", "LegalizeOps"),
    ):
        assert check(make_case(), FIXED, cache.run, Pipeline(passes)).verdict.findings == ()


def test_every_neighbour_runs_on_a_plain_graph() -> None:
    for name in NEIGHBOURS:
        checked = check(make_case(), FIXED, pipeline=Pipeline((name, "fold")))
        assert checked.verdict.findings == (), name


def test_signatures_carry_a_pipeline_other_than_the_default() -> None:
    finding = Finding(Symptom.OUT_OF_TOLERANCE, Stage.COMPARE, "")
    case = make_case()
    assert str(Signature.of(finding, case, DEFAULT_PIPELINE)) == "out-of-tolerance"
    sig = Signature.of(finding, case, Pipeline(("LegalizeOps", "fold")))
    assert str(sig) == "out-of-tolerance[pipeline=LegalizeOps+fold]"
    assert sig.covers(finding, case, Pipeline(("FoldConstant", "LegalizeOps", "fold"), 1))
    assert not sig.covers(finding, case, DEFAULT_PIPELINE)
    assert not Signature.of(finding, case, DEFAULT_PIPELINE).covers(finding, case, sig_pipeline())


def sig_pipeline() -> Pipeline:
    return Pipeline(("LegalizeOps", "fold"))


def test_the_strategy_shrinks_to_the_pass_alone() -> None:
    assert find(strategies.pipelines(), lambda p: True) == DEFAULT_PIPELINE
    two = find(strategies.pipelines(), lambda p: "LegalizeOps" in p.passes and p.opt_level < 2)
    assert two == Pipeline(("LegalizeOps",), 1)
    with pytest.raises(InvalidArgument, match="max_passes=0"):
        strategies.pipelines(max_passes=0).example()
    only = find(strategies.pipelines(neighbours=st.just("FuseOps")), lambda p: len(p.passes) == 3)
    assert set(only.passes) <= {"fold", "FuseOps"}


def promoted(tmp_path: Path, case_kwargs: dict[str, object], pipeline: Pipeline, pass_name: str) -> Path:
    finding = tmp_path / "finding.json"
    record = {
        "case": case_to_json(make_case(**case_kwargs)),  # type: ignore[arg-type]
        "pipeline": pipeline_to_json(pipeline),
        "pass_name": pass_name,
        "signature": "x",
        "symptom": "out-of-tolerance",
        "stage": "compare",
        "message": "",
        "seed": 3,
    }
    finding.write_text(json.dumps(record))
    assert main(["promote", str(finding), "--corpus", str(tmp_path / "corpus"), "--passes", pass_name]) == 0
    (path,) = (tmp_path / "corpus").glob("*.json")
    return path


@pytest.mark.slow
def test_promote_drops_passes_that_do_not_matter_and_the_script_reproduces(tmp_path: Path) -> None:
    pipeline = Pipeline(("FoldConstant", "DecomposeOpsForInference", "fold"), 2, False)
    # With fixed (which leaves training mode alone) only DecomposeOpsForInference matters.
    path = promoted(tmp_path, {"training": True, **SMALL}, pipeline, "fixed")
    entry = load_entry(path)
    assert entry.pipeline == Pipeline(("DecomposeOpsForInference",))
    assert entry.signature == "out-of-tolerance[training=True,pipeline=DecomposeOpsForInference]"
    assert entry.provenance["found_by"] == "bnfuzz run --pass fixed --seed 3 --pipelines"
    script = tmp_path / "repro.py"
    script.write_text(render_script(entry))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 1 and "BUG:" in done.stdout, done.stdout + done.stderr
    text = render_issue(entry)
    assert text.startswith("# [Bug][Relax] `Sequential([DecomposeOpsForInference])` changes results")
    assert "- training=True -> False: the bug disappears (it matters)" in text


def test_tvm_gates_a_sequential_but_not_a_direct_call() -> None:
    # What gated() assumes of TVM: at opt level 0 a Sequential skips DeadCodeElimination
    # (opt level 1), and calling the pass directly runs it.
    from tvm import relax

    from fuzz.backends.tvm.compat import TensorType
    from fuzz.backends.tvm.pipeline import PipelinePass

    bb = relax.BlockBuilder()
    x = relax.Var("x", TensorType((2,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            bb.emit(relax.op.add(x, x))  # dead
            out = bb.emit_output(relax.op.multiply(x, x))
        bb.emit_func_output(out)
    mod = bb.get()
    low = Pipeline(("DeadCodeElimination",), 0)
    assert "R.add" in PipelinePass(low, FIXED)(mod).script()
    assert "R.add" not in PipelinePass(low, FIXED, sequential=False)(mod).script()
