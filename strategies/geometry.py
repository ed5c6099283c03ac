"""Shapes that are valid by construction: conv windows and channel groups.

Key idea: one spatial dimension of a conv2d is a :class:`Window` (kernel,
stride, dilation, padding before/after), and there are only 48 of them within
the fuzzer's bounds. Rather than draw a window and an input size and reject
empty outputs, :func:`window_choices` enumerates every window together with
the interval of input sizes that gives the wanted output (at least 1, or
exactly a target length), drops those with no such input, and sorts the rest
simplest first. A strategy then samples a window from that list and an input
size from its interval: nothing is filtered, and ``sampled_from`` shrinks to
the simplest window that still fails.

A target output length is how a non-channel batch_norm axis is made to bite:
the conv output's height (say) is built to equal C, so a pass that mixes up
the axes computes wrong numbers instead of only crashing.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

__all__ = [
    "DILATIONS",
    "KERNEL_SIZES",
    "PADDINGS",
    "STRIDES",
    "Window",
    "all_windows",
    "common_divisors",
    "group_choices",
    "multiplier_range",
    "window_choices",
]

#: Bounds from the fuzzer's brief: 1x1 to 3x3 kernels, strides and dilation 1-2,
#: padding 0-1 per side.
KERNEL_SIZES = (1, 2, 3)
STRIDES = (1, 2)
DILATIONS = (1, 2)
PADDINGS = (0, 1)


@dataclass(frozen=True)
class Window:
    """One spatial dimension of a conv2d."""

    kernel: int = 1
    stride: int = 1
    dilation: int = 1
    pad_before: int = 0
    pad_after: int = 0

    @property
    def span(self) -> int:
        """Input elements one output element reads (the dilated kernel)."""
        return self.dilation * (self.kernel - 1) + 1

    def output(self, size: int) -> int:
        """Output length for an input of ``size``; 0 when the window does not fit."""
        padded = size + self.pad_before + self.pad_after
        if padded < self.span:
            return 0
        return (padded - self.span) // self.stride + 1

    @property
    def complexity(self) -> tuple[int, ...]:
        """Sort key: distance from the identity window, then attribute by attribute."""
        distance = (
            (self.kernel - 1) + (self.stride - 1) + (self.dilation - 1) + self.pad_before + self.pad_after
        )
        return (distance, self.kernel, self.stride, self.dilation, self.pad_before, self.pad_after)


def all_windows(kernel: int | None = None) -> tuple[Window, ...]:
    kernels = KERNEL_SIZES if kernel is None else (kernel,)
    windows = [
        Window(k, s, d, lo, hi)
        for k in kernels
        for s in STRIDES
        for d in DILATIONS
        for lo in PADDINGS
        for hi in PADDINGS
    ]
    return tuple(sorted(windows, key=lambda w: w.complexity))


@functools.cache
def window_choices(
    *, kernel: int | None, size: int | None, max_size: int, target: int | None
) -> tuple[tuple[Window, int, int], ...]:
    """``(window, min_input, max_input)`` for every window that can work, simplest first.

    ``kernel``: fix the kernel size (None: any of :data:`KERNEL_SIZES`).
    ``size``: the input length if already known, else inputs range over
    ``[1, max_size]``. ``target``: the output length wanted (None: any >= 1).
    The input sizes that work form an interval because the output length is
    non-decreasing in the input length.
    """
    inputs = range(1, max_size + 1) if size is None else (size,)
    choices = []
    for window in all_windows(kernel):
        fits = [n for n in inputs if window.output(n) >= 1 and (target is None or window.output(n) == target)]
        if fits:
            choices.append((window, fits[0], fits[-1]))
    return tuple(choices)


def multiplier_range(groups: int, min_channels: int, max_channels: int) -> tuple[int, int]:
    """Channels are ``groups * k``: the inclusive range of ``k`` within the bounds."""
    return -(-min_channels // groups), max_channels // groups


@functools.cache
def group_choices(min_channels: int, max_channels: int) -> tuple[int, ...]:
    """Group counts with at least one multiple in ``[min_channels, max_channels]``."""
    return tuple(
        g
        for g in range(1, max_channels + 1)
        if multiplier_range(g, min_channels, max_channels)[0]
        <= multiplier_range(g, min_channels, max_channels)[1]
    )


@functools.cache
def common_divisors(a: int, b: int) -> tuple[int, ...]:
    """Divisors of both ``a`` and ``b``, ascending (so groups shrink to 1)."""
    return tuple(g for g in range(1, min(a, b) + 1) if a % g == 0 and b % g == 0)
