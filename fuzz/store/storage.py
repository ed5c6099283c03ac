"""Files on disk: the name a signature is stored under, and writes that are never half done.

Imports nothing of TVM, Hypothesis or the rest of the fuzzer, so that every stage that
writes a file (findings, corpus entries, reports) can use it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["file_name", "write_atomic"]


def file_name(signature: str) -> str:
    """The file a finding or entry with ``signature`` is stored in."""
    return "".join(c if c.isalnum() or c in "-_=" else "_" for c in signature)[:120] + ".json"


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: read once: setting and restoring the umask per write would race with other threads
_UMASK = _read_umask()


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` by a rename: readers see the old file or the new one, never
    half; if the write fails (a full disk), the old file stays and no temporary is left.
    The file gets the permissions the umask gives a new file (``mkstemp`` alone would
    leave it readable by its owner only)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as out:
            out.write(data)
            out.flush()
            os.fchmod(out.fileno(), 0o666 & ~_UMASK)
            os.fsync(out.fileno())  # on disk before the rename makes it visible
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
