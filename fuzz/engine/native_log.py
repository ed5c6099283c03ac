"""TVM's own log lines on standard error, counted instead of printed.

TVM's C++ writes some warnings straight to file descriptor 2, past Python's
``sys.stderr``. One of them, ``Warning: BlockBuilder destroyed with remaining blocks!``,
comes with nearly every exception raised inside upstream's pass: the pass's rewriter is
called from C++ (``rewrite_call``), the exception unwinds that C++ mutator while it has
a binding block open, and its builder warns as it is destroyed. Nothing on the Python
side can close that block; a campaign against upstream raises thousands of them, which
buried everything else a run prints.

:class:`NativeLog` points descriptor 2 at a pipe for the duration of a ``with`` block. A
small filter process reads the pipe line by line, counts the lines that match
:data:`NOISE` and passes every other line on to the real standard error, unchanged and
in order; at the end the counts go into the run's summary.

Key idea: filtering at the descriptor is the only way to see what C++ code prints, and a
separate process (not a thread) does it, so that when this process dies of a signal,
what it printed last (TVM's backtrace of a segfault) still gets through. The filter is
in a session of its own and ignores Ctrl-C: it ends when the pipe does, after the
process it serves has said all it has to say.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType

__all__ = ["NOISE", "NativeLog"]

#: TVM log lines that say nothing to a user of the fuzzer, by the name they are counted under.
NOISE: dict[str, str] = {
    "BlockBuilder destroyed with remaining blocks": "Warning: BlockBuilder destroyed with remaining blocks!",
}

#: The filter process: ``python -c _FILTER COUNTS_FILE NOISE_JSON``, the pipe on stdin.
_FILTER = """
import json, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the process it serves; EOF ends it
counts_file, noise = sys.argv[1], {k: v.encode() for k, v in json.loads(sys.argv[2]).items()}
counts = dict.fromkeys(noise, 0)
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    for name, text in noise.items():
        if text in line:
            counts[name] += 1
            break
    else:
        out.write(line)
        out.flush()
with open(counts_file, "w") as f:
    json.dump(counts, f)
"""

#: Seconds to wait at the end of the block for the filter to drain the pipe.
DRAIN_TIMEOUT = 30.0


class NativeLog:
    """Within the block, lines on descriptor 2 that match :data:`NOISE` are counted in
    :attr:`counts` (known after the block) and not printed; every other line is passed on."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = dict.fromkeys(NOISE, 0)
        self._saved: int | None = None
        self._filter: subprocess.Popen[bytes] | None = None
        self._counts_file: Path | None = None

    def __enter__(self) -> NativeLog:
        sys.stderr.flush()
        fd, name = tempfile.mkstemp(prefix="bnfuzz-native-log-", suffix=".json")
        os.close(fd)
        self._counts_file = Path(name)
        self._saved = os.dup(2)
        read, write = os.pipe()
        try:
            self._filter = subprocess.Popen(
                [sys.executable, "-c", _FILTER, name, json.dumps(NOISE)],
                stdin=read,
                stdout=self._saved,
                stderr=self._saved,
                start_new_session=True,  # not in the job's process group: a Ctrl-C there is not for it
            )
        finally:
            os.close(read)
        os.dup2(write, 2)
        os.close(write)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        assert self._saved is not None and self._filter is not None and self._counts_file is not None
        sys.stderr.flush()
        os.dup2(self._saved, 2)  # closes this process's write end of the pipe
        os.close(self._saved)
        try:
            # The filter ends when every write end is closed; a process started inside the
            # block that still runs holds one (it inherited descriptor 2), and then the
            # counts are not known yet: they stay 0.
            self._filter.wait(timeout=DRAIN_TIMEOUT)
            self.counts.update(json.loads(self._counts_file.read_text() or "{}"))
        except (subprocess.TimeoutExpired, OSError, ValueError):
            pass
        finally:
            self._counts_file.unlink(missing_ok=True)

    @property
    def total(self) -> int:
        return sum(self.counts.values())
