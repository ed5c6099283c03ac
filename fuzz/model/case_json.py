"""A case as JSON: exact bits, signed zeros included (``float.hex()`` values), and a
schema version, so every case in ``corpus/`` replays bit for bit.

:func:`case_from_json` reports a broken file as :class:`fuzz.model.case.CaseError` naming the
field (``case.blocks[0].gamma``), never as a traceback.
"""

from __future__ import annotations

import contextlib
import enum
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

from fuzz.model.case import BatchNormAttrs, Block, Case, Conv2dAttrs, Epilogue, Topology
from fuzz.model.form import Form, Importer, OnnxForm, TorchForm
from fuzz.model.tensor import OPERANDS, CaseError, Tensor

__all__ = [
    "READABLE_SCHEMAS",
    "SCHEMA_VERSION",
    "case_from_json",
    "case_to_json",
    "dumps",
    "loads",
    "same_bits",
]

#: Version 2 added the conv bias, the epilogue, the residual and the form; version 1
#: files (none of these) still read, with every new field at its default.
SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)

# ---------------------------------------------------------------------------
# JSON round-trip


def _tensor_to_json(t: Tensor) -> dict[str, Any]:
    return {"dtype": t.dtype, "shape": list(t.shape), "values": [v.hex() for v in t.values]}


def _tensor_from_json(obj: Any, where: str) -> Tensor:
    data = _mapping(obj, where)
    shape = _get(data, "shape", list, where)
    values = _get(data, "values", list, where)
    try:
        floats = tuple(float.fromhex(v) if isinstance(v, str) else float(v) for v in values)
    except (TypeError, ValueError) as exc:
        raise CaseError(f"{where}.values", f"not a list of hex floats ({exc})") from None
    if not all(isinstance(d, int) for d in shape):
        raise CaseError(f"{where}.shape", f"must be a list of integers, got {shape!r}")
    try:
        return Tensor(_get(data, "dtype", str, where), tuple(shape), floats)
    except CaseError as exc:
        raise CaseError(f"{where}.{exc.field}", exc.detail) from None


def _mapping(obj: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise CaseError(where, f"expected an object, got {type(obj).__name__}")
    return obj


def _get(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in data:
        raise CaseError(f"{where}.{key}", "missing")
    value = data[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CaseError(f"{where}.{key}", f"expected {kind.__name__}, got {value!r}")
    return value


def case_to_json(case: Case) -> dict[str, Any]:
    """A JSON-ready dict with exact float bits and the schema version."""

    def block(b: Block) -> dict[str, Any]:
        out: dict[str, Any] = {
            "bn": {
                "axis": b.bn.axis,
                "epsilon": b.bn.epsilon.hex(),
                "center": b.bn.center,
                "scale": b.bn.scale,
                "momentum": b.bn.momentum.hex(),
                "training": b.bn.training,
            },
        }
        for name in OPERANDS:
            t = b.operand(name)
            if t is not None:
                out[name] = _tensor_to_json(t)
        if b.conv is not None:
            c = b.conv
            out["conv"] = {
                "strides": list(c.strides),
                "padding": list(c.padding),
                "dilation": list(c.dilation),
                "groups": c.groups,
                "data_layout": c.data_layout,
                "kernel_layout": c.kernel_layout,
                "out_dtype": c.out_dtype,
            }
        return out

    out: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "topology": case.topology.value,
        "parameters": list(case.parameters),
        "data": _tensor_to_json(case.data),
        "blocks": [block(b) for b in case.blocks],
        "epilogue": case.epilogue.value,
        "form": {
            "importer": case.form.importer.value,
            "dataflow": case.form.dataflow,
            "dead_statistics": case.form.dead_statistics,
            "functions": case.form.functions,
        },
    }
    if case.form.onnx != OnnxForm():  # written only where it says something
        o = case.form.onnx
        out["form"]["onnx"] = {
            "opset": o.opset,
            "ir_version": o.ir_version,
            "initializer_inputs": o.initializer_inputs,
            "overridden": list(o.overridden),
            "spatial": o.spatial,
            "value_info": o.value_info,
            "rank": o.rank,
            "transpose": o.transpose,
        }
    if case.form.torch != TorchForm():
        t = case.form.torch
        out["form"]["torch"] = {"rank": t.rank, "transpose": t.transpose, "channels_last": t.channels_last}
    if case.residual is not None:
        out["residual"] = _tensor_to_json(case.residual)
    return out


def _hexfloat(data: Mapping[str, Any], key: str, where: str) -> float:
    value = _get(data, key, object, where)
    try:
        return float.fromhex(value) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise CaseError(f"{where}.{key}", f"not a float: {value!r}") from None


def _ints(data: Mapping[str, Any], key: str, n: int, where: str) -> tuple[int, ...]:
    value = _get(data, key, list, where)
    if len(value) != n or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise CaseError(f"{where}.{key}", f"expected {n} integers, got {value!r}")
    return tuple(value)


@contextlib.contextmanager
def _within(where: str) -> Iterator[None]:
    """Prefix the field of a :class:`CaseError` raised by a constructor with ``where``."""
    try:
        yield
    except CaseError as exc:
        if exc.field.startswith("case."):
            raise
        raise CaseError(f"{where}.{exc.field}", exc.detail) from None


def case_from_json(obj: Any) -> Case:
    """Parse :func:`case_to_json` output; raises :class:`CaseError` naming the field."""
    data = _mapping(obj, "case")
    schema = _get(data, "schema", int, "case")
    if schema not in READABLE_SCHEMAS:
        raise CaseError(
            "case.schema",
            f"unknown schema version {schema}; this tool reads {', '.join(map(str, READABLE_SCHEMAS))}",
        )
    try:
        topology = Topology(_get(data, "topology", str, "case"))
    except ValueError:
        raise CaseError(
            "case.topology", f"unknown topology; expected one of {[t.value for t in Topology]}"
        ) from None
    blocks = []
    for i, raw in enumerate(_get(data, "blocks", list, "case")):
        where = f"case.blocks[{i}]"
        b = _mapping(raw, where)
        bn_raw = _mapping(_get(b, "bn", dict, where), f"{where}.bn")
        with _within(f"{where}.bn"):
            bn = BatchNormAttrs(
                axis=_get(bn_raw, "axis", int, f"{where}.bn"),
                epsilon=_hexfloat(bn_raw, "epsilon", f"{where}.bn"),
                center=_get(bn_raw, "center", bool, f"{where}.bn"),
                scale=_get(bn_raw, "scale", bool, f"{where}.bn"),
                momentum=_hexfloat(bn_raw, "momentum", f"{where}.bn"),
                training=_get(bn_raw, "training", bool, f"{where}.bn"),
            )
        conv = None
        if "conv" in b:
            w = f"{where}.conv"
            c = _mapping(b["conv"], w)
            with _within(w):
                conv = Conv2dAttrs(
                    strides=_ints(c, "strides", 2, w),  # type: ignore[arg-type]
                    padding=_ints(c, "padding", 4, w),  # type: ignore[arg-type]
                    dilation=_ints(c, "dilation", 2, w),  # type: ignore[arg-type]
                    groups=_get(c, "groups", int, w),
                    data_layout=_get(c, "data_layout", str, w),
                    kernel_layout=_get(c, "kernel_layout", str, w),
                    out_dtype=_get(c, "out_dtype", str, w),
                )
        tensors = {name: _tensor_from_json(b[name], f"{where}.{name}") for name in OPERANDS if name in b}
        for name in ("gamma", "beta", "mean", "var"):
            if name not in tensors:
                raise CaseError(f"{where}.{name}", "missing")
        blocks.append(
            Block(
                bn=bn,
                conv=conv,
                weight=tensors.get("weight"),
                gamma=tensors["gamma"],
                beta=tensors["beta"],
                mean=tensors["mean"],
                var=tensors["var"],
                bias=tensors.get("bias"),
            )
        )
    params = _get(data, "parameters", list, "case")
    epilogue, residual, form = Epilogue.NONE, None, Form()
    if schema >= 2:
        epilogue = _enum(Epilogue, _get(data, "epilogue", str, "case"), "case.epilogue")
        if "residual" in data:
            residual = _tensor_from_json(data["residual"], "case.residual")
        raw = _mapping(_get(data, "form", dict, "case"), "case.form")
        with _within("case.form"):
            form = Form(
                importer=_enum(Importer, _get(raw, "importer", str, "case.form"), "case.form.importer"),
                dataflow=_get(raw, "dataflow", bool, "case.form"),
                dead_statistics=_get(raw, "dead_statistics", bool, "case.form"),
                functions=_get(raw, "functions", int, "case.form"),
                onnx=_onnx_form(raw),
                torch=_torch_form(raw),
            )
    with _within("case"):
        return Case(
            topology=topology,
            data=_tensor_from_json(_get(data, "data", dict, "case"), "case.data"),
            blocks=tuple(blocks),
            parameters=tuple(params),
            epilogue=epilogue,
            residual=residual,
            form=form,
        )


_E = TypeVar("_E", bound=enum.Enum)


def _onnx_form(raw: Mapping[str, Any]) -> OnnxForm:
    if "onnx" not in raw:
        return OnnxForm()
    o = _mapping(_get(raw, "onnx", dict, "case.form"), "case.form.onnx")
    where = "case.form.onnx"
    spatial = o.get("spatial")
    if spatial is not None and not isinstance(spatial, bool):
        raise CaseError(f"{where}.spatial", f"must be true, false or null, got {spatial!r}")
    overridden = _get(o, "overridden", list, where)
    if not all(isinstance(name, str) for name in overridden):
        raise CaseError(f"{where}.overridden", "must be a list of operand names")
    with _within(where):
        return OnnxForm(
            opset=_get(o, "opset", int, where),
            ir_version=_get(o, "ir_version", int, where),
            initializer_inputs=_get(o, "initializer_inputs", bool, where),
            overridden=tuple(overridden),
            spatial=spatial,
            value_info=_get(o, "value_info", bool, where),
            # absent in entries written before convolutions of other ranks were drawn
            rank=_get(o, "rank", int, where) if "rank" in o else 2,
            transpose=_get(o, "transpose", bool, where) if "transpose" in o else False,
        )


def _torch_form(raw: Mapping[str, Any]) -> TorchForm:
    if "torch" not in raw:
        return TorchForm()
    where = "case.form.torch"
    t = _mapping(_get(raw, "torch", dict, "case.form"), where)
    with _within(where):
        return TorchForm(
            rank=_get(t, "rank", int, where),
            transpose=_get(t, "transpose", bool, where),
            channels_last=_get(t, "channels_last", bool, where),
        )


def _enum(kind: type[_E], value: str, where: str) -> _E:
    try:
        return kind(value)
    except ValueError:
        raise CaseError(
            where, f"unknown value {value!r}; expected one of {[e.value for e in kind]}"
        ) from None


def dumps(case: Case) -> str:
    """Stable text form: sorted keys, two-space indent, trailing newline."""
    return json.dumps(case_to_json(case), sort_keys=True, indent=2) + "\n"


def loads(text: str) -> Case:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CaseError("case", f"not valid JSON ({exc})") from None
    return case_from_json(obj)


def same_bits(a: Sequence[float], b: Sequence[float]) -> bool:
    """Exact float-bit equality (tells -0.0 from 0.0)."""
    return len(a) == len(b) and all(x.hex() == y.hex() for x, y in zip(a, b, strict=True))
