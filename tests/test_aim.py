"""Tests for ``strategies.aim``: every aimed case is valid, and each aim reaches its edge.

Fast and TVM-free: the edges are checked with NumPy arithmetic on the aimed values,
independently of the fuzzer's reference.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_strategies import MANY, check_case

from fuzz.model.case import Case, Topology, kernel_to_oihw
from fuzz.model.numerics import epsilon_dtype
from strategies import cases
from strategies.aim import AIM_BITS, Aim, aim
from strategies.values import FORMATS

UNAIMED = cases(aims=st.just(0))
CODES = st.integers(0, 2**AIM_BITS - 1)


def code_for(target: Aim, seed: int) -> int:
    return (seed << 3) | int(target)


def scale_of(case: Case) -> np.ndarray[Any, Any]:
    """s = gamma / sqrt(var + eps) of the first block, per channel, in float64."""
    block = case.blocks[0]
    eps = float(np.float64(block.bn.epsilon).astype(epsilon_dtype(block.gamma.dtype)))
    gamma = block.gamma.float64() if block.bn.scale else np.ones(block.gamma.shape)
    return np.asarray(gamma / np.sqrt(block.var.float64() + eps))


def oihw(case: Case) -> np.ndarray[Any, Any]:
    block = case.blocks[0]
    assert block.conv is not None and block.weight is not None
    return kernel_to_oihw(block.conv, block.weight.float64())


@MANY
@given(UNAIMED, CODES)
def test_aimed_cases_are_valid(case: Case, code: int) -> None:
    check_case(aim(case, code))


@settings(MANY, max_examples=100)
@given(UNAIMED)
def test_code_zero_and_bn_only_cases_are_left_alone(case: Case) -> None:
    assert aim(case, 0) == case
    if not case.topology.has_conv:
        assert aim(case, code_for(Aim.PRESSURE, 5)) == case


@settings(MANY, max_examples=200)
@given(cases(aims=st.just(0), topologies=st.just(Topology.CONV_BN)), st.integers(0, 2**16))
def test_pressure_overflows_the_folded_partial_sums_only(case: Case, seed: int) -> None:
    aimed = aim(case, code_for(Aim.PRESSURE, seed))
    if aimed == case:  # unreachable in this dtype pair, or one tap: left alone
        return
    block = aimed.blocks[0]
    f = FORMATS[block.gamma.dtype]
    w = oihw(aimed)
    s = scale_of(aimed)
    x = set(aimed.data.values)
    assert len(x) == 1  # constant data
    (xv,) = x
    rows = w.reshape(w.shape[0], -1)
    # every row cancels: as many +w as -w, so the unfolded conv is 0
    assert np.all(rows.sum(axis=1) == 0)
    # the unfolded partial sums (their magnitude budget) stay under half the maximum ...
    budget = np.abs(rows).sum(axis=1) * abs(xv)
    assert np.all(budget < f.max_value / 2)
    # ... while one folded product x * (w * s) is past the maximum (in float64 too: inf)
    with np.errstate(over="ignore"):
        folded = np.abs(rows).max(axis=1) * np.abs(s)
        assert np.all(abs(xv) * folded > f.max_value)


@settings(MANY, max_examples=200)
@given(cases(aims=st.just(0), topologies=st.just(Topology.CONV_BN)), st.integers(0, 2**16))
def test_tiny_scale_leaves_few_bits_over_a_large_conv(case: Case, seed: int) -> None:
    aimed = aim(case, code_for(Aim.TINY_SCALE, seed))
    if aimed == case:  # scale=False: out of reach
        return
    block = aimed.blocks[0]
    f = FORMATS[block.gamma.dtype]
    s = np.abs(scale_of(aimed))
    smallest_normal = math.ldexp(1.0, f.min_exponent)
    subnormal_step = math.ldexp(1.0, f.min_exponent - f.fraction_bits)
    # a scale in the subnormal range with at most five significant bits there
    nonzero = s[s > 0]
    assert np.all(nonzero < smallest_normal * 2)
    assert np.all(nonzero < 64 * subnormal_step * 4)
    # the conv's output makes s * conv a normal number where the scale survived
    conv = np.abs(oihw(aimed)).sum(axis=(1, 2, 3)) * max(abs(v) for v in aimed.data.values)
    assert np.all(conv < f.max_value / 4)
    assert np.all((s * conv)[s >= 3 * subnormal_step] >= smallest_normal)


@settings(MANY, max_examples=200)
@given(cases(aims=st.just(0), topologies=st.just(Topology.CONV_BN)), st.integers(0, 2**16))
def test_bias_cancels_the_conv_and_overflows_mean_times_scale(case: Case, seed: int) -> None:
    aimed = aim(case, code_for(Aim.BIAS, seed))
    if aimed == case:
        return
    block = aimed.blocks[0]
    f = FORMATS[block.gamma.dtype]
    s = scale_of(aimed)
    mean = block.mean.float64()
    with np.errstate(over="ignore"):
        assert np.all(np.abs(mean * s) > f.max_value * 0.99)
    assert np.all(np.abs(mean) < f.max_value / 2)
    assert all(v == 0 for v in block.beta.values)


@settings(MANY, max_examples=100)
@given(cases(aims=st.just(0), topologies=st.just(Topology.CONV_BN)), st.integers(0, 2**16))
def test_zero_variance_leaves_epsilon_to_decide(case: Case, seed: int) -> None:
    block = aim(case, code_for(Aim.ZERO_VARIANCE, seed)).blocks[0]
    eps = float(np.float64(block.bn.epsilon).astype(epsilon_dtype(block.gamma.dtype)))
    assert all(0 <= v <= eps for v in block.var.values)


@pytest.mark.slow
@pytest.mark.parametrize("target", [Aim.SPREAD, Aim.HUGE_SCALE, Aim.CANCEL])
def test_other_aims_change_the_first_block_only(target: Aim) -> None:
    @MANY
    @given(cases(aims=st.just(0), topologies=st.just(Topology.CHAIN)), st.integers(0, 2**16))
    def check(case: Case, seed: int) -> None:
        aimed = aim(case, code_for(target, seed))
        assert aimed.blocks[1:] == case.blocks[1:]
        assert aimed.data == case.data

    check()
