"""Batches: one structure, several value sets (:func:`case_batches`, :func:`value_sets`,
:func:`further_counts`).

:func:`case_batches` draws one case with :func:`strategies.cases`, then a list of value
sets for its structure: each re-draws the tensors with the helpers of :mod:`.tensors`, in
the same order as the first case (``draw_magnitude``, ``draw_data``, ``draw_kernel``,
``draw_bn_values``), reading dtypes and shapes off the first case.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import DrawFn, SearchStrategy

from fuzz.model.case import Block, Case
from fuzz.model.tensor import Tensor

from ._validation import (
    check_integer,
    check_strategy,
    checked_draw,
)
from .aim import aim
from .graphs import cases
from .options import DEFAULT_AIMS, DEFAULT_MAGNITUDES, is_aim
from .tensors import BnValues, draw_bias, draw_bn_values, draw_data, draw_kernel, draw_magnitude, draw_tensor
from .values import CODE_BITS, Magnitude, code_array, code_class

__all__ = ["case_batches", "further_counts", "value_sets"]


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
        raise InvalidArgument(f"case={case!r} is not a fuzz.model.case.Case")
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
    return aim(other, checked_draw(draw, aims, "aims", is_aim, "an aim code"))


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
        data = draw_tensor(draw, magnitudes, case.dtype, case.data.shape, allow_negative=True)
        (block,) = case.blocks
        values = draw_bn_values(draw, magnitudes, block.gamma.dtype, block.gamma.shape[0])
        return replace(case, data=data, blocks=(replace(block, **values),))

    weight_class = draw_magnitude(draw, magnitudes)
    data = draw_data(draw, magnitudes, case.dtype, case.data.shape, weight_class=weight_class)
    blocks = []
    for i, block in enumerate(case.blocks):
        assert block.conv is not None and block.weight is not None
        magnitude = weight_class if i == 0 else draw_magnitude(draw, magnitudes)
        dims = dict(zip(block.conv.kernel_layout, block.weight.shape, strict=True))
        oihw = tuple(dims[d] for d in "OIHW")
        weight = draw_kernel(draw, block.conv, oihw, block.weight.dtype, magnitude)
        assert weight.shape == block.weight.shape
        values = draw_bn_values(draw, magnitudes, block.gamma.dtype, block.gamma.shape[0])
        bias = block.bias and draw_bias(draw, magnitudes, block.bias.dtype, block.bias.shape[0])
        blocks.append(replace(block, weight=weight, bias=bias, **values))
    residual = case.residual
    if residual is not None:
        residual = draw_tensor(draw, magnitudes, residual.dtype, residual.shape, allow_negative=True)
    return replace(case, data=data, blocks=tuple(blocks), residual=residual)


def _recoded(draw: DrawFn, case: Case) -> Case:
    """:func:`_revalued` with one code per tensor, in the same order."""

    def tensor(like: Tensor, *, allow_negative: bool = True, constant: bool = False) -> Tensor:
        values = code_array(
            draw(_CODES), dtype=like.dtype, shape=like.shape, allow_negative=allow_negative, constant=constant
        )
        return Tensor.from_numpy(values, like.dtype)

    def bn_values(block: Block) -> BnValues:
        gamma, beta, mean = (tensor(t) for t in (block.gamma, block.beta, block.mean))
        return BnValues(gamma=gamma, beta=beta, mean=mean, var=tensor(block.var, allow_negative=False))

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
