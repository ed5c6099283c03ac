"""The fold-effectiveness benchmarks: a zoo row and a single-layer row say what they claim,
the "right" criterion is the documented one, and the command line rejects bad options."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fuzz.backends.tvm.execute import count_batch_norms
from fuzz.backends.tvm.passes import resolve_pass
from fuzz.cli import main
from fuzz.evaluation.effectiveness import ERROR_FACTOR, VARIANTS, import_variant, is_right, run_effectiveness
from fuzz.evaluation.layers import Layer, layer_case, run_layers
from fuzz.evaluation.zoo import MIN_SIZE, MODELS, build_model

TINY = Layer("tiny", 2, 3, 6, 3)
PROGRAM_KEYS = {"batch_norms", "folds", "right"}


def test_layer_case_has_realistic_statistics() -> None:
    case = layer_case(TINY, "NHWC", "HWIO", "float32")
    (block,) = case.blocks
    assert case.data.shape == (1, 6, 6, 2) and block.weight is not None and block.weight.shape == (3, 3, 2, 3)
    assert all(0.2 <= g <= 2.0 for g in block.gamma.values)
    assert all(1e-3 <= v <= 4.0 for v in block.var.values)


@pytest.mark.slow
def test_layer_rows_for_fixed_and_upstream() -> None:
    rows = run_layers(resolve_pass("fixed"), resolve_pass("upstream"), rounds=1, number=1, layers=(TINY,))
    by_layer = {row["layer"]: row for row in rows}
    assert len(rows) == 4
    for row in rows:
        assert row["pass"]["batch_norms"] == 0 and row["pass"]["finding"] is None and row["pass"]["ms"] > 0
        assert row["unfolded"]["ms"] > 0
    nchw = by_layer["tiny NCHW/OIHW float32"]
    assert nchw["upstream"]["batch_norms"] == 0 and nchw["upstream"]["finding"] is None and nchw["ratio"] > 0
    half = by_layer["tiny NCHW/OIHW float16"]
    assert half["upstream"]["finding"] is not None and "ratio" not in half  # upstream fails on float16
    nhwc = by_layer["tiny NHWC/HWIO float32"]
    assert nhwc["upstream"]["batch_norms"] == 1 and "ratio" not in nhwc  # upstream does not fold HWIO


@pytest.mark.slow
@pytest.mark.nightly  # twenty seconds of builds; the quick tier's zoo tests cover each step
def test_a_zoo_row_end_to_end() -> None:
    """ResNet-18 at 32x32, NCHW float32: upstream folds every batch_norm, rightly."""
    upstream = resolve_pass("upstream")
    (row,) = run_effectiveness(
        upstream, upstream, models=["resnet18"], variants=["nchw"], size=MIN_SIZE, rounds=1, number=1
    )
    assert row["model"] == "resnet18" and row["variant"] == "nchw" and row["layout"] == "NCHW/OIHW"
    assert row["onnx_batch_norms"] == row["batch_norms"] == row["unfolded"]["batch_norms"] == 20
    unfolded = row["unfolded"]
    assert unfolded["finite"] and 0 < unfolded["error"] < 1e-4 and unfolded["ms"] > 0
    for key in ("upstream", "pass", "bounded"):
        entry = row[key]
        assert entry.keys() >= PROGRAM_KEYS and entry["folds"]["layers"] == 20, key
        assert "exception" not in entry and "failure" not in entry and entry["ms"] > 0, key
    up = row["upstream"]
    assert up["batch_norms"] == 0 and up["folds"]["findings"] == 0 and up["error"] < 1e-4
    assert up["right"] and row["ratio"] > 0
    assert "decomposed" not in row  # the float32 network builds unfolded


@pytest.mark.slow
@pytest.mark.nightly  # half a minute of CPU; test_a_zoo_row_end_to_end covers a row in CI
def test_a_float16_zoo_row_records_what_failed() -> None:
    (row,) = run_effectiveness(
        resolve_pass("fixed"),
        resolve_pass("upstream"),
        models=["resnet18"],
        variants=["float16"],
        size=MIN_SIZE,
        rounds=1,
        number=1,
    )
    assert row["unfolded"]["failure"].startswith("build: TypeError")  # batch_norm lowers to float32
    assert row["decomposed"]["batch_norms"] == 0 and row["decomposed"]["finite"]
    assert row["upstream"]["exception"].startswith("TypeError") and row["upstream"]["batch_norms"] is None
    assert row["upstream"]["folds"]["symptoms"] == {"pass-exception": 20} and not row["upstream"]["right"]
    assert "ratio" not in row


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_fixed_folds_every_zoo_batch_norm(variant: str) -> None:
    """TVM's ONNX frontend leaves ``lv[1]``, ``lv[2]`` projections of the batch_norm tuple
    unused, and ConvertLayout leaves the weight as ``permute_dims(constant)``: the fold
    must see through both."""
    imported = import_variant(build_model("resnet18", MIN_SIZE, VARIANTS[variant].dtype), VARIANTS[variant])
    assert count_batch_norms(imported) == 20
    assert count_batch_norms(resolve_pass("fixed")()(imported)) == 0


def _entry(**fields: Any) -> dict[str, Any]:
    entry = {"batch_norms": 0, "folds": {"findings": 0}, "error": 2e-6, "finite": True}
    entry.update(fields)
    return entry


def test_right_is_folded_unflagged_and_within_the_factor() -> None:
    assert is_right(_entry(), 1e-6, "float32")
    assert is_right(_entry(error=ERROR_FACTOR * 1e-6), 1e-6, "float32")
    assert not is_right(_entry(error=ERROR_FACTOR * 1.01e-6), 1e-6, "float32")
    assert is_right(_entry(error=1e-7), 0.0, "float32")  # the unit roundoff is the floor
    assert is_right(_entry(error=0.3), None, "float16")  # no baseline: finite is all it can be
    assert not is_right(_entry(batch_norms=1), 1e-6, "float32")
    assert not is_right(_entry(folds={"findings": 1}), 1e-6, "float32")
    assert not is_right(_entry(error=None, finite=False), 1e-6, "float32")
    assert not is_right(_entry(exception="TypeError: ..."), 1e-6, "float32")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--models", "resnet19"],
            "--models 'resnet19': unknown model 'resnet19'; expected some of resnet18",
        ),
        (["--models", ","], "--models ',': expected a comma-separated list of resnet18"),
        (
            ["--variants", "nchw,bf16"],
            "--variants 'nchw,bf16': unknown variant 'bf16'; expected some of nchw",
        ),
        (["--size", "16"], "--size 16: too small; every model needs at least 32"),
        (["--size", "0"], "argument --size: must be positive, got 0"),
        (
            ["--layers", "--size", "64", "--seed", "1"],
            "--size, --seed: only for the model zoo, not with --layers",
        ),
    ],
)
def test_bad_zoo_options_exit_2_naming_the_option(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["effectiveness", *argv]) == 2
    err = capsys.readouterr().err
    assert any(message in line for line in err.splitlines()), err  # one line (argparse adds the usage)


def test_the_help_names_every_model_and_variant(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["effectiveness", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for name in (*MODELS, *VARIANTS, "--models", "--variants", "--size", "--layers", "Exit codes"):
        assert name in out, name


def _program(ms: float, error: float | None = 1e-6, **fields: Any) -> dict[str, Any]:
    return {"batch_norms": 0, "folds": {"layers": 20, "findings": 0, "symptoms": {}}, "right": True,
            "finite": error is not None, "error": error, "ms": ms, **fields}  # fmt: skip


CANNED = [
    {
        "model": "resnet18", "variant": "nchw", "dtype": "float32", "layout": "NCHW/OIHW",
        "onnx_batch_norms": 20, "batch_norms": 20, "ratio": 0.99,
        "unfolded": {"batch_norms": 20, "finite": True, "error": 3e-6, "ms": 70.0},
        "upstream": _program(70.5), "pass": _program(69.8), "bounded": _program(70.1),
    },
    {
        "model": "resnet18", "variant": "float16", "dtype": "float16", "layout": "NCHW/OIHW",
        "onnx_batch_norms": 20, "batch_norms": 20,
        "unfolded": {"batch_norms": 20, "failure": "build: TypeError: Binary operators must have the same datatype"},
        "decomposed": {"batch_norms": 0, "finite": True, "error": 0.03, "ms": 2500.0},
        "upstream": {"batch_norms": None, "exception": "TypeError: Binary operators", "right": False,
                     "folds": {"layers": 20, "findings": 20, "symptoms": {"pass-exception": 20}}},
        "pass": _program(2600.0, 0.029), "bounded": _program(2510.0, 0.031),
    },
]  # fmt: skip


def test_the_table_and_the_json_show_the_rows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}

    def canned(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        seen.update(kwargs)
        return CANNED

    monkeypatch.setattr("fuzz.evaluation.effectiveness.run_effectiveness", canned)
    assert main(["effectiveness", "--models", "resnet18", "--variants", "nchw,float16", "--size", "48"]) == 0
    assert seen["models"] == ["resnet18"] and seen["variants"] == ["nchw", "float16"] and seen["size"] == 48
    lines = capsys.readouterr().out.splitlines()
    nchw = next(line for line in lines if line.startswith("resnet18         nchw"))
    assert "| 0 0 0 " in nchw and "3.00e-06" in nchw and "70.5" in nchw and "| y y y |" in nchw
    assert nchw.endswith("0.99")
    half = next(line for line in lines if line.startswith("resnet18         float16"))
    assert "| x 0 0 " in half and "3.00e-02*" in half and "2500.0*" in half and "| 20 0 0 " in half
    assert "| n y y |" in half and half.endswith("-")
    assert any("float16: upstream: exception: TypeError" in line for line in lines)
    assert any("float16: unfolded: build: TypeError" in line for line in lines)
    assert main(["effectiveness", "--models", "resnet18", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == CANNED and summary["size"] == 64 and summary["pass"] == "fixed"
    assert summary.keys() >= {"seed", "rounds", "number", "tvm", "seconds"}
