"""Scaling of the mechanism-level targets: cost and peak memory per trial from n = 10³ to 10⁶.

Each cell (target, n) runs in its own process on ``csbm:n=N`` (average degree 8: m ≈ 4n
undirected edges; the sparse sampler past 4,096 nodes), with the target's defaults at ε = 1:

* ``prepare`` on world 1 of a random-edge canary (what the game caches across trials), and one
  recorded ``fit`` (the floor's, below: the caches a worker keeps across batches are warm);
* ``fit_batch`` of ``--batch`` trials, timed (the best of 3 calls, as the floor is the best of 3), with the process's resident memory sampled every
  2 ms: **cost per trial** = its wall time / batch, **memory per trial** = (peak RSS during the
  call − RSS before it) / batch;
* the **noise-draw floor**: one trial's own draws replayed alone on fresh generators
  (``benchmarks/throughput.py``'s ``draw_floor``), and the ratio cost / floor.

From the cells the growth law is fitted per target: the slope of log cost against log n
(1 = linear), cost per node and per edge at the largest n. A cell the mechanism cannot reach is
reported as not run, with the reason (a release of Θ(n²) pairs past ``--max-pairs``; a cell over
``--timeout`` seconds).

    python benchmarks/scaling.py                                   # every target, n = 10³ … 10⁶
    python benchmarks/scaling.py --targets gap --sizes 1000,1000000 --batch 4

Not a test: timings depend on the machine and on what else runs on it.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

#: the mechanism-level targets and the step their mechanism releases
TARGETS = {"gaussian": "n×f Gaussian release", "gap": "K noisy aggregations",
           "caribou": "K noisy hops", "dpdgc": "Z (DP-Emb trained per trial)",
           "edgerand": "randomised response on every pair", "lapgraph": "Laplace on every pair, top-m"}
DEFAULT_SIZES = "1000,10000,100000,1000000"
#: sizes by target where the default cannot be reached: DP-Emb's steps grow with the training nodes
#: and each step draws noise for the whole n × h table (Θ(n²) a trial); the pairwise mechanisms
#: draw n(n−1)/2 numbers (their largest cells are limited by --max-pairs)
SIZES = {"dpdgc": "1000,3000,10000", "edgerand": "1000,3000,10000", "lapgraph": "1000,3000,10000"}
#: targets whose release perturbs every node pair (Θ(n²) by the mechanism's definition)
PAIRWISE = {"edgerand", "lapgraph"}


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """The largest resident set size seen while the block runs (sampled every 2 ms)."""

    def __enter__(self) -> "PeakRSS":
        self.peak = rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, rss())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss())


def measure(target_name: str, n: int, batch: int, seed: int = 0, repeats: int = 3) -> dict:
    """One cell, in this process."""
    import torch

    from audit.play.game import AuditSpec, setup_run, trial_seed
    from canaries.base import make as make_canary
    from throughput import draw_floor

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    spec = AuditSpec(target=target_name, dataset=f"csbm:n={n}", epsilon=1.0, seed=seed, trials=8)
    graph, target, _ = setup_run(spec)
    load_s = time.perf_counter() - t0
    world = make_canary("random-edge").worlds(graph, np.random.default_rng(0), target).world(1)
    before_prepare = rss()
    t = time.perf_counter()
    target.prepare(world)
    prepare_s = time.perf_counter() - t
    floor, calls, numbers, _ = draw_floor(target, world, seed, repeats=3)  # its fit also warms the caches
    gens = [torch.Generator().manual_seed(trial_seed(seed, i)) for i in range(1, batch + 1)]
    before = rss()
    cost = math.inf
    with PeakRSS() as peak:
        for _ in range(repeats):  # the best of `repeats`: the machine's other work only slows a run down
            t = time.perf_counter()
            releases = (target.fit_batch(world, gens) if getattr(target, "batched", False)
                        else [target.fit(world, g) for g in gens])
            cost = min(cost, (time.perf_counter() - t) / batch)
            del releases
    return {"target": target_name, "n": n, "edges": int(graph.edge_index.size(1) // 2), "batch": batch,
            "load_s": load_s, "prepare_s": prepare_s, "prepare_bytes": before - before_prepare,
            "cost_s": cost, "bytes_per_trial": (peak.peak - before) / batch, "floor_s": floor,
            "draw_calls": calls, "numbers": numbers,
            "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def run_cell(target: str, n: int, batch: int, timeout: float, max_pairs: float) -> dict:
    if target in PAIRWISE and n * (n - 1) / 2 > max_pairs:
        return {"target": target, "n": n, "skipped": f"not run: the release draws all n(n−1)/2 = "
                                                     f"{n * (n - 1) / 2:.1e} pairs (> {max_pairs:.0e})"}
    cmd = [sys.executable, __file__, "--cell", f"{target}:{n}:{batch}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"target": target, "n": n, "skipped": f"not run: over {timeout:.0f} s (budget-limited)"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"target": target, "n": n, "skipped": f"failed: {last[:160]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def growth(cells: list[dict]) -> str:
    ok = [c for c in cells if "cost_s" in c]
    if len(ok) < 2:
        return "–"
    slope = np.polyfit(np.log([c["n"] for c in ok]), np.log([c["cost_s"] for c in ok]), 1)[0]
    mslope = np.polyfit(np.log([c["n"] for c in ok]), np.log([max(c["bytes_per_trial"], 1.0) for c in ok]), 1)[0]
    big = ok[-1]
    return (f"cost ∝ n^{slope:.2f}, memory ∝ n^{mslope:.2f}; at n = {big['n']:,}: "
            f"{big['cost_s'] / big['n'] * 1e9:.0f} ns per node, {big['cost_s'] / big['edges'] * 1e9:.0f} ns per edge, "
            f"{big['cost_s'] / big['floor_s']:.1f}× the floor")


def table(cells: list[dict]) -> str:
    lines = ["| target | n | undirected edges | batch | cost ms/trial | floor ms/trial (numbers) | cost / floor "
             "| memory MB/trial | prepare s (MB) | process peak GB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in cells:
        if "skipped" in c:
            lines.append(f"| {c['target']} | {c['n']:,} | | | {c['skipped']} | | | | | |")
            continue
        lines.append(f"| {c['target']} | {c['n']:,} | {c['edges']:,} | {c['batch']} | {c['cost_s'] * 1e3:.2f} | "
                     f"{c['floor_s'] * 1e3:.2f} ({c['numbers']:.1e}) | {c['cost_s'] / c['floor_s']:.1f}× | "
                     f"{c['bytes_per_trial'] / 2**20:.1f} | {c['prepare_s']:.1f} ({c['prepare_bytes'] / 2**20:.0f}) | "
                     f"{c['peak_rss'] / 2**30:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--targets", default=",".join(TARGETS))
    p.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated n (default: each target's SIZES)")
    p.add_argument("--batch", type=int, default=8, help="trials per timed fit_batch (default 8)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds a cell may take (default 900)")
    p.add_argument("--max-pairs", type=float, default=1e9, help="largest n(n−1)/2 a pairwise mechanism is run at")
    p.add_argument("--json", default=None, help="write the cells here as they finish (and reuse those there)")
    p.add_argument("--cell", default=None, help=argparse.SUPPRESS)  # TARGET:N:BATCH, in a child process
    args = p.parse_args(argv)
    if args.cell:
        name, n, batch = args.cell.split(":")
        print(json.dumps(measure(name, int(n), int(batch))))
        return 0
    os.environ.setdefault("AUDIT_DATA_DIR", str(ROOT.parent / "shared" / "datasets"))
    done = json.loads(Path(args.json).read_text()) if args.json and Path(args.json).exists() else []
    cells, laws = [], []
    for name in [t.strip() for t in args.targets.split(",") if t.strip()]:
        mine = []
        sizes = SIZES.get(name, args.sizes) if args.sizes == DEFAULT_SIZES else args.sizes
        for n in [int(s) for s in sizes.split(",")]:
            cell = next((c for c in done if c["target"] == name and c["n"] == n), None)  # --json resumes
            if cell is None:
                t = time.time()
                cell = run_cell(name, n, args.batch, args.timeout, args.max_pairs)
                print(f"{name} n={n:,}: {cell.get('skipped') or format(cell['cost_s'] * 1e3, '.1f') + ' ms/trial'} "
                      f"({time.time() - t:.0f} s)", file=sys.stderr, flush=True)
                done.append(cell)
                if args.json:
                    Path(args.json).write_text(json.dumps(done, indent=1))
            mine.append(cell)
        cells += mine
        laws.append(f"- **{name}** ({TARGETS.get(name, '')}): {growth(mine)}")
    print(table(cells))
    print()
    print("\n".join(laws))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
