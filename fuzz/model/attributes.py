"""Attributes: the classifying attributes of a case, as strings.

:func:`classify` names what kind of graph a case is (topology, dtypes, layouts, whether
the batch_norm axis is the channel axis, flags, groups, operands, conv bias, epilogue,
form, how an ONNX model or a PyTorch module is written), and :data:`ATTRIBUTE_DEFAULTS` the simplest
graph's values, where Hypothesis shrinks to. Signatures (:mod:`fuzz.oracle.signature`) keep the
attributes that differ from these defaults; finding files and the campaign's coverage counters print them.
"""

from __future__ import annotations

from collections.abc import Mapping

from fuzz.model.case import Case
from fuzz.model.form import Importer

__all__ = ["ATTRIBUTE_DEFAULTS", "classify"]

#: The simplest graph's classifying attributes; Hypothesis shrinks toward these.
ATTRIBUTE_DEFAULTS: Mapping[str, str] = {
    "topology": "conv-bn",
    "dtype": "float32",
    "out_dtype": "same",
    "data_layout": "NCHW",
    "kernel_layout": "OIHW",
    "axis": "channel",
    "center": "True",
    "scale": "True",
    "training": "False",
    "groups": "1",
    "operands": "constants",
    "bias": "none",
    "epilogue": "none",
    "form": "default",
    # how an ONNX model is written (fuzz.model.case.OnnxForm); these defaults for every other case
    "spatial": "per-channel",
    "initializers": "constants",
    "ir_version": "4+",
    # how a model's convolutions are written (ONNX and PyTorch): Conv-2d, ConvTranspose-1d, ...
    "conv_op": "Conv-2d",
    # a PyTorch module's memory format (fuzz.model.case.TorchForm)
    "memory_format": "contiguous",
}


def classify(case: Case) -> dict[str, str]:
    """The classifying attributes of a case, as strings (see :data:`ATTRIBUTE_DEFAULTS`).

    Over several blocks, an attribute takes the first non-default value any block has.
    """

    def first_unusual(values: list[str], default: str) -> str:
        return next((v for v in values if v != default), default)

    convs = [b.conv for b in case.blocks if b.conv is not None]
    onnx = case.form.onnx
    spelling = case.form.torch if case.form.importer is Importer.TORCH else onnx
    axes = ["channel" if channel else "non-channel" for channel in case.channel_axes()]
    return {
        "topology": case.topology.value,
        "dtype": case.dtype,
        "out_dtype": first_unusual(
            [c.out_dtype if c.out_dtype and c.out_dtype != case.dtype else "same" for c in convs], "same"
        ),
        "data_layout": first_unusual([c.data_layout for c in convs], "NCHW"),
        "kernel_layout": first_unusual([c.kernel_layout for c in convs], "OIHW"),
        "axis": first_unusual(axes, "channel"),
        "center": str(all(b.bn.center for b in case.blocks)),
        "scale": str(all(b.bn.scale for b in case.blocks)),
        "training": str(any(b.bn.training for b in case.blocks)),
        "groups": first_unusual(["1" if c.groups == 1 else "grouped" for c in convs], "1"),
        "operands": "parameters" if case.parameters else "constants",
        "bias": "conv-bias" if any(b.bias is not None for b in case.blocks) else "none",
        "epilogue": case.epilogue.value,
        "form": case.form.label,
        "spatial": "per-position" if onnx.spatial is False else "per-channel",
        "initializers": "overridden"
        if onnx.overridden
        else "inputs"
        if onnx.initializer_inputs
        else "constants",
        "ir_version": "3" if 0 < onnx.ir_version < 4 else "4+",
        "conv_op": f"{'ConvTranspose' if spelling.transpose else 'Conv'}-{spelling.rank}d",
        "memory_format": "channels-last" if case.form.torch.channels_last else "contiguous",
    }
