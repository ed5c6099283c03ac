"""The values of a case: a dense tensor of exact Python floats (:class:`Tensor`), the
dtypes a case may use, and the error a malformed case (or part of one) raises."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from fuzz.errors import BnfuzzError
from fuzz.fpenv import keeps_subnormals

__all__ = ["DTYPES", "OPERANDS", "CaseError", "Tensor", "np_dtype"]

#: Element dtypes a case may use, default first (strategies shrink to it).
DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16", "float64")
#: Operands of a block that may be passed as function parameters instead of constants, in
#: the order a module uses them: the conv's weight and bias, then batch_norm's four.
OPERANDS: tuple[str, ...] = ("weight", "bias", "gamma", "beta", "mean", "var")


class CaseError(BnfuzzError, ValueError):
    """A case (or its JSON form) is malformed. ``field`` names the offending field."""

    field: str

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)


def np_dtype(dtype: str) -> np.dtype[Any]:
    """The NumPy dtype for a case dtype name (bfloat16 via ml_dtypes)."""
    if dtype == "bfloat16":
        return np.dtype(ml_dtypes.bfloat16)
    if dtype in ("float16", "float32", "float64"):
        return np.dtype(dtype)
    raise CaseError("dtype", f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")


@dataclass(frozen=True)
class Tensor:
    """A dense tensor: dtype, shape and row-major values (exact Python floats)."""

    dtype: str
    shape: tuple[int, ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        np_dtype(self.dtype)
        if any(d < 1 for d in self.shape):
            raise CaseError("shape", f"dimensions must be positive, got {self.shape}")
        if len(self.values) != math.prod(self.shape):
            raise CaseError(
                "values",
                f"{len(self.values)} values do not fill shape {list(self.shape)} "
                f"({math.prod(self.shape)} elements)",
            )

    @classmethod
    @keeps_subnormals
    def from_numpy(cls, array: np.ndarray[Any, Any], dtype: str) -> Tensor:
        with np.errstate(over="ignore"):  # values beyond the dtype's range become inf here
            exact = np.asarray(array).astype(np_dtype(dtype))
        return cls(dtype, tuple(exact.shape), tuple(float(v) for v in exact.astype(np.float64).ravel()))

    @keeps_subnormals
    def numpy(self) -> np.ndarray[Any, Any]:
        """The values as an array of this tensor's own dtype (exact)."""
        return np.array(self.values, dtype=np.float64).reshape(self.shape).astype(np_dtype(self.dtype))

    def float64(self) -> np.ndarray[Any, Any]:
        return np.array(self.values, dtype=np.float64).reshape(self.shape)
