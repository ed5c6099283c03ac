"""The case model: lossless, versioned JSON, and clear errors naming the field."""

from __future__ import annotations

import json

import pytest
from cases import make_case
from hypothesis import given

import strategies
from fuzz.model.case import Case
from fuzz.model.case_json import case_to_json, dumps, loads, same_bits
from fuzz.model.tensor import CaseError


def all_values(case: Case) -> list[float]:
    out = list(case.data.values)
    for b in case.blocks:
        for t in (b.weight, b.gamma, b.beta, b.mean, b.var):
            if t is not None:
                out.extend(t.values)
    return out


@given(strategies.cases())
def test_json_round_trip_keeps_exact_bits(case: Case) -> None:
    back = loads(dumps(case))
    assert back == case
    assert same_bits(all_values(back), all_values(case))
    assert dumps(back) == dumps(case)  # stable text


def test_signed_zero_and_subnormals_survive() -> None:
    values = {"x": -0.0, "weight": 1e-45, "beta": -0.0, "gamma": 3.4028234663852886e38}
    case = make_case(c_in=1, c_out=1, height=1, width=1, kh=1, kw=1, values=values)
    back = loads(dumps(case))
    assert same_bits(all_values(back), all_values(case))
    assert back.data.values[0].hex() == "-0x0.0p+0"


def edited(mutate: object) -> str:
    obj = case_to_json(make_case())
    mutate(obj)  # type: ignore[operator]
    return json.dumps(obj)


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ('{"schema": 1, "topology": "conv-bn"', "case", "not valid JSON"),
        (edited(lambda o: o.update(schema=99)), "case.schema", "unknown schema version 99"),
        (edited(lambda o: o["data"].update(dtype="int8")), "case.data.dtype", "unknown dtype 'int8'"),
        (edited(lambda o: o["data"]["values"].pop()), "case.data.values", "do not fill shape"),
        (edited(lambda o: o["blocks"][0].pop("gamma")), "case.blocks[0].gamma", "missing"),
        (edited(lambda o: o["blocks"][0]["conv"].update(kernel_layout="XYZW")), "case.blocks[0].conv.kernel_layout", "XYZW"),
        (edited(lambda o: o["blocks"][0]["bn"].update(epsilon="-0x1p+0")), "case.blocks[0].bn.epsilon", "non-negative"),
        (edited(lambda o: o.update(topology="conv-conv")), "case.topology", "unknown topology"),
    ],
    ids=["truncated", "schema", "dtype", "size", "missing", "layout", "epsilon", "topology"],
)  # fmt: skip
def test_bad_json_names_the_field(text: str, field: str, words: str) -> None:
    with pytest.raises(CaseError) as info:
        loads(text)
    assert info.value.field == field
    assert words in str(info.value)
