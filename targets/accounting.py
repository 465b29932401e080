"""Moved: ``targets.accounting`` is now ``targets.common.accounting`` (0.1.0, see CHANGELOG.md). This name keeps working,
with a DeprecationWarning, until 0.3.0; import from ``targets.common.accounting`` (or the stable surface,
``targets.api``)."""
from targets.common.moved import alias

alias(__name__, "targets.common.accounting")
