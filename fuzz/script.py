"""Reproducer scripts: a corpus entry as a standalone Python program.

:func:`render_script` writes a short program that needs only ``tvm`` and ``numpy``
(``ml_dtypes``, which ``tvm`` installs, for bfloat16; ``onnx`` for a case written by
the ONNX importer). It builds the entry's module exactly as :mod:`fuzz.build` does,
from the same description (:func:`fuzz.program.program`, or
:func:`fuzz.onnx_graph.onnx_graph` and TVM's ``from_onnx``; every value exact:
Python's shortest round-trip decimal, cast to the tensor's dtype), runs it before and
after ``FoldBatchnormToConv2D``, prints both, and exits 1 while the bug is present, 0
once it is fixed. "Present" follows the entry's symptom: the pass raises; it rewrites a
graph it must leave alone; its output is ill-formed or fails to build or run; the
outputs change shape or dtype; a finite output becomes inf or NaN; or an output misses
the exact result by more than the error bound (the fuzzer computes the exact value and
the bound and writes them into the script).

Key idea: the script is written from the bindings the builder emits, one line per
binding, so what it runs is what the fuzzer ran.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fuzz.case import Case, Importer, Tensor
from fuzz.corpus import Entry
from fuzz.decline import block_reasons
from fuzz.onnx_graph import ELEMENT_TYPES, OPSET, onnx_graph
from fuzz.oracle import Symptom
from fuzz.pipeline import FOLD, NEIGHBOURS
from fuzz.program import MAIN, Binding, Function, named_tensors, parameter_names, program
from fuzz.reference import reference
from fuzz.wording import wording

__all__ = ["PASS_EXPRESSIONS", "pipeline_text", "render_group_script", "render_script"]

#: The pass each builtin name stands for, as the script spells it (``fixed`` needs this
#: repository on ``sys.path``).
PASS_EXPRESSIONS = {
    "upstream": "relax.transform.FoldBatchnormToConv2D()",
    "fixed": "__import__('fuzz.fold_batchnorm').fold_batchnorm.FoldBatchnormToConv2D()",
    "identity": "relax.transform.function_pass(lambda func, mod, ctx: func, opt_level=0, name='Identity')",
}


def _literal(value: float) -> str:
    """Python source for a float; ``repr`` is the shortest text that reads back exactly."""
    return repr(value) if math.isfinite(value) else f'float("{value}")'


def _array(tensor: Tensor) -> str:
    """Exact NumPy source for a tensor's values (each exact in its dtype)."""
    dtype = "ml_dtypes.bfloat16" if tensor.dtype == "bfloat16" else f'"{tensor.dtype}"'
    shape = tuple(tensor.shape)
    if len({v.hex() for v in tensor.values}) == 1:  # hex: tells 0.0 from -0.0
        return f"np.full({shape}, {_literal(tensor.values[0])}).astype({dtype})"
    listed = ", ".join(_literal(v) for v in tensor.values)
    return f"np.array([{listed}]).reshape({shape}).astype({dtype})"


def _array_name(name: str) -> str:
    """The script's name for the array of tensor ``name`` (the data is ``x_value``)."""
    return f"{name}_value" if name in ("x", "skip") else name


def _call(binding: Binding, args: list[str]) -> str:
    """Python source of one binding's expression, its arguments given as source."""
    a = binding.attrs
    if binding.op == "conv2d":
        out_dtype = f'"{a["out_dtype"]}"' if a["out_dtype"] else "None"
        return (
            f"relax.op.nn.conv2d({args[0]}, {args[1]}, strides={list(a['strides'])}, "
            f"padding={list(a['padding'])}, dilation={list(a['dilation'])}, groups={a['groups']}, "
            f'data_layout="{a["data_layout"]}", kernel_layout="{a["kernel_layout"]}", '
            f'out_layout="{a["out_layout"]}", out_dtype={out_dtype})'
        )
    if binding.op == "batch_norm":
        return (
            f"relax.op.nn.batch_norm({', '.join(args)}, axis={a['axis']}, epsilon={a['epsilon']!r}, "
            f"center={a['center']}, scale={a['scale']}, momentum={a['momentum']!r}, training={a['training']})"
        )
    simple = {
        "get": f"relax.TupleGetItem({args[0]}, {a.get('index')})",
        "add": f"relax.op.add({', '.join(args)})",
        "reshape": f"relax.op.reshape({args[0]}, {tuple(a.get('shape', ()))})",
        "relu": f"relax.op.nn.relu({args[0]})",
        "clip": f"relax.op.clip({args[0]}, {a.get('min')!r}, {a.get('max')!r})",
        "tuple": f"relax.Tuple([{', '.join(args)}])",
        "call": f'relax.Call(bb.get().get_global_var("{a.get("function")}"), [{", ".join(args)}])',
    }
    return simple[binding.op]


def _function_lines(func: Function, constants: set[str]) -> list[str]:
    """``with bb.function(...)``: the function's bindings, as :mod:`fuzz.build` emits them."""
    prefix = "" if func.name == MAIN else f"{func.name}_"
    params = {p: f"{prefix}{p}" if p == "x" else f"{prefix}{p}_var" for p in func.params}
    lines = [
        f'{v} = relax.Var("{p}", R.Tensor({_array_name(p)}.shape, str({_array_name(p)}.dtype)))'
        for p, v in params.items()
    ]
    names: dict[str, str] = dict(params)

    def arg(name: str) -> str:
        if name in names:
            return names[name]
        assert name in constants, name
        return f"const({_array_name(name)})"

    private = "" if func.name == MAIN else ", private=True"
    lines.append(f'with bb.function("{func.name}", [{", ".join(params.values())}]{private}):')
    body: list[str] = []
    last = func.bindings[-1]
    tail = func.dataflow and last.op == "tuple" and last.var == func.output
    for binding in func.bindings[:-1] if tail else func.bindings:
        expr = _call(binding, [arg(a) for a in binding.args])
        body.append(f'{binding.var} = bb.emit({expr}, name_hint="{binding.var}")')
        names[binding.var] = binding.var
    if func.dataflow:
        result = _call(last, [arg(a) for a in last.args]) if tail else names[func.output]
        lines += ["    with bb.dataflow():", *(f"        {line}" for line in body)]
        lines += [f"        output = bb.emit_output({result})"]
    else:
        lines += [*(f"    {line}" for line in body), f"    output = {names[func.output]}"]
    lines.append("    bb.emit_func_output(output)")
    return lines


def _relax_lines(case: Case) -> list[str]:
    prog = program(case)
    constants = set(prog.constants())
    lines = ["bb = relax.BlockBuilder()"]
    for func in prog.functions:
        lines += _function_lines(func, constants)
    return [*lines, "before = bb.get()"]


def _onnx_lines(case: Case) -> list[str]:
    graph = onnx_graph(case)

    def value_info(name: str, dtype: str, shape: tuple[int, ...]) -> str:
        return f'helper.make_tensor_value_info("{name}", {ELEMENT_TYPES[dtype]}, {list(shape)})'

    def node(n: Any) -> str:
        attrs = "".join(f", {k}={v!r}" for k, v in n.attrs.items())
        return f'    helper.make_node("{n.op_type}", {list(n.inputs)}, {list(n.outputs)}{attrs}),'

    initializers = [f"numpy_helper.from_array({_array_name(n)}, {n!r})" for n in graph.initializers]
    return [
        "# The graph as an exporter writes it, imported by TVM's ONNX frontend (parameters bound).",
        "nodes = [",
        *(node(n) for n in graph.nodes),
        "]",
        "graph = helper.make_graph(",
        "    nodes,",
        '    "case",',
        f"    [{', '.join(value_info(*i) for i in graph.inputs)}],",
        f"    [{', '.join(value_info(*o) for o in graph.outputs)}],",
        f"    [{', '.join(initializers)}],",
        ")",
        f'model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", {OPSET})])',
        "before = from_onnx(model)",
    ]


def _check(entry: Entry) -> list[str]:
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


def _apply_lines(entry: Entry, make: str) -> list[str]:
    """``def apply(mod, sequential=...)``: the pass alone, or the entry's pipeline."""
    pipeline = entry.pipeline
    if pipeline is None:
        return ["def apply(mod, sequential=True):", f"    return {make}(mod)"]
    passes = ", ".join(make if name == FOLD else NEIGHBOURS[name] for name in pipeline.passes)
    return [
        f"def apply(mod, sequential={pipeline.sequential}):",
        f"    passes = [{passes}]",
        f"    with tvm.transform.PassContext(opt_level={pipeline.opt_level}):",
        "        if sequential:",
        "            return tvm.transform.Sequential(passes)(mod)",
        "        for p in passes:",
        "            mod = p(mod)",
        "        return mod",
    ]


def _mismatch_lines(entry: Entry) -> list[str]:
    if entry.symptom is not Symptom.SEQUENTIAL_MISMATCH:
        return []
    return [
        "if apply(before, sequential=True).script() != apply(before, sequential=False).script():",
        '    print("BUG: Sequential and direct calls of the same passes, every pass enabled, differ")',
        "    sys.exit(1)",
    ]


def pipeline_text(entry: Entry) -> str:
    """The entry's pipeline in words: ``Sequential([ConvertLayout(NHWC,OHWI), FoldBatchnormToConv2D])``."""
    pipeline = entry.pipeline
    assert pipeline is not None
    names = ", ".join("FoldBatchnormToConv2D" if n == FOLD else n for n in pipeline.passes)
    mode = f"Sequential([{names}])" if pipeline.sequential else f"direct calls of {names}"
    return mode + (f" at opt_level={pipeline.opt_level}" if pipeline.opt_level != 3 else "")


def _check_lines(entry: Entry) -> list[str]:
    check = _check(entry)
    if check == ["bug = None"]:
        return []
    return [*check, "if bug:", '    print("BUG:", bug)', "    sys.exit(1)"]


def _tensors(case: Case) -> dict[str, Tensor]:
    tensors = named_tensors(case)
    if case.form.importer is Importer.ONNX:
        graph = onnx_graph(case)
        tensors |= {n: t for n, t in graph.initializers.items() if n not in tensors}
    return tensors


def _header_lines(entries: list[Entry], title: str, message: str) -> list[str]:
    """The docstring, the imports every entry's body needs, and ``const``."""
    onnx = any(e.case.form.importer is Importer.ONNX for e in entries)
    needs_bf16 = any(t.dtype == "bfloat16" for e in entries for t in _tensors(e.case).values())
    first = entries[0]
    exits = wording(first.symptom, first.symptom_name).exits
    lines = [
        f'"""{title}',
        "",
        message,
        "",
        f"Generated by bnfold-fuzz. Needs tvm{', numpy and onnx' if onnx else ' and numpy'}. {exits}",
        '"""',
        "",
        *(["import signal"] if any(e.symptom is Symptom.TIMEOUT for e in entries) else []),
        "import sys",
        "",
        "import numpy as np",
        "import tvm",
        "from tvm import relax",
        "from tvm.script import relax as R",
    ]
    if needs_bf16:
        lines.append("import ml_dtypes")
    if onnx:
        lines += ["from onnx import helper, numpy_helper", "from tvm.relax.frontend.onnx import from_onnx"]
    return [*lines, "", "", "def const(array):", "    return relax.const(tvm.runtime.tensor(array))"]


def _body_lines(entry: Entry, make: str) -> list[str]:
    """The entry's module, the pass, both runs and the check: ``sys.exit(1)`` where the
    bug shows, the "no bug" line at the end."""
    case = entry.case
    tensors = _tensors(case)
    params = list(parameter_names(case))
    onnx = case.form.importer is Importer.ONNX
    lines = [f"{_array_name(name)} = {_array(tensor)}" for name, tensor in tensors.items()]
    lines += ["", *(_onnx_lines(case) if onnx else _relax_lines(case))]
    lines += [
        f"inputs = [{', '.join(_array_name(p) for p in params)}]",
        "",
        "",
        *_apply_lines(entry, make),
        "",
        "",
        "def run(mod):",
        '    exe = relax.build(relax.pipeline.zero_pipeline()(mod), target="llvm")',
        '    result = relax.VirtualMachine(exe, tvm.cpu())["main"](*[tvm.runtime.tensor(a) for a in inputs])',
        "    flat = [result] if isinstance(result, tvm.runtime.Tensor) else list(result)",
        "    return [t.numpy() for t in flat]",
        "",
        "",
        *(
            ["signal.alarm(300)  # a hang ends here, killed by SIGALRM"]
            if entry.symptom is Symptom.TIMEOUT
            else []
        ),
        "before_out = run(before)",
        'print("before the pass:", *before_out, sep="\\n")',
        "try:",
        "    after = apply(before)",
        "except Exception as exc:",
        '    message = " ".join(line for line in str(exc).splitlines() if "Metadata omitted" not in line)',
        '    print(f"the pass raised {type(exc).__name__}: {message}")',
        "    sys.exit(1)",
    ]
    if entry.symptom is Symptom.MUST_NOT_FOLD:
        lines += [
            "if after.script() != before.script():",
            f'    print("BUG: the pass rewrote a graph it must leave alone: {_reason_to_leave(case)}")',
            "    try:",
            '        print("after the pass (wrong):", *run(after), sep="\\n")',
            "    except Exception as exc:",
            '        print(f"the folded module fails to build or run: {type(exc).__name__}: {exc}")',
            "    sys.exit(1)",
        ]
    return [
        *lines,
        "try:",
        "    relax.analysis.well_formed(after)",
        "    after_out = run(after)",
        "except Exception as exc:",
        '    print(f"the folded module is ill-formed or fails to build or run: {type(exc).__name__}: {exc}")',
        "    sys.exit(1)",
        'print("after the pass:", *after_out, sep="\\n")',
        *_check_lines(entry),
        *_mismatch_lines(entry),
        'print("no bug: the pass behaves correctly on this graph")',
    ]


def _make(entry: Entry, pass_expression: str | None) -> str:
    return pass_expression or PASS_EXPRESSIONS.get(entry.pass_name, PASS_EXPRESSIONS["upstream"])


def _subject(entry: Entry) -> str:
    return "tvm.relax.transform.FoldBatchnormToConv2D" if entry.pipeline is None else pipeline_text(entry)


def render_script(entry: Entry, pass_expression: str | None = None) -> str:
    """A standalone reproducer for ``entry``; see the module docstring.

    ``pass_expression`` is the Python expression that makes the pass (default:
    upstream's, for entries found on it).
    """
    version = entry.provenance.get("tvm", "")
    title = f"Reproducer: {entry.signature} in {_subject(entry)}" + (f" (TVM {version})." if version else ".")
    lines = _header_lines([entry], title, entry.message)
    return "\n".join([*lines, "", "", *_body_lines(entry, _make(entry, pass_expression))]) + "\n"


def render_group_script(entries: list[Entry], pass_expression: str | None = None) -> str:
    """One standalone reproducer for several entries of one root cause: a function per
    entry (its module, the pass, the check), each run in turn; exits 1 if any shows the
    bug, 0 once none does. Not for crashes or hangs (each of those is its own script)."""
    if any(e.isolated for e in entries):
        raise ValueError("a crash or a hang ends the script: give it its own (render_script)")
    version = entries[0].provenance.get("tvm", "")
    title = f"Reproducer: {len(entries)} variants of one bug in {_subject(entries[0])}" + (
        f" (TVM {version})." if version else "."
    )
    message = "\n".join(f"variant {k}: {e.signature}: {e.message}" for k, e in enumerate(entries))
    lines = _header_lines(entries, title, message)
    for k, entry in enumerate(entries):
        body = [
            line.replace("sys.exit(1)", "return 1")
            for line in _body_lines(entry, _make(entry, pass_expression))
        ]
        lines += [
            "",
            "",
            f"def variant_{k}():",
            f'    """{entry.signature}"""',
            *(f"    {line}" if line else "" for line in body),
            "    return 0",
        ]
    names = ", ".join(f"variant_{k}" for k in range(len(entries)))
    lines += [
        "",
        "",
        "shown = []",
        f"for k, variant in enumerate([{names}]):",
        '    print(f"--- variant {k}: {variant.__doc__}")',
        "    if variant():",
        "        shown.append(k)",
        'print(f"the bug shows in variants {shown}" if shown else',
        '      "no bug: the pass behaves correctly on every variant")',
        "sys.exit(1 if shown else 0)",
    ]
    return "\n".join(lines) + "\n"


def _reason_to_leave(case: Case) -> str:
    block = case.blocks[0]
    if block.bn.training:
        return "batch_norm has training=True (batch statistics, not moving ones)"
    if block.conv is not None and not case.channel_axes()[0]:
        return f"batch_norm axis={block.bn.axis} is not the conv output's channel axis"
    return "see the signature"
