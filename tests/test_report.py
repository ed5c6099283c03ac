"""Reproducer scripts and issue text: exact text for one entry, and every corpus entry's
script reproduces its bug in a fresh process (and stops once the pass is fixed). Issue
texts take each entry's replay from the session's ``corpus`` fixture."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from replays import ENTRIES, PIPELINE_ENTRIES, ROOT, Replays, ids
from script_batch import run_scripts

from fuzz.backends import backend_of
from fuzz.cli import main
from fuzz.oracle.execution import Outputs
from fuzz.oracle.verdict import Symptom
from fuzz.render.report import issue_of, render_issue, render_script
from fuzz.render.skeleton import _difference
from fuzz.render.tvm import UPSTREAM_MODULE
from fuzz.render.tvm_script import render_script as tvm_script
from fuzz.store.corpus import load_entry

pytestmark = pytest.mark.xdist_group("corpus")
ALL_ENTRIES = sorted((ROOT / "corpus").rglob("*.json"))
IOHW = ROOT / "corpus" / "pass-exception_AttributeError_kernel_layout=IOHW_.json"
FIXED = "__import__('fuzz.backends.tvm.fold_batchnorm', fromlist=['_']).FoldBatchnormToConv2D()"


def test_script_text_is_exactly_as_expected() -> None:
    expected = (ROOT / "tests" / "golden" / "iohw_reproducer.txt").read_text()
    assert render_script(load_entry(IOHW)) == expected


def run_script(text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "repro.py"
    script.write_text(text)
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


#: Entries whose scripts run in one batch: every one but a crash (it would end the batch).
BATCHED = [p for p in ENTRIES + PIPELINE_ENTRIES if "crash_" not in p.name]
#: Entries whose scripts, with the fixed pass in place of TVM's, must say "no bug".
FIXED_ONES = ["finite-to-nonfinite", "out-of-tolerance_scale=False_", "must-not-fold_training=True_"]


@pytest.mark.slow
def test_every_script_reproduces_its_bug_without_this_project(corpus: Replays) -> None:
    """The quick sibling of the fresh-process tests below (nightly): every script in one
    interpreter where ``fuzz`` cannot be imported, and the fixed pass's in another."""
    runs = run_scripts({str(p): render_script(corpus.entry(p)) for p in BATCHED})
    for path in BATCHED:
        done = runs[str(path)]
        assert done.returncode == 1, f"{path.name}:\n{done.stdout}{done.stderr}"
        assert "before the pass:" in done.stdout, path.name
    for path in PIPELINE_ENTRIES:
        entry = corpus.entry(path)
        replayed = None if entry.isolated else corpus.replay(path).checked
        assert render_issue(entry, replayed).startswith("# [Bug][Relax] `")
    scripts = {name: tvm_script(load_entry(ROOT / "corpus" / f"{name}.json"), FIXED) for name in FIXED_ONES}
    for name, done in run_scripts(scripts, block=()).items():
        assert done.returncode == 0, f"{name}:\n{done.stdout}{done.stderr}"
        assert done.stdout.rstrip().endswith("no bug: the pass behaves correctly on this graph"), name


@pytest.mark.slow
def test_a_crash_script_dies_of_its_signal_in_a_fresh_process(tmp_path: Path) -> None:
    for path in PIPELINE_ENTRIES:
        entry = load_entry(path)
        if entry.symptom is Symptom.CRASH:
            done = run_script(render_script(entry), tmp_path)
            assert done.returncode < 0, done.stdout + done.stderr  # killed by the signal


@pytest.mark.slow
@pytest.mark.nightly  # the batch above is its quick sibling
@pytest.mark.parametrize("path", ENTRIES, ids=ids(ENTRIES))
def test_script_reproduces_the_bug_in_a_fresh_process(path: Path, tmp_path: Path) -> None:
    done = run_script(render_script(load_entry(path)), tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "before the pass:" in done.stdout


@pytest.mark.slow
@pytest.mark.nightly  # the batch above is its quick sibling
@pytest.mark.parametrize("path", PIPELINE_ENTRIES, ids=ids(PIPELINE_ENTRIES))
def test_pipeline_script_reproduces_the_bug_in_a_fresh_process(
    path: Path, tmp_path: Path, corpus: Replays
) -> None:
    entry = corpus.entry(path)
    done = run_script(render_script(entry), tmp_path)
    if entry.symptom is Symptom.CRASH:
        assert done.returncode < 0, done.stdout + done.stderr  # killed by the signal
    else:
        assert done.returncode == 1, done.stdout + done.stderr
        assert "before the pass:" in done.stdout
    replayed = None if entry.isolated else corpus.replay(path).checked
    assert render_issue(entry, replayed).startswith("# [Bug][Relax] `")


@pytest.mark.slow
@pytest.mark.nightly  # the batch above is its quick sibling
@pytest.mark.parametrize("name", FIXED_ONES)
def test_script_exits_0_once_the_pass_is_fixed(name: str, tmp_path: Path) -> None:
    done = run_script(tvm_script(load_entry(ROOT / "corpus" / f"{name}.json"), FIXED), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("no bug: the pass behaves correctly on this graph")


def issue(corpus: Replays, name: str) -> str:
    path = ROOT / "corpus" / f"{name}.json"
    return render_issue(corpus.entry(path), corpus.replay(path).checked)


def test_issue_text_has_every_section(corpus: Replays) -> None:
    text = issue(corpus, "out-of-tolerance_scale=False_")
    assert text.startswith(
        "# [Bug][Relax] FoldBatchnormToConv2D changes results beyond rounding error (scale=False)\n"
    )
    for section in (
        "### Expected behavior",
        "### Actual behavior",
        "### Environment",
        "### Steps to reproduce",
    ):
        assert section in text
    assert "- TVM: 0.27.0.post1" in text and "```python\n" in text
    assert "- scale=False -> True: the bug disappears (it matters)" in text
    assert "after the pass it is 2.9999899864196777" in text and "a change of 1 is a bug" in text
    assert (
        "its signature for this bug, used to avoid duplicate reports, is `out-of-tolerance[scale=False]`"
        in text
    )


def test_issue_for_a_case_with_default_attributes(corpus: Replays) -> None:
    # The minimality note tries shrinking padding and dilation, which may empty the conv.
    text = issue(corpus, "finite-to-nonfinite")
    assert text.startswith("# [Bug][Relax] FoldBatchnormToConv2D turns finite outputs into inf/NaN\n")
    assert "- padding=[0, 1, 0, 1] -> [0, 0, 0, 0]: cannot be tried, the graph would be invalid" in text
    assert "- dilation=[1, 2] -> [1, 1]: the bug disappears (it matters)" in text
    # The formula behind the numbers: W' = W * s overflows float32.
    assert "s = gamma / sqrt(var + eps) = 4.253508e+37. The largest |W'| is 3.828157e+38" in text


def test_issue_for_a_must_not_fold_shows_the_wrong_numbers(corpus: Replays) -> None:
    text = issue(corpus, "must-not-fold_training=True_")
    assert "The pass folds the batch_norm although batch_norm has training=True" in text
    assert "without the pass: [1.0]; after the pass: [1.9999949932098389]" in text


@pytest.mark.slow
@pytest.mark.parametrize("path", ENTRIES, ids=ids(ENTRIES))
def test_issue_names_the_line_of_the_pass_that_goes_wrong(path: Path, corpus: Replays) -> None:
    text = render_issue(corpus.entry(path), corpus.replay(path).checked)
    section = text.split("### Where it goes wrong\n\n", 1)[1].split("### Environment", 1)[0]
    where, quoted = section.split("```python\n", 1)
    assert where.startswith("`python/tvm/relax/transform/fold_batch_norm_to_conv2d_for_inference.py`, line ")
    line = int(where.split("line ", 1)[1].split(":", 1)[0])
    source = Path(importlib.util.find_spec(UPSTREAM_MODULE).origin).read_text().splitlines()  # type: ignore[arg-type, union-attr]
    assert quoted.split("\n", 1)[0] == source[line - 1].strip()


def test_render_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["render", str(IOHW), "--script"]) == 0
    assert capsys.readouterr().out == render_script(load_entry(IOHW))
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert main(["render", str(bad), "--issue"]) == 2
    assert f"{bad}: file: expected a JSON object" in capsys.readouterr().err


def test_triage_groups_by_signature_and_names_the_smallest(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    entry = ROOT / "corpus" / "finite-to-nonfinite.json"
    big = json.loads(entry.read_text())
    data = big["case"]["data"]
    data["shape"][0] *= 3  # three times the batch: a bigger case with the same signature
    data["values"] = data["values"] * 3
    (tmp_path / "big.json").write_text(json.dumps(big))
    (tmp_path / "broken.json").write_text("{")
    assert main(["triage", str(entry), str(tmp_path)]) == 2  # the broken file
    out = capsys.readouterr()
    assert f"    2  finite-to-nonfinite  smallest: {entry} (7 values)" in out.out.splitlines()
    assert "broken.json" in out.err


def shown_values(actual: str) -> tuple[str, str] | None:
    """The values the actual-behaviour text puts side by side, before and after the pass."""
    found = re.search(
        r"[Ww]ithout the passe?s?\W+(?:output \d+, element \[[^\]]*\] is )?(.*?); "
        r"after (?:the passe?s?|it)\W+(?:it is |it returns )?(.*?)(?:\. |\.$|, so )",
        actual,
    )
    return None if found is None else (found.group(1), found.group(2))


@pytest.mark.slow
@pytest.mark.parametrize("path", ALL_ENTRIES, ids=[str(p.relative_to(ROOT / "corpus")) for p in ALL_ENTRIES])
def test_every_entry_s_issue_shows_a_difference(path: Path, corpus: Replays) -> None:
    entry = corpus.entry(path)
    text = issue_of([entry], None if entry.isolated else {entry.signature: corpus.replay(path).checked}).text
    if entry.declined:  # expected behaviour: no difference to show, and no [Bug]
        assert text.startswith("# [Expected behaviour]") and "This is not a bug" in text
        return
    marker = "\nActual: " if not backend_of(entry.pass_name).tvm_passes else "### Actual behavior\n\n"
    actual = text.split(marker, 1)[1].split("\n### ", 1)[0]
    failed = ("raises `", "died of", "Check failed", "fails to")
    if any(word in actual for word in failed):
        return
    if entry.symptom is Symptom.IO_CHANGE:  # the interface before and after, side by side
        before, after = actual.split(" changed from ", 1)[1].split(" to inputs ", 1)
        assert before != "inputs " + after, actual
        return
    values = shown_values(actual)
    assert values is not None, actual
    assert values[0] != values[1], actual


def test_a_must_not_fold_with_equal_first_values_shows_where_they_differ() -> None:
    before = Outputs((np.array([[1.0, 2.0, 3.0, 4.0, 5.0]]),), ("float32",), ((1, 5),))
    after = Outputs((np.array([[1.0, 2.0, 3.0, 4.0, 7.0]]),), ("float32",), ((1, 5),))
    text = _difference(before, after, None, "the pass")
    assert text == "Output 0, element [0, 4], without the pass: 5.0; after the pass: 7.0."
    assert shown_values(text) == ("5.0", "7.0")
    same = _difference(before, before, None, "the pass")
    assert same.startswith("On this input the outputs happen to agree, but the pass rewrote the graph")


def test_triage_takes_decline_entries(capsys: pytest.CaptureFixture[str]) -> None:
    decline = sorted((ROOT / "corpus" / "declines").glob("*.json"))[0]
    assert main(["triage", str(decline)]) == 0
    assert load_entry(decline).signature in capsys.readouterr().out


def test_an_unknown_symptom_names_the_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    entry = json.loads((ROOT / "corpus" / "finite-to-nonfinite.json").read_text())
    (tmp_path / "odd.json").write_text(json.dumps(entry | {"symptom": "sideways"}))
    assert main(["render", str(tmp_path / "odd.json"), "--issue"]) == 2
    assert "odd.json: symptom: 'sideways' is not one of" in capsys.readouterr().err


def test_promote_refuses_a_decline_entry(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    decline = sorted((ROOT / "corpus" / "declines").glob("*.json"))[0]
    assert main(["promote", str(decline), "--corpus", str(tmp_path)]) == 2
    assert "symptom: a decline entry shows expected behaviour" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_the_overflow_sentence_states_the_limit_only_where_the_oracle_checked_it() -> None:
    from dataclasses import replace

    import numpy as np

    from fuzz.backends import resolve_fold
    from fuzz.engine.check import check
    from fuzz.render.skeleton import actual

    entry = load_entry(ROOT / "corpus" / "finite-to-nonfinite.json")
    checked = check(entry.case, resolve_fold(entry.pass_name))
    said = actual(entry, checked)
    assert "stays below 1.701412e+38 (1/2 of the largest float32 value, 3.402823e+38)" in said
    # where the unfolded graph is not robustly finite at that element, no such claim
    out = checked.reference.outputs[0]
    unsure = replace(out, robust=np.zeros_like(out.robust))
    reference = replace(checked.reference, outputs=(unsure, *checked.reference.outputs[1:]))
    said = actual(entry, replace(checked, reference=reference))
    assert "stays below" not in said and "nothing but the fold" not in said
