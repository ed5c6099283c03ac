"""Time the two test tiers on a fresh clone: ``make check`` (the quick tier) and
``CI=true bash .ci/run`` (what CI runs: setup, lint, every test), optionally while a
fuzzing campaign runs beside them.

    python tools/time_tiers.py                      # make setup, then make check 3 times
    python tools/time_tiers.py --check-runs 0 --ci-runs 1
    python tools/time_tiers.py --check-runs 0 --ci-runs 3 \\
        --beside "bnfuzz run --pass upstream --budget 900"
    python tools/time_tiers.py --check-runs 0 --ci-runs 3 --fresh   # each in its own clone
    python tools/time_tiers.py --flush-denormal                      # every process flushes

The clone is of the committed HEAD of this repository, in a temporary folder (removed
afterwards unless ``--keep``). ``make check`` runs after ``make setup``, so its times do
not include installing; the first of them starts with empty ruff and mypy caches. Each
``.ci/run`` after the first reuses the clone's ``.venv`` (the first installs it), unless
``--fresh``: then each runs in a clone of its own, setup included, as CI does. A
``--beside`` command runs from the clone's ``.venv/bin`` for as long as the timed runs
last, started again whenever it ends. ``--flush-denormal`` puts the clone's
``tools/flush-denormal`` on ``PYTHONPATH``: every Python process the runs start flushes
subnormals to zero, as ``torch.set_flush_denormal(True)`` leaves one. Prints one line per
run and the median per tier; exits 1 if any timed run failed.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(argv: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[float, int]:
    """Wall seconds and exit code of ``argv``; what it prints goes to ``log``."""
    start = time.perf_counter()
    with log.open("w") as out:
        code = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    return time.perf_counter() - start, code


class Beside:
    """A command kept running in the background until :meth:`stop`."""

    def __init__(self, command: str, cwd: Path, env: dict[str, str], log: Path) -> None:
        argv = shlex.split(command)
        self.argv = [str(cwd / ".venv" / "bin" / argv[0]), *argv[1:]]
        self.cwd, self.env, self.log = cwd, env, log
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def poll(self) -> None:
        if self.process is None or self.process.poll() is not None:
            with self.log.open("a") as out:
                self.process = subprocess.Popen(
                    self.argv, cwd=self.cwd, env=self.env, stdout=out, stderr=subprocess.STDOUT
                )
            self.starts += 1

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait()


def run_tier(
    name: str, argv: list[str], runs: int, clone: Path, env: dict[str, str], beside: Beside | None
) -> list[tuple[float, int]]:
    results = []
    for k in range(runs):
        log = clone / f"time-{name.replace(' ', '-')}-{k + 1}.log"
        if beside is None:
            seconds, code = timed(argv, clone, env, log)
        else:  # restart the campaign beside whenever it ends, checking once a second
            start = time.perf_counter()
            with log.open("w") as out:
                process = subprocess.Popen(argv, cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT)
                while process.poll() is None:
                    beside.poll()
                    time.sleep(1)  # the interval at which the campaign beside is checked
            seconds, code = time.perf_counter() - start, process.returncode
        results.append((seconds, code))
        print(f"{name} run {k + 1}: {seconds:.1f} s, exit code {code} (log: {log})", flush=True)
    if results:
        median = statistics.median(s for s, _ in results)
        print(f"{name}: median {median:.1f} s of {len(results)} runs", flush=True)
    return results


def fresh_clone(target: Path) -> Path:
    """A clone of this repository's committed HEAD at ``target``."""
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(target)], check=True)
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=target, capture_output=True, text=True, check=True
    ).stdout.strip()
    print(f"fresh clone of {head} in {target}", flush=True)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check-runs", type=int, default=3, help="timed runs of make check (default 3)")
    parser.add_argument(
        "--ci-runs", type=int, default=0, help="timed runs of CI=true bash .ci/run (default 0)"
    )
    parser.add_argument("--beside", metavar="COMMAND", help="a command from .venv/bin to keep running beside")
    parser.add_argument("--keep", action="store_true", help="keep the clone and its logs")
    parser.add_argument("--fresh", action="store_true", help="each .ci/run in a fresh clone of its own")
    parser.add_argument(
        "--flush-denormal",
        action="store_true",
        help="every Python process flushes subnormals (the clone's tools/flush-denormal on PYTHONPATH)",
    )
    args = parser.parse_args()
    if args.check_runs < 0 or args.ci_runs < 0:
        parser.error("--check-runs and --ci-runs must be zero or positive")

    folder = Path(tempfile.mkdtemp(prefix="bnfuzz-tiers-"))
    clone = fresh_clone(folder / "clone")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "HYPOTHESIS_PROFILE", "PYTHONPATH")}
    if args.flush_denormal:
        env["PYTHONPATH"] = str(clone / "tools" / "flush-denormal")
        print(f"every process flushes subnormals: PYTHONPATH={env['PYTHONPATH']}", flush=True)
    failed = False
    try:
        if args.check_runs:
            seconds, code = timed(["make", "setup"], clone, env, clone / "time-setup.log")
            print(f"make setup: {seconds:.1f} s, exit code {code}", flush=True)
            failed |= code != 0
            results = run_tier("make check", ["make", "check"], args.check_runs, clone, env, None)
            failed |= any(code for _, code in results)
        if args.ci_runs:
            beside = None
            if args.beside:
                beside = Beside(args.beside, clone, env, clone / "time-beside.log")
                if not (clone / ".venv" / "bin").is_dir():  # the first .ci/run installs it
                    subprocess.run(["make", "setup"], cwd=clone, env=env, check=True, capture_output=True)
            ci_env = env | {"CI": "true"}
            if args.fresh:  # a clone per run: setup included in every time, as on CI
                results = []
                for k in range(args.ci_runs):
                    own = clone if k == 0 else fresh_clone(folder / f"clone-{k + 1}")
                    own_env = ci_env | (
                        {"PYTHONPATH": str(own / "tools" / "flush-denormal")} if args.flush_denormal else {}
                    )
                    results += run_tier(f"ci (clone {k + 1})", ["bash", ".ci/run"], 1, own, own_env, beside)
                if results:
                    median = statistics.median(s for s, _ in results)
                    print(f"ci: median {median:.1f} s of {len(results)} fresh clones", flush=True)
            else:
                results = run_tier("ci", ["bash", ".ci/run"], args.ci_runs, clone, ci_env, beside)
            failed |= any(code for _, code in results)
            if beside is not None:
                beside.stop()
                print(f"beside: {args.beside!r}, started {beside.starts} time(s)", flush=True)
    finally:
        if args.keep:
            print(f"kept: {clone}")
        else:
            subprocess.run(["rm", "-rf", str(folder)], check=False)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
