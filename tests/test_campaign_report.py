"""The campaign report: bins that add up across workers, Markdown with every section, a
PNG, and ``bnfuzz run --report`` linking each finding to its file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fuzz.cli import main
from fuzz.engine.histograms import HEADROOM_BINS, RATIO_BINS, histograms
from fuzz.engine.run import merge_counts
from fuzz.render.campaign_summary import write_report


def test_histograms_bin_every_value_and_list_every_bin() -> None:
    h = histograms([0.0, 1e-13, 0.5, 0.05, 2.0, math.inf], [-math.inf, -200.0, -3.0, -17.0, 0.5, math.nan])
    assert list(h["error_ratio"]) == RATIO_BINS and list(h["headroom"]) == HEADROOM_BINS
    ratio = {k: v for k, v in h["error_ratio"].items() if v}
    assert ratio == {"0": 1, "<=1e-12": 1, "1e-2..1e-1": 1, "1e-1..1e0": 1, ">=1": 2}
    headroom = {k: v for k, v in h["headroom"].items() if v}
    assert headroom == {"<-128": 2, "-32..-16": 1, "-16..0": 1, ">=0": 1}  # NaN is not binned


def test_worker_counts_add_up() -> None:
    one = {"a": {"runs": 2, "fired": 1}, "b": {"runs": 1, "fired": 0}}
    two = {"a": {"runs": 3, "fired": 3}}
    assert merge_counts([one, two]) == {"a": {"runs": 5, "fired": 4}, "b": {"runs": 1, "fired": 0}}


def test_the_report_has_every_section_and_a_plot(tmp_path: Path) -> None:
    summary = {
        "pass": "upstream",
        "tvm": "0.27.0.post1",
        "seed": 3,
        "examples": 10,
        "batches": 3,
        "seconds": 5.0,
        "changed": 7,
        "findings": [{"signature": "finite-to-nonfinite", "first_seconds": 1.25, "hits": 4}],
        "coverage": {"dtype=float32": {"runs": 10, "fired": 7}},
        "histograms": histograms([0.0] * 9 + [3.0], [-20.0] * 7),
    }
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "finite-to-nonfinite.json").write_text("{}")
    text = write_report(summary, tmp_path / "report", tmp_path / "out").read_text()
    assert "- 10 value sets in 5 s (2.0 per second), in 3 Hypothesis examples" in text
    assert (
        f"| `finite-to-nonfinite` | 1.2 s | 4 | `{tmp_path / 'out' / 'finite-to-nonfinite.json'}` |" in text
    )
    assert "| dtype=float32 | 10 | 7 |" in text
    assert "| >=1 | 1 |" in text and "| -32..-16 | 7 |" in text
    assert (tmp_path / "report" / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_run_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, report = tmp_path / "findings", tmp_path / "report"
    args = ["run", "--pass", "upstream", "--max-examples", "20", "--out", str(out), "--report", str(report)]
    assert main([*args, "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert sum(summary["histograms"]["error_ratio"].values()) == summary["examples"] == 20
    assert sum(row["runs"] for row in summary["coverage"].values()) == 20
    assert 1 <= summary["batches"] <= 20
    text = Path(summary["report"]).read_text()
    for finding in summary["findings"]:
        assert f"| `{finding['signature']}` |" in text
    assert text.count(f"`{out}/") == len(summary["findings"]) > 0
