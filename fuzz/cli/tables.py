"""Summaries as text tables: what ``bnfuzz`` prints without ``--json``.

Each function takes the summary a command computed (the same object ``--json`` prints)
and returns the table, without a trailing newline. No TVM, no I/O.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "backend_bench_table",
    "bench_table",
    "layer_table",
    "native_log_line",
    "progress_line",
    "run_table",
    "time_to_find_table",
    "zoo_table",
]


def progress_line(p: Any) -> str:
    """A :class:`fuzz.engine.campaign_result.Progress` as one line."""
    state = "shrinking a new finding" if p.shrinking else "searching"
    return f"[{p.seconds:6.1f}s] {p.examples} examples, {len(p.hits)} distinct findings, {state}"


def run_table(summary: dict[str, Any]) -> str:
    """``bnfuzz run``: the counts, one row per finding, lowering findings, gated passes."""
    out: list[str] = []
    emit = out.append

    emit(
        f"{summary['examples']} examples in {summary['seconds']:.0f} s against pass "
        f"{summary['pass']!r} ({summary.get('framework') or 'TVM ' + summary['tvm']}); "
        f"the pass changed {summary['changed']} of them; "
        f"{len(summary['findings'])} distinct findings"
    )
    if not summary["findings"]:
        return "\n".join(out)
    rows = [("signature", "stage", "first hit", "hits", "message")]
    for f in summary["findings"]:
        rows.append(
            (
                f["signature"],
                f["stage"],
                f"{f['first_seconds']:.1f} s",
                str(f["hits"]),
                f["message"].splitlines()[0][:90] if f["message"] else "",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        emit("  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4])
    if summary["lowering"]:
        framework = summary.get("framework") or "TVM"
        runtime = "TVM's lowering" if framework.startswith("TVM") else f"{framework}'s own kernels"
        emit(f"findings against {runtime} (the unfolded program, not the pass):")
        for sig, n in summary["lowering"].items():
            emit(f"  {sig}: {n}")
    if summary.get("gated"):
        emit("passes a Sequential skipped by opt-level gating (events, not bugs):")
        for name, n in summary["gated"].items():
            emit(f"  {name}: {n} cases")
    return "\n".join(out)


def native_log_line(summary: dict[str, Any]) -> str | None:
    """The TVM warnings a run counted instead of printing, as one line (None if there were none)."""
    counted = {name: n for name, n in (summary.get("native_log") or {}).items() if n}
    if not counted:
        return None
    what = ", ".join(f"{n} x {name!r}" for name, n in counted.items())
    return f"TVM warnings not shown (TVM prints them when a pass raises; counted in --json): {what}"


def time_to_find_table(summary: dict[str, Any], seeds: int, budget: float) -> str:
    """``bnfuzz bench --time-to-find``: seconds to each first hit, per seed."""
    out: list[str] = []
    emit = out.append

    def seconds(values: list[float | None]) -> str:
        return ", ".join("-" if s is None else f"{s:.1f}" for s in values)

    def med(value: float | None) -> str:
        return "miss" if value is None else f"{value:.1f}"

    emit(f"seconds to the first hit, per seed 0..{seeds - 1} (budget {budget:.0f} s each)")
    for row in summary.get("upstream", []):
        emit(f"  upstream {row['class']:24} median {med(row['median']):>6}   {seconds(row['seconds'])}")
    if "upstream" in summary:
        emit(f"  upstream: every class found in {summary['upstream_all_found_seeds']} of {seeds} seeds")
    for row in summary.get("mutants", []):
        first = next((k for k in row["kills"] if k), None)
        by = f"  ({first['symptom']})" if first else ""
        emit(f"  mutant {row['mutant']:26} median {med(row['median']):>6}   {seconds(row['seconds'])}{by}")
    if "mutants" in summary:
        emit(
            f"  mutants killed in every seed: {summary['mutants_killed']} of {len(summary['mutants'])}; "
            f"median of medians {med(summary['mutants_median'])} s, worst {med(summary['mutants_worst'])} s"
        )
    if "control_flagged" in summary:
        emit(f"  control (fixed) flagged in {len(summary['control_flagged'])} of {seeds} seeds")
    return "\n".join(out)


def backend_bench_table(summary: dict[str, Any]) -> str:
    """``bnfuzz bench`` for a backend without a compile cache: checks and a campaign."""
    checked, campaign = summary["checked"], summary["campaign"]
    return "\n".join(
        [
            f"{summary['framework']}: {checked['value_sets']} value sets checked in "
            f"{checked['seconds']:.1f} s = {checked['per_second']:.1f}/s",
            f"campaign: {campaign['value_sets']} value sets in {campaign['seconds']:.1f} s = "
            f"{campaign['per_second']:.1f}/s, {campaign['searching_per_second']:.1f}/s while searching "
            f"({campaign['shrink_seconds']:.1f} s shrinking {campaign['findings']} findings)",
            f"whole run: {summary['total_seconds']:.0f} s",
        ]
    )


def bench_table(summary: dict[str, Any]) -> str:
    """``bnfuzz bench``: value sets per second on each path, ratios, growth."""
    out: list[str] = []
    emit = out.append
    for path in ("naive", "cached_cold", "cached_warm", "cached_warm_lowering", "campaign"):
        row = summary[path]
        emit(
            f"{path:20} {row['value_sets']:7d} value sets in {row['seconds']:7.1f} s "
            f"= {row['per_second']:8.1f}/s"
        )
    campaign = summary["campaign"]
    emit(
        f"campaign: {campaign['searching_per_second']:.1f}/s while searching "
        f"({campaign['shrink_seconds']:.1f} s shrinking {campaign['findings']} findings), "
        f"{campaign['structures_compiled']} structures compiled; "
        f"campaign / warm = {summary['ratio_campaign_warm']}"
    )
    emit(
        f"cached/naive: {summary['ratio_cold']}x cold, {summary['ratio_warm']}x warm; "
        f"cold hit rate {summary['cached_cold']['hit_rate']:.1%}"
    )
    emit("growth (float32 conv-bn, 3x3): channels spatial naive/s cached-warm/s")
    for g in summary["growth"]:
        emit(
            f"  {g['channels']:4d} {g['spatial']:4d} {g['naive_per_second']:10.2f} "
            f"{g['cached_warm_per_second']:10.2f}"
        )
    for sig, times in summary.get("first_hit_seconds", {}).items():
        emit(f"first hit {sig}: naive {times.get('naive', '-')} s, cached {times.get('cached', '-')} s")
    if "total_seconds" in summary:
        emit(f"whole run: {summary['total_seconds']:.0f} s (drawing, the phases and the growth table)")
    return "\n".join(out)


def layer_table(rows: list[dict[str, Any]]) -> str:
    """``bnfuzz effectiveness --layers``: one line per conv+batch_norm layer."""
    out: list[str] = []
    emit = out.append
    emit(f"{'layer':48} {'pass: bn left, finding, ms':36} {'upstream: bn left, finding, ms':40} ratio")
    for row in rows:
        cells = []
        for name in ("pass", "upstream"):
            r = row.get(name, {})
            finding = r.get("finding") or "-"
            cells.append(f"{r.get('batch_norms', '?')!s:>2} {finding[:18]:18} {r.get('ms', '-')!s:>10}")
        emit(f"{row['layer']:48} {cells[0]:36} {cells[1]:40} {row.get('ratio', '-')}")
    return "\n".join(out)


#: The passes of a zoo row, in table order (each beside the unfolded program).
_ZOO_PASSES = ("upstream", "pass", "bounded")


def zoo_table(summary: dict[str, Any]) -> str:
    """One line per model and variant (fuzz/evaluation/effectiveness.py says what each figure is),
    then a legend and notes: exceptions, failures, flagged folds."""
    out: list[str] = []
    emit = out.append
    rows = summary["rows"]
    emit(
        f"model zoo at {summary['size']}x{summary['size']}, seed {summary['seed']}: pass {summary['pass']!r} "
        f"against upstream and bounded (TVM {summary['tvm']}), {len(rows)} rows in {summary['seconds']:.0f} s"
    )
    emit(
        f"{'model':16} {'variant':8} {'bn':>3} | {'left':11} | {'error: unfolded':>15} {'upstream':>9} "
        f"{'pass':>9} {'bounded':>9} | {'flagged':11} | {'ms: unfolded':>12} {'upstream':>9} {'pass':>9} "
        f"{'bounded':>9} | {'right':5} | ratio"
    )
    notes = []
    for row in rows:
        label = f"{row['model']} {row['variant']}"
        entries = [row[key] for key in _ZOO_PASSES]
        starred = "decomposed" in row  # the unfolded network does not build: the decomposed one stands in
        baseline = row["decomposed"] if starred else row["unfolded"]
        if starred:
            notes.append(f"{label}: unfolded: {row['unfolded']['failure'][:150]}")
        for key, entry in zip(_ZOO_PASSES, entries, strict=True):
            notes += [
                f"{label}: {key}: {what}: {entry[what][:150]}"
                for what in ("exception", "failure")
                if what in entry
            ]
            if entry["folds"]["symptoms"]:
                listed = ", ".join(f"{n} {symptom}" for symptom, n in entry["folds"]["symptoms"].items())
                notes.append(f"{label}: {key}: flagged folds: {listed}")
        left = " ".join("x" if e["batch_norms"] is None else str(e["batch_norms"]) for e in entries)
        errors = [_figure(baseline.get("error"), starred)] + [_figure(e.get("error")) for e in entries]
        times = [_figure(baseline.get("ms"), starred, "{:.1f}")] + [
            _figure(e.get("ms"), fmt="{:.1f}") for e in entries
        ]
        flagged = " ".join(str(e["folds"]["findings"]) for e in entries)
        right = " ".join("y" if e["right"] else "n" for e in entries)
        emit(
            f"{row['model']:16} {row['variant']:8} {row['batch_norms']:>3} | {left:11} | {errors[0]:>15} "
            f"{errors[1]:>9} {errors[2]:>9} {errors[3]:>9} | {flagged:11} | {times[0]:>12} {times[1]:>9} "
            f"{times[2]:>9} {times[3]:>9} | {right:5} | {row.get('ratio', '-')}"
        )
    emit(
        "bn: batch_norms imported. left, flagged, right: for upstream, the pass, bounded. left: "
        "batch_norms after the fold (x: the pass raised). error: max|out - ref| / max|ref| against float64. "
        "flagged: conv+batch_norm layers the oracle finds a fault in. right: all folded, nothing flagged, "
        "error within 4x the unfolded one's. ratio: the pass's ms over upstream's, where upstream is right. "
        "*: the unfolded network does not build; the figure is the decomposed one's "
        "(DecomposeOpsForInference)."
    )
    for note in notes:
        emit(f"  {note}")
    return "\n".join(out)


def _figure(value: float | None, starred: bool = False, fmt: str = "{:.2e}") -> str:
    return "-" if value is None else fmt.format(value) + ("*" if starred else "")
