"""GAP's node-level trace: its step type and the recorder that adds the gradient canary."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from targets.gap.model import _flat_params
from targets.common.trace import DPSGDTrace, TraceStep


# ---------------------------------------------------------------------------------------------
# the node-level trace
# ---------------------------------------------------------------------------------------------
@dataclass
class GAPTraceStep(TraceStep):
    """One DP-SGD step of GAP: the shared :class:`TraceStep` fields, the module that took it, its
    index in the trace and the module's flat parameters before it.

    ``step[key]`` reads the earlier per-step records by their old keys (``noisy_sum``, ``batch``,
    ``module``, ``step``, ``params``).
    """

    module: str = ""
    step: int = 0
    params: torch.Tensor | None = None

    _KEYS: ClassVar[dict[str, str]] = {"noisy_sum": "noisy", "batch": "central", "module": "module",
                                       "step": "step", "params": "params"}

    def __getitem__(self, key: str) -> Any:
        return getattr(self, self._KEYS[key])


def side_generator(rng: torch.Generator) -> torch.Generator:
    """A generator seeded from a hash of `rng`'s state; `rng` itself is not drawn from, so the
    draws every other part of a fit reads stay where they were."""
    digest = hashlib.sha256(rng.get_state().numpy().tobytes() + b"gap canary coins").digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)


class _Recorder:
    """Records a fit's DP-SGD steps into its trace and adds the gradient canary to the traced
    module's clipped sums.

    ``module`` ``all`` records every step (no canary); ``encoder``/``classifier`` records that
    module's steps only, and for each draws the canary's Poisson(rate) coin from `coins`, whether
    or not a canary is present (so both worlds draw the same coins).
    """

    def __init__(self, trace: DPSGDTrace, module: str, canary: torch.Tensor | None,
                 coins: torch.Generator | None) -> None:
        self.trace, self.module, self.canary, self.coins = trace, module, canary, coins

    def records(self, name: str) -> bool:
        return self.module in ("all", name)

    def coin(self, name: str, rate: float) -> bool | None:
        """Whether the canary joins this step's sum (None: no canary in this module or world)."""
        if self.module != name:
            return None
        up = bool(torch.rand(1, generator=self.coins).item() < rate)
        return up if self.canary is not None else None

    def add(self, name: str, model: nn.Module, batch: torch.Tensor, rows: torch.Tensor,
            noisy: torch.Tensor, canary_in: bool | None) -> None:
        """One step: `rows` are the clipped gradients summed (canary row included), `noisy` the
        released sum."""
        clean = rows.sum(0) if rows.numel() else torch.zeros_like(noisy)
        if self.module != "all" and not self.trace.shapes:
            self.trace.shapes = {k: tuple(v.shape) for k, v in model.named_parameters()}
        self.trace.steps.append(GAPTraceStep(
            noisy=noisy.detach().cpu(), central=batch.cpu(), canary_in=canary_in, clean=clean.detach().cpu(),
            module=name, step=len(self.trace.steps), params=_flat_params(model)))
