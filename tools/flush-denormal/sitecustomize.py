"""Every Python process started with this folder on ``PYTHONPATH`` flushes subnormal numbers
to zero from its first line on, as ``torch.set_flush_denormal(True)`` leaves a process (the
MXCSR's flush-to-zero and denormals-are-zero bits, inherited by the threads it starts).

What it is for: running commands, reproducer scripts or the suite in a process state a
user's program may have set (docs/measurements.md, "Verdicts on every CPU")::

    PYTHONPATH=$PWD/tools/flush-denormal .venv/bin/bnfuzz replay corpus
    PYTHONPATH=$PWD/tools/flush-denormal make check

In such a process Hypothesis itself cannot generate a float that may be subnormal (it
says so: "we can't represent subnormal floats right now"), so the tests that generate
cases fail there, inside Hypothesis; ``BNFUZZ_FLUSH_DENORMALS=1 make check`` runs every
check's fold flushed instead, with generation untouched. Processes that run before torch
is installed (the setup's pip) start unchanged.
"""

try:
    import torch
except ImportError:
    pass
else:
    torch.set_flush_denormal(True)
