"""The cost per trial of the GCN-training targets (gcn, edgerand, lapgraph) in CPU seconds, on the
default run's graph and target (csbm, ε = 1, hidden 16, 200 epochs, dropout ½), world 0.

Three numbers, each in CPU milliseconds per trial of this process (``time.process_time``):

* floor: the trial's own draws alone (the init seed and, per epoch, the feature and hidden dropout
  words; edgerand and lapgraph add the perturbation's draws, replayed through ``perturb``);
* fit_batch: ``fit_batch`` of ``--batch`` trials (the game's auto batch on the api view is 64);
* fit: one ``fit`` per trial (``--batch 1``).

    taskset -c 1 python benchmarks/gcn_cost.py --target gcn

Runs on trees without ``fit_batch`` too (the base class loops over ``fit``). Not a test: timings
depend on the machine (and on what else runs on it).
"""
from __future__ import annotations

import sys
import time

import torch

from trial_cost import arguments, compare
from audit.play.game import AuditSpec, setup_run
from targets.base import child_generator


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    name = "gcn"
    if "--target" in argv:
        i = argv.index("--target")
        name = argv[i + 1]
        del argv[i:i + 2]
    args = arguments(__doc__, argv, batch=64, single=4)
    graph, target, _ = setup_run(AuditSpec(target=name))
    cfg = target.config
    n, f = int(graph.num_nodes), graph.x.size(1)
    words = [-(-n * f // 64), -(-n * cfg.hidden // 64)]

    def floor(k: int = 16) -> float:
        gens = [torch.Generator().manual_seed(i) for i in range(k)]
        c0 = time.process_time()
        for gen in gens:
            if hasattr(target, "perturb"):
                target.perturb(graph, child_generator(gen))
            torch.randint(0, 2**62, (1,), generator=gen)
            for _ in range(cfg.epochs):
                for w in words:
                    torch.randint(-2**63, 2**63 - 1, (w,), generator=gen, dtype=torch.int64)
        return (time.process_time() - c0) / k * 1e3

    print(f"{name} on csbm: n = {n}, features = {f}, epochs = {cfg.epochs}, "
          f"batched = {getattr(target, 'batched', False)}")
    compare(target, graph, floor, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
