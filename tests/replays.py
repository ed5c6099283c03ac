"""The shipped corpus, replayed once per test session: :class:`Replays` loads each entry
and checks it on a pass at most once, however many tests ask (``tests/conftest.py`` hands
one instance to every test as the ``corpus`` fixture; those tests share one xdist worker
through ``xdist_group("corpus")``, so that holds under ``pytest -n 2`` too).

:func:`fingerprint` is one entry's replay as a line of text (both programs' outputs
hashed, the verdict); run as a script, this module prints the fingerprint of every entry
replayed on its own pass in a fresh process, which ``tests/reliability/test_determinism.py``
compares with the session's replay.

Import it as ``from replays import Replays`` (``tests/`` is on ``sys.path``, as for
``cases``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from fuzz.engine.replay import Replay, replay
from fuzz.oracle.execution import Outputs
from fuzz.store.corpus import Entry, load_entry

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpus"
#: One entry per upstream defect class.
ENTRIES = sorted(CORPUS.glob("*.json"))
#: Findings of pipeline campaigns (``bnfuzz run --pipelines``): the pass among its neighbours.
PIPELINE_ENTRIES = sorted((CORPUS / "pipelines").glob("*.json"))
#: Per decline reason, the smallest case where ``fixed`` keeps the batch_norm.
DECLINE_ENTRIES = sorted((CORPUS / "declines").glob("*.json"))
#: Findings against seeded-defect variants of the fixed pass, kept for their mechanism.
MUTANT_ENTRIES = sorted((CORPUS / "mutants").glob("*.json"))
#: The entries whose replay on their own pass is fingerprinted for determinism.
FINGERPRINTED = ENTRIES + PIPELINE_ENTRIES


def ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


class Replays:
    """Corpus entries and their replays, each computed on first use and then kept."""

    def __init__(self) -> None:
        self._entries: dict[Path, Entry] = {}
        self._replays: dict[tuple[Path, str], Replay] = {}

    def entry(self, path: Path) -> Entry:
        if path not in self._entries:
            self._entries[path] = load_entry(path)
        return self._entries[path]

    def replay(self, path: Path, pass_name: str | None = None) -> Replay:
        """The entry at ``path`` checked on ``pass_name`` (default: the entry's own pass)."""
        entry = self.entry(path)
        key = (path, pass_name or entry.pass_name)
        if key not in self._replays:
            self._replays[key] = replay(entry, key[1])
        return self._replays[key]

    def fingerprint(self, path: Path) -> str:
        return fingerprint(path, self.entry(path), self.replay(path))


def fingerprint(path: Path, entry: Entry, replayed: Replay) -> str:
    """One line: the entry's file name, a hash of both programs' outputs, the verdict."""
    checked = replayed.checked
    digest = hashlib.sha256()
    for result in (checked.execution.baseline, checked.execution.folded):
        if isinstance(result, Outputs):
            for value in result.values:
                digest.update(value.tobytes())
        elif result is None:  # not built: the pass raised, or its module is ill-formed
            digest.update(b"none")
        else:
            digest.update(repr((result.stage, result.error_type)).encode())
    # A crash's message holds timing and addresses; its symptom and signal are what must agree.
    verdict = [
        (f.symptom.value, f.error_type, "" if entry.isolated else f.message) for f in checked.verdict.findings
    ]
    return f"{path.name} {digest.hexdigest()} {verdict}"


if __name__ == "__main__":
    replays = Replays()
    for path in FINGERPRINTED:
        print(replays.fingerprint(path))
