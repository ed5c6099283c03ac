"""What measures the tool: value sets per second (:mod:`~fuzz.evaluation.bench`),
seconds to each known bug (:mod:`~fuzz.evaluation.time_to_find`), whole ONNX networks
folded and judged (:mod:`~fuzz.evaluation.zoo`, :mod:`~fuzz.evaluation.effectiveness`,
:mod:`~fuzz.evaluation.timing`, :mod:`~fuzz.evaluation.layers`; these three for TVM only)."""

__all__: list[str] = []
