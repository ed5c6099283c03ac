"""The fuzzer's own errors: one base class, :class:`BnfuzzError`, for everything that is
wrong with what it was given or where it runs (a malformed case or corpus file, an
unknown pass, a bad pipeline, a GitHub request refused, a worker that will not start),
as opposed to a *finding* (a bug of the pass under test, a value) and to a bug of the
fuzzer itself (any other exception, which propagates with its traceback).

Each subclass lives beside the code that raises it (``fuzz.model.case.CaseError``,
``fuzz.store.corpus.EntryError``, ...) and keeps the builtin base its callers catch
(``ValueError``, ``LookupError``, ``RuntimeError``). The command line maps the base to
one line on standard error and :data:`EXIT_ERROR`, in one place (``fuzz.cli.main``).
"""

from __future__ import annotations

__all__ = ["EXIT_ERROR", "BnfuzzError", "CaseOutsideBackend", "UsageError"]

#: The exit code of ``bnfuzz`` for a :class:`BnfuzzError` (and for bad arguments).
EXIT_ERROR = 2


class BnfuzzError(Exception):
    """Bad input or environment, said in one line.

    ``detail``: what is wrong; ``field``: the input at fault (a case field, a corpus
    file's field, a command-line option), where there is one; ``where``: the file it is
    in, if any. The message is ``where: field: detail``, without the parts not given.
    """

    def __init__(self, detail: str, *, field: str | None = None, where: str | None = None) -> None:
        super().__init__(": ".join(part for part in (where, field, detail) if part))
        self.detail = detail
        self.field = field
        self.where = where


class CaseOutsideBackend(BnfuzzError, ValueError):
    """A fold's framework cannot express or run a case even unfolded (TVM's frontend
    rejects the model, PyTorch or ONNX Runtime cannot run the unfolded program): the case
    is outside that backend, which says nothing about its fold. Each backend raises its
    own subclass, with the framework's reason."""


class UsageError(BnfuzzError):
    """Bad command-line input (an option's value, an output folder that cannot be written):
    reported in one line, exit 2."""
