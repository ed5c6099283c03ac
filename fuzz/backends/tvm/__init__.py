"""TVM Relax, the first backend: its fold (:mod:`~fuzz.backends.tvm.fold`) and the parts it
stands on: building a case as an ``IRModule`` (:mod:`~fuzz.backends.tvm.build`), running it
(:mod:`~fuzz.backends.tvm.execute`) with a compile-once cache
(:mod:`~fuzz.backends.tvm.compile_cache`), the pass names (:mod:`~fuzz.backends.tvm.passes`),
the API differences between releases (:mod:`~fuzz.backends.tvm.compat`), TVM's C++ log
(:mod:`~fuzz.engine.native_log`), our fixed pass
(:mod:`~fuzz.backends.tvm.fold_batchnorm`), its seeded mutants
(:mod:`~fuzz.backends.tvm.mutants`) and the patch that offers it to TVM
(:mod:`~fuzz.render.upstream_patch`). Only modules here import TVM at their top."""

__all__: list[str] = []
