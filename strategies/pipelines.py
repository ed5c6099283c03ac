"""Pass pipelines around the pass under test (specs only, no TVM).

``pipelines(*, neighbours, max_passes)`` draws a :class:`fuzz.model.pipeline.Pipeline`: 1 to
``max_passes`` passes, each the pass under test (``"fold"``) or a neighbour from
``neighbours`` (default: every name in :data:`fuzz.model.pipeline.NEIGHBOURS`), an opt level
0 to 3, and Sequential or direct calls. It shrinks toward ``("fold",)`` at opt level 3 as
a Sequential (:data:`fuzz.model.pipeline.DEFAULT_PIPELINE`): Hypothesis deletes passes that do
not matter, so a shrunk pipeline names the shortest one that fails.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from fuzz.model.pipeline import FOLD, NEIGHBOURS, Pipeline

__all__ = ["pipelines"]


def pipelines(
    *, neighbours: st.SearchStrategy[str] | None = None, max_passes: int = 4
) -> st.SearchStrategy[Pipeline]:
    """Pipelines of the pass under test and its neighbours; see the module docstring."""
    if max_passes < 1:
        raise InvalidArgument(f"max_passes={max_passes!r} must be at least 1")
    names = neighbours if neighbours is not None else st.sampled_from(sorted(NEIGHBOURS))
    passes = st.lists(st.one_of(st.just(FOLD), names), min_size=1, max_size=max_passes).map(tuple)
    opt_level = st.integers(0, 3).map(lambda k: 3 - k)  # shrinks to 3: every pass enabled
    sequential = st.booleans().map(lambda direct: not direct)  # shrinks to Sequential
    return st.builds(Pipeline, passes, opt_level, sequential)
