"""bnfold-fuzz: fuzz batch-norm-folding passes with Hypothesis.

The stages, one module each, in the order data flows:

``case`` (spec: plain data) -> ``build`` (Relax module) -> ``passes`` (the pass
under test) -> ``execute`` (llvm VM; failures as values) -> ``reference`` (float64
semantics and error bound) -> ``oracle`` (typed verdict) -> ``signature`` (what
makes two findings one bug) -> ``campaign`` (Hypothesis rounds, shrinking) ->
``cli`` (``bnfuzz``). Case generation lives in the sibling package ``strategies``.
"""

__all__: list[str] = []
