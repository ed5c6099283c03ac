"""Minimising a shrunk case: what does not matter goes, what matters stays, an incidental
attribute leaves the signature, and the simplifications compute what they claim."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from cases import PUBLIC_NAN_REPORT, make_case

from fuzz.backends.tvm.passes import resolve_pass
from fuzz.cli import main
from fuzz.engine.minimize import found, minimality, simplify
from fuzz.engine.simplifications import (
    _as_conv_bn,
    _as_nchw,
    _as_oihw,
    _one_in_channel,
    _one_out_channel,
    _ungrouped,
    simplifications,
    with_defaults_except,
)
from fuzz.model.attributes import ATTRIBUTE_DEFAULTS as DEFAULTS
from fuzz.model.attributes import classify
from fuzz.model.case import Epilogue, Topology
from fuzz.model.case_json import case_to_json
from fuzz.model.tensor import Tensor
from fuzz.oracle.reference import reference
from fuzz.store.corpus import load_entry

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = resolve_pass("upstream")

#: Folded scale 2^-123 / sqrt(2^43) = 2^-144.5: a float32 subnormal with 5 bits left.
UNDERFLOW = {"x": 1.0, "weight": 1.0, "gamma": 2.0**-123, "beta": 2.0**-123, "mean": 2.0**43, "var": 2.0**43}
ONES = dict.fromkeys(("x", "weight", "gamma", "beta", "mean", "var"), 1.0)


def batch_of_two(case):  # type: ignore[no-untyped-def]
    data = case.data.float64()
    return replace(case, data=Tensor.from_numpy(np.concatenate([data, data * 0.5]), case.data.dtype))


@pytest.mark.slow
def test_simplify_drops_a_batch_item_that_does_not_matter() -> None:
    big = batch_of_two(PUBLIC_NAN_REPORT)
    assert str(found(big, UPSTREAM).signature) == "finite-to-nonfinite"  # type: ignore[union-attr]
    small, _, signature = simplify(big, UPSTREAM)
    assert small.data.shape[0] == 1 and str(signature) == "finite-to-nonfinite"


def test_simplify_narrows_the_signature_when_an_attribute_was_incidental() -> None:
    grouped = make_case(c_in=2, c_out=2, height=1, width=1, kh=1, kw=1, groups=2, values=UNDERFLOW)
    assert str(found(grouped, UPSTREAM).signature) == "out-of-tolerance[groups=grouped]"  # type: ignore[union-attr]
    small, _, signature = simplify(grouped, UPSTREAM)
    assert small.blocks[0].conv.groups == 1  # type: ignore[union-attr]
    assert str(signature) == "out-of-tolerance"


def test_simplify_keeps_what_matters() -> None:
    case = make_case(c_in=1, c_out=1, height=1, width=1, kh=1, kw=1, scale=False, values={"gamma": 2.0})
    small, _, signature = simplify(case, UPSTREAM)
    assert small.blocks[0].bn.scale is False and str(signature) == "out-of-tolerance[scale=False]"
    assert small.blocks[0].gamma.values == (2.0,)  # with gamma 1.0 the bug is invisible


def test_simplify_keeps_a_must_not_fold_visible_in_the_outputs() -> None:
    # Two input channels of ones make the conv output 2 against a moving mean of 1. With one
    # input channel, output and moving mean agree and folding changes nothing visible.
    case = make_case(c_in=2, c_out=1, height=1, width=1, kh=1, kw=1, training=True, values=ONES)
    assert found(case, UPSTREAM).visible  # type: ignore[union-attr]
    small, _, signature = simplify(case, UPSTREAM)
    assert str(signature) == "must-not-fold[training=True]"
    assert found(small, UPSTREAM).visible  # type: ignore[union-attr]
    assert small.data.shape[1] == 2
    lines = [a.line() for a in minimality(small, UPSTREAM)]
    assert (
        "- input channels 2 -> 1 (the first): the pass still rewrites it, but the outputs no longer differ"
        in ("\n".join(lines))
    )


def test_simplify_of_a_case_without_a_bug_changes_nothing() -> None:
    case = make_case()
    assert simplify(case, UPSTREAM) == (case, None, None)
    assert minimality(case, UPSTREAM) == []


def test_minimality_says_what_matters_and_what_cannot_be_tried() -> None:
    entry = load_entry(ROOT / "corpus" / "finite-to-nonfinite.json")
    lines = {a.description.split(" ")[0]: a.outcome for a in minimality(entry.case, UPSTREAM)}
    assert lines["padding=[0,"] == "invalid"  # a 1x2 kernel with dilation 2 needs the padding
    assert lines["dilation=[1,"] == "disappears"
    assert lines["gamma"] == "disappears"


@pytest.mark.parametrize("layout", ["OIHW", "HWIO", "OHWI", "IOHW"])
def test_ungrouped_computes_the_same(layout: str) -> None:
    case = make_case(c_in=4, c_out=6, groups=2, kernel_layout=layout)
    plain = _ungrouped(case)
    assert plain.blocks[0].conv.groups == 1  # type: ignore[union-attr]
    np.testing.assert_array_equal(reference(plain).outputs[0].value, reference(case).outputs[0].value)


@pytest.mark.parametrize("axis", [3, 2, -3])
@pytest.mark.parametrize("kernel_layout", ["HWIO", "OHWI", "IOHW"])
def test_layout_changes_compute_the_same_transposed(axis: int, kernel_layout: str) -> None:
    case = make_case(c_in=2, c_out=3, data_layout="NHWC", kernel_layout=kernel_layout, axis=axis)
    case = replace(case, blocks=(replace(case.blocks[0], bias=case.blocks[0].gamma),))
    plain = _as_oihw(_as_nchw(case))
    conv = plain.blocks[0].conv
    assert conv is not None and (conv.data_layout, conv.kernel_layout) == ("NCHW", "OIHW")
    full = reference(case).outputs[0].value
    np.testing.assert_array_equal(reference(plain).outputs[0].value, np.transpose(full, (0, 3, 1, 2)))


@pytest.mark.parametrize(
    "topology", [Topology.CONV_SHARED, Topology.BN_STATS, Topology.STATS_CONSUMED, Topology.CHAIN]
)
def test_conv_bn_keeps_the_first_block(topology: Topology) -> None:
    case = make_case(topology=topology, c_in=3, c_out=3)
    plain = _as_conv_bn(case)
    assert plain.topology is Topology.CONV_BN and plain.blocks == case.blocks[:1]
    described = [d for d, _ in simplifications(case, values=False)]
    assert any(d.startswith(f"topology={topology.value} -> conv-bn") for d in described)


def test_with_defaults_except_resets_every_other_attribute_at_once() -> None:
    case = make_case(
        c_in=2,
        c_out=2,
        groups=2,
        scale=False,
        center=False,
        bias=True,
        data_layout="NHWC",
        kernel_layout="HWIO",
    )
    simpler = with_defaults_except(case, {"scale"})
    attrs = {k: v for k, v in classify(simpler).items() if v != DEFAULTS[k]}
    assert attrs == {"scale": "False"}
    # values untouched (the data only transposed to NCHW)
    assert sorted(simpler.data.values) == sorted(case.data.values)
    assert simpler.blocks[0].gamma == case.blocks[0].gamma
    assert with_defaults_except(case, set(classify(case))) == case


def test_a_window_change_that_empties_the_conv_output_is_invalid() -> None:
    case = make_case(height=2, width=2, kh=3, kw=3, padding=(1, 1, 1, 1), training=True)
    unpadded = dict(simplifications(case, values=False))["padding=[1, 1, 1, 1] -> [0, 0, 0, 0]"]
    with pytest.raises(ValueError, match="output would be empty"):
        unpadded(case)


def test_a_residual_that_cannot_be_cut_makes_the_change_invalid() -> None:
    # the chain's second 3x3 conv makes its output (and the residual) smaller than the first's
    case = make_case(topology=Topology.CHAIN, c_in=2, c_out=2, epilogue=Epilogue.ADD)
    topology = dict(simplifications(case, values=False))[
        "topology=conv-bn-relu-conv-bn -> conv-bn (the first block)"
    ]
    with pytest.raises(ValueError, match="cannot be cut"):
        topology(case)


@pytest.mark.parametrize("layout", [("NCHW", "OIHW"), ("NHWC", "HWIO"), ("NCHW", "IOHW")])
def test_channel_cuts_compute_the_first_channel(layout: tuple[str, str]) -> None:
    case = make_case(c_in=2, c_out=3, data_layout=layout[0], kernel_layout=layout[1])
    axis = layout[0].index("C")
    full = reference(case).outputs[0].value
    first_out = reference(_one_out_channel(case)).outputs[0].value
    np.testing.assert_array_equal(first_out, np.take(full, [0], axis=axis))
    only_in = make_case(c_in=1, c_out=3, data_layout=layout[0], kernel_layout=layout[1])
    cut = _one_in_channel(case)
    assert (
        cut.data.shape == only_in.data.shape and cut.blocks[0].weight.shape == only_in.blocks[0].weight.shape
    )  # type: ignore[union-attr]


@pytest.mark.slow  # promotes and replays on upstream and fixed: seconds of builds
def test_promote_simplifies_and_names_the_file_by_the_narrowed_signature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grouped = make_case(c_in=2, c_out=2, height=1, width=1, kh=1, kw=1, groups=2, values=UNDERFLOW)
    finding = tmp_path / "findings" / "out-of-tolerance_groups=grouped_.json"
    finding.parent.mkdir()
    record = {
        "case": case_to_json(batch_of_two(grouped)),
        "pass_name": "upstream",
        "signature": "out-of-tolerance[groups=grouped]",
        "symptom": "out-of-tolerance",
        "stage": "compare",
        "message": "from the campaign",
        "seed": 7,
    }
    finding.write_text(json.dumps(record))
    assert main(["promote", str(finding), "--corpus", str(tmp_path / "corpus")]) == 0
    entry = load_entry(tmp_path / "corpus" / "out-of-tolerance.json")
    assert entry.signature == "out-of-tolerance" and entry.case.data.shape == (1, 1, 1, 1)
    assert entry.expect == {"upstream": "fails", "fixed": "passes"}
    assert entry.message.startswith("output 0[0, 0, 0, 0]: folded program gives")  # measured afresh
    assert entry.provenance["found_by"] == "bnfuzz run --pass upstream --seed 7"
    # The same bug again (here: the same finding): the entry there is never rewritten ...
    written = (tmp_path / "corpus" / "out-of-tolerance.json").read_text()
    capsys.readouterr()
    assert main(["promote", str(finding), "--corpus", str(tmp_path / "corpus")]) == 0
    assert "already there with this signature: kept as it is (--replace" in capsys.readouterr().out
    assert (tmp_path / "corpus" / "out-of-tolerance.json").read_text() == written
    # ... and with --replace, only by a smaller case
    assert main(["promote", str(finding), "--corpus", str(tmp_path / "corpus"), "--replace"]) == 0
    assert (
        "already there with this signature: kept its case (6 values, this one 6)" in capsys.readouterr().out
    )


def test_an_onnx_entry_s_note_tries_its_float32_epsilon_and_leaves_out_its_form() -> None:
    # ONNX stores epsilon as a float32: the default an ONNX case goes back to is float32(1e-5),
    # which shows that OpenVINO's float16 failure is its epsilon (68439 > float16's 65504);
    # and "form=onnx -> default" is no simplification a backend of one form can try
    from pathlib import Path

    from fuzz.render.skeleton import minimality_lines
    from fuzz.store.corpus import load_entry

    corpus = Path(__file__).resolve().parent.parent / "corpus"
    lines = minimality_lines(
        load_entry(corpus / "openvino" / "openvino_pass-exception_RuntimeError_dtype=float16_.json")
    )
    assert "- epsilon=68439.0 -> 9.999999747378752e-06: the bug disappears (it matters)" in lines
    lines = minimality_lines(load_entry(corpus / "onnx-tools" / "onnxslim_finite-to-nonfinite.json"))
    assert lines and not any("form=" in line or "cannot be tried" in line for line in lines), lines
