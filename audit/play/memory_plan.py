"""How many trials a worker trains at once: from a trial's memory and the machine's free memory.

A run's trials are played ``batch`` at a time per worker, and a batch's releases are held until
they are scored: a batch of B trials holds about B releases and the working memory to draw them.
For ``--batch auto`` on the mechanism view the run measures one planning release (one ``fit`` of
the prepared target on world 1, with a generator no trial uses: the trials' draws are untouched),
plans twice its tensors' bytes per trial (the release and the working copy it is drawn in), and
caps the target's automatic batch so that every job's batch fits in half the free memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from graphs.memory import available_memory

#: the planning fit's generator seed (trial seeds come from (run seed, index): never this constant)
PLANNING_SEED = 0x9E3779B97F4A7C15 % (2**63)
#: the share of the free memory a run's batches may plan for
FREE_SHARE = 0.5


@dataclass(frozen=True)
class MemoryPlan:
    per_trial: int  # bytes planned for one trial
    free: int  # bytes free when planned
    batch: int  # the batch chosen
    capped: bool  # whether memory, not the target's automatic batch, set it

    def line(self, jobs: int) -> str:
        why = "capped by memory" if self.capped else "the target's automatic batch"
        return (f"memory plan: {self.per_trial / 2**20:.1f} MiB per trial (a release and its working copy); "
                f"batch {self.batch} × {jobs} job(s) ({why}; {self.free / 2**30:.1f} GiB free)")


def release_bytes(release: Any) -> int:
    """Bytes of the tensors a release's mechanism view holds (its noisy outputs)."""
    steps = getattr(release, "mechanism", None) or []
    seen: set[int] = set()
    total = 0
    for step in steps:
        out = getattr(step, "output", None)
        if isinstance(out, torch.Tensor) and id(out) not in seen:
            seen.add(id(out))
            total += out.numel() * out.element_size()
    return total


def plan(target: Any, world: Any, auto_batch: int, jobs: int, free: int | None = None) -> MemoryPlan:
    """The batch for `target` (prepared) on `world`: at most `auto_batch`, and at most what fits
    `jobs` workers' batches into FREE_SHARE of the free memory (at least 1)."""
    release = target.fit(world, torch.Generator().manual_seed(PLANNING_SEED))
    per_trial = max(1, 2 * release_bytes(release))
    on_cuda = any(getattr(s, "output", None) is not None and s.output.is_cuda for s in release.mechanism or [])
    del release
    if free is None:
        free = torch.cuda.mem_get_info()[0] if on_cuda else available_memory()
    return batch_for(per_trial, auto_batch, jobs, free)


def batch_for(per_trial: int, auto_batch: int, jobs: int, free: int) -> MemoryPlan:
    fits = int(FREE_SHARE * free // (max(1, jobs) * per_trial))
    batch = max(1, min(auto_batch, fits))
    return MemoryPlan(per_trial, free, batch, batch < auto_batch)
