"""What a canary pair's record says of the law an attack scores it under, as a typed value.

A gradient canary records the claimed trace law it was built at (``noise``, ``noise_std``,
``sampling_rate``, ``clip_norm``: the claim's :class:`targets.common.claim.TraceLaw`), a whole-node
canary its ``node``, an edge canary whether it is ``directed``, and the game what the sampler checks
found (``sampler``). Attacks and the harness read those through :meth:`PairLaw.of`: a field the
record does not state is ``None`` (or False), and each reader says what it does then.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PairLaw:
    """The law-related part of a pair's record."""

    noise: str | None = None
    noise_std: float | None = None
    sampling_rate: float | None = None
    clip_norm: float | None = None
    #: the pair names a node (a whole-node or hub canary): its k_t is drawn with the batch
    node: int | None = None
    #: the trace records the whole node's per-step scale k_t in both worlds (``Target.records_node_scale``)
    node_scale_recorded: bool = False
    #: what the sampler checks found (``poisson (checked)``, ``not poisson: ...``, ``unmeasured: ...``); "" where not run
    sampler: str = ""
    directed: bool = False

    @classmethod
    def of(cls, record: Any) -> PairLaw:
        """The law of a pair (a ``CanaryPair``, whose ``info`` is read) or of a stored pair record."""
        if isinstance(record, PairLaw):
            return record
        info: Mapping[str, Any] = record if isinstance(record, Mapping) else record.info

        def stated(key: str) -> Any:
            return info[key] if key in info else None

        def num(key: str) -> float | None:
            return None if stated(key) is None else float(stated(key))
        return cls(noise=stated("noise"), noise_std=num("noise_std"), sampling_rate=num("sampling_rate"),
                   clip_norm=num("clip_norm"), node=None if stated("node") is None else int(stated("node")),
                   node_scale_recorded=bool(stated("node_scale_recorded")),
                   sampler=str(stated("sampler") or ""), directed=bool(stated("directed")))

    @property
    def subsampled(self) -> bool:
        """The record states a sampling rate below 1."""
        return self.sampling_rate is not None and self.sampling_rate < 1.0

    @property
    def drawn_with_batch(self) -> bool:
        """The canary enters a step with a presence or a scale drawn with the batch: Poisson sampling at
        q < 1, or a whole node (its k_t). A score of such a trace is a mixture over that draw."""
        return self.subsampled or self.node is not None

    @property
    def node_scales(self) -> bool:
        """A whole node whose k_t every step records (its exact ε is :mod:`audit.stats.node_curve`'s, k revealed);
        a node the trace does not scale is a fixed gradient on its own coin."""
        return self.node is not None and self.node_scale_recorded

    @property
    def not_poisson(self) -> bool:
        """The sampler checks failed or could not run: the rest of the batch may reveal the canary."""
        return self.sampler.startswith(("not poisson", "unmeasured"))

    @property
    def poisson_checked(self) -> bool:
        return self.sampler.startswith("poisson")
