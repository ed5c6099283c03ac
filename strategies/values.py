"""Tensor values by magnitude class: :class:`Magnitude` and :func:`tensors`.

A tensor first draws its class, then its values, so a failing example keeps
the class it needs while everything else shrinks to ``ORDINARY``.

Key idea: values are built *in* the tensor's dtype, as
``sign * (1 + fraction / 2**p) * 2**exponent`` with the exponent and the
``p``-bit fraction drawn as integers inside the class's range, so every value
is exact and finite by construction (the largest is the dtype's max, never
past it) and nothing is filtered. Only the ``ORDINARY`` class draws a
``floats()`` value ``x`` and uses ``1 + x``, rounded into the dtype by
:meth:`fuzz.model.case.Tensor.from_numpy`, which cannot overflow inside [-10, 10].

A tensor is a *fill* value plus, if it is drawn *varied*, up to
:data:`MAX_OVERRIDES` ``index -> value`` overrides (the layout
``hypothesis.extra.numpy.arrays`` uses for large arrays): it shrinks to "every
element 1.0", and a tensor costs a few choices rather than one per element.
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

from fuzz.fpenv import keeps_subnormals
from fuzz.model.tensor import DTYPES, Tensor

from ._validation import check_strategy, checked_draw

# The package re-exports Magnitude and tensors (``strategies``); the rest are shared
# with its other modules.
__all__ = [
    "Format",
    "Magnitude",
    "check_dtype",
    "code_array",
    "code_class",
    "draw_array",
    "exponent_range",
    "is_magnitude",
    "scalars",
    "tensors",
]


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


#: Elements of a tensor that may differ from its fill value (a "varied" tensor).
MAX_OVERRIDES = 3


@functools.cache
def _overrides(
    dtype: str, magnitude: Magnitude, allow_negative: bool, size: int
) -> SearchStrategy[list[tuple[int, float]]]:
    element = st.tuples(st.integers(0, size - 1), scalars(dtype, magnitude, allow_negative))
    return st.lists(element, min_size=1, max_size=min(size, MAX_OVERRIDES))


@keeps_subnormals
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

    A fill value, then (for a tensor of more than one element, drawn False first) whether
    the tensor is *varied*: then one to :data:`MAX_OVERRIDES` elements get values of their
    own. ``constant`` draws the fill value only: every element equal (CANCELLING included).
    """
    size = math.prod(shape)
    fill = draw(scalars(dtype, magnitude, allow_negative))
    values = np.full(size, fill, dtype=np.float64)
    if magnitude is Magnitude.CANCELLING:
        if allow_negative and not constant:
            values[1::2] = -fill
    elif size > 1 and not constant and draw(st.booleans()):
        for index, value in draw(_overrides(dtype, magnitude, allow_negative, size)):
            values[index] = value
    # Round into the dtype (only ORDINARY values, 1 + x, can change) and back, exactly.
    return Tensor.from_numpy(values.reshape(shape), dtype).float64()


#: How a tensor's code picks its class: ORDINARY half the time, each other class 1 in 16
#: (HUGE_SQRT and HUGE twice that, since overflow needs them), like ``mostly_first``.
CODE_CLASSES: tuple[Magnitude, ...] = (
    *(Magnitude.ORDINARY,) * 8,
    Magnitude.ZERO,
    Magnitude.CANCELLING,
    Magnitude.TINY,
    Magnitude.SUBNORMAL,
    Magnitude.HUGE_SQRT,
    Magnitude.HUGE_SQRT,
    Magnitude.HUGE,
    Magnitude.HUGE,
)
#: A tensor code is an integer in ``[0, 2**CODE_BITS)``.
CODE_BITS = 24


def code_class(code: int) -> Magnitude:
    """The class a tensor code gives (code 0: ORDINARY)."""
    return CODE_CLASSES[code % len(CODE_CLASSES)]


def _code_scalars(
    rng: np.random.Generator, dtype: str, magnitude: Magnitude, allow_negative: bool, count: int
) -> np.ndarray[Any, Any]:
    """``count`` values of ``magnitude``, exact in ``dtype``, from ``rng``."""
    f = FORMATS[dtype]
    signs = np.where(rng.random(count) < 0.5, -1.0, 1.0) if allow_negative else np.ones(count)
    if magnitude is Magnitude.ORDINARY:
        # quarters in [-10, 10]: exact in every dtype (bfloat16 holds 8 significant bits)
        low = -ORDINARY_BOUND if allow_negative else 0.0
        return np.round(rng.uniform(low, ORDINARY_BOUND, count) * 4) / 4
    if magnitude is Magnitude.ZERO:
        return signs * 0.0
    if magnitude is Magnitude.SUBNORMAL:
        p = f.fraction_bits
        return signs * np.ldexp(rng.integers(1, 2**p, count).astype(np.float64), f.min_exponent - p)
    low, high = exponent_range(dtype, magnitude)
    fraction = rng.integers(0, 2**f.fraction_bits, count).astype(np.float64)
    exponent = rng.integers(low, high + 1, count)
    return signs * np.ldexp(1.0 + np.ldexp(fraction, -f.fraction_bits), exponent)


def _simplest(dtype: str, magnitude: Magnitude) -> float:
    """The simplest value of a class: 1.0, 0.0, the smallest normal or subnormal number,
    or the bottom of the class's binades."""
    f = FORMATS[dtype]
    if magnitude is Magnitude.ORDINARY:
        return 1.0
    if magnitude is Magnitude.ZERO:
        return 0.0
    if magnitude is Magnitude.SUBNORMAL:
        return math.ldexp(1.0, f.min_exponent - f.fraction_bits)
    return math.ldexp(1.0, exponent_range(dtype, magnitude)[0])


@keeps_subnormals
def code_array(
    code: int, *, dtype: str, shape: tuple[int, ...], allow_negative: bool = True, constant: bool = False
) -> np.ndarray[Any, Any]:
    """A tensor's values from one integer code: what :func:`draw_array` draws with many
    choices, made from one. The code's low bits pick the class (:func:`code_class`), the
    rest seed the values: 0 gives the class's simplest tensor (ORDINARY: every element
    1.0), anything else a fill value and, a quarter of the time, up to
    :data:`MAX_OVERRIDES` elements of their own. ``constant``: every element equal.
    Deterministic: the same code gives the same values.
    """
    magnitude = code_class(code)
    size = math.prod(shape)
    seed = code // len(CODE_CLASSES)
    if magnitude is Magnitude.CANCELLING:
        base = code_class(seed) if code_class(seed) is Magnitude.HUGE_SQRT else Magnitude.ORDINARY
    else:
        base = magnitude
    if seed == 0:
        values = np.full(size, _simplest(dtype, base))
        rng = None
    else:
        rng = np.random.default_rng(seed)
        values = np.full(size, _code_scalars(rng, dtype, base, allow_negative, 1)[0])
    if magnitude is Magnitude.CANCELLING:
        if allow_negative and not constant:
            values[1::2] = -values[1::2]
    elif rng is not None and size > 1 and not constant and rng.random() < 0.25:
        count = int(rng.integers(1, min(size, MAX_OVERRIDES) + 1))
        chosen = rng.choice(size, count, replace=False)
        values[chosen] = _code_scalars(rng, dtype, base, allow_negative, count)
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
    """:class:`~fuzz.model.case.Tensor` values of ``dtype`` and ``shape``, of one drawn class.

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
