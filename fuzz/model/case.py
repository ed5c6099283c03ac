"""The case model: one conv + batch_norm graph as plain, framework-free data.

A :class:`Case` says everything needed to build, run and judge one example:
the graph topology, the conv2d and batch_norm attributes of each block, the
dtype, which operands are bound constants and which are function parameters,
and every concrete value. Nothing here imports TVM, so strategies stay fast and
every case can be stored in ``corpus/`` and replayed bit for bit.

Key idea: values are stored as Python floats (every float16, bfloat16, float32
and float64 value is exactly a Python float) and serialised with
``float.hex()``, so the JSON round-trip keeps exact bits, signed zeros included.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuzz.model.form import ONNX_TRAINING_OPSET, Form, Importer
from fuzz.model.tensor import OPERANDS, CaseError, Tensor, np_dtype

__all__ = [
    "DATA_LAYOUTS",
    "EPILOGUE_TOPOLOGIES",
    "KERNEL_LAYOUTS",
    "ONNX_DTYPES",
    "ONNX_TOPOLOGIES",
    "TORCH_TOPOLOGIES",
    "BatchNormAttrs",
    "Block",
    "Case",
    "Conv2dAttrs",
    "Epilogue",
    "Topology",
    "conv_output_shape",
    "kernel_shape",
    "kernel_to_oihw",
    "rank_refuses",
    "transpose_refuses",
    "values_per_channel",
]


DATA_LAYOUTS: tuple[str, ...] = ("NCHW", "NHWC")
KERNEL_LAYOUTS: tuple[str, ...] = ("OIHW", "HWIO", "OHWI", "IOHW")
#: The dtypes TVM's ONNX frontend imports a conv + BatchNormalization in (ONNX Conv has
#: no bfloat16 before opset 22).
ONNX_DTYPES: tuple[str, ...] = ("float32", "float16", "float64")


class Topology(str, enum.Enum):
    """How the blocks are wired and which values the function returns."""

    #: ``bn(conv(x))[0]``
    CONV_BN = "conv-bn"
    #: ``bn2(conv2(relu(bn1(conv1(x))[0])))[0]``
    CHAIN = "conv-bn-relu-conv-bn"
    #: returns ``(bn(conv(x))[0], conv(x))``: the conv output has a second consumer.
    CONV_SHARED = "conv-shared"
    #: returns all three batch_norm outputs ``(out, new_mean, new_var)``.
    BN_STATS = "bn-stats"
    #: ``bn(x)[0]``: a batch_norm not fed by a conv.
    BN_ONLY = "bn-only"

    #: returns ``bn[0] + reshape(bn[1])``: the new mean is consumed by the graph.
    STATS_CONSUMED = "bn-stats-consumed"

    @property
    def n_blocks(self) -> int:
        return 2 if self is Topology.CHAIN else 1

    @property
    def has_conv(self) -> bool:
        return self is not Topology.BN_ONLY

    @property
    def uses_statistics(self) -> bool:
        """Whether the graph uses batch_norm's outputs 1 and 2 (so it cannot go)."""
        return self in (Topology.BN_STATS, Topology.STATS_CONSUMED)


class Epilogue(str, enum.Enum):
    """What follows the last batch_norm (its output 0), as in real networks."""

    NONE = "none"
    RELU = "relu"
    #: ``clip(y, 0, 6)``: ReLU6, MobileNet's activation
    CLIP = "clip"
    #: ``y + skip``: a residual join with a second input of the output's shape
    ADD = "add"


@dataclass(frozen=True)
class Conv2dAttrs:
    """Attributes of ``relax.op.nn.conv2d`` (``out_dtype=""`` means the input dtype)."""

    strides: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, left, bottom, right
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    data_layout: str = "NCHW"
    kernel_layout: str = "OIHW"
    out_dtype: str = ""

    def __post_init__(self) -> None:
        if self.data_layout not in DATA_LAYOUTS:
            raise CaseError("data_layout", f"unknown layout {self.data_layout!r}")
        if self.kernel_layout not in KERNEL_LAYOUTS:
            raise CaseError("kernel_layout", f"unknown layout {self.kernel_layout!r}")
        if self.out_dtype:
            np_dtype(self.out_dtype)
        if self.groups < 1:
            raise CaseError("groups", f"must be positive, got {self.groups}")

    @property
    def channel_axis(self) -> int:
        """The channel axis of the conv's data and output (out_layout = data_layout)."""
        return self.data_layout.index("C")


def kernel_shape(attrs: Conv2dAttrs, c_in: int, c_out: int, kh: int, kw: int) -> tuple[int, ...]:
    """The weight shape for a kernel layout; ``I`` is ``c_in // groups``."""
    dims = {"O": c_out, "I": c_in // attrs.groups, "H": kh, "W": kw}
    return tuple(dims[d] for d in attrs.kernel_layout)


def conv_output_shape(
    attrs: Conv2dAttrs, data_shape: tuple[int, ...], weight_shape: tuple[int, ...]
) -> tuple[int, ...]:
    """The shape of the conv's output, in its data layout (out_layout = data_layout)."""
    dims = dict(zip(attrs.data_layout, data_shape, strict=True))
    kernel = dict(zip(attrs.kernel_layout, weight_shape, strict=True))
    top, left, bottom, right = attrs.padding
    h = (dims["H"] + top + bottom - attrs.dilation[0] * (kernel["H"] - 1) - 1) // attrs.strides[0] + 1
    w = (dims["W"] + left + right - attrs.dilation[1] * (kernel["W"] - 1) - 1) // attrs.strides[1] + 1
    out = {"N": dims["N"], "C": kernel["O"], "H": h, "W": w}
    return tuple(out[d] for d in attrs.data_layout)


def kernel_to_oihw(attrs: Conv2dAttrs, weight: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Transpose a weight array from its kernel layout to OIHW."""
    return np.transpose(weight, [attrs.kernel_layout.index(d) for d in "OIHW"])


@dataclass(frozen=True)
class BatchNormAttrs:
    """Attributes of ``relax.op.nn.batch_norm``. ``axis`` may be negative."""

    axis: int = 1
    epsilon: float = 1e-5
    center: bool = True
    scale: bool = True
    momentum: float = 0.1
    training: bool = False

    def __post_init__(self) -> None:
        if not (self.epsilon >= 0 and math.isfinite(self.epsilon)):
            raise CaseError("epsilon", f"must be finite and non-negative, got {self.epsilon!r}")
        if not 0 <= self.momentum <= 1:
            raise CaseError("momentum", f"must lie in [0, 1], got {self.momentum!r}")


@dataclass(frozen=True)
class Block:
    """One ``batch_norm(conv2d(x, weight) [+ bias], gamma, beta, mean, var)``.

    ``conv`` and ``weight`` are None for the ``bn-only`` topology. ``bias`` is the conv's
    bias (one value per output channel, in the conv's output dtype), added as a separate
    ``add`` before the batch_norm, the way frontends write a conv with bias; None for none.
    """

    bn: BatchNormAttrs
    gamma: Tensor
    beta: Tensor
    mean: Tensor
    var: Tensor
    conv: Conv2dAttrs | None = None
    weight: Tensor | None = None
    bias: Tensor | None = None

    def __post_init__(self) -> None:
        if self.bias is not None:
            if self.conv is None:
                raise CaseError("bias", "a bias needs a conv")
            if self.bias.shape != self.gamma.shape or self.bias.dtype != self.gamma.dtype:
                raise CaseError(
                    "bias",
                    f"must have the batch_norm operands' shape and dtype {self.gamma.dtype}"
                    f"{list(self.gamma.shape)}, got {self.bias.dtype}{list(self.bias.shape)}",
                )

    def operand(self, name: str) -> Tensor | None:
        if name not in OPERANDS:
            raise CaseError("operand", f"unknown operand {name!r}; expected one of {OPERANDS}")
        value: Tensor | None = getattr(self, name)
        return value


@dataclass(frozen=True)
class Case:
    """One generated example: topology, input, blocks, the parameter set, what follows the
    last batch_norm, and the form the module is written in.

    ``parameters`` names the block operands (from :data:`OPERANDS`) that are
    function parameters in every block; all other operands are bound constants.
    ``residual`` is the second input an :attr:`Epilogue.ADD` adds (the last batch_norm's
    output shape and dtype), None otherwise.
    """

    topology: Topology
    data: Tensor
    blocks: tuple[Block, ...]
    parameters: tuple[str, ...] = field(default=())
    epilogue: Epilogue = Epilogue.NONE
    residual: Tensor | None = None
    form: Form = field(default_factory=Form)

    def __post_init__(self) -> None:
        if len(self.blocks) != self.topology.n_blocks:
            raise CaseError(
                "blocks", f"topology {self.topology.value} needs {self.topology.n_blocks} block(s)"
            )
        for name in self.parameters:
            if name not in OPERANDS:
                raise CaseError("parameters", f"unknown operand {name!r}; expected {OPERANDS}")
        for i, block in enumerate(self.blocks):
            if self.topology.has_conv != (block.conv is not None and block.weight is not None):
                raise CaseError(
                    f"blocks[{i}].conv", "conv and weight must be given iff the topology has a conv"
                )
        if (self.residual is not None) != (self.epilogue is Epilogue.ADD):
            raise CaseError("residual", "a residual is given exactly when the epilogue is add")
        if self.epilogue is not Epilogue.NONE and self.topology not in EPILOGUE_TOPOLOGIES:
            raise CaseError(
                "epilogue",
                f"topology {self.topology.value} returns more than the batch_norm output; "
                f"an epilogue needs one of {[t.value for t in EPILOGUE_TOPOLOGIES]}",
            )
        if self.form.functions == 2 and self.topology not in (Topology.CONV_BN, Topology.CHAIN):
            raise CaseError("form.functions", "two functions need topology conv-bn or the chain")
        if self.form.importer is Importer.ONNX:
            _check_onnx(self)
        if self.form.importer is Importer.TORCH:
            _check_torch(self)

    @property
    def dtype(self) -> str:
        return self.data.dtype

    def channel_axes(self) -> tuple[bool, ...]:
        """Per block: is the batch_norm ``axis`` the channel axis of the tensor it
        normalises (the conv's output in its layout; NCHW data for ``bn-only``)?"""
        ndim = len(self.data.shape)
        return tuple(
            b.bn.axis % ndim == (b.conv.channel_axis if b.conv is not None else 1) for b in self.blocks
        )

    @property
    def size(self) -> int:
        """How many values the case holds (data and every operand): smaller is simpler."""
        operands = (t for b in self.blocks for name in OPERANDS if (t := b.operand(name)) is not None)
        residual = len(self.residual.values) if self.residual is not None else 0
        return len(self.data.values) + sum(len(t.values) for t in operands) + residual


#: Topologies whose one output is the last batch_norm's output 0 (an epilogue may follow).
EPILOGUE_TOPOLOGIES: tuple[Topology, ...] = (Topology.CONV_BN, Topology.CHAIN)
#: Topologies an ONNX model expresses here (one output, or the conv's as a second one).
ONNX_TOPOLOGIES: tuple[Topology, ...] = (Topology.CONV_BN, Topology.CHAIN, Topology.CONV_SHARED)


def _check_onnx(case: Case) -> None:
    """Raise :class:`CaseError` unless ONNX's Conv and BatchNormalization can say ``case``."""
    if case.topology not in ONNX_TOPOLOGIES:
        raise CaseError("form.importer", f"ONNX cannot express topology {case.topology.value}")
    onnx = case.form.onnx
    for name in onnx.overridden:
        if name in case.parameters:
            raise CaseError("form.onnx.overridden", f"{name} is a parameter already: it has no default")
        if any(b.operand(name) is None for b in case.blocks):
            raise CaseError("form.onnx.overridden", f"every block needs a {name} to override")
    for i, b in enumerate(case.blocks):
        reason = rank_refuses(case, i, onnx.rank) or (transpose_refuses(b) if onnx.transpose else "")
        if reason:
            raise CaseError("form.onnx", f"blocks[{i}]: {reason}")
    if onnx.opset < ONNX_TRAINING_OPSET and any(b.bn.training for b in case.blocks):
        raise CaseError("form.onnx.opset", f"training mode needs opset {ONNX_TRAINING_OPSET} or later")
    if case.dtype not in ONNX_DTYPES:
        raise CaseError("form.importer", f"ONNX Conv has no {case.dtype}; expected one of {ONNX_DTYPES}")
    _check_plain_convs(case, "ONNX")
    for i, b in enumerate(case.blocks):
        where = f"blocks[{i}]"
        if not (b.bn.center and b.bn.scale):
            raise CaseError(f"{where}.bn", "ONNX BatchNormalization has scale and bias")
        if float(np.float32(b.bn.epsilon)) != b.bn.epsilon:
            raise CaseError(
                f"{where}.bn.epsilon", f"ONNX stores epsilon as a float32; {b.bn.epsilon!r} is not one"
            )


def _check_plain_convs(case: Case, framework: str) -> None:
    """Raise :class:`CaseError` unless every block is an NCHW conv with an OIHW kernel whose
    batch norm normalises axis 1 (what ONNX and PyTorch say)."""
    for i, b in enumerate(case.blocks):
        conv = b.conv
        assert conv is not None
        where = f"blocks[{i}]"
        if (conv.data_layout, conv.kernel_layout, conv.out_dtype) != ("NCHW", "OIHW", ""):
            raise CaseError(
                f"{where}.conv", f"{framework} convolutions are NCHW with an OIHW kernel and no out_dtype"
            )
        if b.bn.axis != 1:
            raise CaseError(f"{where}.bn", f"{framework} batch norms normalise axis 1")


#: Topologies a PyTorch module expresses here (its forward returns the conv's output too).
TORCH_TOPOLOGIES: tuple[Topology, ...] = ONNX_TOPOLOGIES


def _check_torch(case: Case) -> None:
    """Raise :class:`CaseError` unless a PyTorch module can say ``case``."""
    if case.topology not in TORCH_TOPOLOGIES:
        raise CaseError("form.importer", f"this PyTorch module cannot express topology {case.topology.value}")
    if case.parameters:
        raise CaseError("parameters", "a PyTorch module holds every operand: no parameters")
    _check_plain_convs(case, "PyTorch")
    form = case.form.torch
    for i, values in enumerate(values_per_channel(case)):
        bn = case.blocks[i].bn
        if bn.training and (values < 2 or bn.epsilon == 0):
            raise CaseError(
                f"blocks[{i}].bn.training",
                "PyTorch normalises by batch statistics over two values or more, with a positive epsilon",
            )
    for i, b in enumerate(case.blocks):
        if b.bn.center != b.bn.scale:
            raise CaseError(f"blocks[{i}].bn", "PyTorch's affine is scale and center together")
        reason = rank_refuses(case, i, form.rank) or (transpose_refuses(b) if form.transpose else "")
        if reason:
            raise CaseError("form.torch", f"blocks[{i}]: {reason}")


def values_per_channel(case: Case) -> tuple[int, ...]:
    """Per block of a case with convolutions: how many values each channel of its conv's
    output has (batch statistics are taken over these)."""
    counts = []
    shape = case.data.shape
    for b in case.blocks:
        assert b.conv is not None and b.weight is not None
        shape = conv_output_shape(b.conv, shape, b.weight.shape)
        counts.append(math.prod(shape) // shape[b.conv.channel_axis])
    return tuple(counts)


def rank_refuses(case: Case, i: int, rank: int) -> str:
    """Why block ``i``'s conv cannot be written at ``rank`` ("" where it can): rank 1 leaves
    the height axis out, so it must be of length 1 with a kernel of height 1 and no padding."""
    if rank != 1:
        return ""
    conv, weight = case.blocks[i].conv, case.blocks[i].weight
    assert conv is not None and weight is not None
    height = case.data.shape[2]  # every conv keeps a height of 1 where the first has it
    top, _, bottom, _ = conv.padding
    if height != 1 or weight.shape[2] != 1 or top or bottom:
        return "a 1-D convolution needs a height of 1, a kernel of height 1 and no padding there"
    return ""


def transpose_refuses(block: Block) -> str:
    """Why ``block``'s conv cannot be written as a ConvTranspose ("" where it can)."""
    conv, weight = block.conv, block.weight
    assert conv is not None and weight is not None
    kh, kw = weight.shape[2], weight.shape[3]
    top, left, bottom, right = conv.padding
    if conv.strides != (1, 1) or conv.dilation != (1, 1):
        return "a ConvTranspose computes this conv only with stride and dilation 1"
    if max(top, bottom) > kh - 1 or max(left, right) > kw - 1:
        return "a ConvTranspose computes this conv only with padding below the kernel's size"
    return ""
