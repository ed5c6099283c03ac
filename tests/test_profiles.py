"""The Hypothesis profiles of ``tests/conftest.py``: ``ci`` is deterministic in every
process, pytest-xdist's workers included (each worker loads the profile named by its
environment, which it inherits)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import settings

TESTS = Path(__file__).resolve().parent


def test_the_ci_profile_is_deterministic() -> None:
    ci = settings.get_profile("ci")
    assert ci.derandomize and ci.deadline is None and ci.database is None


def test_ci_true_loads_the_ci_profile_in_a_fresh_process() -> None:
    # what an xdist worker does: import conftest with CI=true in its environment
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_PROFILE"} | {"CI": "true"}
    probe = "import conftest; from hypothesis import settings; print(settings.default.derandomize)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=TESTS, env=env, check=True
    )
    assert done.stdout.strip() == "True"


def test_this_session_runs_the_profile_its_environment_names() -> None:
    wanted = os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev")
    assert settings.default == settings.get_profile(wanted)
