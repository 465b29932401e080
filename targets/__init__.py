"""The DP-GNN trainers under audit, their contract (:mod:`targets.base`) and its stable surface
(:mod:`targets.api`). Old module paths still import, with a DeprecationWarning (:mod:`targets.common.moved`)."""
from targets.common import moved as _moved  # noqa: F401 -- installs the old paths' finder
