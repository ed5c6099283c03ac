"""The GitHub client: files one issue per corpus entry whose signature is not filed yet.

:func:`file_issues` renders each entry as an issue (:func:`fuzz.report.render_issue`), puts
a marker with the signature at the end of the body, lists the repository's open issues
through the GitHub REST API, skips every entry whose marker is already there, and, only
when asked to, creates the rest (``POST /repos/{owner}/{repo}/issues``). Without a token
it can still list a public repository's issues, so a dry run shows exactly what an
``--apply`` would file.

Key idea: the marker makes filing idempotent; running it every night files each bug once.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fuzz.corpus import Entry
from fuzz.errors import BnfuzzError

__all__ = ["GitHub", "GitHubError", "Planned", "file_issues", "marker"]

API = "https://api.github.com"
_MARKER = re.compile(r"<!-- bnfold-fuzz signature: (.+?) -->")


def marker(signature: str) -> str:
    """The line that names a filed issue's signature (invisible in GitHub's rendering)."""
    return f"<!-- bnfold-fuzz signature: {signature} -->"


class GitHubError(BnfuzzError, RuntimeError):
    """The API refused or could not be reached: says which request and why."""


@dataclass
class GitHub:
    """The few REST endpoints filing needs, on ``api`` (GitHub's, or a stand-in for tests)."""

    repo: str
    token: str | None = None
    api: str = API

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        request = urllib.request.Request(
            f"{self.api.rstrip('/')}{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": "bnfold-fuzz",
                **({"Authorization": f"Bearer {self.token}"} if self.token else {}),
                **({"Content-Type": "application/json"} if body is not None else {}),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:200]
            raise GitHubError(f"{method} {path}: HTTP {exc.code} {detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise GitHubError(f"{method} {path}: {exc}") from None

    def filed_signatures(self) -> set[str]:
        """Signatures named by a marker in the body of an open issue."""
        found: set[str] = set()
        page = 1
        while True:
            issues = self._request("GET", f"/repos/{self.repo}/issues?state=open&per_page=100&page={page}")
            for issue in issues:
                found.update(_MARKER.findall(issue.get("body") or ""))
            if len(issues) < 100:
                return found
            page += 1

    def create(self, title: str, body: str) -> str:
        """Create an issue; its web address."""
        issue = self._request("POST", f"/repos/{self.repo}/issues", {"title": title, "body": body})
        return str(issue.get("html_url") or issue.get("url") or "")


@dataclass(frozen=True)
class Planned:
    """One entry, and what filing does with it."""

    signature: str
    title: str
    body: str
    #: "filed" (created now), "to file" (a dry run), "already filed"
    status: str
    url: str = ""


def file_issues(
    entries: list[Entry], github: GitHub, *, apply: bool, render: Callable[[Entry], str]
) -> list[Planned]:
    """Plan (and with ``apply``, file) one issue per entry signature not filed yet."""
    filed = github.filed_signatures()
    plans = []
    for entry in entries:
        if entry.signature in filed:
            plans.append(Planned(entry.signature, "", "", "already filed"))
            continue
        text = render(entry)
        title, _, body = text.partition("\n")
        body = body.strip() + "\n\n" + marker(entry.signature) + "\n"
        title = title.removeprefix("# ").strip()
        if apply:
            url = github.create(title, body)
            plans.append(Planned(entry.signature, title, body, "filed", url))
        else:
            plans.append(Planned(entry.signature, title, body, "to file"))
        filed.add(entry.signature)  # two entries of one signature: one issue
    return plans
