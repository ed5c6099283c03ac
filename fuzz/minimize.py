"""Minimise: make a shrunk case simpler still, and say which of its parts matter.

Hypothesis shrinks toward small choice sequences, which is not always the simplest
graph to read: a batch of two where one would do, a dilation that is not needed.
:func:`simplify` tries one-step simplifications (an attribute back to its default,
batch to one, an operand's values to all 1.0, the dtype to float32), keeps each one
after which the *same bug* (same signature) is still found, and repeats until none
applies. :func:`minimality` then tries each remaining simplification on its own and
says whether the bug survives it: the note an issue text carries.

Key idea: "the same bug" is the same symptom with no essential attribute the original
lacked (see :mod:`fuzz.signature`), not just the same symptom, so a simplification that
trades one bug for another is never taken, while one that shows an attribute was
incidental is, and the signature loses that attribute.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fuzz.case import (
    OPERANDS,
    Block,
    Case,
    CaseError,
    Epilogue,
    Form,
    Tensor,
    Topology,
    conv_output_shape,
    kernel_to_oihw,
)
from fuzz.check import check
from fuzz.execute import Outputs, Runner
from fuzz.passes import PassFactory
from fuzz.pipeline import Pipeline
from fuzz.signature import Signature

__all__ = ["Attempt", "Bug", "found", "minimality", "simplifications", "simplify", "with_defaults_except"]


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
        ("epsilon", 1e-5),
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


#: The classifying attribute (:func:`fuzz.signature.classify`) each attribute
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


@dataclass(frozen=True)
class Bug:
    """The bug a pass shows on a case: its signature, and whether the outputs show it."""

    signature: Signature
    #: False for a rewrite that is wrong but happens to give the same outputs here (a
    #: must-not-fold on a graph whose every axis has size one): a reproducer needs numbers.
    visible: bool


def found(
    case: Case, make_pass: PassFactory, pipeline: Pipeline | None = None, runner: Runner | None = None
) -> Bug | None:
    """The bug ``make_pass`` (inside ``pipeline``, if given) shows on ``case``, or None
    (``runner``: see :func:`fuzz.execute.execute`)."""
    checked = check(case, make_pass, runner, pipeline)
    finding = checked.verdict.primary
    if finding is None:
        return None
    before, after = checked.execution.baseline, checked.execution.folded
    same = (
        isinstance(before, Outputs)
        and isinstance(after, Outputs)
        and len(before.values) == len(after.values)
        and all(
            b.shape == a.shape and np.array_equal(b, a, equal_nan=True)
            for b, a in zip(before.values, after.values, strict=True)
        )
    )
    visible = not same
    return Bug(Signature.of(finding, case, pipeline), visible)


def _same_bug(found: Signature, target: Signature) -> bool:
    """Same symptom and error type, and no essential attribute the target does not have
    (the pipeline aside: simplifying only removes passes from it)."""
    essentials = {e for e in found.essentials if e[0] != "pipeline"}
    return found.key == target.key and essentials <= set(target.essentials)


@dataclass(frozen=True)
class Attempt:
    """One simplification tried on its own, and what became of the bug."""

    description: str
    #: "remains" (the same bug), "hidden" (the same bug, but the outputs no longer show
    #: it), "disappears" (no bug, or another one), "invalid"
    outcome: str
    detail: str = ""

    def line(self) -> str:
        text = {
            "remains": "the bug remains (this does not matter)",
            "hidden": "the pass still rewrites it, but the outputs no longer differ (kept, to show them)",
            "disappears": "the bug disappears (it matters)",
            "invalid": f"cannot be tried, the graph would be invalid ({self.detail})",
        }[self.outcome]
        return f"- {self.description}: {text}"


Change = Callable[[Case], Case]
#: What is simplified: a case, and the pipeline it runs in (None: the pass alone).
Subject = tuple[Case, Pipeline | None]
Step = Callable[[Subject], Subject]


def _steps(case: Case, pipeline: Pipeline | None) -> list[tuple[str, Step]]:
    """The case's simplifications, then the pipeline's: each pass left out, in turn; the
    opt level back to 3; direct calls back to a Sequential."""

    def on_case(change: Change) -> Step:
        return lambda subject: (change(subject[0]), subject[1])

    def on_pipeline(simpler: Pipeline) -> Step:
        return lambda subject: (subject[0], simpler)

    steps = [(d, on_case(change)) for d, change in simplifications(case)]
    if pipeline is not None:
        passes = pipeline.passes
        if len(passes) > 1:
            for i, name in enumerate(passes):
                without = replace(pipeline, passes=passes[:i] + passes[i + 1 :])
                steps.append(
                    (f"pipeline without {name} (pass {i + 1} of {len(passes)})", on_pipeline(without))
                )
        if pipeline.opt_level != 3:
            steps.append(
                (f"opt_level={pipeline.opt_level} -> 3", on_pipeline(replace(pipeline, opt_level=3)))
            )
        if not pipeline.sequential:
            steps.append(("direct calls -> one Sequential", on_pipeline(replace(pipeline, sequential=True))))
    return steps


def _attempt(
    subject: Subject,
    target: Bug,
    make_pass: PassFactory,
    description: str,
    step: Step,
    runner: Runner | None = None,
) -> tuple[Attempt, Subject, Bug | None]:
    try:
        simpler = step(subject)
        bug = found(simpler[0], make_pass, simpler[1], runner)
    except ValueError as exc:  # CaseError, ModuleError, or an empty conv output
        return Attempt(description, "invalid", str(exc)[:80]), subject, None
    if bug is None or not _same_bug(bug.signature, target.signature):
        return Attempt(description, "disappears"), simpler, bug
    if target.visible and not bug.visible:
        return Attempt(description, "hidden"), simpler, bug
    return Attempt(description, "remains"), simpler, bug


def minimality(case: Case, make_pass: PassFactory, pipeline: Pipeline | None = None) -> list[Attempt]:
    """Each simplification of ``case`` (and ``pipeline``) tried on its own: does the bug survive?"""
    target = found(case, make_pass, pipeline)
    if target is None:
        return []
    subject = (case, pipeline)
    return [_attempt(subject, target, make_pass, d, step)[0] for d, step in _steps(case, pipeline)]


def simplify(
    case: Case,
    make_pass: PassFactory,
    pipeline: Pipeline | None = None,
    *,
    runner: Runner | None = None,
    seconds: float | None = None,
) -> tuple[Case, Pipeline | None, Signature | None]:
    """``case`` and ``pipeline`` with every one-step simplification applied that keeps the
    bug, and the bug's signature then (None if ``make_pass`` shows no bug on ``case``).

    A simplification that drops an essential attribute while the bug stays (a
    ``groups=2`` the underflow never needed) is kept, and the signature narrows with it;
    one after which the outputs no longer show the bug is not. Each simplification
    removes something for good (a non-default attribute, a batch item, a non-1.0
    operand, a pass), so the loop ends. ``runner``: compiles and runs (a compile cache
    makes it fast); ``seconds``: stop after about this long, keeping what is simplified.
    """
    start = time.monotonic()
    target = found(case, make_pass, pipeline, runner)
    subject: Subject = (case, pipeline)
    changed = target is not None
    while changed and target is not None:
        changed = False
        for description, step in _steps(*subject):
            if seconds is not None and time.monotonic() - start > seconds:
                break
            attempt, simpler, bug = _attempt(subject, target, make_pass, description, step, runner)
            if attempt.outcome == "remains" and bug is not None:
                subject, target, changed = simpler, bug, True
                break
    return subject[0], subject[1], None if target is None else target.signature
