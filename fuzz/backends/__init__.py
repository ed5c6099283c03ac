"""Backends: the frameworks whose batch-norm folds are fuzzed, behind one interface.

A :class:`Fold` is one fold under test, resolved from the name given on the command line
(:func:`resolve_fold`): TVM Relax's passes (``upstream``, ``fixed``, ``identity``,
``mutant:NAME``, ``MODULE:ATTR``; :mod:`fuzz.backends.tvm.fold`) or ONNX Runtime's graph
optimizer at a level (``onnxruntime:basic``, ``:extended``, ``:all``;
:mod:`fuzz.backends.onnxruntime`), an ONNX model tool (``onnxoptimizer``, ``onnxslim``,
``onnxsim``; :mod:`fuzz.backends.onnx_tools`), or OpenVINO's CPU plugin (``openvino``;
:mod:`fuzz.backends.openvino`), or one of PyTorch's folds (``torch:fuse_conv_bn_eval``,
``torch:fuse_modules``, ``torch:fx``, ``torch:inductor``; :mod:`fuzz.backends.pytorch`). TVM's names include
its ONNX path, ``tvm:onnx``. A fold materialises a case in its framework, runs it
unfolded and folded, and returns what happened as the framework-free values of
:mod:`fuzz.oracle.results` (:class:`~fuzz.oracle.results.Execution`); the reference, the oracle, the
campaign, the minimiser and the reports take it from there and import no framework.

Key idea: the registry imports a backend only when a name of it is resolved, so a
framework that is not installed costs nothing until it is named, and then the error
says which extra installs it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from fuzz.errors import BnfuzzError

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from fuzz.model.case import Case
    from fuzz.model.pipeline import Pipeline
    from fuzz.oracle.results import Execution, Outputs

__all__ = [
    "BACKENDS",
    "MODEL_TOOLS",
    "OPENVINO_CONFIG",
    "Backend",
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
        """Run ``case`` unfolded and folded (``fuzz.backends.tvm.execute.execute`` says what each
        option means); framework errors become :class:`~fuzz.oracle.results.Failure` values."""
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
    #: the code at fault where a finding needs a classifying attribute (``attribute=value``,
    #: :mod:`fuzz.model.attributes`), in place of ``at_fault``
    at_fault_for: Mapping[str, str] = field(default_factory=dict)
    #: behaviour the tool documents, by the ``attribute=value`` that shows it: its own words.
    #: Its backend draws no such case (see :meth:`fuzz.backends.onnx_tools.ToolFold.cases`).
    documented: Mapping[str, str] = field(default_factory=dict)

    def fault(self, attributes: Mapping[str, str]) -> str:
        """The code at fault for a finding with these classifying attributes."""
        return next((t for key, t in self.at_fault_for.items() if _holds(key, attributes)), self.at_fault)


def _holds(key: str, attributes: Mapping[str, str]) -> bool:
    name, _, value = key.partition("=")
    return attributes.get(name) == value


#: Model tool name (``--pass NAME``) -> how it is called.
MODEL_TOOLS: dict[str, ModelTool] = {
    "onnxoptimizer": ModelTool(
        "onnxoptimizer",
        "onnxoptimizer.optimize(model)",
        "onnx/optimizer",
        "the `fuse_bn_into_conv` pass (`onnxoptimizer/passes/fuse_bn_into_conv.h`), one of the "
        "default passes of `optimize`",
        {
            "spatial=per-position": "`modify_conv` in the `fuse_bn_into_conv` pass "
            "(`onnxoptimizer/passes/fuse_bn_into_conv.h`): it asserts `bn_scale.sizes().size() == 1` "
            "instead of leaving alone a BatchNormalization whose `spatial` attribute is 0 (statistics "
            "per position, shape (C, H, W))",
        },
    ),
    "onnxslim": ModelTool(
        "onnxslim",
        "onnxslim.slim(model)",
        "inisis/OnnxSlim",
        "the Conv+BatchNormalization fusion pattern (`onnxslim/core/pattern/fusion/convbn.py`)",
        {
            "spatial=per-position": "the Conv+BatchNormalization fusion pattern "
            "(`onnxslim/core/pattern/fusion/convbn.py`, `ConvBatchNormMatcher.rewrite`): it reshapes the "
            "statistics as per-channel vectors without checking BatchNormalization's `spatial` attribute "
            "(0 here: statistics per position, shape (C, H, W))",
            "ir_version=3": "the vendored onnx-graphsurgeon exporter "
            "(`onnxslim/third_party/onnx_graphsurgeon/exporters/onnx_exporter.py`): it keeps the model's "
            "IR version 3 while writing initializers that are not graph inputs, which IR versions below 4 "
            "do not allow",
            "initializers=inputs": "the vendored onnx-graphsurgeon importer "
            '(`onnxslim/third_party/onnx_graphsurgeon/importers/onnx_importer.py`, "Initializers are not '
            'considered to be inputs"): it drops every graph input that has an initializer, so the '
            "written model loses inputs a caller may feed, the fusion bakes their default values in, and "
            "`slim` changes the model it was given (`freeze`, `onnxslim/core/__init__.py`)",
            "initializers=overridden": "the vendored onnx-graphsurgeon importer "
            '(`onnxslim/third_party/onnx_graphsurgeon/importers/onnx_importer.py`, "Initializers are not '
            'considered to be inputs"): it drops every graph input that has an initializer, so the '
            "fusion bakes in the stored default of an input the caller feeds, the written model loses "
            "that input, and `slim` changes the model it was given (`freeze`, `onnxslim/core/__init__.py`)",
        },
    ),
    "onnxsim": ModelTool(
        "onnxsim",
        "onnxsim.simplify(model)[0]",
        "daquexian/onnx-simplifier",
        "onnxoptimizer's `fuse_bn_into_conv` pass, which `simplify` runs by default (`skip_fuse_bn=False`)",
        {
            "spatial=per-position": "onnxsim's own copy of `fuse_bn_into_conv` "
            "(`onnxsim/passes/fuse_bn_into_conv.h`, `modify_conv`): it asserts per-channel statistics "
            "instead of leaving alone a BatchNormalization whose `spatial` attribute is 0",
        },
        documented={
            "initializers": "By ONNX specification, initializers can also serve as inputs. This allows "
            "users to overwrite their values during runtime, but some useful optimizations like "
            "fuse-conv-and-bn will not be applicable anymore. [...] So onnxsim treats all initializers "
            "immutable to enabling all optimizations. If it is not wanted, you can specify "
            "'--mutable-initializer' to disable this behavior. (onnxsim's `--mutable-initializer` help; "
            "`simplify(mutable_initializer=False)`)",
        },
    ),
}

#: OpenVINO's compile settings beyond its defaults (fuzz.backends.openvino says why); the
#: reproducer scripts compile with the same.
OPENVINO_CONFIG: dict[str, Any] = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1}


@dataclass(frozen=True)
class Backend:
    """A row of the registry: where a backend's code is, what installs its framework, and
    whether its campaigns check in a worker process by default."""

    #: the module that resolves its fold names
    module: str
    #: the extra of this project that installs its framework
    extra: str
    #: why its campaigns check in a worker by default (``bnfuzz run --isolate``: a native
    #: crash becomes a finding instead of the end of the campaign), or "" for in process
    isolated_because: str = ""


#: What makes a backend's campaigns check in a worker by default: C++ that can crash.
_NATIVE = "its fold or runtime is native code, which can crash the process"

#: Backend name -> its row. Names of TVM, the first backend, carry no prefix; its Python
#: pass runs in process (its pipelines of native passes are isolated: fuzz.engine.run).
BACKENDS: dict[str, Backend] = {
    "tvm": Backend("fuzz.backends.tvm.fold", "test"),
    "onnxruntime": Backend("fuzz.backends.onnxruntime", "onnxruntime", _NATIVE),
    **{name: Backend("fuzz.backends.onnx_tools", "onnx-tools", _NATIVE) for name in MODEL_TOOLS},
    "openvino": Backend(
        "fuzz.backends.openvino", "openvino", _NATIVE + " (a campaign of its died of a segfault)"
    ),
    "torch": Backend(
        "fuzz.backends.pytorch", "torch", _NATIVE + " (oneDNN's eager convolution was seen to segfault)"
    ),
}


class BackendMissing(BnfuzzError):
    """A fold was named whose framework is not installed."""


def backend_of(name: str) -> str:
    """The backend a fold name belongs to: a model tool's name (``onnxslim``), or a prefix
    that names a backend (``onnxruntime:basic``), else TVM (``upstream``, ``mutant:NAME``,
    ``MODULE:ATTR``)."""
    if name in MODEL_TOOLS or name == "openvino":
        return name
    prefix, colon, _ = name.partition(":")
    return prefix if colon and prefix in BACKENDS and prefix != "tvm" else "tvm"


def _module(backend: str) -> Any:
    module_name, extra = BACKENDS[backend].module, BACKENDS[backend].extra
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
    :class:`fuzz.backends.tvm.passes.UnknownPass` (TVM) or the backend's own error for a name it does
    not have, :class:`BackendMissing` when the framework is not installed."""
    fold: Fold = _module(backend_of(name)).resolve(name, complete_fold=complete_fold)
    return fold


def as_fold(make_pass: PassLike) -> Fold:
    """``make_pass`` as a :class:`Fold`: a fold as it is, a factory of TVM passes wrapped."""
    if isinstance(make_pass, Fold):
        return make_pass
    fold: Fold = _module("tvm").fold_of(make_pass)
    return fold
