"""Spelling: one case's convolution said another way, as ONNX models and PyTorch modules
can (framework-free). At rank 1 the height axis (of length 1) is left out; at rank 3 a
depth axis of length 1 is put in; a ConvTranspose of stride and dilation 1 computes the
conv with the kernel flipped and its two channel axes swapped within each group."""

from __future__ import annotations

from fuzz.model.tensor import Tensor

__all__ = ["at_rank", "transposed_weight"]


def at_rank(shape: tuple[int, ...], rank: int) -> tuple[int, ...]:
    """An NCHW (or OIHW) shape at ``rank``: NCW, NCHW or NC1HW."""
    if rank == 1:
        return (shape[0], shape[1], shape[3])
    if rank == 3:
        return (shape[0], shape[1], 1, shape[2], shape[3])
    return shape


def transposed_weight(weight: Tensor, groups: int) -> Tensor:
    """The OIHW ``weight`` of a conv as the weight of the ConvTranspose that computes it:
    ``(C_in, C_out / groups, kh, kw)``, the kernel flipped."""
    w = weight.float64()
    c_out, c_in_g = w.shape[0], w.shape[1]
    c_out_g = c_out // groups
    flipped = w[:, :, ::-1, ::-1].reshape(groups, c_out_g, c_in_g, *w.shape[2:])
    swapped = flipped.transpose(0, 2, 1, 3, 4).reshape(groups * c_in_g, c_out_g, *w.shape[2:])
    return Tensor(weight.dtype, tuple(swapped.shape), tuple(float(v) for v in swapped.ravel()))
