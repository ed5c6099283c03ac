"""Reproducer scripts for TVM's passes: a corpus entry as a standalone Python program.

:func:`render_script` writes a short program that needs only ``tvm`` and ``numpy``
(``ml_dtypes``, which ``tvm`` installs, for bfloat16; ``onnx`` for a case written by
the ONNX importer). It builds the entry's module exactly as :mod:`fuzz.backends.tvm.build` does,
from the same description (:func:`fuzz.model.program.program`, or
:func:`fuzz.model.onnx_graph.onnx_graph` and TVM's ``from_onnx``; every value exact:
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

from fuzz.fpenv import keeps_subnormals
from fuzz.model.case import Case
from fuzz.model.form import Importer
from fuzz.model.pipeline import FOLD, NEIGHBOURS
from fuzz.model.program import MAIN, Binding, Function, parameter_names, program
from fuzz.oracle.verdict import Symptom
from fuzz.render.script_parts import array_name, array_source, bug_lines, onnx_model_lines, script_tensors
from fuzz.render.wording import wording
from fuzz.store.corpus import Entry

__all__ = ["PASS_EXPRESSIONS", "pipeline_text", "render_group_script", "render_script"]

#: The pass each builtin name stands for, as the script spells it (``fixed`` needs this
#: repository on ``sys.path``).
PASS_EXPRESSIONS = {
    "upstream": "relax.transform.FoldBatchnormToConv2D()",
    "fixed": "__import__('fuzz.backends.tvm.fold_batchnorm', fromlist=['_']).FoldBatchnormToConv2D()",
    "identity": "relax.transform.function_pass(lambda func, mod, ctx: func, opt_level=0, name='Identity')",
}


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
    """``with bb.function(...)``: the function's bindings, as :mod:`fuzz.backends.tvm.build` emits them."""
    prefix = "" if func.name == MAIN else f"{func.name}_"
    params = {p: f"{prefix}{p}" if p == "x" else f"{prefix}{p}_var" for p in func.params}
    lines = [
        f'{v} = relax.Var("{p}", R.Tensor({array_name(p)}.shape, str({array_name(p)}.dtype)))'
        for p, v in params.items()
    ]
    names: dict[str, str] = dict(params)

    def arg(name: str) -> str:
        if name in names:
            return names[name]
        assert name in constants, name
        return f"const({array_name(name)})"

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
    check = bug_lines(entry)
    if check == ["bug = None"]:
        return []
    return [*check, "if bug:", '    print("BUG:", bug)', "    sys.exit(1)"]


def _header_lines(entries: list[Entry], title: str, message: str) -> list[str]:
    """The docstring, the imports every entry's body needs, and ``const``."""
    onnx = any(e.case.form.importer is Importer.ONNX for e in entries)
    needs_bf16 = any(t.dtype == "bfloat16" for e in entries for t in script_tensors(e.case).values())
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
    tensors = script_tensors(case)
    params = list(parameter_names(case))
    onnx = case.form.importer is Importer.ONNX
    lines = [f"{array_name(name)} = {array_source(tensor)}" for name, tensor in tensors.items()]
    lines += [
        "",
        *(
            [*onnx_model_lines(case), "before = from_onnx(model)  # TVM's ONNX frontend, parameters bound"]
            if onnx
            else _relax_lines(case)
        ),
    ]
    lines += [
        f"inputs = [{', '.join(array_name(p) for p in params)}]",
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
    """What the script runs, named: TVM's pass, bnfold-fuzz's own (``fixed``, ``identity``:
    the script runs that one), or the pipeline."""
    if entry.pipeline is not None:
        return pipeline_text(entry)
    if entry.pass_name != "upstream" and entry.pass_name in PASS_EXPRESSIONS:
        return f"bnfold-fuzz's `{entry.pass_name}` pass (not TVM's)"
    return "tvm.relax.transform.FoldBatchnormToConv2D"


@keeps_subnormals
def render_script(entry: Entry, pass_expression: str | None = None) -> str:
    """A standalone reproducer for ``entry``, found against one of TVM's passes; see the
    module docstring.

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
