"""Fold effectiveness: does a pass fold whole networks, as TVM users import them,
correctly, and is the result as fast as upstream's? For TVM alone: it imports TVM.

**The model zoo** (:func:`run_effectiveness`, the default of ``bnfuzz effectiveness``):
each network of :mod:`fuzz.evaluation.zoo` is imported exactly as a TVM user imports it::

    mod = tvm.relax.frontend.onnx.from_onnx(model)      # parameters bound as constants
    mod = relax.transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", "HWIO"]})(mod)  # nhwc only
    folded = PASS()(mod)

in each :data:`VARIANTS` (``nchw``: float32 as imported; ``nhwc``: float32 converted
to NHWC data and HWIO kernels before the fold; ``float16``: the float16 model as
imported), and folded by three passes: ``upstream`` (TVM's), the pass measured
(``pass``) and ``bounded`` (:class:`fuzz.backends.tvm.fold_batchnorm.FoldBatchnormToConv2D` with
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
  reference (:func:`fuzz.evaluation.zoo.reference`, the ONNX reference interpreter on the model
  widened exactly), on one seeded standard normal image rounded to the model's dtype;
  None where the program did not run or an output is not finite (``finite`` says which);
- ``folds``: the per-fold judgement. Every Conv -> BatchNormalization pair of the ONNX
  graph becomes a single-layer :class:`~fuzz.model.case.Case` with its own weight,
  statistics and attributes (NCHW/OIHW, or NHWC/HWIO for ``nhwc``; standard normal data
  of the layer's input shape) and :func:`fuzz.engine.campaign.check` judges the pass on it
  (with one :class:`~fuzz.backends.tvm.compile_cache.CompileCache` for the whole run);
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
fuzzer case; :func:`is_right`, the criterion above; :func:`run_effectiveness`, the rows.

The single-layer benchmark (``bnfuzz effectiveness --layers``) is :mod:`fuzz.evaluation.layers`.
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

from fuzz.backends.tvm.compat import assert_well_formed, structural_equal, to_device
from fuzz.backends.tvm.compile_cache import CompileCache
from fuzz.backends.tvm.execute import count_batch_norms
from fuzz.backends.tvm.fold_batchnorm import FoldBatchnormToConv2D
from fuzz.backends.tvm.passes import PassFactory
from fuzz.engine.check import check
from fuzz.evaluation.timing import compile_for_timing, time_side_by_side
from fuzz.evaluation.zoo import MODELS, ConvBn, build_model, conv_bn_pairs, reference
from fuzz.model.case import BatchNormAttrs, Block, Case, Conv2dAttrs, Topology
from fuzz.model.tensor import Tensor
from fuzz.oracle.execution import summarise_error

__all__ = [
    "DEFAULT_SIZE",
    "ERROR_FACTOR",
    "VARIANTS",
    "Variant",
    "bounded",
    "import_variant",
    "is_right",
    "pair_case",
    "run_effectiveness",
]

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
        times = time_side_by_side(functions, [to_device(image)], self.rounds, self.number)
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
                built = compile_for_timing(module)
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
