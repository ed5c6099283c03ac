"""How each symptom is put to a maintainer: the one table the issue text and the
reproducer script read (:data:`WORDING`), so a new symptom is worded in one place.

``headline`` follows the pass's name in an issue title ("FoldBatchnormToConv2D turns
finite outputs into inf/NaN"); ``{error_type}`` in it is the exception's type or the
signal. ``expected`` is the issue's expected behaviour for the pass alone. ``shows`` says
how the script shows the bug, ``exits`` what its exit status means.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuzz.oracle.verdict import Symptom

__all__ = ["WORDING", "Wording", "wording"]


@dataclass(frozen=True)
class Wording:
    headline: str
    expected: str
    shows: str = "(exits 1 while the bug is present)"
    exits: str = "Exits 1 while the bug is present, 0 once fixed."

    def title(self, error_type: str) -> str:
        return self.headline.format(error_type=error_type or "an exception")


_UNCHANGED = "The pass folds correctly or leaves the graph unchanged."

WORDING: dict[Symptom, Wording] = {
    Symptom.PASS_EXCEPTION: Wording(
        "raises {error_type}",
        "The pass either folds the batch_norm correctly or leaves the graph unchanged.",
    ),
    Symptom.MUST_NOT_FOLD: Wording(
        "folds a batch_norm it must leave alone",
        "The pass leaves the graph unchanged: folding is only valid for an inference "
        "batch_norm on the conv's output-channel axis.",
    ),
    Symptom.MISSED_FOLD: Wording(
        "leaves a batch_norm it could fold",
        "The pass folds the batch_norm into the conv: it is in inference mode, on the "
        "conv's output-channel axis, every operand is a constant, neither the conv's output nor the "
        "statistics have another use, and every folded constant is well inside the dtype's range.",
    ),
    Symptom.FINITE_TO_NONFINITE: Wording(
        "turns finite outputs into inf/NaN",
        "Outputs that are finite without the pass stay finite after it. Here "
        "every intermediate of the unfolded graph stays well inside the dtype's range (checked with a "
        "rounding-error bound), so a correct fold cannot overflow.",
    ),
    Symptom.OUT_OF_TOLERANCE: Wording(
        "changes results beyond rounding error",
        "After the pass, outputs stay within rounding error of the unfolded graph.",
    ),
    Symptom.SIGNATURE_CHANGE: Wording(
        "changes the shape or dtype of the output",
        "The pass does not change the shapes or dtypes of the function's outputs.",
    ),
    Symptom.IO_CHANGE: Wording(
        "changes the model's inputs or outputs",
        "The model written has the inputs and outputs of the model given, so a caller feeds it "
        "the same names and gets the same outputs back.",
    ),
    Symptom.MUTATES_INPUT: Wording(
        "changes the model it was given",
        "The model passed in is left as it was; the simplified model is a new one.",
    ),
    Symptom.ILL_FORMED: Wording("produces ill-formed IR", "The pass produces well-formed IR."),
    Symptom.NOT_IDEMPOTENT: Wording("is not idempotent", _UNCHANGED),
    Symptom.BUILD_FAILURE: Wording(
        "produces a module that fails to build",
        "The module after the passes builds for llvm, as the module before them does.",
    ),
    Symptom.RUN_FAILURE: Wording(
        "produces a module that fails to run",
        "The module after the passes runs, as the module before them does.",
    ),
    Symptom.CRASH: Wording(
        "crashes the process ({error_type})",
        "The passes, the build and the run finish or raise a Python exception; the process does not die.",
        shows="(the process dies while the bug is present)",
        exits="Crashes (killed by a signal) while the bug is present, exits 0 once fixed.",
    ),
    Symptom.TIMEOUT: Wording(
        "hangs",
        "The passes, the build and the run finish within seconds, as they do on similar graphs.",
        shows="(hangs while the bug is present; an alarm stops it after 300 s)",
        exits="Hangs, stopped by an alarm after 300 s, while the bug is present; exits 0 once fixed.",
    ),
    Symptom.SEQUENTIAL_MISMATCH: Wording(
        "gives different results as a Sequential and as direct calls",
        "With every pass enabled (opt_level=3), `Sequential(passes)(mod)` "
        "and calling the passes one after the other give the same module.",
    ),
}


def wording(symptom: Symptom | None, name: str = "") -> Wording:
    """The wording of ``symptom``; for one without a row (or an entry that is not a bug,
    ``None``), a plain one naming it as ``name``."""
    if symptom is not None and symptom in WORDING:
        return WORDING[symptom]
    return Wording(f"fails: {name or symptom}", _UNCHANGED)
