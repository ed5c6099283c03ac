"""What a case is, with no framework: the spec of a conv + batch_norm graph
(:mod:`~fuzz.model.case`) and its JSON (:mod:`~fuzz.model.case_json`), its classifying
attributes (:mod:`~fuzz.model.attributes`), why a fold may keep a batch_norm
(:mod:`~fuzz.model.decline_reasons`), pipelines as data (:mod:`~fuzz.model.pipeline`), and the case
said in each IR the backends build from: Relax bindings (:mod:`~fuzz.model.program`), an
ONNX graph (:mod:`~fuzz.model.onnx_graph`), a PyTorch module's source
(:mod:`~fuzz.model.torch_model`), another rank or a ConvTranspose
(:mod:`~fuzz.model.spelling`)."""

__all__: list[str] = []
