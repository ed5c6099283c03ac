"""Backends: the frameworks whose batch-norm folds are fuzzed, behind one interface.

A :class:`Fold` is one fold under test, resolved from the name given on the command line
(:func:`resolve_fold`): TVM Relax's passes (``upstream``, ``fixed``, ``identity``,
``mutant:NAME``, ``MODULE:ATTR``; :mod:`fuzz.backends.tvm`) or ONNX Runtime's graph
optimizer at a level (``onnxruntime:basic``, ``:extended``, ``:all``;
:mod:`fuzz.backends.onnxruntime`), or an ONNX model tool (``onnxoptimizer``, ``onnxslim``,
``onnxsim``; :mod:`fuzz.backends.onnx_tools`). A fold materialises a case in its framework, runs it
unfolded and folded, and returns what happened as the framework-free values of
:mod:`fuzz.results` (:class:`~fuzz.results.Execution`); the reference, the oracle, the
campaign, the minimiser and the reports take it from there and import no framework.

Key idea: the registry imports a backend only when a name of it is resolved, so a
framework that is not installed costs nothing until it is named, and then the error
says which extra installs it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from fuzz.errors import BnfuzzError

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from fuzz.case import Case
    from fuzz.pipeline import Pipeline
    from fuzz.results import Execution, Outputs

__all__ = [
    "BACKENDS",
    "MODEL_TOOLS",
    "BackendMissing",
    "Fold",
    "ModelTool",
    "PassLike",
    "Runner",
    "as_fold",
    "backend_of",
    "resolve_fold",
]

#: A backend's way to compile and run programs, shared by the checks of one campaign (TVM:
#: a compile cache's ``run``); opaque above the backends, None for the backend's default.
Runner = Callable[..., Any]


@runtime_checkable
class Fold(Protocol):
    """One fold under test: a case in, what running it unfolded and folded did out."""

    #: the name it was resolved from (``upstream``, ``onnxruntime:basic``)
    name: str
    #: the framework: ``tvm``, ``onnxruntime``
    backend: str
    #: claims to fold every batch_norm it has no stated reason to keep (``missed-fold``)
    complete_fold: bool

    def execute(
        self,
        case: Case,
        runner: Runner | None = None,
        *,
        pipeline: Pipeline | None = None,
        idempotence: bool = True,
        unchanged: bool = True,
        baseline_needed: Callable[[Outputs], bool] | None = None,
    ) -> Execution:
        """Run ``case`` unfolded and folded (``fuzz.execute.execute`` says what each
        option means); framework errors become :class:`~fuzz.results.Failure` values."""
        ...

    def cases(self) -> SearchStrategy[Case]:
        """The cases this backend can express, as a Hypothesis strategy."""
        ...

    def version(self) -> str:
        """The framework's version, for finding files and entries."""
        ...

    def runner(self, directory: Any = None) -> Runner | None:
        """A runner to share across a campaign's checks (compile once), or None."""
        ...

    def sequential_mismatch(self, case: Case, pipeline: Pipeline) -> str | None:
        """Whether ``pipeline`` gives another program as one ``Sequential`` than as direct
        calls: a message saying how, or None."""
        ...

    def gated(self, pipeline: Pipeline) -> tuple[str, ...]:
        """The passes of ``pipeline`` its ``Sequential`` skips by opt-level gating."""
        ...


#: A fold, or a zero-argument factory of fresh TVM passes (a TVM fold without a name).
PassLike = Fold | Callable[[], Any]


@dataclass(frozen=True)
class ModelTool:
    """An ONNX model tool as its users call it, and what its reports name (no framework
    imported: reproducer scripts and issues are written from this)."""

    #: the Python module to import
    module: str
    #: the documented default call on ``model``, as Python source (the backend runs this
    #: text, the reproducer script prints it)
    call: str
    #: its GitHub repository, whose tracker its issues go to
    project: str
    #: the code that folds, as the issue names it
    at_fault: str


#: Model tool name (``--pass NAME``) -> how it is called.
MODEL_TOOLS: dict[str, ModelTool] = {
    "onnxoptimizer": ModelTool(
        "onnxoptimizer",
        "onnxoptimizer.optimize(model)",
        "onnx/optimizer",
        "the `fuse_bn_into_conv` pass (`onnxoptimizer/passes/fuse_bn_into_conv.h`), one of the "
        "default passes of `optimize`",
    ),
    "onnxslim": ModelTool(
        "onnxslim",
        "onnxslim.slim(model)",
        "inisis/OnnxSlim",
        "the Conv+BatchNormalization fusion pattern (`onnxslim/core/pattern/fusion/convbn.py`)",
    ),
    "onnxsim": ModelTool(
        "onnxsim",
        "onnxsim.simplify(model)[0]",
        "daquexian/onnx-simplifier",
        "onnxoptimizer's `fuse_bn_into_conv` pass, which `simplify` runs by default (`skip_fuse_bn=False`)",
    ),
}

#: Backend name -> (its module, the extra of this project that installs its framework).
#: Names of TVM, the first backend, carry no prefix.
BACKENDS: dict[str, tuple[str, str]] = {
    "tvm": ("fuzz.backends.tvm", "test"),
    "onnxruntime": ("fuzz.backends.onnxruntime", "onnxruntime"),
    **{name: ("fuzz.backends.onnx_tools", "onnx-tools") for name in MODEL_TOOLS},
}


class BackendMissing(BnfuzzError):
    """A fold was named whose framework is not installed."""


def backend_of(name: str) -> str:
    """The backend a fold name belongs to: a model tool's name (``onnxslim``), or a prefix
    that names a backend (``onnxruntime:basic``), else TVM (``upstream``, ``mutant:NAME``,
    ``MODULE:ATTR``)."""
    if name in MODEL_TOOLS:
        return name
    prefix, colon, _ = name.partition(":")
    return prefix if colon and prefix in BACKENDS and prefix != "tvm" else "tvm"


def _module(backend: str) -> Any:
    module_name, extra = BACKENDS[backend]
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        raise BackendMissing(
            f"the {backend} backend needs {missing!r}, which is not installed: "
            f"pip install -e '.[{extra}]' (or `make setup`) installs it"
        ) from None


def resolve_fold(name: str, *, complete_fold: bool | None = None) -> Fold:
    """The fold named ``name`` (see the module docstring). Raises
    :class:`fuzz.passes.UnknownPass` (TVM) or the backend's own error for a name it does
    not have, :class:`BackendMissing` when the framework is not installed."""
    fold: Fold = _module(backend_of(name)).resolve(name, complete_fold=complete_fold)
    return fold


def as_fold(make_pass: PassLike) -> Fold:
    """``make_pass`` as a :class:`Fold`: a fold as it is, a factory of TVM passes wrapped."""
    if isinstance(make_pass, Fold):
        return make_pass
    fold: Fold = _module("tvm").fold_of(make_pass)
    return fold
