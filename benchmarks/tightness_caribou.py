"""Where CARIBOU's convergent accounting binds (issue #32): the exact linear-chain μ of the best
witness found, over the claim's, per (K, C_L); and the binding witness file the campaign plays.

    python benchmarks/tightness_caribou.py --witness campaigns/witnesses/caribou-binding.json
    python benchmarks/tightness_caribou.py --sweep results/tightness/caribou_sweep.json
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from canaries.witness import FORMAT  # noqa: E402
from graphs.datasets import graph_to_dict  # noqa: E402
from targets.caribou.binding import antipodal_pair, search  # noqa: E402
from targets.caribou.given_input import CaribouGivenInputConfig  # noqa: E402

#: the binding configuration: K = 10 under the convergent accounting, a small C_L (M = 1.105)
BINDING = {"hops": 10, "contraction": 0.05, "alpha1": 1.0, "hidden": 2}
GRAPH = (72, 16)  # C72(d=16), edge (0, 36)
SWEEP = [((24, 2), 10, c) for c in (0.05, 0.1, 0.2, 0.5, 0.8)] + [((72, 16), 10, c) for c in (0.05, 0.2, 0.8)] \
    + [((24, 2), 5, 0.8)]


def write_witness(path: Path) -> dict:
    g0, g1, edge = antipodal_pair(*GRAPH, BINDING["hidden"])
    found = search(g0, g1, hops=BINDING["hops"], contraction=BINDING["contraction"], alpha1=BINDING["alpha1"],
                   width=BINDING["hidden"])
    graph = g0.clone()
    graph.x = found.x0.float()
    config = dataclasses.asdict(CaribouGivenInputConfig(**BINDING, beta=round(found.beta, 6), x0=str(path)))
    doc = {
        "format": FORMAT, "target": "targets.caribou.given_input:CaribouGivenInput", "config": config,
        "step": f"X({BINDING['hops']}) (the linear chain, every noiseless hop inside the ball)",
        "covers": [f"hop {k}" for k in range(1, BINDING["hops"] + 1)], "norm": "l2",
        "canary": {"kind": "edge", "edge": list(edge)}, "graph": graph_to_dict(graph),
        "input": {"kind": "adversarial", "x": {"dtype": "float64", "shape": list(found.x0.shape),
                                               "data": found.x0.reshape(-1).tolist()}},
        "measured": found.mu_unit, "claimed": found.claim_unit, "ratio": found.ratio, "violation": False,
        "found_by": f"targets.caribou.binding.search on circulant C{GRAPH[0]}(d={GRAPH[1]}), edge {edge}: "
                    f"exact linear-chain μ·s {found.mu_unit:.5f} against the claim's √M·Δ {found.claim_unit:.5f} "
                    f"(ratio {found.ratio:.4f}; noiseless hop rows ≤ {found.max_norm:.4f})",
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return {"ratio": found.ratio, "beta": found.beta, "max_norm": found.max_norm}


def sweep(path: Path) -> list[dict]:
    rows = []
    for (n, d), hops, contraction in SWEEP:
        g0, g1, edge = antipodal_pair(n, d, 2)
        found = search(g0, g1, hops=hops, contraction=contraction, alpha1=1.0, width=2, steps=400)
        rows.append({"graph": f"C{n}(d={d})", "edge": list(edge), "hops": hops, "contraction": contraction,
                     "alpha1": 1.0, "width": 2, "beta": found.beta, "max_norm": found.max_norm,
                     "mu_unit": found.mu_unit, "claim_unit": found.claim_unit, "ratio": found.ratio})
        print(json.dumps(rows[-1]), flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--witness", type=Path)
    ap.add_argument("--sweep", type=Path)
    args = ap.parse_args()
    if args.witness:
        print(write_witness(args.witness))
    if args.sweep:
        sweep(args.sweep)


if __name__ == "__main__":
    main()
