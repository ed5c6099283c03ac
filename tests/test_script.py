"""Reproducer scripts for every form a case is written in: the module a script builds is
the module the fuzzer built, and the script shows the bug in a fresh process."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cases import make_case
from hypothesis import given
from hypothesis import strategies as st

from fuzz.backends.tvm.build import build_module
from fuzz.backends.tvm.compat import structural_equal
from fuzz.model.case import Case, Epilogue, Topology
from fuzz.model.form import Form, Importer
from fuzz.oracle.execution import Stage
from fuzz.oracle.verdict import Symptom
from fuzz.render.script import render_script
from fuzz.render.script_parts import float_literal
from fuzz.render.tvm_script import render_script as tvm_script
from fuzz.store.corpus import Entry

ROOT = Path(__file__).resolve().parent.parent
EPS32 = float(np.float32(1e-5))

FORMS = {
    "dead-statistics": make_case(form=Form(dead_statistics=True)),
    "no-dataflow": make_case(form=Form(dataflow=False)),
    "two-functions-chain": make_case(
        topology=Topology.CHAIN, c_in=3, form=Form(functions=2, dead_statistics=True)
    ),
    "two-functions-parameters": make_case(
        form=Form(functions=2), parameters=("gamma",), epilogue=Epilogue.ADD
    ),
    "bias-clip": make_case(bias=True, epilogue=Epilogue.CLIP),
    "conv-shared": make_case(topology=Topology.CONV_SHARED, bias=True),
    "statistics-consumed": make_case(topology=Topology.STATS_CONSUMED),
    "onnx": make_case(form=Form(Importer.ONNX), epsilon=EPS32, bias=True, epilogue=Epilogue.RELU),
    "onnx-parameters-add": make_case(
        form=Form(Importer.ONNX), epsilon=EPS32, parameters=("beta",), epilogue=Epilogue.ADD
    ),
}


def entry_for(case: Case, symptom: Symptom = Symptom.OUT_OF_TOLERANCE) -> Entry:
    return Entry(case, "upstream", symptom, Stage.COMPARE, symptom.value, "a hand-made case", "", "", {}, {})


def module_part(script: str) -> str:
    """The lines of a script up to the module it builds (``before``), imports included."""
    head, _, _ = script.partition("\ninputs = [")
    return head


@pytest.mark.parametrize("name", sorted(FORMS))
def test_the_script_builds_the_fuzzers_module(name: str) -> None:
    case = FORMS[name]
    namespace: dict[str, object] = {}
    exec(compile(module_part(render_script(entry_for(case))), f"<{name}>", "exec"), namespace)
    assert structural_equal(namespace["before"], build_module(case))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["two-functions-chain", "onnx"])
def test_the_script_shows_the_bug_in_a_fresh_process(name: str, tmp_path: Path) -> None:
    # scale=False: upstream multiplies by gamma anyway (out-of-tolerance); not expressible in
    # ONNX, where training=True is the upstream bug instead (must-not-fold)
    if name == "onnx":
        case, symptom = (
            make_case(form=Form(Importer.ONNX), epsilon=EPS32, training=True),
            Symptom.MUST_NOT_FOLD,
        )
    else:
        case = make_case(
            topology=Topology.CHAIN, c_in=3, scale=False, form=Form(functions=2), values={"gamma": 3.0}
        )
        symptom = Symptom.OUT_OF_TOLERANCE
    script = tmp_path / "repro.py"
    script.write_text(render_script(entry_for(case, symptom)))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "BUG" in done.stdout


@pytest.mark.slow  # runs reproducer scripts in subprocesses
def test_a_missed_fold_script_shows_the_batch_norm_left(tmp_path: Path) -> None:
    entry = Entry(
        make_case(form=Form(dead_statistics=True)),
        "identity",
        Symptom.MISSED_FOLD,
        Stage.PASS,
        "missed-fold",
        "",
        "",
        "",
        {},
        {},
    )
    script = tmp_path / "repro.py"
    script.write_text(render_script(entry))  # identity: folds nothing
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 1 and "BUG: 1 of 1 batch_norm(s) left, 1 of them foldable" in done.stdout
    fixed = "__import__('fuzz.backends.tvm.fold_batchnorm', fromlist=['_']).FoldBatchnormToConv2D()"
    script.write_text(tvm_script(entry, fixed))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout + done.stderr


@given(st.floats(allow_nan=False))
def test_a_float_is_written_to_read_back_exactly(value: float) -> None:
    text = float_literal(value)
    back = eval(text)  # the script's own reading
    assert math.copysign(1, back) == math.copysign(1, value) and back == value, text
    assert len(text) <= len(repr(value)) or not math.isfinite(value)


def test_powers_of_two_are_written_as_powers() -> None:
    # what a reader recognises: 2**64, not 1.8446744073709552e+19
    assert float_literal(2.0**64) == "2.0**64" and float_literal(-(2.0**-126)) == "-2.0**-126"
    assert (
        float_literal(3 * 2.0**100) == "3.0 * 2.0**100"
        and float_literal(-3 * 2.0**100) == "-(3.0 * 2.0**100)"
    )
    assert float_literal(0.5) == "0.5" and float_literal(1e30) == "1e+30"  # repr where shorter
    assert float_literal(float("-inf")) == 'float("-inf")'


def test_issue_prose_says_inf_and_nan_plainly() -> None:
    from fuzz.render.skeleton import _number

    assert [_number(v) for v in (float("nan"), float("-inf"), 2.0**64, -107.0)] == [
        "nan",
        "-inf",
        "2.0**64",
        "-107.0",
    ]


def test_a_script_names_the_pass_it_runs() -> None:
    # a decline entry's script runs the fixed pass: its title must not name TVM's
    from fuzz.store.corpus import load_entry

    root = Path(__file__).resolve().parent.parent
    decline = render_script(load_entry(root / "corpus" / "declines" / "declined_reason=axis_.json"))
    assert decline.startswith(
        '"""Reproducer: declined[reason=axis] in bnfold-fuzz' + "'s `fixed` pass (not TVM's)"
    )
    upstream = render_script(load_entry(root / "corpus" / "out-of-tolerance_scale=False_.json"))
    assert "in tvm.relax.transform.FoldBatchnormToConv2D (TVM " in upstream.splitlines()[0]
