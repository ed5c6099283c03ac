"""An issue to file, as a record: what :mod:`fuzz.render.report` renders and :mod:`fuzz.render.github`
files, kept apart from both so that filing imports no TVM.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Issue"]


@dataclass(frozen=True)
class Issue:
    """One issue to file: a root cause (``key``) and the entries that show it."""

    key: str
    title: str
    body: str
    signatures: tuple[str, ...]
    #: the pass the entries were found against
    pass_name: str = "upstream"
    #: whether the bug needs that pass (False: a pipeline of TVM's other passes alone shows it)
    needs_pass: bool = True
    #: False for expected behaviour (a stated decline): rendered, never filed
    bug: bool = True
    #: the GitHub repository whose tracker the issue belongs to
    project: str = "apache/tvm"

    @property
    def text(self) -> str:
        return f"# {self.title}\n\n{self.body}"
