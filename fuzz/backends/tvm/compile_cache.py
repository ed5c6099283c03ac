"""Compile once per structure: lift constants to parameters, cache executables.

A module's compiled code depends on its *structure* (operators, shapes, dtypes,
attributes), not on the values of its constants. :func:`fuzz.backends.tvm.build.lift_constants` turns
every tensor constant of ``main`` (the case's bound operands and whatever the
pass under test created from them) into a trailing function parameter, so
modules that differ only in values become structurally equal. A
:class:`CompileCache` keeps one loaded VM per structure (LRU, bounded) and
optionally exported libraries on disk, and :meth:`CompileCache.run` has the
same contract as :func:`fuzz.backends.tvm.execute.compile_and_run`: the cached path is a
drop-in runner for :func:`fuzz.backends.tvm.execute.execute`.

Key idea: a cached entry is never trusted blindly. In memory, a hit is confirmed
by structural equality with the stored lifted module (a hash collision rebuilds).
On disk, an entry carries the SHA-256 of its library and the TVMScript text of its
module; a mismatch of either, or a library that fails to load, is rebuilt and
overwritten (by an atomic rename: a library may be mapped into a running process,
so a file is never rewritten in place). Constant folding that the pipeline would have done at compile time
now runs in the VM with the same kernels; ``tests/test_compile_cache.py`` checks
that the two paths agree bit for bit on extreme values.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm import relax

from fuzz.backends.tvm.build import FUNCTION_NAME, IdentityMemo, lift_constants
from fuzz.backends.tvm.compat import assert_well_formed, to_device, tvm_version
from fuzz.backends.tvm.execute import TARGET, outputs_of
from fuzz.oracle.execution import Failure, Outputs, Stage

__all__ = ["CacheStats", "CompileCache"]


def _on_device(array: Any) -> Any:
    return to_device(array) if isinstance(array, np.ndarray) else array


@dataclass
class CacheStats:
    """What the cache did: memory hits, disk hits, builds, and entries it refused to trust."""

    hits: int = 0
    disk_hits: int = 0
    builds: int = 0
    rebuilt: int = 0
    evictions: int = 0

    @property
    def lookups(self) -> int:
        return self.hits + self.disk_hits + self.builds

    @property
    def hit_rate(self) -> float:
        return (self.hits + self.disk_hits) / self.lookups if self.lookups else 0.0


@dataclass
class _Entry:
    module: tvm.IRModule
    main: Any  # the VM's main function
    library: Any  # keeps the loaded library alive
    #: a structure that failed to build fails the same way again (kept in memory only)
    failure: Failure | None = None


#: (structural hash of the lifted module, target)
_Key = tuple[int, str]


class CompileCache:
    """Loaded executables keyed by lifted structure and target; LRU, optionally on disk."""

    def __init__(self, *, capacity: int = 256, directory: Path | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"capacity={capacity} must be at least 1")
        self.capacity = capacity
        self.directory = directory
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
        self.stats = CacheStats()
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()
        self._constant_free: IdentityMemo[tuple[tvm.IRModule, _Key]] = IdentityMemo(capacity)
        self._target = str(TARGET)

    def __len__(self) -> int:
        return len(self._entries)

    def run(
        self, mod: tvm.IRModule, inputs: Sequence[np.ndarray[Any, Any]]
    ) -> tuple[Outputs | Failure, float]:
        """Like :func:`fuzz.backends.tvm.execute.compile_and_run`, compiling only unseen structures."""
        return self._run(mod, inputs, well_formed=False)

    def run_well_formed(
        self, mod: tvm.IRModule, inputs: Sequence[np.ndarray[Any, Any]]
    ) -> tuple[Outputs | Failure, float]:
        """:meth:`run`, but first check that ``mod`` is well-formed Relax (a ``well-formedness``
        failure if not). Well-formedness is structural, so a structure compiled before passed
        the check then: only unseen structures are checked."""
        return self._run(mod, inputs, well_formed=True)

    def _run(
        self, mod: tvm.IRModule, inputs: Sequence[np.ndarray[Any, Any]], *, well_formed: bool
    ) -> tuple[Outputs | Failure, float]:
        start = time.perf_counter()
        lifted, values, key = self._lift(mod)
        if well_formed and not self._known(key, lifted):
            try:
                assert_well_formed(mod)
            except Exception as exc:
                return Failure.from_exception(Stage.WELL_FORMED, exc), time.perf_counter() - start
        try:
            entry = self._lookup(key, lifted)
        except Exception as exc:
            failure = Failure.from_exception(Stage.BUILD, exc)
            self._insert(key, _Entry(lifted, None, None, failure))
            return failure, time.perf_counter() - start
        if entry.failure is not None:
            return entry.failure, time.perf_counter() - start
        try:
            result = entry.main(*[_on_device(a) for a in inputs], *values)
        except Exception as exc:
            return Failure.from_exception(Stage.RUN, exc), time.perf_counter() - start
        return outputs_of(result), time.perf_counter() - start

    def _lift(self, mod: tvm.IRModule) -> tuple[tvm.IRModule, list[Any], _Key]:
        """Lift and hash ``mod``; a constant-free module object seen before is not
        lifted and hashed again (see :func:`fuzz.backends.tvm.build.unfolded_program`)."""
        known = self._constant_free.get(mod)
        if known is not None:
            return known[0], [], known[1]
        lifted, values = lift_constants(mod)
        key = (int(tvm_ffi.structural_hash(lifted)), self._target)
        if not values:
            self._constant_free.put(mod, (lifted, key))
        return lifted, values, key

    def _known(self, key: _Key, lifted: tvm.IRModule) -> bool:
        """Whether this structure is in memory already (built, or failed to build)."""
        entry = self._entries.get(key)
        return entry is not None and (
            entry.module.same_as(lifted) or bool(tvm_ffi.structural_equal(entry.module, lifted))
        )

    def _lookup(self, key: _Key, lifted: tvm.IRModule) -> _Entry:
        entry = self._entries.get(key)
        if entry is not None and (
            entry.module.same_as(lifted) or tvm_ffi.structural_equal(entry.module, lifted)
        ):
            self._entries.move_to_end(key)
            self.stats.hits += 1
            return entry
        if entry is not None:
            self.stats.rebuilt += 1  # a hash collision: never trust it
        entry = self._from_disk(key, lifted)
        if entry is None:
            entry = self._build(key, lifted)
        self._insert(key, entry)
        return entry

    def _insert(self, key: _Key, entry: _Entry) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
            self.stats.evictions += 1

    def _paths(self, key: _Key) -> tuple[Path, Path]:
        assert self.directory is not None
        digest = hashlib.sha256(f"{key[0]}|{key[1]}|{tvm_version()}".encode()).hexdigest()[:32]
        return self.directory / f"{digest}.so", self.directory / f"{digest}.json"

    def _from_disk(self, key: _Key, lifted: tvm.IRModule) -> _Entry | None:
        if self.directory is None:
            return None
        library, meta = self._paths(key)
        if not (library.exists() and meta.exists()):
            return None
        try:
            recorded = json.loads(meta.read_text())
            blob = library.read_bytes()
            if recorded.get("sha256") != hashlib.sha256(blob).hexdigest():
                raise ValueError("library checksum mismatch")
            if recorded.get("module") != lifted.script():
                raise ValueError("a different module under the same key")
            loaded = tvm.runtime.load_module(str(library))
            vm = relax.VirtualMachine(loaded, tvm.cpu())
        except Exception:
            self.stats.rebuilt += 1
            return None
        self.stats.disk_hits += 1
        return _Entry(lifted, vm[FUNCTION_NAME], loaded)

    def _build(self, key: _Key, lifted: tvm.IRModule) -> _Entry:
        self.stats.builds += 1  # a build that fails counts too
        exe = relax.build(relax.pipeline.zero_pipeline()(lifted), target=TARGET)
        vm = relax.VirtualMachine(exe, tvm.cpu())
        if self.directory is not None:
            self._save(key, lifted, exe)
        return _Entry(lifted, vm[FUNCTION_NAME], exe)

    def _save(self, key: _Key, lifted: tvm.IRModule, exe: Any) -> None:
        library, meta = self._paths(key)
        fd, tmp = tempfile.mkstemp(dir=library.parent, suffix=".so")
        os.close(fd)
        try:
            exe.export_library(tmp)
            digest = hashlib.sha256(Path(tmp).read_bytes()).hexdigest()
            meta_tmp = Path(tmp).with_suffix(".json")
            meta_tmp.write_text(
                json.dumps({"sha256": digest, "module": lifted.script(), "tvm": tvm_version()})
            )
            os.replace(tmp, library)
            os.replace(meta_tmp, meta)
        finally:
            Path(tmp).unlink(missing_ok=True)
            Path(tmp).with_suffix(".json").unlink(missing_ok=True)
