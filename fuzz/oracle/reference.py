"""Reference: exact semantics of a case, and how far a correct program may stray.

For every output of a :class:`~fuzz.model.case.Case` this computes an
:class:`Expected`:

``value``
    the result in wide arithmetic (float64; ``numpy.longdouble`` for cases
    that compute in float64, so the reference is wider than what it judges), following TVM's
    operator semantics op by op: conv2d with every attribute, batch_norm with
    ``axis``, ``epsilon`` (rounded as TVM's lowering does, see :func:`epsilon_dtype`),
    ``center``, ``scale``, ``training`` (batch statistics) and ``momentum``.
``bound``
    an a-priori error bound that any correct program in the case's dtype
    meets, folded or not (docs/design.md, "The bound", derives it)::

        bound = SAFETY * (gamma_{n+k}(u) * A + Z) + reference error

    ``A`` is the per-element *magnitude budget*: what the result would be if
    every term were added with the same sign (``|s| * (|W| conv |X| + |mean|)
    + |beta|`` for one block, composed through the graph). ``Z`` collects the
    absolute errors of *flushing*, amplified by everything downstream: a correct
    program may replace any subnormal number it reads or computes by zero
    (flush-to-zero and denormals-are-zero are legitimate kernel modes, chosen by the
    CPU's instruction set and by process state), which changes that value by less than
    the dtype's smallest normal number ``phi``. So every operation adds ``phi`` (times
    what multiplies its result downstream), and every operand that is itself subnormal
    adds its own magnitude (times the same). This also covers gradual underflow, whose
    error is smaller.
``robust``
    where the *unfolded* program is robustly finite: every intermediate it
    computes, widened by its error bound, stays below ``max(dtype) / RANGE_MARGIN``
    and no denominator rounds to zero. Only there may a folded program be
    required to be finite.
``judged``
    ``robust`` and a finite bound: where the oracle compares numbers at all.

Intermediates after the conv are bounded by their *values* plus errors (a
cancelling conv makes ``q = (y - mean) / sqrt(var + eps)`` small even when the
budget is huge); partial sums inside the conv can only be bounded by the
budget. That is what makes the public NaN report (x = 1e13, W = +-1e13,
gamma = 1e13) a finding: the unfolded intermediates peak near 1e26.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fuzz.fpenv import keeps_subnormals
from fuzz.model.case import Block, Case, Epilogue, Topology, kernel_to_oihw
from fuzz.model.numerics import DtypeFacts, conv2d_nchw, dtype_facts, epsilon_dtype, gamma_k
from fuzz.model.tensor import np_dtype

__all__ = [
    "BN_ROUNDINGS",
    "RANGE_MARGIN",
    "REFERENCE_ROUNDINGS",
    "SAFETY",
    "Expected",
    "Reference",
    "reference",
]

#: Factor between the rounding error we derive and the bound we enforce. The
#: derivation keeps first-order terms only and assumes one rounding per op;
#: 2 covers second-order terms and a fold's extra multiply by a split scale.
SAFETY = 2.0
#: Rounded operations per batch_norm beyond the dot product, counted generously:
#: subtract, add eps, sqrt, divide, multiply, add, plus two for a fold that
#: computes and applies its scale in steps.
BN_ROUNDINGS = 8
#: Roundings of the reference itself, in its own wide unit, per element (generous:
#: dot products here have at most a few hundred terms, each rounding is relative
#: to the budget).
REFERENCE_ROUNDINGS = 1024
#: An intermediate counts as safely inside the range below max / RANGE_MARGIN.
RANGE_MARGIN = 2.0


@dataclass(frozen=True)
class Expected:
    """The reference for one output of a case."""

    dtype: str
    value: np.ndarray[Any, Any]
    bound: np.ndarray[Any, Any]
    robust: np.ndarray[Any, Any]
    judged: np.ndarray[Any, Any]
    budget: np.ndarray[Any, Any]


@dataclass(frozen=True)
class Reference:
    """All outputs of a case, plus search signals for ``hypothesis.target``."""

    outputs: tuple[Expected, ...]
    #: log2 of the largest |s| * (|W| conv |X|) over robust elements, relative to the
    #: dtype max: near 0 or above means a fold that scales weights by s may overflow
    #: although the unfolded program is finite.
    fold_pressure: float


@dataclass
class _Tracked:
    """A tensor in the analysis: value, budget A, relative coefficient g, absolute Z."""

    dtype: str
    value: np.ndarray[Any, Any]
    budget: np.ndarray[Any, Any]
    g: float
    z: np.ndarray[Any, Any]
    robust: np.ndarray[Any, Any]

    def error(self) -> np.ndarray[Any, Any]:
        return self.g * self.budget + self.z


def _wide(case: Case) -> type:
    """The arithmetic of the reference: wider than every dtype the case computes in
    (a float32 conv with ``out_dtype="float64"`` runs its batch_norm in float64)."""
    dtypes = {case.dtype} | {b.conv.out_dtype for b in case.blocks if b.conv is not None}
    return np.longdouble if "float64" in dtypes else np.float64


def _flushable(v: np.ndarray[Any, Any], dtype: str) -> np.ndarray[Any, Any]:
    """``|v|`` where ``v`` is subnormal in ``dtype`` (a kernel that reads denormals as zero
    changes it by that much), else 0."""
    a = np.abs(v)
    return np.where(a < dtype_facts(dtype).min_normal, a, 0)


def _leaf(array: np.ndarray[Any, Any], dtype: str, wide: type) -> _Tracked:
    """An operand as given: exact, but a subnormal value may be read as zero."""
    v: np.ndarray[Any, Any] = np.asarray(array, dtype=np.float64).astype(wide)
    return _Tracked(dtype, v, np.abs(v), 0.0, _flushable(v, dtype), np.ones(v.shape, dtype=bool))


def _round_to(x: float, dtype: str, wide: type) -> Any:
    return wide(np.asarray(x, dtype=np.float64).astype(np_dtype(dtype)).astype(np.float64))


def _in_range(hi: np.ndarray[Any, Any], facts: DtypeFacts) -> np.ndarray[Any, Any]:
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(np.isfinite(hi) & (hi * RANGE_MARGIN < facts.max))


def _conv(x: _Tracked, block: Block, wide: type) -> _Tracked:
    attrs = block.conv
    assert attrs is not None and block.weight is not None
    out_dtype = attrs.out_dtype or x.dtype
    facts = dtype_facts(out_dtype)
    w = kernel_to_oihw(attrs, block.weight.float64().astype(wide))
    to_nchw = (0, 3, 1, 2) if attrs.data_layout == "NHWC" else (0, 1, 2, 3)
    back = (0, 2, 3, 1) if attrs.data_layout == "NHWC" else (0, 1, 2, 3)

    def conv(a: np.ndarray[Any, Any], weight: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return conv2d_nchw(np.transpose(a, to_nchw), weight, attrs).transpose(back)

    n_terms = w.shape[1] * w.shape[2] * w.shape[3]
    value = conv(x.value, w)
    budget = conv(x.budget, np.abs(w))
    # Flushing: of the data (in x.z), of subnormal weights, and of each product and
    # partial sum (2n operations).
    w_flush = _flushable(w, block.weight.dtype)
    z = conv(x.z, np.abs(w)) + conv(x.budget + x.error(), w_flush) + 2 * n_terms * facts.min_normal
    g = x.g + gamma_k(n_terms, facts.u)
    # Partial sums are bounded by the budget only.
    partial_hi = budget * (1 + SAFETY * g) + SAFETY * z
    robust = _in_range(partial_hi, facts) & bool(x.robust.all())
    return _Tracked(out_dtype, value, budget, g, z, robust)


def _param_shape(ndim: int, axis: int, length: int) -> tuple[int, ...]:
    shape = [1] * ndim
    shape[axis] = length
    return tuple(shape)


def _bn_scale(block: Block, dtype: str, wide: type, var: np.ndarray[Any, Any]) -> tuple[Any, Any]:
    """(denominator var + eps, scale s = gamma / sqrt(that)); eps as TVM rounds it."""
    eps = _round_to(block.bn.epsilon, epsilon_dtype(dtype), wide)
    d = var + eps
    gamma = block.gamma.float64().astype(wide) if block.bn.scale else wide(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = gamma / np.sqrt(d)
    return d, s


def _denominator_flush(block: Block, dtype: str, var: np.ndarray[Any, Any]) -> Any:
    """How much flushing may change ``var + eps``: a subnormal moving variance read as
    zero, and the sum (in the dtype eps is added in) flushed."""
    moving = _flushable(var, dtype) if not block.bn.training else 0.0
    return moving + dtype_facts(epsilon_dtype(dtype)).min_normal


def _flush(phi: float, s: Any, q_budget: Any, block: Block, shape: tuple[int, ...]) -> Any:
    """Absolute error from flushing in batch_norm's own steps, each less than ``phi``,
    times what multiplies it downstream: ``x - mean`` (and a subnormal ``mean``) by
    ``|s|``, ``q = (x - mean) / sqrt(var + eps)`` by ``|gamma|`` (tiny q times huge
    gamma), ``q * gamma`` and ``+ beta`` by 1, all doubled for a fold's own steps; and
    subnormal operands read as zero: ``gamma`` (losing ``q * gamma``, at most
    ``q_budget * |gamma|``) and ``beta``."""
    zero = np.zeros(shape)
    gamma: Any = np.abs(block.gamma.float64()).reshape(shape) if block.bn.scale else zero + 1
    gamma_flush = (
        _flushable(block.gamma.float64(), block.gamma.dtype).reshape(shape) if block.bn.scale else zero
    )
    beta_flush = (
        _flushable(block.beta.float64(), block.beta.dtype).reshape(shape) if block.bn.center else zero
    )
    training = block.bn.training
    mean_flush = zero if training else _flushable(block.mean.float64(), block.mean.dtype).reshape(shape)
    ops = 2 * phi * (np.abs(s) + gamma + 2)
    return ops + np.abs(s) * mean_flush + gamma_flush * q_budget + beta_flush


def _batch_norm(x: _Tracked, block: Block, wide: type) -> tuple[_Tracked, _Tracked, _Tracked]:
    """Output 0 (normalised data) and outputs 1, 2 (new mean, new variance)."""
    bn = block.bn
    dtype = x.dtype
    facts = dtype_facts(dtype)
    ndim = x.value.ndim
    axis = bn.axis % ndim
    c = x.value.shape[axis]
    shape = _param_shape(ndim, axis, c)
    mean: np.ndarray[Any, Any] = block.mean.float64().astype(wide)
    var: np.ndarray[Any, Any] = block.var.float64().astype(wide)
    beta = block.beta.float64().astype(wide) if bn.center else np.zeros(c, dtype=wide)
    phi = facts.min_normal

    with np.errstate(all="ignore"):
        if bn.training:
            reduce_axes = tuple(i for i in range(ndim) if i != axis)
            m = x.value.size // c
            err_in = x.error()
            mu = x.value.mean(axis=reduce_axes)
            dev = x.value - mu.reshape(shape)
            var_b = (dev * dev).mean(axis=reduce_axes)
            e_mu = (
                err_in.mean(axis=reduce_axes)
                + gamma_k(m + 1, facts.u) * x.budget.mean(axis=reduce_axes)
                + phi
            )
            e_dev = err_in + e_mu.reshape(shape) + facts.u * (np.abs(dev) + err_in + e_mu.reshape(shape))
            e_var = (
                (2 * np.abs(dev) * e_dev + e_dev * e_dev).mean(axis=reduce_axes)
                + gamma_k(m + 3, facts.u) * ((np.abs(dev) + e_dev) ** 2).mean(axis=reduce_axes)
                + phi
            )
            d, s = _bn_scale(block, dtype, wide, var_b)
            margin = d - 2 * e_var
            rho = np.where(margin > 0, e_var / (2 * np.where(margin > 0, margin, 1)), np.inf)
            rho = rho + 3 * facts.u + _denominator_flush(block, dtype, var_b) / np.where(d > 0, d, 1)
            sr = s.reshape(shape)
            center = mu.reshape(shape)
            value = dev * sr + beta.reshape(shape)
            budget = np.abs(sr) * (x.budget + np.abs(center)) + np.abs(beta).reshape(shape)
            q_hi = (np.abs(dev) + e_dev) / np.sqrt(np.where(d > 0, d, np.inf)).reshape(shape)
            z = (
                np.abs(sr) * (err_in + e_mu.reshape(shape)) * (1 + rho.reshape(shape))
                + rho.reshape(shape) * np.abs(sr) * np.abs(dev)
                + _flush(phi, sr, q_hi, block, shape)
            )
            g = gamma_k(BN_ROUNDINGS, facts.u)
            # The batch statistics' partial sums (of x and of squared deviations) must
            # stay in range too, not only the tensors the op returns.
            sum_hi = (np.abs(x.value) + err_in).sum(axis=reduce_axes)
            square_sum_hi = ((np.abs(dev) + e_dev) ** 2).sum(axis=reduce_axes)
            robust_axis = (rho < 0.5) & _in_range(sum_hi, facts) & _in_range(square_sum_hi, facts)
            hi = [
                np.abs(x.value) + err_in,
                q_hi,
                np.abs(dev * sr) + SAFETY * (g * budget + z),  # q * gamma, before beta
                np.abs(value) + SAFETY * (g * budget + z),
            ]
            mom = _round_to(bn.momentum, dtype, wide)
            keep = _round_to(1 - bn.momentum, dtype, wide)
            new_mean = _Tracked(
                dtype,
                keep * mean + mom * mu,
                np.abs(keep * mean) + np.abs(mom * mu),
                gamma_k(3, facts.u),
                np.abs(mom) * e_mu + 4 * phi,
                np.asarray(x.robust.all() & _in_range(sum_hi, facts)),
            )
            new_var = _Tracked(
                dtype,
                keep * var + mom * var_b,
                np.abs(keep * var) + np.abs(mom * var_b),
                gamma_k(3, facts.u),
                np.abs(mom) * e_var + 4 * phi,
                np.asarray(
                    x.robust.all()
                    & np.isfinite(e_var)
                    & _in_range(sum_hi, facts)
                    & _in_range(square_sum_hi, facts)
                ),
            )
        else:
            d, s = _bn_scale(block, dtype, wide, var)
            sr, mr, br = s.reshape(shape), mean.reshape(shape), beta.reshape(shape)
            t = x.value - mr
            t_budget = x.budget + np.abs(mr)
            value = t * sr + br
            budget = np.abs(sr) * t_budget + np.abs(br)
            g = x.g + gamma_k(BN_ROUNDINGS, facts.u)
            # eps is taken as TVM rounds it; flushing may change var + eps by up to
            # d_flush, a relative error of up to d_flush / d in s (first order: only where
            # that is at most 1/2 is the denominator robustly away from zero).
            d_flush = _denominator_flush(block, dtype, var)
            rel_s = (d_flush / np.where(d > 0, d, 1)).reshape(shape)
            q = t / np.sqrt(np.where(d > 0, d, np.inf)).reshape(shape)
            q_budget = t_budget / np.sqrt(np.where(d > 0, d, np.inf)).reshape(shape)
            z = np.abs(sr) * x.z + rel_s * np.abs(sr) * t_budget + _flush(phi, sr, q_budget, block, shape)
            robust_axis = d > 2 * d_flush
            err = g * budget + z
            hi = [
                np.abs(t) + SAFETY * (x.g * t_budget + x.z + facts.u * t_budget),
                np.broadcast_to(d.reshape(shape), t.shape),
                np.abs(q) + SAFETY * (g * q_budget + z),
                # q * gamma, before beta is added: it may pass the maximum where the sum
                # with beta would not
                np.abs(t * sr) + SAFETY * err,
                np.abs(value) + SAFETY * err,
            ]
            new_mean = _Tracked(
                dtype, mean, np.abs(mean), 0.0, np.zeros(c, dtype=wide), np.ones(c, dtype=bool)
            )
            new_var = _Tracked(dtype, var, np.abs(var), 0.0, np.zeros(c, dtype=wide), np.ones(c, dtype=bool))
        robust = x.robust & np.broadcast_to(robust_axis.reshape(shape), x.value.shape)
        for h in hi:
            robust = robust & _in_range(np.broadcast_to(h, x.value.shape), facts)
    out = _Tracked(dtype, value, budget, g, z, robust)
    return out, new_mean, new_var


def _relu(x: _Tracked) -> _Tracked:
    """``max(x, 0)`` rounds nothing, but may read a subnormal as zero."""
    phi = dtype_facts(x.dtype).min_normal
    return _Tracked(x.dtype, np.maximum(x.value, 0), x.budget, x.g, x.z + phi, x.robust)


def _clip(x: _Tracked, low: float, high: float) -> _Tracked:
    """``clip`` moves no value further from another (1-Lipschitz) and rounds nothing, but
    may read a subnormal as zero."""
    phi = dtype_facts(x.dtype).min_normal
    return _Tracked(x.dtype, np.clip(x.value, low, high), x.budget, x.g, x.z + phi, x.robust)


def _add(a: _Tracked, b: _Tracked) -> _Tracked:
    """``a + b`` (broadcasting) in ``a``'s dtype: one rounding, relative to the budget sum,
    and a subnormal sum may be flushed to zero (less than the smallest normal)."""
    facts = dtype_facts(a.dtype)
    with np.errstate(all="ignore"):
        value = a.value + b.value
        budget = a.budget + b.budget
        g = max(a.g, b.g) + gamma_k(1, facts.u)
        z = a.z + b.z + facts.min_normal
        hi = np.abs(value) + SAFETY * (g * budget + z)
        robust = a.robust & b.robust & _in_range(hi, facts)
    return _Tracked(a.dtype, value, budget, g, z, np.asarray(robust))


def _per_channel(t: _Tracked, axis: int, ndim: int) -> _Tracked:
    """A 1-D tracked tensor reshaped to broadcast along ``axis`` of a rank-``ndim`` one."""
    shape = _param_shape(ndim, axis, t.value.shape[0])
    return _Tracked(
        t.dtype,
        t.value.reshape(shape),
        t.budget.reshape(shape),
        t.g,
        np.broadcast_to(t.z, t.value.shape).reshape(shape),
        np.broadcast_to(t.robust, t.value.shape).reshape(shape),
    )


def _epilogue(x: _Tracked, case: Case, wide: type) -> _Tracked:
    if case.epilogue is Epilogue.RELU:
        return _relu(x)
    if case.epilogue is Epilogue.CLIP:
        return _clip(x, 0.0, 6.0)
    if case.epilogue is Epilogue.ADD:
        assert case.residual is not None
        return _add(x, _leaf(case.residual.float64(), case.residual.dtype, wide))
    return x


def _finish(t: _Tracked) -> Expected:
    with np.errstate(all="ignore"):
        ref_u = float(np.finfo(t.value.dtype).eps) / 2
        # the output as stored, or as read back, may be flushed too
        stored = dtype_facts(t.dtype).min_normal
        bound = SAFETY * (t.error() + stored) + REFERENCE_ROUNDINGS * ref_u * t.budget
        # Whatever the op-level checks said: the result itself, widened by its error,
        # must be inside the range.
        robust = t.robust & np.isfinite(t.value) & _in_range(np.abs(t.value) + bound, dtype_facts(t.dtype))
        judged = robust & np.isfinite(bound)
    return Expected(
        dtype=t.dtype,
        value=t.value,
        bound=np.where(judged, bound, np.inf),
        robust=np.asarray(robust),
        judged=np.asarray(judged),
        budget=t.budget,
    )


@keeps_subnormals
def reference(case: Case) -> Reference:
    """The exact outputs of ``case`` and the error bounds of a correct program."""
    wide = _wide(case)
    x = _leaf(case.data.float64(), case.dtype, wide)
    pressure = -np.inf
    outputs: list[_Tracked] = []
    ndim = len(case.data.shape)
    for i, block in enumerate(case.blocks):
        conv = _conv(x, block, wide) if case.topology.has_conv else x
        if case.topology.has_conv and not block.bn.training:
            pressure = max(pressure, _fold_pressure(conv, block, wide))
        if block.bias is not None and block.conv is not None:
            bias = _leaf(block.bias.float64(), block.bias.dtype, wide)
            conv = _add(conv, _per_channel(bias, block.conv.channel_axis, ndim))
        out, new_mean, new_var = _batch_norm(conv, block, wide)
        if case.topology is Topology.CHAIN and i == 0:
            x = _relu(out)
            continue
        if case.topology is Topology.STATS_CONSUMED:
            out = _add(out, _per_channel(new_mean, block.bn.axis % ndim, ndim))
        outputs.append(_epilogue(out, case, wide))
        if case.topology is Topology.CONV_SHARED:
            outputs.append(conv)
        elif case.topology is Topology.BN_STATS:
            outputs.extend([new_mean, new_var])
    return Reference(tuple(_finish(t) for t in outputs), float(pressure))


def _fold_pressure(conv: _Tracked, block: Block, wide: type) -> float:
    """log2(max |s| * |W| conv |X| / dtype max) over robust elements."""
    facts = dtype_facts(conv.dtype)
    ndim = conv.value.ndim
    axis = block.bn.axis % ndim
    _, s = _bn_scale(block, conv.dtype, wide, block.var.float64().astype(wide))
    with np.errstate(all="ignore"):
        load = np.abs(s.reshape(_param_shape(ndim, axis, s.size))) * conv.budget
        load = np.where(conv.robust & np.isfinite(load), load, 0)
        peak = float(np.max(load)) if load.size else 0.0
    with np.errstate(divide="ignore"):
        return float(np.log2(peak / facts.max)) if peak > 0 else -np.inf
