"""Utility of the private targets beside their papers' published numbers.

For each (dataset, setting, ε, seed): build the target, train once, and report the val-selected
test accuracy (``Release.info["accuracy"]``). The published number is looked up in the target's
``published_accuracy`` as (dataset, setting, ε), where the setting is the `--unit` value or the
`--setting` label you give (e.g. ``k=1`` for DPDGC, ``gin`` for HeterPoisson).

    python benchmarks/utility.py --target caribou --datasets csbm cora --epsilons 1 8 --seeds 2
    python benchmarks/utility.py --target gap --datasets cora citeseer --unit node --epsilons 4 8 16

Isolated nodes are dropped first with ``--drop-isolated`` (GAP's and CARIBOU's pre-processing).
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch

from audit import data
from targets.base import build, get, parse_assignments, resolve


def measure(target: str, dataset: str, epsilon: float, seed: int, params: dict[str, str],
            drop_isolated: bool, split: tuple[float, float, float] | None = None) -> tuple[float, float]:
    """(test accuracy, seconds) of one private run."""
    graph = data.load(dataset, seed=seed, split=split)
    if drop_isolated:
        graph = data.drop_isolated(graph)
    t = build(target, epsilon=epsilon, **params)
    start = time.time()
    release = t.fit(graph, torch.Generator().manual_seed(seed))
    acc = resolve(release.info["accuracy"])
    return float(acc["test"]), time.time() - start


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", required=True)
    p.add_argument("--datasets", nargs="+", default=["csbm"])
    p.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 2.0, 4.0, 8.0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--unit", default=None, help="edge or node (sets the target's unit, if it has one)")
    p.add_argument("--setting", default=None, help="label for the published-number lookup (default: unit)")
    p.add_argument("--set", nargs="+", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--drop-isolated", action="store_true")
    p.add_argument("--split", default=None, help="train,val,test fractions replacing the dataset's masks, "
                   "e.g. 0.1,0.1,0.2 (CARIBOU) or 0.75,0.1,0.15 (GAP, DPDGC)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    params = parse_assignments([x for g in args.set for x in g])
    if args.unit:
        params["unit"] = args.unit
    setting = args.setting or args.unit or "edge"
    split = tuple(float(x) for x in args.split.split(",")) if args.split else None
    published = getattr(get(args.target), "published_accuracy", {})
    print(f"## {args.target} ({setting}), val-selected test accuracy, {args.seeds} seeds"
          + (f", split {args.split}" if split else "")
          + (f", --set {' '.join(f'{k}={v}' for k, v in params.items())}" if params else "") + "\n")
    print("| dataset | ε | ours (mean ± sd) | published | s per fit |")
    print("|---|---|---|---|---|")
    for dataset in args.datasets:
        for eps in args.epsilons:
            accs, secs = zip(*(measure(args.target, dataset, eps, s, params, args.drop_isolated, split)
                               for s in range(args.seeds)))
            pub = published.get((dataset, setting, eps), published.get((dataset, setting, int(eps)) if eps.is_integer() else None))
            pub_text = f"{pub:.1f}" if isinstance(pub, (int, float)) and not math.isnan(pub) else "-"
            print(f"| {dataset} | {eps:g} | {100 * np.mean(accs):.1f} ± {100 * np.std(accs):.1f} | {pub_text} | "
                  f"{np.mean(secs):.1f} |", flush=True)


if __name__ == "__main__":
    main()
