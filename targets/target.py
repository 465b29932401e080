"""The base every target subclasses: the core and every optional protocol, with their defaults."""
from __future__ import annotations

import functools
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


@functools.cache
def with_defaults(cls: type) -> type:
    """`cls` as the harness runs it: a :class:`Target` as it is; a bare :class:`~targets.core.TargetCore`
    (with whichever protocols it mixes in itself) with the defaults of every other protocol mixed in
    after it, so it behaves as the same class written on :class:`Target` would. The protocols it does not
    state stay unimplemented (:func:`targets.protocols.implements`): the harness falls back as for any
    target that keeps a default."""
    if not isinstance(cls, type) or not issubclass(cls, TargetCore):
        raise TypeError(f"{cls!r} is not a targets.core.TargetCore subclass")
    if issubclass(cls, Target):
        return cls
    missing = tuple(p for p in PROTOCOLS if not issubclass(cls, p))
    return type(cls.__name__, (cls, *missing), {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                                "__doc__": cls.__doc__, "core_class": cls})
