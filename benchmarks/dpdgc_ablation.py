"""Where a DPDGC trial's CPU time goes: DP-Emb's training with one part of its step left out.

The default run's DPDGC release (csbm, edge GDP, Z at the mechanism level) is DP-Emb's projected
DP-Adam (281 steps) and then Z. This times ``dpemb.train`` on the default run's graph and config
for a stack of ``--batch`` runs, in CPU milliseconds per run (``time.process_time``, one thread),
once as written and once per variant that drops one part of every step:

* ``-noise``: the N(0, std²) draw of the n·h + h noisy sum (the draw floor's bulk);
* ``-clean sum``: the clipped rows' gather and their ``index_add_`` onto the noise;
* ``-adam``: the fused Adam update;
* ``-projection``: W's rows put back to norm c;
* ``-all four``: all of the above (what is left: the batch, the per-example forward/backward and
  clipping, the initialisation, Python's per-op cost).

A variant's W is wrong (it is a timing device, not a model): each is a copy of
``targets/dpdgc/dpemb.py`` with the named lines replaced, built here, and the script stops if a
line it replaces is not in the source. It also times the Gaussian sources at hand, in ns a normal
(float32 unless named): torch's ``normal_`` is the one DP-Emb draws with.

    taskset -c 1 python benchmarks/dpdgc_ablation.py --batch 24 --repeats 4

Not a test: timings depend on the machine (and on what else runs on it); the min over repeats is
the steadiest figure on a shared machine.
"""
from __future__ import annotations

import argparse
import sys
import time
import types
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.play.game import AuditSpec, setup_run, trial_seed  # noqa: E402
from targets.dpdgc import dpemb  # noqa: E402

#: (line as written, replacement) per part of a step
PARTS = {
    "noise": [("block.normal_(0.0, sched.std, generator=rng)", "pass")],
    "clean sum": [("rows_of.spread(gs)", "None"),
                  ("noisy.view(k_runs * (n + 1), h).index_add_(0, target, rows)", "pass")],
    "adam": [("torch._fused_adam_(", "(lambda *a, **k: None)(")],
    "projection": [("        sched.project(w)\n    return", "        pass\n    return")],
}


def variant(drop: list[str]) -> types.ModuleType:
    """dpemb with the lines of the parts in `drop` replaced."""
    source = Path(dpemb.__file__).read_text()
    for part in drop:
        for line, new in PARTS[part]:
            if line not in source:
                raise SystemExit(f"dpemb.py no longer has {line!r} ({part}): update PARTS")
            source = source.replace(line, new)
    module = types.ModuleType(f"dpemb_without_{'_'.join(drop) or 'nothing'}")
    module.__dict__["__name__"] = "targets.dpdgc.dpemb"  # its dataclasses resolve their module
    exec(compile(source, dpemb.__file__, "exec"), module.__dict__)
    return module


def ns_a_normal(draw, count: int, reps: int = 300) -> float:
    draw()
    c0 = time.process_time()
    for _ in range(reps):
        draw()
    return (time.process_time() - c0) / reps / count * 1e9


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=24, help="runs in the stack (the default run: 2 stacks of 24)")
    p.add_argument("--repeats", type=int, default=4)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    graph, target, claim = setup_run(AuditSpec(target="dpdgc"))
    target.prepare(graph)
    n, h, cfg = graph.num_nodes, target.config.hidden, target.config
    train_idx = torch.nonzero(target._masks(graph)[0]).view(-1)
    batch, steps, _ = target._schedule(train_idx.numel())
    sched = dpemb.Schedule(n=n, hidden=h, batch=batch, steps=steps,
                           std=target._encoder_noise_std(claim.to_dict()["details"]["noise_multiplier"]), lr=cfg.lr,
                           weight_decay=cfg.encoder_weight_decay, clip=cfg.clip, project=target._project)
    adj, classes = target._adjacencies(target._edges(graph, 0), n), int(graph.y.max()) + 1
    variants = {"as written": [], **{f"-{part}": [part] for part in PARTS}, "-all four": list(PARTS)}
    modules = {name: variant(drop) for name, drop in variants.items()}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, module in modules.items():
            rngs = [torch.Generator().manual_seed(trial_seed(0, i)) for i in range(args.batch)]
            c0 = time.process_time()
            module.train(adj, sched, graph.y, train_idx, classes, rngs, threads=1)
            times[name].append((time.process_time() - c0) / args.batch * 1e3)
    full = min(times["as written"])
    print(f"DP-Emb on {graph.num_nodes} nodes, {steps} steps of {n * h + h:,} noisy coordinates, a stack of "
          f"{args.batch} runs, one thread; CPU ms a run, min (median) of {args.repeats}\n")
    print("| variant | ms a run | what the part costs |")
    print("|---|---:|---:|")
    for name, ts in times.items():
        best = min(ts)
        cost = "" if name == "as written" else f"{full - best:.1f}"
        print(f"| {name} | {best:.1f} ({sorted(ts)[len(ts) // 2]:.1f}) | {cost} |")
    count, gen = n * h + h, torch.Generator().manual_seed(0)
    buf, buf64, ints = torch.empty(count), torch.empty(count, dtype=torch.float64), torch.empty(count, dtype=torch.int32)
    sources = {"torch normal_": lambda: buf.normal_(0.0, 1.0, generator=gen),
               "torch uniform_ (bits only)": lambda: buf.uniform_(generator=gen),
               "torch random_ int32 (bits only)": lambda: ints.random_(generator=gen),
               "torch normal_ float64": lambda: buf64.normal_(0.0, 1.0, generator=gen),
               "torch exponential_ (MKL)": lambda: buf.exponential_(generator=gen)}
    out = np.empty(count, dtype=np.float32)
    for bits in (np.random.SFC64, np.random.PCG64, np.random.Philox):
        rng = np.random.Generator(bits(0))
        sources[f"numpy {bits.__name__} ziggurat"] = lambda rng=rng: rng.standard_normal(out=out, dtype=np.float32)
    print("\n| Gaussian source | ns a number |")
    print("|---|---:|")
    for name, draw in sources.items():
        print(f"| {name} | {ns_a_normal(draw, count):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
