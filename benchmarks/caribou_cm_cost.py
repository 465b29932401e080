"""The cost per trial of CARIBOU's edge-level classification module (CM) and of a LinkTeller trial,
in CPU milliseconds of this process (``time.process_time``), on the default run's graph and target
(csbm, ε = 1, hidden 64, 100 CM epochs, dropout ½), world 0, the encoder prepared.

* floor: the CM's own draws alone (per epoch the x0-dropout and dropout uniforms; 0 draws for x0
  at the default x0_dropout = 0);
* pcmp: ``fit_batch`` of ``--batch`` trials (the release: PCMP, no CM);
* cm stacked: the first weights read of that batch (trains its ``--batch`` CMs together);
* cm alone: one ``fit`` and its weights read per trial (``--batch 1``: a stack of one), minus pcmp;
* module: the CM as trained before stacking (``_fit_best_val`` on the module, per trial);
* score: LinkTeller's score of a trial whose CM is trained (3 queries, each a fresh PCMP release).

    taskset -c 1 python benchmarks/caribou_cm_cost.py [--set encoder_epochs=20]

Not a test: timings depend on the machine (and on what else runs on it).
"""
from __future__ import annotations

import sys
import time

import numpy as np
import torch
from torch_geometric.data import Data

from trial_cost import arguments, cpu_ms_per_trial
from attacks.linkteller import LinkTeller
from audit.play.game import AuditSpec, setup_run, trial_seed
from canaries.base import make as make_canary
from targets.caribou import stacked
from targets.caribou.model import _fit_best_val


def _module_train(modules, z, y, train_mask, val_mask, epochs, lr, weight_decay, gens):
    split = Data(y=y, train_mask=train_mask, val_mask=val_mask)
    for k, m in enumerate(modules):
        _fit_best_val(m, z(k), split, epochs, torch.optim.Adam(m.parameters(), lr=lr, weight_decay=weight_decay),
                      gens[k])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    params = {}
    while "--set" in argv:
        i = argv.index("--set")
        key, value = argv[i + 1].split("=", 1)
        params[key] = value
        del argv[i:i + 2]
    args = arguments(__doc__, argv, batch=64, single=8)
    spec = AuditSpec(target="caribou", attack="linkteller", params=params)
    graph, target, _ = setup_run(spec)
    cfg = target.config
    target.prepare(graph)
    m = int(graph.train_mask.sum())

    def gens(n: int, start: int = 0) -> list[torch.Generator]:
        return [torch.Generator().manual_seed(trial_seed(0, start + i)) for i in range(n)]

    def floor(k: int = 16) -> float:
        rngs = gens(k)
        c0 = time.process_time()
        for g in rngs:
            for _ in range(cfg.cm_epochs):
                if cfg.x0_dropout > 0:
                    torch.rand((m, 1), generator=g)
                if cfg.dropout > 0:
                    torch.rand((m, 2 * cfg.hidden), generator=g)
        return (time.process_time() - c0) / k * 1e3

    def read_all(releases) -> None:
        for r in releases:
            r.view("weights")

    pair = make_canary("random-edge").worlds(graph, np.random.default_rng(0), target)
    attack = LinkTeller()
    print(f"caribou on csbm: n = {graph.num_nodes}, training nodes = {m}, hidden = {cfg.hidden}, "
          f"cm_epochs = {cfg.cm_epochs}, dropout = {cfg.dropout}, x0_dropout = {cfg.x0_dropout}")
    read_all([target.fit(graph, g) for g in gens(2)])  # warm-up
    print(f"| repeat | CM draw floor | pcmp (fit_batch of {args.batch}) | cm stacked ({args.batch}) "
          f"| cm alone (stack of 1) | module (before) | LinkTeller score |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    real = stacked.train
    for r in range(args.repeats):
        f = floor()
        rngs = gens(args.batch)
        releases = []
        pcmp = cpu_ms_per_trial(lambda: releases.extend(target.fit_batch(graph, rngs)), args.batch)
        cm = cpu_ms_per_trial(lambda: read_all(releases), args.batch)
        score = cpu_ms_per_trial(lambda: [attack.score(x, pair, graph) for x in releases[:args.single]],
                                 args.single)
        alone = cpu_ms_per_trial(lambda: read_all([target.fit(graph, g) for g in gens(args.single)]),
                                 args.single) - pcmp
        stacked.train = _module_train
        try:
            module = cpu_ms_per_trial(lambda: read_all([target.fit(graph, g) for g in gens(args.single)]),
                                      args.single) - pcmp
        finally:
            stacked.train = real
        print(f"| {r + 1} | {f:.2f} | {pcmp:.2f} | {cm:.2f} | {alone:.2f} | {module:.2f} | {score:.2f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
