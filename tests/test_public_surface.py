"""``__all__`` is the public surface of every module of ``fuzz`` and ``strategies``
(found by walking the packages, so a new module is checked too): everything a module
defines without a leading underscore is listed, and everything listed exists."""

from __future__ import annotations

import importlib
import pkgutil
from typing import TypeVar

import pytest

import fuzz
import strategies

MODULES = sorted(
    info.name
    for package in (fuzz, strategies)
    for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + ".")
    if not info.name.endswith(".__main__")  # an entry point: importing it runs the program
)


def test_every_module_is_found() -> None:
    # the walk itself, checked against modules known to exist in each package
    assert {"fuzz.cli", "fuzz.oracle.verdict", "fuzz.errors", "strategies.graphs"} <= set(MODULES)


@pytest.mark.parametrize("name", ["fuzz", "strategies", *MODULES])
def test_all_is_the_public_surface(name: str) -> None:
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    defined = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and getattr(value, "__module__", None) == module.__name__
        and not isinstance(value, TypeVar)
    }
    assert defined <= set(module.__all__)
    assert all(hasattr(module, attr) for attr in module.__all__)
