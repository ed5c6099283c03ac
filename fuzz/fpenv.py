"""The floating-point environment a check runs in, and the machine whose kernels it runs.

Two things decide whether a framework's kernel keeps a subnormal number or flushes it to
zero: the CPU (PyTorch's bfloat16 convolution flushes on a CPU with AVX-512 BF16 and keeps
subnormals without it) and the process state (on x86-64, the flush-to-zero and
denormals-are-zero bits of the MXCSR register, which ``torch.set_flush_denormal(True)``
sets and which NumPy, ONNX Runtime and TVM's kernels obey on the thread that runs them).
The oracle allows either (:mod:`fuzz.oracle.reference`), so a verdict does not depend on them;
this module makes the rest of a check independent of them too:

* :func:`pinned` sets the flush bits for the duration of a check (off by default, as a
  fresh process has them) and restores the caller's afterwards: a verdict never depends
  on what else ran in the process, and the oracle's own NumPy arithmetic never flushes;
  :func:`keeps_subnormals` does the same for a function (the conversions of a case's
  values, the reference, the oracle, the renderers and the command line: whatever the
  process has set, a float32 subnormal stays what it is there);
* :func:`machine` describes the CPU (model and the instruction-set flags that select
  kernels), the flush bits and the thread counts, for every finding's and entry's
  provenance; :func:`machine_differences` says how two such records differ, so a replay
  that does not reproduce can show the recorded machine beside this one.

Key idea: the MXCSR register is read and written directly (``stmxcsr``/``ldmxcsr``, eight
bytes of machine code called through ctypes), so pinning needs no framework: a TVM-only
campaign never imports torch for it. Where that is not possible (not x86-64), only the
default (no flushing) can be pinned, which is what every process starts with.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import mmap
import os
import platform
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from fuzz.errors import BnfuzzError

__all__ = [
    "FLUSH_VARIABLE",
    "KERNEL_FLAGS",
    "FlushUnsupported",
    "cpu",
    "flush_requested",
    "flush_state",
    "keeps_subnormals",
    "machine",
    "machine_differences",
    "pinned",
    "register_threads",
]

#: The CPU flags (as /proc/cpuinfo spells them) that frameworks select kernels by, and so
#: may decide whether subnormals are kept: vector widths, FMA, half- and bfloat16
#: arithmetic, AMX tiles (x86-64); half precision, bfloat16 and SVE (aarch64).
KERNEL_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "amx_fp16",
    "asimd",
    "asimdhp",
    "fphp",
    "bf16",
    "i8mm",
    "sve",
    "sve2",
)

#: The environment variable that makes every check run its fold with subnormals flushed
#: (``BNFUZZ_FLUSH_DENORMALS=1``) unless the caller says otherwise: a whole test run, or
#: every campaign of a machine, judged as on a CPU or in a process that flushes.
FLUSH_VARIABLE = "BNFUZZ_FLUSH_DENORMALS"

#: MXCSR bits: flush-to-zero (results) and denormals-are-zero (operands).
_FTZ, _DAZ = 0x8000, 0x0040
#: the six sticky exception flags: state, not settings (left out of what is recorded)
_STICKY = 0x003F


class FlushUnsupported(BnfuzzError, RuntimeError):
    """Flushing was asked for where this module cannot set it (not x86-64)."""


def _mxcsr_functions() -> tuple[Callable[[Any], None], Callable[[Any], None], mmap.mmap] | None:
    """``stmxcsr [rdi]; ret`` and ``ldmxcsr [rdi]; ret`` as C functions of one pointer, in
    an executable page (kept alive with them); None off x86-64 or where no page can be
    made executable."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    try:
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, AttributeError, ValueError):
        return None
    page.write(bytes([0x0F, 0xAE, 0x1F, 0xC3, 0x0F, 0xAE, 0x17, 0xC3]))
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    kind = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_uint32))
    return kind(address), kind(address + 4), page


_MXCSR = _mxcsr_functions()


def _read_mxcsr() -> int | None:
    if _MXCSR is None:
        return None
    value = ctypes.c_uint32()
    _MXCSR[0](ctypes.byref(value))
    return int(value.value)


def _write_mxcsr(value: int) -> None:
    assert _MXCSR is not None
    _MXCSR[1](ctypes.byref(ctypes.c_uint32(value)))


def _probe() -> tuple[bool, bool]:
    """(flush-to-zero, denormals-are-zero) as float32 arithmetic on this thread shows them:
    a subnormal product, and a subnormal operand times a large number."""
    import numpy as np

    with np.errstate(all="ignore"):
        ftz = bool(np.float32(2.0**-126) * np.float32(0.5) == 0)
        daz = bool(np.float32(2.0**-149) * np.float32(2.0**30) == 0)
    return ftz, daz


def flush_state() -> dict[str, Any]:
    """This thread's flush settings: ``ftz``, ``daz`` and, on x86-64, the MXCSR control
    bits (``mxcsr``, hex); where the register cannot be read, the bits as arithmetic
    shows them."""
    value = _read_mxcsr()
    if value is None:
        ftz, daz = _probe()
        return {"ftz": ftz, "daz": daz}
    return {"ftz": bool(value & _FTZ), "daz": bool(value & _DAZ), "mxcsr": f"0x{value & ~_STICKY:04x}"}


def flush_requested() -> bool:
    """Whether :data:`FLUSH_VARIABLE` asks checks to flush subnormals by default."""
    return os.environ.get(FLUSH_VARIABLE, "") not in ("", "0")


@contextlib.contextmanager
def pinned(flush: bool = False) -> Iterator[dict[str, Any]]:
    """Run the body with subnormals flushed (FTZ and DAZ both set, as
    ``torch.set_flush_denormal(True)`` sets them) or kept (both clear, as a fresh process
    has them); the caller's settings come back afterwards. Yields :func:`flush_state` as
    pinned. :class:`FlushUnsupported` for ``flush=True`` where the register cannot be set.

    The setting is per thread: frameworks that run a kernel on this thread obey it (the
    backends run theirs on the calling thread, one thread each)."""
    saved = _read_mxcsr()
    if saved is None:
        if flush:
            raise FlushUnsupported(
                f"flushing subnormals can only be set on x86-64 (this is {platform.machine()})"
            )
        yield flush_state()
        return
    wanted = (saved | _FTZ | _DAZ) if flush else (saved & ~(_FTZ | _DAZ))
    _write_mxcsr(wanted & ~_STICKY)
    try:
        yield flush_state()
    finally:
        _write_mxcsr(saved)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def keeps_subnormals(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` run with subnormals kept (:func:`pinned` with ``flush=False``), the
    caller's flush settings restored after it."""

    @functools.wraps(function)
    def pinned_call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with pinned():
            return function(*args, **kwargs)

    return pinned_call


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu() -> dict[str, Any]:
    """The CPU: ``model`` (its name), ``arch`` and the :data:`KERNEL_FLAGS` it has."""
    info = _cpuinfo()
    model = info.get("model name") or info.get("Model") or platform.processor() or "unknown"
    present = set((info.get("flags") or info.get("Features") or "").split())
    return {
        "model": model,
        "arch": platform.machine(),
        "flags": [f for f in KERNEL_FLAGS if f in present],
    }


#: framework -> a function giving the threads it computes with (registered by backends)
_THREADS: dict[str, Callable[[], int]] = {}


def register_threads(framework: str, threads: Callable[[], int]) -> None:
    """A backend says how many threads its framework computes with, for :func:`machine`."""
    _THREADS[framework] = threads


def machine(flush: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a finding's provenance records of the machine: :func:`cpu`, the flush settings
    the check ran with (``flush``, else this thread's now), the thread counts of the
    frameworks loaded, and the thread variables of the environment that are set."""
    threads: dict[str, Any] = {name: get() for name, get in sorted(_THREADS.items())}
    for variable in ("TVM_NUM_THREADS", "OMP_NUM_THREADS"):
        if variable in os.environ:
            threads[variable] = os.environ[variable]
    return {
        "cpu": cpu(),
        "cores": os.cpu_count(),
        "flush": dict(flush) if flush is not None else flush_state(),
        "threads": threads,
    }


def _cpu_line(record: Mapping[str, Any]) -> str:
    found = record.get("cpu") or {}
    flags = " ".join(found.get("flags") or []) or "none of the kernel flags"
    return f"{found.get('model', 'unknown')} ({found.get('arch', '?')}; {flags})"


def machine_differences(recorded: Mapping[str, Any] | None, current: Mapping[str, Any]) -> list[str]:
    """How the machine an entry recorded differs from ``current`` where it can change
    which kernels run or whether they flush: lines to print side by side, empty if it
    does not (or ``recorded`` is None: an entry from before machines were recorded, said
    so in one line)."""
    if not recorded:
        return ["the entry records no machine (written before machines were recorded)"]
    lines: list[str] = []
    was, now = recorded.get("cpu") or {}, current.get("cpu") or {}
    if (was.get("model"), was.get("arch"), was.get("flags")) != (
        now.get("model"),
        now.get("arch"),
        now.get("flags"),
    ):
        gone = sorted(set(was.get("flags") or []) - set(now.get("flags") or []))
        new = sorted(set(now.get("flags") or []) - set(was.get("flags") or []))
        lines.append(f"recorded CPU: {_cpu_line(recorded)}")
        lines.append(f"this CPU:     {_cpu_line(current)}")
        if gone or new:
            lines.append(
                "kernel flags "
                + "; ".join(
                    part
                    for part in (
                        f"missing here: {' '.join(gone)}" if gone else "",
                        f"new here: {' '.join(new)}" if new else "",
                    )
                    if part
                )
            )
    was_flush, now_flush = recorded.get("flush") or {}, current.get("flush") or {}
    keys = ("ftz", "daz")
    if any(was_flush.get(k) != now_flush.get(k) for k in keys):
        show = lambda f: ", ".join(f"{k} {'on' if f.get(k) else 'off'}" for k in keys)  # noqa: E731
        lines.append(f"flush settings recorded: {show(was_flush)}; here: {show(now_flush)}")
    return lines
