"""The mutation suite (``fuzz.backends.tvm.mutants``) and ``bnfuzz bench --time-to-find``.

Each mutant is one text edit of the fixed pass; these tests check that every edit
still applies, that each mutant really differs from the pass and loads as a drop-in
pass, and that the time-to-find command measures and reports. How fast the fuzzer kills
each mutant is measured, not asserted (docs/measurements.md, "Search power").
"""

from __future__ import annotations

import json

import pytest
from cases import make_case

from fuzz.backends.tvm.mutants import MUTANTS, PASS_FILE, load, source_of
from fuzz.backends.tvm.passes import UnknownPass, resolve_pass
from fuzz.cli import main
from fuzz.engine.check import check
from fuzz.evaluation.time_to_find import median, targets


def test_the_suite_has_at_least_twenty_distinct_mutants() -> None:
    names = [m.name for m in MUTANTS]
    assert len(names) >= 20 and len(set(names)) == len(names)
    sources = {source_of(m) for m in MUTANTS}
    assert len(sources) == len(MUTANTS)  # no two mutants are the same edit
    assert PASS_FILE.read_text() not in sources  # and none is the pass itself


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_each_mutant_loads_as_a_drop_in_pass(mutant: object) -> None:
    name = mutant.name  # type: ignore[attr-defined]
    made = resolve_pass(f"mutant:{name}")
    assert made.complete_fold  # judged as the fixed pass is: never wrong, and folds
    assert load(name).__module__ == f"bnfold_mutant_{name}"
    # it runs as a pass: the oracle judges what it did (whatever the verdict)
    assert check(make_case(), made).execution.pass_seconds > 0


def test_an_unknown_mutant_is_a_usage_error_naming_the_mutants() -> None:
    with pytest.raises(UnknownPass, match="scale_ignored"):
        resolve_pass("mutant:scale_ignord")


def test_a_mutant_is_caught_by_the_oracle() -> None:
    # scale_ignored multiplies by gamma although scale=False: out of tolerance
    case = make_case(scale=False, values={"gamma": 3.0})
    finding = check(case, resolve_pass("mutant:scale_ignored")).verdict.primary
    assert finding is not None and finding.symptom.value == "out-of-tolerance"
    assert check(case, resolve_pass("fixed")).verdict.primary is None


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1.0, 2.0, 3.0], 2.0),
        ([1.0, None, 3.0], 3.0),  # a miss counts as longer than any hit
        ([1.0, None, None], None),
        ([4.0, 2.0], 3.0),
        ([], None),
    ],
)
def test_median_counts_a_miss_as_longest(values: list[float | None], expected: float | None) -> None:
    assert median(values) == expected


def test_targets_name_groups_and_mutants() -> None:
    assert targets(()) == (True, [m.name for m in MUTANTS], True)
    assert targets(("upstream",)) == (True, [], False)
    assert targets(("scale_ignored", "control")) == (False, ["scale_ignored"], True)
    with pytest.raises(ValueError, match="nonsense"):
        targets(("nonsense",))


def test_time_to_find_kills_a_mutant_and_reports_it(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "--time-to-find", "--only", "bias_sign", "--seeds", "1", "--budget", "120", "--json"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    (row,) = summary["mutants"]
    assert row["mutant"] == "bias_sign" and summary["mutants_killed"] == 1
    (kill,) = row["kills"]
    assert kill["seconds"] <= 120 and kill["symptom"]


def test_time_to_find_rejects_an_unknown_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--time-to-find", "--only", "nonsense"]) == 2
    assert "nonsense" in capsys.readouterr().err
