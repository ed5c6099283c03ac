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

import importlib.util
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from fuzz.campaign import check
from fuzz.case import OPERANDS, Block, Case, Tensor, Topology, kernel_to_oihw
from fuzz.corpus import Entry
from fuzz.execute import Outputs
from fuzz.minimize import minimality
from fuzz.passes import resolve_pass
from fuzz.pipeline import DEFAULT_PIPELINE, FOLD, NEIGHBOURS
from fuzz.reference import reference
from fuzz.signature import DEFAULTS, classify

__all__ = ["render_issue", "render_script"]

#: The pass each builtin name stands for, as the script spells it (``fixed`` needs this
#: repository on ``sys.path``).
PASS_EXPRESSIONS = {
    "upstream": "relax.transform.FoldBatchnormToConv2D()",
    "fixed": "__import__('fuzz.fold_batchnorm').fold_batchnorm.FoldBatchnormToConv2D()",
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
    if symptom == "signature-change" and entry.pipeline is not None and entry.pipeline.mixed_precision:
        return [
            "shapes = lambda outs: [o.shape for o in outs]",
            'bug = f"output shapes changed from {shapes(before_out)} to {shapes(after_out)}" '
            "if shapes(before_out) != shapes(after_out) else None",
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
    if entry.symptom != "sequential-direct-mismatch":
        return []
    return [
        "if apply(before, sequential=True).script() != apply(before, sequential=False).script():",
        '    print("BUG: Sequential and direct calls of the same passes, every pass enabled, differ")',
        "    sys.exit(1)",
    ]


def _pipeline_text(entry: Entry) -> str:
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


def render_script(entry: Entry, pass_expression: str | None = None) -> str:
    """A standalone reproducer for ``entry``; see the module docstring.

    ``pass_expression`` is the Python expression that makes the pass (default:
    upstream's, for entries found on it).
    """
    case = entry.case
    make = pass_expression or PASS_EXPRESSIONS.get(entry.pass_name, PASS_EXPRESSIONS["upstream"])
    subject = "tvm.relax.transform.FoldBatchnormToConv2D" if entry.pipeline is None else _pipeline_text(entry)
    exits = {
        "crash": "Crashes (killed by a signal) while the bug is present, exits 0 once fixed.",
        "timeout": "Hangs, stopped by an alarm after 300 s, while the bug is present; exits 0 once fixed.",
    }.get(entry.symptom, "Exits 1 while the bug is present, 0 once fixed.")
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
        f'"""Reproducer: {entry.signature} in {subject}' + (f" (TVM {version})." if version else "."),
        "",
        entry.message.split("; stderr:", 1)[0],
        "",
        f"Generated by bnfold-fuzz. Needs tvm and numpy. {exits}",
        '"""',
        "",
        *(["import signal"] if entry.symptom == "timeout" else []),
        "import sys",
        "",
        "import numpy as np",
        "import tvm",
        "from tvm import relax",
        "from tvm.script import relax as R",
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
        'x = relax.Var("x", R.Tensor(x_value.shape, str(x_value.dtype)))',
    ]
    for p in params[1:]:
        lines.append(f'{p}_var = relax.Var("{p}", R.Tensor({p}.shape, str({p}.dtype)))')
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
        *(["signal.alarm(300)  # a hang ends here, killed by SIGALRM"] if entry.symptom == "timeout" else []),
        "before_out = run(before)",
        'print("before the pass:", *before_out, sep="\\n")',
        "try:",
        "    after = apply(before)",
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
        *_mismatch_lines(entry),
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


_ELEMENT = re.compile(r"output (\d+)\[([\d, ]+)\]")


def _actual(entry: Entry) -> str:
    """The actual behaviour in plain numbers a reader can check, from a fresh run."""
    if entry.isolated:
        message, _, stderr = entry.message.partition("; stderr:\n")
        tail = f"\n\nWhat the process printed to stderr:\n\n```\n{stderr}\n```" if stderr else ""
        return f"Checking this graph, {message.removeprefix('the ')}.{tail}"
    checked = check(entry.case, resolve_pass(entry.pass_name), pipeline=entry.pipeline)
    ex, finding = checked.execution, checked.verdict.primary
    the = "the pass" if entry.pipeline is None else "the passes"
    if finding is None:
        return entry.message
    if finding.symptom.value == "pass-exception":
        raises = "The pass raises" if entry.pipeline is None else "Applying the passes raises"
        return f"{raises} `{finding.error_type}`: {finding.message}"
    before = ex.baseline if isinstance(ex.baseline, Outputs) else None
    after = ex.folded if isinstance(ex.folded, Outputs) else None
    if finding.symptom.value == "must-not-fold" and before is not None and after is not None:
        first = [v.ravel()[:4].tolist() for v in (before.values[0], after.values[0])]
        reason = finding.message.split(": ", 1)[-1]
        return (
            f"The pass folds the batch_norm although {reason}. Output 0 (first values) without the "
            f"pass: {first[0]}; after {the}: {first[1]}."
        )
    if finding.symptom.value == "signature-change" and finding.message.startswith("outputs changed from "):
        before_sig, _, after_sig = finding.message.removeprefix("outputs changed from ").partition(" to ")
        return (
            f"Without {the} the function returns {before_sig} (dtype[shape]); after {the} it "
            f"returns {after_sig}, so anything downstream of this function sees a different tensor."
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
            f"Without {the}, {where} is {b!r}; after {the} it is {a!r}. The exact result is "
            f"{exact:.7g}, and every intermediate of the unfolded graph stays below half the largest "
            f"{dtype} value, so nothing but the fold can overflow."
        )
    return (
        f"Without {the}, {where} is {b!r}; after {the} it is {a!r}. The exact result "
        f"(computed in wider precision) is {exact!r}, and rounding in {dtype} can account for at most "
        f"{bound:.3g} of difference, so a change of {abs(a - b):.3g} is a bug, not rounding."
    )


#: Where upstream's pass lives in the apache-tvm wheel (and, under ``python/``, in TVM's tree).
UPSTREAM_MODULE = "tvm.relax.transform.fold_batch_norm_to_conv2d_for_inference"


def _upstream_line(snippet: str) -> list[str]:
    """The line of upstream's pass that contains ``snippet``, quoted with its place, or []
    when this TVM has no such line (another version, or the pass moved)."""
    spec = importlib.util.find_spec(UPSTREAM_MODULE)
    if spec is None or spec.origin is None:
        return []
    lines = Path(spec.origin).read_text().splitlines()
    number = next((n for n, line in enumerate(lines, 1) if snippet in line), None)
    if number is None:
        return []
    where = "python/" + UPSTREAM_MODULE.replace(".", "/") + ".py"
    return [f"`{where}`, line {number}:", "", "```python", lines[number - 1].strip(), "```", ""]


def _scale(case: Case) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Upstream's folded scale ``gamma / sqrt(var + eps)`` (eps rounded to float32, as it
    does) and folded weight ``W * scale`` in OIHW, both exact in float64."""
    block = case.blocks[0]
    assert block.conv is not None and block.weight is not None
    eps = float(np.float32(block.bn.epsilon))
    scale = block.gamma.float64() / np.sqrt(block.var.float64() + eps)
    weight = kernel_to_oihw(block.conv, block.weight.float64())
    return scale, weight * scale.reshape(-1, 1, 1, 1)


def _cause(entry: Entry) -> tuple[str, str] | None:
    """Why upstream's pass does this: a snippet of the line responsible, and an
    explanation with this case's numbers; None for a bug with no explanation on record."""
    case, essentials = entry.case, dict(classify(entry.case))
    block = case.blocks[0]
    conv = block.conv
    symptom, error_type = entry.symptom, entry.signature.split("[", 1)[0].partition(":")[2]
    if entry.pass_name != "upstream" or conv is None or entry.pipeline not in (None, DEFAULT_PIPELINE):
        return None
    if symptom == "pass-exception" and error_type == "TypeError" and block.var.dtype != "float32":
        return 'FloatImm("float32"', (
            f"The pass adds epsilon to the variance as a float32 scalar, whatever the variance's dtype "
            f"(here {block.var.dtype}"
            + (f", as the conv's out_dtype is {conv.out_dtype}" if essentials["out_dtype"] != "same" else "")
            + "). Relax binary operators need both operands in one dtype, so the pass raises instead of "
            "folding or leaving the graph alone."
        )
    if symptom == "pass-exception" and essentials["kernel_layout"] == "IOHW":
        return "wt.reshape(", (
            "`wt` is a `relax.Call` expression, which has no `reshape` method; the OIHW branch just above "
            "uses `relax.op.reshape(wt, ...)`. Every IOHW kernel (the layout of transposed-conv weights "
            "imported from other frameworks) makes the pass raise."
        )
    if symptom == "must-not-fold":
        attrs_line = "bn_attrs = bn_op.attrs"
        if essentials["training"] == "True":
            return attrs_line, (
                "The rewriter reads only `epsilon` from the batch_norm's attributes; it never checks "
                "`training`. With training=True, batch_norm normalises with the mean and variance of the "
                "batch itself, not the moving statistics the fold bakes into the weights, so the fold "
                "changes the result."
            )
        if essentials["axis"] == "non-channel":
            return attrs_line, (
                f"The rewriter reads only `epsilon` from the batch_norm's attributes; it never checks "
                f"`axis`. Here batch_norm normalises axis {block.bn.axis}, while the fold scales the conv's "
                f"output channels (axis {conv.channel_axis} in {conv.data_layout})."
            )
    if symptom == "out-of-tolerance" and essentials["scale"] == "False":
        scale, _ = _scale(case)
        ones = 1 / np.sqrt(block.var.float64() + float(np.float32(block.bn.epsilon)))
        return "wt = relax.op.divide(bn_weight, dino)", (
            f"The folded scale multiplies by gamma although scale=False tells batch_norm to ignore gamma: "
            f"the fold uses gamma / sqrt(var + eps) = {scale[0]:.7g} where batch_norm computes "
            f"1 / sqrt(var + eps) = {ones[0]:.7g} (channel 0)."
        )
    if symptom == "out-of-tolerance" and essentials["center"] == "False":
        scale, _ = _scale(case)
        mean, beta = block.mean.float64()[0], block.beta.float64()[0]
        return "bs = relax.op.subtract(bn_bias", (
            f"The folded bias adds beta although center=False tells batch_norm to ignore beta: the fold "
            f"adds beta - mean * s = {beta - mean * scale[0]:.7g} where batch_norm adds "
            f"-mean * s = {-mean * scale[0]:.7g} (channel 0, s = gamma / sqrt(var + eps))."
        )
    if symptom == "signature-change" and essentials["data_layout"] != "NCHW":
        c = block.gamma.shape[0]
        return "bs_args = relax.op.reshape(bs", (
            f"The folded bias is reshaped to (1, {c}, 1, 1), the channel position of NCHW, whatever the "
            f"conv's data_layout. The conv's output here is {conv.data_layout}, so adding the bias "
            "broadcasts it along the wrong axis and changes the output's shape."
        )
    finfo = np.finfo(np.dtype(case.dtype)) if case.dtype != "bfloat16" else None
    if symptom == "finite-to-nonfinite" and finfo is not None:
        scale, folded = _scale(case)
        return "wt_conv = relax.op.multiply(conv_weight, wt)", (
            f"The pass scales the weights before the convolution: W' = W * s with "
            f"s = gamma / sqrt(var + eps) = {scale.max():.7g}. The largest |W'| is "
            f"{np.abs(folded).max():.7g}, above the largest finite {case.dtype} ({float(finfo.max):.7g}), "
            f"so W' is inf, and the convolution turns inf into inf or NaN (inf * 0 from padding or a zero "
            f"input, inf - inf in a sum). Without the fold, the convolution's sum is scaled by s after it "
            f"is computed and stays finite."
        )
    if symptom == "out-of-tolerance" and finfo is not None:
        scale, _ = _scale(case)
        smallest = float(np.abs(scale[scale != 0]).min()) if (scale != 0).any() else 0.0
        tiny = float(finfo.smallest_normal)
        if 0 < smallest < tiny:
            bits = int(np.floor(np.log2(smallest / float(finfo.smallest_subnormal)))) + 1
            return "wt = relax.op.divide(bn_weight, dino)", (
                f"The folded scale s = gamma / sqrt(var + eps) = {smallest:.4g} is below the smallest "
                f"normal {case.dtype} ({tiny:.4g}), so it is stored as a subnormal number with only "
                f"{bits} significant bits, and the folded weight and bias (beta - mean * s) carry that "
                f"error. The unfolded graph never forms s: it normalises first and then multiplies by gamma."
            )
    return None


def _cause_section(entry: Entry) -> list[str]:
    cause = _cause(entry)
    if cause is None:
        return []
    snippet, text = cause
    return ["### Where it goes wrong", "", *_upstream_line(snippet), text, ""]


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
        "build-failure": "produces a module that fails to build",
        "run-failure": "produces a module that fails to run",
        "crash": f"crashes the process ({error_type})",
        "timeout": "hangs",
        "sequential-direct-mismatch": "gives different results as a Sequential and as direct calls",
    }.get(entry.symptom, f"fails: {entry.symptom}")


def _how_it_shows(entry: Entry) -> str:
    return {
        "crash": "(the process dies while the bug is present)",
        "timeout": "(hangs while the bug is present; an alarm stops it after 300 s)",
    }.get(entry.symptom, "(exits 1 while the bug is present)")


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
        "build-failure": "The module after the passes builds for llvm, as the module before them does.",
        "run-failure": "The module after the passes runs, as the module before them does.",
        "crash": "The passes, the build and the run finish or raise a Python exception; the process "
        "does not die.",
        "timeout": "The passes, the build and the run finish within seconds, as they do on similar graphs.",
        "sequential-direct-mismatch": "With every pass enabled (opt_level=3), `Sequential(passes)(mod)` "
        "and calling the passes one after the other give the same module.",
    }.get(entry.symptom, "The pass folds correctly or leaves the graph unchanged.")
    if entry.pipeline is not None and entry.symptom in ("out-of-tolerance", "finite-to-nonfinite"):
        expected = "After the passes, outputs stay within rounding error of the module before them."
    tvm = entry.provenance.get("tvm", "")
    simplified = (
        [
            "- not re-checked here: checking this graph kills or hangs the process; it is as Hypothesis "
            "shrank it"
        ]
        if entry.isolated
        else [a.line() for a in minimality(entry.case, resolve_pass(entry.pass_name), entry.pipeline)]
    )
    subject = "FoldBatchnormToConv2D" if entry.pipeline is None else f"`{_pipeline_text(entry)}`"
    return "\n".join(
        [
            f"# [Bug][Relax] {subject} {_headline(entry)}" + (f" ({attrs})" if attrs else ""),
            "",
            "### Expected behavior",
            "",
            expected,
            "",
            "### Actual behavior",
            "",
            _actual(entry),
            "",
            *_cause_section(entry),
            "### Environment",
            "",
            f"- TVM: {tvm} (pip install apache-tvm=={tvm})" if tvm else "- TVM: unknown",
            f"- Python: {entry.provenance.get('python', 'unknown')}",
            f"- Platform: {entry.provenance.get('platform', 'unknown')}",
            "- Target: llvm, built with relax.pipeline.zero_pipeline()",
            "",
            "### Steps to reproduce",
            "",
            f"Save as `repro.py` and run `python repro.py` {_how_it_shows(entry)}:",
            "",
            "```python",
            render_script(entry).rstrip("\n"),
            "```",
            "",
            "### Minimality",
            "",
            "Shrunk and simplified by a property-based fuzzer (bnfold-fuzz). Each remaining non-default "
            "attribute and value was simplified once more on its own and the bug re-checked:",
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
