"""Public strategies whose draws keep subnormal numbers, whatever the process has set.

In a process that flushes subnormals to zero (``torch.set_flush_denormal(True)``, or code
built with ``-ffast-math``), Hypothesis can neither build nor draw a ``floats()``
strategy that allows subnormals, and NumPy rounds a subnormal float32 value to zero: the
value classes TINY and SUBNORMAL need both. :func:`keeping_subnormals` wraps a public
strategy so that each of its draws runs with the flush bits cleared
(:func:`fuzz.fpenv.pinned`), the caller's restored after.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import strategies as st
from hypothesis.strategies import DrawFn, SearchStrategy

from fuzz.fpenv import pinned

__all__ = ["keeping_subnormals"]

T = TypeVar("T")


@st.composite
def _drawn_keeping_subnormals(draw: DrawFn, strategy: SearchStrategy[T]) -> T:
    with pinned():
        return draw(strategy)


def keeping_subnormals(make: Callable[..., SearchStrategy[T]]) -> Callable[..., SearchStrategy[T]]:
    """``make`` (a function returning a strategy) with every draw of what it returns run
    with subnormals kept; its arguments are still checked when it is called."""

    @functools.wraps(make)
    def public(*args: Any, **kwargs: Any) -> SearchStrategy[T]:
        return _drawn_keeping_subnormals(make(*args, **kwargs))

    return public
