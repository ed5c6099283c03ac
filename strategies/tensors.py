"""The tensor values of a case, drawn in a fixed order: each tensor its class from
``magnitudes``, then its values. :func:`strategies.cases` draws a case's first values with
these, and :mod:`.batches` re-draws further value sets with the same helpers, which take
the ``magnitudes`` strategy rather than every option."""

from __future__ import annotations

from typing import TypedDict

import numpy as np
from hypothesis.strategies import DrawFn, SearchStrategy

from fuzz.model.case import Conv2dAttrs
from fuzz.model.tensor import OPERANDS, Tensor

from ._validation import (
    checked_draw,
)
from .values import Magnitude, draw_array, is_magnitude

__all__ = [
    "BN_OPERANDS",
    "BnValues",
    "draw_bias",
    "draw_bn_values",
    "draw_data",
    "draw_kernel",
    "draw_magnitude",
    "draw_tensor",
]

#: The batch_norm operands, which every block has (``weight`` and ``bias`` need a conv).
BN_OPERANDS: tuple[str, ...] = tuple(name for name in OPERANDS if name not in ("weight", "bias"))


def draw_magnitude(draw: DrawFn, magnitudes: SearchStrategy[Magnitude]) -> Magnitude:
    return checked_draw(draw, magnitudes, "magnitudes", is_magnitude, "a Magnitude")


def draw_tensor(
    draw: DrawFn,
    magnitudes: SearchStrategy[Magnitude],
    dtype: str,
    shape: tuple[int, ...],
    *,
    allow_negative: bool,
) -> Tensor:
    magnitude = draw_magnitude(draw, magnitudes)
    values = draw_array(draw, dtype=dtype, shape=shape, magnitude=magnitude, allow_negative=allow_negative)
    return Tensor.from_numpy(values, dtype)


class BnValues(TypedDict):
    gamma: Tensor
    beta: Tensor
    mean: Tensor
    var: Tensor


def draw_bn_values(
    draw: DrawFn, magnitudes: SearchStrategy[Magnitude], dtype: str, channels: int
) -> BnValues:
    """gamma, beta, mean, var, in that order (each: class, values); variances never negative."""
    gamma, beta, mean, var = (
        draw_tensor(draw, magnitudes, dtype, (channels,), allow_negative=name != "var")
        for name in BN_OPERANDS
    )
    return BnValues(gamma=gamma, beta=beta, mean=mean, var=var)


def draw_data(
    draw: DrawFn,
    magnitudes: SearchStrategy[Magnitude],
    dtype: str,
    shape: tuple[int, ...],
    *,
    weight_class: Magnitude,
) -> Tensor:
    """The data under a conv whose first weight has ``weight_class``: its class, then values."""
    data_class = draw_magnitude(draw, magnitudes)
    values = draw_array(
        draw,
        dtype=dtype,
        shape=shape,
        magnitude=data_class,
        # Cancellation needs equal inputs under the +w/-w weights.
        constant=weight_class is Magnitude.CANCELLING,
    )
    return Tensor.from_numpy(values, dtype)


def draw_kernel(
    draw: DrawFn, attrs: Conv2dAttrs, oihw: tuple[int, ...], dtype: str, magnitude: Magnitude
) -> Tensor:
    """Values drawn in OIHW order (so CANCELLING pairs sit in one output channel),
    then transposed to the kernel layout."""
    values = draw_array(draw, dtype=dtype, shape=oihw, magnitude=magnitude)
    permutation = ["OIHW".index(d) for d in attrs.kernel_layout]
    return Tensor.from_numpy(np.transpose(values, permutation), dtype)


def draw_bias(draw: DrawFn, magnitudes: SearchStrategy[Magnitude], dtype: str, channels: int) -> Tensor:
    return draw_tensor(draw, magnitudes, dtype, (channels,), allow_negative=True)
