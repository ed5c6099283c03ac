"""Campaign report: a ``bnfuzz run`` summary as Markdown, with one PNG plot.

:func:`write_report` writes ``report.md`` (value sets, throughput, findings
by signature with their reproducer files, attribute combinations run and how often the
pass fired, both distributions of :mod:`fuzz.engine.histograms` as tables) and ``report.png`` (both
distributions).

Key idea: everything comes from the JSON summary, so a merged ``--workers`` summary
reports the same way as a single campaign.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

__all__ = ["write_report"]


def _plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    from fuzz.store.storage import write_atomic

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    panels = (
        (left, "error_ratio", "worst error / allowed, per value set", "error / allowed (>= 1: a finding)"),
        (right, "headroom", "overflow headroom of the folded weights", "log2(|s| (|W| conv |X|) / max)"),
    )
    for axes, key, title, xlabel in panels:
        counts = summary["histograms"][key]
        axes.bar(range(len(counts)), list(counts.values()), color="#4477aa")
        axes.set_xticks(range(len(counts)), list(counts), rotation=60, ha="right", fontsize=7)
        axes.set_title(title)
        axes.set_xlabel(xlabel)
        axes.set_ylabel("value sets")
    fig.suptitle(f"bnfuzz run --pass {summary['pass']}: {summary['examples']} value sets")
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    write_atomic(path, png.getvalue())


def write_report(summary: dict[str, Any], directory: Path, findings_dir: Path | None) -> Path:
    """Write ``report.md`` and ``report.png`` into ``directory``, each whole or not at all
    (:func:`fuzz.store.corpus.write_atomic`); the Markdown's path."""
    from fuzz.store.storage import file_name, write_atomic

    directory.mkdir(parents=True, exist_ok=True)
    seconds = summary["seconds"] or 1.0
    lines = [
        f"# Campaign report: `{summary['pass']}`",
        "",
        f"- {summary.get('framework') or 'TVM ' + summary['tvm']}, seed {summary['seed']}"
        + (f", {summary['workers']} workers" if summary.get("workers") else "")
        + (", in pipelines" if summary.get("pipelines") else ""),
        f"- {summary['examples']} value sets in {seconds:.0f} s "
        f"({summary['examples'] / seconds:.1f} per second), in {summary.get('batches', '?')} Hypothesis "
        f"examples (batches of one structure); the pass changed {summary['changed']}",
        f"- {len(summary['findings'])} distinct findings",
        "",
        "## Findings",
        "",
    ]
    if summary["findings"]:
        lines += ["| signature | first hit | hits | reproducer |", "|---|---|---|---|"]
        for f in summary["findings"]:
            where = findings_dir / file_name(f["signature"]) if findings_dir is not None else None
            shown = f"`{where}`" if where is not None and where.exists() else "-"
            lines.append(f"| `{f['signature']}` | {f['first_seconds']:.1f} s | {f['hits']} | {shown} |")
        lines += [
            "",
            "A finding file becomes a replayable entry with `bnfuzz promote FILE`, and a script with "
            "`bnfuzz render ENTRY --script`.",
        ]
    else:
        lines.append("None.")
    lines += ["", "## Attribute combinations run", ""]
    lines += ["| combination | value sets | pass fired |", "|---|---|---|"]
    for combo, row in sorted(summary["coverage"].items(), key=lambda kv: -kv[1]["runs"]):
        lines.append(f"| {combo} | {row['runs']} | {row['fired']} |")
    for key, title in (("error_ratio", "Worst error / allowed"), ("headroom", "Overflow headroom (log2)")):
        lines += ["", f"## {title}", "", "| bin | value sets |", "|---|---|"]
        lines += [f"| {b} | {n} |" for b, n in summary["histograms"][key].items()]
    lines += ["", "![distributions](report.png)", ""]
    _plot(summary, directory / "report.png")
    path = directory / "report.md"
    write_atomic(path, "\n".join(lines))
    return path
