"""A pass under test whose result depends on how often it has run: it folds on odd calls
and changes nothing on even ones. A Sequential and direct calls of it then disagree,
which is what the ``sequential-direct-mismatch`` test needs. Resolve it as
``tests.flaky_pass:make``.
"""

from __future__ import annotations

import itertools

from tvm import relax

_calls = itertools.count()


def make() -> relax.transform.FoldBatchnormToConv2D:
    if next(_calls) % 2 == 0:
        return relax.transform.FoldBatchnormToConv2D()
    return relax.transform.Normalize()
