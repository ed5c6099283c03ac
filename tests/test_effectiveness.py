"""The fold-effectiveness benchmark on a tiny layer: the row says what it claims."""

from __future__ import annotations

from fuzz.effectiveness import Layer, layer_case, run_effectiveness
from fuzz.passes import resolve_pass

TINY = Layer("tiny", 2, 3, 6, 3)


def test_layer_case_has_realistic_statistics() -> None:
    case = layer_case(TINY, "NHWC", "HWIO", "float32")
    (block,) = case.blocks
    assert case.data.shape == (1, 6, 6, 2) and block.weight is not None and block.weight.shape == (3, 3, 2, 3)
    assert all(0.2 <= g <= 2.0 for g in block.gamma.values)
    assert all(1e-3 <= v <= 4.0 for v in block.var.values)


def test_rows_for_fixed_and_upstream() -> None:
    rows = run_effectiveness(
        resolve_pass("fixed"), resolve_pass("upstream"), rounds=1, number=1, layers=(TINY,)
    )
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
