"""Float facts the reference and the strategies share: each dtype's unit roundoff,
smallest normal and largest value, Higham's error factor of k roundings, the dtype
TVM rounds batch_norm's epsilon to, and a plain convolution in whatever wide type its
operands have."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from fuzz.model.case import Conv2dAttrs
from fuzz.model.tensor import np_dtype

__all__ = ["DtypeFacts", "conv2d_nchw", "dtype_facts", "epsilon_dtype", "gamma_k"]


@dataclass(frozen=True)
class DtypeFacts:
    """Unit roundoff, smallest normal and largest finite value of a dtype.

    ``min_normal`` is the flush unit: a kernel that flushes subnormals to zero (FTZ on its
    results, DAZ on its operands) changes a value by less than it."""

    u: float
    min_normal: float
    max: float


def dtype_facts(dtype: str) -> DtypeFacts:
    info = ml_dtypes.finfo(np_dtype(dtype))
    return DtypeFacts(u=float(info.eps) / 2, min_normal=float(info.smallest_normal), max=float(info.max))


def gamma_k(k: int, u: float) -> float:
    """Higham's gamma_k(u) = k u / (1 - k u): the error factor of k roundings."""
    return k * u / (1 - k * u) if k * u < 0.5 else float("inf")


def conv2d_nchw(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any], attrs: Conv2dAttrs) -> np.ndarray[Any, Any]:
    """Grouped, strided, dilated, padded 2-D convolution of NCHW data with OIHW weights.

    A sum past the wide type's range becomes inf without a warning: callers treat a
    non-finite budget as "not robustly finite"."""
    n, c_in, h, wd = x.shape
    c_out, c_per_group, kh, kw = w.shape
    g = attrs.groups
    pt, pl, pb, pr = attrs.padding
    sh, sw = attrs.strides
    dh, dw = attrs.dilation
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    ho = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, g, c_out // g, ho, wo), dtype=np.result_type(x, w))
    wg = w.reshape(g, c_out // g, c_per_group, kh, kw)
    for i in range(kh):
        for j in range(kw):
            patch = xp[
                :,
                :,
                i * dh : i * dh + sh * (ho - 1) + 1 : sh,
                j * dw : j * dw + sw * (wo - 1) + 1 : sw,
            ]
            patch = patch.reshape(n, g, c_in // g, ho, wo)
            with np.errstate(over="ignore", invalid="ignore"):
                out += np.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, i, j])
    return out.reshape(n, c_out, ho, wo)


def epsilon_dtype(dtype: str) -> str:
    """The dtype TVM rounds batch_norm's epsilon to.

    The attribute is a double; the lowering adds it to the variance as a scalar,
    and TVM types a Python float scalar as float32 unless the tensor is wider. So
    float16 and bfloat16 cases see epsilon in float32 (and compute in float32 from
    there on: their batch_norm returns float32), float64 cases see it in float64.
    """
    return "float32" if dtype in ("float16", "bfloat16") else dtype
