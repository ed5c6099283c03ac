"""The structure of one conv block, drawn before any value: groups and channels, layouts,
out_dtype, a window per spatial dimension (:func:`strategies.geometry.window_choices`,
so every output is at least 1x1), then the batch and the weight's values.

A non-channel batch_norm axis is made to bite here: for ``Axis.HEIGHT``/``Axis.WIDTH``
the first conv's window and input length are drawn among those whose *output* length
is C, and a second conv keeps C output channels and a window that preserves it."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.strategies import DrawFn, SearchStrategy

from fuzz.model.case import Conv2dAttrs, kernel_shape
from fuzz.model.tensor import Tensor

from .attributes import (
    Axis,
    make_conv_attrs,
)
from .geometry import Window, group_choices, multiplier_range, window_choices
from .options import (
    CaseOptions,
)
from .tensors import (
    draw_kernel,
)
from .values import Magnitude

__all__ = ["ConvBlock", "draw_batch", "draw_conv", "draw_weight"]


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


def _channel_count(draw: DrawFn, options: CaseOptions, groups: int) -> int:
    low, high = multiplier_range(groups, options.min_channels, options.max_channels)
    return groups * draw(st.integers(low, high))


@dataclass(frozen=True)
class ConvBlock:
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


def draw_conv(
    draw: DrawFn,
    options: CaseOptions,
    *,
    axis: Axis,
    data_layout: str,
    in_dtype: str,
    previous: ConvBlock | None,
) -> ConvBlock:
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
    return ConvBlock(
        attrs=attrs,
        c_in=c_in,
        c_out=c_out,
        kernel=(windows[0].kernel, windows[1].kernel),
        in_size=(in_size[0], in_size[1]),
        out_size=(windows[0].output(in_size[0]), windows[1].output(in_size[1])),
        in_dtype=in_dtype,
    )


def draw_batch(draw: DrawFn, options: CaseOptions, axis: Axis, channels: int) -> int:
    return channels if axis is Axis.BATCH else draw(st.integers(1, options.max_batch))


def draw_weight(draw: DrawFn, conv: ConvBlock, magnitude: Magnitude) -> Tensor:
    oihw = (conv.c_out, conv.c_in // conv.attrs.groups, *conv.kernel)
    weight = draw_kernel(draw, conv.attrs, oihw, conv.in_dtype, magnitude)
    assert weight.shape == kernel_shape(conv.attrs, conv.c_in, conv.c_out, *conv.kernel)
    return weight
