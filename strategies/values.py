"""Tensor values by magnitude class: :class:`Magnitude` and :func:`tensors`.

A tensor first draws its class, then its values, so a failing example keeps
the class it needs while everything else shrinks to ``ORDINARY``.

Key idea: values are built *in* the tensor's dtype, as
``sign * (1 + fraction / 2**p) * 2**exponent`` with the exponent and the
``p``-bit fraction drawn as integers inside the class's range, so every value
is exact and finite by construction (the largest is the dtype's max, never
past it) and nothing is filtered. Only the ``ORDINARY`` class draws a
``floats()`` value ``x`` and uses ``1 + x``, rounded into the dtype by
:meth:`fuzz.case.Tensor.from_numpy`, which cannot overflow inside [-10, 10].

A tensor is a *fill* value plus a sparse dictionary of ``index -> value``
overrides (the layout ``hypothesis.extra.numpy.arrays`` uses for large arrays):
it shrinks to "every element 1.0", and a large tensor costs a few draws rather
than one per element.
"""

from __future__ import annotations

import enum
import functools
import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import DrawFn, SearchStrategy

from fuzz.case import DTYPES, Tensor

from ._validation import check_strategy, checked_draw

__all__ = ["Magnitude", "tensors"]


class Magnitude(enum.Enum):
    """The class of a tensor's values, simplest first (strategies shrink to ``ORDINARY``).

    Ranges per dtype: :func:`exponent_range` and the package docstring.
    """

    #: Floats in [-10, 10] that shrink to small round values: 1.0 first, then 2.0, 3.0, ...
    ORDINARY = "ordinary"
    #: 0.0 and -0.0, mixed (only 0.0 when negatives are not allowed).
    ZERO = "zero"
    #: One ordinary or sqrt-huge value ``w`` as ``+w, -w, +w, ...`` in row-major order,
    #: so sums over pairs cancel exactly; ``|w|`` everywhere when negatives are not allowed.
    CANCELLING = "cancelling"
    #: Normal numbers just above the smallest normal: ``[2**emin, 2**(emin + 4))``.
    TINY = "tiny"
    #: Subnormal numbers: ``(0, 2**emin)``.
    SUBNORMAL = "subnormal"
    #: From the cube root to the square root of the dtype max: products of two or
    #: three such values (x * W * gamma) reach or pass the max.
    HUGE_SQRT = "huge-sqrt"
    #: The top three binades of the dtype: ``[2**(emax - 2), max]``.
    HUGE = "huge"


@dataclass(frozen=True)
class Format:
    """The binary layout of a floating-point dtype."""

    #: explicit fraction bits ``p``
    fraction_bits: int
    #: exponent of the smallest normal number
    min_exponent: int
    #: exponent of the largest finite number
    max_exponent: int
    #: ``floats(width=...)`` used for ordinary values (bfloat16: 32, then rounded)
    width: Literal[16, 32, 64]

    @property
    def max_value(self) -> float:
        return math.ldexp(2.0 - math.ldexp(1.0, -self.fraction_bits), self.max_exponent)

    @property
    def smallest_normal(self) -> float:
        return math.ldexp(1.0, self.min_exponent)


FORMATS: dict[str, Format] = {
    "float16": Format(10, -14, 15, 16),
    "bfloat16": Format(7, -126, 127, 32),
    "float32": Format(23, -126, 127, 32),
    "float64": Format(52, -1022, 1023, 64),
}


def exponent_range(dtype: str, magnitude: Magnitude) -> tuple[int, int]:
    """Inclusive binade exponents of the TINY, HUGE_SQRT and HUGE classes."""
    f = FORMATS[dtype]
    if magnitude is Magnitude.TINY:
        return f.min_exponent, f.min_exponent + 3
    if magnitude is Magnitude.HUGE_SQRT:
        # 2**(emax + 1) bounds the max, so its square root is 2**((emax + 1) / 2);
        # the class spans from its cube root up to there (float32: 2**43 = 8.8e12
        # to 2**64 = 1.8e19), where a product of two or three values overflows.
        top = f.max_exponent + 1
        return -(-top // 3), top // 2 - 1
    if magnitude is Magnitude.HUGE:
        return f.max_exponent - 2, f.max_exponent
    raise ValueError(f"{magnitude} has no exponent range")


#: ORDINARY values lie in [-ORDINARY_BOUND, ORDINARY_BOUND] ([0, ORDINARY_BOUND] unsigned).
ORDINARY_BOUND = 10.0


def _signed(magnitudes: SearchStrategy[float], allow_negative: bool) -> SearchStrategy[float]:
    if not allow_negative:
        return magnitudes
    # booleans() shrinks to False: positive first.
    return st.tuples(st.booleans(), magnitudes).map(lambda t: -t[1] if t[0] else t[1])


def _binades(dtype: str, low: int, high: int) -> SearchStrategy[float]:
    """Positive normal numbers ``(1 + m / 2**p) * 2**e`` with ``low <= e <= high``."""
    p = FORMATS[dtype].fraction_bits
    return st.tuples(st.integers(low, high), st.integers(0, 2**p - 1)).map(
        lambda t: math.ldexp(1.0 + math.ldexp(t[1], -p), t[0])
    )


@functools.cache
def scalars(dtype: str, magnitude: Magnitude, allow_negative: bool) -> SearchStrategy[float]:
    """One element of ``magnitude`` (the base value ``w`` for CANCELLING)."""
    f = FORMATS[dtype]
    if magnitude is Magnitude.ORDINARY:
        # 1 + x for one float x: a single choice (so no class has a shorter, "simpler"
        # encoding), and since floats() shrinks to 0.0, then small integers, then
        # simple fractions, the values shrink to 1.0, then 2.0, 3.0, 0.0, -1.0, 1.5 ...
        low = -ORDINARY_BOUND if allow_negative else 0.0
        offsets = st.floats(low - 1, ORDINARY_BOUND - 1, width=f.width, allow_subnormal=False)
        return offsets.map(lambda x: 1.0 + x)
    if magnitude is Magnitude.ZERO:
        return st.sampled_from((0.0, -0.0)) if allow_negative else st.just(0.0)
    if magnitude is Magnitude.CANCELLING:
        return st.one_of(
            scalars(dtype, Magnitude.ORDINARY, allow_negative),
            scalars(dtype, Magnitude.HUGE_SQRT, allow_negative),
        )
    if magnitude is Magnitude.SUBNORMAL:
        p = f.fraction_bits
        positive = st.integers(1, 2**p - 1).map(lambda m: math.ldexp(m, f.min_exponent - p))
        return _signed(positive, allow_negative)
    return _signed(_binades(dtype, *exponent_range(dtype, magnitude)), allow_negative)


@functools.cache
def _overrides(
    dtype: str, magnitude: Magnitude, allow_negative: bool, size: int
) -> SearchStrategy[dict[int, float]]:
    return st.dictionaries(st.integers(0, size - 1), scalars(dtype, magnitude, allow_negative), max_size=size)


def draw_array(
    draw: DrawFn,
    *,
    dtype: str,
    shape: tuple[int, ...],
    magnitude: Magnitude,
    allow_negative: bool = True,
    constant: bool = False,
) -> np.ndarray[Any, Any]:
    """Values of one class as a float64 array, each exactly representable in ``dtype``.

    ``constant`` draws the fill value only: every element equal (CANCELLING included).
    """
    size = math.prod(shape)
    fill = draw(scalars(dtype, magnitude, allow_negative))
    values = np.full(size, fill, dtype=np.float64)
    if magnitude is Magnitude.CANCELLING:
        if allow_negative and not constant:
            values[1::2] = -fill
    elif size > 1 and not constant:
        for index, value in draw(_overrides(dtype, magnitude, allow_negative, size)).items():
            values[index] = value
    # Round into the dtype (only ORDINARY values, 1 + x, can change) and back, exactly.
    return Tensor.from_numpy(values.reshape(shape), dtype).float64()


def check_dtype(dtype: object, name: str = "dtype") -> str:
    if dtype not in DTYPES:
        raise InvalidArgument(f"{name}={dtype!r} is not one of {', '.join(DTYPES)}")
    assert isinstance(dtype, str)
    return dtype


def is_magnitude(value: object) -> bool:
    return isinstance(value, Magnitude)


_DEFAULT_MAGNITUDES: SearchStrategy[Magnitude] = st.sampled_from(Magnitude)


def tensors(
    *,
    dtype: str,
    shape: tuple[int, ...],
    magnitudes: SearchStrategy[Magnitude] = _DEFAULT_MAGNITUDES,
    allow_negative: bool = True,
) -> SearchStrategy[Tensor]:
    """:class:`~fuzz.case.Tensor` values of ``dtype`` and ``shape``, of one drawn class.

    Draws the class from ``magnitudes``, then a fill value and sparse overrides
    of that class (see :class:`Magnitude`). Every value is finite and exactly
    representable in ``dtype``. ``allow_negative=False`` keeps every sign bit
    clear (variances: no negative number, no -0.0). ``dtype`` and ``shape`` are
    values, not strategies: they are fixed by the graph a tensor belongs to
    (as in ``hypothesis.extra.numpy.arrays``).
    """
    check_dtype(dtype)
    if not (
        isinstance(shape, tuple)
        and all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape)
    ):
        raise InvalidArgument(f"shape={shape!r} must be a tuple of positive integers")
    check_strategy(magnitudes, "magnitudes")
    if not isinstance(allow_negative, bool):
        raise InvalidArgument(f"allow_negative={allow_negative!r} must be a bool")
    return _tensors(dtype, shape, magnitudes, allow_negative)


@st.composite
def _tensors(
    draw: DrawFn,
    dtype: str,
    shape: tuple[int, ...],
    magnitudes: SearchStrategy[Magnitude],
    allow_negative: bool,
) -> Tensor:
    magnitude = checked_draw(draw, magnitudes, "magnitudes", is_magnitude, "a Magnitude")
    values = draw_array(draw, dtype=dtype, shape=shape, magnitude=magnitude, allow_negative=allow_negative)
    return Tensor.from_numpy(values, dtype)
