"""How a campaign steers Hypothesis from outside the test body: how long one shrink may
take (:func:`default_shrink_seconds`, enforced by :func:`shrinking_capped`), Ctrl-C that
lets the case in hand finish (:class:`CtrlC`), and where failures are remembered
(:func:`example_database`: a folder or a Redis server)."""

from __future__ import annotations

import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase
from hypothesis.internal.conjecture import engine

__all__ = [
    "SHRINK_DEADLINE",
    "CtrlC",
    "default_shrink_seconds",
    "example_database",
    "shrinking_capped",
]


def default_shrink_seconds(budget_seconds: float | None) -> float:
    """The longest Hypothesis shrinks one finding: a sixtieth of the budget, between 2 and
    60 seconds (60 without a time budget), so that a short campaign spends most of its
    time searching. What a capped shrink leaves, the campaign's own simplifier (the
    attributes, the structure, at most twice as long) takes further."""
    if budget_seconds is None:
        return 60.0
    return min(60.0, max(2.0, budget_seconds / 60))


class CtrlC:
    """Ctrl-C during a campaign: the first one lets the case in hand finish, then stops the
    campaign; a second one stops it at once.

    Python's default handler raises ``KeyboardInterrupt`` wherever the interpreter is. Inside
    a Python pass that TVM's C++ calls back (upstream's fold is one), TVM's FFI turns that
    into a ``RuntimeError`` with an empty message, which the fuzzer would record as a crash
    of the pass, and the campaign would go on to its budget.
    """

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("bnfuzz: stopping after the case in hand (Ctrl-C again: at once)", file=sys.stderr)

    def raise_if_requested(self) -> None:
        if self.requested:
            raise KeyboardInterrupt

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Handle SIGINT for the block (signal handlers belong to the main thread only;
        elsewhere this does nothing)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGINT, self)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


#: The one Hypothesis internal the fuzzer touches: the shrinker's deadline (five minutes),
#: a module constant of Hypothesis's engine. Hypothesis has no public setting for it; the
#: campaign needs a shorter one (:func:`default_shrink_seconds`). ``tests/test_campaign.py``
#: checks that the installed Hypothesis still has it; without it, shrinking is not capped.
SHRINK_DEADLINE = "MAX_SHRINKING_SECONDS"


@contextmanager
def shrinking_capped(seconds: float) -> Iterator[None]:
    """Hypothesis's shrinker stops after ``seconds`` instead of its five minutes.

    A test body that merely returns once the cap has passed leaves the shrinker drawing
    and discarding cases for seconds more; one that raises a ``BaseException`` to stop it
    makes Hypothesis save that (passing) case to the example database as a failure. The
    shrinker's own deadline (:data:`SHRINK_DEADLINE`) ends it cleanly: the last failing
    case is replayed and saved as usual."""
    if not hasattr(engine, SHRINK_DEADLINE):
        warnings.warn(
            f"this Hypothesis has no engine.{SHRINK_DEADLINE}: shrinking is not capped", RuntimeWarning, 2
        )
        yield
        return
    previous = getattr(engine, SHRINK_DEADLINE)
    setattr(engine, SHRINK_DEADLINE, seconds)
    try:
        yield
    finally:
        setattr(engine, SHRINK_DEADLINE, previous)


def example_database(where: str) -> ExampleDatabase:
    """The example database at ``where``: a folder, or ``redis://HOST:PORT[/DB]`` for a Redis
    server that campaigns on many machines share (needs the ``redis`` package)."""
    if where.startswith(("redis://", "rediss://", "unix://")):
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase

        return RedisExampleDatabase(redis.Redis.from_url(where), key_prefix=b"bnfold-fuzz:")
    return DirectoryBasedExampleDatabase(where)
