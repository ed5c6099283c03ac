"""Hypothesis profiles for the fuzz run, chosen by ``HYPOTHESIS_PROFILE``.

- ``ci`` (the default under ``CI=true``): deterministic (derandomized, no example
  database), a bounded number of examples per property, so CI is reproducible and
  stays well under its time limit.
- ``dev`` (the default otherwise): random, remembers failures in ``.hypothesis/``.
- ``nightly``: long runs; ``HYPOTHESIS_MAX_EXAMPLES`` overrides the count.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from replays import Replays

_SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]

settings.register_profile(
    "ci",
    max_examples=40,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=_SLOW,
    print_blob=True,
)
settings.register_profile("dev", max_examples=25, deadline=None, suppress_health_check=_SLOW)
settings.register_profile(
    "nightly",
    max_examples=int(os.environ.get("HYPOTHESIS_MAX_EXAMPLES", "20000")),
    deadline=None,
    suppress_health_check=_SLOW,
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A nightly test is slow too: ``make check`` (``-m "not slow"``) never runs it."""
    for item in items:
        if item.get_closest_marker("nightly") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def corpus() -> Replays:
    """The shipped corpus, each entry replayed on a pass at most once per session. Tests
    that use it carry ``pytest.mark.xdist_group("corpus")``, so under ``pytest -n 2``
    (``--dist loadgroup``) they run in one worker and share it too."""
    from replays import Replays

    return Replays()
