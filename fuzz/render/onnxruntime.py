"""What goes to ONNX Runtime (``onnxruntime:LEVEL``): a reproducer script that needs only
``onnx``, ``onnxruntime`` and ``numpy``, and an issue in the shape of ONNX Runtime's bug
template (describe the issue, to reproduce, urgency, platform, OS version, installation,
version, API, architecture, execution provider), naming the rewrite at fault:
``ConvBNFusion`` in ``onnxruntime/core/optimizer/conv_bn_fusion.cc``, which folds at
``ORT_ENABLE_BASIC``.

The script writes the entry's model with ``onnx.helper`` (exact values), runs it with
``ORT_DISABLE_ALL`` and at the entry's level, prints both, and exits 1 while the bug shows
(the same checks as every script: :func:`fuzz.render.script_parts.bug_lines`), 0 once it
is fixed.
"""

from __future__ import annotations

from fuzz.oracle.verdict import Symptom
from fuzz.render.issue import Issue
from fuzz.render.script_parts import onnx_script_head, verdict_lines
from fuzz.render.skeleton import (
    MINIMALITY,
    footnote,
    one_entry,
    one_entry_issue,
    steps,
)
from fuzz.render.wording import wording
from fuzz.store.corpus import Entry

__all__ = ["ARCHITECTURES", "LEVEL_NAMES", "RULE", "issue", "level_name", "script"]

#: ``onnxruntime:LEVEL`` -> the optimization level's name in ONNX Runtime's API.
LEVEL_NAMES = {"basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}
#: The rewrite that fuses Conv and BatchNormalization, where ONNX Runtime's source has it.
RULE = "`ConvBNFusion` (`onnxruntime/core/optimizer/conv_bn_fusion.cc`)"


def level_name(entry: Entry) -> str:
    """The optimization level the entry's fold runs at, as ONNX Runtime's API names it."""
    return LEVEL_NAMES[entry.pass_name.partition(":")[2]]


def script(entry: Entry) -> str:
    """A standalone reproducer for an entry found against ``onnxruntime:LEVEL``."""
    level = level_name(entry)
    version = entry.provenance.get("onnxruntime", "")
    title = f"Reproducer: {entry.signature} in ONNX Runtime's graph optimizer at {level}" + (
        f" (onnxruntime {version})." if version else "."
    )
    lines = [
        *onnx_script_head(entry, title, "onnx, onnxruntime and numpy", []),
        "before_out = run(model)",
        'print("without graph optimizations:", *before_out, sep="\\n")',
        "try:",
        f"    after_out = run(model, ort.GraphOptimizationLevel.{level})",
        "except Exception as exc:",
        f'    print(f"BUG: the session at {level} fails where the unoptimized one runs: {{exc}}")',
        "    sys.exit(1)",
        f'print("at {level} (Conv and BatchNormalization fused):", *after_out, sep="\\n")',
        *verdict_lines(entry, "the fusion behaves correctly on this model"),
    ]
    return "\n".join(lines) + "\n"


#: The machine's architecture (``platform.machine()``) as ONNX Runtime's template lists it.
ARCHITECTURES = {"x86_64": "X64", "amd64": "X64", "i686": "X86", "aarch64": "ARM64", "arm64": "ARM64"}


def _architecture(entry: Entry) -> str:
    """The entry's machine architecture in the template's words (as recorded, if unlisted)."""
    machine = entry.provenance.get("machine")
    arch = machine.get("cpu", {}).get("arch", "") if isinstance(machine, dict) else ""
    return ARCHITECTURES.get(str(arch).lower(), str(arch) or "unknown")


def _platform(entry: Entry) -> str:
    """The operating system the entry was measured on (the first word of its platform)."""
    return str(entry.provenance.get("platform", "unknown")).split("-")[0]


def _issue(entry: Entry, actual: str, minimal: list[str], shown: str) -> Issue:
    """The issue for an entry found against ``onnxruntime:LEVEL``: ``actual`` is what the
    outputs show (:mod:`fuzz.render.report` words it), ``minimal`` the minimality notes, ``shown``
    the entry's non-default attributes."""
    level = level_name(entry)
    words = wording(entry.symptom, entry.symptom_name)
    version = entry.provenance.get("onnxruntime", "unknown")
    title = f"[Bug] Conv+BatchNormalization fusion at {level} {words.title(entry.error_type)}" + (
        f" ({shown})" if shown else ""
    )
    overflow = entry.symptom is Symptom.FINITE_TO_NONFINITE
    why = (
        [
            f"{RULE} multiplies the Conv weights by `scale / sqrt(var + epsilon)` in the model's "
            "dtype. Where that product leaves the dtype's range the folded weights are inf, and an "
            "input that meets them with a zero gives NaN: the unfused graph's output is finite.",
            "",
        ]
        if overflow
        else [f"The rewrite at fault is {RULE}, which runs at {level}.", ""]
    )
    body = "\n".join(
        [
            "### Describe the issue",
            "",
            f"With graph optimizations at `{level}` ({RULE} runs at `ORT_ENABLE_BASIC` and every level "
            "above it, `ORT_ENABLE_ALL`, the default of `SessionOptions.graph_optimization_level`, "
            "included), a "
            f"Conv followed by BatchNormalization gives other outputs than the same model with "
            f"`ORT_DISABLE_ALL`. Expected: {words.expected}",
            "",
            f"Actual: {actual}",
            "",
            *why,
            "### To reproduce",
            "",
            *steps(script(entry), "(it needs onnx, onnxruntime and numpy, and exits 1 while the bug shows)"),
            MINIMALITY,
            "",
            *minimal,
            "",
            "### Urgency",
            "",
            "None (found by fuzzing; no deadline).",
            "",
            "### Platform",
            "",
            _platform(entry),
            "",
            "### OS Version",
            "",
            str(entry.provenance.get("platform", "unknown")),
            "",
            "### ONNX Runtime Installation",
            "",
            "Released Package",
            "",
            "### ONNX Runtime Version or Commit ID",
            "",
            str(version),
            "",
            "### ONNX Runtime API",
            "",
            "Python",
            "",
            "### Architecture",
            "",
            _architecture(entry),
            "",
            "### Execution Provider",
            "",
            "Default CPU",
            "",
            footnote([entry.signature]),
            "",
        ]
    )
    return one_entry_issue(entry, title, body)


#: The issue of an entry (one per issue: its signature is its root cause).
issue = one_entry(_issue)
