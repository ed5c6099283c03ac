"""How an ONNX case's model is written (fuzz.model.case.OnnxForm): what the form refuses, its JSON,
and that every way of writing the model computes the same outputs on ONNX Runtime with every
graph optimization off (the unfolded run every ONNX backend compares against)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from cases import make_case
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz.backends.onnxruntime import DISABLE_ALL, session
from fuzz.model.case import Epilogue, Topology
from fuzz.model.case_json import case_from_json, case_to_json
from fuzz.model.form import Form, Importer, OnnxForm
from fuzz.model.onnx_graph import DEFAULTS, min_ir_versions, newest_opset, onnx_graph, onnx_model
from fuzz.model.tensor import CaseError
from strategies.onnx import fit, onnx_forms

EPS32 = float(np.float32(1e-5))
VALUES = {"gamma": 3.0, "beta": 0.5, "mean": -0.25, "var": 2.0}


def onnx_case(form: OnnxForm, **kwargs: Any) -> Any:
    kwargs.setdefault("values", VALUES)
    return make_case(form=Form(Importer.ONNX, onnx=form), epsilon=EPS32, **kwargs)


def run(case: Any) -> list[np.ndarray[Any, Any]]:
    graph = onnx_graph(case)
    feeds = {name: t.numpy() for name, t in graph.feeds.items()}
    return [
        np.asarray(r) for r in session(onnx_model(case).SerializeToString(), DISABLE_ALL).run(None, feeds)
    ]


@pytest.mark.parametrize(
    ("form", "field"),
    [
        (dict(opset=6), "form.onnx.opset"),
        (dict(opset=9, spatial=False), "form.onnx.spatial"),
        (dict(opset=7, ir_version=3), "form.onnx.ir_version"),  # IR 3 lists initializers as inputs
        (dict(ir_version=2, initializer_inputs=True), "form.onnx.ir_version"),
        (dict(overridden=("scale",)), "form.onnx.overridden"),
        (dict(overridden=("gamma", "gamma")), "form.onnx.overridden"),
        (dict(opset=7, ir_version=3, initializer_inputs=True, overridden=("gamma",)), "form.onnx.overridden"),
    ],
)
def test_a_form_onnx_cannot_say_is_refused(form: dict[str, Any], field: str) -> None:
    with pytest.raises(CaseError) as raised:
        OnnxForm(**form)
    assert raised.value.field == field


def test_the_form_must_fit_the_case() -> None:
    with pytest.raises(CaseError, match="parameter already"):
        onnx_case(OnnxForm(overridden=("gamma",)), parameters=("gamma",))
    with pytest.raises(CaseError, match="needs a bias"):
        onnx_case(OnnxForm(overridden=("bias",)))
    with pytest.raises(CaseError, match="training mode needs opset 14"):
        onnx_case(OnnxForm(opset=9), training=True)
    with pytest.raises(CaseError, match="only the ONNX importer"):
        Form(onnx=OnnxForm(opset=9))


def test_a_form_round_trips_through_json_and_the_default_is_not_written() -> None:
    form = OnnxForm(opset=8, ir_version=3, initializer_inputs=True, spatial=False, value_info=True)
    case = onnx_case(form)
    assert case_from_json(case_to_json(case)) == case
    assert "onnx" not in case_to_json(onnx_case(OnnxForm()))["form"]
    overridden = onnx_case(OnnxForm(overridden=("weight",)))
    assert case_from_json(case_to_json(overridden)) == overridden
    line = onnx_case(OnnxForm(rank=1, transpose=True), **LINE)
    assert case_from_json(case_to_json(line)) == line
    old = case_to_json(overridden)  # written before other ranks were drawn: rank 2, no transpose
    for key in ("rank", "transpose"):
        del old["form"]["onnx"][key]
    assert case_from_json(old) == overridden


def test_a_training_mode_batch_norm_has_its_three_outputs() -> None:
    model = onnx_model(onnx_case(OnnxForm(), training=True))  # checked in full inside
    (bn,) = [n for n in model.graph.node if n.op_type == "BatchNormalization"]
    assert len(bn.output) == 3


def test_statistics_per_position_are_the_per_channel_values_repeated() -> None:
    case = onnx_case(OnnxForm(opset=7, spatial=False))
    graph = onnx_graph(case)
    gamma = graph.initializers["gamma0"]
    assert gamma.shape == (3, 3, 3)  # (C, H, W) of the conv's 3x3 output
    assert np.array_equal(
        gamma.numpy(), np.broadcast_to(case.blocks[0].gamma.numpy()[:, None, None], (3, 3, 3))
    )
    bn = next(n for n in graph.nodes if n.op_type == "BatchNormalization")
    assert bn.attrs["spatial"] == 0 and "training_mode" not in bn.attrs


def test_statistics_per_position_fed_as_inputs_have_that_shape_too() -> None:
    case = onnx_case(OnnxForm(opset=8, spatial=False, overridden=("mean",)), parameters=("gamma",))
    graph = onnx_graph(case)
    assert (
        graph.feeds["gamma0"].shape
        == graph.feeds["mean0"].shape
        == graph.initializers["mean0"].shape
        == (3, 3, 3)
    )
    assert [o.tolist() for o in run(case)] == [
        o.tolist() for o in run(onnx_case(OnnxForm(), parameters=("gamma",)))
    ]


def test_an_overridden_operand_stores_a_stale_default_and_is_fed_the_case_s_values() -> None:
    case = onnx_case(OnnxForm(overridden=("gamma", "weight")))
    graph = onnx_graph(case)
    assert set(graph.initializers["gamma0"].values) == {DEFAULTS["gamma"]}
    assert graph.feeds["gamma0"] == case.blocks[0].gamma and graph.feeds["weight0"] == case.blocks[0].weight
    assert [name for name, _, _ in graph.inputs] == ["x", "weight0", "gamma0"]


def test_initializers_listed_as_inputs_are_not_fed() -> None:
    graph = onnx_graph(onnx_case(OnnxForm(initializer_inputs=True), epilogue=Epilogue.CLIP))
    names = [name for name, _, _ in graph.inputs]
    assert names[0] == "x" and set(names[1:]) == set(graph.initializers)  # clip bounds too
    assert list(graph.feeds) == ["x"]


def test_clip_before_opset_11_has_its_bounds_as_attributes() -> None:
    model = onnx_model(onnx_case(OnnxForm(opset=9), epilogue=Epilogue.CLIP))
    (clip,) = [n for n in model.graph.node if n.op_type == "Clip"]
    assert list(clip.input) == ["out0"] and {a.name for a in clip.attribute} == {"min", "max"}


def test_value_info_and_versions_are_written() -> None:
    model = onnx_model(onnx_case(OnnxForm(opset=9, ir_version=5, value_info=True), topology=Topology.CHAIN))
    assert model.ir_version == 5 and model.opset_import[0].version == 9
    assert [v.name for v in model.graph.value_info] == ["conv0", "out0", "relu0", "conv1"]
    assert onnx_model(onnx_case(OnnxForm())).ir_version == onnx.IR_VERSION


#: convolutions a 1-D model can say (height 1, kernel height 1) and a ConvTranspose can
#: (stride and dilation 1, padding below the kernel), grouped and ungrouped
LINE = dict(c_in=2, c_out=4, height=1, width=5, kh=1, kw=3, padding=(0, 1, 0, 2))
GROUPED = dict(c_in=4, c_out=6, height=4, width=5, kh=2, kw=3, groups=2, padding=(1, 0, 0, 2))


@pytest.mark.parametrize("geometry", [LINE, GROUPED], ids=["line", "grouped"])
@pytest.mark.parametrize(("rank", "transpose"), [(1, False), (3, False), (2, True), (1, True), (3, True)])
@pytest.mark.parametrize("topology", [Topology.CONV_BN, Topology.CHAIN, Topology.CONV_SHARED])
def test_another_rank_or_a_conv_transpose_computes_the_same(
    geometry: dict[str, Any], rank: int, transpose: bool, topology: Topology
) -> None:
    if rank == 1 and geometry is GROUPED:
        return  # height 4: refused (test_a_form_the_convolutions_cannot_take_is_refused)
    plain = onnx_case(OnnxForm(), topology=topology, bias=True, **geometry)
    written = onnx_case(OnnxForm(rank=rank, transpose=transpose), topology=topology, bias=True, **geometry)
    model = onnx_model(written)
    assert {n.op_type for n in model.graph.node} >= {"ConvTranspose" if transpose else "Conv"}
    assert len(model.graph.input[0].type.tensor_type.shape.dim) == rank + 2
    expected, got = run(plain), run(written)
    assert [g.size for g in got] == [e.size for e in expected]
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g.ravel(), e.ravel(), rtol=1e-5, atol=1e-5)  # summation order differs


def test_a_form_the_convolutions_cannot_take_is_refused() -> None:
    with pytest.raises(CaseError, match="1-D convolution needs a height of 1"):
        onnx_case(OnnxForm(rank=1), **GROUPED)
    with pytest.raises(CaseError, match="stride and dilation 1"):
        onnx_case(OnnxForm(transpose=True), strides=(2, 1))
    with pytest.raises(CaseError, match="padding below the kernel"):
        onnx_case(OnnxForm(transpose=True), kh=1, kw=1, padding=(1, 0, 0, 0))
    with pytest.raises(CaseError, match="rank"):
        OnnxForm(rank=4)
    plain = onnx_case(OnnxForm(), strides=(2, 1))
    assert fit(OnnxForm(rank=1, transpose=True), plain) == OnnxForm()


@settings(max_examples=60, deadline=None)
@given(
    form=onnx_forms(max_opset=newest_opset(), min_ir_versions=min_ir_versions()),
    epilogue=st.sampled_from(Epilogue),
)
def test_every_form_computes_what_the_plain_model_computes(form: OnnxForm, epilogue: Epilogue) -> None:
    plain = onnx_case(OnnxForm(), epilogue=epilogue)
    written = onnx_case(fit(form, plain), epilogue=epilogue)  # the operands the case has
    got, expected = run(written), run(plain)
    if (written.form.onnx.rank, written.form.onnx.transpose) == (2, False):
        assert [o.tolist() for o in got] == [o.tolist() for o in expected], form  # bit for bit
    else:  # another kernel: the same sums in another order
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g.ravel(), e.ravel(), rtol=1e-5, atol=1e-5)
