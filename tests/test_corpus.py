"""The corpus: every entry replays as it expects (each upstream defect class fails on
``upstream`` and passes on ``fixed``), files are stable. Bad files are in
``tests/reliability/test_bad_input.py``. Replays come from the session's ``corpus``
fixture (``tests/replays.py``), which the report and determinism tests share."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from replays import CORPUS, DECLINE_ENTRIES, ENTRIES, MUTANT_ENTRIES, PIPELINE_ENTRIES, Replays, ids

from fuzz.backends.tvm.passes import resolve_pass
from fuzz.engine.decline_entries import DECLINED
from fuzz.engine.minimize import found, minimality
from fuzz.model.attributes import classify
from fuzz.model.decline_reasons import Reason, block_reasons
from fuzz.model.numerics import conv2d_nchw
from fuzz.oracle.reference import reference
from fuzz.oracle.verdict import Symptom
from fuzz.store.corpus import Entry, dumps_entry, load_entry

pytestmark = pytest.mark.xdist_group("corpus")


def defect_class(entry: Entry) -> str:
    """The upstream defect class (the README lists them) an entry shows."""
    attrs = classify(entry.case)
    if attrs["training"] == "True":
        return "training"
    if attrs["scale"] == "False":
        return "scale"
    if attrs["center"] == "False":
        return "center"
    if attrs["axis"] == "non-channel":
        return "axis"
    if attrs["data_layout"] == "NHWC":
        return "nhwc"
    if attrs["kernel_layout"] == "IOHW":
        return "iohw"
    if attrs["out_dtype"] != "same":
        return "out-dtype"
    if attrs["dtype"] != "float32":
        return attrs["dtype"]
    if entry.symptom is Symptom.FINITE_TO_NONFINITE:
        return "overflow"
    # Default flags, layouts and dtypes, yet wrong numbers: folded constants that underflow.
    return "underflow" if entry.symptom is Symptom.OUT_OF_TOLERANCE else "other"


def test_one_entry_per_upstream_defect_class() -> None:
    classes = sorted(defect_class(load_entry(path)) for path in ENTRIES)
    expected = [
        "axis", "bfloat16", "center", "float16", "float64", "iohw", "nhwc", "out-dtype", "overflow", "scale",
        "training", "underflow",
    ]  # fmt: skip
    assert classes == expected


@pytest.mark.parametrize("path", ENTRIES, ids=ids(ENTRIES))
def test_entry_fails_on_upstream_and_passes_on_fixed(path: Path, corpus: Replays) -> None:
    entry = corpus.entry(path)
    assert entry.expect == {"upstream": "fails", "fixed": "passes"}
    for name in ("upstream", "fixed"):
        result = corpus.replay(path, name)
        assert result.as_expected, f"{path.name} on {name}: {result.status}, expected {result.expected}"
    # Passing by leaving the graph alone is right only where folding is wrong.
    must_not_fold = defect_class(entry) in ("training", "axis")
    assert result.checked.execution.fired is not must_not_fold
    assert dumps_entry(entry) == path.read_text(), "stable formatting: sorted keys, 2-space indent"


@pytest.mark.slow
@pytest.mark.parametrize("path", ENTRIES, ids=ids(ENTRIES))
def test_entry_is_minimal(path: Path) -> None:
    """Nothing left that ``bnfuzz promote`` would still simplify, and the outputs show the bug."""
    entry = load_entry(path)
    upstream = resolve_pass("upstream")
    bug = found(entry.case, upstream)
    assert bug is not None and str(bug.signature) == entry.signature and bug.visible
    assert [a.description for a in minimality(entry.case, upstream) if a.outcome == "remains"] == []


@pytest.mark.parametrize(
    "path",
    # a crash replays in a worker process it starts: slow (make test)
    [pytest.param(p, marks=pytest.mark.slow) if "crash" in p.name else p for p in PIPELINE_ENTRIES],
    ids=ids(PIPELINE_ENTRIES),
)
def test_pipeline_entry_replays_as_expected(path: Path, corpus: Replays) -> None:
    entry = corpus.entry(path)
    assert entry.pipeline is not None and entry.expect
    for name in entry.expect:
        result = corpus.replay(path, name)
        assert result.as_expected, f"{path.name} on {name}: {result.status}, expected {result.expected}"
    assert dumps_entry(entry) == path.read_text()


def test_there_is_a_decline_entry_per_reason() -> None:
    named = {load_entry(p).signature for p in DECLINE_ENTRIES}
    assert named == {f"{DECLINED}[reason={r.name.lower()}]" for r in Reason}


@pytest.mark.parametrize("path", DECLINE_ENTRIES, ids=ids(DECLINE_ENTRIES))
def test_decline_entry_replays_and_its_reason_is_stated(path: Path, corpus: Replays) -> None:
    entry = corpus.entry(path)
    assert entry.declined and entry.expect["fixed"] == "passes"
    for name in entry.expect:
        result = corpus.replay(path, name)
        assert result.as_expected, f"{path.name} on {name}: {result.status}, expected {result.expected}"
        if name == "fixed":  # kept the batch_norm, and the must-fold property accepted it
            assert not result.checked.execution.fired
    reason = Reason[entry.signature.split("reason=", 1)[1].rstrip("]").upper()]
    assert all({d.reason for d in reasons} == {reason} for reasons in block_reasons(entry.case))
    assert dumps_entry(entry) == path.read_text()


def test_a_decline_entry_fails_on_a_pass_that_folds_it_anyway(corpus: Replays) -> None:
    # upstream folds training-mode batch_norm: the training entry fails on it
    assert corpus.replay(CORPUS / "declines" / "declined_reason=training_.json", "upstream").status == "fails"


@pytest.mark.parametrize("path", MUTANT_ENTRIES, ids=ids(MUTANT_ENTRIES))
def test_mutant_entry_fails_on_its_mutant_and_passes_on_fixed(path: Path, corpus: Replays) -> None:
    """Entries against mutants (``bnfuzz run --pass mutant:NAME``, :mod:`fuzz.backends.tvm.mutants`)."""
    entry = corpus.entry(path)
    mutants = [name for name in entry.expect if name.startswith("mutant:")]
    assert mutants and all(entry.expect[m] == "fails" for m in mutants)
    assert entry.expect["fixed"] == "passes"
    for name in entry.expect:
        result = corpus.replay(path, name)
        assert result.as_expected, f"{path.name} on {name}: {result.status}, expected {result.expected}"
    assert dumps_entry(entry) == path.read_text()


def test_the_accumulation_entry_overflows_inside_the_conv_with_finite_folded_weights() -> None:
    """TVM #20584's mechanism, found against a fold that guards only its weights: every
    folded weight is finite, the unfolded result is finite, yet the products x * W * s the
    folded conv sums pass the float32 maximum."""
    entry = load_entry(CORPUS / "mutants" / "finite-to-nonfinite.json")
    assert (
        entry.symptom is Symptom.FINITE_TO_NONFINITE and entry.expect["mutant:weights_guard_only"] == "fails"
    )
    case = entry.case
    (block,) = case.blocks
    assert block.conv is not None and block.weight is not None and case.dtype == "float32"
    assert (block.conv.data_layout, block.conv.kernel_layout) == ("NCHW", "OIHW")
    s = block.gamma.float64() / np.sqrt(block.var.float64() + block.bn.epsilon)
    folded = block.weight.float64() * s[:, None, None, None]
    f32_max = float(np.finfo(np.float32).max)
    assert np.all(np.abs(folded) <= f32_max), "the folded weights are finite in float32"
    assert np.all(np.isfinite(reference(case).outputs[0].value)), "the unfolded result is finite"
    sums = conv2d_nchw(np.abs(case.data.float64()), np.abs(folded), block.conv)
    assert sums.max() > f32_max, "the folded conv's products pass the float32 maximum"


@pytest.mark.slow  # the whole shipped corpus on a pass: fixed in make test, the others nightly
@pytest.mark.parametrize(
    "name",
    [
        "fixed",
        pytest.param("upstream", marks=pytest.mark.nightly),
        pytest.param("onnxruntime:basic", marks=pytest.mark.nightly),
    ],
)
def test_the_whole_corpus_replays_on_one_pass_and_lists_what_does_not_apply(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from fuzz.cli import main

    assert main(["replay", str(CORPUS), "--pass", name]) == 0
    out = capsys.readouterr().out.splitlines()
    lines = [line for line in out if line.startswith(("ok  ", "FAIL", "n/a "))]
    assert len(lines) == len(list(CORPUS.rglob("*.json")))  # one line per entry, none skipped
    outside = [line for line in lines if line.startswith("n/a ")]
    assert all("the case is outside this fold's backend (" in line for line in outside)
    assert (
        out[-1].endswith(f"{len(outside)} not applicable (the case is outside the fold's backend)")
        or not outside
    )
    if name == "onnxruntime:basic":  # TVM's own cases are not ONNX models
        assert any("/out-of-tolerance.json on onnxruntime:basic" in line for line in outside)
    if name == "fixed":  # an ONNX model TVM's frontend rejects (per-position statistics)
        assert any("spatial=per-position" in line and "frontend rejects" in line for line in outside)
