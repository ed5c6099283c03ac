"""What is kept on disk: atomic writes and file names (:mod:`~fuzz.store.storage`), the
finding files a campaign writes (:mod:`~fuzz.store.findings`) and corpus entries
(:mod:`~fuzz.store.corpus`). No framework."""

__all__: list[str] = []
