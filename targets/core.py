"""The target contract's core: the minimum every target states (:class:`TargetCore`).

A *target* is a DP-GNN trainer built from a *target ε*: its paper's accountant calibrates the
noise, :meth:`TargetCore.claim` reports what that accountant says (a :class:`~targets.common.claim.Claim`),
and :meth:`TargetCore.fit` trains once on a graph and returns a :class:`~targets.release.Release` with
the views an adversary may observe. Planted bugs change the *release*, never the claim: the gap
between the two is exactly what an audit must find.

Everything else the harness reads of a target is one of the optional protocols of
:mod:`targets.protocols`; :class:`targets.target.Target` mixes them all in, with their defaults.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, TypeVar, cast

import torch

from targets.common.claim import Claim
from targets.common.config_keys import replace_config
from targets.common.runtime import resolve_device
from targets.common.value_enum import Level, Unit
from targets.config import TargetConfig
from targets.release import Release

#: a target's config type (``class GAP(Target[GAPConfig])``: ``self.config`` is a GAPConfig)
C = TypeVar("C", bound=TargetConfig)


class TargetCore(ABC, Generic[C]):
    """The core of a target, generic in its config type ``C``: ``name``, ``Config`` (the
    :class:`TargetConfig` subclass ``C``), the ``levels`` it offers, its planted ``bugs`` (name →
    one-line description), its ``config`` and ``unit``, :meth:`claim`, :meth:`fit` and :meth:`bug`.
    A target is rebuilt from its config in every worker, so workers share no state."""

    name: ClassVar[str] = ""
    Config: ClassVar[type[TargetConfig]] = TargetConfig
    #: the views the target offers (a class attribute; an instance may narrow it to its config's)
    levels: tuple[Level, ...] = (Level.API,)
    bugs: ClassVar[dict[str, str]] = {}
    config: C

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if isinstance(cls.__dict__.get("levels"), tuple):  # a user's names become levels
            cls.levels = tuple(Level(level) for level in cls.levels)

    def __init__(self, config: C | TargetConfig | None = None, **overrides: Any) -> None:
        config = config if config is not None else self.Config()
        if overrides:
            config = replace_config(config, **overrides)
        if not isinstance(config, self.Config):
            raise TypeError(f"{type(self).__name__} needs a {self.Config.__name__}, got {type(config).__name__}")
        if config.bug is not None and config.bug not in self.bugs:
            known = ", ".join(sorted(self.bugs)) or "none"
            raise ValueError(f"unknown bug {config.bug!r} for target {self.name!r}; known: {known}")
        self.config = cast(C, config)
        #: the device the target trains on (from ``config.device``)
        self.device: torch.device = resolve_device(config.device)

    @property
    def unit(self) -> Unit:
        return Unit(getattr(self.config, "unit", Unit.EDGE.value))

    @abstractmethod
    def claim(self, graph: Any) -> Claim:
        """The paper's accountant on the calibrated run for this graph."""

    @abstractmethod
    def fit(self, graph: Any, rng: torch.Generator) -> Release:
        """Train once on `graph` with randomness from `rng`; return the release."""

    def bug(self, name: str) -> bool:
        return self.config.bug == name


#: the core's members: what a target must have, and all the harness may assume without a protocol
CORE_MEMBERS: tuple[str, ...] = ("name", "Config", "levels", "bugs", "config", "device", "unit", "claim", "fit", "bug")
