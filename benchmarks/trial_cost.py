"""Shared harness of the per-trial cost benchmarks (``*_cost.py``): CPU milliseconds per trial of
this process (``time.process_time``: steadier than wall time on a shared machine; threads' CPU is
summed) for a draw floor given by the caller, ``fit_batch`` of ``--batch`` trials and one ``fit``
per trial, seeded as the game seeds trials. Not a test: timings depend on the machine."""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.play.game import trial_seed  # noqa: E402


def arguments(doc: str, argv: list[str] | None, *, batch: int, single: int) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--single", type=int, default=single, help="trials of the one-fit-per-trial measurement")
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    return args


def cpu_ms_per_trial(work: Callable[[], Any], trials: int) -> float:
    c0 = time.process_time()
    work()
    return (time.process_time() - c0) / trials * 1e3


def compare(target: Any, graph: Any, floor: Callable[[], float], args: argparse.Namespace, *,
            warm_up: bool = True, **fit_kwargs: Any) -> None:
    """Print, per repeat, the floor, ``fit_batch`` of ``args.batch`` and one ``fit`` per trial
    (``args.single`` trials), each with its ratio to the floor. A target without a real
    ``fit_batch`` is looped over ``fit`` when `fit_kwargs` are given (the base class takes none)."""
    def gens(n: int) -> list[torch.Generator]:
        return [torch.Generator().manual_seed(trial_seed(0, i)) for i in range(n)]

    def batched(rngs: list[torch.Generator]) -> Any:
        if fit_kwargs and not getattr(target, "batched", False):
            return [target.fit(graph, g, **fit_kwargs) for g in rngs]
        return target.fit_batch(graph, rngs, **fit_kwargs)

    def single() -> Any:
        return [target.fit(graph, g, **fit_kwargs) for g in gens(args.single)]

    if warm_up:
        single()
    print("| repeat | draw floor | fit_batch of %d | one fit per trial |" % args.batch)
    print("|---:|---:|---:|---:|")
    for r in range(args.repeats):
        f = floor()
        rngs = gens(args.batch)  # made outside the timing, as the game makes them before a batch
        b, s = cpu_ms_per_trial(lambda: batched(rngs), args.batch), cpu_ms_per_trial(single, args.single)
        print(f"| {r + 1} | {f:.2f} | {b:.2f} ({b / f:.1f}×) | {s:.2f} ({s / f:.1f}×) |", flush=True)
