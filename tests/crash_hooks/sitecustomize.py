"""A native crash on a chosen case, for the crash-isolation tests of ONNX Runtime's and
OpenVINO's backends: with this folder on ``PYTHONPATH`` and ``BNFUZZ_TEST_CRASH`` set to
``onnxruntime`` or ``openvino``, that framework's run dereferences a null pointer (a real
SIGSEGV, not an exception) whenever one of the arrays it is fed holds a value of magnitude
2**60 or more. Every Python process started so (a campaign's worker, a reproducer script)
crashes on such a case, as a framework with that defect would.
"""

import ctypes
import os

_LIMIT = 2.0**60


def _crash_on_huge(feeds):
    import numpy as np

    arrays = feeds.values() if isinstance(feeds, dict) else [feeds]
    for array in arrays:
        with np.errstate(all="ignore"):
            if (np.abs(np.asarray(array, dtype=np.float64)) >= _LIMIT).any():
                ctypes.string_at(0)  # SIGSEGV


_which = os.environ.get("BNFUZZ_TEST_CRASH", "")
if _which == "onnxruntime":
    try:
        from onnxruntime import InferenceSession
    except ImportError:
        pass
    else:
        _run = InferenceSession.run

        def run(self, output_names, input_feed, run_options=None):
            _crash_on_huge(input_feed)
            return _run(self, output_names, input_feed, run_options)

        InferenceSession.run = run
elif _which == "openvino":
    try:
        from openvino import CompiledModel
    except ImportError:
        pass
    else:
        _call = CompiledModel.__call__

        def call(self, inputs=None, *args, **kwargs):
            _crash_on_huge(inputs if inputs is not None else {})
            return _call(self, inputs, *args, **kwargs)

        CompiledModel.__call__ = call
