"""What drives the backends and the oracle: one case checked
(:mod:`~fuzz.engine.check`), in a worker process (:mod:`~fuzz.engine.isolate`), a Hypothesis
campaign (:mod:`~fuzz.engine.campaign` and its control and result), the minimiser
(:mod:`~fuzz.engine.simplifications`, :mod:`~fuzz.engine.minimize`), ``bnfuzz run``
(:mod:`~fuzz.engine.run`), replaying and promoting entries (:mod:`~fuzz.engine.replay`,
:mod:`~fuzz.engine.promote`) and the decline cases (:mod:`~fuzz.engine.decline_entries`). No
framework: folds come from :mod:`fuzz.backends`."""

__all__: list[str] = []
