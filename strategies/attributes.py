"""Operator attributes: :func:`conv2d_attrs`, :func:`batch_norm_attrs`, :class:`Axis`.

Every argument that varies is a strategy (pass ``st.just(value)`` to pin one);
defaults put the simplest value first so examples shrink to it: NCHW, OIHW,
``out_dtype=""``, ``epsilon=1e-5``, ``center=scale=True``, ``training=False``,
``momentum=0.1``, groups 1, and the identity window (1x1 kernel, stride 1,
dilation 1, no padding).
"""

from __future__ import annotations

import contextvars
import enum
import functools
import math
from collections.abc import Sequence
from typing import Any, TypeVar

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import DrawFn, SearchStrategy

from fuzz.model.case import DATA_LAYOUTS, KERNEL_LAYOUTS, BatchNormAttrs, Conv2dAttrs

from ._validation import check_integer, check_strategy, checked_draw, is_bool
from .geometry import Window, common_divisors, window_choices
from .values import check_dtype

T = TypeVar("T")

# The package re-exports Axis, Deviation, batch_norm_attrs and conv2d_attrs (``strategies``);
# the rest are shared with its other modules.
__all__ = [
    "Axis",
    "BatchNormOptions",
    "ConvOptions",
    "Deviation",
    "batch_norm_attrs",
    "conv2d_attrs",
    "is_axis_number",
    "is_data_layout",
    "is_epsilon",
    "is_kernel_layout",
    "is_momentum",
    "make_conv_attrs",
    "mostly_first",
]


class Axis(enum.Enum):
    """Which dimension of the batch_norm input its ``axis`` names, whatever the layout.

    ``CHANNEL`` is the correct one; the others are built with length C so that a
    pass ignoring ``axis`` computes wrong numbers rather than only crashing.
    """

    CHANNEL = "C"
    BATCH = "N"
    HEIGHT = "H"
    WIDTH = "W"

    def index(self, layout: str, *, negative: bool = False) -> int:
        """The axis number in ``layout`` (e.g. ``"NHWC"``), as ``i - rank`` if ``negative``."""
        i = layout.index(self.value)
        return i - len(layout) if negative else i


#: The conv ``out_dtype`` a "wide" conv uses for each input dtype; float64 has none.
WIDER_DTYPES: dict[str, str] = {"float16": "float32", "bfloat16": "float32", "float32": "float64"}

#: Epsilons worth trying, the batch_norm default first; then any float in [0, 1e6].
EPSILONS: tuple[float, ...] = (1e-5, 0.0, 1e-30, 1e-3, 1.0, 1e4)
MAX_EPSILON = 1e6
#: Momenta worth trying, the default first; then any float in [0, 1].
MOMENTA: tuple[float, ...] = (0.1, 0.0, 1.0)


class Deviation(enum.IntEnum):
    """How far a case strays from the defaults: drawn once per case by
    :func:`strategies.cases` (``USUAL`` first, where it shrinks to), it sets the odds of
    every :func:`mostly_first` attribute of that case (swarm testing: some cases change
    almost nothing, others almost everything)."""

    #: the first option with probability ``1/2 + 1/(2n)``, each other ``1/(2n)``
    USUAL = 0
    #: the first option but for one time in sixteen: a case changes about one attribute
    #: and stays foldable, what a bug triggered by that attribute alone needs
    RARE = 1
    #: every option equally likely
    UNIFORM = 2
    #: one attribute draw of the case, chosen per case (:data:`FOCUS`), takes a value
    #: other than its default, every other keeps its default: what a bug that one
    #: attribute triggers needs, with no second trigger to mask it
    ONE = 3


#: The deviation of the case being drawn (:func:`strategies.cases` sets it around its
#: attribute draws; elsewhere ``USUAL``).
DEVIATION: contextvars.ContextVar[Deviation] = contextvars.ContextVar("deviation", default=Deviation.USUAL)
#: ``ONE`` two cases in five, each other deviation one in five: most fold bugs need one
#: attribute changed and nothing else that would mask them.
DEVIATIONS: SearchStrategy[Deviation] = st.sampled_from([*Deviation, Deviation.ONE])
#: In a ``ONE`` case: [the index of the attribute draw that deviates, attribute draws so
#: far]. :func:`strategies.cases` sets it; a conv-bn case makes about 17 attribute draws.
FOCUS: contextvars.ContextVar[list[int]] = contextvars.ContextVar("focus")
FOCUS_DRAWS = 18


def mostly_first(options: Sequence[T], *, even: bool = False, attribute: bool = True) -> SearchStrategy[T]:
    """Any of ``options``, the first (the default) about half the time; shrinks to it.

    A pass only fires on graphs near the defaults; drawing every attribute
    uniformly would make a graph it folds rare (one in hundreds), and the bugs
    that need a fold with one attribute changed rarer still. Inside a case, the
    odds follow the case's :class:`Deviation` (``even``: the ``USUAL`` odds are even,
    as for ``center`` and ``scale``).

    One choice: a ``sampled_from`` of ``16 n`` entries, the same length at every
    deviation, with the other options at the end (``k`` times each) and the first
    filling the rest, so a choice keeps its meaning when the shrinker lowers the
    deviation: index 0 is the default and the last index the last option at every one.
    ``ONE`` cases draw the focused attribute from the other options and every other as
    its default; ``attribute=False`` (magnitudes) keeps the ``USUAL`` odds there.
    """
    return _by_deviation(tuple(options), even, attribute)


@functools.cache
def _listings(options: tuple[Any, ...], even: bool) -> tuple[SearchStrategy[Any], ...]:
    """The ``sampled_from`` of each :class:`Deviation`, in its order (see :func:`mostly_first`)."""
    n = len(options)

    def listing(k: int) -> SearchStrategy[Any]:
        rest = tuple(o for o in options[1:] for _ in range(k))
        return st.sampled_from((options[0],) * (16 * n - len(rest)) + rest)

    # ONE cases: the focused draw from the other options, every other draw the default;
    # 16 n entries too, so that every deviation makes the same choices, and the shrinker
    # (which prefers fewer choices) does not take ONE for the simpler deviation.
    others = options[1:] or options[:1]
    focused = st.sampled_from(tuple(others[i % len(others)] for i in range(16 * n)))
    default = st.sampled_from((options[0],) * (16 * n))
    return (listing(16 if even else 8), listing(1), listing(16), focused, default)


@st.composite
def _by_deviation(draw: DrawFn, options: tuple[T, ...], even: bool, attribute: bool) -> T:
    listings = _listings(options, even)
    deviation = DEVIATION.get()
    if deviation is not Deviation.ONE:
        strategy = listings[deviation]
    elif not attribute:
        strategy = listings[Deviation.USUAL]
    else:
        focus = FOCUS.get()
        strategy = listings[3] if focus[1] == focus[0] else listings[4]
        focus[1] += 1
    value: T = draw(strategy)
    return value


DEFAULT_DATA_LAYOUTS: SearchStrategy[str] = mostly_first(DATA_LAYOUTS)
DEFAULT_KERNEL_LAYOUTS: SearchStrategy[str] = mostly_first(KERNEL_LAYOUTS)
#: Flags whose default is True shrink to True; ``booleans()`` shrinks to False.
TRUE_FIRST: SearchStrategy[bool] = mostly_first([True, False], even=True)
FALSE_FIRST: SearchStrategy[bool] = mostly_first([False, True], even=True)
#: False three times in four (training, wider out_dtype, parameters); shrinks to False.
MOSTLY_FALSE: SearchStrategy[bool] = mostly_first([False, True])
DEFAULT_EPSILONS: SearchStrategy[float] = st.one_of(st.sampled_from(EPSILONS), st.floats(0.0, MAX_EPSILON))
DEFAULT_MOMENTA: SearchStrategy[float] = st.one_of(st.sampled_from(MOMENTA), st.floats(0.0, 1.0))
DEFAULT_AXES: SearchStrategy[int] = st.just(1)


def is_data_layout(value: object) -> bool:
    return value in DATA_LAYOUTS


def is_kernel_layout(value: object) -> bool:
    return value in KERNEL_LAYOUTS


def is_epsilon(value: object) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def is_momentum(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1


def is_axis_number(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -4 <= value <= 3


# ---------------------------------------------------------------------------
# batch_norm


class BatchNormOptions:
    """Validated strategies for the batch_norm attributes other than ``axis``."""

    def __init__(
        self,
        *,
        epsilons: SearchStrategy[float],
        centers: SearchStrategy[bool],
        scales: SearchStrategy[bool],
        trainings: SearchStrategy[bool],
        momenta: SearchStrategy[float],
    ) -> None:
        check_strategy(epsilons, "epsilons")
        check_strategy(centers, "centers")
        check_strategy(scales, "scales")
        check_strategy(trainings, "trainings")
        check_strategy(momenta, "momenta")
        self.epsilons = epsilons
        self.centers = centers
        self.scales = scales
        self.trainings = trainings
        self.momenta = momenta

    def draw(self, draw: DrawFn, axis: int) -> BatchNormAttrs:
        epsilon = checked_draw(draw, self.epsilons, "epsilons", is_epsilon, "a finite float >= 0")
        center = checked_draw(draw, self.centers, "centers", is_bool, "a bool")
        scale = checked_draw(draw, self.scales, "scales", is_bool, "a bool")
        training = checked_draw(draw, self.trainings, "trainings", is_bool, "a bool")
        momentum = checked_draw(draw, self.momenta, "momenta", is_momentum, "a float in [0, 1]")
        return BatchNormAttrs(
            axis=axis,
            epsilon=float(epsilon),
            center=center,
            scale=scale,
            momentum=float(momentum),
            training=training,
        )


def batch_norm_attrs(
    *,
    axes: SearchStrategy[int] = DEFAULT_AXES,
    epsilons: SearchStrategy[float] = DEFAULT_EPSILONS,
    centers: SearchStrategy[bool] = TRUE_FIRST,
    scales: SearchStrategy[bool] = TRUE_FIRST,
    trainings: SearchStrategy[bool] = MOSTLY_FALSE,
    momenta: SearchStrategy[float] = DEFAULT_MOMENTA,
) -> SearchStrategy[BatchNormAttrs]:
    """:class:`~fuzz.model.case.BatchNormAttrs` for a 4-D input.

    Each argument is a strategy for the attribute of the singular name:
    ``axes`` (ints in [-4, 3], default ``just(1)``), ``epsilons`` (1e-5 first,
    then 0, 1e-30, 1e-3, 1, 1e4 and any float in [0, 1e6]), ``centers`` and
    ``scales`` (True first), ``trainings`` (False first) and ``momenta`` (0.1
    first, then 0, 1 and any float in [0, 1]). The attributes say nothing about
    shapes: the caller keeps the operands' length equal to ``data.shape[axis]``.
    """
    check_strategy(axes, "axes")
    options = BatchNormOptions(
        epsilons=epsilons, centers=centers, scales=scales, trainings=trainings, momenta=momenta
    )
    return _batch_norm_attrs(axes, options)


@st.composite
def _batch_norm_attrs(draw: DrawFn, axes: SearchStrategy[int], options: BatchNormOptions) -> BatchNormAttrs:
    axis = checked_draw(draw, axes, "axes", is_axis_number, "an int in [-4, 3]")
    return options.draw(draw, axis)


# ---------------------------------------------------------------------------
# conv2d


class ConvOptions:
    """Validated strategies for the conv2d attributes that are not shapes."""

    def __init__(
        self,
        *,
        data_layouts: SearchStrategy[str],
        kernel_layouts: SearchStrategy[str],
        wide_out_dtypes: SearchStrategy[bool],
    ) -> None:
        check_strategy(data_layouts, "data_layouts")
        check_strategy(kernel_layouts, "kernel_layouts")
        check_strategy(wide_out_dtypes, "wide_out_dtypes")
        self.data_layouts = data_layouts
        self.kernel_layouts = kernel_layouts
        self.wide_out_dtypes = wide_out_dtypes

    def draw_data_layout(self, draw: DrawFn) -> str:
        return checked_draw(draw, self.data_layouts, "data_layouts", is_data_layout, f"one of {DATA_LAYOUTS}")

    def draw_kernel_layout(self, draw: DrawFn) -> str:
        return checked_draw(
            draw,
            self.kernel_layouts,
            "kernel_layouts",
            is_kernel_layout,
            f"one of {KERNEL_LAYOUTS}",
        )

    def draw_out_dtype(self, draw: DrawFn, dtype: str) -> str:
        """``""`` (the input dtype) or the next wider dtype, when there is one."""
        wide = checked_draw(draw, self.wide_out_dtypes, "wide_out_dtypes", is_bool, "a bool")
        return WIDER_DTYPES.get(dtype, "") if wide else ""


def make_conv_attrs(
    windows: tuple[Window, Window],
    *,
    groups: int,
    data_layout: str,
    kernel_layout: str,
    out_dtype: str,
) -> Conv2dAttrs:
    """Conv2dAttrs from the (height, width) windows."""
    h, w = windows
    return Conv2dAttrs(
        strides=(h.stride, w.stride),
        padding=(h.pad_before, w.pad_before, h.pad_after, w.pad_after),
        dilation=(h.dilation, w.dilation),
        groups=groups,
        data_layout=data_layout,
        kernel_layout=kernel_layout,
        out_dtype=out_dtype,
    )


def _check_pair(value: Any, name: str) -> tuple[int, int]:
    if not (isinstance(value, tuple) and len(value) == 2):
        raise InvalidArgument(f"{name}={value!r} must be a (height, width) tuple of integers")
    for v in value:
        check_integer(v, name, min_value=1)
    return value


def conv2d_attrs(
    *,
    dtype: str = "float32",
    in_channels: int = 1,
    out_channels: int = 1,
    kernel_size: tuple[int, int] = (1, 1),
    input_size: tuple[int, int] = (1, 1),
    data_layouts: SearchStrategy[str] = DEFAULT_DATA_LAYOUTS,
    kernel_layouts: SearchStrategy[str] = DEFAULT_KERNEL_LAYOUTS,
    wide_out_dtypes: SearchStrategy[bool] = MOSTLY_FALSE,
) -> SearchStrategy[Conv2dAttrs]:
    """:class:`~fuzz.model.case.Conv2dAttrs` valid for the given channels, kernel and input.

    ``groups`` is drawn among the common divisors of ``in_channels`` and
    ``out_channels`` (1 first; ``in_channels`` itself is depthwise when it
    divides ``out_channels``). Strides and dilation are 1 or 2 and padding 0 or
    1 per side, chosen so that the output of a ``kernel_size`` kernel over an
    ``input_size`` input is at least 1x1. ``out_dtype`` is ``""`` or, when
    ``wide_out_dtypes`` draws True, the next wider dtype (float32 for float16
    and bfloat16, float64 for float32; float64 stays ``""``). The values are
    fixed by the tensors the conv will read; the layouts are strategies.
    """
    check_dtype(dtype)
    check_integer(in_channels, "in_channels", min_value=1)
    check_integer(out_channels, "out_channels", min_value=1)
    _check_pair(kernel_size, "kernel_size")
    _check_pair(input_size, "input_size")
    choices = []
    for k, n in zip(kernel_size, input_size, strict=True):
        fits = window_choices(kernel=k, size=n, max_size=n, target=None)
        if not fits:
            raise InvalidArgument(
                f"kernel_size={kernel_size!r} does not fit input_size={input_size!r}, "
                f"even with dilation 1 and padding 1 on each side"
            )
        choices.append(st.sampled_from([window for window, _, _ in fits]))
    options = ConvOptions(
        data_layouts=data_layouts, kernel_layouts=kernel_layouts, wide_out_dtypes=wide_out_dtypes
    )
    groups = st.sampled_from(common_divisors(in_channels, out_channels))
    return _conv2d_attrs(dtype, groups, choices[0], choices[1], options)


@st.composite
def _conv2d_attrs(
    draw: DrawFn,
    dtype: str,
    groups: SearchStrategy[int],
    heights: SearchStrategy[Window],
    widths: SearchStrategy[Window],
    options: ConvOptions,
) -> Conv2dAttrs:
    g = draw(groups)
    data_layout = options.draw_data_layout(draw)
    kernel_layout = options.draw_kernel_layout(draw)
    out_dtype = options.draw_out_dtype(draw, dtype)
    windows = (draw(heights), draw(widths))
    return make_conv_attrs(
        windows, groups=g, data_layout=data_layout, kernel_layout=kernel_layout, out_dtype=out_dtype
    )
