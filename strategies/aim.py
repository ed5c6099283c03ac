"""Aimed values: a value set whose tensors are chosen *together*, toward a fold's edges.

Independently drawn tensors rarely line up the way the hard defects need: a scale
``s = gamma / sqrt(var + eps)`` with a few significant bits left in the subnormal range,
partial sums ``x * (W * s)`` just past the dtype's maximum while ``W * s`` and every
unfolded intermediate stay finite (the public NaN report), a folded bias
``beta - mean * s`` past the maximum while ``conv - mean`` cancels, a variance of zero
where only epsilon's rounding decides ``s``. :func:`aim` takes a case whose values were
drawn and one integer *aim code* (one Hypothesis choice) and rewrites the first conv
block's values toward one :class:`Aim`, chosen by the code's low three bits; the other
bits seed the choices inside it (binades, mantissas, which taps cancel).

Code 0 changes nothing, so a value set shrinks to unaimed; a finding that needs the aim
keeps a nonzero code, and its case holds the resulting values (the case, not the code,
is what is stored). Every aimed case is valid: each tensor is rounded into its dtype and
clipped to the finite range, and variances stay non-negative.

Key idea: aiming is a function of the drawn case and one integer, so it costs one choice
per value set and works the same for the first value set of a batch and the cheap
further ones; each aim is computed from the dtype's format and the conv's geometry (how
many taps a partial sum adds up), not searched for.
"""

from __future__ import annotations

import enum
import math
from dataclasses import replace
from typing import Any

import numpy as np

from fuzz.fpenv import keeps_subnormals
from fuzz.model.case import Block, Case, kernel_to_oihw
from fuzz.model.numerics import conv2d_nchw, epsilon_dtype
from fuzz.model.tensor import Tensor

from .values import FORMATS, Format

__all__ = ["AIM_BITS", "Aim", "aim"]

#: An aim code is an integer in ``[0, 2**AIM_BITS)``.
AIM_BITS = 20


class Aim(enum.IntEnum):
    """What an aim code's low three bits ask for (0: nothing)."""

    NONE = 0
    #: distinct per-channel scales around 1 (2**-3 to 2**4), where a split's threshold
    #: sits and where a fold along the wrong kernel axis shows; half the time the mean
    #: cancels the conv's output, so the result is all rounding
    SPREAD = 1
    #: scales with one to four significant bits left in the output dtype's subnormal
    #: range, over a conv output large enough that the result is a normal number
    TINY_SCALE = 2
    #: alternating weights over constant data: the unfolded conv cancels to 0 with
    #: partial sums under half the maximum, while ``x * (W * s)`` passes it, ``W * s``
    #: itself finite (the public report's mechanism) or, a quarter of the time, not
    PRESSURE = 3
    #: ``conv == mean`` (so the unfolded result is ``beta``) with ``|mean * s|`` past
    #: the maximum: a folded bias or ``conv * s`` that overflows
    BIAS = 4
    #: variance zero, so ``s = gamma / sqrt(eps)`` and epsilon's rounding shows
    ZERO_VARIANCE = 5
    #: huge scales over small data (folded weights near the top of the range)
    HUGE_SCALE = 6
    #: the mean cancels the conv's output exactly (catastrophic cancellation)
    CANCEL = 7


@keeps_subnormals
def aim(case: Case, code: int) -> Case:
    """``case`` with its first conv block's values aimed as ``code`` says (module docstring)."""
    target = Aim(code & 7)
    if target is Aim.NONE or not case.topology.has_conv:
        return case
    with np.errstate(all="ignore"):  # huge products are the point; _round clips them
        return _AIMS[target](case, np.random.default_rng(code >> 3))


# ---------------------------------------------------------------------------
# helpers


def _round(values: Any, dtype: str, shape: tuple[int, ...] | None = None) -> Tensor:
    """``values`` rounded into ``dtype``, clipped to its finite range first (a tensor of a
    case is always finite), broadcast to ``shape`` if given."""
    top = FORMATS[dtype].max_value
    array = np.clip(np.nan_to_num(np.asarray(values, np.float64), nan=0.0), -top, top)
    if shape is not None:
        array = np.broadcast_to(array, shape)
    return Tensor.from_numpy(np.ascontiguousarray(array), dtype)


def _epsilon(block: Block) -> float:
    return float(np.float64(block.bn.epsilon).astype(epsilon_dtype(block.gamma.dtype)))


def _with_scale(block: Block, scale: np.ndarray[Any, Any]) -> Block:
    """``block`` with gamma (or, with ``scale=False``, the variance) giving about ``scale``
    per channel."""
    dtype = block.gamma.dtype
    eps = _epsilon(block)
    var = block.var.float64()
    if block.bn.scale:
        return replace(block, gamma=_round(scale * np.sqrt(var + eps), dtype))
    # without gamma, |s| = 1 / sqrt(var + eps): var = 1 / s**2 - eps, where that is >= 0
    wanted = np.maximum(1.0 / np.square(scale) - eps, 0.0)
    return replace(block, var=_round(np.where(np.isfinite(wanted), wanted, var), dtype))


def _actual_scale(block: Block) -> np.ndarray[Any, Any]:
    """``s = gamma / sqrt(var + eps)`` per channel as the block's rounded values give it
    (``_with_scale`` can only approximate a wanted scale: gamma rounds, and without gamma
    ``|s| <= 1 / sqrt(eps)``)."""
    gamma = block.gamma.float64() if block.bn.scale else np.ones(block.gamma.shape)
    return np.asarray(gamma / np.sqrt(block.var.float64() + _epsilon(block)))


def _mantissas(rng: np.random.Generator, count: int, low: float = 1.0) -> np.ndarray[Any, Any]:
    """``count`` distinct-ish mantissas in ``[low, 2)``, multiples of 1/16."""
    steps = int((2.0 - low) * 16)
    return low + rng.integers(0, steps, count) / 16


def _signs(rng: np.random.Generator, count: int) -> np.ndarray[Any, Any]:
    return np.where(rng.random(count) < 0.25, -1.0, 1.0)


def _oihw(block: Block) -> np.ndarray[Any, Any]:
    assert block.conv is not None and block.weight is not None
    return kernel_to_oihw(block.conv, block.weight.float64())


def _weight(block: Block, oihw: np.ndarray[Any, Any]) -> Tensor:
    """OIHW values back in the block's kernel layout and weight dtype."""
    assert block.conv is not None and block.weight is not None
    back = np.argsort([block.conv.kernel_layout.index(d) for d in "OIHW"])
    return _round(np.transpose(oihw, back), block.weight.dtype)


def _conv(case: Case, block: Block) -> np.ndarray[Any, Any]:
    """The first block's conv output (its bias included), NCHW, in float64."""
    conv = block.conv
    assert conv is not None
    x = case.data.float64()
    if conv.data_layout == "NHWC":
        x = np.transpose(x, (0, 3, 1, 2))
    out = conv2d_nchw(x, _oihw(block), conv)
    if block.bias is not None:
        out = out + block.bias.float64().reshape(1, -1, 1, 1)
    return np.asarray(out)


def _largest_per_channel(out: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Per channel, the conv output of largest magnitude (an interior position, where
    every tap sees data), keeping its sign."""
    flat = np.moveaxis(out, 1, 0).reshape(out.shape[1], -1)
    index = np.argmax(np.abs(flat), axis=1)
    return flat[np.arange(flat.shape[0]), index]


def _formats(case: Case, block: Block) -> tuple[Format, Format]:
    """The formats of the conv's input (data, weights) and of its output (batch_norm)."""
    return FORMATS[case.dtype], FORMATS[block.gamma.dtype]


def _constant_data(case: Case, value: float) -> Case:
    return replace(case, data=_round(value, case.dtype, case.data.shape))


def _set_block(case: Case, block: Block) -> Case:
    return replace(case, blocks=(block, *case.blocks[1:]))


def _mean_cancelling(case: Case, block: Block) -> Block:
    """``block`` with its mean equal to its conv's largest output per channel."""
    return replace(block, mean=_round(_largest_per_channel(_conv(case, block)), block.mean.dtype))


# ---------------------------------------------------------------------------
# the aims


def _spread(case: Case, rng: np.random.Generator) -> Case:
    block = case.blocks[0]
    channels = block.gamma.shape[0]
    exponents = rng.integers(-3, 5, channels)
    block = _with_scale(block, _signs(rng, channels) * np.ldexp(_mantissas(rng, channels), exponents))
    if rng.random() < 0.5:
        block = _mean_cancelling(case, block)
    return _set_block(case, block)


def _tiny_scale(case: Case, rng: np.random.Generator) -> Case:
    block = case.blocks[0]
    fin, fout = _formats(case, block)
    # one to four significant bits: s = k * 2**(emin - p) for k < 16, not a power of two
    channels = block.gamma.shape[0]
    steps = rng.integers(3, 16, channels) + rng.random(channels)
    block = _with_scale(
        block, _signs(rng, channels) * np.ldexp(steps, fout.min_exponent - fout.fraction_bits)
    )
    if not np.all(np.abs(_actual_scale(block)) < 2 * fout.smallest_normal):
        return case  # out of reach (scale=False: s = 1 / sqrt(var + eps) stays larger)
    oihw = _oihw(block)
    taps = math.prod(oihw.shape[1:])
    # A conv output near the top of the range (positive data and weights, partial sums
    # under a quarter of the maximum), so that s * conv is a normal number.
    top = min(fin.max_exponent, fout.max_exponent) - 4 - math.ceil(math.log2(taps)) - int(rng.integers(0, 4))
    if top < fout.fraction_bits:
        return case  # s * conv cannot be normal: the input dtype's range is too narrow
    a = min(top // 2, fin.max_exponent - 1)
    b = min(top - a, fin.max_exponent - 1)
    case = _constant_data(case, math.ldexp(float(_mantissas(rng, 1)[0]), a))
    weights = np.ldexp(np.broadcast_to(_mantissas(rng, oihw.shape[0]).reshape(-1, 1, 1, 1), oihw.shape), b)
    block = replace(
        block, weight=_weight(block, weights), mean=_round(0.0, block.mean.dtype, block.mean.shape)
    )
    return _set_block(case, block)


def _pressure(case: Case, rng: np.random.Generator) -> Case:
    block = case.blocks[0]
    fin, fout = _formats(case, block)
    oihw = _oihw(block)
    channels = oihw.shape[0]
    taps = math.prod(oihw.shape[1:])
    paired = taps - taps % 2  # an odd last tap is set to 0, so every pair cancels
    if paired == 0:
        return case
    # The unfolded partial sums stay below max / 2 when |x * w| * paired < 2**emax, and
    # x * (w * s) = 1.0625 * 2**(emax + 1) passes max: so s > 2 * paired, the smallest such
    # binade most of the time (a split guard's threshold sits there), sometimes a few above.
    c = math.ceil(math.log2(2 * paired)) + int(rng.choice([0, 0, 0, 1, 2, 4]))
    block = _with_scale(block, np.ldexp(_mantissas(rng, channels, low=1.25), c))
    scale = np.abs(_actual_scale(block))
    if not np.all(scale > 2.4 * paired):
        return case  # a scale this large is out of reach (scale=False caps it at 1/sqrt(eps))
    total = fout.max_exponent + 1  # the exponent of x * (w * s)
    if rng.random() < 0.25:
        a = total - fin.max_exponent - 1  # w * s = 2**(fin emax + 1) * 1.0625: not finite
    else:
        a = total // 2  # x and w * s both about the square root of the maximum
        if total - a + 1 > fin.max_exponent:
            return case  # not reachable in the input dtype (a narrow input, a wide output)
    if a > fin.max_exponent:
        return case
    w = np.ldexp(1.0625 / scale, total - a)  # w * s = 1.0625 * 2**(total - a) per channel
    if not np.all(w <= fin.max_value):
        return case
    signs = np.where(np.arange(taps) % 2 == 0, 1.0, -1.0)
    signs[paired:] = 0.0
    weights = (w.reshape(-1, 1) * signs.reshape(1, -1)).reshape(oihw.shape)
    case = _constant_data(case, math.ldexp(1.0, a))
    block = replace(
        block,
        weight=_weight(block, weights),
        mean=_round(0.0, block.mean.dtype, block.mean.shape),
        bias=block.bias and _round(0.0, block.bias.dtype, block.bias.shape),
    )
    return _set_block(case, block)


def _bias(case: Case, rng: np.random.Generator) -> Case:
    block = case.blocks[0]
    fin, fout = _formats(case, block)
    oihw = _oihw(block)
    channels = oihw.shape[0]
    taps = math.prod(oihw.shape[1:])
    # s = m * 2**c with c >= 2, conv = max * (1 + d) / s < max / 2: mean * s passes max
    c = 2 + int(rng.integers(0, 4))
    block = _with_scale(block, _signs(rng, channels) * np.ldexp(_mantissas(rng, channels), c))
    scale = _actual_scale(block)
    if not np.all(np.abs(scale) > 2.5):
        return case
    level = fout.max_value / np.abs(scale) * (1.0 + rng.random(channels) * 0.5)  # per channel
    per_tap = level / taps
    exponent = math.floor(math.log2(float(per_tap.max())))
    a = min(exponent // 2, fin.max_exponent - 1)
    x = math.ldexp(1.0, a)
    weights = np.broadcast_to((per_tap / x).reshape(-1, 1, 1, 1), oihw.shape)
    if not np.all(weights <= fin.max_value):
        return case
    aimed = _constant_data(case, x)
    block = replace(
        block,
        weight=_weight(block, weights),
        bias=block.bias and _round(0.0, block.bias.dtype, block.bias.shape),
    )
    block = _mean_cancelling(aimed, block)
    if not np.all(np.abs(block.mean.float64() * scale) > fout.max_value):
        return case  # no output position sees every tap (padding and strides)
    case = aimed
    return _set_block(case, replace(block, beta=_round(0.0, block.beta.dtype, block.beta.shape)))


def _zero_variance(case: Case, rng: np.random.Generator) -> Case:
    block = case.blocks[0]
    var = 0.0 if rng.random() < 0.75 else _epsilon(block) * rng.random()
    return _set_block(case, replace(block, var=_round(var, block.var.dtype, block.var.shape)))


def _huge_scale(case: Case, rng: np.random.Generator) -> Case:
    block = case.blocks[0]
    _, fout = _formats(case, block)
    channels = block.gamma.shape[0]
    c = int(rng.integers(fout.max_exponent // 3, fout.max_exponent - 1))
    block = _with_scale(block, _signs(rng, channels) * np.ldexp(_mantissas(rng, channels), c))
    return _set_block(case, _mean_cancelling(case, block))


def _cancel(case: Case, rng: np.random.Generator) -> Case:
    return _set_block(case, _mean_cancelling(case, case.blocks[0]))


_AIMS = {
    Aim.SPREAD: _spread,
    Aim.TINY_SCALE: _tiny_scale,
    Aim.PRESSURE: _pressure,
    Aim.BIAS: _bias,
    Aim.ZERO_VARIANCE: _zero_variance,
    Aim.HUGE_SCALE: _huge_scale,
    Aim.CANCEL: _cancel,
}
