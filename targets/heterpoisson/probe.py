"""HeterPoisson's probe adapter: one DP-SGD step's clipped gradient sum, measured on sampled
couplings (world 0 = world 1's batch without the node), node canaries."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from graphs.small import make_graph
from targets.base import seeded
from targets.common.dpsgd import clip_rows, flatten, per_example_gradients
from targets.common.probe import Coupling, SampledStep
from targets.heterpoisson.model import Batch, StarNet


def step_change(target: Any, graph: Data, node: int, rng: torch.Generator, model_seed: int = 0) -> Coupling:
    """The coupling of one sampled batch: measured ‖Σclip(g1) − Σclip(g0)‖ and the claimed c·scale.

    World 1 is `graph` with `node` in; world 0 the same batch with `node` taken out (not central,
    and every kept edge from or to it dropped): the coupling the accountant's ρ is about. The
    claimed bound is c when the node is central (its peripheral copies removed, step 5), else 2c
    per star it survives in as a peripheral; the target's own ``node_canary_scale`` is recorded
    beside it.
    """
    cfg = target.config
    cache = target._sampler_cache(graph)
    batch1 = target.sample_batch(graph, rng, _cache=cache)
    keep_c = batch1.central != node
    keep_e = (batch1.src != node) & (batch1.dst != node)
    batch0 = Batch(central=batch1.central[keep_c], src=batch1.src[keep_e], dst=batch1.dst[keep_e])
    x = graph.x.float()
    y = graph.y.long()
    classes = int(graph.y.max()) + 1
    with seeded(torch.Generator().manual_seed(model_seed)):
        model = StarNet(x.size(1), cfg.hidden, classes, cfg.backbone)

    def loss_of(out, tgt):
        return torch.nn.functional.cross_entropy(out.unsqueeze(0), tgt.unsqueeze(0))

    def total(batch: Any) -> torch.Tensor:
        d = sum(v.numel() for v in model.parameters())
        out = torch.zeros(d, dtype=torch.float64)
        if batch.central.numel():
            packed = target._pack(x, batch.central, batch.src, batch.dst)
            grads = per_example_gradients(model, loss_of, packed, y[batch.central])
            out += clip_rows(flatten(grads), cfg.clip_norm).double().sum(0)
        return out

    measured = float((total(batch1) - total(batch0)).norm())
    central = bool((batch1.central == node).any())
    stars = int(torch.unique(batch1.dst[batch1.src == node]).numel())
    claimed = cfg.clip_norm * (1.0 if central else 2.0 * stars)
    return Coupling(measured, claimed, {"central": central, "peripheral_stars": stars,
                                        "target_scale": target.node_canary_scale(batch1, node),
                                        "batch": int(batch1.central.numel())})


def step_maps(target: Any) -> list[SampledStep]:
    cfg = target.config

    def change(graph: Data, node: int, batch_seed: int, model_seed: int) -> Coupling:
        return step_change(target, graph, node, torch.Generator().manual_seed(batch_seed), model_seed)

    def sources(graph: Data, candidates: int, rng: np.random.Generator, use_families: bool
                ) -> list[tuple[str, Data, list[int]]]:
        """The given graph's highest-degree and random training nodes; a hub with 2M + 2 leaves and
        a clique (every node a training node)."""
        train = graph.train_mask.nonzero().view(-1)
        deg = torch.bincount(graph.edge_index[0], minlength=graph.num_nodes)
        top = train[torch.argsort(-deg[train])][: max(1, candidates // 2)].tolist()
        rand = rng.choice(train.numel(), size=min(train.numel(), max(1, candidates // 2)), replace=False)
        out = [(f"given graph ({graph.num_nodes} nodes)", graph, list(dict.fromkeys(top + train[rand].tolist())))]
        if use_families:
            k = max(4, 2 * cfg.neighbors + 2)
            hub = make_graph(k + 1, [(0, i) for i in range(1, k + 1)], features=graph.x.size(1), classes=2)
            clique = make_graph(6, [(i, j) for i in range(6) for j in range(i + 1, 6)], features=graph.x.size(1))
            out += [(f"hub + {k} leaves", hub, [0, 1]), ("clique K6", clique, [0])]
        return out

    return [SampledStep(name="one DP-SGD step (Σ clipped sub-graph gradients)", norm="l2", kinds=("node",),
                        change=change, sources=sources,
                        describe=lambda i: f"central={i['central']}, peripheral stars={i['peripheral_stars']}",
                        covers=["every DP-SGD step"],
                        note="claimed per pair: c if the node is central, else 2c per star it is a peripheral in")]
