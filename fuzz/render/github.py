"""The GitHub client: files one issue per root cause not filed yet.

:func:`file_issues` takes the issues :func:`fuzz.render.report.issues` made (one per root cause,
its variants listed), puts markers at the end of each body (the root cause, and each
variant's signature), lists the repository's open issues through the GitHub REST API,
skips every issue whose markers are already there, and, only when asked to, creates the
rest (``POST /repos/{owner}/{repo}/issues``). Issues that are not TVM's bugs are never
filed: declines (expected behaviour) and findings against another pass (a mutant). Without
a token it can still list a public repository's issues, so a dry run shows exactly what
an ``--apply`` would file; offline, a dry run shows every issue and says that the check
for ones already filed was skipped.

Key idea: the markers make filing idempotent; running it every night files each bug once,
and a root cause filed under one variant's signature is not filed again for another.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from fuzz.backends import BACKENDS
from fuzz.errors import BnfuzzError
from fuzz.render.issue import Issue

__all__ = ["Filing", "GitHub", "GitHubError", "Planned", "file_issues", "marker", "trackers"]

API = "https://api.github.com"
#: Parses the markers this module writes into the bodies it files (a file format of ours).
_MARKER = re.compile(r"<!-- bnfold-fuzz (?:signature|root cause): (.+?) -->")


def marker(signature: str, kind: str = "signature") -> str:
    """The line that names a filed issue's signature, or (``kind="root cause"``) its root
    cause; invisible in GitHub's rendering."""
    return f"<!-- bnfold-fuzz {kind}: {signature} -->"


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
        """Signatures and root causes named by a marker in the body of an open issue."""
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
    """One issue, and what filing does with it."""

    key: str
    title: str
    body: str
    #: "filed" (created now), "to file" (a dry run), "already filed", "not filed" (not TVM's bug)
    status: str
    url: str = ""
    #: why an issue is "not filed"
    why: str = ""


@dataclass(frozen=True)
class Filing:
    """What :func:`file_issues` did, and whether it could ask GitHub what is filed."""

    plans: list[Planned]
    #: why the check for issues already filed was skipped (a dry run, the API unreachable)
    unchecked: str | None = None


def trackers() -> frozenset[str]:
    """The trackers of the projects whose folds are fuzzed: each backend's registry row."""
    return frozenset(row.project.lower() for row in BACKENDS.values())


def _not_filed(issue: Issue, repo: str | None) -> str:
    if not issue.bug:
        return "expected behaviour (a stated decline), not a bug"
    # into another project's tracker, never; a repository of no known project (a fork, a
    # test repository) takes any
    if repo is not None and repo.lower() in trackers() and issue.project.lower() != repo.lower():
        return f"a bug of {issue.project}, not of {repo}: file it with --repo {issue.project}"
    if issue.project == "apache/tvm" and issue.pass_name != "upstream" and issue.needs_pass:
        return f"needs {issue.pass_name}, not TVM's pass, to show"
    return ""


def file_issues(issues: list[Issue], github: GitHub, *, apply: bool, repo: str | None = None) -> Filing:
    """Plan (and with ``apply``, file) each issue whose root cause and signatures no open
    issue names yet. Without ``apply``, an unreachable API is not an error: every issue
    is planned, and :attr:`Filing.unchecked` says why none was checked. ``repo``: the
    repository filed into; an issue of another project's tracker is not filed there."""
    unchecked = None
    try:
        filed = github.filed_signatures()
    except GitHubError as exc:
        if apply:
            raise
        filed, unchecked = set(), str(exc)
    plans = []
    for issue in issues:
        why = _not_filed(issue, repo)
        if why:
            plans.append(Planned(issue.key, issue.title, "", "not filed", why=why))
            continue
        names = {issue.key, *issue.signatures}
        if names & filed:
            plans.append(Planned(issue.key, issue.title, "", "already filed"))
            continue
        markers = [marker(issue.key, "root cause"), *(marker(sig) for sig in issue.signatures)]
        body = issue.body.strip() + "\n\n" + "\n".join(markers) + "\n"
        if apply:
            url = github.create(issue.title, body)
            plans.append(Planned(issue.key, issue.title, body, "filed", url))
        else:
            plans.append(Planned(issue.key, issue.title, body, "to file"))
        filed |= names  # two issues of one cause: one filed
    return Filing(plans, unchecked)
