"""What :func:`strategies.cases` draws from: its defaults, its validated options
(:class:`CaseOptions`, and the same options pinned to what ONNX or PyTorch can say), and the checks
each drawn value passes."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from hypothesis import strategies as st
from hypothesis.strategies import DrawFn, SearchStrategy

from fuzz.model.case import Epilogue, Topology
from fuzz.model.form import Importer, OnnxForm, TorchForm
from fuzz.model.tensor import DTYPES, OPERANDS

from .aim import AIM_BITS
from .attributes import (
    DEVIATIONS,
    MOSTLY_FALSE,
    Axis,
    BatchNormOptions,
    ConvOptions,
    Deviation,
    mostly_first,
)
from .tensors import BN_OPERANDS
from .values import Magnitude

__all__ = [
    "DEFAULT_AIMS",
    "DEFAULT_AXES",
    "DEFAULT_DTYPES",
    "DEFAULT_EPILOGUES",
    "DEFAULT_FUNCTIONS",
    "DEFAULT_IMPORTERS",
    "DEFAULT_MAGNITUDES",
    "DEFAULT_ONNX_FORMS",
    "DEFAULT_TOPOLOGIES",
    "DEFAULT_TORCH_FORMS",
    "MOSTLY_TRUE",
    "PARAMETER_SETS",
    "CaseOptions",
    "is_aim",
    "is_axis",
    "is_deviation",
    "is_dtype",
    "is_epilogue",
    "is_function_count",
    "is_importer",
    "is_onnx_form",
    "is_parameter_set",
    "is_topology",
    "is_torch_form",
]

DEFAULT_DTYPES: SearchStrategy[str] = mostly_first(DTYPES)
DEFAULT_TOPOLOGIES: SearchStrategy[Topology] = mostly_first(list(Topology))
DEFAULT_AXES: SearchStrategy[Axis] = mostly_first(list(Axis))
DEFAULT_MAGNITUDES: SearchStrategy[Magnitude] = mostly_first(list(Magnitude), attribute=False)
#: TVM's ONNX frontend is fed the default form; ONNX backends draw the rest (strategies.onnx)
DEFAULT_ONNX_FORMS: SearchStrategy[OnnxForm] = st.just(OnnxForm())
#: the importers of TVM's cases (a PyTorch case is drawn by the PyTorch backend only)
DEFAULT_IMPORTERS: SearchStrategy[Importer] = mostly_first([Importer.RELAX, Importer.ONNX])
DEFAULT_TORCH_FORMS: SearchStrategy[TorchForm] = st.just(TorchForm())
DEFAULT_EPILOGUES: SearchStrategy[Epilogue] = mostly_first(list(Epilogue))
#: True three times in four (a dataflow block); shrinks to True.
MOSTLY_TRUE: SearchStrategy[bool] = mostly_first([True, False])
DEFAULT_FUNCTIONS: SearchStrategy[int] = mostly_first([1, 2])
#: Aim codes (:func:`strategies.aim.aim`): 0 (no aim) half the time, in one choice; shrinks to 0.
DEFAULT_AIMS: SearchStrategy[int] = st.integers(0, 2 ** (AIM_BITS + 1) - 1).map(
    lambda v: 0 if v >> AIM_BITS else v
)


def is_dtype(value: object) -> bool:
    return value in DTYPES


def is_topology(value: object) -> bool:
    return isinstance(value, Topology)


def is_axis(value: object) -> bool:
    return isinstance(value, Axis)


def is_importer(value: object) -> bool:
    return isinstance(value, Importer)


def is_epilogue(value: object) -> bool:
    return isinstance(value, Epilogue)


def is_aim(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**AIM_BITS


def is_function_count(value: object) -> bool:
    return value in (1, 2) and not isinstance(value, bool)


def is_onnx_form(value: object) -> bool:
    return isinstance(value, OnnxForm)


def is_torch_form(value: object) -> bool:
    return isinstance(value, TorchForm)


def is_deviation(value: object) -> bool:
    return isinstance(value, Deviation)


def is_parameter_set(value: object) -> bool:
    return isinstance(value, (tuple, list)) and all(name in OPERANDS for name in value)


@st.composite
def _parameter_sets(draw: DrawFn, operands: tuple[str, ...]) -> tuple[str, ...]:
    """``()`` first (all constants), else a non-empty subset, in ``OPERANDS`` order."""
    if not draw(MOSTLY_FALSE):
        return ()
    chosen = draw(st.lists(st.sampled_from(operands), min_size=1, unique=True))
    return tuple(name for name in operands if name in chosen)


PARAMETER_SETS = {
    True: _parameter_sets(OPERANDS),
    False: _parameter_sets(BN_OPERANDS),
}


@dataclass(frozen=True)
class CaseOptions:
    """Every argument of :func:`cases`, validated."""

    dtypes: SearchStrategy[str]
    topologies: SearchStrategy[Topology]
    axes: SearchStrategy[Axis]
    negative_axes: SearchStrategy[bool]
    parameters: SearchStrategy[tuple[str, ...]] | None
    magnitudes: SearchStrategy[Magnitude]
    conv: ConvOptions
    bn: BatchNormOptions
    min_channels: int
    max_channels: int
    max_spatial: int
    max_batch: int
    importers: SearchStrategy[Importer]
    biases: SearchStrategy[bool]
    epilogues: SearchStrategy[Epilogue]
    dataflows: SearchStrategy[bool]
    dead_statistics: SearchStrategy[bool]
    functions: SearchStrategy[int]
    aims: SearchStrategy[int]
    deviations: SearchStrategy[Deviation] = DEVIATIONS
    onnx_forms: SearchStrategy[OnnxForm] = DEFAULT_ONNX_FORMS
    torch_forms: SearchStrategy[TorchForm] = DEFAULT_TORCH_FORMS

    def for_onnx(self) -> CaseOptions:
        """These options with every attribute ONNX cannot vary pinned to what it says.

        Each pinned attribute is still drawn, and its value replaced: an ONNX case makes
        the same choices as a Relax one, so Hypothesis never finds it simpler, and a
        shrunk case is written by the Relax builder unless the bug needs the importer."""
        return replace(
            self,
            axes=self.axes.map(lambda _: Axis.CHANNEL),
            negative_axes=self.negative_axes.map(lambda _: False),
            conv=ConvOptions(
                data_layouts=self.conv.data_layouts.map(lambda _: "NCHW"),
                kernel_layouts=self.conv.kernel_layouts.map(lambda _: "OIHW"),
                wide_out_dtypes=self.conv.wide_out_dtypes.map(lambda _: False),
            ),
            bn=BatchNormOptions(
                epsilons=self.bn.epsilons.map(_float32),
                centers=self.bn.centers.map(lambda _: True),
                scales=self.bn.scales.map(lambda _: True),
                trainings=self.bn.trainings,
                momenta=self.bn.momenta,
            ),
        )

    def for_torch(self) -> CaseOptions:
        """These options with every attribute a PyTorch module cannot vary pinned to what it
        says (drawn and replaced, as in :meth:`for_onnx`); ``center`` follows ``scale`` (both
        are ``affine``: see :func:`strategies.graphs.cases`), every operand is the module's."""
        return replace(
            self,
            axes=self.axes.map(lambda _: Axis.CHANNEL),
            negative_axes=self.negative_axes.map(lambda _: False),
            parameters=(self.parameters or PARAMETER_SETS[True]).map(lambda _: ()),
            conv=ConvOptions(
                data_layouts=self.conv.data_layouts.map(lambda _: "NCHW"),
                kernel_layouts=self.conv.kernel_layouts.map(lambda _: "OIHW"),
                wide_out_dtypes=self.conv.wide_out_dtypes.map(lambda _: False),
            ),
        )


def _float32(value: float) -> float:
    """``value`` rounded to float32 (ONNX stores epsilon as one), never beyond its range."""
    return float(np.float32(min(value, float(np.finfo(np.float32).max))))
