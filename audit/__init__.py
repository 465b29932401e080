"""The audit: play the DP distinguishing game against a target and read an ε lower bound from it.

One folder per role, each importing only the folders before it in this list:

* :mod:`audit.stats`: estimators, privacy loss and pair ε, shape, sequential and family checks;
* :mod:`audit.declared_model`: whether releases follow the noise law the claim declares;
* :mod:`audit.records`: the store, results, provenance, the log and the reports;
* :mod:`audit.play`: running one game, from its spec to its outcome;
* :mod:`audit.plan`: the default portfolio, budgets, the catalogue, campaigns and regressions;
* :mod:`audit.console`: the command line (``python -m audit``).

:mod:`audit.testing` (the pytest helpers) stands beside them. The flat module paths of 0.1
(``audit.game``…) still import, with a DeprecationWarning (:mod:`audit._moved`).
"""
from audit import _moved

_moved.install()
