"""How a case is written: by which importer (:class:`Importer`), and, for each, the ways
exporters differ that do not change what the graph computes (:class:`Form`,
:class:`OnnxForm`, :class:`TorchForm`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from fuzz.model.tensor import OPERANDS, CaseError

__all__ = ["ONNX_SPATIAL_OPSETS", "ONNX_TRAINING_OPSET", "Form", "Importer", "OnnxForm", "TorchForm"]


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
