"""Which upstream defects each supported TVM release has: for each release, set up a
venv with it (``make setup TVM=V VENV=.venv-V``), replay the corpus on it, and run a
campaign against upstream from scratch; print one Markdown table of both.

    python3 tools/tvm_versions.py [--budget SECONDS] [--pipelines] [--versions 0.25,0.26,0.27]

Campaigns run one after another (they would slow one another down). Their summaries and
findings go to ``tvm-versions/V/``; the replay's verdicts are in the table.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tvm-versions"
CORPUS = ["corpus", "corpus/pipelines"]
VERDICT = re.compile(r"^(ok|FAIL)\s+(\S+) on upstream: (\w+) \(expected (\w+)\)")


def replay(bnfuzz: Path) -> dict[str, str]:
    """Entry name -> upstream's verdict on it (``fails``/``passes``, or what went wrong)."""
    done = subprocess.run(
        [str(bnfuzz), "replay", *CORPUS, "--pass", "upstream"], capture_output=True, text=True, cwd=ROOT
    )
    verdicts = {}
    for line in done.stdout.splitlines():
        match = VERDICT.match(line)
        if match:
            verdicts[Path(match[2]).stem] = match[3]
    if not verdicts:
        sys.exit(f"replay printed no verdicts:\n{done.stdout}\n{done.stderr}")
    return verdicts


def campaign(bnfuzz: Path, out: Path, budget: float, pipelines: bool) -> dict[str, float]:
    """Signature -> first-hit seconds of a campaign against upstream."""
    command = [str(bnfuzz), "run", "--pass", "upstream", "--budget", str(budget), "--json"]
    command += ["--out", str(out / "findings")] + (["--pipelines"] if pipelines else [])
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    (out / "summary.json").write_text(done.stdout)
    summary = json.loads(done.stdout)
    print(f"  {summary['examples']} value sets, {len(summary['findings'])} signatures", file=sys.stderr)
    return {f["signature"]: f["first_seconds"] for f in summary["findings"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=300.0, help="seconds per campaign")
    parser.add_argument("--pipelines", action="store_true", help="campaigns among the neighbouring passes")
    parser.add_argument("--versions", default="0.25,0.26,0.27", help="comma-separated releases")
    args = parser.parse_args()
    versions = args.versions.split(",")
    replays, campaigns, tvm = {}, {}, {}
    for version in versions:
        venv = ROOT / f".venv-{version}"
        print(f"TVM {version}: setting up {venv.name}", file=sys.stderr)
        subprocess.run(
            ["make", "--silent", "setup", f"TVM={version}", f"VENV={venv.name}"], cwd=ROOT, check=True
        )
        bnfuzz = venv / "bin" / "bnfuzz"
        out = OUT / version
        out.mkdir(parents=True, exist_ok=True)
        print(f"TVM {version}: replaying the corpus", file=sys.stderr)
        replays[version] = replay(bnfuzz)
        print(f"TVM {version}: a {args.budget:.0f} s campaign against upstream", file=sys.stderr)
        campaigns[version] = campaign(bnfuzz, out, args.budget, args.pipelines)
        tvm[version] = json.loads((out / "summary.json").read_text())["tvm"]

    print("Corpus entries, replayed on upstream:\n")
    print("| entry | " + " | ".join(tvm[v] for v in versions) + " |")
    print("|---|" + "---|" * len(versions))
    for entry in sorted({e for r in replays.values() for e in r}):
        print(f"| `{entry}` | " + " | ".join(replays[v].get(entry, "-") for v in versions) + " |")
    mode = " in pipelines" if args.pipelines else ""
    print(f"\nSignatures a {args.budget:.0f} s campaign{mode} found from scratch (first hit, s):\n")
    print("| signature | " + " | ".join(tvm[v] for v in versions) + " |")
    print("|---|" + "---|" * len(versions))
    for signature in sorted({s for c in campaigns.values() for s in c}):
        cells = [f"{campaigns[v][signature]:.0f}" if signature in campaigns[v] else "-" for v in versions]
        print(f"| `{signature}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
