"""Root causes: why upstream's pass does what a corpus entry shows, named.

:func:`cause_of` gives a :class:`Cause`: a stable name (``key``), a snippet of the line of
``FoldBatchnormToConv2D`` responsible (quoted from the installed TVM by the issue text),
and an explanation with the entry's own numbers. Entries with one cause fail at the same
place for the same reason, so they are one upstream issue, however many attributes they
differ in: float16, bfloat16, float64 and a float64 ``out_dtype`` all meet the float32
epsilon of one line. :func:`root_cause` is the identity issues are grouped and deduplicated
by: the cause's key where one is on record, otherwise the entry's signature.

Key idea: a cause is recognised from the entry's structure (symptom, exception type,
classified attributes), never from its message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fuzz.model.attributes import classify
from fuzz.model.case import Case, kernel_to_oihw
from fuzz.model.pipeline import DEFAULT_PIPELINE
from fuzz.oracle.verdict import Symptom
from fuzz.store.corpus import Entry

__all__ = ["HEADLINES", "Cause", "cause_of", "root_cause"]


#: Each cause's key and its headline.
HEADLINES = {
    "epsilon-float32": "adds epsilon as a float32 scalar whatever the dtype",
    "iohw-reshape": "calls a missing reshape method for IOHW kernels",
    "training-ignored": "ignores training=True",
    "axis-ignored": "ignores the batch_norm's axis",
    "scale-ignored": "ignores scale=False",
    "center-ignored": "ignores center=False",
    "bias-nchw-shaped": "adds the folded bias on the NCHW channel axis whatever the data layout",
    "weights-overflow": "folds scales into weights that overflow the dtype",
    "scale-underflow": "stores a subnormal folded scale",
}

#: What adding an NCHW-shaped bias to a conv output of another layout does, per symptom.
_WRONG_AXIS_BIAS = {
    Symptom.SIGNATURE_CHANGE: "it broadcasts, and the output's shape changes.",
    Symptom.OUT_OF_TOLERANCE: "the shapes happen to line up, and each channel gets another's bias.",
    Symptom.PASS_EXCEPTION: "the shapes do not broadcast, and emitting the add raises.",
    Symptom.ILL_FORMED: "the add's result no longer has the type of the binding it replaces.",
}


@dataclass(frozen=True)
class Cause:
    """One reason upstream's pass goes wrong."""

    #: a stable name, e.g. ``epsilon-float32``
    key: str
    #: text of the line responsible, to find it in the installed pass
    snippet: str
    #: the explanation, with the numbers of the entry it was made for
    text: str

    @property
    def headline(self) -> str:
        """The cause in a few words, after the pass's name in a title."""
        return HEADLINES[self.key]


def root_cause(entry: Entry) -> str:
    """What one upstream issue stands for: the cause's key, or the signature if none is known."""
    cause = cause_of(entry)
    return f"cause:{cause.key}" if cause is not None else f"signature:{entry.signature}"


def _scale(case: Case) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Upstream's folded scale ``gamma / sqrt(var + eps)`` (eps rounded to float32, as it
    does) and folded weight ``W * scale`` in OIHW, both exact in float64."""
    block = case.blocks[0]
    assert block.conv is not None and block.weight is not None
    eps = float(np.float32(block.bn.epsilon))
    scale = block.gamma.float64() / np.sqrt(block.var.float64() + eps)
    weight = kernel_to_oihw(block.conv, block.weight.float64())
    return scale, weight * scale.reshape(-1, 1, 1, 1)


def cause_of(entry: Entry) -> Cause | None:
    """Why upstream's pass does what ``entry`` shows; None for a bug with no explanation on
    record, and for an entry of another pass than upstream."""
    case, essentials = entry.case, dict(classify(entry.case))
    block = case.blocks[0]
    conv = block.conv
    symptom, error_type = entry.symptom, entry.error_type
    if entry.pass_name != "upstream" or conv is None or entry.pipeline not in (None, DEFAULT_PIPELINE):
        return None
    if symptom is Symptom.PASS_EXCEPTION and error_type == "TypeError" and block.var.dtype != "float32":
        return Cause(
            "epsilon-float32",
            'FloatImm("float32"',
            f"The pass adds epsilon to the variance as a float32 scalar, whatever the variance's dtype "
            f"(here {block.var.dtype}"
            + (f", as the conv's out_dtype is {conv.out_dtype}" if essentials["out_dtype"] != "same" else "")
            + "). Relax binary operators need both operands in one dtype, so the pass raises instead of "
            "folding or leaving the graph alone.",
        )
    if symptom is Symptom.PASS_EXCEPTION and essentials["kernel_layout"] == "IOHW":
        return Cause(
            "iohw-reshape",
            "wt.reshape(",
            "`wt` is a `relax.Call` expression, which has no `reshape` method; the OIHW branch just above "
            "uses `relax.op.reshape(wt, ...)`. Every IOHW kernel (the layout of transposed-conv weights "
            "imported from other frameworks) makes the pass raise.",
        )
    if symptom is Symptom.MUST_NOT_FOLD:
        attrs_line = "bn_attrs = bn_op.attrs"
        if essentials["training"] == "True":
            return Cause(
                "training-ignored",
                attrs_line,
                "The rewriter reads only `epsilon` from the batch_norm's attributes; it never checks "
                "`training`. With training=True, batch_norm normalises with the mean and variance of the "
                "batch itself, not the moving statistics the fold bakes into the weights, so the fold "
                "changes the result.\n\n"
                "TVM's own test of the pass "
                "(`tests/python/relax/test_transform_fold_batch_norm_to_conv2d.py`) builds its "
                "batch_norm with the op's default, training=True, compares the folded program "
                "with `DecomposeOpsForInference` of the unfolded one, which ignores `training`, and asserts "
                "that no batch_norm is left. It passes only because the pass ignores `training` too: "
                "`LegalizeOps` lowers the same batch_norm to batch statistics. The test means an "
                "inference-mode batch_norm, so a fix of the pass has to change the test to "
                "`training=False`, not the other way round.",
            )
        if essentials["axis"] == "non-channel":
            return Cause(
                "axis-ignored",
                attrs_line,
                f"The rewriter reads only `epsilon` from the batch_norm's attributes; it never checks "
                f"`axis`. Here batch_norm normalises axis {block.bn.axis}, while the fold scales the conv's "
                f"output channels (axis {conv.channel_axis} in {conv.data_layout}).",
            )
    if symptom is Symptom.OUT_OF_TOLERANCE and essentials["scale"] == "False":
        scale, _ = _scale(case)
        ones = 1 / np.sqrt(block.var.float64() + float(np.float32(block.bn.epsilon)))
        return Cause(
            "scale-ignored",
            "wt = relax.op.divide(bn_weight, dino)",
            f"The folded scale multiplies by gamma although scale=False tells batch_norm to ignore gamma: "
            f"the fold uses gamma / sqrt(var + eps) = {scale[0]:.7g} where batch_norm computes "
            f"1 / sqrt(var + eps) = {ones[0]:.7g} (channel 0).",
        )
    if symptom is Symptom.OUT_OF_TOLERANCE and essentials["center"] == "False":
        scale, _ = _scale(case)
        mean, beta = block.mean.float64()[0], block.beta.float64()[0]
        return Cause(
            "center-ignored",
            "bs = relax.op.subtract(bn_bias",
            f"The folded bias adds beta although center=False tells batch_norm to ignore beta: the fold "
            f"adds beta - mean * s = {beta - mean * scale[0]:.7g} where batch_norm adds "
            f"-mean * s = {-mean * scale[0]:.7g} (channel 0, s = gamma / sqrt(var + eps)).",
        )
    wrong_axis = symptom in _WRONG_AXIS_BIAS and (
        symptom is not Symptom.PASS_EXCEPTION or error_type == "ValueError"
    )
    if essentials["data_layout"] != "NCHW" and wrong_axis:
        assert symptom is not None
        c = block.gamma.shape[0]
        return Cause(
            "bias-nchw-shaped",
            "bs_args = relax.op.reshape(bs",
            f"The folded bias is reshaped to (1, {c}, 1, 1), the channel position of NCHW, whatever "
            f"the conv's data_layout. The conv's output here is {conv.data_layout}, so the bias is "
            f"added along the wrong axis: {_WRONG_AXIS_BIAS[symptom]}",
        )
    finfo = np.finfo(np.dtype(case.dtype)) if case.dtype != "bfloat16" else None
    if symptom is Symptom.FINITE_TO_NONFINITE and finfo is not None:
        scale, folded = _scale(case)
        return Cause(
            "weights-overflow",
            "wt_conv = relax.op.multiply(conv_weight, wt)",
            f"The pass scales the weights before the convolution: W' = W * s with "
            f"s = gamma / sqrt(var + eps) = {scale.max():.7g}. The largest |W'| is "
            f"{np.abs(folded).max():.7g}, above the largest finite {case.dtype} ({float(finfo.max):.7g}), "
            f"so W' is inf, and the convolution turns inf into inf or NaN (inf * 0 from padding or a zero "
            f"input, inf - inf in a sum). Without the fold, the convolution's sum is scaled by s after it "
            f"is computed and stays finite.",
        )
    if symptom is Symptom.OUT_OF_TOLERANCE and finfo is not None:
        scale, _ = _scale(case)
        smallest = float(np.abs(scale[scale != 0]).min()) if (scale != 0).any() else 0.0
        tiny = float(finfo.smallest_normal)
        if 0 < smallest < tiny:
            bits = int(np.floor(np.log2(smallest / float(finfo.smallest_subnormal)))) + 1
            return Cause(
                "scale-underflow",
                "wt = relax.op.divide(bn_weight, dino)",
                f"The folded scale s = gamma / sqrt(var + eps) = {smallest:.4g} is below the smallest "
                f"normal {case.dtype} ({tiny:.4g}), so it is stored as a subnormal number with only "
                f"{bits} significant bits, and the folded weight and bias (beta - mean * s) carry that "
                f"error. The unfolded graph never forms s: it normalises first and then multiplies by gamma.",
            )
    return None
