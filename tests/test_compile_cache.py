"""Compile once per structure: bit-identical to the naive path, and never trusting a bad entry."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cases import make_case
from hypothesis import given, settings

import strategies
from fuzz.backends.tvm.build import (
    ModuleError,
    bound_module,
    build_module,
    lift_constants,
    runtime_inputs,
    unfolded_program,
)
from fuzz.backends.tvm.compat import structural_equal
from fuzz.backends.tvm.compile_cache import CompileCache
from fuzz.backends.tvm.execute import execute
from fuzz.backends.tvm.passes import resolve_pass
from fuzz.model.case import Case, Epilogue, Topology
from fuzz.model.form import Form, Importer
from fuzz.model.tensor import Tensor
from fuzz.oracle.execution import Execution, Failure, Outputs, Stage

ONE = {"c_in": 2, "c_out": 2, "height": 2, "width": 2, "kh": 1, "kw": 1}
EXTREME = [
    make_case(**ONE, values={"x": 1e13, "weight": [1e13, -1e13, 1e13, -1e13], "gamma": 1e13, "var": 1.0}),
    make_case(**ONE, values={"x": 3e-39, "weight": 1e-30, "gamma": 1e30, "var": 1e-40}, epsilon=0.0),
    make_case(**ONE, values={"x": 3e38, "weight": 0.5, "gamma": 7.0, "mean": -0.0, "var": 2e-44}),
    make_case(**ONE, dtype="float16", values={"x": 60000.0, "weight": 2.0, "gamma": 3.0}),
    make_case(**ONE, dtype="float64", values={"x": 1e300, "weight": 1e10, "gamma": 1e-300}),
    make_case(**ONE, center=False, scale=False, values={"x": -0.0, "beta": 5.0}),
]


def bits(outputs: Outputs | Failure | None) -> Any:
    if outputs is None:  # not built: the pass raised
        return None
    if isinstance(outputs, Failure):
        return (outputs.stage, outputs.error_type)
    return (outputs.dtypes, outputs.shapes, [v.tobytes() for v in outputs.values])


def assert_same(naive: Execution, cached: Execution) -> None:
    assert bits(cached.baseline) == bits(naive.baseline)
    assert bits(cached.folded) == bits(naive.folded)


@pytest.mark.parametrize("pass_name", ["upstream", "identity"])
@pytest.mark.parametrize("index", range(len(EXTREME)))
def test_cached_path_is_bit_identical_on_extreme_values(pass_name: str, index: int) -> None:
    make_pass = resolve_pass(pass_name)
    case = EXTREME[index]
    cache = CompileCache()
    assert_same(execute(case, make_pass), execute(case, make_pass, cache.run))


#: Every form a module is written in: the lifted constants come back in the right order
#: (through a call of a second function, past an ONNX clip's own bounds).
EPS32 = float(np.float32(1e-5))
FORMS = [
    make_case(**ONE, bias=True, epilogue=Epilogue.ADD, values={"gamma": 3.0}),
    make_case(**ONE, form=Form(functions=2, dead_statistics=True), parameters=("beta",)),
    make_case(topology=Topology.CHAIN, c_in=3, form=Form(functions=2, dataflow=False), bias=True),
    make_case(**ONE, form=Form(Importer.ONNX), epsilon=EPS32, bias=True, epilogue=Epilogue.CLIP),
    make_case(**ONE, form=Form(Importer.ONNX), epsilon=EPS32, parameters=("mean",), epilogue=Epilogue.ADD),
    make_case(**ONE, topology=Topology.STATS_CONSUMED),
]


@pytest.mark.slow
@pytest.mark.parametrize("pass_name", ["upstream", "fixed"])
@pytest.mark.parametrize("index", range(len(FORMS)))
def test_cached_path_is_bit_identical_in_every_form(pass_name: str, index: int) -> None:
    make_pass = resolve_pass(pass_name)
    case = FORMS[index]
    assert_same(execute(case, make_pass), execute(case, make_pass, CompileCache().run))


def test_a_module_of_one_structure_takes_each_cases_values() -> None:
    # the unfolded program is memoised per structure: a second value set must not reuse the first's
    first = FORMS[3]
    second = replace(first, data=Tensor.from_numpy(first.data.float64() * 3, first.dtype))
    cache = CompileCache()
    identity = resolve_pass("identity")
    assert bits(execute(second, identity, cache.run).baseline) == bits(execute(second, identity).baseline)
    assert bits(execute(first, identity, cache.run).baseline) == bits(execute(first, identity).baseline)


CACHE = CompileCache(capacity=64)


@pytest.mark.slow
@settings(max_examples=15)
@given(strategies.cases())
def test_cached_path_is_bit_identical_on_generated_cases(case: Case) -> None:
    make_pass = resolve_pass("upstream")
    assert_same(execute(case, make_pass), execute(case, make_pass, CACHE.run))


def test_lifting_makes_values_irrelevant_to_structure() -> None:
    a, va = lift_constants(execute_module(make_case(values={"gamma": 2.0})))
    b, vb = lift_constants(execute_module(make_case(values={"gamma": 3.0})))
    assert structural_equal(a, b)
    assert not all(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(va, vb, strict=True))


def execute_module(case: Case) -> Any:
    return resolve_pass("upstream")()(build_module(case))


def test_second_run_of_a_structure_is_a_hit() -> None:
    cache = CompileCache()
    make_pass = resolve_pass("upstream")
    execute(make_case(values={"gamma": 2.0}), make_pass, cache.run)
    builds = cache.stats.builds
    execute(make_case(values={"gamma": 5.0}), make_pass, cache.run)
    assert cache.stats.builds == builds and cache.stats.hits == 2


@settings(max_examples=40)
@given(strategies.cases())
def test_unfolded_program_is_the_lifted_module_with_its_constants(case: Case) -> None:
    try:
        lifted, constants = lift_constants(build_module(case))
    except ModuleError:
        return
    module, inputs = unfolded_program(case)
    assert structural_equal(module, lifted)
    expected = runtime_inputs(case) + [c.numpy() for c in constants]
    assert [(a.dtype, a.tobytes()) for a in (t.numpy() for t in inputs)] == [
        (a.dtype, a.tobytes()) for a in expected
    ]
    assert unfolded_program(case)[0].same_as(module)  # one object per structure


def test_a_structure_that_fails_to_build_is_not_built_again() -> None:
    cache = CompileCache()
    case = make_case(dtype="float16", topology=Topology.CHAIN)  # TVM cannot build it
    first = execute(case, resolve_pass("identity"), cache.run)
    builds = cache.stats.builds
    again = execute(case, resolve_pass("identity"), cache.run)
    assert isinstance(first.baseline, Failure) and first.baseline.stage is Stage.BUILD
    assert again.baseline == first.baseline and again.folded == first.folded
    assert cache.stats.builds == builds


def test_capacity_bounds_the_cache() -> None:
    cache = CompileCache(capacity=1)
    for c_out in (1, 2, 3):
        execute(make_case(c_out=c_out), resolve_pass("identity"), cache.run)
    assert len(cache) == 1 and cache.stats.evictions >= 2


def test_disk_entries_are_reused_and_bad_ones_rebuilt(tmp_path: Path) -> None:
    case = make_case(values={"gamma": 2.0})
    make_pass = resolve_pass("upstream")
    first = CompileCache(directory=tmp_path)
    expected = execute(case, make_pass, first.run)
    libraries = sorted(tmp_path.glob("*.so"))
    assert len(libraries) == 2  # unfolded and folded structures

    fresh = CompileCache(directory=tmp_path)
    assert_same(expected, execute(case, make_pass, fresh.run))
    assert fresh.stats.disk_hits == 2 and fresh.stats.builds == 0

    blob = bytearray(libraries[0].read_bytes())
    blob[len(blob) // 2] ^= 0xFF  # corrupt one library
    # as a new file: the old one is still mapped into this process by `fresh`
    corrupt = libraries[0].with_suffix(".tmp")
    corrupt.write_bytes(bytes(blob))
    corrupt.replace(libraries[0])
    meta = libraries[1].with_suffix(".json")
    meta.write_text(meta.read_text().replace("main", "mian", 1))  # a stale module text
    distrustful = CompileCache(directory=tmp_path)
    assert_same(expected, execute(case, make_pass, distrustful.run))
    assert distrustful.stats.rebuilt == 2 and distrustful.stats.builds == 2


@pytest.mark.parametrize("index", range(len(FORMS)))
def test_a_bound_module_is_the_built_module(index: int) -> None:
    case = FORMS[index]
    assert structural_equal(bound_module(case), build_module(case))
    block = case.blocks[0]
    gamma = Tensor.from_numpy(block.gamma.float64() * 3, block.gamma.dtype)
    revalued = replace(case, blocks=(replace(block, gamma=gamma), *case.blocks[1:]))
    assert structural_equal(bound_module(revalued), build_module(revalued))
    assert not structural_equal(bound_module(revalued), build_module(case))  # the values count
