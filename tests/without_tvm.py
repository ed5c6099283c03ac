"""Run Python code in a fresh interpreter where ``tvm`` (and ``tvm_ffi``) cannot be imported:
what a user without TVM has. Import it as ``from without_tvm import run_without_tvm``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: Lines that make ``import tvm`` raise ImportError in the process that runs them.
BLOCK_TVM = 'import sys\nsys.modules["tvm"] = None\nsys.modules["tvm_ffi"] = None\n'


def run_without_tvm(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``code`` run by ``python -c`` from ``cwd`` with TVM blocked; its output captured."""
    return subprocess.run(
        [sys.executable, "-c", BLOCK_TVM + code], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def run_script_without_tvm(script: Path) -> subprocess.CompletedProcess[str]:
    """The Python file ``script`` run as ``__main__`` from its folder with TVM blocked."""
    return run_without_tvm(
        f"import runpy\nrunpy.run_path({str(script)!r}, run_name='__main__')\n", script.parent
    )
