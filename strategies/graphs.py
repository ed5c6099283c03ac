"""Whole cases: :func:`cases`, the fuzzer's main entry point.

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

The parts live beside this module: :mod:`.options` (defaults and validated options),
:mod:`.convs` (one conv block's structure), :mod:`.shapes` (biases, epilogue, form),
:mod:`.tensors` (the values);
:mod:`.batches` re-draws the values for one structure.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st
from hypothesis.strategies import DrawFn, SearchStrategy

from fuzz.model.case import (
    ONNX_DTYPES,
    ONNX_TOPOLOGIES,
    TORCH_TOPOLOGIES,
    Block,
    Case,
    Conv2dAttrs,
    Epilogue,
    Topology,
    values_per_channel,
)
from fuzz.model.form import Importer, OnnxForm, TorchForm
from fuzz.model.tensor import DTYPES, OPERANDS, Tensor

from ._validation import (
    check_integer,
    check_order,
    check_strategy,
    checked_draw,
    is_bool,
)
from .aim import aim
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
)
from .convs import ConvBlock, draw_batch, draw_conv, draw_weight
from .onnx import fit
from .options import (
    DEFAULT_AIMS,
    DEFAULT_AXES,
    DEFAULT_DTYPES,
    DEFAULT_EPILOGUES,
    DEFAULT_FUNCTIONS,
    DEFAULT_IMPORTERS,
    DEFAULT_MAGNITUDES,
    DEFAULT_ONNX_FORMS,
    DEFAULT_TOPOLOGIES,
    DEFAULT_TORCH_FORMS,
    MOSTLY_TRUE,
    PARAMETER_SETS,
    CaseOptions,
    is_aim,
    is_axis,
    is_deviation,
    is_dtype,
    is_importer,
    is_parameter_set,
    is_topology,
)
from .shapes import Shape, draw_shape, output_shape
from .tensors import (
    BN_OPERANDS,
    draw_bias,
    draw_bn_values,
    draw_data,
    draw_magnitude,
    draw_tensor,
)
from .torch_forms import fit_torch
from .values import Magnitude

__all__ = ["cases"]


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
    onnx_forms: SearchStrategy[OnnxForm] = DEFAULT_ONNX_FORMS,
    torch_forms: SearchStrategy[TorchForm] = DEFAULT_TORCH_FORMS,
) -> SearchStrategy[Case]:
    """Valid :class:`~fuzz.model.case.Case` specs, shrinking toward the simplest graph.

    Strategies (defaults draw every option, the first one listed is where
    examples shrink to):

    - ``dtypes``: input dtype (float32, float16, bfloat16, float64).
    - ``wide_out_dtypes``: booleans, per conv: ``out_dtype`` is ``""`` (False) or
      the next wider dtype (True; float32 for float16/bfloat16, float64 for
      float32, ``""`` for float64). The weight has the conv's input dtype, the
      batch_norm operands the conv's output dtype.
    - ``data_layouts`` (NCHW, NHWC; the output layout is the same),
      ``kernel_layouts`` (OIHW, HWIO, OHWI, IOHW; per conv).
    - ``topologies``: :class:`~fuzz.model.case.Topology` (conv-bn first).
    - ``axes``: :class:`~strategies.Axis`, the dimension the batch_norm ``axis``
      names (CHANNEL first); ``negative_axes``: booleans, write it as ``i - 4``.
    - ``epsilons``, ``centers``, ``scales``, ``trainings``, ``momenta``: the
      batch_norm attributes, per block, as in :func:`~strategies.batch_norm_attrs`.
    - ``parameters``: tuples of :data:`~fuzz.model.case.OPERANDS` that become function
      parameters instead of constants. Default None: ``()`` first, else a
      non-empty subset of the operands the topology has. ``weight`` is dropped
      for bn-only (it has no conv).
    - ``magnitudes``: :class:`~strategies.Magnitude`, drawn per tensor (data,
      weight, gamma, beta, mean, var; var never negative). When a case's first
      weight is CANCELLING its data is constant, so the +w/-w weights cancel.

    - ``importers``: :class:`~fuzz.model.case.Importer` (RELAX first): who writes the
      module; ONNX (an ``onnx.helper`` model through TVM's ``from_onnx``) is drawn
      only where ONNX can say the case, and pins what ONNX cannot vary (see the
      module docstring of :mod:`strategies.graphs`).
    - ``biases``: booleans, per conv: the conv has a bias (a separate ``add``).
    - ``epilogues``: :class:`~fuzz.model.case.Epilogue` after the last batch_norm (NONE
      first; RELU, CLIP, ADD of a second input), for conv-bn and the chain.
    - ``dataflows`` (True first), ``dead_statistics`` (False first),
      ``functions`` (1 first, or 2): the :class:`~fuzz.model.case.Form` of a RELAX case.
    - ``aims``: integer aim codes (:func:`strategies.aim.aim`), one per value set: 0
      leaves the drawn values alone (half the time, and where examples shrink to);
      anything else rewrites the first block's values toward a fold's edges (chosen
      scales, a cancelling mean, partial sums near the maximum), out of their drawn
      magnitude classes. ``st.just(0)`` keeps every tensor in its class.
    - ``deviations``: :class:`~strategies.attributes.Deviation`, drawn once per case
      (swarm testing): how far the default-first attributes above stray from their
      defaults in that case (USUAL first; ONE changes a single attribute).
    - ``onnx_forms``: :class:`~fuzz.model.case.OnnxForm`, how an ONNX case's model is
      written (default: opset 15, nothing else; :func:`strategies.onnx.onnx_forms`
      draws the rest).
    - ``torch_forms``: :class:`~fuzz.model.case.TorchForm`, how a PyTorch case's module is
      written (default: Conv2d, contiguous; :func:`strategies.torch_forms.torch_forms`
      draws the rest). A PyTorch case (``importers`` drawing TORCH, as the PyTorch backend
      asks) pins what a module cannot vary and has its ``center`` follow ``scale``.

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
    check_strategy(onnx_forms, "onnx_forms")
    check_strategy(torch_forms, "torch_forms")
    options = CaseOptions(
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
        onnx_forms=onnx_forms,
        torch_forms=torch_forms,
    )
    return _cases(options)


# ---------------------------------------------------------------------------
# drawing the structure


def _draw_bn_block(
    draw: DrawFn,
    options: CaseOptions,
    *,
    axis: int,
    dtype: str,
    channels: int,
    conv: Conv2dAttrs | None = None,
    weight: Tensor | None = None,
) -> Block:
    """The batch_norm attributes, then gamma, beta, mean, var (each: class, values)."""
    bn = options.bn.draw(draw, axis)
    values = draw_bn_values(draw, options.magnitudes, dtype, channels)
    return Block(bn=bn, conv=conv, weight=weight, **values)


def _draw_parameters(draw: DrawFn, options: CaseOptions, topology: Topology) -> tuple[str, ...]:
    if options.parameters is None:
        return draw(PARAMETER_SETS[topology.has_conv])
    chosen = checked_draw(
        draw,
        options.parameters,
        "parameters",
        is_parameter_set,
        f"a tuple of names from {OPERANDS}",
    )
    allowed = OPERANDS if topology.has_conv else BN_OPERANDS
    return tuple(name for name in allowed if name in chosen)


def _block(
    draw: DrawFn, options: CaseOptions, conv: ConvBlock, axis: int, weight: Tensor, has_bias: bool
) -> Block:
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
    return replace(block, bias=draw_bias(draw, options.magnitudes, conv.out_dtype, conv.c_out))


@st.composite
def _cases(draw: DrawFn, options: CaseOptions) -> Case:
    # How far this case strays from the defaults: every mostly_first draw below follows it.
    deviation = checked_draw(draw, options.deviations, "deviations", is_deviation, "a Deviation")
    token = DEVIATION.set(deviation)
    try:  # a draw may end the example (Hypothesis stops it by raising): nothing may leak
        focus = [draw(st.integers(0, FOCUS_DRAWS - 1)) if deviation is Deviation.ONE else -1, 0]
        focus_token = FOCUS.set(focus)
        try:
            return _deviating_case(draw, options)
        finally:
            FOCUS.reset(focus_token)
    finally:
        DEVIATION.reset(token)


def _deviating_case(draw: DrawFn, options: CaseOptions) -> Case:
    topology = checked_draw(draw, options.topologies, "topologies", is_topology, "a Topology")
    dtype = checked_draw(draw, options.dtypes, "dtypes", is_dtype, f"one of {DTYPES}")
    # Drawn whatever the topology and dtype (and ignored where ONNX cannot say the case),
    # so that no dtype or topology is "simpler" to Hypothesis for skipping the choice.
    importer = checked_draw(draw, options.importers, "importers", is_importer, "an Importer")
    if importer is Importer.ONNX and (topology not in ONNX_TOPOLOGIES or dtype not in ONNX_DTYPES):
        importer = Importer.RELAX
    if importer is Importer.TORCH and topology not in TORCH_TOPOLOGIES:
        importer = Importer.RELAX
    if importer is Importer.ONNX:
        options = options.for_onnx()
    if importer is Importer.TORCH:
        options = options.for_torch()
    shape = draw_shape(draw, options, topology, importer)
    case = _draw_case(draw, options, topology, dtype, shape)
    # Only the parameters the case has; then the residual's values, last of all.
    present = tuple(n for n in case.parameters if any(b.operand(n) is not None for b in case.blocks))
    residual = None
    if shape.epilogue is Epilogue.ADD:
        out = output_shape(case.data, list(case.blocks))
        residual = draw_tensor(
            draw, options.magnitudes, case.blocks[-1].gamma.dtype, out, allow_negative=True
        )
    form = shape.form
    if form.importer is Importer.ONNX:
        form = replace(form, onnx=fit(form.onnx, replace(case, parameters=present)))
    if form.importer is Importer.TORCH:  # affine: center follows scale; see _check_torch
        counts = values_per_channel(case)
        bns = [
            replace(b.bn, center=b.bn.scale, training=b.bn.training and n > 1 and b.bn.epsilon > 0)
            for b, n in zip(case.blocks, counts, strict=True)
        ]
        blocks = tuple(replace(b, bn=bn) for b, bn in zip(case.blocks, bns, strict=True))
        case = replace(case, blocks=blocks)
        form = replace(form, torch=fit_torch(form.torch, case))
    case = replace(case, parameters=present, epilogue=shape.epilogue, residual=residual, form=form)
    return aim(case, checked_draw(draw, options.aims, "aims", is_aim, "an aim code"))


def _draw_case(draw: DrawFn, options: CaseOptions, topology: Topology, dtype: str, shape: Shape) -> Case:
    """The structure, attributes and values of a case (its epilogue and form aside)."""
    axis = checked_draw(draw, options.axes, "axes", is_axis, "an Axis")
    negative = checked_draw(draw, options.negative_axes, "negative_axes", is_bool, "a bool")
    parameters = _draw_parameters(draw, options, topology)
    if not topology.has_conv:
        return _bn_only_case(draw, options, dtype, axis, negative, parameters)

    data_layout = options.conv.draw_data_layout(draw)
    axis_index = axis.index(data_layout, negative=negative)
    first = draw_conv(draw, options, axis=axis, data_layout=data_layout, in_dtype=dtype, previous=None)
    batch = draw_batch(draw, options, axis, first.c_out)
    weight_class = draw_magnitude(draw, options.magnitudes)
    dims = {"N": batch, "C": first.c_in, "H": first.in_size[0], "W": first.in_size[1]}
    data_shape = tuple(dims[d] for d in data_layout)
    data = draw_data(draw, options.magnitudes, dtype, data_shape, weight_class=weight_class)
    weight = draw_weight(draw, first, weight_class)
    blocks = [_block(draw, options, first, axis_index, weight, shape.biases[0])]
    if topology is Topology.CHAIN:
        second = draw_conv(
            draw,
            options,
            axis=axis,
            data_layout=data_layout,
            in_dtype=first.out_dtype,
            previous=first,
        )
        weight = draw_weight(draw, second, draw_magnitude(draw, options.magnitudes))
        blocks.append(_block(draw, options, second, axis_index, weight, shape.biases[1]))
    return Case(topology=topology, data=data, blocks=tuple(blocks), parameters=parameters)


def _bn_only_case(
    draw: DrawFn,
    options: CaseOptions,
    dtype: str,
    axis: Axis,
    negative: bool,
    parameters: tuple[str, ...],
) -> Case:
    """batch_norm straight on NCHW data; a non-channel axis names a dimension of length C."""
    channels = draw(st.integers(options.min_channels, options.max_channels))
    dims = {"N": draw_batch(draw, options, axis, channels), "C": channels}
    for dim in (Axis.HEIGHT, Axis.WIDTH):
        dims[dim.value] = channels if axis is dim else draw(st.integers(1, options.max_spatial))
    data = draw_tensor(draw, options.magnitudes, dtype, tuple(dims[d] for d in "NCHW"), allow_negative=True)
    block = _draw_bn_block(
        draw, options, axis=axis.index("NCHW", negative=negative), dtype=dtype, channels=channels
    )
    return Case(topology=Topology.BN_ONLY, data=data, blocks=(block,), parameters=parameters)
