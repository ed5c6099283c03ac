"""What running a case produces, as values: where it failed, what it returned, and the
facts about the pass, in terms no framework defines.

- :class:`Stage`: where a failure happened (``pass``, ``well-formedness``, ``build``,
  ``run``), or where a finding showed (``compare``, ``worker``).
- :class:`Failure`: an exception of the framework turned into a value: stage, exception
  type name, a short message without backtraces (:func:`summarise_error`).
- :class:`Outputs`: what the program returned, flattened, as float64 arrays plus the
  runtime dtypes and shapes.
- :class:`Execution`: both programs' results, and facts about the pass: did it change
  the module, did it remove a batch_norm, is it idempotent, how long things took.

Key idea: these types import no framework, so everything that only reads results (the
oracle, finding files, corpus entries, reports) can be imported without one.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MAX_MESSAGE", "Execution", "Failure", "Outputs", "Stage", "summarise_error"]


#: Longest message :func:`summarise_error` returns.
MAX_MESSAGE = 600

# Lines or fragments that carry no information for a reader of a Failure.
_NOISE = re.compile(r"# Metadata omitted\. Use show_meta=True in script\(\) method to show it\.\s*")
# ``ir.Op(span=None, ..., name="relax.nn.batch_norm", ...)`` -> ``Op(relax.nn.batch_norm)``
_OP_REPR = re.compile(r'ir\.Op\(span=.*?name="([^"]+)".*?support_level=\d+\)')
# Backtrace lines: Python's, or TVM's C++ frames (before tvm-ffi, TVM put the C++
# backtrace inside the message, ahead of the text that matters).
_BACKTRACE = re.compile(r"^\s*(Traceback \(|Stack trace:|File \"|\d+: |at |\[bt\])")


def summarise_error(exc: BaseException) -> str:
    """An exception's message on one line, without backtraces or IR metadata notes."""
    text = _OP_REPR.sub(r"Op(\1)", _NOISE.sub("", str(exc)))
    lines = [line.strip() for line in text.splitlines() if not _BACKTRACE.match(line)]
    message = " ".join(line for line in lines if line) or type(exc).__name__
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


class Stage(str, enum.Enum):
    """Where a :class:`Failure` happened (pass, well-formedness, build, run), or where a
    finding showed: also in comparing the outputs, or in a worker process that died."""

    PASS = "pass"
    WELL_FORMED = "well-formedness"
    BUILD = "build"
    RUN = "run"
    COMPARE = "compare"
    WORKER = "worker"


@dataclass(frozen=True)
class Failure:
    """A TVM exception as a value. ``message`` is short and backtrace-free."""

    stage: Stage
    error_type: str
    message: str

    @classmethod
    def from_exception(cls, stage: Stage, exc: BaseException) -> Failure:
        return cls(stage, type(exc).__name__, summarise_error(exc))


@dataclass(frozen=True)
class Outputs:
    """The VM's results, flattened in return order, each converted to float64."""

    values: tuple[np.ndarray[Any, Any], ...]
    dtypes: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]

    @classmethod
    def of_arrays(cls, arrays: list[np.ndarray[Any, Any]]) -> Outputs:
        """A program's results as NumPy arrays, in return order: their dtypes and shapes,
        and their values in float64."""
        return cls(
            values=tuple(a.astype(np.float64) for a in arrays),
            dtypes=tuple(str(a.dtype) for a in arrays),
            shapes=tuple(tuple(int(d) for d in a.shape) for a in arrays),
        )


@dataclass(frozen=True)
class Execution:
    """One case through one pass.

    ``baseline`` is the unfolded module built and run; ``folded`` the module after
    the pass. ``changed``: the pass output is not structurally equal to its input.
    ``fired``: fewer ``relax.nn.batch_norm`` calls after the pass. ``idempotent``:
    the pass applied to its own output returns a structurally equal module (False if
    that second application raises; None if the first one failed or was not asked for).
    ``pass_seconds`` times the first pass application; ``build_seconds`` sums the
    time to compile, load and run both programs (running is microseconds).
    ``op_counts``: how many of each operator the module had before and after the
    pass (see :func:`count_ops`); None if the pass raised. ``baseline`` and ``folded``
    are None where nothing was run: the pass changed nothing and the unchanged module's
    numbers were not asked for (``execute(..., unchanged=False)``); ``baseline`` is also
    None where the pass raised or returned ill-formed IR (judged without numbers).
    """

    baseline: Outputs | Failure | None
    folded: Outputs | Failure | None
    changed: bool
    fired: bool
    idempotent: bool | None
    pass_seconds: float
    build_seconds: float
    op_counts: tuple[dict[str, int], dict[str, int]] | None = None
    #: the unfolded program was not run: the folded outputs cleared every numeric rule on
    #: their own (``execute(..., baseline_needed=...)``), so it could change no verdict
    baseline_skipped: bool = False
    #: a backend that rewrites a model (an ONNX tool): its inputs and outputs before and
    #: after, described, where they differ; None where they are the same or not compared
    interface: tuple[str, str] | None = None
    #: a backend that is handed a model (an ONNX tool) changed that model
    mutated_input: bool = False
