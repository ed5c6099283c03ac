"""``bnfuzz file-issues`` against a local stand-in for the GitHub REST API (the two
endpoints it uses): a dry run files nothing, ``--apply`` files one issue per signature,
and a second run after it finds every signature filed."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import pytest
from replays import Replays

from fuzz.cli import main

ROOT = Path(__file__).resolve().parent.parent
ENTRIES_ALL = sorted((ROOT / "corpus").rglob("*.json"))
ENTRIES = [
    ROOT / "corpus" / "pass-exception_AttributeError_kernel_layout=IOHW_.json",
    ROOT / "corpus" / "out-of-tolerance_scale=False_.json",
]


class FakeGitHub(BaseHTTPRequestHandler):
    issues: ClassVar[list[dict[str, Any]]] = []
    auth: ClassVar[list[str]] = []

    def _send(self, code: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path != "/repos/owner/name/issues":
            return self._send(404, {"message": "Not Found"})
        query = parse_qs(url.query)
        page, per_page = int(query["page"][0]), int(query["per_page"][0])
        opened = [i for i in self.issues if i["state"] == "open"]
        self._send(200, opened[(page - 1) * per_page : page * per_page])

    def do_POST(self) -> None:
        if self.path != "/repos/owner/name/issues":
            return self._send(404, {"message": "Not Found"})
        self.auth.append(self.headers.get("Authorization", ""))
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        number = len(self.issues) + 1
        url = f"https://github.example/owner/name/issues/{number}"
        self.issues.append({"number": number, "state": "open", "html_url": url, **body})
        self._send(201, self.issues[-1])

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[str]:
    FakeGitHub.issues, FakeGitHub.auth = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGitHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def run(api: str, *extra: str) -> int:
    return main(["file-issues", *map(str, ENTRIES), "--repo", "owner/name", "--api", api, *extra])


@pytest.mark.slow  # replays the shipped corpus three times: seconds of builds
def test_dry_run_apply_and_a_second_run_that_files_nothing(
    api: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    assert run(api) == 0
    out = capsys.readouterr().out
    assert (
        out.splitlines()[-1] == "2 entries, 2 root causes: 0 filed, 2 to file, 0 already filed, 0 not filed"
    )
    # a dry run shows each issue whole, for a person to review
    assert "# [Bug][Relax] FoldBatchnormToConv2D raises AttributeError (kernel_layout=IOHW)" in out
    assert "### Steps to reproduce" in out and "<!-- bnfold-fuzz root cause: cause:iohw-reshape -->" in out
    assert FakeGitHub.issues == []
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    assert run(api, "--apply") == 0
    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .endswith(": 2 filed, 0 to file, 0 already filed, 0 not filed")
    )
    assert FakeGitHub.auth == ["Bearer t0ken", "Bearer t0ken"]
    titles = [i["title"] for i in FakeGitHub.issues]
    assert titles[0] == "[Bug][Relax] FoldBatchnormToConv2D raises AttributeError (kernel_layout=IOHW)"
    assert FakeGitHub.issues[1]["body"].endswith(
        "<!-- bnfold-fuzz signature: out-of-tolerance[scale=False] -->\n"
    )
    assert run(api) == 0  # the second dry run
    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .endswith(": 0 filed, 0 to file, 2 already filed, 0 not filed")
    )
    FakeGitHub.issues[0]["state"] = "closed"  # only open issues count
    assert run(api) == 0
    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .endswith(": 0 filed, 1 to file, 1 already filed, 0 not filed")
    )


def test_apply_without_a_token_and_apply_with_an_unreachable_api_are_usage_errors(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    assert run("http://127.0.0.1:9", "--apply") == 2
    assert "--apply needs a token in GITHUB_TOKEN" in capsys.readouterr().err
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    assert run("http://127.0.0.1:9", "--apply") == 2
    assert "GitHub API: GET /repos/owner/name/issues" in capsys.readouterr().err
    assert main(["file-issues", str(ENTRIES[0]), "--repo", "nameonly"]) == 2


def test_an_offline_dry_run_shows_every_issue_and_says_the_check_was_skipped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    assert run("http://127.0.0.1:9") == 0
    out, err = capsys.readouterr()
    assert out.count("to file: cause:") == 2
    assert out.count("# [Bug][Relax] ") == 2
    assert "the check for issues already filed in owner/name was skipped: the API could not be reached" in err


@pytest.mark.slow
@pytest.mark.xdist_group("corpus")
def test_the_shipped_corpus_previews_one_issue_per_root_cause(corpus: Replays) -> None:
    from fuzz.render.report import issues

    entries = [corpus.entry(p) for p in ENTRIES_ALL]
    previews = issues(entries)
    epsilon = [i for i in previews if i.key == "cause:epsilon-float32"]
    assert len(epsilon) == 1 and len(epsilon[0].signatures) == 4  # float16, bfloat16, float64, out_dtype
    assert len({i.key for i in previews}) == len(previews)
    declines = [i for i in previews if not i.bug]
    assert declines and all(i.title.startswith("[Expected behaviour]") for i in declines)
    # each project's own title convention: PyTorch's bug template asks for no prefix
    assert all(i.title.startswith("[Bug]") for i in previews if i.bug and i.project != "pytorch/pytorch")
    assert all(i.title.startswith("`") for i in previews if i.project == "pytorch/pytorch")


def test_an_entry_found_against_a_mutant_that_upstream_fails_too_is_upstream_s() -> None:
    from fuzz.render.report import addressed, issue_of, render_script
    from fuzz.store.corpus import load_entry

    entry = load_entry(ROOT / "corpus" / "mutants" / "finite-to-nonfinite.json")
    assert entry.pass_name.startswith("mutant:") and entry.expect["upstream"] == "fails"
    upstream = addressed(entry)
    assert upstream.pass_name == "upstream" and upstream.symptom.value == "finite-to-nonfinite"
    assert upstream.signature == "finite-to-nonfinite"  # measured on upstream, not typed in
    issue = issue_of([upstream])
    assert issue.title.startswith("[Bug][Relax] FoldBatchnormToConv2D ") and "mutant" not in issue.title
    script = render_script(upstream)
    assert "relax.transform.FoldBatchnormToConv2D()" in script and "mutant" not in script
    # an entry of TVM's own pass, or one upstream passes, stays as it is
    fixed_only = load_entry(ROOT / "corpus" / "declines" / "declined_reason=range_.json")
    assert addressed(fixed_only) is fixed_only


def test_an_issue_is_never_filed_into_another_known_project_s_tracker() -> None:
    from fuzz.render.github import file_issues
    from fuzz.render.issue import Issue

    class NothingFiled:
        def filed_signatures(self) -> set[str]:
            return set()

        def create(self, title: str, body: str) -> str:
            raise AssertionError("a dry run files nothing")

    tvm = Issue("cause:x", "[Bug][Relax] x", "body", ("x",))
    torch = Issue("torch:x", "`x`", "body", ("torch:x",), pass_name="torch:fx", project="pytorch/pytorch")
    into_torch = file_issues([tvm, torch], NothingFiled(), apply=False, repo="pytorch/pytorch").plans  # type: ignore[arg-type]
    assert [p.status for p in into_torch] == ["not filed", "to file"]
    assert "a bug of apache/tvm, not of pytorch/pytorch" in into_torch[0].why
    into_tvm = file_issues([tvm, torch], NothingFiled(), apply=False, repo="apache/tvm").plans  # type: ignore[arg-type]
    assert [p.status for p in into_tvm] == ["to file", "not filed"]
    assert "--repo pytorch/pytorch" in into_tvm[1].why


def test_an_entry_that_does_not_reproduce_here_is_left_out_saying_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dataclasses import replace

    from fuzz.render.report import reproducing
    from fuzz.store.corpus import dumps_entry, load_entry

    real = load_entry(ENTRIES[1])  # out-of-tolerance with scale=False: fails on upstream
    # the same entry with the fixed pass as the one it was found on: it passes here
    stale = replace(real, pass_name="fixed", expect={"fixed": "fails"})
    shown, checks, unshown = reproducing([real, stale])
    assert shown == [real] and set(checks) == {real.signature}
    assert [u.entry for u in unshown] == [stale]
    assert unshown[0].why == "does not reproduce on this machine: fixed passes it here"
    # and file-issues says so, and files the rest
    path = tmp_path / "stale.json"
    path.write_text(dumps_entry(stale))
    code = main(
        ["file-issues", str(ENTRIES[1]), str(path), "--repo", "owner/name", "--api", "http://127.0.0.1:9"]
    )
    out, err = capsys.readouterr()
    assert code == 0 and f"not shown: {stale.signature} (fixed): does not reproduce" in err
    assert out.count("to file: ") == 1
