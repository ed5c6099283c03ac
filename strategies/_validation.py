"""Argument checks shared by the public strategies.

Every check raises :class:`hypothesis.errors.InvalidArgument` with a message
that names the argument and echoes its value (``min_channels=5 is larger than
max_channels=3``), the way Hypothesis' own strategies do.

Strategy arguments are checked twice: eagerly, as far as the public Hypothesis API
tells without drawing (is it a strategy, can it generate anything), and at draw time
for every value actually drawn (see :func:`checked_draw`): a bad value fails the first
example that draws it, naming the argument.

Both run with subnormals kept (:func:`fuzz.fpenv.pinned`): Hypothesis refuses to build a
``floats()`` strategy that allows subnormals in a process that flushes them (as
``torch.set_flush_denormal(True)`` leaves one), and our value classes need them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis.errors import InvalidArgument
from hypothesis.strategies import DrawFn, SearchStrategy

from fuzz.fpenv import pinned

__all__ = ["check_integer", "check_order", "check_strategy", "checked_draw", "is_bool"]

T = TypeVar("T")


def check_strategy(value: object, name: str) -> None:
    """``value`` must be a strategy that can generate at least one example."""
    if not isinstance(value, SearchStrategy):
        raise InvalidArgument(
            f"{name}={value!r} must be a SearchStrategy; wrap a single value in st.just(...)"
        )
    try:
        with pinned():
            value.validate()
    except InvalidArgument as exc:
        raise InvalidArgument(f"{name}={value!r} is not a valid strategy: {exc}") from exc
    if value.is_empty:
        raise InvalidArgument(f"{name}={value!r} can never generate a value")


def checked_draw(
    draw: DrawFn,
    strategy: SearchStrategy[T],
    name: str,
    accept: Callable[[Any], bool],
    expected: str,
) -> T:
    """Draw from a user strategy and reject a value outside its domain."""
    with pinned():
        value = draw(strategy)
    if not accept(value):
        raise InvalidArgument(f"{name}={strategy!r} generated {value!r}, which is not {expected}")
    return value


def check_integer(value: object, name: str, *, min_value: int) -> int:
    """``value`` must be an int (not a bool) no smaller than ``min_value``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"{name}={value!r} must be an integer")
    if value < min_value:
        raise InvalidArgument(f"{name}={value!r} must be at least {min_value}")
    return value


def check_order(low_name: str, low: int, high_name: str, high: int) -> None:
    if low > high:
        raise InvalidArgument(f"{low_name}={low!r} is larger than {high_name}={high!r}")


def is_bool(value: object) -> bool:
    return isinstance(value, bool)
