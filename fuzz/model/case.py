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

import ml_dtypes
import numpy as np

from fuzz.errors import BnfuzzError
from fuzz.fpenv import keeps_subnormals

__all__ = [
    "DATA_LAYOUTS",
    "DTYPES",
    "EPILOGUE_TOPOLOGIES",
    "KERNEL_LAYOUTS",
    "ONNX_DTYPES",
    "ONNX_TOPOLOGIES",
    "OPERANDS",
    "TORCH_TOPOLOGIES",
    "BatchNormAttrs",
    "Block",
    "Case",
    "CaseError",
    "Conv2dAttrs",
    "Epilogue",
    "Form",
    "Importer",
    "OnnxForm",
    "Tensor",
    "Topology",
    "TorchForm",
    "conv_output_shape",
    "kernel_shape",
    "kernel_to_oihw",
    "np_dtype",
    "rank_refuses",
    "transpose_refuses",
    "values_per_channel",
]


#: Element dtypes a case may use, default first (strategies shrink to it).
DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16", "float64")
DATA_LAYOUTS: tuple[str, ...] = ("NCHW", "NHWC")
KERNEL_LAYOUTS: tuple[str, ...] = ("OIHW", "HWIO", "OHWI", "IOHW")
#: Operands of a block that may be passed as function parameters instead of constants, in
#: the order a module uses them: the conv's weight and bias, then batch_norm's four.
OPERANDS: tuple[str, ...] = ("weight", "bias", "gamma", "beta", "mean", "var")
#: The dtypes TVM's ONNX frontend imports a conv + BatchNormalization in (ONNX Conv has
#: no bfloat16 before opset 22).
ONNX_DTYPES: tuple[str, ...] = ("float32", "float16", "float64")


class CaseError(BnfuzzError, ValueError):
    """A case (or its JSON form) is malformed. ``field`` names the offending field."""

    field: str

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)


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


class Importer(str, enum.Enum):
    """Who writes the Relax module."""

    #: :mod:`fuzz.backends.tvm.build` with ``relax.BlockBuilder``, in the shape :class:`Form` says
    RELAX = "relax"
    #: an ONNX model made with ``onnx.helper``, imported by TVM's ``from_onnx``
    ONNX = "onnx"
    #: a PyTorch ``nn.Module`` (:mod:`fuzz.model.torch_model`); no Relax module is written
    TORCH = "torch"


#: BatchNormalization's versions before 14 have no ``training_mode``; before 9, ``spatial``.
ONNX_TRAINING_OPSET = 14
ONNX_SPATIAL_OPSETS = (7, 8)


@dataclass(frozen=True)
class OnnxForm:
    """How a case of the ONNX importer is written as a model: exporters differ in exactly
    these ways, and nothing here changes what the model computes (with the values fed).

    ``opset``: the default domain's opset (7 and up); ``ir_version``: the model's IR
    version, 0 for the ``onnx`` package's own. ``initializer_inputs``: every initializer is
    also listed as a graph input (a default a caller may override; IR version 3 requires it),
    not fed. ``overridden``: operands (of :data:`OPERANDS`) that are graph inputs whose
    initializer holds a stale default (what an untrained layer starts from: weight and gamma
    and var ones, bias and beta and mean zeros), fed the case's values at run time.
    ``spatial``: BatchNormalization's ``spatial`` attribute (opsets 7 and 8), None unwritten;
    False writes the statistics per position, ``(C, H, W)``: the case's per-channel values
    repeated over the conv output's positions. ``value_info``: the intermediate tensors'
    types and shapes are written. ``rank`` and ``transpose``: the same convolutions said
    another way (1-D or 3-D, ConvTranspose); the runtimes' outputs are read back in the
    case's shapes.
    """

    #: TVM's ONNX frontend converts BatchNormalization from version 15 on
    opset: int = 15
    ir_version: int = 0
    initializer_inputs: bool = False
    overridden: tuple[str, ...] = ()
    spatial: bool | None = None
    value_info: bool = False
    #: the convolutions' spatial rank as written: 2, or 1 (the height axis, of length 1, left
    #: out) or 3 (a depth axis of length 1 put in)
    rank: int = 2
    #: each convolution written as the ConvTranspose that computes it (stride and dilation 1:
    #: the kernel flipped, its two channel axes swapped, padding ``k - 1 - p``)
    transpose: bool = False

    def __post_init__(self) -> None:
        if self.rank not in (1, 2, 3):
            raise CaseError("form.onnx.rank", f"convolutions of rank 1, 2 or 3 are written, got {self.rank}")
        if self.opset < 7:
            raise CaseError("form.onnx.opset", f"opsets from 7 are written, got {self.opset}")
        if self.spatial is not None and self.opset not in ONNX_SPATIAL_OPSETS:
            raise CaseError(
                "form.onnx.spatial",
                f"BatchNormalization has spatial in opsets 7 and 8 only, not {self.opset}",
            )
        if self.ir_version != 0 and self.ir_version < 3:
            raise CaseError("form.onnx.ir_version", f"IR versions from 3 are written, got {self.ir_version}")
        if 0 < self.ir_version < 4 and not self.initializer_inputs:
            raise CaseError(
                "form.onnx.ir_version", "IR versions below 4 list every initializer as a graph input"
            )
        for name in self.overridden:
            if name not in OPERANDS:
                raise CaseError("form.onnx.overridden", f"unknown operand {name!r}; expected {OPERANDS}")
        if self.overridden and 0 < self.ir_version < 4:
            raise CaseError(
                "form.onnx.overridden", "below IR version 4 an initializer is a constant: none is overridden"
            )
        if len(set(self.overridden)) != len(self.overridden):
            raise CaseError("form.onnx.overridden", "an operand is listed twice")


@dataclass(frozen=True)
class TorchForm:
    """How a case of the PyTorch importer is written as an ``nn.Module``: nothing here
    changes what it computes. ``rank`` and ``transpose`` as in :class:`OnnxForm` (Conv1d,
    Conv3d, ConvTranspose); ``channels_last``: the module and its input in the channels-last
    memory format (rank 2 and 3 only). A training-mode block is a ``BatchNorm`` with
    ``track_running_stats=False`` in an eval module (batch statistics, as in training);
    ``scale`` and ``center`` together are its ``affine``."""

    rank: int = 2
    transpose: bool = False
    channels_last: bool = False

    def __post_init__(self) -> None:
        if self.rank not in (1, 2, 3):
            raise CaseError("form.torch.rank", f"convolutions of rank 1, 2 or 3 are written, got {self.rank}")
        if self.channels_last and self.rank == 1:
            raise CaseError("form.torch.channels_last", "channels-last memory formats are for rank 2 and 3")


@dataclass(frozen=True)
class Form:
    """How the graph is written as Relax bindings: nothing here changes what it computes.

    Real importers differ in exactly these ways, and a fold must see through all of
    them. ``dataflow``: the body is one dataflow block (else a plain binding block).
    ``dead_statistics``: batch_norm's outputs 1 and 2 are bound (``lv[1]``, ``lv[2]``)
    and never used, as TVM's ONNX frontend leaves them. ``functions``: 2 puts the first
    block (conv, batch_norm and what follows it) in a function of its own that ``main``
    calls. The ONNX importer writes its own form: these fields are then ignored (and
    kept at their defaults).
    """

    importer: Importer = Importer.RELAX
    dataflow: bool = True
    dead_statistics: bool = False
    functions: int = 1
    #: how the ONNX importer's model is written (default for the other importers)
    onnx: OnnxForm = field(default_factory=OnnxForm)
    #: how the PyTorch importer's module is written (default for the other importers)
    torch: TorchForm = field(default_factory=TorchForm)

    def __post_init__(self) -> None:
        if self.functions not in (1, 2):
            raise CaseError("functions", f"must be 1 or 2, got {self.functions!r}")
        if self.importer is not Importer.ONNX and self.onnx != OnnxForm():
            raise CaseError("form.onnx", "only the ONNX importer writes a model: keep form.onnx default")
        if self.importer is not Importer.TORCH and self.torch != TorchForm():
            raise CaseError("form.torch", "only the PyTorch importer writes a module: keep it default")
        if self.importer is not Importer.RELAX and (self.dataflow, self.dead_statistics, self.functions) != (
            True,
            False,
            1,
        ):
            raise CaseError(
                "form", f"the {self.importer.value} importer writes its own form: keep the rest default"
            )

    @property
    def label(self) -> str:
        """Short text for signatures: ``onnx``, ``no-dataflow+dead-statistics+2-functions``."""
        if self.importer is not Importer.RELAX:
            return self.importer.value
        parts = [
            *([] if self.dataflow else ["no-dataflow"]),
            *(["dead-statistics"] if self.dead_statistics else []),
            *(["2-functions"] if self.functions == 2 else []),
        ]
        return "+".join(parts) or "default"


def np_dtype(dtype: str) -> np.dtype[Any]:
    """The NumPy dtype for a case dtype name (bfloat16 via ml_dtypes)."""
    if dtype == "bfloat16":
        return np.dtype(ml_dtypes.bfloat16)
    if dtype in ("float16", "float32", "float64"):
        return np.dtype(dtype)
    raise CaseError("dtype", f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")


@dataclass(frozen=True)
class Tensor:
    """A dense tensor: dtype, shape and row-major values (exact Python floats)."""

    dtype: str
    shape: tuple[int, ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        np_dtype(self.dtype)
        if any(d < 1 for d in self.shape):
            raise CaseError("shape", f"dimensions must be positive, got {self.shape}")
        if len(self.values) != math.prod(self.shape):
            raise CaseError(
                "values",
                f"{len(self.values)} values do not fill shape {list(self.shape)} "
                f"({math.prod(self.shape)} elements)",
            )

    @classmethod
    @keeps_subnormals
    def from_numpy(cls, array: np.ndarray[Any, Any], dtype: str) -> Tensor:
        with np.errstate(over="ignore"):  # values beyond the dtype's range become inf here
            exact = np.asarray(array).astype(np_dtype(dtype))
        return cls(dtype, tuple(exact.shape), tuple(float(v) for v in exact.astype(np.float64).ravel()))

    @keeps_subnormals
    def numpy(self) -> np.ndarray[Any, Any]:
        """The values as an array of this tensor's own dtype (exact)."""
        return np.array(self.values, dtype=np.float64).reshape(self.shape).astype(np_dtype(self.dtype))

    def float64(self) -> np.ndarray[Any, Any]:
        return np.array(self.values, dtype=np.float64).reshape(self.shape)


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
