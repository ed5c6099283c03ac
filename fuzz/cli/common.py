"""What the ``bnfuzz`` commands share: exit codes, option value parsers, the TVM check,
pass names as usage errors, and the files a folder argument stands for."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from fuzz.errors import EXIT_ERROR, UsageError

__all__ = [
    "EXIT_CLEAN",
    "EXIT_FINDINGS",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "SUPPORTED_TVM",
    "comma_names",
    "entry_files",
    "positive",
    "require_tvm",
    "resolve",
]

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, EXIT_ERROR
#: Ctrl-C: the campaign stopped early; what it found is written and summarised.
EXIT_INTERRUPTED = 130


#: The TVM releases the fuzzer is tested on (``fuzz/backends/tvm/compat.py`` keeps their differences;
#: the nightly matrix runs each). ``BNFUZZ_ANY_TVM=1`` tries another one, e.g. a build of
#: TVM's main branch.
SUPPORTED_TVM = ("0.25", "0.26", "0.27")


def require_tvm() -> None:
    """A usage error, before any work, if TVM cannot be imported or is not a supported release."""
    try:
        import tvm
    except (ImportError, OSError) as exc:  # OSError: a TVM library that does not load
        raise UsageError(
            f"cannot import TVM: {type(exc).__name__}: {exc}. Install a supported apache-tvm "
            f"({', '.join(SUPPORTED_TVM)}) with `make setup` (or `make setup TVM=0.26`)"
        ) from None
    version = str(getattr(tvm, "__version__", "unknown"))
    supported = any(version.startswith(v + ".") for v in SUPPORTED_TVM)
    if not supported and os.environ.get("BNFUZZ_ANY_TVM") != "1":
        raise UsageError(
            f"TVM {version} is not supported (supported: {', '.join(SUPPORTED_TVM)}); "
            "set BNFUZZ_ANY_TVM=1 to try it anyway"
        )


def resolve(name: str, complete_fold: bool | None = None) -> Any:
    """The fold named ``name`` (:func:`fuzz.backends.resolve_fold`); an unknown name, or a
    backend not installed, is a usage error (exit 2)."""
    from fuzz.backends import resolve_fold
    from fuzz.errors import BnfuzzError

    try:
        return resolve_fold(name, complete_fold=complete_fold)
    except BnfuzzError as exc:
        raise UsageError(str(exc)) from None


def entry_files(paths: list[Path]) -> list[Path]:
    """The files named, and the JSON files in the folders named and their subfolders."""
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.rglob("*.json")) if path.is_dir() else [path])
    return files


def positive(kind: type, zero: bool = False) -> Any:
    """A parser of positive numbers of ``kind`` (or zero too, with ``zero``)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            expected = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(f"must be {'zero or ' if zero else ''}positive, got {text}")
        return value

    return parse


def comma_names(given: str | None, option: str, kind: str, known: list[str]) -> list[str]:
    """A comma-separated option's names, each checked against ``known`` (all if not given)."""
    if given is None:
        return known
    names = [name.strip() for name in given.split(",") if name.strip()]  # user input: A,B
    if not names:
        raise UsageError(f"{option} {given!r}: expected a comma-separated list of {', '.join(known)}")
    for name in names:
        if name not in known:
            raise UsageError(
                f"{option} {given!r}: unknown {kind} {name!r}; expected some of {', '.join(known)}"
            )
    return names
