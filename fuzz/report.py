"""Reports: a corpus entry as a standalone reproducer script and as a GitHub issue text.

:func:`render_script` writes a short Python program that needs only ``tvm`` and
``numpy`` (and ``ml_dtypes``, which ``tvm`` installs, for bfloat16). It builds the
entry's module with ``relax.BlockBuilder`` (every value exact: Python's shortest
round-trip decimal, cast to the tensor's dtype), runs it before and after
``FoldBatchnormToConv2D``, prints both, and exits 1 while the bug is present, 0 once
it is fixed. "Present" follows the entry's symptom: the pass raises; it rewrites a
graph it must leave alone; its output is ill-formed or fails to build or run; the
outputs change shape or dtype; a finite output becomes inf or NaN; or an output
misses the exact result by more than the error bound (the fuzzer computes the exact
value and the bound and writes them into the script).

:func:`render_issue` wraps the script in an issue in the shape TVM maintainers receive:
title, expected and actual behaviour, environment, the script inline, and a
minimality note from :func:`minimality`, which simplifies each remaining attribute and
value on its own and re-checks the bug.

Key idea: the script is generated from the case alone, in the same order
:mod:`fuzz.build` emits it, so what it runs is what the fuzzer ran.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from fuzz.campaign import check
from fuzz.case import OPERANDS, Block, Case, Tensor, Topology
from fuzz.corpus import Entry
from fuzz.execute import Outputs
from fuzz.passes import resolve_pass
from fuzz.reference import reference
from fuzz.signature import DEFAULTS, classify

__all__ = ["minimality", "render_issue", "render_script"]

#: The pass each builtin name stands for, as the script spells it.
PASS_EXPRESSIONS = {
    "upstream": "relax.transform.FoldBatchnormToConv2D()",
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


def _operand(case: Case, i: int, name: str) -> str:
    return f"{name}{i}" if name in case.parameters else f"const({name}{i})"


def _conv_call(case: Case, i: int, block: Block, data: str) -> str:
    conv = block.conv
    assert conv is not None
    out_dtype = f'"{conv.out_dtype}"' if conv.out_dtype else "None"
    return (
        f"relax.op.nn.conv2d({data}, {_operand(case, i, 'weight')}, strides={list(conv.strides)}, "
        f"padding={list(conv.padding)}, dilation={list(conv.dilation)}, groups={conv.groups}, "
        f'data_layout="{conv.data_layout}", kernel_layout="{conv.kernel_layout}", '
        f'out_layout="{conv.data_layout}", out_dtype={out_dtype})'
    )


def _bn_call(case: Case, i: int, block: Block, data: str) -> str:
    bn = block.bn
    args = ", ".join(_operand(case, i, n) for n in ("gamma", "beta", "mean", "var"))
    return (
        f"relax.op.nn.batch_norm({data}, {args}, axis={bn.axis}, epsilon={bn.epsilon!r}, "
        f"center={bn.center}, scale={bn.scale}, momentum={bn.momentum!r}, training={bn.training})"
    )


def _body(case: Case) -> list[str]:
    """The dataflow block, as lines of ``bb.emit`` calls, ending with ``result = ...``."""
    lines: list[str] = []
    data = "x"
    for i, block in enumerate(case.blocks):
        if block.conv is not None:
            lines.append(f'conv{i} = bb.emit({_conv_call(case, i, block, data)}, name_hint="conv{i}")')
            data = f"conv{i}"
        lines.append(f'bn{i} = bb.emit({_bn_call(case, i, block, data)}, name_hint="bn{i}")')
        if case.topology is Topology.BN_STATS:
            lines.append(f"result = relax.Tuple([bb.emit(relax.TupleGetItem(bn{i}, k)) for k in range(3)])")
        else:
            lines.append(f'out{i} = bb.emit(relax.TupleGetItem(bn{i}, 0), name_hint="out{i}")')
        if case.topology is Topology.CHAIN and i == 0:
            lines.append('relu0 = bb.emit(relax.op.nn.relu(out0), name_hint="relu0")')
            data = "relu0"
    if case.topology is Topology.CONV_SHARED:
        lines.append("result = relax.Tuple([out0, conv0])")
    elif case.topology is not Topology.BN_STATS:
        lines.append(f"result = out{len(case.blocks) - 1}")
    return lines


def _check(entry: Entry) -> list[str]:
    """Lines that set ``bug`` (a message, or None) from ``before_out`` and ``after_out``."""
    symptom = entry.symptom
    if symptom in ("finite-to-nonfinite",):
        return [
            "bad = [np.isfinite(b) & ~np.isfinite(a) for b, a in zip(before_out, after_out)]",
            'bug = "finite outputs became inf or NaN" if any(m.any() for m in bad) else None',
        ]
    if symptom == "signature-change":
        return [
            "sig = lambda outs: [(o.shape, str(o.dtype)) for o in outs]",
            'bug = f"outputs changed from {sig(before_out)} to {sig(after_out)}" '
            "if sig(before_out) != sig(after_out) else None",
        ]
    if symptom == "out-of-tolerance":
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


def _check_lines(entry: Entry) -> list[str]:
    check = _check(entry)
    if check == ["bug = None"]:
        return []
    return [*check, "if bug:", '    print("BUG:", bug)', "    sys.exit(1)"]


def render_script(entry: Entry, pass_expression: str | None = None) -> str:
    """A standalone reproducer for ``entry``; see the module docstring.

    ``pass_expression`` is the Python expression that makes the pass (default:
    upstream's, for entries found on it).
    """
    case = entry.case
    make = pass_expression or PASS_EXPRESSIONS.get(entry.pass_name, PASS_EXPRESSIONS["upstream"])
    tensors: list[tuple[str, Tensor]] = [("x_value", case.data)]
    for i, block in enumerate(case.blocks):
        for name in OPERANDS:
            tensor = block.operand(name)
            if tensor is not None:
                tensors.append((f"{name}{i}", tensor))
    params = ["x"] + [f"{n}{i}" for i, b in enumerate(case.blocks) for n in OPERANDS if n in case.parameters]
    needs_bf16 = any(t.dtype == "bfloat16" for _, t in tensors)
    version = entry.provenance.get("tvm", "")
    lines = [
        f'"""Reproducer: {entry.signature} in tvm.relax.transform.FoldBatchnormToConv2D'
        + (f" (TVM {version})." if version else "."),
        "",
        f"{entry.message}",
        "",
        "Generated by bnfold-fuzz. Needs tvm and numpy. Exits 1 while the bug is present, 0 once fixed.",
        '"""',
        "",
        "import sys",
        "",
        "import numpy as np",
        "import tvm",
        "from tvm import relax",
    ]
    if needs_bf16:
        lines.append("import ml_dtypes")
    lines += [
        "",
        "",
        "def const(array):",
        "    return relax.const(tvm.runtime.tensor(array))",
        "",
        "",
    ]
    lines += [f"{name} = {_array(tensor)}" for name, tensor in tensors]
    lines += [
        "",
        "bb = relax.BlockBuilder()",
        'x = relax.Var("x", relax.TensorType(x_value.shape, str(x_value.dtype)))',
    ]
    for p in params[1:]:
        lines.append(f'{p}_var = relax.Var("{p}", relax.TensorType({p}.shape, str({p}.dtype)))')
    param_vars = ", ".join(["x"] + [f"{p}_var" for p in params[1:]])
    lines.append(f'with bb.function("main", [{param_vars}]):')
    lines.append("    with bb.dataflow():")
    body = _body(case)
    for p in params[1:]:
        body = [line.replace(f"{p}, ", f"{p}_var, ").replace(f"{p})", f"{p}_var)") for line in body]
    lines += [f"        {line}" for line in body]
    lines += [
        "        output = bb.emit_output(result)",
        "    bb.emit_func_output(output)",
        "before = bb.get()",
        f"inputs = [{', '.join(['x_value', *params[1:]])}]",
        "",
        "",
        "def run(mod):",
        '    exe = relax.build(relax.pipeline.zero_pipeline()(mod), target="llvm")',
        '    result = relax.VirtualMachine(exe, tvm.cpu())["main"](*[tvm.runtime.tensor(a) for a in inputs])',
        "    flat = [result] if isinstance(result, tvm.runtime.Tensor) else list(result)",
        "    return [t.numpy() for t in flat]",
        "",
        "",
        "before_out = run(before)",
        'print("before the pass:", *before_out, sep="\\n")',
        "try:",
        f"    after = {make}(before)",
        "except Exception as exc:",
        '    message = " ".join(line for line in str(exc).splitlines() if "Metadata omitted" not in line)',
        '    print(f"the pass raised {type(exc).__name__}: {message}")',
        "    sys.exit(1)",
    ]
    if entry.symptom == "must-not-fold":
        lines += [
            "if after.script() != before.script():",
            f'    print("BUG: the pass rewrote a graph it must leave alone: {_reason_to_leave(case)}")',
            "    try:",
            '        print("after the pass (wrong):", *run(after), sep="\\n")',
            "    except Exception as exc:",
            '        print(f"the folded module fails to build or run: {type(exc).__name__}: {exc}")',
            "    sys.exit(1)",
        ]
    lines += [
        "try:",
        "    relax.analysis.well_formed(after)",
        "    after_out = run(after)",
        "except Exception as exc:",
        '    print(f"the folded module is ill-formed or fails to build or run: {type(exc).__name__}: {exc}")',
        "    sys.exit(1)",
        'print("after the pass:", *after_out, sep="\\n")',
        *_check_lines(entry),
        'print("no bug: the pass behaves correctly on this graph")',
    ]
    return "\n".join(lines) + "\n"


def _reason_to_leave(case: Case) -> str:
    block = case.blocks[0]
    if block.bn.training:
        return "batch_norm has training=True (batch statistics, not moving ones)"
    if block.conv is not None and block.bn.axis % 4 != block.conv.channel_axis:
        return f"batch_norm axis={block.bn.axis} is not the conv output's channel axis"
    return "see the signature"


# ---------------------------------------------------------------------------
# issue text


def _retype(tensor: Tensor, dtype: str) -> Tensor:
    return Tensor.from_numpy(tensor.float64(), dtype)


def _retyped(block: Block, names: tuple[str, ...], dtype: str) -> dict[str, Any]:
    return {n: _retype(t, dtype) for n in names if (t := block.operand(n)) is not None}


def _simplifications(case: Case) -> list[tuple[str, Callable[[Case], Case]]]:
    """(description, change) for each way to make ``case`` simpler by one step that keeps
    shapes: flags and attributes back to their defaults, one operand's values to 1.0."""
    changes: list[tuple[str, Callable[[Case], Case]]] = []

    def each_block(**fields: Any) -> Callable[[Case], Case]:
        def change(c: Case) -> Case:
            blocks = []
            for b in c.blocks:
                bn = replace(b.bn, **{k: v for k, v in fields.items() if hasattr(b.bn, k)})
                conv = b.conv and replace(b.conv, **{k: v for k, v in fields.items() if hasattr(b.conv, k)})
                blocks.append(replace(b, bn=bn, conv=conv))
            return replace(c, blocks=tuple(blocks))

        return change

    first = case.blocks[0]
    flags: tuple[tuple[str, Any], ...] = (
        ("training", False),
        ("scale", True),
        ("center", True),
        ("epsilon", 1e-5),
    )
    for name, default in flags:
        if getattr(first.bn, name) != default:
            changes.append(
                (f"{name}={getattr(first.bn, name)!r} -> {default!r}", each_block(**{name: default}))
            )
    conv = first.conv
    if conv is not None:
        windows: tuple[tuple[str, tuple[int, ...]], ...] = (
            ("strides", (1, 1)),
            ("dilation", (1, 1)),
            ("padding", (0, 0, 0, 0)),
        )
        for name, default in windows:
            if getattr(conv, name) != default:
                changes.append(
                    (f"{name}={list(getattr(conv, name))} -> {list(default)}", each_block(**{name: default}))
                )
        if conv.out_dtype and conv.out_dtype != case.dtype:

            def same_dtype(c: Case) -> Case:
                c = each_block(out_dtype="")(c)
                blocks = tuple(replace(b, **_retyped(b, OPERANDS[1:], c.dtype)) for b in c.blocks)
                return replace(c, blocks=blocks)

            changes.append((f"out_dtype={conv.out_dtype} -> none", same_dtype))
    if case.dtype != "float32":

        def to_float32(c: Case) -> Case:
            blocks = []
            for b in c.blocks:
                conv = b.conv and replace(b.conv, out_dtype="")
                blocks.append(replace(b, conv=conv, **_retyped(b, OPERANDS, "float32")))
            return replace(c, data=_retype(c.data, "float32"), blocks=tuple(blocks))

        changes.append((f"dtype={case.dtype} -> float32", to_float32))
    if case.data.shape[0] > 1:

        def one_batch(c: Case) -> Case:
            return replace(c, data=Tensor.from_numpy(c.data.float64()[:1], c.data.dtype))

        changes.append((f"batch {case.data.shape[0]} -> 1 (the first item)", one_batch))
    if case.parameters:
        changes.append(
            (f"parameters={list(case.parameters)} -> all constants", lambda c: replace(c, parameters=()))
        )
    ones = {"x": case.data}
    for name in OPERANDS:
        tensor = first.operand(name)
        if tensor is not None:
            ones[name] = tensor
    for name, tensor in ones.items():
        if any(v != 1.0 for v in tensor.values):

            def set_ones(c: Case, name: str = name) -> Case:
                if name == "x":
                    return replace(c, data=Tensor(c.data.dtype, c.data.shape, (1.0,) * len(c.data.values)))
                blocks = list(c.blocks)
                t = blocks[0].operand(name)
                assert t is not None
                ones: dict[str, Any] = {name: Tensor(t.dtype, t.shape, (1.0,) * len(t.values))}
                blocks[0] = replace(blocks[0], **ones)
                return replace(c, blocks=tuple(blocks))

            changes.append((f"{name} values -> all 1.0", set_ones))
    return changes


def minimality(entry: Entry) -> list[str]:
    """One line per simplification tried: whether the bug survives it."""
    make_pass = resolve_pass(entry.pass_name)
    lines = []
    for description, change in _simplifications(entry.case):
        try:
            simpler = change(entry.case)
            finding = check(simpler, make_pass).verdict.primary
        except ValueError as exc:  # CaseError, ModuleError, or an empty conv output
            lines.append(f"- {description}: cannot be tried, the graph would be invalid ({str(exc)[:80]})")
            continue
        if finding is not None and finding.symptom.value == entry.symptom:
            lines.append(f"- {description}: the bug remains (this attribute does not matter)")
        else:
            lines.append(f"- {description}: the bug disappears (it matters)")
    return lines


_ELEMENT = re.compile(r"output (\d+)\[([\d, ]+)\]")


def _actual(entry: Entry) -> str:
    """The actual behaviour in plain numbers a reader can check, from a fresh run."""
    checked = check(entry.case, resolve_pass(entry.pass_name))
    ex, finding = checked.execution, checked.verdict.primary
    if finding is None:
        return entry.message
    if finding.symptom.value == "pass-exception":
        return f"The pass raises `{finding.error_type}`: {finding.message}"
    before = ex.baseline if isinstance(ex.baseline, Outputs) else None
    after = ex.folded if isinstance(ex.folded, Outputs) else None
    if finding.symptom.value == "must-not-fold" and before is not None and after is not None:
        first = [v.ravel()[:4].tolist() for v in (before.values[0], after.values[0])]
        reason = finding.message.split(": ", 1)[-1]
        return (
            f"The pass folds the batch_norm although {reason}. Output 0 (first values) without the "
            f"pass: {first[0]}; after the pass: {first[1]}."
        )
    match = _ELEMENT.search(finding.message)
    if match is None or before is None or after is None:
        return finding.message
    k = int(match.group(1))
    index = tuple(int(i) for i in match.group(2).split(","))
    where = f"output {k}, element [{match.group(2)}]"
    b, a = float(before.values[k][index]), float(after.values[k][index])
    exact = float(checked.reference.outputs[k].value[index])
    bound = float(checked.reference.outputs[k].bound[index])
    dtype = entry.case.dtype
    if finding.symptom.value == "finite-to-nonfinite":
        return (
            f"Without the pass, {where} is {b!r}; after the pass it is {a!r}. The exact result is "
            f"{exact:.7g}, and every intermediate of the unfolded graph stays below half the largest "
            f"{dtype} value, so nothing but the fold can overflow."
        )
    return (
        f"Without the pass, {where} is {b!r}; after the pass it is {a!r}. The exact result "
        f"(computed in wider precision) is {exact!r}, and rounding in {dtype} can account for at most "
        f"{bound:.3g} of difference, so a change of {abs(a - b):.3g} is a bug, not rounding."
    )


def _headline(entry: Entry) -> str:
    error_type = entry.signature.split("[", 1)[0].partition(":")[2]
    return {
        "pass-exception": f"raises {error_type or 'an exception'}",
        "must-not-fold": "folds a batch_norm it must leave alone",
        "finite-to-nonfinite": "turns finite outputs into inf/NaN",
        "out-of-tolerance": "changes results beyond rounding error",
        "signature-change": "changes the shape or dtype of the output",
        "ill-formed": "produces ill-formed IR",
        "not-idempotent": "is not idempotent",
    }.get(entry.symptom, f"fails: {entry.symptom}")


def render_issue(entry: Entry) -> str:
    """A GitHub issue for ``entry`` in the shape TVM maintainers receive."""
    case = entry.case
    attrs = ", ".join(f"{k}={v}" for k, v in classify(case).items() if DEFAULTS[k] != v)
    expected = {
        "pass-exception": "The pass either folds the batch_norm correctly or leaves the graph unchanged.",
        "must-not-fold": "The pass leaves the graph unchanged: folding is only valid for an inference "
        "batch_norm on the conv's output-channel axis.",
        "finite-to-nonfinite": "Outputs that are finite without the pass stay finite after it. Here "
        "every intermediate of the unfolded graph stays well inside the dtype's range (checked with a "
        "rounding-error bound), so a correct fold cannot overflow.",
        "out-of-tolerance": "After the pass, outputs stay within rounding error of the unfolded graph.",
        "signature-change": "The pass does not change the shapes or dtypes of the function's outputs.",
        "ill-formed": "The pass produces well-formed IR.",
    }.get(entry.symptom, "The pass folds correctly or leaves the graph unchanged.")
    tvm = entry.provenance.get("tvm", "")
    simplified = minimality(entry)
    return "\n".join(
        [
            f"# [Bug][Relax] FoldBatchnormToConv2D {_headline(entry)}" + (f" ({attrs})" if attrs else ""),
            "",
            "### Expected behavior",
            "",
            expected,
            "",
            "### Actual behavior",
            "",
            _actual(entry),
            "",
            "### Environment",
            "",
            f"- TVM: {tvm} (pip install apache-tvm=={tvm})" if tvm else "- TVM: unknown",
            f"- Python: {entry.provenance.get('python', 'unknown')}",
            f"- Platform: {entry.provenance.get('platform', 'unknown')}",
            "- Target: llvm, built with relax.pipeline.zero_pipeline()",
            "",
            "### Steps to reproduce",
            "",
            "Save as `repro.py` and run `python repro.py` (exits 1 while the bug is present):",
            "",
            "```python",
            render_script(entry).rstrip("\n"),
            "```",
            "",
            "### Minimality",
            "",
            "Found and shrunk by a property-based fuzzer (bnfold-fuzz). Each remaining non-default "
            "attribute and value was simplified on its own and the bug re-checked:",
            "",
            *(
                simplified
                or ["- nothing left to simplify: every attribute is at its default and every value is 1.0"]
            ),
            "",
            f"(bnfold-fuzz generates conv2d + batch_norm graphs with Hypothesis, runs them through the "
            f"pass on the llvm Relax VM and judges the outputs against a wide-precision reference; "
            f"its signature for this bug, used to avoid duplicate reports, is `{entry.signature}`.)",
            "",
        ]
    )
