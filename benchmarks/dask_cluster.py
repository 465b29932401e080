"""One large audit split across a real Dask cluster: the speed-up over the local run.

The same audit (a mechanism-level audit on a large csbm graph, a named canary so the setup is the
same in both) runs in this process (``--jobs 1``) and on a cluster of a scheduler and ``--workers``
worker processes over TCP on localhost (:func:`audit.play.cluster.tcp_cluster`), each in a fresh
results folder. Reported: the trials phase of each (``trials_wall_s``: workers prepare the target
and play; the dataset load and the setup are the same in both and excluded), the speed-up, the
tasks each worker ran, and whether the two stored the same trials (they must: bitwise).

Both runs are timed warm: this process has imported the project before its local run, and each
worker imports it (unless ``--cold``) before the cluster's run, so neither trials phase
pays the imports (~10-20 s of a fresh Python process importing torch and the targets; counted
in the trials phase, a cold worker's start made the first benchmark read 0.19×). The audit is
split into 4 chunks per worker (``jobs`` = the workers): with ``jobs=1`` it was 4 chunks in all,
2 tasks per worker.

    python benchmarks/dask_cluster.py                       # gap, csbm:n=30000, 800 trials, 2 workers
    python benchmarks/dask_cluster.py --target gaussian --dataset csbm:n=100000 --trials 400

Not a test: on a machine whose cores other work shares, the speed-up says as much about that work.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.play.cluster import tasks_done, tcp_cluster  # noqa: E402
from audit.play.game import AuditSpec, run_audit  # noqa: E402
from audit.records.store import Store  # noqa: E402


def _trials(result) -> list:
    with Store(result["store"]) as s:
        return s.trials(result["key"])


def _warm() -> None:
    """Import what a worker's chunk imports (run on every worker before the timed run)."""
    import audit.play.trial_runner  # noqa: F401
    import targets  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="gap")
    p.add_argument("--dataset", default="csbm:n=30000")
    p.add_argument("--trials", type=int, default=800)
    p.add_argument("--canary", default="low-degree-edge")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--cold", action="store_true", help="do not import the project on the workers first")
    args = p.parse_args(argv)
    from dask.distributed import Client

    spec = AuditSpec(target=args.target, dataset=args.dataset, trials=args.trials, canary=args.canary,
                     level="mechanism", seed=0)
    with tempfile.TemporaryDirectory(prefix="dask-bench-") as out:
        local = run_audit(spec, out=Path(out) / "local", progress=False)
        t = time.perf_counter()
        with tcp_cluster(workers=args.workers) as address:
            if not args.cold:
                with Client(address) as client:
                    client.run(_warm)
            up = time.perf_counter() - t
            remote = run_audit(spec, out=Path(out) / "cluster", progress=False, backend="dask", scheduler=address,
                               jobs=args.workers)
            with Client(address) as client:
                done = tasks_done(client)
        same = _trials(local) == _trials(remote)
    load = " ".join(open("/proc/loadavg").read().split()[:3]) if os.path.exists("/proc/loadavg") else "?"
    print(f"{args.target} on {args.dataset}, {args.trials} trials, canary {args.canary}; "
          f"{os.cpu_count()} cores, load average {load}")
    print("| run | trials phase s | trials/s | speed-up |\n|---|---:|---:|---:|")
    for label, r in (("local, 1 process", local), (f"dask, {args.workers} worker processes over TCP", remote)):
        print(f"| {label} | {r['trials_wall_s']:.1f} | {r['trials'] / r['trials_wall_s']:.1f} | "
              f"{local['trials_wall_s'] / r['trials_wall_s']:.2f}× |")
    print(f"\ncluster start{'' if args.cold else ' and imports'} {up:.1f} s; tasks per worker {sorted(done.values())}; "
          f"trials {'bitwise equal' if same else 'DIFFERENT'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
