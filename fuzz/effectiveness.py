"""Fold effectiveness: does a pass fold whole networks, as TVM users import them,
correctly, and is the result as fast as upstream's?

**The model zoo** (:func:`run_effectiveness`, the default of ``bnfuzz effectiveness``):
each network of :mod:`fuzz.zoo` is imported exactly as a TVM user imports it::

    mod = tvm.relax.frontend.onnx.from_onnx(model)      # parameters bound as constants
    mod = relax.transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", "HWIO"]})(mod)  # nhwc only
    folded = PASS()(mod)

in each :data:`VARIANTS` (``nchw``: float32 as imported; ``nhwc``: float32 converted
to NHWC data and HWIO kernels before the fold; ``float16``: the float16 model as
imported), and folded by three passes: ``upstream`` (TVM's), the pass measured
(``pass``) and ``bounded`` (:class:`fuzz.fold_batchnorm.FoldBatchnormToConv2D` with
``assume_bounded_activations=True``: every scale folded into the weights). One row per
model and variant; for the unfolded program and each pass:

- ``batch_norms``: ``relax.nn.batch_norm`` calls left (the row's ``batch_norms``: before);
- ``exception``: what the pass raised, if it did; ``failure``: why the program did not
  turn out well-formed, build or run. A float16 network does not build unfolded on TVM
  0.27 (its batch_norm lowers to float32 and the next conv rejects the mix); the row
  then also has ``decomposed``: the unfolded network through
  ``relax.transform.DecomposeOpsForInference`` (batch_norm as arithmetic in the model's
  dtype, which builds), the baseline that float16 folds are compared with;
- ``error``: ``max |out - ref| / max |ref|`` over the output against the float64
  reference (:func:`fuzz.zoo.reference`, the ONNX reference interpreter on the model
  widened exactly), on one seeded standard normal image rounded to the model's dtype;
  None where the program did not run or an output is not finite (``finite`` says which);
- ``folds``: the per-fold judgement. Every Conv -> BatchNormalization pair of the ONNX
  graph becomes a single-layer :class:`~fuzz.case.Case` with its own weight,
  statistics and attributes (NCHW/OIHW, or NHWC/HWIO for ``nhwc``; standard normal data
  of the layer's input shape) and :func:`fuzz.campaign.check` judges the pass on it
  (with one :class:`~fuzz.compile_cache.CompileCache` for the whole run);
  ``findings`` counts the layers with a finding, ``symptoms`` names them;
- ``right``: the pass is right on the network (:func:`is_right`): it raised nothing,
  its program ran, it left no batch_norm, no fold check found anything, and its error
  is finite and at most :data:`ERROR_FACTOR` times the baseline's (the unfolded
  program's, else the decomposed one's; or the dtype's unit roundoff if that is
  larger): a fold may round differently, not worse by more than a small factor;
- ``ms``: the compiled runtime, built with one fusing pipeline for every program
  (``zero_pipeline`` under ``PassContext(opt_level=3)``, plain ``llvm``), timed side by
  side: the programs take turns, ``rounds`` times, and each round's time is the median
  of ``number`` calls; the figure is the median over rounds. Programs structurally
  equal to one another are compiled once (and still timed separately).

``ratio`` is the measured pass's runtime over upstream's, reported only where upstream
is right.

Abstractions: :class:`Variant` (:data:`VARIANTS`) and :func:`import_variant`, how a
model reaches the pass; :func:`pair_case`, one conv + batch norm pair of a model as a
fuzzer case; :func:`is_right`, the criterion above; :func:`run_effectiveness`, the rows;
:class:`Layer`, :data:`LAYERS`, :func:`layer_case` and :func:`run_layers`, the
single-layer benchmark.

**Single layers** (:func:`run_layers`, ``bnfuzz effectiveness --layers``): layers from
ResNet-50 (the 7x7/2 stem, a 3x3 and two 1x1 bottleneck convs) and MobileNetV2 (a
depthwise 3x3 and a pointwise 1x1), each as conv + inference batch_norm built by our own
builder, in NCHW (OIHW kernel) and NHWC (HWIO kernel), float32 and float16, batch 1,
with drawn statistics (gamma in [0.2, 2], variance in [1e-3, 4], mean and beta normal
with deviation 0.5), He-initialised weights, standard normal data (seeded). Each row
gives the batch_norms left, the fuzzer's verdict and the runtime for the measured pass
and upstream, and their ratio where upstream folded the layer and was found right.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

from fuzz.build import build_module, runtime_inputs
from fuzz.case import BatchNormAttrs, Block, Case, Conv2dAttrs, Tensor, Topology, kernel_shape
from fuzz.check import check
from fuzz.compat import assert_well_formed, structural_equal, summarise_error, to_device
from fuzz.compile_cache import CompileCache
from fuzz.execute import count_batch_norms
from fuzz.fold_batchnorm import FoldBatchnormToConv2D
from fuzz.passes import PassFactory
from fuzz.zoo import MODELS, ConvBn, build_model, conv_bn_pairs, reference

__all__ = [
    "DEFAULT_SIZE",
    "DTYPES",
    "ERROR_FACTOR",
    "LAYERS",
    "LAYOUTS",
    "SLOW_CALL_SECONDS",
    "VARIANTS",
    "Layer",
    "Variant",
    "bounded",
    "import_variant",
    "is_right",
    "layer_case",
    "pair_case",
    "run_effectiveness",
    "run_layers",
]

#: A program slower than this per call is timed in 3 rounds of 1 call.
SLOW_CALL_SECONDS = 0.5
#: The default input resolution of the zoo: every model, variant and pass in about 20
#: minutes on two shared cores, most of it compiling and the float16 rows, whose convs
#: run emulated (224, the published resolution, is 12 times the work per call).
DEFAULT_SIZE = 64
#: A pass is right on a network only if its error is at most this many times the
#: unfolded program's own error (see :func:`is_right`).
ERROR_FACTOR = 4.0


@dataclass(frozen=True)
class Variant:
    """How a zoo model is imported: the model's dtype and the conv layout the fold sees
    (``NCHW``: as the frontend writes it; ``NHWC``: after ``ConvertLayout`` to NHWC/HWIO)."""

    dtype: str
    layout: str

    @property
    def kernel_layout(self) -> str:
        return "OIHW" if self.layout == "NCHW" else "HWIO"


VARIANTS: dict[str, Variant] = {
    "nchw": Variant("float32", "NCHW"),
    "nhwc": Variant("float32", "NHWC"),
    "float16": Variant("float16", "NCHW"),
}


def bounded() -> tvm.ir.transform.Pass:
    """Our pass folding every scale into the weights (``assume_bounded_activations``)."""
    return FoldBatchnormToConv2D(assume_bounded_activations=True)


def import_variant(model: onnx.ModelProto, variant: Variant) -> tvm.IRModule:
    """``model`` imported by TVM's ONNX frontend (parameters bound as constants), for
    ``NHWC`` then converted by ``ConvertLayout`` to NHWC data and HWIO kernels."""
    mod = from_onnx(model)
    if variant.layout == "NHWC":
        mod = relax.transform.ConvertLayout({"relax.nn.conv2d": [variant.layout, variant.kernel_layout]})(mod)
    return mod


def pair_case(pair: ConvBn, variant: Variant, rng: np.random.Generator) -> Case:
    """The conv + batch norm ``pair`` as a single-layer :class:`Case` in the variant's
    layout, on standard normal data (from ``rng``) of its input shape rounded to its dtype."""
    dtype = str(pair.weight.dtype)
    conv = Conv2dAttrs(
        strides=pair.strides,
        padding=pair.pads,
        dilation=pair.dilations,
        groups=pair.group,
        data_layout=variant.layout,
        kernel_layout=variant.kernel_layout,
    )
    data = rng.standard_normal(pair.input_shape)
    data = np.transpose(data, ["NCHW".index(d) for d in variant.layout])
    weight = np.transpose(pair.weight, ["OIHW".index(d) for d in variant.kernel_layout])

    def tensor(values: np.ndarray[Any, Any]) -> Tensor:
        return Tensor.from_numpy(values, dtype)

    block = Block(
        bn=BatchNormAttrs(axis=conv.channel_axis, epsilon=pair.epsilon),
        gamma=tensor(pair.gamma),
        beta=tensor(pair.beta),
        mean=tensor(pair.mean),
        var=tensor(pair.var),
        conv=conv,
        weight=tensor(weight),
    )
    return Case(Topology.CONV_BN, tensor(data), (block,))


def is_right(entry: dict[str, Any], baseline: float | None, dtype: str) -> bool:
    """Whether a pass's ``entry`` of a zoo row shows it right on the network: no
    exception, a program that ran, no batch_norm left, no fold check with a finding, and
    a finite error at most :data:`ERROR_FACTOR` times ``max(baseline, unit roundoff)``,
    ``baseline`` being the unfolded program's error (any finite error if it is None)."""
    error = entry.get("error")
    if entry.get("exception") or entry.get("failure") or error is None:
        return False
    if entry["batch_norms"] != 0 or entry["folds"]["findings"] != 0:
        return False
    roundoff = float(np.finfo(np.dtype(dtype)).eps) / 2
    return baseline is None or bool(error <= ERROR_FACTOR * max(baseline, roundoff))


def run_effectiveness(
    make_pass: PassFactory,
    upstream: PassFactory,
    *,
    models: Iterable[str] = tuple(MODELS),
    variants: Iterable[str] = tuple(VARIANTS),
    size: int = DEFAULT_SIZE,
    seed: int = 0,
    rounds: int = 7,
    number: int = 5,
    log: Callable[[str], None] = lambda _: None,
) -> list[dict[str, Any]]:
    """One row per model and variant; see the module docstring."""
    bench = _Zoo({"upstream": upstream, "pass": make_pass, "bounded": bounded}, seed, rounds, number, log)
    rows = []
    for name in models:
        built: dict[str, tuple[onnx.ModelProto, np.ndarray[Any, Any], np.ndarray[Any, Any]]] = {}
        for variant_name in variants:
            variant = VARIANTS[variant_name]
            if variant.dtype not in built:
                log(f"{name}: building the {variant.dtype} model at {size}x{size} and its reference output")
                model = build_model(name, size, variant.dtype, seed)
                image = np.random.default_rng(seed).standard_normal((1, 3, size, size)).astype(variant.dtype)
                built[variant.dtype] = (model, image, reference(model, image))
            start = time.perf_counter()
            row: dict[str, Any] = {"model": name, "variant": variant_name, "dtype": variant.dtype}
            row["layout"] = f"{variant.layout}/{variant.kernel_layout}"
            row.update(bench.row(f"{name} {variant_name}", variant, *built[variant.dtype]))
            row["seconds"] = round(time.perf_counter() - start, 1)
            rows.append(row)
    return rows


@dataclass
class _Zoo:
    """What every zoo row shares: the passes, one compile cache for the fold checks, the
    seed, the timing settings and the progress log."""

    passes: dict[str, PassFactory]
    seed: int
    rounds: int
    number: int
    log: Callable[[str], None]
    cache: CompileCache = field(default_factory=lambda: CompileCache(capacity=1024))

    def row(
        self,
        label: str,
        variant: Variant,
        model: onnx.ModelProto,
        image: np.ndarray[Any, Any],
        ref: np.ndarray[Any, Any],
    ) -> dict[str, Any]:
        """The measured part of one row (see the module docstring)."""
        mod = import_variant(model, variant)
        row: dict[str, Any] = {
            "onnx_batch_norms": sum(n.op_type == "BatchNormalization" for n in model.graph.node),
            "batch_norms": count_batch_norms(mod),
        }
        entries: dict[str, dict[str, Any]] = {"unfolded": {"batch_norms": row["batch_norms"]}}
        modules = {"unfolded": mod}
        for key, factory in self.passes.items():
            entries[key], folded = _fold(factory, mod)
            if folded is not None:
                modules[key] = folded
        pairs = conv_bn_pairs(model)
        self.log(f"{label}: checking its {len(pairs)} folds one by one, with each pass")
        for key, folds in self._fold_checks(pairs, variant).items():
            entries[key]["folds"] = folds
        functions = _compile_and_run(label, modules, image, ref, entries, self.log)
        if "failure" in entries["unfolded"]:  # float16 on TVM 0.27: batch_norm lowers to float32
            decomposed = relax.transform.DecomposeOpsForInference()(mod)
            entries["decomposed"] = {"batch_norms": count_batch_norms(decomposed)}
            functions |= _compile_and_run(label, {"decomposed": decomposed}, image, ref, entries, self.log)
        baseline = entries["decomposed" if "decomposed" in entries else "unfolded"].get("error")
        self.log(f"{label}: timing {len(functions)} programs side by side")
        times = _time_side_by_side(functions, [to_device(image)], self.rounds, self.number)
        for key, ms in times.items():
            entries[key]["ms"] = ms
        for key in self.passes:
            entries[key]["right"] = is_right(entries[key], baseline, variant.dtype)
        row.update(entries)
        if entries["upstream"]["right"] and "ms" in entries["pass"]:
            row["ratio"] = round(entries["pass"]["ms"] / entries["upstream"]["ms"], 4)
        return row

    def _fold_checks(self, pairs: list[ConvBn], variant: Variant) -> dict[str, dict[str, Any]]:
        """Per pass: how many of the pairs, each checked as a single-layer case, have a
        finding, and which. Each case is made once for all passes, and dropped after: a
        big layer's case holds its values as Python floats."""
        symptoms: dict[str, Counter[str]] = {key: Counter() for key in self.passes}
        for i, pair in enumerate(pairs):
            case = pair_case(pair, variant, np.random.default_rng([self.seed, i]))
            for key, factory in self.passes.items():
                finding = check(case, factory, self.cache.run).verdict.primary
                if finding is not None:
                    symptoms[key][finding.symptom.value] += 1
        return {
            key: {"layers": len(pairs), "findings": sum(found.values()), "symptoms": dict(found)}
            for key, found in symptoms.items()
        }


def _fold(factory: PassFactory, mod: tvm.IRModule) -> tuple[dict[str, Any], tvm.IRModule | None]:
    """The pass's entry so far (batch_norms left, what it raised or why its output is
    ill-formed) and its well-formed output, if any."""
    try:
        folded = factory()(mod)
    except Exception as exc:
        return {"batch_norms": None, "exception": _describe(exc)}, None
    entry = {"batch_norms": count_batch_norms(folded)}
    try:
        assert_well_formed(folded)
    except Exception as exc:
        return {**entry, "failure": f"ill-formed: {_describe(exc)}"}, None
    return entry, folded


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {summarise_error(exc)}"


def _compile_and_run(
    label: str,
    modules: dict[str, tvm.IRModule],
    image: np.ndarray[Any, Any],
    ref: np.ndarray[Any, Any],
    entries: dict[str, dict[str, Any]],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Compile each module (once per structure), run it on ``image`` and record its error
    against ``ref`` (or its failure) in ``entries``; the VM functions that ran."""
    compiled: list[tuple[tvm.IRModule, Any]] = []  # (module, VM function or the exception)
    functions = {}
    for key, module in modules.items():
        entry = entries[key]
        built = next((made for seen, made in compiled if structural_equal(seen, module)), None)
        if built is None:
            log(f"{label}: compiling {key}")
            start = time.perf_counter()
            try:
                built = _compile(module)
            except Exception as exc:
                built = exc
            entry["compile_seconds"] = round(time.perf_counter() - start, 1)
            compiled.append((module, built))
        if isinstance(built, Exception):
            entry["failure"] = f"build: {_describe(built)}"
            continue
        try:
            out = built(to_device(image)).numpy().astype(np.float64)
        except Exception as exc:
            entry["failure"] = f"run: {_describe(exc)}"
            continue
        entry["finite"] = bool(np.isfinite(out).all())
        entry["error"] = float(np.abs(out - ref).max() / np.abs(ref).max()) if entry["finite"] else None
        functions[key] = built
    return functions


# ---------------------------------------------------------------------------
# Single layers

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
    """The layer as a :class:`~fuzz.case.Case` with realistic, seeded values."""
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
            functions[name] = _compile(mod)
        except Exception as exc:  # e.g. upstream's ill-formed NHWC output
            row.setdefault(name, {})["finding"] = f"build-failure: {type(exc).__name__}"
    inputs = [to_device(a) for a in runtime_inputs(case)]
    times = _time_side_by_side(functions, inputs, rounds, number)
    for name, ms in times.items():
        row.setdefault(name, {})["ms"] = ms
    upstream_folded = "upstream" in times and row["upstream"].get("batch_norms") == 0
    if "pass" in times and upstream_folded:
        row["ratio"] = round(times["pass"] / times["upstream"], 4)
    return row


# ---------------------------------------------------------------------------
# Compiling and timing


def _compile(mod: tvm.IRModule) -> Any:
    with tvm.transform.PassContext(opt_level=3):
        exe = relax.build(relax.pipeline.zero_pipeline()(mod), target="llvm")
    return relax.VirtualMachine(exe, tvm.cpu())["main"]


def _time_side_by_side(
    functions: dict[str, Any], inputs: list[Any], rounds: int, number: int
) -> dict[str, float]:
    """Median over ``rounds`` of each function's median time of ``number`` calls, in ms;
    the functions take turns within every round."""
    per_round: dict[str, list[float]] = {name: [] for name in functions}
    slowest = 0.0
    for main in functions.values():
        start = time.perf_counter()
        main(*inputs)  # warm up
        slowest = max(slowest, time.perf_counter() - start)
    if slowest > SLOW_CALL_SECONDS:  # emulated float16 convs take seconds per call
        rounds, number = min(rounds, 3), 1
    for _ in range(rounds):
        for name, main in functions.items():
            samples = []
            for _ in range(number):
                start = time.perf_counter()
                main(*inputs)
                samples.append(time.perf_counter() - start)
            per_round[name].append(float(np.median(samples)))
    return {name: round(float(np.median(times)) * 1e3, 4) for name, times in per_round.items()}
