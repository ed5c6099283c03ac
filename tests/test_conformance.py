"""Every registered backend held to one contract, through its registry row alone: its
example fold (:attr:`fuzz.backends.Backend.example`) resolves to a fold of that backend;
a plain case (the simplest its strategy draws) is folded, with no finding; folded weights out of range
are found, the same magnitudes in range are not; the issue goes to the row's project and
its script shows the bug (with TVM blocked for every backend but TVM's); a campaign finds
the overflow class. ``tests/numpy_backend.py`` is a backend added in one file and one row:
it takes every test here, and a campaign's finding goes all the way to ``file-issues``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy_backend
import pytest
from hypothesis import find, settings
from without_tvm import run_script_without_tvm

from fuzz.backends import BACKENDS, Backend, backend_of, resolve_fold, scope_of
from fuzz.engine.check import check
from fuzz.engine.promote import promote
from fuzz.engine.run import RunConfig, run
from fuzz.model.case import Case, Topology
from fuzz.model.tensor import Tensor
from fuzz.oracle.signature import Signature
from fuzz.oracle.verdict import Symptom
from fuzz.render.github import file_issues, trackers
from fuzz.render.issue import Issue
from fuzz.render.report import issue_of, issues
from fuzz.render.script import render_script
from fuzz.store.corpus import Entry, load_entry

KEYS = [*BACKENDS, numpy_backend.KEY]
#: W * gamma / sqrt(var + eps) = 1e30 * 1e10 overflows float32; x = 0 makes the conv 0, so
#: the unfolded graph outputs beta - mean * s = -1e10, a folded one inf * 0 = NaN
OVERFLOW = {"data": 0.0, "weight": 1e30, "gamma": 1e10, "mean": 1.0, "var": 1.0}
#: The same with weights 1e20: W * s = 1e30 fits
IN_RANGE = OVERFLOW | {"weight": 1e20}
#: Campaigns in CI (a quarter of a minute of CPU each); the others nightly (NumPy's campaign
#: runs in CI in test_a_backend_added_by_one_row_goes_from_campaign_to_file_issues).
CAMPAIGNS_IN_CI = {"onnxoptimizer", "torch"}


@pytest.fixture(params=KEYS)
def row(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == numpy_backend.KEY:
        with numpy_backend.registered() as added:
            yield added
    else:
        yield BACKENDS[request.param]


@functools.cache
def plain_case(name: str) -> Case:
    """The simplest conv + batch_norm the fold's strategy draws (in its backend's form)."""
    fold = resolve_fold(name)
    return find(
        fold.cases(),
        lambda c: c.topology is Topology.CONV_BN,
        settings=settings(database=None, max_examples=500),
    )


def with_values(case: Case, **values: float) -> Case:
    """``case`` with every value of the named operands (``data``, ``weight``, ``gamma``,
    ``mean``, ``var``) set to one number."""

    def filled(tensor: Tensor, value: float) -> Tensor:
        return replace(tensor, values=(value,) * len(tensor.values))

    block = case.blocks[0]
    changes = {k: filled(getattr(block, k), v) for k, v in values.items() if k != "data"}
    return replace(
        case,
        data=filled(case.data, values["data"]) if "data" in values else case.data,
        blocks=(replace(block, **changes), *case.blocks[1:]),
    )


def overflow_entry(name: str) -> Entry:
    """An entry of the overflow case on fold ``name``, as a campaign's would be."""
    case = with_values(plain_case(name), **OVERFLOW)
    checked = check(case, resolve_fold(name))
    finding = checked.verdict.primary
    assert finding is not None, checked.verdict
    signature = str(Signature.of(finding, case, None, scope_of(name)))
    return Entry(
        case, name, finding.symptom, finding.stage, signature, finding.message, finding.error_type, "",
        {name: "fails"}, {name: finding.message},
        {backend_of(name).key: resolve_fold(name).version(), "python": "3", "platform": "linux"},
    )  # fmt: skip


def test_the_example_resolves_through_the_row(row: Backend) -> None:
    fold = resolve_fold(row.example)
    assert backend_of(row.example) is row and fold.framework == row.key and fold.name == row.example
    assert fold.version()[0].isdigit() and not fold.complete_fold


def test_a_plain_case_is_folded_and_weights_out_of_range_are_found(row: Backend) -> None:
    # one test, so that the plain case is found once per backend
    fold = resolve_fold(row.example)
    plain = check(plain_case(row.example), fold)
    assert plain.verdict.findings == (), plain.verdict
    assert plain.execution.fired  # every example fold folds it
    finding = check(with_values(plain_case(row.example), **OVERFLOW), fold).verdict.primary
    assert finding is not None and finding.symptom is Symptom.FINITE_TO_NONFINITE
    assert check(with_values(plain_case(row.example), **IN_RANGE), fold).verdict.findings == ()


@pytest.mark.slow  # the minimality note re-checks the case a dozen times
def test_the_issue_goes_to_the_row_s_project(row: Backend) -> None:
    entry = overflow_entry(row.example)
    issue = issue_of([entry])
    assert issue.project == row.project and issue.bug and issue.signatures == (entry.signature,)
    assert entry.signature.startswith(f"{row.key}:" if row.signed_by == "backend" else "")
    assert f"`{entry.signature}`" in issue.body and "Save as `repro.py`" in issue.body
    assert render_script(entry) in issue.body


@pytest.mark.slow
def test_the_script_shows_the_bug_with_no_framework_but_its_own(row: Backend, tmp_path: Path) -> None:
    script = tmp_path / "repro.py"
    script.write_text(render_script(overflow_entry(row.example)))
    if row.tvm_passes:  # TVM's scripts run TVM
        import subprocess
        import sys

        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    else:
        done = run_script_without_tvm(script)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "BUG: finite outputs became inf or NaN" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "key", [k if k in CAMPAIGNS_IN_CI else pytest.param(k, marks=pytest.mark.nightly) for k in KEYS]
)
def test_a_campaign_finds_the_overflow_class(key: str, tmp_path: Path) -> None:
    with numpy_backend.registered() if key == numpy_backend.KEY else _nothing():
        row = BACKENDS[key]
        examples = 300 if key == numpy_backend.KEY else 1500  # NumPy's checks are cheap, its cases few
        config = RunConfig(pass_name=row.example, max_examples=examples, shrink_seconds=0, out=tmp_path / "f")
        summary = run(config, resolve_fold(row.example)).summary
    assert summary["framework"].startswith(f"{row.framework} ")
    assert "finite-to-nonfinite" in {f["symptom"] for f in summary["findings"]}, summary["findings"]


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class _GitHub:
    def filed_signatures(self) -> set[str]:
        return set()

    def create(self, title: str, body: str) -> str:
        return "https://github.example/issues/1"


@pytest.mark.slow
def test_a_backend_added_by_one_row_goes_from_campaign_to_file_issues(tmp_path: Path) -> None:
    with numpy_backend.registered() as row:
        config = RunConfig(
            pass_name=row.example, max_examples=300, shrink_seconds=0, out=tmp_path / "findings"
        )
        run(config, resolve_fold(row.example))
        found = sorted((tmp_path / "findings").glob("*.json"))
        assert found, "the campaign wrote no finding"
        entries = []
        for path in found:
            target, _ = promote(path, tmp_path / "corpus", passes=(row.example,))
            entries.append(load_entry(target))
        overflow = [e for e in entries if e.symptom is Symptom.FINITE_TO_NONFINITE]
        assert overflow and all(e.expect == {row.example: "fails"} for e in entries)
        planned = file_issues(issues(entries), _GitHub(), apply=False, repo=row.project)
        assert {p.status for p in planned.plans} == {"to file"}
        refused = file_issues(issues(entries), _GitHub(), apply=False, repo="apache/tvm")
        assert all(f"a bug of {row.project}" in p.why for p in refused.plans)
        # and its tracker is guarded against another project's issue while it is registered
        assert row.project in trackers()
        tvm_issue = Issue("cause:x", "[Bug] a title", "a body", ("sig",))
        assert (
            file_issues([tvm_issue], _GitHub(), apply=False, repo=row.project).plans[0].status == "not filed"
        )
    assert row.project not in trackers()


def test_the_docs_table_of_backends_has_every_row() -> None:
    # docs/backends.md's table of names: each row's example fold and its fold module
    text = (Path(__file__).resolve().parent.parent / "docs" / "backends.md").read_text()
    table = text[text.index("| names | backend | what is run |") :].split("\n\n")[0]
    for row in BACKENDS.values():
        assert f"`{row.example}`" in table, row.key
        assert f"`{row.fold.replace('.', '/')}.py`" in table, row.key
