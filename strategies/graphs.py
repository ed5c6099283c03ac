"""Whole cases: :func:`cases`, the fuzzer's main entry point, and :func:`case_batches`.

Draw order (so examples shrink from the top down and each part stays local):
topology, dtype, importer, the shape of the graph (which convs have a bias, the
epilogue, the form: dataflow block, dead statistics, a second function), batch_norm
axis, parameter set, then block by block its structure (groups and channels,
layouts, out_dtype, a window per spatial dimension, batch), its batch_norm
attributes and its values (the weight's class, then for the first block the data,
then the weight and the four batch_norm operands, each its class then its values,
then the conv bias's values), and last the residual's values.

An ONNX case (the importer drawn ONNX, possible for the conv-bn, chain and
conv-shared topologies in float32, float16 and float64) is what ONNX can say: its
layouts are NCHW/OIHW, its axis the channel axis, center and scale on, no
out_dtype, epsilon rounded to float32, whatever the other strategies would draw.

Shapes are valid by construction. Each conv window comes from
:func:`strategies.geometry.window_choices` together with the input sizes it
accepts, so every output is at least 1x1. A non-channel batch_norm axis is made
to bite by giving the named dimension of the batch_norm input length C:

- ``Axis.BATCH``: the batch is C (``max_batch`` does not apply);
- ``Axis.HEIGHT``/``Axis.WIDTH``: the first conv's window and input length are
  drawn among those whose *output* length is C (input at most
  ``max(max_spatial, C)``);
- chain: both batch_norms use the same axis; with a non-channel axis the second
  conv keeps C output channels and a window that preserves the named length.

:func:`case_batches` draws one case with :func:`cases`, then a list of value
sets for its structure: each re-draws the tensors with the same helpers, in the
same order (``_draw_magnitude``, ``_draw_data``, ``_draw_kernel``,
``_draw_bn_values``), reading dtypes and shapes off the first case.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any, TypedDict

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import DrawFn, SearchStrategy

from fuzz.case import (
    DTYPES,
    EPILOGUE_TOPOLOGIES,
    ONNX_DTYPES,
    ONNX_TOPOLOGIES,
    OPERANDS,
    Block,
    Case,
    Conv2dAttrs,
    Epilogue,
    Form,
    Importer,
    Tensor,
    Topology,
    conv_output_shape,
    kernel_shape,
)

from ._validation import (
    check_integer,
    check_order,
    check_strategy,
    checked_draw,
    is_bool,
)
from .aim import AIM_BITS, aim
from .attributes import (
    DEFAULT_DATA_LAYOUTS,
    DEFAULT_EPSILONS,
    DEFAULT_KERNEL_LAYOUTS,
    DEFAULT_MOMENTA,
    DEVIATION,
    DEVIATIONS,
    FALSE_FIRST,
    FOCUS,
    FOCUS_DRAWS,
    MOSTLY_FALSE,
    TRUE_FIRST,
    Axis,
    BatchNormOptions,
    ConvOptions,
    Deviation,
    make_conv_attrs,
    mostly_first,
)
from .geometry import Window, group_choices, multiplier_range, window_choices
from .values import CODE_BITS, Magnitude, code_array, code_class, draw_array, is_magnitude

__all__ = ["case_batches", "cases", "further_counts", "value_sets"]

DEFAULT_DTYPES: SearchStrategy[str] = mostly_first(DTYPES)
DEFAULT_TOPOLOGIES: SearchStrategy[Topology] = mostly_first(list(Topology))
DEFAULT_AXES: SearchStrategy[Axis] = mostly_first(list(Axis))
DEFAULT_MAGNITUDES: SearchStrategy[Magnitude] = mostly_first(list(Magnitude), attribute=False)
DEFAULT_IMPORTERS: SearchStrategy[Importer] = mostly_first(list(Importer))
DEFAULT_EPILOGUES: SearchStrategy[Epilogue] = mostly_first(list(Epilogue))
#: True three times in four (a dataflow block); shrinks to True.
MOSTLY_TRUE: SearchStrategy[bool] = mostly_first([True, False])
DEFAULT_FUNCTIONS: SearchStrategy[int] = mostly_first([1, 2])
#: Aim codes (:func:`strategies.aim.aim`): 0 (no aim) half the time, in one choice; shrinks to 0.
DEFAULT_AIMS: SearchStrategy[int] = st.integers(0, 2 ** (AIM_BITS + 1) - 1).map(
    lambda v: 0 if v >> AIM_BITS else v
)
#: The batch_norm operands, which every block has (``weight`` and ``bias`` need a conv).
BN_OPERANDS: tuple[str, ...] = tuple(name for name in OPERANDS if name not in ("weight", "bias"))


def _is_dtype(value: object) -> bool:
    return value in DTYPES


def _is_topology(value: object) -> bool:
    return isinstance(value, Topology)


def _is_axis(value: object) -> bool:
    return isinstance(value, Axis)


def _is_importer(value: object) -> bool:
    return isinstance(value, Importer)


def _is_epilogue(value: object) -> bool:
    return isinstance(value, Epilogue)


def _is_aim(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**AIM_BITS


def _is_function_count(value: object) -> bool:
    return value in (1, 2) and not isinstance(value, bool)


def _is_parameter_set(value: object) -> bool:
    return isinstance(value, (tuple, list)) and all(name in OPERANDS for name in value)


@st.composite
def _parameter_sets(draw: DrawFn, operands: tuple[str, ...]) -> tuple[str, ...]:
    """``()`` first (all constants), else a non-empty subset, in ``OPERANDS`` order."""
    if not draw(MOSTLY_FALSE):
        return ()
    chosen = draw(st.lists(st.sampled_from(operands), min_size=1, unique=True))
    return tuple(name for name in operands if name in chosen)


_PARAMETER_SETS = {
    True: _parameter_sets(OPERANDS),
    False: _parameter_sets(BN_OPERANDS),
}


@dataclass(frozen=True)
class _Options:
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

    def for_onnx(self) -> _Options:
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


def _float32(value: float) -> float:
    """``value`` rounded to float32 (ONNX stores epsilon as one), never beyond its range."""
    return float(np.float32(min(value, float(np.finfo(np.float32).max))))


def cases(
    *,
    dtypes: SearchStrategy[str] = DEFAULT_DTYPES,
    wide_out_dtypes: SearchStrategy[bool] = MOSTLY_FALSE,
    data_layouts: SearchStrategy[str] = DEFAULT_DATA_LAYOUTS,
    kernel_layouts: SearchStrategy[str] = DEFAULT_KERNEL_LAYOUTS,
    topologies: SearchStrategy[Topology] = DEFAULT_TOPOLOGIES,
    axes: SearchStrategy[Axis] = DEFAULT_AXES,
    negative_axes: SearchStrategy[bool] = FALSE_FIRST,
    epsilons: SearchStrategy[float] = DEFAULT_EPSILONS,
    centers: SearchStrategy[bool] = TRUE_FIRST,
    scales: SearchStrategy[bool] = TRUE_FIRST,
    trainings: SearchStrategy[bool] = MOSTLY_FALSE,
    momenta: SearchStrategy[float] = DEFAULT_MOMENTA,
    parameters: SearchStrategy[tuple[str, ...]] | None = None,
    magnitudes: SearchStrategy[Magnitude] = DEFAULT_MAGNITUDES,
    min_channels: int = 1,
    max_channels: int = 4,
    max_spatial: int = 4,
    max_batch: int = 2,
    importers: SearchStrategy[Importer] = DEFAULT_IMPORTERS,
    biases: SearchStrategy[bool] = MOSTLY_FALSE,
    epilogues: SearchStrategy[Epilogue] = DEFAULT_EPILOGUES,
    dataflows: SearchStrategy[bool] = MOSTLY_TRUE,
    dead_statistics: SearchStrategy[bool] = MOSTLY_FALSE,
    functions: SearchStrategy[int] = DEFAULT_FUNCTIONS,
    aims: SearchStrategy[int] = DEFAULT_AIMS,
    deviations: SearchStrategy[Deviation] = DEVIATIONS,
) -> SearchStrategy[Case]:
    """Valid :class:`~fuzz.case.Case` specs, shrinking toward the simplest graph.

    Strategies (defaults draw every option, the first one listed is where
    examples shrink to):

    - ``dtypes``: input dtype (float32, float16, bfloat16, float64).
    - ``wide_out_dtypes``: booleans, per conv: ``out_dtype`` is ``""`` (False) or
      the next wider dtype (True; float32 for float16/bfloat16, float64 for
      float32, ``""`` for float64). The weight has the conv's input dtype, the
      batch_norm operands the conv's output dtype.
    - ``data_layouts`` (NCHW, NHWC; the output layout is the same),
      ``kernel_layouts`` (OIHW, HWIO, OHWI, IOHW; per conv).
    - ``topologies``: :class:`~fuzz.case.Topology` (conv-bn first).
    - ``axes``: :class:`~strategies.Axis`, the dimension the batch_norm ``axis``
      names (CHANNEL first); ``negative_axes``: booleans, write it as ``i - 4``.
    - ``epsilons``, ``centers``, ``scales``, ``trainings``, ``momenta``: the
      batch_norm attributes, per block, as in :func:`~strategies.batch_norm_attrs`.
    - ``parameters``: tuples of :data:`~fuzz.case.OPERANDS` that become function
      parameters instead of constants. Default None: ``()`` first, else a
      non-empty subset of the operands the topology has. ``weight`` is dropped
      for bn-only (it has no conv).
    - ``magnitudes``: :class:`~strategies.Magnitude`, drawn per tensor (data,
      weight, gamma, beta, mean, var; var never negative). When a case's first
      weight is CANCELLING its data is constant, so the +w/-w weights cancel.

    - ``importers``: :class:`~fuzz.case.Importer` (RELAX first): who writes the
      module; ONNX (an ``onnx.helper`` model through TVM's ``from_onnx``) is drawn
      only where ONNX can say the case, and pins what ONNX cannot vary (see the
      module docstring of :mod:`strategies.graphs`).
    - ``biases``: booleans, per conv: the conv has a bias (a separate ``add``).
    - ``epilogues``: :class:`~fuzz.case.Epilogue` after the last batch_norm (NONE
      first; RELU, CLIP, ADD of a second input), for conv-bn and the chain.
    - ``dataflows`` (True first), ``dead_statistics`` (False first),
      ``functions`` (1 first, or 2): the :class:`~fuzz.case.Form` of a RELAX case.
    - ``aims``: integer aim codes (:func:`strategies.aim.aim`), one per value set: 0
      leaves the drawn values alone (half the time, and where examples shrink to);
      anything else rewrites the first block's values toward a fold's edges (chosen
      scales, a cancelling mean, partial sums near the maximum), out of their drawn
      magnitude classes. ``st.just(0)`` keeps every tensor in its class.
    - ``deviations``: :class:`~strategies.attributes.Deviation`, drawn once per case
      (swarm testing): how far the default-first attributes above stray from their
      defaults in that case (USUAL first; ONE changes a single attribute).

    Bounds (values): ``min_channels``/``max_channels`` bound every channel
    count; ``max_spatial`` the data's height and width; ``max_batch`` the
    batch. A non-channel axis overrides the bound of the dimension it names
    (that dimension has length C); see the module docstring of
    :mod:`strategies.graphs`.
    """
    check_integer(min_channels, "min_channels", min_value=1)
    check_integer(max_channels, "max_channels", min_value=1)
    check_order("min_channels", min_channels, "max_channels", max_channels)
    check_integer(max_spatial, "max_spatial", min_value=1)
    check_integer(max_batch, "max_batch", min_value=1)
    check_strategy(dtypes, "dtypes")
    check_strategy(topologies, "topologies")
    check_strategy(axes, "axes")
    check_strategy(negative_axes, "negative_axes")
    check_strategy(magnitudes, "magnitudes")
    if parameters is not None:
        check_strategy(parameters, "parameters")
    check_strategy(importers, "importers")
    check_strategy(biases, "biases")
    check_strategy(epilogues, "epilogues")
    check_strategy(dataflows, "dataflows")
    check_strategy(dead_statistics, "dead_statistics")
    check_strategy(functions, "functions")
    check_strategy(aims, "aims")
    check_strategy(deviations, "deviations")
    options = _Options(
        dtypes=dtypes,
        topologies=topologies,
        axes=axes,
        negative_axes=negative_axes,
        parameters=parameters,
        magnitudes=magnitudes,
        conv=ConvOptions(
            data_layouts=data_layouts,
            kernel_layouts=kernel_layouts,
            wide_out_dtypes=wide_out_dtypes,
        ),
        bn=BatchNormOptions(
            epsilons=epsilons, centers=centers, scales=scales, trainings=trainings, momenta=momenta
        ),
        min_channels=min_channels,
        max_channels=max_channels,
        max_spatial=max_spatial,
        max_batch=max_batch,
        importers=importers,
        biases=biases,
        epilogues=epilogues,
        dataflows=dataflows,
        dead_statistics=dead_statistics,
        functions=functions,
        aims=aims,
        deviations=deviations,
    )
    return _cases(options)


def case_batches(*, max_size: int = 64, **kwargs: Any) -> SearchStrategy[tuple[Case, ...]]:
    """Tuples of 1 to ``max_size`` cases that differ only in their tensor values.

    The first case is drawn by ``cases(**kwargs)`` and shrinks exactly as it
    does. Each further case keeps everything of the first (topology, dtype,
    shapes, conv and batch_norm attributes, parameters) and draws again the
    values of ``data``, ``weight``, ``gamma``, ``beta``, ``mean`` and ``var``,
    each tensor its own class from ``magnitudes`` then its values, under the
    same rules as :func:`cases` (variances never negative, constant data under
    a CANCELLING first weight). The further cases are a list, so a batch
    shrinks to the single first case. Lets a runner build and compile one
    graph and check it on many value sets.

    ``max_size`` (a value, at least 1) bounds the batch; every other argument
    is passed to :func:`cases` and validated there.
    """
    check_integer(max_size, "max_size", min_value=1)
    first = cases(**kwargs)  # validates the other arguments exactly as cases() does
    # The defaults are the ones cases() uses (the same module constants).
    magnitudes: SearchStrategy[Magnitude] = kwargs.get("magnitudes", DEFAULT_MAGNITUDES)
    aims: SearchStrategy[int] = kwargs.get("aims", DEFAULT_AIMS)
    return _case_batches(first, magnitudes, aims, max_size, magnitudes is DEFAULT_MAGNITUDES)


# ---------------------------------------------------------------------------
# drawing


# The value helpers take the ``magnitudes`` strategy rather than every option:
# :func:`case_batches` re-draws a case's values with them and nothing else.


def _draw_magnitude(draw: DrawFn, magnitudes: SearchStrategy[Magnitude]) -> Magnitude:
    return checked_draw(draw, magnitudes, "magnitudes", is_magnitude, "a Magnitude")


def _draw_tensor(
    draw: DrawFn,
    magnitudes: SearchStrategy[Magnitude],
    dtype: str,
    shape: tuple[int, ...],
    *,
    allow_negative: bool,
) -> Tensor:
    magnitude = _draw_magnitude(draw, magnitudes)
    values = draw_array(draw, dtype=dtype, shape=shape, magnitude=magnitude, allow_negative=allow_negative)
    return Tensor.from_numpy(values, dtype)


class _BnValues(TypedDict):
    gamma: Tensor
    beta: Tensor
    mean: Tensor
    var: Tensor


def _draw_bn_values(
    draw: DrawFn, magnitudes: SearchStrategy[Magnitude], dtype: str, channels: int
) -> _BnValues:
    """gamma, beta, mean, var, in that order (each: class, values); variances never negative."""
    gamma, beta, mean, var = (
        _draw_tensor(draw, magnitudes, dtype, (channels,), allow_negative=name != "var")
        for name in BN_OPERANDS
    )
    return _BnValues(gamma=gamma, beta=beta, mean=mean, var=var)


def _draw_data(
    draw: DrawFn,
    magnitudes: SearchStrategy[Magnitude],
    dtype: str,
    shape: tuple[int, ...],
    *,
    weight_class: Magnitude,
) -> Tensor:
    """The data under a conv whose first weight has ``weight_class``: its class, then values."""
    data_class = _draw_magnitude(draw, magnitudes)
    values = draw_array(
        draw,
        dtype=dtype,
        shape=shape,
        magnitude=data_class,
        # Cancellation needs equal inputs under the +w/-w weights.
        constant=weight_class is Magnitude.CANCELLING,
    )
    return Tensor.from_numpy(values, dtype)


def _draw_kernel(
    draw: DrawFn, attrs: Conv2dAttrs, oihw: tuple[int, ...], dtype: str, magnitude: Magnitude
) -> Tensor:
    """Values drawn in OIHW order (so CANCELLING pairs sit in one output channel),
    then transposed to the kernel layout."""
    values = draw_array(draw, dtype=dtype, shape=oihw, magnitude=magnitude)
    permutation = ["OIHW".index(d) for d in attrs.kernel_layout]
    return Tensor.from_numpy(np.transpose(values, permutation), dtype)


def _draw_bn_block(
    draw: DrawFn,
    options: _Options,
    *,
    axis: int,
    dtype: str,
    channels: int,
    conv: Conv2dAttrs | None = None,
    weight: Tensor | None = None,
) -> Block:
    """The batch_norm attributes, then gamma, beta, mean, var (each: class, values)."""
    bn = options.bn.draw(draw, axis)
    values = _draw_bn_values(draw, options.magnitudes, dtype, channels)
    return Block(bn=bn, conv=conv, weight=weight, **values)


def _draw_parameters(draw: DrawFn, options: _Options, topology: Topology) -> tuple[str, ...]:
    if options.parameters is None:
        return draw(_PARAMETER_SETS[topology.has_conv])
    chosen = checked_draw(
        draw,
        options.parameters,
        "parameters",
        _is_parameter_set,
        f"a tuple of names from {OPERANDS}",
    )
    allowed = OPERANDS if topology.has_conv else BN_OPERANDS
    return tuple(name for name in allowed if name in chosen)


@functools.cache
def _windows(size: int | None, max_size: int, target: int | None) -> SearchStrategy[tuple[Window, int, int]]:
    return st.sampled_from(window_choices(kernel=None, size=size, max_size=max_size, target=target))


@functools.cache
def _divisors(n: int) -> SearchStrategy[int]:
    return st.sampled_from([g for g in range(1, n + 1) if n % g == 0])


@functools.cache
def _groups(min_channels: int, max_channels: int) -> SearchStrategy[int]:
    return st.sampled_from(group_choices(min_channels, max_channels))


def _draw_window(draw: DrawFn, *, size: int | None, max_size: int, target: int | None) -> tuple[Window, int]:
    """A window and its input length (``size`` if known), with output >= 1 or == target."""
    window, low, high = draw(_windows(size, max_size, target))
    return window, size if size is not None else draw(st.integers(low, high))


def _channel_count(draw: DrawFn, options: _Options, groups: int) -> int:
    low, high = multiplier_range(groups, options.min_channels, options.max_channels)
    return groups * draw(st.integers(low, high))


@dataclass(frozen=True)
class _Conv:
    """The structure of one conv block, drawn before any value."""

    attrs: Conv2dAttrs
    c_in: int
    c_out: int
    kernel: tuple[int, int]
    in_size: tuple[int, int]
    out_size: tuple[int, int]
    in_dtype: str

    @property
    def out_dtype(self) -> str:
        return self.attrs.out_dtype or self.in_dtype


def _draw_conv(
    draw: DrawFn,
    options: _Options,
    *,
    axis: Axis,
    data_layout: str,
    in_dtype: str,
    previous: _Conv | None,
) -> _Conv:
    """The first conv (``previous`` None) or the chain's second one."""
    if previous is None:
        groups = draw(_groups(options.min_channels, options.max_channels))
        c_in = _channel_count(draw, options, groups)
        c_out = _channel_count(draw, options, groups)
    else:
        c_in = previous.c_out
        groups = draw(_divisors(c_in))
        # A non-channel axis keeps C so both batch_norm inputs have length C there.
        c_out = c_in if axis is not Axis.CHANNEL else _channel_count(draw, options, groups)
    kernel_layout = options.conv.draw_kernel_layout(draw)
    out_dtype = options.conv.draw_out_dtype(draw, in_dtype)
    windows: list[Window] = []
    in_size: list[int] = []
    for i, dim in enumerate((Axis.HEIGHT, Axis.WIDTH)):
        if previous is None:
            target = c_out if axis is dim else None
            window, n = _draw_window(
                draw, size=None, max_size=max(options.max_spatial, target or 0), target=target
            )
        else:
            known = previous.out_size[i]
            window, n = _draw_window(draw, size=known, max_size=known, target=known if axis is dim else None)
        windows.append(window)
        in_size.append(n)
    attrs = make_conv_attrs(
        (windows[0], windows[1]),
        groups=groups,
        data_layout=data_layout,
        kernel_layout=kernel_layout,
        out_dtype=out_dtype,
    )
    return _Conv(
        attrs=attrs,
        c_in=c_in,
        c_out=c_out,
        kernel=(windows[0].kernel, windows[1].kernel),
        in_size=(in_size[0], in_size[1]),
        out_size=(windows[0].output(in_size[0]), windows[1].output(in_size[1])),
        in_dtype=in_dtype,
    )


def _draw_batch(draw: DrawFn, options: _Options, axis: Axis, channels: int) -> int:
    return channels if axis is Axis.BATCH else draw(st.integers(1, options.max_batch))


def _draw_weight(draw: DrawFn, conv: _Conv, magnitude: Magnitude) -> Tensor:
    oihw = (conv.c_out, conv.c_in // conv.attrs.groups, *conv.kernel)
    weight = _draw_kernel(draw, conv.attrs, oihw, conv.in_dtype, magnitude)
    assert weight.shape == kernel_shape(conv.attrs, conv.c_in, conv.c_out, *conv.kernel)
    return weight


def _draw_bias(draw: DrawFn, magnitudes: SearchStrategy[Magnitude], dtype: str, channels: int) -> Tensor:
    return _draw_tensor(draw, magnitudes, dtype, (channels,), allow_negative=True)


def _block(draw: DrawFn, options: _Options, conv: _Conv, axis: int, weight: Tensor, has_bias: bool) -> Block:
    """The batch_norm block after ``conv``, then its conv bias's values if it has one."""
    block = _draw_bn_block(
        draw,
        options,
        axis=axis,
        dtype=conv.out_dtype,
        channels=conv.c_out,
        conv=conv.attrs,
        weight=weight,
    )
    if not has_bias:
        return block
    return replace(block, bias=_draw_bias(draw, options.magnitudes, conv.out_dtype, conv.c_out))


def _output_shape(data: Tensor, blocks: list[Block]) -> tuple[int, ...]:
    shape = data.shape
    for block in blocks:
        if block.conv is not None and block.weight is not None:
            shape = conv_output_shape(block.conv, shape, block.weight.shape)
    return shape


@dataclass(frozen=True)
class _Shape:
    """The choices about a case's shape that its topology allows, drawn before any
    attribute or value (so shrinking one of them never shifts another's meaning):
    which convs have a bias, the epilogue, the form."""

    biases: tuple[bool, ...]
    epilogue: Epilogue
    form: Form


def _draw_shape(draw: DrawFn, options: _Options, topology: Topology, importer: Importer) -> _Shape:
    biases = tuple(
        checked_draw(draw, options.biases, "biases", is_bool, "a bool") if topology.has_conv else False
        for _ in range(topology.n_blocks)
    )
    epilogue = Epilogue.NONE
    if topology in EPILOGUE_TOPOLOGIES:
        epilogue = checked_draw(draw, options.epilogues, "epilogues", _is_epilogue, "an Epilogue")
    # Drawn for an ONNX case too, and then ignored (it writes its own form): see
    # _Options.for_onnx for why an ONNX case makes the same choices.
    dataflow = checked_draw(draw, options.dataflows, "dataflows", is_bool, "a bool")
    dead = checked_draw(draw, options.dead_statistics, "dead_statistics", is_bool, "a bool")
    functions = 1
    if topology in (Topology.CONV_BN, Topology.CHAIN):
        functions = checked_draw(draw, options.functions, "functions", _is_function_count, "1 or 2")
    form = Form(Importer.ONNX) if importer is Importer.ONNX else Form(importer, dataflow, dead, functions)
    return _Shape(biases, epilogue, form)


@st.composite
def _cases(draw: DrawFn, options: _Options) -> Case:
    # How far this case strays from the defaults: every mostly_first draw below follows it.
    deviation = checked_draw(draw, options.deviations, "deviations", _is_deviation, "a Deviation")
    token = DEVIATION.set(deviation)
    focus = [draw(st.integers(0, FOCUS_DRAWS - 1)) if deviation is Deviation.ONE else -1, 0]
    focus_token = FOCUS.set(focus)
    try:
        return _deviating_case(draw, options)
    finally:
        FOCUS.reset(focus_token)
        DEVIATION.reset(token)


def _is_deviation(value: object) -> bool:
    return isinstance(value, Deviation)


def _deviating_case(draw: DrawFn, options: _Options) -> Case:
    topology = checked_draw(draw, options.topologies, "topologies", _is_topology, "a Topology")
    dtype = checked_draw(draw, options.dtypes, "dtypes", _is_dtype, f"one of {DTYPES}")
    # Drawn whatever the topology and dtype (and ignored where ONNX cannot say the case),
    # so that no dtype or topology is "simpler" to Hypothesis for skipping the choice.
    importer = checked_draw(draw, options.importers, "importers", _is_importer, "an Importer")
    if topology not in ONNX_TOPOLOGIES or dtype not in ONNX_DTYPES:
        importer = Importer.RELAX
    if importer is Importer.ONNX:
        options = options.for_onnx()
    shape = _draw_shape(draw, options, topology, importer)
    case = _draw_case(draw, options, topology, dtype, shape)
    # Only the parameters the case has; then the residual's values, last of all.
    present = tuple(n for n in case.parameters if any(b.operand(n) is not None for b in case.blocks))
    residual = None
    if shape.epilogue is Epilogue.ADD:
        out = _output_shape(case.data, list(case.blocks))
        residual = _draw_tensor(
            draw, options.magnitudes, case.blocks[-1].gamma.dtype, out, allow_negative=True
        )
    case = replace(case, parameters=present, epilogue=shape.epilogue, residual=residual, form=shape.form)
    return aim(case, checked_draw(draw, options.aims, "aims", _is_aim, "an aim code"))


def _draw_case(draw: DrawFn, options: _Options, topology: Topology, dtype: str, shape: _Shape) -> Case:
    """The structure, attributes and values of a case (its epilogue and form aside)."""
    axis = checked_draw(draw, options.axes, "axes", _is_axis, "an Axis")
    negative = checked_draw(draw, options.negative_axes, "negative_axes", is_bool, "a bool")
    parameters = _draw_parameters(draw, options, topology)
    if not topology.has_conv:
        return _bn_only_case(draw, options, dtype, axis, negative, parameters)

    data_layout = options.conv.draw_data_layout(draw)
    axis_index = axis.index(data_layout, negative=negative)
    first = _draw_conv(draw, options, axis=axis, data_layout=data_layout, in_dtype=dtype, previous=None)
    batch = _draw_batch(draw, options, axis, first.c_out)
    weight_class = _draw_magnitude(draw, options.magnitudes)
    dims = {"N": batch, "C": first.c_in, "H": first.in_size[0], "W": first.in_size[1]}
    data_shape = tuple(dims[d] for d in data_layout)
    data = _draw_data(draw, options.magnitudes, dtype, data_shape, weight_class=weight_class)
    weight = _draw_weight(draw, first, weight_class)
    blocks = [_block(draw, options, first, axis_index, weight, shape.biases[0])]
    if topology is Topology.CHAIN:
        second = _draw_conv(
            draw,
            options,
            axis=axis,
            data_layout=data_layout,
            in_dtype=first.out_dtype,
            previous=first,
        )
        weight = _draw_weight(draw, second, _draw_magnitude(draw, options.magnitudes))
        blocks.append(_block(draw, options, second, axis_index, weight, shape.biases[1]))
    return Case(topology=topology, data=data, blocks=tuple(blocks), parameters=parameters)


def _bn_only_case(
    draw: DrawFn,
    options: _Options,
    dtype: str,
    axis: Axis,
    negative: bool,
    parameters: tuple[str, ...],
) -> Case:
    """batch_norm straight on NCHW data; a non-channel axis names a dimension of length C."""
    channels = draw(st.integers(options.min_channels, options.max_channels))
    dims = {"N": _draw_batch(draw, options, axis, channels), "C": channels}
    for dim in (Axis.HEIGHT, Axis.WIDTH):
        dims[dim.value] = channels if axis is dim else draw(st.integers(1, options.max_spatial))
    data = _draw_tensor(draw, options.magnitudes, dtype, tuple(dims[d] for d in "NCHW"), allow_negative=True)
    block = _draw_bn_block(
        draw, options, axis=axis.index("NCHW", negative=negative), dtype=dtype, channels=channels
    )
    return Case(topology=Topology.BN_ONLY, data=data, blocks=(block,), parameters=parameters)


# ---------------------------------------------------------------------------
# batches: one structure, several value sets


def value_sets(
    case: Case,
    *,
    magnitudes: SearchStrategy[Magnitude] = DEFAULT_MAGNITUDES,
    aims: SearchStrategy[int] = DEFAULT_AIMS,
) -> SearchStrategy[Case]:
    """Cases with the structure of ``case`` (topology, dtype, shapes, attributes, form,
    parameters) and every tensor's values drawn anew: what :func:`case_batches` adds
    after its first case, for a runner that draws further value sets one at a time.

    With the default ``magnitudes`` each tensor is one choice (a code,
    :func:`strategies.values.code_array`); otherwise each draws its class from
    ``magnitudes``, then its values. Each value set then draws its aim from ``aims``.
    """
    if not isinstance(case, Case):
        raise InvalidArgument(f"case={case!r} is not a fuzz.case.Case")
    check_strategy(magnitudes, "magnitudes")
    check_strategy(aims, "aims")
    # Hypothesis hands a composite its strategy arguments unwrapped, so whether these are
    # the default magnitudes (one code per tensor) is decided here, by identity.
    return _value_sets(case, magnitudes, aims, magnitudes is DEFAULT_MAGNITUDES)


@st.composite
def _value_sets(
    draw: DrawFn, case: Case, magnitudes: SearchStrategy[Magnitude], aims: SearchStrategy[int], coded: bool
) -> Case:
    other = _recoded(draw, case) if coded else draw(_revalued(case, magnitudes))
    return aim(other, checked_draw(draw, aims, "aims", _is_aim, "an aim code"))


@st.composite
def _case_batches(
    draw: DrawFn,
    first: SearchStrategy[Case],
    magnitudes: SearchStrategy[Magnitude],
    aims: SearchStrategy[int],
    max_size: int,
    coded: bool,
) -> tuple[Case, ...]:
    case = draw(first)
    # How many further value sets: one choice, uniform (so batches are long on average,
    # and each costs its values only), shrinking to none.
    count = draw(further_counts(max_size))
    return (case, *(draw(_value_sets(case, magnitudes, aims, coded)) for _ in range(count)))


_CODES = st.integers(0, 2**CODE_BITS - 1)


@functools.cache
def further_counts(max_size: int) -> SearchStrategy[int]:
    """How many further value sets a batch of at most ``max_size`` gets: 0 to
    ``max_size - 1``, uniform (``sampled_from`` draws uniformly, where ``integers``
    favours small values), shrinking to 0."""
    return st.sampled_from(range(max_size))


@st.composite
def _revalued(draw: DrawFn, case: Case, magnitudes: SearchStrategy[Magnitude]) -> Case:
    """``case`` with every tensor drawn again, in the order :func:`_cases` draws them: each
    tensor its class from ``magnitudes``, then its values (:func:`_recoded` is the cheap
    form for the default magnitudes)."""
    if not case.topology.has_conv:
        data = _draw_tensor(draw, magnitudes, case.dtype, case.data.shape, allow_negative=True)
        (block,) = case.blocks
        values = _draw_bn_values(draw, magnitudes, block.gamma.dtype, block.gamma.shape[0])
        return replace(case, data=data, blocks=(replace(block, **values),))

    weight_class = _draw_magnitude(draw, magnitudes)
    data = _draw_data(draw, magnitudes, case.dtype, case.data.shape, weight_class=weight_class)
    blocks = []
    for i, block in enumerate(case.blocks):
        assert block.conv is not None and block.weight is not None
        magnitude = weight_class if i == 0 else _draw_magnitude(draw, magnitudes)
        dims = dict(zip(block.conv.kernel_layout, block.weight.shape, strict=True))
        oihw = tuple(dims[d] for d in "OIHW")
        weight = _draw_kernel(draw, block.conv, oihw, block.weight.dtype, magnitude)
        assert weight.shape == block.weight.shape
        values = _draw_bn_values(draw, magnitudes, block.gamma.dtype, block.gamma.shape[0])
        bias = block.bias and _draw_bias(draw, magnitudes, block.bias.dtype, block.bias.shape[0])
        blocks.append(replace(block, weight=weight, bias=bias, **values))
    residual = case.residual
    if residual is not None:
        residual = _draw_tensor(draw, magnitudes, residual.dtype, residual.shape, allow_negative=True)
    return replace(case, data=data, blocks=tuple(blocks), residual=residual)


def _recoded(draw: DrawFn, case: Case) -> Case:
    """:func:`_revalued` with one code per tensor, in the same order."""

    def tensor(like: Tensor, *, allow_negative: bool = True, constant: bool = False) -> Tensor:
        values = code_array(
            draw(_CODES), dtype=like.dtype, shape=like.shape, allow_negative=allow_negative, constant=constant
        )
        return Tensor.from_numpy(values, like.dtype)

    def bn_values(block: Block) -> _BnValues:
        gamma, beta, mean = (tensor(t) for t in (block.gamma, block.beta, block.mean))
        return _BnValues(gamma=gamma, beta=beta, mean=mean, var=tensor(block.var, allow_negative=False))

    if not case.topology.has_conv:
        data = tensor(case.data)
        (block,) = case.blocks
        return replace(case, data=data, blocks=(replace(block, **bn_values(block)),))
    weight_code = draw(_CODES)
    data = tensor(case.data, constant=code_class(weight_code) is Magnitude.CANCELLING)
    blocks = []
    for i, block in enumerate(case.blocks):
        assert block.conv is not None and block.weight is not None
        code = weight_code if i == 0 else draw(_CODES)
        dims = dict(zip(block.conv.kernel_layout, block.weight.shape, strict=True))
        oihw = code_array(code, dtype=block.weight.dtype, shape=tuple(dims[d] for d in "OIHW"))
        permutation = ["OIHW".index(d) for d in block.conv.kernel_layout]
        weight = Tensor.from_numpy(np.transpose(oihw, permutation), block.weight.dtype)
        values = bn_values(block)
        bias = block.bias and tensor(block.bias)
        blocks.append(replace(block, weight=weight, bias=bias, **values))
    residual = case.residual and tensor(case.residual)
    return replace(case, data=data, blocks=tuple(blocks), residual=residual)
