"""Every Python process started with this folder on ``PYTHONPATH`` flushes subnormal numbers
to zero from its first line on, as ``torch.set_flush_denormal(True)`` leaves a process (the
MXCSR's flush-to-zero and denormals-are-zero bits, inherited by the threads it starts).

What it is for: running the suite, or CI, in a process state a user's program may have set,
to show that no verdict depends on it (docs/measurements.md, "Verdicts on every CPU")::

    PYTHONPATH=$PWD/tools/flush-denormal make check
    PYTHONPATH=$PWD/tools/flush-denormal CI=true bash .ci/run

Processes that run before torch is installed (the setup's pip) start unchanged.
"""

try:
    import torch
except ImportError:
    pass
else:
    torch.set_flush_denormal(True)
