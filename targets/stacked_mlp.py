"""Moved: ``targets.stacked_mlp`` is now ``targets.common.stacked_mlp`` (0.1.0, see CHANGELOG.md). This name keeps working,
with a DeprecationWarning, until 0.3.0; import from ``targets.common.stacked_mlp`` (or the stable surface,
``targets.api``)."""
from targets.common.moved import alias

alias(__name__, "targets.common.stacked_mlp")
