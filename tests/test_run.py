"""``fuzz/engine/run.py``: the worker command line and the summary come from one place each."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fuzz.cli import build_parser
from fuzz.engine.run import Part, RunConfig, summarise


def parsed(argv: list[str]) -> RunConfig:
    return RunConfig.from_namespace(build_parser().parse_args(argv))


def non_default(config: RunConfig, field: dataclasses.Field[object]) -> object:
    """A value other than the default for every field a user can set."""
    return {
        "pass_name": "fixed", "complete_fold": False, "budget": 12.5, "max_examples": 7, "seed": 4,
        "shrink_seconds": 0.25, "out": Path("o"), "pipelines": True, "isolate": False, "timeout": 9.0,
        "no_cache": True, "cache_dir": Path("c"), "lowering": True, "database": "db", "workers": 3,
    }[field.name]  # fmt: skip


def test_every_option_reaches_the_workers() -> None:
    config = RunConfig(**{f.name: non_default(RunConfig("x"), f) for f in dataclasses.fields(RunConfig)})
    assert all(getattr(config, f.name) != f.default for f in dataclasses.fields(RunConfig))  # a new field
    for k, share in ((0, 3), (1, 2), (2, 2)):
        worker = parsed(config.worker_argv(k, "shared"))
        expected = dataclasses.replace(config, seed=4 + k, max_examples=share, database="shared", workers=1)
        assert worker == expected


@pytest.mark.parametrize("tri_state", ["complete_fold", "isolate", "lowering"])
@pytest.mark.parametrize("value", [None, True, False])
def test_a_tri_state_option_stays_unset_on_or_off(tri_state: str, value: bool | None) -> None:
    config = dataclasses.replace(RunConfig("upstream", workers=2), **{tri_state: value})
    assert getattr(parsed(config.worker_argv(0, "db")), tri_state) is value


def test_the_default_budget_reaches_the_workers() -> None:
    assert parsed(RunConfig("upstream", workers=2).worker_argv(1, "db")).budget == 60.0
    assert parsed(RunConfig("upstream", max_examples=5, workers=2).worker_argv(1, "db")).budget is None


def part(seed: int, signature: str, hits: int, first: float) -> Part:
    return Part(
        seed=seed, examples=10, changed=4, seconds=2.0 + seed, batches=3,
        findings=[{"signature": signature, "hits": hits, "first_seconds": first}],
        lowering={"baseline-out-of-tolerance[dtype=float16]": 1}, gated={}, coverage={"c": {"runs": 10, "fired": 4}},
        histograms={}, interrupted=False, unwritten=[], tvm="0.27",
        cache={"structures": 2, "hits": 8, "lookups": 10},
    )  # fmt: skip


def test_one_process_and_merged_workers_give_the_same_keys() -> None:
    config = RunConfig("upstream")
    one = summarise(config, [part(0, "a", 1, 1.0)], database=None, failed_workers=[], interrupted=False)
    two = summarise(
        dataclasses.replace(config, workers=2),
        [part(0, "a", 1, 1.0), part(1, "a", 2, 0.5)],
        database="db",
        failed_workers=[],
        interrupted=False,
    )
    assert one.keys() == two.keys()
    assert two["findings"] == [{"signature": "a", "hits": 3, "first_seconds": 0.5}]
    assert (
        two["examples"] == 20 and two["seconds"] == 3.0 and two["coverage"] == {"c": {"runs": 20, "fired": 8}}
    )
    assert two["cache"] == {"structures": 4, "hits": 16, "lookups": 20, "hit_rate": 0.8}
    assert [w["seed"] for w in two["per_worker"]] == [0, 1]


@pytest.mark.parametrize(
    "name",
    ["onnxruntime:basic", "onnxoptimizer", "onnxslim", "onnxsim", "openvino", "torch:fx", "torch:inductor"],
)
def test_a_backend_with_native_code_checks_in_a_worker_by_default(name: str) -> None:
    assert RunConfig(name).isolated
    assert not RunConfig(name, isolate=False).isolated  # --no-isolate: in process


def test_tvm_s_pass_alone_checks_in_process_and_its_pipelines_in_a_worker() -> None:
    assert not RunConfig("upstream").isolated and not RunConfig("fixed").isolated
    assert RunConfig("upstream", pipelines=True).isolated
    assert RunConfig("upstream", isolate=True).isolated
