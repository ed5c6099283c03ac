"""Hand-made cases for tests: :func:`make_case` builds a valid :class:`~fuzz.model.case.Case`.

Every argument is keyword-only and defaults to a small float32 ``conv-bn`` graph in
inference mode (NCHW data, OIHW kernel, batch 1, 2 -> 3 channels, 5x5 image, 3x3
kernel). Override any attribute and the shapes follow: the weight shape follows the
kernel layout and groups, the batch_norm operands have the length of the batch_norm
input along ``axis`` (negative axes included), the conv output size follows strides,
padding and dilation.

Key idea: the default values are small dyadic rationals (multiples of 1/8 below 2),
exact in every dtype including bfloat16, and deterministic, so tests need no RNG and
a case reads the same in every dtype. ``values`` overrides them per operand.

Import it as ``from cases import make_case`` (pytest puts ``tests/`` on ``sys.path``
because ``tests/`` has no ``__init__.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from fuzz.model.case import BatchNormAttrs, Block, Case, Conv2dAttrs, Epilogue, Topology, kernel_shape
from fuzz.model.form import Form
from fuzz.model.tensor import Tensor

__all__ = ["PUBLIC_NAN_REPORT", "conv_output_shape", "default_values", "make_case"]

#: Operand names that ``values`` may override; ``f"{name}{i}"`` targets block ``i`` only.
VALUE_KEYS = ("x", "weight", "bias", "gamma", "beta", "mean", "var", "skip")


def default_values(name: str, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """Deterministic, exactly representable values for operand ``name`` (float64)."""
    n = int(np.prod(shape))
    k = np.arange(n, dtype=np.float64)
    if name == "var":
        values = 0.5 + (k % 3) * 0.25  # positive, so sqrt(var + eps) is well defined
    elif name == "gamma":
        values = 1.0 + ((k % 5) - 2) * 0.125
    elif name in ("x", "skip"):
        values = ((k * 5) % 13 - 6) * 0.125
    else:  # weight, beta, mean
        values = ((k * 3 + len(name)) % 11 - 5) * 0.125
    return values.reshape(shape)


def conv_output_shape(
    conv: Conv2dAttrs, data_shape: tuple[int, ...], c_out: int, kh: int, kw: int
) -> tuple[int, ...]:
    """The shape of ``conv2d`` output in ``conv.data_layout`` (out_layout = data_layout)."""
    dims = dict(zip(conv.data_layout, data_shape, strict=True))
    top, left, bottom, right = conv.padding
    h = (dims["H"] + top + bottom - conv.dilation[0] * (kh - 1) - 1) // conv.strides[0] + 1
    w = (dims["W"] + left + right - conv.dilation[1] * (kw - 1) - 1) // conv.strides[1] + 1
    if h < 1 or w < 1:
        raise ValueError(f"conv output would be empty ({h}x{w}); enlarge the image or shrink the kernel")
    out = {"N": dims["N"], "C": c_out, "H": h, "W": w}
    return tuple(out[d] for d in conv.data_layout)


def make_case(
    *,
    topology: Topology = Topology.CONV_BN,
    dtype: str = "float32",
    batch: int = 1,
    c_in: int = 2,
    c_out: int = 3,
    height: int = 5,
    width: int = 5,
    kh: int = 3,
    kw: int = 3,
    strides: tuple[int, int] = (1, 1),
    padding: tuple[int, int, int, int] = (0, 0, 0, 0),
    dilation: tuple[int, int] = (1, 1),
    groups: int = 1,
    data_layout: str = "NCHW",
    kernel_layout: str = "OIHW",
    out_dtype: str = "",
    axis: int | None = None,
    epsilon: float = 1e-5,
    center: bool = True,
    scale: bool = True,
    momentum: float = 0.1,
    training: bool = False,
    parameters: tuple[str, ...] = (),
    bias: bool = False,
    epilogue: Epilogue = Epilogue.NONE,
    form: Form | None = None,
    values: Mapping[str, Any] | None = None,
) -> Case:
    """A valid case; see the module docstring.

    The conv's weight has the data ``dtype``; the batch_norm operands have the dtype
    of the batch_norm input (``out_dtype`` if set), as TVM's type inference requires.
    ``axis=None`` means the channel axis of the batch_norm input (``data_layout``'s C).
    For the chain topology the second block maps ``c_out -> c_out`` with the same
    attributes. ``bias`` gives every conv a bias; ``epilogue`` follows the last
    batch_norm (``Epilogue.ADD`` adds the residual ``skip``); ``form`` is how the
    module is written (default: ``Form()``). ``values`` maps an operand name (``"x"``,
    ``"weight"``, ``"bias"``, ``"gamma"``, ``"beta"``, ``"mean"``, ``"var"``, ``"skip"``;
    or ``"gamma1"`` for block 1 only) to either
    all the operand's values (any shape with the right size, read row-major) or to
    anything ``np.broadcast_to`` fits to its shape, e.g. a scalar. Values are rounded
    to the dtype; out-of-range values become inf without a warning.
    """
    values = dict(values or {})
    unknown = [k for k in values if k.rstrip("0123456789") not in VALUE_KEYS]
    if unknown:
        raise ValueError(f"values has unknown keys {unknown}; expected names from {VALUE_KEYS}")

    def tensor(name: str, shape: tuple[int, ...], dtype: str, block: int | str = "") -> Tensor:
        given = values.get(f"{name}{block}", values.get(name))
        if given is None:
            array = default_values(name, shape)
        else:
            array = np.asarray(given, np.float64)
            # all the values, flat (row-major) or shaped; else something to broadcast
            fits = array.size == math.prod(shape)
            array = array.reshape(shape) if fits else np.broadcast_to(array, shape)
        with np.errstate(over="ignore"):  # 1e13 in float16 is meant to be inf
            return Tensor.from_numpy(array, dtype)

    conv = Conv2dAttrs(
        strides=strides,
        padding=padding,
        dilation=dilation,
        groups=groups,
        data_layout=data_layout,
        kernel_layout=kernel_layout,
        out_dtype=out_dtype,
    )
    data_dims = {"N": batch, "C": c_in, "H": height, "W": width}
    data = tensor("x", tuple(data_dims[d] for d in data_layout), dtype)
    bn_attrs = BatchNormAttrs(
        axis=conv.channel_axis if axis is None else axis,
        epsilon=epsilon,
        center=center,
        scale=scale,
        momentum=momentum,
        training=training,
    )

    blocks: list[Block] = []
    shape, channels, current = data.shape, c_in, dtype
    for i in range(topology.n_blocks):
        weight = None
        if topology.has_conv:
            weight = tensor("weight", kernel_shape(conv, channels, c_out, kh, kw), current, i)
            shape = conv_output_shape(conv, shape, c_out, kh, kw)
            channels, current = c_out, out_dtype or current
        length = (shape[bn_attrs.axis],)
        blocks.append(
            Block(
                bn=bn_attrs,
                gamma=tensor("gamma", length, current, i),
                beta=tensor("beta", length, current, i),
                mean=tensor("mean", length, current, i),
                var=tensor("var", length, current, i),
                conv=conv if topology.has_conv else None,
                weight=weight,
                bias=tensor("bias", length, current, i) if bias else None,
            )
        )
    residual = tensor("skip", shape, current) if epilogue is Epilogue.ADD else None
    return Case(
        topology=topology,
        data=data,
        blocks=tuple(blocks),
        parameters=parameters,
        epilogue=epilogue,
        residual=residual,
        form=form or Form(),
    )


#: The public NaN report: x = 1e13, W = +-1e13, gamma = 1e13. The unfolded program's
#: intermediates peak near 1e26 (robustly finite in float32); upstream's folded weights
#: W * s = +-1e26 make x * W overflow, and inf - inf gives NaN.
PUBLIC_NAN_REPORT = make_case(
    c_in=1, c_out=1, height=1, width=2, kh=1, kw=2,
    values={"x": 1e13, "weight": [1e13, -1e13], "gamma": 1e13, "beta": 0.0, "mean": 0.0, "var": 1.0},
)  # fmt: skip
