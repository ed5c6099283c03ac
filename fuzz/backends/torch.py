"""PyTorch: its conv + batch norm folds, run on the CPU as their users call them.

A case is written as an ``nn.Module`` (:func:`fuzz.model.torch_model.torch_model`: the module's
source, run here with ``exec`` as a reproducer script runs it, and the case's exact values
loaded by name), put in eval mode, and run unfolded eagerly under ``torch.no_grad()``. Each
fold (``torch:NAME``, :data:`fuzz.model.torch_model.FOLDS`) is applied with the source
:func:`fuzz.model.torch_model.fold_source` writes, and the folded module run the same way.

Inductor (``torch:inductor``) freezes the module's parameters into the compiled graph as
constants and folds with them, so a compiled module cannot be reused across value sets: one
changed in place runs with the values it was compiled with (a probe showed the overflow
hidden that way). Each value set is compiled afresh (``torch._dynamo.reset()``); Inductor's
own caches of generated code make that a fraction of a second after the first compile.

What counts as fired: the folded module has fewer batch-norm modules than the case.
Where the fold raises, the unfolded run decides whether the case is PyTorch's at all
(:class:`TorchRejects` where the unfolded module fails too).

Imports ``torch`` and NumPy, no TVM.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy
from torch import nn
from torch._dynamo.utils import counters

import strategies
from fuzz.errors import CaseOutsideBackend, UsageError
from fuzz.fpenv import register_threads
from fuzz.model.case import TORCH_TOPOLOGIES, Case, Topology
from fuzz.model.form import Importer
from fuzz.model.pipeline import Pipeline
from fuzz.model.tensor import Tensor, np_dtype
from fuzz.model.torch_model import FOLDS, TorchModel, fold_source, torch_model
from fuzz.oracle.execution import Execution, Failure, Outputs, Stage
from strategies.attributes import MOSTLY_FALSE
from strategies.options import DEFAULT_DTYPES
from strategies.torch_forms import torch_forms

__all__ = ["TORCH_DTYPES", "TorchFold", "TorchRejects", "materialise", "resolve", "run_module"]

#: case dtype -> torch dtype (every one has CPU kernels for conv and batch norm)
TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}


# One thread: these tensors are tiny (more threads only contend, several times slower on two
# cores), every run gives the same bits, and the kernels run on the calling thread, whose
# flush settings the check pins (fuzz.fpenv).
torch.set_num_threads(1)
register_threads("torch", torch.get_num_threads)


class TorchRejects(CaseOutsideBackend):
    """PyTorch cannot run the case even unfolded: the case is outside this backend."""


def _as_torch(tensor: Tensor) -> torch.Tensor:
    """A case tensor in its own dtype, exactly (every value is a float64 first)."""
    return torch.tensor(tensor.float64(), dtype=torch.float64).to(TORCH_DTYPES[tensor.dtype])


def materialise(model: TorchModel) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The eval module ``model`` describes, holding the case's values, and its inputs."""
    namespace: dict[str, Any] = {"nn": nn, "torch": torch}
    exec(model.source, namespace)
    module = namespace["Model"]().to(TORCH_DTYPES[model.dtype])
    state = module.state_dict()
    with torch.no_grad():
        for name, tensor in model.state:
            state[name].copy_(_as_torch(tensor).reshape(state[name].shape))
    inputs = tuple(_as_torch(t) for _, t in model.inputs)
    if model.channels_last:
        memory_format = torch.channels_last if model.rank == 2 else torch.channels_last_3d
        module = module.to(memory_format=memory_format)
        inputs = tuple(t.contiguous(memory_format=memory_format) for t in inputs)
    return module.eval(), inputs


def run_module(
    module: Callable[..., Any], inputs: tuple[torch.Tensor, ...], model: TorchModel
) -> Outputs | Failure:
    """The module's outputs in the case's dtype and shapes; a failure where it raises."""
    try:
        with torch.no_grad():
            result = module(*inputs)
    except Exception as exc:
        return Failure.from_exception(Stage.RUN, exc)
    results = result if isinstance(result, tuple) else (result,)
    arrays = [_numpy(r) for r in results]
    if len(arrays) == len(model.case_shapes):  # read back in the case's shapes where they fit
        pairs = zip(arrays, model.case_shapes, strict=True)
        arrays = [a.reshape(shape) if a.size == math.prod(shape) else a for a, shape in pairs]
    return Outputs.of_arrays(arrays)


#: torch dtype -> case dtype
_CASE_DTYPES = {v: k for k, v in TORCH_DTYPES.items()}


def _numpy(tensor: torch.Tensor) -> np.ndarray[Any, Any]:
    """``tensor``'s values exactly, in its own dtype (float64 for one a case has not)."""
    wide = tensor.detach().to(torch.float64).contiguous().numpy()
    dtype = _CASE_DTYPES.get(tensor.dtype)
    return wide.astype(np_dtype(dtype)) if dtype else wide


def _state_changed(module: nn.Module, given: dict[str, torch.Tensor]) -> bool:
    """Whether the module handed to the fold no longer holds the parameters and buffers it
    was given (``mutates-input``)."""
    state = module.state_dict()
    return state.keys() != given.keys() or any(not torch.equal(state[k], given[k]) for k in given)


def _batch_norms(module: nn.Module) -> int:
    return sum(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules())


def _convolutions(module: nn.Module) -> int:
    return sum(isinstance(m, nn.modules.conv._ConvNd) for m in module.modules())


@dataclass(frozen=True)
class TorchFold:
    """One of PyTorch's folds (``torch:NAME``), as a :class:`fuzz.backends.Fold`."""

    name: str
    framework: str = "torch"
    complete_fold: bool = False

    @property
    def fold_name(self) -> str:
        return self.name.partition(":")[2]

    @property
    def compiles(self) -> bool:
        """Inductor: the fold happens when the compiled module is first called, and the
        compiled graph is not a module whose batch norms can be counted (``binary_folding_conv``,
        Inductor's own counter, says whether it folded a convolution's weight)."""
        return self.fold_name == "inductor"

    def fold(self, module: nn.Module, model: TorchModel) -> nn.Module:
        """The folded module, by the source its users write."""
        namespace: dict[str, Any] = {"nn": nn, "torch": torch, "copy": copy, "model": module}
        exec(fold_source(self.fold_name, model), namespace)
        folded: nn.Module = namespace["folded"]
        return folded

    def execute(
        self,
        case: Case,
        runner: Any = None,
        *,
        pipeline: Pipeline | None = None,
        idempotence: bool = True,
        unchanged: bool = True,
        baseline_needed: Callable[[Outputs], bool] | None = None,
    ) -> Execution:
        """Run ``case`` unfolded and folded (see the module docstring). ``idempotence`` does
        not apply (each fold runs once); ``unchanged=False`` runs nothing where the fold left
        the module's batch norms and convolutions as they were."""
        if pipeline is not None:
            raise CaseOutsideBackend("pipelines are TVM's: --pipelines needs a TVM pass")
        if case.form.importer is not Importer.TORCH:
            raise TorchRejects("the torch backend takes a case of the PyTorch form only")
        if torch.get_num_threads() != 1:  # changed by other code in this process since import
            torch.set_num_threads(1)
        model = torch_model(case)
        module, inputs = materialise(model)
        before = {"conv2d": _convolutions(module), "batch_norm": _batch_norms(module)}
        given = copy.deepcopy(module.state_dict())
        if self.compiles:  # a fresh compile: the constants it freezes are this value set's
            torch._dynamo.reset()
            counters.clear()
        start = time.perf_counter()
        try:
            folded_module = self.fold(module, model)
        except Exception as exc:
            self._unfolded(module, inputs, model)  # raises TorchRejects where that fails too
            failure = Failure.from_exception(Stage.PASS, exc)
            return Execution(None, failure, False, False, None, time.perf_counter() - start, 0.0)
        pass_seconds = time.perf_counter() - start
        after = {"conv2d": _convolutions(folded_module), "batch_norm": _batch_norms(folded_module)}
        changed = after != before or type(folded_module) is not type(module)
        fired = after["batch_norm"] < before["batch_norm"]
        mutated = _state_changed(module, given)
        counts: tuple[dict[str, int], dict[str, int]] | None = (before, after)
        if not changed and not unchanged and not mutated:
            return Execution(None, None, False, False, None, pass_seconds, 0.0, counts)
        start = time.perf_counter()
        folded = run_module(folded_module, inputs, model)
        if self.compiles:  # compiled and folded at this first call: what it did is known now
            if isinstance(folded, Failure):
                folded = replace(folded, stage=Stage.PASS)
            changed, fired, counts = True, counters["inductor"]["binary_folding_conv"] > 0, None
            mutated = _state_changed(module, given)
        if baseline_needed is not None and isinstance(folded, Outputs) and not baseline_needed(folded):
            seconds = time.perf_counter() - start
            return Execution(
                None, folded, changed, fired, None, pass_seconds, seconds, counts, True, None, mutated
            )
        # the unfolded run on a fresh module: the fold may have changed the one it was given
        baseline = self._unfolded(materialise(model)[0], inputs, model)
        seconds = time.perf_counter() - start
        return Execution(
            baseline, folded, changed, fired, None, pass_seconds, seconds, counts, False, None, mutated
        )

    @staticmethod
    def _unfolded(module: nn.Module, inputs: tuple[torch.Tensor, ...], model: TorchModel) -> Outputs:
        outputs = run_module(module, inputs, model)
        if isinstance(outputs, Failure):
            raise TorchRejects(f"PyTorch cannot run the unfolded module: {outputs.message}")
        return outputs

    def cases(self) -> SearchStrategy[Case]:
        """Cases a module says, in every dtype, written in every way :class:`~fuzz.model.case.TorchForm`
        has; ``fuse_conv_bn_eval`` and ``fuse_modules`` are handed a conv and batch norm
        by name, so their cases have no conv output used twice (which the caller would see),
        and ``fuse_conv_bn_eval``'s no batch norm without running statistics (its documented
        precondition)."""
        topologies = TORCH_TOPOLOGIES
        trainings: SearchStrategy[bool] = MOSTLY_FALSE
        if self.fold_name in ("fuse_conv_bn_eval", "fuse_modules"):
            topologies = tuple(t for t in TORCH_TOPOLOGIES if t is not Topology.CONV_SHARED)
        if self.fold_name == "fuse_conv_bn_eval":
            trainings = st.just(False)
        return strategies.cases(
            importers=st.just(Importer.TORCH),
            topologies=st.sampled_from(topologies),
            dtypes=DEFAULT_DTYPES,
            trainings=trainings,
            torch_forms=torch_forms(),
        )

    def version(self) -> str:
        return str(torch.__version__)

    def runner(self, directory: Any = None) -> None:
        return None  # eager modules: nothing to compile

    def gated(self, pipeline: Pipeline) -> tuple[str, ...]:
        return ()

    def sequential_mismatch(self, case: Case, pipeline: Pipeline) -> str | None:
        return None


def resolve(name: str, *, complete_fold: bool | None = None) -> TorchFold:
    """``torch:NAME`` as a fold; an unknown name is a :class:`fuzz.errors.UsageError`."""
    fold = name.partition(":")[2]
    if fold not in FOLDS:
        raise UsageError(
            f"unknown fold {name!r}: PyTorch's folds are " + ", ".join(f"torch:{f}" for f in FOLDS)
        )
    return TorchFold(name=name, complete_fold=bool(complete_fold))
