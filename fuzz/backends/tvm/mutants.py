"""Seeded defects: variants of the fixed pass, each one mistake an implementer plausibly makes.

A :class:`Mutant` is ``fuzz/backends/tvm/fold_batchnorm.py`` with one or two edits (each ``old`` text
found exactly once, so a change of the pass that moves it fails loudly), loaded as a
module of its own. The fuzzer has never been tuned on them: they measure its search
power (``bnfuzz bench --time-to-find``, :mod:`fuzz.evaluation.time_to_find`). Each mutant's pass is
``mutant:NAME`` on the command line (``bnfuzz run --pass mutant:scale_ignored``): like
``fixed``, every one claims to be a complete fold.

Key idea: a mutant is a text edit of the real pass, not a re-implementation, so it fails
exactly where the real pass would if someone made that edit.
"""

from __future__ import annotations

import functools
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MUTANTS", "Mutant", "load", "source_of"]

PASS_FILE = Path(__file__).resolve().parent / "fold_batchnorm.py"


@dataclass(frozen=True)
class Mutant:
    """One mistake: a name, what is wrong in words, and the edits that make it."""

    name: str
    mistake: str
    edits: tuple[tuple[str, str], ...]


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "scale_ignored",
        "multiplies by gamma although scale=False",
        (
            (
                "gamma = gamma_raw.astype(np.float64) if bool(ba.scale) else np.ones(channels)",
                "gamma = gamma_raw.astype(np.float64)",
            ),
        ),
    ),
    Mutant(
        "center_ignored",
        "adds beta although center=False",
        (
            (
                "beta = beta_raw.astype(np.float64) if bool(ba.center) else 0.0",
                "beta = beta_raw.astype(np.float64)",
            ),
        ),
    ),
    Mutant(
        "training_ignored",
        "folds a training-mode batch_norm with its moving statistics",
        (("    if bool(ba.training):\n        return None\n", ""),),
    ),
    Mutant(
        "axis_unchecked",
        "folds along the output channels whatever the batch_norm axis",
        (("    if int(ba.axis) % 4 != channel:\n        return None\n", ""),),
    ),
    Mutant(
        "bias_nchw_shaped",
        "shapes the folded bias and rescale as (1, C, 1, 1) whatever the data layout",
        (("    shape[channel] = channels\n", "    shape[1] = channels\n"),),
    ),
    Mutant(
        "bias_flat",
        "adds the folded bias as a (C,) vector, which broadcasts along the last axis",
        (("        bias=bias.astype(out_np).reshape(shape),", "        bias=bias.astype(out_np),"),),
    ),
    Mutant(
        "kernel_axis_first",
        "scales the kernel's first axis, as if every kernel layout were OIHW",
        (('    o_axis = kernel_layout.index("O")', "    o_axis = 0"),),
    ),
    Mutant(
        "kernel_axis_input",
        "takes the kernel's I axis for its output channels (declines unless I == O, then folds wrongly)",
        (('    o_axis = kernel_layout.index("O")', '    o_axis = kernel_layout.index("I")'),),
    ),
    Mutant(
        "kernel_axis_grouped",
        "scales the kernel's I axis for a grouped conv",
        (
            (
                '    o_axis = kernel_layout.index("O")',
                '    o_axis = kernel_layout.index("I" if int(ca.groups) > 1 else "O")',
            ),
        ),
    ),
    Mutant(
        "epsilon_outside_sqrt",
        "divides by sqrt(var) + eps instead of sqrt(var + eps)",
        (
            (
                "        m, e = _scale(gamma, denominator)",
                "        m, e = _scale(gamma, (np.sqrt(var_raw.astype(np.float64)) + eps) ** 2)",
            ),
        ),
    ),
    Mutant(
        "epsilon_float32_always",
        "rounds epsilon to float32 in float64 graphs too",
        (
            (
                '    if out_np.name != "float64":\n        eps = float(np.float32(eps))',
                "    eps = float(np.float32(eps))",
            ),
        ),
    ),
    Mutant(
        "epsilon_by_input_dtype",
        "rounds epsilon by the conv's input dtype, not its out_dtype",
        (('    if out_np.name != "float64":', '    if weight_raw.dtype.name != "float64":'),),
    ),
    Mutant(
        "bias_sign",
        "adds mean * s instead of subtracting it",
        (("        bias = beta - mean_s", "        bias = beta + mean_s"),),
    ),
    Mutant(
        "conv_bias_dropped",
        "forgets the conv's own bias when folding a conv with bias",
        (
            (
                "        mean = mean_raw.astype(np.float64) - (conv_bias if conv_bias is not None else 0.0)",
                "        mean = mean_raw.astype(np.float64)",
            ),
        ),
    ),
    Mutant(
        "weights_float32",
        "stores the folded weights as float32 whatever the conv's dtype",
        (
            (
                "        weight=np.moveaxis(folded, 0, o_axis).astype(weight_raw.dtype),",
                "        weight=np.moveaxis(folded, 0, o_axis).astype(np.float32),",
            ),
        ),
    ),
    Mutant(
        "bias_in_weight_dtype",
        "stores the folded bias in the weight dtype, not the conv's out_dtype",
        (
            (
                "        bias=bias.astype(out_np).reshape(shape),",
                "        bias=bias.astype(weight_raw.dtype).reshape(shape),",
            ),
        ),
    ),
    Mutant(
        "scale_in_graph_dtype",
        "rounds gamma / sqrt(var + eps) to the graph's dtype before folding it",
        (
            (
                "        m, e = _scale(gamma, denominator)",
                "        m, e = np.frexp((gamma / np.sqrt(denominator)).astype(out_np).astype(np.float64))",
            ),
        ),
    ),
    Mutant(
        "weights_guard_only",
        "folds the whole scale into the weights whenever they stay finite (guards the weights only)",
        (("        if assume_bounded:", "        if True:"),),
    ),
    Mutant(
        "bias_guard_dropped",
        "lets the folded bias leave the dtype's range",
        (
            (
                "        np.all(np.abs(bias) <= out_max / _BIAS_MARGIN) and "
                "np.all(np.abs(remainder) <= out_max)",
                "        np.all(np.abs(remainder) <= out_max)",
            ),
        ),
    ),
    # Off by one or two binades is harmless where the oracle demands finiteness: there the
    # unfolded partial sums stay below max / 2, and a cancelling sum's largest partial sum is
    # at most half its budget, so scaling by up to 4 cannot overflow. Three binades can.
    Mutant(
        "split_three_binades_late",
        "folds scales up to 8 into the weights (the split's guard three binades too loose)",
        (
            (
                "        if not exact_only and log2_s <= 0 and",
                "        if not exact_only and log2_s <= 3 and",
            ),
        ),
    ),
    Mutant(
        "statistics_in_use_folded",
        "folds although the batch_norm's statistics outputs are used",
        (
            (
                "                if self.uses(user):\n"
                "                    return None  # a statistic in use\n",
                "",
            ),
        ),
    ),
    Mutant(
        "shared_conv_folded",
        "folds although the conv's output has another consumer",
        (
            (
                "        if not _is_call(conv, _CONV2D) or len(self.uses(conv_var)) != 1:",
                "        if not _is_call(conv, _CONV2D):",
            ),
        ),
    ),
    Mutant(
        "only_nchw_oihw",
        "folds only NCHW data with OIHW kernels (declines the other layouts)",
        (
            (
                '    if channel is None or sorted(kernel_layout) != sorted("OIHW"):',
                '    if channel != 1 or kernel_layout != "OIHW":',
            ),
        ),
    ),
    Mutant(
        "declines_half_precision",
        "declines float16 and bfloat16 graphs",
        (
            (
                "    out_np = gamma_raw.dtype  # batch_norm's operands have the conv output's dtype\n",
                "    out_np = gamma_raw.dtype  # batch_norm's operands have the conv output's dtype\n"
                '    if out_np.name in ("float16", "bfloat16"):\n        return None\n',
            ),
        ),
    ),
    Mutant(
        "dead_statistics_block",
        "declines when the statistics are projected, even if nothing uses them",
        (("                dropped.add(user)\n", "                return None\n"),),
    ),
)

_BY_NAME = {m.name: m for m in MUTANTS}


def source_of(mutant: Mutant) -> str:
    """The pass's source with the mutant's edits (each ``old`` must occur exactly once)."""
    text = PASS_FILE.read_text()
    for old, new in mutant.edits:
        count = text.count(old)
        if count != 1:
            raise ValueError(f"mutant {mutant.name}: {old!r} occurs {count} times in {PASS_FILE}, not once")
        text = text.replace(old, new)
    return text


@functools.cache
def load(name: str) -> Any:
    """The ``FoldBatchnormToConv2D`` class of mutant ``name``."""
    mutant = _BY_NAME[name]
    module = types.ModuleType(f"bnfold_mutant_{name}")
    module.__file__ = str(PASS_FILE)
    sys.modules[module.__name__] = module  # TVM's pass decorator looks the class's module up
    exec(compile(source_of(mutant), f"<mutant {name}>", "exec"), module.__dict__)
    return module.FoldBatchnormToConv2D


def __getattr__(name: str) -> Any:
    """``fuzz.backends.tvm.mutants:NAME`` (``mutant:NAME`` on the command line): the mutant's pass class."""
    if name in _BY_NAME:
        return load(name)
    raise AttributeError(f"module {__name__!r} has no mutant {name!r}; mutants: {', '.join(_BY_NAME)}")


def __dir__() -> list[str]:
    """The module's names and every mutant's, so a misspelt ``mutant:NAME`` gets suggestions."""
    return sorted([*globals(), *_BY_NAME])
