"""One-step simplifications of a case: an attribute back to its default, batch or
channels to one, groups to one, an operand's values to all 1.0, the dtype to float32, the
layouts to NCHW/OIHW, the topology to conv-bn; each a described function from a case to a
simpler one (:func:`simplifications`), and all attribute resets at once
(:func:`with_defaults_except`). :mod:`fuzz.engine.minimize` decides which ones keep the bug."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from fuzz.model.case import Block, Case, Epilogue, Topology, conv_output_shape, kernel_to_oihw
from fuzz.model.form import Form, Importer
from fuzz.model.tensor import OPERANDS, CaseError, Tensor

__all__ = ["simplifications", "with_defaults_except"]


def _retype(tensor: Tensor, dtype: str) -> Tensor:
    return Tensor.from_numpy(tensor.float64(), dtype)


def _retyped(block: Block, names: tuple[str, ...], dtype: str) -> dict[str, Any]:
    return {n: _retype(t, dtype) for n in names if (t := block.operand(n)) is not None}


def _ungrouped(case: Case) -> Case:
    """``case`` with every grouped conv as an ungrouped one computing the same thing."""
    blocks = []
    for b in case.blocks:
        if b.conv is None or b.weight is None or b.conv.groups == 1:
            blocks.append(b)
            continue
        groups, w = b.conv.groups, kernel_to_oihw(b.conv, b.weight.float64())
        c_out, per_group = w.shape[0], w.shape[1]
        full = np.zeros((c_out, per_group * groups, *w.shape[2:]))
        for o in range(c_out):
            g = o // (c_out // groups)
            full[o, g * per_group : (g + 1) * per_group] = w[o]
        layout = ["OIHW".index(d) for d in b.conv.kernel_layout]
        weight = Tensor.from_numpy(np.transpose(full, layout), b.weight.dtype)
        blocks.append(replace(b, conv=replace(b.conv, groups=1), weight=weight))
    return replace(case, blocks=tuple(blocks))


def _first(tensor: Tensor, axis: int) -> Tensor:
    return Tensor.from_numpy(np.take(tensor.float64(), [0], axis=axis), tensor.dtype)


def _one_out_channel(case: Case) -> Case:
    """A conv-bn case cut down to its first output channel."""
    b = case.blocks[0]
    assert b.conv is not None and b.weight is not None
    cut: dict[str, Any] = {n: _first(t, 0) for n in OPERANDS[1:] if (t := b.operand(n)) is not None}
    weight = _first(b.weight, b.conv.kernel_layout.index("O"))
    return replace(case, blocks=(replace(b, weight=weight, **cut),))


def _one_in_channel(case: Case) -> Case:
    """A conv-bn case cut down to its first input channel."""
    b = case.blocks[0]
    assert b.conv is not None and b.weight is not None
    weight = _first(b.weight, b.conv.kernel_layout.index("I"))
    data = _first(case.data, b.conv.channel_axis)
    return replace(case, data=data, blocks=(replace(b, weight=weight),))


def _as_conv_bn(case: Case) -> Case:
    """The case's first block alone, as plain ``bn(conv(x))[0]``: no second consumer of
    the conv, no statistics returned or used, no second block."""
    return replace(case, topology=Topology.CONV_BN, blocks=case.blocks[:1])


def _transposed(tensor: Tensor, order: list[int]) -> Tensor:
    return Tensor.from_numpy(np.transpose(tensor.float64(), order), tensor.dtype)


def _as_nchw(case: Case) -> Case:
    """The case with NHWC convs as NCHW ones computing the same thing: input and residual
    transposed, each batch_norm axis moved with the dimension it names."""
    order = ["NHWC".index(d) for d in "NCHW"]
    blocks = []
    for b in case.blocks:
        assert b.conv is not None
        axis = "NCHW".index("NHWC"[b.bn.axis % len(case.data.shape)])
        blocks.append(replace(b, conv=replace(b.conv, data_layout="NCHW"), bn=replace(b.bn, axis=axis)))
    residual = case.residual and _transposed(case.residual, order)
    return replace(case, data=_transposed(case.data, order), blocks=tuple(blocks), residual=residual)


def _as_oihw(case: Case) -> Case:
    """The case with every kernel transposed to OIHW."""
    blocks = []
    for b in case.blocks:
        if b.conv is None or b.weight is None:
            blocks.append(b)
            continue
        order = [b.conv.kernel_layout.index(d) for d in "OIHW"]
        conv = replace(b.conv, kernel_layout="OIHW")
        blocks.append(replace(b, conv=conv, weight=_transposed(b.weight, order)))
    return replace(case, blocks=tuple(blocks))


def _default_epsilon(case: Case) -> float:
    """The default epsilon as the case's form can say it: ONNX stores it as a float32."""
    return float(np.float32(1e-5)) if case.form.importer is Importer.ONNX else 1e-5


def simplifications(case: Case, *, values: bool = True) -> list[tuple[str, Callable[[Case], Case]]]:
    """(description, change) for each way to make ``case`` simpler by one step: flags and
    attributes back to their defaults, batch and channels to one, dtype to float32, and
    (``values``) one operand's values to 1.0."""
    changes: list[tuple[str, Callable[[Case], Case]]] = []

    def each_block(**fields: Any) -> Callable[[Case], Case]:
        def change(c: Case) -> Case:
            blocks = []
            for b in c.blocks:
                bn = replace(b.bn, **{k: v for k, v in fields.items() if hasattr(b.bn, k)})
                conv = b.conv and replace(b.conv, **{k: v for k, v in fields.items() if hasattr(b.conv, k)})
                blocks.append(replace(b, bn=bn, conv=conv))
            return replace(c, blocks=tuple(blocks))

        return change

    first = case.blocks[0]
    if case.topology.has_conv and case.topology is not Topology.CONV_BN:
        changes.append((f"topology={case.topology.value} -> conv-bn (the first block)", _as_conv_bn))
    convs = [b.conv for b in case.blocks if b.conv is not None]
    if convs and all(c.data_layout == "NHWC" for c in convs):
        changes.append(("data_layout=NHWC -> NCHW (transposed)", _as_nchw))
    if any(c.kernel_layout != "OIHW" for c in convs):
        layouts = sorted({c.kernel_layout for c in convs} - {"OIHW"})
        changes.append((f"kernel_layout={','.join(layouts)} -> OIHW (transposed)", _as_oihw))
    flags: tuple[tuple[str, Any], ...] = (
        ("training", False),
        ("scale", True),
        ("center", True),
        ("epsilon", _default_epsilon(case)),
    )
    for name, default in flags:
        if getattr(first.bn, name) != default:
            changes.append(
                (f"{name}={getattr(first.bn, name)!r} -> {default!r}", each_block(**{name: default}))
            )
    if case.form != Form():
        changes.append((f"form={case.form.label} -> default", lambda c: replace(c, form=Form())))
    if case.epilogue is not Epilogue.NONE:
        changes.append(
            (
                f"epilogue={case.epilogue.value} -> none",
                lambda c: replace(c, epilogue=Epilogue.NONE, residual=None),
            )
        )
    if any(b.bias is not None for b in case.blocks):
        changes.append(
            ("conv bias -> none", lambda c: replace(c, blocks=tuple(replace(b, bias=None) for b in c.blocks)))
        )
    conv = first.conv
    if conv is not None:
        windows: tuple[tuple[str, tuple[int, ...]], ...] = (
            ("strides", (1, 1)),
            ("dilation", (1, 1)),
            ("padding", (0, 0, 0, 0)),
        )
        for name, default in windows:
            if getattr(conv, name) != default:
                changes.append(
                    (f"{name}={list(getattr(conv, name))} -> {list(default)}", each_block(**{name: default}))
                )
        plain = case.topology is Topology.CONV_BN and conv.groups == 1
        on_channel = case.channel_axes()[0]
        if case.topology is Topology.CONV_BN and not on_channel:
            changes.append(
                (
                    f"axis={first.bn.axis} -> {conv.channel_axis} (the conv's channel axis)",
                    each_block(axis=conv.channel_axis),
                )
            )
        if plain and on_channel and first.gamma.shape[0] > 1:
            changes.append((f"output channels {first.gamma.shape[0]} -> 1 (the first)", _one_out_channel))
        if plain and case.data.shape[conv.channel_axis] > 1:
            changes.append(
                (f"input channels {case.data.shape[conv.channel_axis]} -> 1 (the first)", _one_in_channel)
            )
        if conv.groups > 1:
            changes.append((f"groups={conv.groups} -> 1 (the same weights, block-diagonal)", _ungrouped))
        if conv.out_dtype and conv.out_dtype != case.dtype:

            def same_dtype(c: Case) -> Case:
                c = each_block(out_dtype="")(c)
                blocks = tuple(replace(b, **_retyped(b, OPERANDS[1:], c.dtype)) for b in c.blocks)
                return replace(c, blocks=blocks)

            changes.append((f"out_dtype={conv.out_dtype} -> none", same_dtype))
    if case.dtype != "float32":

        def to_float32(c: Case) -> Case:
            blocks = []
            for b in c.blocks:
                conv = b.conv and replace(b.conv, out_dtype="")
                blocks.append(replace(b, conv=conv, **_retyped(b, OPERANDS, "float32")))
            return replace(c, data=_retype(c.data, "float32"), blocks=tuple(blocks))

        changes.append((f"dtype={case.dtype} -> float32", to_float32))
    if case.data.shape[0] > 1:

        def one_batch(c: Case) -> Case:
            return replace(c, data=Tensor.from_numpy(c.data.float64()[:1], c.data.dtype))

        changes.append((f"batch {case.data.shape[0]} -> 1 (the first item)", one_batch))
    if case.parameters:
        changes.append(
            (f"parameters={list(case.parameters)} -> all constants", lambda c: replace(c, parameters=()))
        )
    ones = {"x": case.data}
    if case.residual is not None:
        ones["skip"] = case.residual
    for name in OPERANDS:
        tensor = first.operand(name)
        if tensor is not None:
            ones[name] = tensor
    for name, tensor in ones.items() if values else ():
        if any(v != 1.0 for v in tensor.values):

            def set_ones(c: Case, name: str = name) -> Case:
                if name == "x":
                    return replace(c, data=Tensor(c.data.dtype, c.data.shape, (1.0,) * len(c.data.values)))
                if name == "skip":
                    assert c.residual is not None
                    r = c.residual
                    return replace(c, residual=Tensor(r.dtype, r.shape, (1.0,) * len(r.values)))
                blocks = list(c.blocks)
                t = blocks[0].operand(name)
                assert t is not None
                ones: dict[str, Any] = {name: Tensor(t.dtype, t.shape, (1.0,) * len(t.values))}
                blocks[0] = replace(blocks[0], **ones)
                return replace(c, blocks=tuple(blocks))

            changes.append((f"{name} values -> all 1.0", set_ones))
    return [(description, _fitting_residual(change)) for description, change in changes]


#: The classifying attribute (:func:`fuzz.oracle.signature.classify`) each attribute
#: simplification sets back to its default, by the start of its description.
_ATTRIBUTE_BY_PREFIX: tuple[tuple[str, str], ...] = (
    ("topology=", "topology"),
    ("data_layout=", "data_layout"),
    ("kernel_layout=", "kernel_layout"),
    ("training=", "training"),
    ("scale=", "scale"),
    ("center=", "center"),
    ("form=", "form"),
    ("epilogue=", "epilogue"),
    ("conv bias", "bias"),
    ("axis=", "axis"),
    ("groups=", "groups"),
    ("out_dtype=", "out_dtype"),
    ("dtype=", "dtype"),
    ("parameters=", "operands"),
)


def with_defaults_except(case: Case, keep: set[str]) -> Case:
    """``case`` with every classifying attribute not in ``keep`` set back to its default
    at once, values untouched (an attribute whose reset would make the case invalid
    stays as it is)."""
    for description, change in simplifications(case, values=False):
        attribute = next((a for prefix, a in _ATTRIBUTE_BY_PREFIX if description.startswith(prefix)), None)
        if attribute is None or attribute in keep:
            continue
        try:
            case = change(case)
        except ValueError:
            continue
    return case


def _fitting_residual(change: Callable[[Case], Case]) -> Callable[[Case], Case]:
    """``change``, refused if a conv is left with an empty output, then the residual cut
    and retyped to the output it is added to (a change of batch, channels or dtype
    changes that output)."""

    def changed(c: Case) -> Case:
        c = change(c)
        shape = c.data.shape
        for b in c.blocks:
            if b.conv is not None and b.weight is not None:
                shape = conv_output_shape(b.conv, shape, b.weight.shape)
                if min(shape) < 1:  # a window change that leaves the conv no output
                    raise CaseError("conv", f"the conv's output would be empty: {list(shape)}")
        if c.residual is None:
            return c
        values = c.residual.float64()[tuple(slice(0, n) for n in shape)]
        if values.shape != shape:
            raise CaseError("residual", f"{list(c.residual.shape)} cannot be cut to the output {list(shape)}")
        return replace(c, residual=Tensor.from_numpy(values, c.blocks[-1].gamma.dtype))

    return changed
