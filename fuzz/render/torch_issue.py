"""Issues for PyTorch's folds, in the shape of PyTorch's bug template ("🐛 Describe the bug"
with the code and its output, "Versions"), naming the function at fault."""

from __future__ import annotations

from fuzz.model.attributes import classify
from fuzz.oracle.verdict import Symptom
from fuzz.render.issue import Issue
from fuzz.render.torch_script import render_torch_script, subject
from fuzz.render.wording import wording
from fuzz.store.corpus import Entry

__all__ = ["AT_FAULT", "AT_FAULT_FOR", "at_fault", "torch_issue"]

#: Where each fold's weights are computed: every one of PyTorch's module folds ends here.
WEIGHTS = (
    "`fuse_conv_bn_weights` (`torch/nn/utils/fusion.py`), which computes "
    "`conv_w * (bn_w * torch.rsqrt(bn_rv + bn_eps))` in the weights' own dtype"
)
#: Fold (after ``torch:``) -> the code at fault, as the issue names it.
AT_FAULT: dict[str, str] = {
    "fuse_conv_bn_eval": WEIGHTS,
    "fuse_modules": f"`fuse_conv_bn` (`torch/ao/quantization/fuser_method_mappings.py`), through {WEIGHTS}",
    "fx": f"`fuse` (`torch/fx/experimental/optimization.py`), through {WEIGHTS}",
    "inductor": "the binary folding of Inductor's freezing passes "
    "(`torch/_inductor/fx_passes/binary_folding.py`, `_create_new_conv_node`): it folds the "
    "decomposed batch norm's multiply into the convolution's weight (`weight * other`) as a constant "
    "of the weight's dtype",
}
#: The transposed branch of ``fuse_conv_bn_weights``, which ignores groups.
GROUPED_TRANSPOSE = (
    "the `transpose=True` branch of `fuse_conv_bn_weights` (`torch/nn/utils/fusion.py`): it reshapes "
    "the per-output-channel factor to `[1, -1, 1, ...]` against a ConvTranspose weight of shape "
    "`(in_channels, out_channels // groups, ...)`, so with groups the factor does not line up with the "
    "output channels: it broadcasts the weight to another shape (or fails to), and the folded module's "
    "weight and bias no longer fit its convolution"
)
#: (fold, conditions) -> the code at fault where a finding has those classifying attributes
#: (:mod:`fuzz.model.attributes`; ``attribute=value`` joined by commas, a value ending in ``*`` a
#: prefix), in place of :data:`AT_FAULT`; the first that holds is named.
AT_FAULT_FOR: dict[tuple[str, str], str] = {
    ("fuse_conv_bn_eval", "groups=grouped,conv_op=ConvTranspose*"): GROUPED_TRANSPOSE,
    ("fuse_modules", "groups=grouped,conv_op=ConvTranspose*"): "`fuse_convtranspose_bn` "
    f"(`torch/ao/quantization/fuser_method_mappings.py`), through {GROUPED_TRANSPOSE}",
    ("fuse_modules", "conv_op=ConvTranspose*"): "`get_fuser_method` "
    "(`torch/ao/quantization/fuser_method_mappings.py`): it asserts for a ConvTranspose, BatchNorm and "
    "ReLU list, which has no entry in `_DEFAULT_OP_LIST_TO_FUSER_METHOD`, where `fuse_modules`' "
    'docstring says "All other sequences are left unchanged"',
    ("fuse_modules", "training=True"): "`fuse_conv_bn` (`torch/ao/quantization/fuser_method_mappings.py`): "
    "outside QAT it hands every conv + batch norm pair to `fuse_conv_bn_eval`, which asserts running "
    "statistics, instead of leaving alone a batch norm with `track_running_stats=False` (as "
    "`torch.fx.experimental.optimization.fuse` does: `if not bn.track_running_stats: continue`)",
    ("inductor", "dtype=float64"): "`_is_packable_convolution` in Inductor's freezing passes "
    "(`torch/_inductor/fx_passes/mkldnn_fusion.py`): it lets the oneDNN weight-prepack pattern take a "
    "float64 convolution, which oneDNN has no kernel for (`_is_packable_linear`, next to it, returns "
    "False for float64)",
}


def at_fault(entry: Entry) -> str:
    """The code at fault for ``entry``: by its fold, or by the fold and an attribute."""
    fold = entry.pass_name.partition(":")[2]
    attributes = classify(entry.case)
    for (name, conditions), text in AT_FAULT_FOR.items():
        if name == fold and all(_holds(c, attributes) for c in conditions.split(",")):
            return text
    return AT_FAULT[fold]


def _holds(condition: str, attributes: dict[str, str]) -> bool:
    attribute, _, value = condition.partition("=")
    got = attributes.get(attribute, "")
    return got.startswith(value[:-1]) if value.endswith("*") else got == value


def torch_issue(entry: Entry, actual: str, minimal: list[str], shown: str) -> Issue:
    """The issue for an entry found against ``torch:NAME``: ``actual`` is what the outputs
    show (:mod:`fuzz.render.report` words it), ``minimal`` the minimality notes, ``shown`` the
    entry's non-default attributes."""
    words = wording(entry.symptom, entry.symptom_name)
    function = subject(entry)
    title = f"{function} {words.title(entry.error_type)}" + (f" ({shown})" if shown else "")
    fault = at_fault(entry)
    why = (
        f"The code at fault is {fault}. Where `gamma / sqrt(var + eps)` times a weight leaves the "
        "dtype's range the folded weight is inf, and an input that meets it with a zero gives NaN, "
        "although the unfolded module's output is finite: the factor could be applied after the "
        "convolution, or the fold skipped, where it overflows."
        if entry.symptom is Symptom.FINITE_TO_NONFINITE
        else f"The code at fault is {fault}. Where `gamma / sqrt(var + eps)` times a weight falls below "
        "the dtype's normal range the folded weight keeps fewer significant bits, or becomes 0, and the "
        "output loses the precision the unfolded module keeps: the factor could be applied after the "
        "convolution where it underflows."
        if entry.symptom is Symptom.OUT_OF_TOLERANCE
        else f"The code at fault is {fault}."
    )
    body = "\n".join(
        [
            "### 🐛 Describe the bug",
            "",
            f"Folding a convolution and the batch norm after it with {function} on an eval module "
            f"{words.title(entry.error_type)}. Expected: {words.expected} (The reference is the same "
            "module unfolded, in eval mode, which stays within rounding error of the exact result.)",
            "",
            f"Actual: {actual}",
            "",
            why,
            "",
            "Save as `repro.py` and run `python repro.py` (it needs torch and numpy, and exits 1 while "
            "the bug shows):",
            "",
            "```python",
            render_torch_script(entry).rstrip("\n"),
            "```",
            "",
            "```",
            entry.message,
            "```",
            "",
            "The module was shrunk and simplified by a property-based fuzzer (bnfold-fuzz); each "
            "remaining non-default attribute and value was simplified once more and the bug re-checked:",
            "",
            *minimal,
            "",
            "### Versions",
            "",
            f"PyTorch version: {entry.provenance.get('torch', 'unknown')} (CPU)",
            f"Python version: {entry.provenance.get('python', 'unknown')}",
            f"OS: {entry.provenance.get('platform', 'unknown')}",
            "",
            "(bnfold-fuzz's signature for this bug, used to avoid duplicate reports, is "
            f"`{entry.signature}`.)",
            "",
        ]
    )
    return Issue(
        f"pytorch:{entry.signature}",
        title,
        body,
        (entry.signature,),
        entry.pass_name,
        project="pytorch/pytorch",
    )
