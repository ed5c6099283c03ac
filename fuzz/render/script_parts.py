"""The parts of a reproducer script every backend's script uses: exact array literals,
the case's ONNX model as ``onnx.helper`` calls, and the lines that decide whether the bug
shows from the outputs before and after the fold (the exact values and the error bound
written in where the symptom is about numbers)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from fuzz.model.case import Case
from fuzz.model.decline_reasons import block_reasons
from fuzz.model.form import Importer
from fuzz.model.onnx_graph import ELEMENT_TYPES, onnx_graph
from fuzz.model.program import named_tensors
from fuzz.model.tensor import Tensor
from fuzz.oracle.reference import reference
from fuzz.oracle.verdict import Symptom
from fuzz.render.wording import wording
from fuzz.store.corpus import Entry

__all__ = [
    "array_name",
    "array_source",
    "bug_lines",
    "float_literal",
    "onnx_model_lines",
    "onnx_script_head",
    "script_tensors",
    "verdict_lines",
]


def float_literal(value: float) -> str:
    """Python source for a float that reads back exactly, as a reader reads it best: a
    power of two times a small whole number where that is shorter (``2.0**64``,
    ``-3.0 * 2.0**100``), else ``repr``, the shortest decimal that reads back exactly."""
    if not math.isfinite(value):
        return f'float("{value}")'
    shortest = repr(value)
    if value == 0:
        return shortest
    mantissa, exponent = math.frexp(abs(value))  # abs(value) = mantissa * 2**exponent
    whole, bits = mantissa, exponent
    while whole != int(whole):  # exact: doubling a float only moves its exponent
        whole, bits = whole * 2, bits - 1
    if whole >= 1024 or not -1074 <= bits <= 1023:
        return shortest
    power = f"2.0**{bits}" if whole == 1 else f"{int(whole)}.0 * 2.0**{bits}"
    power = power if value > 0 else (f"-{power}" if whole == 1 else f"-({power})")
    return power if len(power) < len(shortest) else shortest


def array_source(tensor: Tensor) -> str:
    """Exact NumPy source for a tensor's values (each exact in its dtype)."""
    dtype = "ml_dtypes.bfloat16" if tensor.dtype == "bfloat16" else f'"{tensor.dtype}"'
    shape = tuple(tensor.shape)
    if len({v.hex() for v in tensor.values}) == 1:  # hex: tells 0.0 from -0.0
        return f"np.full({shape}, {float_literal(tensor.values[0])}).astype({dtype})"
    listed = ", ".join(float_literal(v) for v in tensor.values)
    return f"np.array([{listed}]).reshape({shape}).astype({dtype})"


def array_name(name: str) -> str:
    """The script's name for the array of tensor ``name`` (the data is ``x_value``)."""
    return f"{name}_value" if name in ("x", "skip") else name


def _initializer_key(fed: Mapping[str, Tensor], stored: Mapping[str, Tensor], name: str) -> str:
    """The script's key for an initializer's array: its own name, or ``NAME_stored`` where
    the input of that name is fed other values (an overridden operand's stale default)."""
    return name if name not in fed or fed[name] == stored[name] else f"{name}_stored"


def onnx_model_lines(case: Case) -> list[str]:
    """Lines that make ``model``: the case's ONNX graph written with ``onnx.helper``."""
    graph = onnx_graph(case)
    stored = graph.initializers

    def value_info(name: str, dtype: str, shape: tuple[int, ...]) -> str:
        return f'helper.make_tensor_value_info("{name}", {ELEMENT_TYPES[dtype]}, {list(shape)})'

    def node(n: Any) -> str:
        attrs = "".join(f", {k}={v!r}" for k, v in n.attrs.items())
        return f'    helper.make_node("{n.op_type}", {list(n.inputs)}, {list(n.outputs)}{attrs}),'

    initializers = [
        f"numpy_helper.from_array({array_name(_initializer_key(graph.feeds, stored, n))}, {n!r})"
        for n in stored
    ]
    typed = [f"        {value_info(*v)}," for v in graph.value_info]
    return [
        "# The graph as an exporter writes it.",
        "nodes = [",
        *(node(n) for n in graph.nodes),
        "]",
        "graph = helper.make_graph(",
        "    nodes,",
        '    "case",',
        f"    [{', '.join(value_info(*i) for i in graph.inputs)}],",
        f"    [{', '.join(value_info(*o) for o in graph.outputs)}],",
        f"    [{', '.join(initializers)}],",
        *(["    value_info=[", *typed, "    ],"] if typed else []),
        ")",
        f'model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", {graph.opset})])',
        *([f"model.ir_version = {graph.ir_version}"] if graph.ir_version else []),
    ]


def bug_lines(entry: Entry) -> list[str]:
    """Lines that set ``bug`` (a message, or None) from ``before_out`` and ``after_out``."""
    symptom = entry.symptom
    if symptom is Symptom.FINITE_TO_NONFINITE:
        return [
            "bad = [np.isfinite(b) & ~np.isfinite(a) for b, a in zip(before_out, after_out)]",
            'bug = "finite outputs became inf or NaN" if any(m.any() for m in bad) else None',
        ]
    if symptom is Symptom.SIGNATURE_CHANGE and entry.pipeline is not None and entry.pipeline.mixed_precision:
        return [
            "shapes = lambda outs: [o.shape for o in outs]",
            'bug = f"output shapes changed from {shapes(before_out)} to {shapes(after_out)}" '
            "if shapes(before_out) != shapes(after_out) else None",
        ]
    if symptom is Symptom.SIGNATURE_CHANGE:
        return [
            "sig = lambda outs: [(o.shape, str(o.dtype)) for o in outs]",
            'bug = f"outputs changed from {sig(before_out)} to {sig(after_out)}" '
            "if sig(before_out) != sig(after_out) else None",
        ]
    if symptom is Symptom.MISSED_FOLD:
        foldable = sum(not r for r in block_reasons(entry.case))
        return [
            "# Every batch_norm counted here may be folded: inference mode, the channel axis, constant",
            "# operands, no other use of the conv or of the statistics, folded constants in range.",
            "def batch_norms(mod):",
            "    calls = []",
            "    for func in mod.functions.values():",
            "        if isinstance(func, relax.Function):",
            "            relax.analysis.post_order_visit(func, calls.append)",
            '    return sum(isinstance(c, relax.Call) and getattr(c.op, "name", "") == "relax.nn.batch_norm"'
            " for c in calls)",
            "",
            f"foldable, left = {foldable}, batch_norms(after)",
            'bug = f"{left} of {batch_norms(before)} batch_norm(s) left, {foldable} of them foldable" '
            "if batch_norms(before) - left < foldable else None",
        ]
    if symptom is Symptom.OUT_OF_TOLERANCE:
        ref = reference(entry.case)
        exact = [e.value.astype(np.float64).ravel().tolist() for e in ref.outputs]
        bound = [e.bound.astype(np.float64).ravel().tolist() for e in ref.outputs]
        return [
            "# The exact result (computed in wide arithmetic) and the error a correct program in",
            "# this dtype may have, per element (bnfold-fuzz's rounding-error bound).",
            f"EXACT = {exact!r}",
            f"BOUND = {bound!r}",
            "bug = None",
            "for k, (b, a) in enumerate(zip(before_out, after_out)):",
            "    exact, bound = np.array(EXACT[k]), np.array(BOUND[k])",
            "    allowed = bound + np.abs(b.astype(np.float64).ravel() - exact)",
            "    err = np.abs(a.astype(np.float64).ravel() - exact)",
            "    if a.shape == b.shape and (err > allowed).any():",
            "        i = int(np.argmax(err - allowed))",
            '        bug = f"output {k} element {i}: after {a.ravel()[i]!r}, before {b.ravel()[i]!r}, '
            'exact {exact[i]!r}, error {err[i]:.3g} > allowed {allowed[i]:.3g}"',
        ]
    return ["bug = None"]


def script_tensors(case: Case) -> dict[str, Tensor]:
    """Every array a script writes, by the key :func:`array_name` names it from: the case's
    tensors; for an ONNX model, its tensors as the model has them (statistics per position
    where ``spatial`` is 0): what is fed, then what is stored (the clip bounds, a stale default
    under ``NAME_stored``)."""
    if case.form.importer is not Importer.ONNX:
        return named_tensors(case)
    graph = onnx_graph(case)
    tensors = dict(graph.feeds)
    for name, tensor in graph.initializers.items():
        tensors.setdefault(_initializer_key(graph.feeds, graph.initializers, name), tensor)
    return tensors


def onnx_script_head(entry: Entry, title: str, needs: str, imports: list[str]) -> list[str]:
    """The start of a script that runs the entry's ONNX model on ONNX Runtime: the docstring
    (``needs``: the packages it needs), the imports (``imports`` besides onnx, onnxruntime and
    NumPy), the exact arrays, ``model`` (checked in full), ``feeds``, and
    ``caller_inputs(m)`` (the graph inputs a caller may feed) and ``run(m,
    level=ORT_DISABLE_ALL)`` on the CPU provider with one thread."""
    exits = wording(entry.symptom, entry.symptom_name).exits
    tensors = script_tensors(entry.case)
    inputs = list(onnx_graph(entry.case).feeds)
    return [
        f'"""{title}',
        "",
        entry.message,
        "",
        f"Generated by bnfold-fuzz. Needs {needs}. {exits}",
        '"""',
        "",
        "import sys",
        "",
        "import numpy as np",
        "import onnx",
        "import onnxruntime as ort",
        *imports,
        "from onnx import helper, numpy_helper",
        "",
        *(f"{array_name(name)} = {array_source(tensor)}" for name, tensor in tensors.items()),
        "",
        *onnx_model_lines(entry.case),
        "onnx.checker.check_model(model, full_check=True)",
        f"feeds = {{{', '.join(f'{n!r}: {array_name(n)}' for n in inputs)}}}",
        "",
        "",
        "def caller_inputs(m):",
        "    # below IR version 4 (the given model's) an initializer listed as an input is a constant",
        "    constants = {t.name for t in m.graph.initializer} if 0 < model.ir_version < 4 else set()",
        "    return [i for i in m.graph.input if i.name not in constants]",
        "",
        "",
        "def run(m, level=ort.GraphOptimizationLevel.ORT_DISABLE_ALL):",
        "    options = ort.SessionOptions()",
        "    options.graph_optimization_level = level",
        "    options.intra_op_num_threads = 1",
        "    options.log_severity_level = 3  # errors only",
        "    session = ort.InferenceSession(",
        '        m.SerializeToString(), options, providers=["CPUExecutionProvider"]',
        "    )",
        "    names = {i.name for i in m.graph.input}  # an input the model lost is not fed",
        "    return session.run(None, {k: v for k, v in feeds.items() if k in names})",
        "",
        "",
    ]


def verdict_lines(entry: Entry, fine: str) -> list[str]:
    """The end of a script: ``bug`` from ``before_out`` and ``after_out``, exit 1 with it,
    else print that there is no bug (``fine`` says what behaves correctly)."""
    return [
        *bug_lines(entry),
        "if bug:",
        '    print("BUG:", bug)',
        "    sys.exit(1)",
        f'print("no bug: {fine}")',
    ]
