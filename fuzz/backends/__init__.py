"""Backends: the frameworks whose batch-norm folds are fuzzed, behind one interface.

A :class:`Fold` is one fold under test, resolved from the name given on the command line
(:func:`resolve_fold`): TVM Relax's passes (``upstream``, ``fixed``, ``identity``,
``mutant:NAME``, ``MODULE:ATTR``; :mod:`fuzz.backends.tvm.fold`) or ONNX Runtime's graph
optimizer at a level (``onnxruntime:basic``, ``:extended``, ``:all``;
:mod:`fuzz.backends.onnxruntime`), an ONNX model tool (``onnxoptimizer``, ``onnxslim``,
``onnxsim``; :mod:`fuzz.backends.onnx_tools`), or OpenVINO's CPU plugin (``openvino``;
:mod:`fuzz.backends.openvino`), or one of PyTorch's folds (``torch:fuse_conv_bn_eval``,
``torch:fuse_modules``, ``torch:fx``, ``torch:inductor``; :mod:`fuzz.backends.torch`). TVM's names include
its ONNX path, ``tvm:onnx``. A fold materialises a case in its framework, runs it
unfolded and folded, and returns what happened as the framework-free values of
:mod:`fuzz.oracle.execution` (:class:`~fuzz.oracle.execution.Execution`); the reference, the oracle, the
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
    from fuzz.oracle.execution import Execution, Outputs

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "MODEL_TOOLS",
    "OPENVINO_CONFIG",
    "Backend",
    "BackendMissing",
    "Fold",
    "FoldLike",
    "ModelTool",
    "Runner",
    "as_fold",
    "backend_of",
    "pass_help",
    "report_of",
    "resolve_fold",
    "scope_of",
]

#: A backend's way to compile and run programs, shared by the checks of one campaign (TVM:
#: a compile cache's ``run``); opaque above the backends, None for the backend's default.
Runner = Callable[..., Any]


@runtime_checkable
class Fold(Protocol):
    """One fold under test: a case in, what running it unfolded and folded did out."""

    #: the name it was resolved from (``upstream``, ``onnxruntime:basic``)
    name: str
    #: the key of its backend's row (:data:`BACKENDS`): ``tvm``, ``onnxruntime``, ``torch``
    framework: str
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
        option means); framework errors become :class:`~fuzz.oracle.execution.Failure` values."""
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
FoldLike = Fold | Callable[[], Any]


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
    """A row of the registry: everything the fuzzer knows of a backend outside its two
    modules. Reports, scripts, ``file-issues``' trackers, ``--help`` and the docs' tables
    come from the rows; nothing else names a backend."""

    #: its key: the fold names it resolves begin with ``KEY:`` (``onnxruntime:basic``) or are
    #: the key itself (``onnxslim``); TVM's names carry no key (``upstream``)
    key: str
    #: the framework as its users name it, in summaries and issues (``ONNX Runtime``)
    framework: str
    #: the module that resolves its fold names: ``resolve(name, complete_fold=None) -> Fold``
    fold: str
    #: the module that writes what is sent to its project (:mod:`fuzz.render`):
    #: ``issue(entries, checked) -> Issue`` and ``script(entry) -> str``
    report: str
    #: its GitHub repository: where its issues go, and a tracker ``file-issues`` never files
    #: another project's issue into
    project: str
    #: the extra of this project that installs its framework
    extra: str
    #: its fold names, as ``--help`` and the docs list them
    names: str
    #: why its campaigns check in a worker by default (``bnfuzz run --isolate``: a native
    #: crash becomes a finding instead of the end of the campaign), or "" for in process
    isolated_because: str = ""
    #: what its signatures begin with: ``"backend"`` its key (``onnxruntime:``), ``"fold"``
    #: the fold's name where each fold is its own code (``torch:fx:``), ``""`` nothing (TVM's)
    signed_by: str = "backend"
    #: whether its folds run among TVM's passes (``--pipelines``) and its campaigns compile
    #: once through a compile cache
    tvm_passes: bool = False

    @property
    def example(self) -> str:
        """The first fold :attr:`names` names: the one examples and the conformance test use."""
        return self.names.split("'")[1]

    def scope(self, fold_name: str) -> str:
        """What a signature of a bug of ``fold_name`` begins with (before ``:``), or ""."""
        return {"backend": self.key, "fold": fold_name, "": ""}[self.signed_by]


#: What makes a backend's campaigns check in a worker by default: C++ that can crash.
_NATIVE = "its fold or runtime is native code, which can crash the process"

#: The backend of every fold name no other row claims (TVM's names carry no key).
DEFAULT_BACKEND = "tvm"

#: Backend key -> its row. TVM's Python pass runs in process (its pipelines of native
#: passes are isolated: fuzz.engine.run).
BACKENDS: dict[str, Backend] = {
    "tvm": Backend(
        "tvm",
        "TVM",
        "fuzz.backends.tvm.fold",
        "fuzz.render.tvm",
        "apache/tvm",
        "test",
        "'upstream' (TVM's FoldBatchnormToConv2D), 'fixed' (ours), 'identity' (changes nothing), "
        "'mutant:NAME', MODULE:ATTR naming a pass class, factory or instance, 'tvm:onnx' (TVM's ONNX "
        "frontend, then upstream; 'tvm:onnx:PASS' ends in another)",
        signed_by="",
        tvm_passes=True,
    ),
    "onnxruntime": Backend(
        "onnxruntime",
        "ONNX Runtime",
        "fuzz.backends.onnxruntime",
        "fuzz.render.onnxruntime",
        "microsoft/onnxruntime",
        "onnxruntime",
        "'onnxruntime:basic', ':extended', ':all' (its graph optimizer at that level)",
        _NATIVE,
    ),
    **{
        name: Backend(
            name,
            name,
            "fuzz.backends.onnx_tools",
            "fuzz.render.onnx_tools",
            tool.project,
            "onnx-tools",
            f"'{name}' (`{tool.call}`)",
            _NATIVE,
        )
        for name, tool in MODEL_TOOLS.items()
    },
    "openvino": Backend(
        "openvino",
        "OpenVINO",
        "fuzz.backends.openvino",
        "fuzz.render.openvino",
        "openvinotoolkit/openvino",
        "openvino",
        "'openvino' (its CPU plugin)",
        _NATIVE + " (a campaign of its died of a segfault)",
    ),
    "torch": Backend(
        "torch",
        "PyTorch",
        "fuzz.backends.torch",
        "fuzz.render.torch",
        "pytorch/pytorch",
        "torch",
        "'torch:fuse_conv_bn_eval', 'torch:fuse_modules', 'torch:fx', 'torch:inductor'",
        _NATIVE + " (oneDNN's eager convolution was seen to segfault)",
        signed_by="fold",
    ),
}


class BackendMissing(BnfuzzError):
    """A fold was named whose framework is not installed."""


def backend_of(name: str) -> Backend:
    """The row of the backend a fold name belongs to: a key that is a whole name
    (``onnxslim``) or a prefix (``onnxruntime:basic``), else the default (TVM:
    ``upstream``, ``mutant:NAME``, ``MODULE:ATTR``)."""
    key = name if name in BACKENDS else name.partition(":")[0] if ":" in name else ""
    return BACKENDS.get(key, BACKENDS[DEFAULT_BACKEND])


def _module(row: Backend, module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        raise BackendMissing(
            f"the {row.key} backend needs {missing!r}, which is not installed: "
            f"pip install -e '.[{row.extra}]' (or `make setup`) installs it"
        ) from None


def resolve_fold(name: str, *, complete_fold: bool | None = None) -> Fold:
    """The fold named ``name`` (see the module docstring). Raises
    :class:`fuzz.backends.tvm.passes.UnknownPass` (TVM) or the backend's own error for a
    name it does not have, :class:`BackendMissing` when the framework is not installed."""
    row = backend_of(name)
    fold: Fold = _module(row, row.fold).resolve(name, complete_fold=complete_fold)
    return fold


def scope_of(name: str) -> str:
    """What a signature of a bug of fold ``name`` begins with (:meth:`Backend.scope`)."""
    return backend_of(name).scope(name)


def report_of(name: str) -> Any:
    """The report module (:attr:`Backend.report`) of the backend of fold ``name``."""
    return importlib.import_module(backend_of(name).report)


def as_fold(fold: FoldLike) -> Fold:
    """``fold`` as a :class:`Fold`: a fold as it is, a factory of TVM passes wrapped."""
    if isinstance(fold, Fold):
        return fold
    row = BACKENDS[DEFAULT_BACKEND]
    wrapped: Fold = _module(row, row.fold).fold_of(fold)
    return wrapped


def pass_help() -> str:
    """Every backend's fold names, for ``--pass``' help."""
    return "; ".join(f"{row.framework}: {row.names}" for row in BACKENDS.values())
