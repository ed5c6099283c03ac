"""Crash isolation: check cases in a worker process, so a native crash or a hang in TVM
or in the pass under test becomes a finding instead of the end of the campaign.

:class:`IsolatedChecker` is a :data:`fuzz.engine.campaign.Checker`: it sends each case (and its
pipeline) to one long-lived worker process, which runs :func:`fuzz.engine.campaign.check` with
its own compile cache and sends the :class:`~fuzz.engine.campaign.Checked` back. If the worker
dies (a segfault, an abort), the case is reported as a ``crash`` finding; if it does not
answer within ``timeout`` seconds, it is killed and the case is a ``timeout`` finding.
Either way the next case starts a fresh worker, and the campaign, which runs in the
parent, keeps every finding it has.

Key idea: one worker serves many cases, so isolation costs a pickle round trip per
case, not a process start (importing TVM takes seconds); the worker's start is not
counted against a case's timeout.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from fuzz.backends import resolve_fold, scope_of
from fuzz.engine.check import Checked, check
from fuzz.errors import BnfuzzError
from fuzz.fpenv import flush_requested
from fuzz.model.case import Case
from fuzz.model.pipeline import Pipeline
from fuzz.oracle.execution import Execution, Failure, Stage
from fuzz.oracle.reference import reference
from fuzz.oracle.verdict import Finding, Symptom, Verdict

__all__ = ["IsolatedChecker", "WorkerError"]

#: Seconds a new worker may take to import TVM and get ready.
START_TIMEOUT = 300.0


class WorkerError(BnfuzzError, RuntimeError):
    """The worker could not start, or raised for a reason of our own (a bug, not a finding)."""


def _serve(
    conn: Connection,
    pass_name: str,
    cache: bool,
    cache_dir: str | None,
    complete_fold: bool | None,
    lowering: bool,
    flush: bool | None = None,
) -> None:
    """The worker's loop: receive (case, pipeline), send ("ok", Checked) or ("error", text)."""
    try:
        fold = resolve_fold(pass_name, complete_fold=complete_fold)
        runner = fold.runner(cache_dir or None) if cache else None
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return  # the parent is gone
        if message is None:
            return
        case, pipeline = message
        try:
            conn.send(("ok", check(case, fold, runner, pipeline, lowering=lowering, flush=flush)))
        except Exception as exc:  # our own exception (an invalid case, a bug): the parent re-raises
            conn.send(("raise", exc))


@dataclass(frozen=True)
class _Died:
    symptom: Symptom
    message: str
    #: the signal's name for a crash (``SIGSEGV``), or ``exit-N``; empty for a timeout
    error_type: str = ""
    #: the first lines the worker wrote to stderr after it was given the case
    stderr: str = ""


@dataclass
class _Worker:
    """One worker process, the parent's end of its socket, and its stderr file."""

    process: subprocess.Popen[bytes]
    conn: Connection
    stderr: Any

    def wait_ready(self) -> None:
        if not self.conn.poll(START_TIMEOUT):
            self.stop()
            raise WorkerError(f"the worker did not start within {START_TIMEOUT:.0f} s")
        try:
            kind, detail = self.conn.recv()
        except EOFError:
            self.stop()
            raise WorkerError(
                f"the worker died while starting (exit code {self.process.returncode})"
            ) from None
        if kind != "ready":
            self.stop()
            raise WorkerError(f"the worker could not start:\n{detail}")

    def stderr_mark(self) -> int:
        self.stderr.seek(0, 2)
        return int(self.stderr.tell())

    def stderr_since(self, mark: int, lines: int = 12) -> str:
        """The first lines the worker wrote to stderr after ``mark`` (TVM's backtrace)."""
        self.stderr.seek(mark)
        text = self.stderr.read().decode(errors="replace").strip().splitlines()
        wrote = [line for line in text if "BlockBuilder destroyed" not in line][:lines]
        return "\n".join(wrote)

    def stop(self, politely: bool = False) -> None:
        if politely:
            with contextlib.suppress(OSError):
                self.conn.send(None)
        self.process.kill()
        self.process.wait()
        self.conn.close()
        self.stderr.close()


class IsolatedChecker:
    """Check cases in a reused worker process; see the module docstring."""

    def __init__(
        self,
        pass_name: str,
        *,
        timeout: float = 60.0,
        cache: bool = True,
        cache_dir: Path | None = None,
        complete_fold: bool | None = None,
        lowering: bool = False,
        flush: bool | None = None,
    ) -> None:
        self.pass_name = pass_name
        #: whether the fold runs with subnormals flushed to zero (:func:`fuzz.engine.check.check`)
        self.flush = flush
        #: whether modules the pass leaves unchanged are built and run too
        self.lowering = lowering
        #: whether the pass is judged as a complete fold (None: as its name says)
        self.complete_fold = complete_fold
        self.timeout = timeout
        self.cache = cache
        self.cache_dir = cache_dir
        #: workers started so far (the first one, and one per crash or hang)
        self.starts = 0
        self._worker: _Worker | None = None
        #: after a crash, the next worker is started ahead (importing TVM takes seconds),
        #: so that shrinking a crash does not wait for a new worker at every step
        self._spare: _Worker | None = None

    def _spawn(self) -> _Worker:
        # A fresh interpreter (not fork: TVM's threads; not multiprocessing's spawn, which
        # re-imports the caller's __main__), talking over one end of a socket pair.
        parent, child = multiprocessing.Pipe()
        command = [sys.executable, "-m", "fuzz.engine.isolate", str(child.fileno()), self.pass_name]
        command += ["--cache" if self.cache else "--no-cache", str(self.cache_dir or "")]
        command += [{None: "default", True: "must-fold", False: "no-must-fold"}[self.complete_fold]]
        command += ["--lowering" if self.lowering else "--no-lowering"]
        command += [{None: "--flush-default", True: "--flush", False: "--no-flush"}[self.flush]]
        # The worker's stderr (TVM's crash backtraces) goes to a file; a crash finding quotes it.
        stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by _Worker.stop
        process = subprocess.Popen(
            command, pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stderr=stderr
        )
        child.close()
        self.starts += 1
        return _Worker(process, parent, stderr)

    def _ready_worker(self) -> _Worker:
        if self._worker is None:
            worker, self._spare = (self._spare or self._spawn()), None
            worker.wait_ready()
            self._worker = worker
        return self._worker

    def close(self) -> None:
        """Stop the workers (they also stop when this process exits)."""
        for worker in (self._worker, self._spare):
            if worker is not None:
                worker.stop(politely=True)
        self._worker = self._spare = None

    def __enter__(self) -> IsolatedChecker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __call__(self, case: Case, pipeline: Pipeline | None) -> Checked:
        worker = self._ready_worker()
        start = time.monotonic()
        mark = worker.stderr_mark()
        try:
            worker.conn.send((case, pipeline))
            answered = worker.conn.poll(self.timeout)
            reply = worker.conn.recv() if answered else None
        except (EOFError, OSError):
            reply, answered = None, True
        if reply is None:
            died = self._died(worker, answered, time.monotonic() - start, mark)
            worker.stop()
            self._worker = None
            if self._spare is None:
                self._spare = self._spawn()
            # the fold's scope: a crash of one of PyTorch's folds is that fold's
            # the flush settings the worker pinned for the check (it cannot say: it is gone)
            asked = flush_requested() if self.flush is None else self.flush
            flush = {"ftz": asked, "daz": asked}
            return _crash_checked(case, pipeline, died, scope_of(self.pass_name), flush)
        kind, payload = reply
        if kind == "raise":
            raise payload
        return payload

    def _died(self, worker: _Worker, answered: bool, seconds: float, mark: int) -> _Died:
        if not answered:
            return _Died(
                Symptom.TIMEOUT, f"the worker did not answer within {self.timeout:g} s and was killed"
            )
        try:
            code: int | None = worker.process.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            how, error_type = f"died of {name}", name
        else:
            how, error_type = f"exited with code {code}", f"exit-{code}"
        message = f"the worker process {how} after {seconds:.1f} s"
        return _Died(Symptom.CRASH, message, error_type, worker.stderr_since(mark))


def _crash_checked(
    case: Case, pipeline: Pipeline | None, died: _Died, scope: str, flush: dict[str, Any]
) -> Checked:
    """A :class:`Checked` for a case whose worker died: nothing ran to completion."""
    failure = Failure(Stage.RUN, died.error_type or died.symptom.value, died.message)
    execution = Execution(
        baseline=failure,
        folded=failure,
        changed=False,
        fired=False,
        idempotent=None,
        pass_seconds=0.0,
        build_seconds=0.0,
    )
    finding = Finding(died.symptom, Stage.WORKER, died.message, died.error_type, stderr=died.stderr)
    return Checked(case, execution, reference(case), Verdict((finding,)), pipeline, scope=scope, flush=flush)


def _main(argv: list[str]) -> None:
    """``python -m fuzz.engine.isolate FD PASS --cache|--no-cache CACHE_DIR default|must-fold|no-must-fold
    --lowering|--no-lowering --flush|--no-flush|--flush-default``: the worker."""
    # Ctrl-C reaches the whole process group: the parent decides, and stops the worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fd, pass_name, cache, cache_dir, claim, lowering, flush = argv
    complete = {"default": None, "must-fold": True, "no-must-fold": False}[claim]
    _serve(
        Connection(int(fd)),
        pass_name,
        cache == "--cache",
        cache_dir or None,
        complete,
        lowering == "--lowering",
        {"--flush-default": None, "--flush": True, "--no-flush": False}[flush],
    )


if __name__ == "__main__":
    _main(sys.argv[1:])
