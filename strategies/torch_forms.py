"""How a PyTorch case's module is written (:class:`fuzz.model.case.TorchForm`): Conv1d, Conv2d or
Conv3d, a ConvTranspose, the channels-last memory format. Each draws the default form
most of the time and shrinks to it."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from fuzz.model.case import Case, rank_refuses, transpose_refuses
from fuzz.model.form import TorchForm

from .attributes import mostly_first

__all__ = ["fit_torch", "torch_forms"]


def torch_forms(*, transpose: bool = True) -> SearchStrategy[TorchForm]:
    """Every :class:`~fuzz.model.case.TorchForm` (``transpose=False``: no ConvTranspose), the
    default first; :func:`fit_torch` then keeps what the drawn case's convolutions allow."""
    shapes = [(2, False), (1, False), (3, False)]
    if transpose:
        shapes += [(2, True), (1, True), (3, True)]
    choose_shape, choose_format = mostly_first(shapes), mostly_first([False, True])

    @st.composite
    def draw_form(draw: st.DrawFn) -> TorchForm:
        rank, transposed = draw(choose_shape)
        return TorchForm(rank, transposed, draw(choose_format) and rank != 1)

    return draw_form()


def fit_torch(form: TorchForm, case: Case) -> TorchForm:
    """``form`` as ``case`` can have it: a rank and a ConvTranspose only where its
    convolutions allow them (:func:`fuzz.model.case.rank_refuses`, :func:`fuzz.model.case.transpose_refuses`);
    the channels-last format only at rank 2 or 3."""
    if any(rank_refuses(case, i, form.rank) for i in range(len(case.blocks))):
        form = replace(form, rank=2)
    if form.transpose and any(transpose_refuses(b) for b in case.blocks):
        form = replace(form, transpose=False)
    return form
