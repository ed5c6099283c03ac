"""Decline reasons: when a batch_norm must, or may, stay after a fold.

A fold has two sides: it is never wrong, and it folds. The oracle needs both: which
graphs a pass must leave alone (else ``must-not-fold``), and which ones a pass that
claims to be a complete fold must fold (else ``missed-fold``). :func:`block_reasons`
states, per block of a case, every :class:`Reason` a fold has to leave that block's
batch_norm in place. Nothing here runs a pass or TVM: the reasons come from the case
alone (its structure, and for :attr:`Reason.RANGE` its values), so a decline without one
of them is a finding.

Two kinds:

- *must not fold* (:data:`MUST_NOT_FOLD`): folding would be wrong. Training mode (batch
  statistics), an axis that is not the conv output's channel axis, operands that are
  function parameters (unknown at compile time), a batch_norm with no conv before it.
- *may decline*: folding is correct but a pass may reasonably refuse. The conv output
  has another consumer (folding would duplicate the conv), the statistics outputs are
  used (the batch_norm has to stay for them), or a folded constant would leave the
  dtype's range (:attr:`Reason.RANGE`, with a factor-2 margin on each side of a sound
  pass's guard, see :data:`RANGE_SLACK`).

Key idea: the range reason is deliberately looser than any one pass's guard, so a sound
pass never declines without a reason here, while a pass that declines ordinary graphs
(or folds nothing) is caught.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from fuzz.model.case import Block, Case, Topology
from fuzz.model.numerics import dtype_facts, epsilon_dtype
from fuzz.model.tensor import np_dtype

__all__ = ["MUST_NOT_FOLD", "RANGE_SLACK", "Decline", "Reason", "block_reasons"]


class Reason(str, enum.Enum):
    """Why a batch_norm stays (the value is what a report prints)."""

    NO_CONV = "no conv2d feeds the batch_norm"
    TRAINING = "batch_norm has training=True (batch statistics, not moving ones)"
    AXIS = "batch_norm's axis is not the conv output's channel axis"
    NON_CONSTANT = "operands are function parameters, not constants"
    SHARED_CONV = "the conv's output has another consumer (folding would duplicate the conv)"
    STATISTICS = "batch_norm's statistics outputs are used"
    RANGE = "a folded constant would leave the dtype's range"


#: Reasons that make folding wrong: a correct pass leaves such a batch_norm alone.
MUST_NOT_FOLD = frozenset({Reason.NO_CONV, Reason.TRAINING, Reason.AXIS, Reason.NON_CONSTANT})

#: A sound fold keeps ``|bias| <= max / 4`` and ``|scale| <= max`` (see
#: ``fuzz/backends/tvm/fold_batchnorm.py``); a decline counts as justified from ``max / (4 * slack)``
#: and ``max / slack`` on, so rounding in the pass's own float64 arithmetic never makes
#: a justified decline look like a missed fold.
RANGE_SLACK = 2.0


@dataclass(frozen=True)
class Decline:
    """One reason, and what in the case gives it (for a person to read)."""

    reason: Reason
    detail: str

    @property
    def must_not_fold(self) -> bool:
        return self.reason in MUST_NOT_FOLD

    def __str__(self) -> str:
        return f"{self.reason.value} ({self.detail})" if self.detail else self.reason.value


def _range(block: Block) -> str:
    """Why a folded constant of this block leaves its dtype's range, or ""."""
    out_dtype = block.gamma.dtype
    top = dtype_facts(out_dtype).max
    eps = float(np.asarray(block.bn.epsilon, np.float64).astype(np_dtype(epsilon_dtype(out_dtype))))
    with np.errstate(all="ignore"):
        var = block.var.float64()
        denominator = var + eps
        if not np.all((denominator > 0) & np.isfinite(denominator)):
            return "var + eps is not positive and finite"
        gamma = block.gamma.float64() if block.bn.scale else np.ones_like(var)
        scale = gamma / np.sqrt(denominator)
        if not np.all(np.isfinite(scale) & (np.abs(scale) <= top / RANGE_SLACK)):
            return f"|gamma / sqrt(var + eps)| reaches {float(np.max(np.abs(scale))):.3g}"
        beta = block.beta.float64() if block.bn.center else 0.0
        conv_bias = block.bias.float64() if block.bias is not None else 0.0
        bias = beta - (block.mean.float64() - conv_bias) * scale
        if not np.all(np.isfinite(bias) & (np.abs(bias) <= top / (4 * RANGE_SLACK))):
            return f"the folded bias reaches {float(np.max(np.abs(bias))):.3g}"
    return ""


def block_reasons(case: Case) -> tuple[tuple[Decline, ...], ...]:
    """Per block, every reason its batch_norm must or may stay (empty: it must be folded)."""
    out: list[tuple[Decline, ...]] = []
    channel = case.channel_axes()
    for i, block in enumerate(case.blocks):
        reasons: list[Decline] = []
        # per block: a parameter name applies to every block that has that operand, so a
        # block without a conv bias is all constants even when other blocks' biases are not
        parameters = [n for n in case.parameters if block.operand(n) is not None]
        if block.conv is None:
            reasons.append(Decline(Reason.NO_CONV, ""))
        elif not channel[i]:
            reasons.append(
                Decline(
                    Reason.AXIS,
                    f"axis={block.bn.axis}, channel axis {block.conv.channel_axis} "
                    f"of {block.conv.data_layout}",
                )
            )
        if block.bn.training:
            reasons.append(Decline(Reason.TRAINING, ""))
        if parameters:
            reasons.append(Decline(Reason.NON_CONSTANT, ", ".join(parameters)))
        if case.topology is Topology.CONV_SHARED:
            reasons.append(Decline(Reason.SHARED_CONV, "the graph returns it"))
        if case.topology.uses_statistics:
            detail = (
                "returned" if case.topology is Topology.BN_STATS else "the new mean is added to the output"
            )
            reasons.append(Decline(Reason.STATISTICS, detail))
        if block.conv is not None and (why := _range(block)):
            reasons.append(Decline(Reason.RANGE, why))
        out.append(tuple(reasons))
    return tuple(out)
