"""The pass registry: builtin names, MODULE:ATTR in its three forms, and helpful errors.

No compilation here: passes are only applied to modules, never built.
"""

from __future__ import annotations

import sys
import types

import pytest
from cases import make_case
from tvm import relax

from fuzz.backends.tvm.build import build_module
from fuzz.backends.tvm.compat import structural_equal
from fuzz.backends.tvm.execute import count_batch_norms
from fuzz.backends.tvm.passes import BUILTIN_PASSES, UnknownPass, available_passes, identity, resolve_pass


@pytest.mark.parametrize("name", sorted(BUILTIN_PASSES))
def test_builtins_resolve_to_fresh_passes(name: str) -> None:
    make = resolve_pass(name)
    first, second = make(), make()
    assert isinstance(first, relax.transform.FunctionPass)
    assert first is not second


def test_available_passes_lists_the_builtins() -> None:
    assert available_passes() == sorted(BUILTIN_PASSES)
    assert {"upstream", "identity", "fixed"} <= set(available_passes())


def test_identity_leaves_the_module_unchanged() -> None:
    mod = build_module(make_case())
    assert structural_equal(identity()(mod), mod)


def test_upstream_is_tvm_fold_batchnorm() -> None:
    made = resolve_pass("upstream")()
    assert isinstance(made, relax.transform.FoldBatchnormToConv2D)
    assert count_batch_norms(made(build_module(make_case()))) == 0


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A throwaway module holding a pass in every supported and unsupported form."""
    module = types.ModuleType("fake_passes")

    @relax.transform.function_pass(opt_level=0, name="AsClass")
    class AsClass:
        def transform_function(self, func: object, mod: object, ctx: object) -> object:
            return func

    module.AsClass = AsClass  # type: ignore[attr-defined]
    module.factory = identity  # type: ignore[attr-defined]
    module.instance = identity()  # type: ignore[attr-defined]
    module.number = 3  # type: ignore[attr-defined]
    module.not_a_pass = lambda: "hello"  # type: ignore[attr-defined]
    module.needs_args = lambda level: identity()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_passes", module)
    return module


@pytest.mark.parametrize("attr", ["AsClass", "factory"])
def test_class_or_factory_gives_fresh_passes(plugin: types.ModuleType, attr: str) -> None:
    make = resolve_pass(f"fake_passes:{attr}")
    first, second = make(), make()
    assert first is not second
    mod = build_module(make_case())
    assert structural_equal(first(mod), mod)


def test_module_attr_instance_is_returned_as_is(plugin: types.ModuleType) -> None:
    make = resolve_pass("fake_passes:instance")
    assert make() is plugin.instance and make() is plugin.instance


def test_unknown_name_lists_builtins_and_close_matches() -> None:
    with pytest.raises(UnknownPass) as info:
        resolve_pass("upstrem")
    message = str(info.value)
    assert "'upstrem'" in message
    assert "Did you mean 'upstream'?" in message
    assert "Available: fixed, identity, upstream" in message
    assert isinstance(info.value, ValueError)


def test_unknown_module() -> None:
    with pytest.raises(UnknownPass, match=r"cannot import module 'no_such_module_here'"):
        resolve_pass("no_such_module_here:Pass")


def test_unknown_attribute_suggests_close_names() -> None:
    with pytest.raises(UnknownPass, match=r"Did you mean 'FoldBatchnormToConv2D'\?"):
        resolve_pass("tvm.relax.transform:FoldBatchnormToConv2d")


@pytest.mark.parametrize(
    ("attr", "pattern"),
    [
        ("number", r"int object is neither a pass nor callable"),
        ("not_a_pass", r"returned str, not a tvm.ir.transform.Pass"),
        ("needs_args", r"calling it with no arguments raised TypeError"),
    ],
)
def test_attributes_that_are_not_passes_are_rejected_at_resolution(
    plugin: types.ModuleType, attr: str, pattern: str
) -> None:
    with pytest.raises(UnknownPass, match=pattern):
        resolve_pass(f"fake_passes:{attr}")
