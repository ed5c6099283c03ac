"""A case's shape, drawn before any attribute or value: which convs have a bias, the
epilogue, and the form the case is written in (:class:`Shape`, :func:`draw_shape`)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis.strategies import DrawFn

from fuzz.model.case import EPILOGUE_TOPOLOGIES, Block, Epilogue, Topology, conv_output_shape
from fuzz.model.form import Form, Importer
from fuzz.model.tensor import Tensor

from ._validation import checked_draw, is_bool
from .options import CaseOptions, is_epilogue, is_function_count, is_onnx_form, is_torch_form

__all__ = ["Shape", "draw_shape", "output_shape"]


def output_shape(data: Tensor, blocks: list[Block]) -> tuple[int, ...]:
    """The shape of what the last conv of ``blocks`` outputs, on ``data``."""
    shape = data.shape
    for block in blocks:
        if block.conv is not None and block.weight is not None:
            shape = conv_output_shape(block.conv, shape, block.weight.shape)
    return shape


@dataclass(frozen=True)
class Shape:
    """The choices about a case's shape that its topology allows, drawn before any
    attribute or value (so shrinking one of them never shifts another's meaning):
    which convs have a bias, the epilogue, the form."""

    biases: tuple[bool, ...]
    epilogue: Epilogue
    form: Form


def draw_shape(draw: DrawFn, options: CaseOptions, topology: Topology, importer: Importer) -> Shape:
    biases = tuple(
        checked_draw(draw, options.biases, "biases", is_bool, "a bool") if topology.has_conv else False
        for _ in range(topology.n_blocks)
    )
    epilogue = Epilogue.NONE
    if topology in EPILOGUE_TOPOLOGIES:
        epilogue = checked_draw(draw, options.epilogues, "epilogues", is_epilogue, "an Epilogue")
    # Drawn for an ONNX case too, and then ignored (it writes its own form): see
    # CaseOptions.for_onnx for why an ONNX case makes the same choices.
    dataflow = checked_draw(draw, options.dataflows, "dataflows", is_bool, "a bool")
    dead = checked_draw(draw, options.dead_statistics, "dead_statistics", is_bool, "a bool")
    functions = 1
    if topology in (Topology.CONV_BN, Topology.CHAIN):
        functions = checked_draw(draw, options.functions, "functions", is_function_count, "1 or 2")
    if importer is Importer.ONNX:
        form = Form(
            Importer.ONNX,
            onnx=checked_draw(draw, options.onnx_forms, "onnx_forms", is_onnx_form, "an OnnxForm"),
        )
    elif importer is Importer.TORCH:
        form = Form(
            Importer.TORCH,
            torch=checked_draw(draw, options.torch_forms, "torch_forms", is_torch_form, "a TorchForm"),
        )
    else:
        form = Form(importer, dataflow, dead, functions)
    return Shape(biases, epilogue, form)
