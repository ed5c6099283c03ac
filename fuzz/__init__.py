"""bnfold-fuzz: fuzz batch-norm-folding passes with Hypothesis.

The stages, in the order data flows (docs/design.md has the table, one row per module,
which tests/test_architecture.py enforces):

``case`` (spec: plain data) -> ``backends`` (a :class:`~fuzz.backends.Fold` per
framework: TVM Relax's passes, ONNX Runtime, the ONNX model tools, OpenVINO, PyTorch's
folds; each materialises the case, runs it unfolded and folded, and returns failures as
values) -> ``reference`` (wide semantics and the error bound) -> ``oracle`` (typed
verdict) -> ``check`` (one case through one fold, in a pinned floating-point
environment) -> ``signature`` (what makes two findings one bug) -> ``campaign``
(Hypothesis rounds, shrinking) -> reports (scripts, issues) -> ``cli`` (``bnfuzz``).
Case generation lives in the sibling package ``strategies``.
"""

__all__: list[str] = []
