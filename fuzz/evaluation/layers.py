"""Single layers (:func:`run_layers`, ``bnfuzz effectiveness --layers``; for TVM alone:
it imports TVM): layers from
ResNet-50 (the 7x7/2 stem, a 3x3 and two 1x1 bottleneck convs) and MobileNetV2 (a
depthwise 3x3 and a pointwise 1x1), each as conv + inference batch_norm built by our own
builder, in NCHW (OIHW kernel) and NHWC (HWIO kernel), float32 and float16, batch 1,
with drawn statistics (gamma in [0.2, 2], variance in [1e-3, 4], mean and beta normal
with deviation 0.5), He-initialised weights, standard normal data (seeded). Each row
gives the batch_norms left, the fuzzer's verdict and the runtime for the measured pass
and upstream, and their ratio where upstream folded the layer and was found right.

Times come from :func:`fuzz.evaluation.timing.time_side_by_side`, as in :mod:`fuzz.evaluation.effectiveness`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fuzz.backends.tvm.build import build_module, runtime_inputs
from fuzz.backends.tvm.compat import to_device
from fuzz.backends.tvm.execute import count_batch_norms
from fuzz.backends.tvm.passes import PassFactory
from fuzz.engine.check import check
from fuzz.evaluation.timing import compile_for_timing, time_side_by_side
from fuzz.model.case import BatchNormAttrs, Block, Case, Conv2dAttrs, Topology, kernel_shape
from fuzz.model.tensor import Tensor

__all__ = ["DTYPES", "LAYERS", "LAYOUTS", "Layer", "layer_case", "run_layers"]


#: (data layout, kernel layout) pairs
LAYOUTS = (("NCHW", "OIHW"), ("NHWC", "HWIO"))
DTYPES = ("float32", "float16")


@dataclass(frozen=True)
class Layer:
    """One conv + batch_norm layer: channels in and out, image size, kernel, stride, groups."""

    name: str
    c_in: int
    c_out: int
    size: int
    kernel: int
    stride: int = 1
    groups: int = 1

    @property
    def padding(self) -> int:
        return self.kernel // 2


LAYERS = (
    Layer("resnet50-stem-7x7/2", 3, 64, 224, 7, stride=2),
    Layer("resnet50-3x3", 64, 64, 56, 3),
    Layer("resnet50-1x1-reduce", 256, 64, 56, 1),
    Layer("resnet50-1x1-expand", 64, 256, 56, 1),
    Layer("mobilenetv2-depthwise-3x3", 144, 144, 56, 3, groups=144),
    Layer("mobilenetv2-pointwise-1x1", 144, 24, 56, 1),
)


def layer_case(layer: Layer, data_layout: str, kernel_layout: str, dtype: str, seed: int = 0) -> Case:
    """The layer as a :class:`~fuzz.model.case.Case` with realistic, seeded values."""
    rng = np.random.default_rng(seed)
    conv = Conv2dAttrs(
        strides=(layer.stride, layer.stride),
        padding=(layer.padding,) * 4,
        groups=layer.groups,
        data_layout=data_layout,
        kernel_layout=kernel_layout,
    )
    dims = {"N": 1, "C": layer.c_in, "H": layer.size, "W": layer.size}
    data = rng.standard_normal(tuple(dims[d] for d in data_layout))
    w_shape = kernel_shape(conv, layer.c_in, layer.c_out, layer.kernel, layer.kernel)
    fan_in = layer.c_in // layer.groups * layer.kernel**2
    weight = rng.standard_normal(w_shape) * np.sqrt(2.0 / fan_in)
    c = layer.c_out

    def tensor(values: np.ndarray[Any, Any]) -> Tensor:
        return Tensor.from_numpy(values, dtype)

    block = Block(
        bn=BatchNormAttrs(axis=conv.channel_axis),
        gamma=tensor(rng.uniform(0.2, 2.0, c)),
        beta=tensor(rng.normal(0.0, 0.5, c)),
        mean=tensor(rng.normal(0.0, 0.5, c)),
        var=tensor(rng.uniform(1e-3, 4.0, c)),
        conv=conv,
        weight=tensor(weight),
    )
    return Case(Topology.CONV_BN, tensor(data), (block,))


def run_layers(
    make_pass: PassFactory,
    upstream: PassFactory,
    *,
    rounds: int = 7,
    number: int = 5,
    layers: tuple[Layer, ...] = LAYERS,
    log: Callable[[str], None] = lambda _: None,
) -> list[dict[str, Any]]:
    """One row per (layer, layout, dtype); see the module docstring."""
    rows = []
    for layer in layers:
        for data_layout, kernel_layout in LAYOUTS:
            for dtype in DTYPES:
                label = f"{layer.name} {data_layout}/{kernel_layout} {dtype}"
                log(label)
                case = layer_case(layer, data_layout, kernel_layout, dtype)
                rows.append(_layer_row(case, label, make_pass, upstream, rounds, number))
    return rows


def _layer_row(
    case: Case, label: str, make_pass: PassFactory, upstream: PassFactory, rounds: int, number: int
) -> dict[str, Any]:
    row: dict[str, Any] = {"layer": label}
    variants: dict[str, Any] = {"unfolded": build_module(case)}
    for name, factory in (("pass", make_pass), ("upstream", upstream)):
        verdict = check(case, factory).verdict
        finding = verdict.primary
        try:
            mod = factory()(build_module(case))
        except Exception as exc:
            row[name] = {"batch_norms": None, "finding": f"pass-exception: {type(exc).__name__}"}
            continue
        row[name] = {
            "batch_norms": count_batch_norms(mod),
            "finding": None if finding is None else f"{finding.symptom.value}: {finding.message[:120]}",
        }
        if finding is None:
            variants[name] = mod
    functions = {}
    for name, mod in variants.items():
        try:
            functions[name] = compile_for_timing(mod)
        except Exception as exc:  # e.g. upstream's ill-formed NHWC output
            row.setdefault(name, {})["finding"] = f"build-failure: {type(exc).__name__}"
    inputs = [to_device(a) for a in runtime_inputs(case)]
    times = time_side_by_side(functions, inputs, rounds, number)
    for name, ms in times.items():
        row.setdefault(name, {})["ms"] = ms
    upstream_folded = "upstream" in times and row["upstream"].get("batch_norms") == 0
    if "pass" in times and upstream_folded:
        row["ratio"] = round(times["pass"] / times["upstream"], 4)
    return row
