"""DP-SGD trace types: what the ``trace`` view of a DP-SGD target releases.

A :class:`DPSGDTrace` is every noisy summed gradient of one run, one :class:`TraceStep`
per step, with the noise law the run claims (``noise``, ``noise_std``), the clip norm, the
sampling rate and the accounted number of steps. Used by ``heterpoisson``, ``dpsgd_gcn``,
``dpdgc`` and ``gap`` (node level); read by the gradient canaries and attacks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch


@dataclass
class TraceStep:
    """One DP-SGD step: the released noisy sum and the auditor's instrumentation."""

    noisy: torch.Tensor
    central: torch.Tensor
    canary_in: bool | None = None
    clean: torch.Tensor | None = None
    canary_scale: float | None = None
    #: the gradient canary this step carried (white-box, like ``clean``, which includes it): where both
    #: worlds carry one (a replace-one pair), ``clean`` minus it is the rest of the batch
    canary: torch.Tensor | None = None


@dataclass
class DPSGDTrace:
    """Every noisy summed gradient of one DP-SGD run (the ``trace`` view), with the noise law it claims."""

    steps: list[TraceStep] = field(default_factory=list)
    noise: str = "sml"
    noise_std: float = 0.0
    clip_norm: float = 0.5
    sampling_rate: float = 1.0
    expected_batch: float = 1.0
    accounted_steps: int = 0
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, i: int) -> TraceStep:
        return self.steps[i]

    def __iter__(self):
        return iter(self.steps)

    @property
    def dim(self) -> int:
        return int(self.steps[0].noisy.numel()) if self.steps else sum(math.prod(s) for s in self.shapes.values())

    def noisy_matrix(self) -> torch.Tensor:
        return torch.stack([s.noisy for s in self.steps])

    def clean_matrix(self) -> torch.Tensor:
        return torch.stack([s.clean for s in self.steps])

    def canary_mask(self) -> torch.Tensor:
        return torch.tensor([bool(s.canary_in) for s in self.steps])

    def sampling_record(self) -> dict[str, list]:
        """Per step, the canary's inclusion (None where the step did not record it) and the realised
        batch size (the examples other than the canary that the step's noisy sum covers): what the
        auditor measures the sampler from (``audit.sampler_check``)."""
        return {"canary_in": [None if s.canary_in is None else bool(s.canary_in) for s in self.steps],
                "batch_size": [int(s.central.numel()) for s in self.steps]}

