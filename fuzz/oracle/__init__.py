"""What a case should compute and whether a fold did: exact semantics and the error bound
(:mod:`~fuzz.model.numerics`, :mod:`~fuzz.oracle.reference`), what running a case
produced as values (:mod:`~fuzz.oracle.execution`), the verdict's typed findings
(:mod:`~fuzz.oracle.verdict`) and what makes two findings the same bug
(:mod:`~fuzz.oracle.signature`). No framework."""

__all__: list[str] = []
