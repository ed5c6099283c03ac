"""bnfold-fuzz: fuzz batch-norm-folding passes with Hypothesis.

The layers, one folder each, in the order data flows (docs/design.md, "Layout" and
"Stages", which tests/test_architecture.py enforces):

``model`` (a case as plain data, in each IR's words) -> ``oracle`` (exact semantics, the
error bound, the typed verdict, signatures) -> ``backends`` (one registry row per
framework: TVM Relax's passes, ONNX Runtime, the ONNX model tools, OpenVINO, PyTorch's
folds; each :class:`~fuzz.backends.Fold` materialises the case, runs it unfolded and
folded, and returns failures as values) -> ``store`` (finding files, corpus entries) ->
``engine`` (check, campaign, minimiser, run, replay, promote) -> ``render`` (scripts
and issues: one skeleton, each backend's part named by its row; filing) ->
``evaluation`` (bench, time to find, the model zoo) -> ``cli`` (``bnfuzz``). Case
generation lives in the sibling package ``strategies``.
"""

__all__: list[str] = []
