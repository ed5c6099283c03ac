"""``__all__`` is the public surface of each module that declares one: everything a
module defines without a leading underscore is listed, and everything listed exists."""

from __future__ import annotations

import importlib

import pytest

# strategies has its own, stricter check in test_strategies.py
MODULES = [
    "fuzz.build",
    "fuzz.campaign_report",
    "fuzz.compile_cache",
    "fuzz.execute",
    "fuzz.isolate",
    "fuzz.issues",
    "fuzz.minimize",
    "fuzz.passes",
    "fuzz.pipeline",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_the_public_surface(name: str) -> None:
    module = importlib.import_module(name)
    defined = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_") and getattr(value, "__module__", None) == module.__name__
    }
    assert defined <= set(module.__all__)
    assert all(hasattr(module, attr) for attr in module.__all__)
