"""Render every corpus entry as its issue and its reproducer script, and the corpus as the
issues ``file-issues`` would file, into a folder: two runs diffed show what a change did
to what the tool would send (``diff -r before after``).

    python tools/render_corpus.py OUT [CORPUS]
"""

from __future__ import annotations

import sys
from pathlib import Path

from fuzz.cli.common import entry_files

try:
    from fuzz.engine.promote import read_as_entry
    from fuzz.render.report import issues, render_issue, render_script
except ImportError:  # a revision before fuzz/ was in layers (tools/compare_revisions.sh)
    from fuzz.promote import read_as_entry  # type: ignore[no-redef]
    from fuzz.report import issues, render_issue, render_script  # type: ignore[no-redef]


def main(out: Path, corpus: Path) -> None:
    entries = []
    for path in entry_files([corpus]):
        entry = read_as_entry(path)
        entries.append(entry)
        target = out / path.relative_to(corpus)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.with_suffix(".issue.md").write_text(render_issue(entry))
        target.with_suffix(".script.py").write_text(render_script(entry))
        print(path, flush=True)
    for k, issue in enumerate(issues(entries)):
        (out / f"filed-{k:03d}.md").write_text(issue.text)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2] if len(sys.argv) == 3 else "corpus"))
