"""The pass registry: resolve a pass *name* to a *factory* of fresh TVM passes.

A :data:`PassFactory` is a zero-argument callable returning a new
``tvm.ir.transform.Pass`` each call, so no state leaks between examples (upstream's
pass object keeps the last module in ``self.mod``).

Names:

- a builtin name from :data:`BUILTIN_PASSES` (``upstream``: TVM's pass; ``fixed``: ours,
  :mod:`fuzz.backends.tvm.fold_batchnorm`; ``identity``: the control), each a ``"module:attr"`` string;
- ``mutant:NAME``: a seeded-defect variant of ``fixed`` (:mod:`fuzz.backends.tvm.mutants`), claiming a
  complete fold as ``fixed`` does;
- any ``"module:attr"``: the module is imported and ``attr`` looked up. It may be a
  pass class (``@function_pass`` on a class), a factory function, or a pass instance
  (then every call returns that same instance).

A resolved name is a :class:`ResolvedPass`: a factory that also says whether the pass
claims to be a *complete* fold (``fixed`` does: every batch_norm it has no stated
reason to keep must go, see :mod:`fuzz.model.decline_reasons`), which the oracle then checks.

Key idea: every resolution failure is one exception type, :class:`UnknownPass`, whose
message says what was given, what exists, and the close matches, so a typo on the
command line is answered with the fix.
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tvm
from tvm import relax

from fuzz.errors import BnfuzzError

__all__ = [
    "BUILTIN_PASSES",
    "COMPLETE_FOLDS",
    "MUTANT_PREFIX",
    "PassFactory",
    "ResolvedPass",
    "UnknownPass",
    "available_passes",
    "claims_complete_fold",
    "identity",
    "resolve_pass",
]

#: A zero-argument callable returning a fresh pass.
PassFactory = Callable[[], Any]

#: Builtin pass names and the ``"module:attr"`` each stands for.
BUILTIN_PASSES: dict[str, str] = {
    "upstream": "tvm.relax.transform:FoldBatchnormToConv2D",
    "identity": "fuzz.backends.tvm.passes:identity",
    "fixed": "fuzz.backends.tvm.fold_batchnorm:FoldBatchnormToConv2D",
}


#: ``mutant:NAME`` names a seeded-defect variant of ``fixed`` (:mod:`fuzz.backends.tvm.mutants`).
MUTANT_PREFIX = "mutant:"

#: Builtin passes that claim to fold every batch_norm they have no stated reason to keep.
COMPLETE_FOLDS = frozenset({"fixed"})


@dataclass(frozen=True)
class ResolvedPass:
    """A pass factory found by name; calling it makes a fresh pass.

    ``complete_fold``: the pass claims to be a complete fold, so the oracle also judges
    the ``missed-fold`` property on it.
    """

    name: str
    make: PassFactory
    complete_fold: bool = False

    def __call__(self) -> Any:
        return self.make()


def claims_complete_fold(make_pass: PassFactory) -> bool:
    """Whether ``make_pass`` is a :class:`ResolvedPass` that claims a complete fold."""
    return isinstance(make_pass, ResolvedPass) and make_pass.complete_fold


class UnknownPass(BnfuzzError, ValueError):
    """A pass name that does not resolve to a pass factory."""


def available_passes() -> list[str]:
    """The builtin pass names, sorted."""
    return sorted(BUILTIN_PASSES)


def _unchanged(func: Any, mod: Any, ctx: Any) -> Any:
    return func


def identity() -> tvm.ir.transform.Pass:
    """A Relax function pass that returns every function unchanged (the control)."""
    return relax.transform.function_pass(_unchanged, opt_level=0, name="Identity")


def _suggest(given: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(given, candidates, n=3, cutoff=0.6)
    return f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def _unknown(name: str, reason: str, candidates: list[str] | None = None) -> UnknownPass:
    builtins = available_passes()
    suggest = _suggest(name, candidates if candidates is not None else builtins)
    return UnknownPass(
        f"unknown pass {name!r}: {reason}.{suggest} "
        f"Available: {', '.join(builtins)}, mutant:NAME (a seeded defect of fixed), or MODULE:ATTR "
        "naming a pass class, factory function or pass instance."
    )


def _as_factory(name: str, obj: Any) -> PassFactory:
    """Turn a pass class, factory function or pass instance into a checked factory."""
    if isinstance(obj, tvm.ir.transform.Pass):
        instance = obj

        def same() -> Any:
            return instance

        return same
    if not callable(obj):
        raise _unknown(name, f"{type(obj).__name__} object is neither a pass nor callable", [])

    def make() -> Any:
        made = obj()
        if not isinstance(made, tvm.ir.transform.Pass):
            raise UnknownPass(f"pass {name!r} returned {type(made).__name__}, not a tvm.ir.transform.Pass")
        return made

    try:  # fail now, at resolution, rather than mid-run
        make()
    except UnknownPass:
        raise
    except Exception as exc:
        raise UnknownPass(
            f"pass {name!r}: calling it with no arguments raised {type(exc).__name__}: {exc}"
        ) from None
    return make


def _import(module_name: str) -> Any:
    """Import a module; like ``python -m``, also from the current directory."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError:
        cwd = os.getcwd()
        if cwd in sys.path:
            raise
        sys.path.append(cwd)
        return importlib.import_module(module_name)


def resolve_pass(name: str, *, complete_fold: bool | None = None) -> ResolvedPass:
    """The factory for ``name`` (a builtin name or ``"module:attr"``).

    ``complete_fold`` overrides whether the pass claims a complete fold (default: the
    builtin names in :data:`COMPLETE_FOLDS` do). Raises :class:`UnknownPass` naming the
    problem and the close matches.
    """
    spec = BUILTIN_PASSES.get(name, name)
    if name.startswith(MUTANT_PREFIX):
        spec = "fuzz.backends.tvm.mutants:" + name[len(MUTANT_PREFIX) :]
        complete_fold = True if complete_fold is None else complete_fold
    if ":" not in spec:
        raise _unknown(name, "not a builtin name and not of the form MODULE:ATTR")
    module_name, _, attr = spec.partition(":")
    try:
        module = _import(module_name)
    except ImportError as exc:
        where = (  # the top-level package of the module name the user gave
            f" Python looked on its path and in the current directory ({os.getcwd()}): run bnfuzz "
            f"from the folder that holds {module_name.split('.')[0]!r}, or add that folder to PYTHONPATH."
            if isinstance(exc, ModuleNotFoundError)
            else ""
        )
        raise UnknownPass(
            f"unknown pass {name!r}: cannot import module {module_name!r} ({exc}).{where}"
        ) from None
    if name.startswith(MUTANT_PREFIX) and not hasattr(module, attr):
        names = [m.name for m in module.MUTANTS]  # module is fuzz.backends.tvm.mutants, imported by name
        raise UnknownPass(
            f"unknown pass {name!r}: no mutant named {attr!r}.{_suggest(attr, names)} "
            f"The {len(names)} mutants: {', '.join(MUTANT_PREFIX + n for n in names)}."
        )
    if not hasattr(module, attr):
        public = [a for a in dir(module) if not a.startswith("_")]
        suggest = _suggest(attr, public)
        raise UnknownPass(
            f"unknown pass {name!r}: module {module_name!r} has no attribute {attr!r}.{suggest}"
        )
    complete = name in COMPLETE_FOLDS if complete_fold is None else complete_fold
    return ResolvedPass(name, _as_factory(name, getattr(module, attr)), complete)
