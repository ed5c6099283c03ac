"""A backend in one file, added through the registry alone: NumPy runs a conv + batch_norm
case unfolded and folded the textbook way (``W * gamma / sqrt(var + eps)`` in the case's
dtype, so it has the overflow class of every fold that scales weights). This module is
both its fold module and its report module; :data:`ROW` is its registry row, which
:func:`registered` puts in :data:`fuzz.backends.BACKENDS` for as long as a test needs it.
Nothing else in the fuzzer names it: campaigns, reports, scripts, ``file-issues`` and the
conformance test (tests/test_conformance.py) reach it through the row.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

import strategies
from fuzz.backends import BACKENDS, Backend
from fuzz.engine.check import Checked
from fuzz.errors import CaseOutsideBackend, UsageError
from fuzz.model.case import Case, Epilogue, Topology
from fuzz.model.form import Importer
from fuzz.model.pipeline import Pipeline
from fuzz.oracle.execution import Execution, Outputs
from fuzz.render.issue import Issue
from fuzz.render.script_parts import float_literal
from fuzz.render.skeleton import (
    MINIMALITY,
    actual,
    attributes_shown,
    footnote,
    minimality_lines,
    one_entry_issue,
    steps,
)
from fuzz.render.wording import wording
from fuzz.store.corpus import Entry

KEY = "numpy"

#: Its registry row: this module folds and reports.
ROW = Backend(
    key=KEY,
    framework="NumPy",
    fold=__name__,
    report=__name__,
    project="example/numpy-fold",
    extra="test",
    names="'numpy' (a textbook fold in NumPy)",
)


@contextlib.contextmanager
def registered() -> Iterator[Backend]:
    """The backend in the registry, for the duration of the block."""
    BACKENDS[KEY] = ROW
    try:
        yield ROW
    finally:
        del BACKENDS[KEY]


# ---------------------------------------------------------------------------
# the fold


#: A stride-1, unpadded NCHW/OIHW convolution of one group, accumulated in the data's
#: dtype: the backend runs this text, and the reproducer script prints it.
CONV_SOURCE = """def conv(x, w):
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    out = np.zeros((n, o, h - kh + 1, wd - kw + 1), dtype=x.dtype)
    with np.errstate(all="ignore"):
        for i in range(kh):
            for j in range(kw):
                patch = x[:, :, i : i + out.shape[2], j : j + out.shape[3]]
                out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j]).astype(x.dtype)
    return out
"""
_namespace: dict[str, Any] = {"np": np}
exec(CONV_SOURCE, _namespace)
_conv: Callable[[Any, Any], Any] = _namespace["conv"]


def _run(case: Case) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The case's output unfolded, and folded, each computed in the case's dtype."""
    dtype = np.dtype(case.dtype)
    block = case.blocks[0]
    assert block.weight is not None
    x, w = case.data.numpy(), block.weight.numpy()
    gamma = block.gamma.numpy() if block.bn.scale else np.ones(block.gamma.shape, dtype)
    beta = block.beta.numpy() if block.bn.center else np.zeros(block.beta.shape, dtype)
    mean, var = block.mean.numpy(), block.var.numpy()
    eps = dtype.type(block.bn.epsilon)
    shape = (1, -1, 1, 1)
    with np.errstate(all="ignore"):
        conv = _conv(x, w)
        unfolded = (conv - mean.reshape(shape)) / np.sqrt(var + eps).reshape(shape) * gamma.reshape(
            shape
        ) + beta.reshape(shape)
        s = gamma / np.sqrt(var + eps)
        folded = _conv(x, w * s.reshape(-1, 1, 1, 1)) + (beta - mean * s).reshape(shape)
        return unfolded.astype(dtype), folded.astype(dtype)


@dataclass(frozen=True)
class NumpyFold:
    """The textbook fold, as a :class:`fuzz.backends.Fold`."""

    name: str = KEY
    framework: str = KEY
    complete_fold: bool = False

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
        if pipeline is not None:
            raise CaseOutsideBackend("pipelines are TVM's")
        block = case.blocks[0]
        plain = (
            case.topology is Topology.CONV_BN
            and case.epilogue is Epilogue.NONE
            and block.conv is not None
            and block.bias is None
            and not block.bn.training
            and block.conv.strides == (1, 1)
            and block.conv.padding == (0, 0, 0, 0)
            and block.conv.dilation == (1, 1)
            and block.conv.groups == 1
            and (block.conv.data_layout, block.conv.kernel_layout) == ("NCHW", "OIHW")
            and block.bn.axis % 4 == 1
        )
        if not plain:
            raise CaseOutsideBackend("the NumPy fold takes a plain NCHW conv + batch_norm")
        start = time.perf_counter()
        unfolded, folded = _run(case)
        seconds = time.perf_counter() - start
        before = {"conv2d": 1, "batch_norm": 1}
        after = {"conv2d": 1, "add": 1}
        return Execution(
            baseline=Outputs.of_arrays([unfolded]),
            folded=Outputs.of_arrays([folded]),
            changed=True,
            fired=True,
            idempotent=None,
            pass_seconds=seconds,
            build_seconds=0.0,
            op_counts=(before, after),
        )

    def cases(self) -> SearchStrategy[Case]:
        return strategies.cases(
            dtypes=st.just("float32"),
            data_layouts=st.just("NCHW"),
            kernel_layouts=st.just("OIHW"),
            topologies=st.just(Topology.CONV_BN),
            trainings=st.just(False),
            biases=st.just(False),
            epilogues=st.just(Epilogue.NONE),
            importers=st.just(Importer.RELAX),
            max_channels=2,
            max_spatial=3,
        ).filter(_plain_conv)

    def version(self) -> str:
        return np.__version__

    def runner(self, directory: Any = None) -> None:
        return None

    def sequential_mismatch(self, case: Case, pipeline: Pipeline) -> str | None:
        return None

    def gated(self, pipeline: Pipeline) -> tuple[str, ...]:
        return ()


def _plain_conv(case: Case) -> bool:
    conv = case.blocks[0].conv
    return (
        conv is not None
        and conv.strides == (1, 1)
        and conv.padding == (0, 0, 0, 0)
        and conv.dilation == (1, 1)
        and conv.groups == 1
        and case.blocks[0].bn.axis % 4 == 1
    )


def resolve(name: str, *, complete_fold: bool | None = None) -> NumpyFold:
    if name != KEY:
        raise UsageError(f"unknown fold {name!r}: the NumPy backend has one fold, {KEY!r}")
    return NumpyFold(complete_fold=bool(complete_fold))


# ---------------------------------------------------------------------------
# the report


def _array(tensor: Any) -> str:
    values = ", ".join(float_literal(v) for v in tensor.values)
    return f"np.array([{values}], dtype=np.{tensor.dtype}).reshape({tensor.shape})"


def script(entry: Entry) -> str:
    """A reproducer that needs NumPy alone: the case's values, both computations, exit 1
    while the folded output is not finite where the unfolded one is."""
    block = entry.case.blocks[0]
    operands = {
        "x": entry.case.data,
        "w": block.weight,
        "gamma": block.gamma,
        "beta": block.beta,
        "mean": block.mean,
        "var": block.var,
    }
    return "\n".join(
        [
            f"# Reproducer: {entry.signature} (the textbook fold in NumPy).",
            "import sys",
            "",
            "import numpy as np",
            "",
            *(f"{name} = {_array(t)}" for name, t in operands.items()),
            *(["gamma = np.ones_like(gamma)  # scale=False"] if not block.bn.scale else []),
            *(["beta = np.zeros_like(beta)  # center=False"] if not block.bn.center else []),
            f"eps = np.{entry.case.dtype}({float_literal(block.bn.epsilon)})",
            "",
            CONV_SOURCE,
            "",
            "with np.errstate(all='ignore'):",
            "    c = (1, -1, 1, 1)",
            "    unfolded = (conv(x, w) - mean.reshape(c)) / np.sqrt(var + eps).reshape(c) * gamma.reshape(c)"
            " + beta.reshape(c)",
            "    s = gamma / np.sqrt(var + eps)",
            "    folded = conv(x, w * s.reshape(-1, 1, 1, 1)) + (beta - mean * s).reshape(c)",
            "print('unfolded:', unfolded.ravel(), 'folded:', folded.ravel())",
            "if np.isfinite(unfolded).all() and not np.isfinite(folded).all():",
            "    print('BUG: finite outputs became inf or NaN')",
            "    sys.exit(1)",
            "print('no bug: the fold behaves correctly on this case')",
            "",
        ]
    )


def issue(entries: Sequence[Entry], checked: Mapping[str, Checked | None]) -> Issue:
    """The issue for an entry, in the common GitHub bug shape, from the shared skeleton."""
    entry = entries[0]
    words = wording(entry.symptom, entry.symptom_name)
    shown = attributes_shown(entry, skip=("form",))
    title = f"[Bug] the textbook fold {words.title(entry.error_type)}" + (f" ({shown})" if shown else "")
    body = "\n".join(
        [
            "### Describe the bug",
            "",
            f"Expected: {words.expected}",
            "",
            f"Actual: {actual(entry, checked.get(entry.signature), raises='It raises')}",
            "",
            "### To Reproduce",
            "",
            *steps(script(entry), "(it needs numpy, and exits 1 while the bug shows)"),
            MINIMALITY,
            "",
            *minimality_lines(entry),
            "",
            footnote([entry.signature]),
            "",
        ]
    )
    return one_entry_issue(entry, title, body)
