"""The float64 reference: semantics checked against hand computations, bounds and masks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from cases import make_case

from fuzz.model.case import Conv2dAttrs
from fuzz.model.numerics import conv2d_nchw, dtype_facts, gamma_k
from fuzz.oracle.reference import reference


def naive_conv(x: np.ndarray, w: np.ndarray, a: Conv2dAttrs) -> np.ndarray:
    n, _, h, wd = x.shape
    c_out, cpg, kh, kw = w.shape
    pt, pl, pb, pr = a.padding
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    ho = (h + pt + pb - a.dilation[0] * (kh - 1) - 1) // a.strides[0] + 1
    wo = (wd + pl + pr - a.dilation[1] * (kw - 1) - 1) // a.strides[1] + 1
    out = np.zeros((n, c_out, ho, wo))
    per_group_out = c_out // a.groups
    for b, o, i, j in itertools.product(range(n), range(c_out), range(ho), range(wo)):
        g = o // per_group_out
        for c, p, q in itertools.product(range(cpg), range(kh), range(kw)):
            out[b, o, i, j] += (
                xp[
                    b,
                    g * cpg + c,
                    i * a.strides[0] + p * a.dilation[0],
                    j * a.strides[1] + q * a.dilation[1],
                ]
                * w[o, c, p, q]
            )
    return out


@pytest.mark.parametrize(
    "attrs",
    [
        Conv2dAttrs(),
        Conv2dAttrs(strides=(2, 1), padding=(1, 0, 1, 1), dilation=(1, 2)),
        Conv2dAttrs(groups=2),
        Conv2dAttrs(groups=4, padding=(1, 1, 0, 0)),
    ],
)
def test_conv_matches_naive_loops(attrs: Conv2dAttrs) -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(-4, 5, size=(2, 4, 5, 6)).astype(np.float64)
    w = rng.integers(-3, 4, size=(8, 4 // attrs.groups, 3, 2)).astype(np.float64)
    np.testing.assert_array_equal(conv2d_nchw(x, w, attrs), naive_conv(x, w, attrs))


def one_by_one(**kw: object) -> dict[str, object]:
    """make_case arguments for one channel, 1x1 image and kernel, with overrides."""
    return {"c_in": 1, "c_out": 1, "height": 1, "width": 1, "kh": 1, "kw": 1, **kw}


BN_VALUES = {"x": 3.0, "weight": 2.0, "gamma": 4.0, "beta": 1.0, "mean": 2.0, "var": 3.0}


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({}, (6 - 2) / 2 * 4 + 1),
        ({"scale": False}, (6 - 2) / 2 + 1),
        ({"center": False}, (6 - 2) / 2 * 4),
        ({"scale": False, "center": False}, (6 - 2) / 2),
    ],
)
def test_batch_norm_honours_scale_and_center(flags: dict[str, bool], expected: float) -> None:
    case = make_case(**one_by_one(epsilon=1.0, values=BN_VALUES, **flags))  # type: ignore[arg-type]
    assert float(reference(case).outputs[0].value.ravel()[0]) == expected


def test_negative_axis_equals_positive_axis() -> None:
    pos = reference(make_case(axis=1)).outputs[0].value
    neg = reference(make_case(axis=-3)).outputs[0].value
    np.testing.assert_array_equal(pos, neg)


def test_training_uses_batch_statistics_and_momentum() -> None:
    from fuzz.model.case import Topology

    x = np.array([1.0, 3.0]).reshape(1, 1, 1, 2)
    case = make_case(
        topology=Topology.BN_STATS,
        c_in=1,
        c_out=1,
        height=1,
        width=2,
        kh=1,
        kw=1,
        training=True,
        momentum=0.5,
        epsilon=0.0,
        values={"x": x, "weight": 1.0, "gamma": 1.0, "beta": 0.0, "mean": 10.0, "var": 7.0},
    )
    out, new_mean, new_var = reference(case).outputs
    np.testing.assert_allclose(out.value.ravel(), [-1.0, 1.0])  # batch mean 2, batch var 1
    assert float(new_mean.value[0]) == pytest.approx(0.5 * 10 + 0.5 * 2)
    assert float(new_var.value[0]) == pytest.approx(0.5 * 7 + 0.5 * 1)


def test_inference_stats_outputs_are_the_moving_statistics() -> None:
    from fuzz.model.case import Topology

    case = make_case(topology=Topology.BN_STATS)
    _, new_mean, new_var = reference(case).outputs
    np.testing.assert_array_equal(new_mean.value, case.blocks[0].mean.float64())
    np.testing.assert_array_equal(new_var.value, case.blocks[0].var.float64())
    assert (new_mean.bound <= 1e-12 * new_mean.budget).all()  # only the reference's own rounding


@pytest.mark.parametrize(
    ("dtype", "eps_dtype"),
    [("float16", np.float32), ("bfloat16", np.float32), ("float32", np.float32), ("float64", np.float64)],
)
def test_epsilon_is_rounded_as_tvm_does(dtype: str, eps_dtype: type) -> None:
    # TVM adds the (double) epsilon as a scalar: float32 unless the tensor is wider.
    # var = 0 makes s = 1 / sqrt(eps), so the output shows which eps was used.
    case = make_case(
        dtype=dtype,
        **one_by_one(values={"x": 1.0, "weight": 1.0, "gamma": 1.0, "beta": 0.0, "mean": 0.0, "var": 0.0}),
    )
    eps = float(eps_dtype(1e-5))
    out = reference(case).outputs[0].value.ravel()[0]
    assert float(out) == pytest.approx(1 / np.sqrt(eps), rel=1e-15)


def test_float64_cases_use_a_wider_reference() -> None:
    ref = reference(make_case(dtype="float64")).outputs[0]
    assert np.finfo(ref.value.dtype).eps < np.finfo(np.float64).eps


def test_bound_follows_the_error_analysis() -> None:
    case = make_case()  # 2 input channels, 3x3 kernel: dot products of length 18
    ref = reference(case).outputs[0]
    u = dtype_facts("float32").u
    # Away from underflow the bound is SAFETY * gamma_{n+k}(u) * budget.
    ratio = ref.bound / ref.budget
    assert ratio.min() > 2 * gamma_k(18, u)
    assert ratio.max() < 2 * gamma_k(18 + 8, u) * 1.01
    assert ref.judged.all()


def test_public_overflow_report_is_robustly_finite_unfolded() -> None:
    case = make_case(
        **one_by_one(width=2, kw=2),  # type: ignore[arg-type]
        values={
            "x": 1e13,
            "weight": [[[[1e13, -1e13]]]],
            "gamma": 1e13,
            "beta": 0.0,
            "mean": 0.0,
            "var": 1.0,
        },
    )
    ref = reference(case)
    assert ref.outputs[0].robust.all()
    assert ref.fold_pressure > 0  # |s| * (|W| conv |X|) exceeds float32's max


def test_overflowing_unfolded_program_is_not_robust() -> None:
    case = make_case(**one_by_one(values={"x": 3e38, "weight": 2.0}))  # type: ignore[arg-type]
    assert not reference(case).outputs[0].robust.any()


#: q * gamma = -3.9e38 passes float32's maximum before beta = 3.1e38 brings the sum back
#: to -8e37: TVM's batch_norm gives -inf (once a false finite-to-nonfinite against fixed).
GAMMA_PAST_MAX = {"x": -2.0, "weight": 2.0**65, "gamma": 4.25e37, "beta": 3.1e38, "mean": 1.0, "var": 6.4e37}


def test_gamma_times_normalised_data_past_the_maximum_is_not_robust() -> None:
    out = reference(make_case(**one_by_one(values=GAMMA_PAST_MAX))).outputs[0]  # type: ignore[arg-type]
    assert -3.4e38 < float(out.value.ravel()[0]) < 0  # the output itself is finite
    assert not out.robust.any()


def test_division_by_zero_is_not_judged() -> None:
    case = make_case(**one_by_one(epsilon=0.0, values={"var": 0.0}))  # type: ignore[arg-type]
    out = reference(case).outputs[0]
    assert not out.judged.any() and not out.robust.any()
