"""Run many reproducer scripts in one fresh interpreter, each as ``__main__`` in its own
namespace, with what a user without this project has: by default neither ``fuzz`` nor
``strategies`` importable, and on request neither ``tvm``. What each printed and how it exited comes back
as :class:`ScriptRun` (exit code as ``sys.exit`` gave it; 1 for an exception that escaped,
as Python's own exit would be).

Importing TVM or torch costs seconds per process; a batch pays it once. The tests that run
each script in its own interpreter (and so also see a native crash as a signal) are the
nightly tier's; a script that can crash the interpreter does not belong in a batch.

Import it as ``from script_batch import run_scripts`` (``tests/`` is on ``sys.path``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: The driver: block modules, then run each script file and record its exit and output.
_DRIVER = r"""
import contextlib, io, json, runpy, sys, traceback
blocked, paths = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for name in blocked:
    sys.modules[name] = None
results = {}
for path in paths:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
    results[path] = {"returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue()}
sys.__stdout__.write("\n" + json.dumps(results))
"""


@dataclass(frozen=True)
class ScriptRun:
    returncode: int
    stdout: str
    stderr: str


def run_scripts(
    scripts: Mapping[str, str], *, block: Sequence[str] = ("fuzz", "strategies"), timeout: float = 600
) -> dict[str, ScriptRun]:
    """Each script's text run as ``__main__`` from its own file in a temporary folder (the
    folder is the working directory), all in one fresh interpreter started outside this
    repository, with the modules ``block`` names made unimportable (by default this
    project's: a reproducer for a pass of TVM's own must not need it)."""
    blocked = sorted(block)
    with tempfile.TemporaryDirectory(prefix="bnfuzz-scripts-") as tmp:
        paths = {}
        for i, (key, text) in enumerate(scripts.items()):
            path = Path(tmp) / f"repro_{i}.py"
            path.write_text(text)
            paths[key] = str(path)
        done = subprocess.run(
            [sys.executable, "-c", _DRIVER, json.dumps(blocked), json.dumps(list(paths.values()))],
            capture_output=True,
            text=True,
            cwd=tmp,
            timeout=timeout,
        )
    if done.returncode != 0:
        raise AssertionError(f"the script driver died ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    results = json.loads(done.stdout.rsplit("\n", 1)[-1])
    return {key: ScriptRun(**results[path]) for key, path in paths.items()}
