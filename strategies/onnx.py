"""How an ONNX case's model is written (:class:`~fuzz.model.case.OnnxForm`), as a strategy.

:func:`onnx_forms` draws the opset, the IR version, initializers listed as graph inputs,
overridden defaults, BatchNormalization's ``spatial`` and value_info, each shrinking to the
default (opset 15, the ``onnx`` package's IR version, nothing else written), each the
default about half the time (:func:`strategies.attributes.mostly_first`). The opsets and IR
versions come from the caller (the backend knows what its ``onnx`` writes and its runtime
runs), so this module imports no framework. Which operands are overridden is drawn as
candidates; :func:`fit` keeps those the case has (the case decides, as for parameters).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from hypothesis import strategies as st
from hypothesis.strategies import DrawFn, SearchStrategy

from fuzz.model.case import Case, rank_refuses, transpose_refuses
from fuzz.model.form import ONNX_SPATIAL_OPSETS, ONNX_TRAINING_OPSET, OnnxForm
from fuzz.model.tensor import OPERANDS

from .attributes import mostly_first

__all__ = ["fit", "onnx_forms"]

DEFAULT = OnnxForm()


def onnx_forms(
    *,
    max_opset: int,
    min_ir_versions: Mapping[int, int],
    per_position: bool = True,
    overridden: bool = True,
    initializer_inputs: bool = True,
    shapes: bool = True,
) -> SearchStrategy[OnnxForm]:
    """OnnxForms for opsets 7..``max_opset``; ``min_ir_versions``: per opset, the lowest IR
    version a model of it may have (older IR versions cannot say the opset). IR version 3
    (opsets 7, 8) lists every initializer as an input, as its exporters did.
    ``per_position=False`` never draws ``spatial=0``, ``overridden=False`` no overridden
    operand, ``initializer_inputs=False`` no initializer listed as an input (nor IR version 3),
    ``shapes=False`` only 2-D Conv (no 1-D or 3-D convolution, no ConvTranspose): for a
    backend that cannot take them, or documents what it does with them."""
    if max_opset < DEFAULT.opset:
        raise ValueError(f"max_opset must be at least {DEFAULT.opset}, got {max_opset}")
    # opsets by era with BatchNormalization's spatial, one choice (so a case that strays from
    # the defaults in one attribute only may stray here): -7/8 with spatial unwritten, 0 or 1,
    # -9 (no spatial), -14 (training_mode), what came after the default
    old = ONNX_SPATIAL_OPSETS
    eras: list[tuple[tuple[int, ...], bool | None]] = [
        ((DEFAULT.opset,), None),
        *([(old, False)] if per_position else []),
        (old, None),
        (old, True),
        (tuple(range(old[-1] + 1, DEFAULT.opset)), None),
        (tuple(range(DEFAULT.opset + 1, max_opset + 1)) or (DEFAULT.opset,), None),
    ]
    newest_ir = max(min_ir_versions.values())
    # each attribute its default about half the time (the case's deviation sets the odds):
    # a fold fires only near the defaults
    choose_era = mostly_first(eras)
    # None: the package's own IR version; k: the lowest that says the opset, plus k
    choose_ir = mostly_first([None, 0, 1, 2, 4])
    choose_flag = mostly_first([False, True])
    # whether an operand is overridden, then which: a fold that keeps graph inputs alone does
    # not fire on such a case, so it is as rare as one flag, not as one of seven choices
    choose_overridden = mostly_first([False, True] if overridden else [False])
    listed = initializer_inputs
    # (rank, transpose): the same convolution said another way; fit() keeps what the case allows
    choose_shape = mostly_first(
        [(2, False), (1, False), (3, False), (2, True), (1, True), (3, True)] if shapes else [(2, False)]
    )

    @st.composite
    def draw_form(draw: DrawFn) -> OnnxForm:
        opsets, spatial = draw(choose_era)
        opset = draw(st.sampled_from(opsets))
        above = draw(choose_ir)
        ir_version = 0 if above is None else min(min_ir_versions.get(opset, 3) + above, newest_ir)
        if 0 < ir_version < 4 and not listed:
            ir_version = 0
        initializers_listed = listed and (draw(choose_flag) or 0 < ir_version < 4)
        chosen = (draw(st.sampled_from(OPERANDS)),) if draw(choose_overridden) else ()
        if 0 < ir_version < 4:
            chosen = ()  # initializers were constants then
        value_info = draw(choose_flag)
        rank, transpose = draw(choose_shape)
        return OnnxForm(opset, ir_version, initializers_listed, chosen, spatial, value_info, rank, transpose)

    return draw_form()


def fit(form: OnnxForm, case: Case) -> OnnxForm:
    """``form`` as ``case`` can have it: overridden operands the case has and does not take
    as parameters; a rank and a ConvTranspose only where its convolutions allow them
    (:func:`fuzz.model.case.rank_refuses`, :func:`fuzz.model.case.transpose_refuses`); a training-mode
    case written at an opset that says training mode."""
    overridden = tuple(
        n
        for n in form.overridden
        if n not in case.parameters and all(b.operand(n) is not None for b in case.blocks)
    )
    form = replace(form, overridden=overridden)
    if any(rank_refuses(case, i, form.rank) for i in range(len(case.blocks))):
        form = replace(form, rank=2)
    if form.transpose and any(transpose_refuses(b) for b in case.blocks):
        form = replace(form, transpose=False)
    if form.opset < ONNX_TRAINING_OPSET and any(b.bn.training for b in case.blocks):
        form = replace(form, opset=ONNX_TRAINING_OPSET, spatial=None, ir_version=0, initializer_inputs=False)
    return form
