"""Hypothesis strategies for conv2d + batch_norm cases (specs only, no TVM).

Everything here draws plain :mod:`fuzz.model.case` data (frozen dataclasses that
round-trip through JSON), so generation is fast, TVM-free, and every example
can be stored and replayed bit for bit.

Public strategies
-----------------
``cases(*, dtypes, wide_out_dtypes, data_layouts, kernel_layouts, topologies,
axes, negative_axes, epsilons, centers, scales, trainings, momenta,
parameters, magnitudes, min_channels=1, max_channels=4, max_spatial=4,
max_batch=2)``
    Whole :class:`~fuzz.model.case.Case` specs: a topology (conv-bn, the
    conv-bn-relu-conv-bn chain, conv-shared, bn-stats, bn-only), dtypes,
    layouts, conv windows (kernel 1-3, stride 1-2, dilation 1-2, padding 0-1 per
    side; every output at least 1x1), groups (including depthwise), batch_norm
    attributes and values. A batch_norm axis that is not the channel axis names a
    dimension built with length C, so a pass that ignores ``axis`` computes wrong
    numbers instead of only crashing. Shrinks to one channel, batch 1, 1x1 data
    and kernel, float32, NCHW, OIHW, conv-bn, every value 1.0.
``case_batches(*, max_size=64, **kwargs)``
    Tuples of 1 to ``max_size`` cases of one structure: the first is drawn by
    ``cases(**kwargs)`` (and shrinks as it does); the others share everything
    with it (topology, dtype, shapes, attributes, parameters) except the values
    of data, weight, gamma, beta, mean and var, each tensor drawing its class
    again under the same rules. Shrinks to a single case. For a runner that
    compiles a graph once and checks it on many value sets. ``max_size`` below
    1 raises ``InvalidArgument``; other arguments are checked by ``cases()``.
``value_sets(case, *, magnitudes, aims)``, ``further_counts(max_size)``
    The parts of a batch, for a runner that draws them one at a time (the campaign
    draws further value sets only for a structure the pass rewrote): cases with
    ``case``'s structure and fresh values, and how many of them (uniform, shrinking
    to 0).
``conv2d_attrs(*, dtype, in_channels, out_channels, kernel_size, input_size,
data_layouts, kernel_layouts, wide_out_dtypes)``
    :class:`~fuzz.model.case.Conv2dAttrs` valid for the given channels (groups divide
    both) and for the given kernel over the given input (output at least 1x1).
``batch_norm_attrs(*, axes, epsilons, centers, scales, trainings, momenta)``
    :class:`~fuzz.model.case.BatchNormAttrs`; center and scale shrink to True,
    training to False, epsilon to 1e-5, momentum to 0.1.
``tensors(*, dtype, shape, magnitudes, allow_negative=True)``
    A :class:`~fuzz.model.case.Tensor` whose values all belong to one drawn
    :class:`Magnitude`, exact in ``dtype`` and finite.

``cases()`` and ``value_sets()`` also draw an *aim* per value set (``aims``; 0, no aim,
half the time): :mod:`.aim` rewrites the first conv block's values toward a fold's edges
(scales with a few subnormal bits left, partial sums just past the maximum behind finite
folded weights, a folded bias past it while ``conv - mean`` cancels, zero variance).

Enums: :class:`Magnitude` (value classes), :class:`Axis` (which dimension a
batch_norm axis names: CHANNEL, BATCH, HEIGHT, WIDTH) and :class:`Deviation` (how far
one case's attributes stray from their defaults: swarm testing).

Arguments that vary are strategies (``st.just(x)`` pins one); bounds are
values. Bad arguments raise ``InvalidArgument`` eagerly, naming the argument and
echoing its value. Nothing is filtered: shapes are valid by construction.

Magnitude classes (absolute values; signs are drawn, except for variances)
--------------------------------------------------------------------------
============  ================  ===================  ==================  ===================
class         float16           bfloat16             float32             float64
============  ================  ===================  ==================  ===================
ORDINARY      1 + x for a float x, in [-10, 10]: shrinks to 1.0, then 2.0, 3.0, 0.0, -1.0, 1.5
ZERO          0.0 and -0.0 (variances: 0.0)
CANCELLING    one ORDINARY or HUGE_SQRT w as +w, -w, +w, ... (variances: w; data under it: constant)
TINY          [6.1e-5, 9.8e-4)  [1.2e-38, 1.9e-37)   [1.2e-38, 1.9e-37)  [2.2e-308, 3.6e-307)
SUBNORMAL     [6.0e-8, 6.1e-5)  [9.2e-41, 1.2e-38)   [1.4e-45, 1.2e-38)  [4.9e-324, 2.2e-308)
HUGE_SQRT     [64, 256)         [8.8e12, 1.8e19)     [8.8e12, 1.8e19)    [9.0e102, 1.3e154)
HUGE          [8192, 65504]     [4.3e37, 3.39e38]    [4.3e37, 3.40e38]   [2.2e307, 1.8e308]
============  ================  ===================  ==================  ===================

``pipelines(*, neighbours, max_passes=4)``
    :class:`fuzz.model.pipeline.Pipeline` specs: the pass under test among BN-relevant
    Relax passes, an opt level and Sequential or direct calls; shrinks to the pass
    under test alone (see :mod:`.pipelines`).

Modules: :mod:`.graphs` (cases), :mod:`.options` (their defaults and validated
options), :mod:`.convs` (one conv block's structure), :mod:`.tensors` (values in draw
order), :mod:`.batches` (value sets for one structure), :mod:`.pipelines` (pass pipelines),
:mod:`.attributes` (operator attributes), :mod:`.values` (magnitudes and tensors),
:mod:`.geometry` (conv windows and groups valid by construction),
:mod:`._validation` (argument checks).
"""

from __future__ import annotations

from . import attributes as _attributes
from . import batches as _batches
from . import graphs as _graphs
from . import values as _values
from ._kept import keeping_subnormals as _keeping_subnormals
from .attributes import Axis, Deviation, conv2d_attrs
from .batches import further_counts
from .pipelines import pipelines
from .values import Magnitude

cases = _keeping_subnormals(_graphs.cases)
case_batches = _keeping_subnormals(_batches.case_batches)
value_sets = _keeping_subnormals(_batches.value_sets)
tensors = _keeping_subnormals(_values.tensors)
batch_norm_attrs = _keeping_subnormals(_attributes.batch_norm_attrs)

__all__ = [
    "Axis",
    "Deviation",
    "Magnitude",
    "batch_norm_attrs",
    "case_batches",
    "cases",
    "conv2d_attrs",
    "further_counts",
    "pipelines",
    "tensors",
    "value_sets",
]
