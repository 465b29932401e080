"""The base every target subclasses: the core and every optional protocol, with their defaults."""
from __future__ import annotations

from typing import Any, Generic

from targets.core import C, TargetCore
from targets.protocols import (PROTOCOLS, Batching, Catalogued, GradientCanary, NeighbourSampling, Preprocessing,
                               Probing, Witnessing, implements)


class Target(TargetCore[C], Batching, Preprocessing, Probing, Witnessing, GradientCanary, NeighbourSampling,
             Catalogued, Generic[C]):
    """A DP-GNN trainer under audit: :class:`targets.core.TargetCore` (``name``, ``Config``, ``levels``,
    ``bugs``, ``config``, ``unit``, :meth:`claim`, :meth:`fit`) with every protocol of
    :mod:`targets.protocols` mixed in, so that a target overrides only the hooks where it has
    something to say (docs/your-target.md). No module outside ``targets/`` names a target or reads
    anything else of it."""

    def overrides(self, hook: str) -> bool:
        """Whether this target's class declares its own `hook` (a method of :class:`Target`). Prefer
        :func:`targets.protocols.implements`, which asks it of a protocol."""
        return getattr(type(self), hook) is not getattr(Target, hook)


def protocols_of(target: Any) -> list[str]:
    """The names of the optional protocols `target` implements itself (:func:`targets.protocols.implements`)."""
    return [p.__name__ for p in PROTOCOLS if implements(target, p)]
