"""Does every attack the default's pool offers a target actually play there?

For each built-in target (at a fast configuration) this lists the default's candidates
(:func:`audit.plan.portfolio.candidates`) and plays a few trials of each distinct (level, attack) on the
first canary the pool pairs it with, and of each canary with the first candidate that plays it
(``--every-canary``: every (level, attack, canary)): a candidate that raises wastes the pilot share it was charged and shows as
"failed" in the portfolio's table, so each failure here is a bug in an attack's ``applies_to``, its
levels or units, or in the target's views.

    python benchmarks/portfolio_smoke.py                 # every built-in target
    python benchmarks/portfolio_smoke.py --target gcon --trials 8

Prints one row per (target, level, attack): ``ok``, or the exception; exits 1 on any failure.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace

from audit.play import game
from audit.plan import portfolio
from targets.base import parse_assignments

#: each target at a configuration whose trials take well under a second (benchmarks/portfolio_false_alarms.md)
FAST = {
    "gaussian": ("csbm", []),
    "gcn": ("csbm", ["epochs=5"]),
    "caribou": ("csbm", ["encoder_epochs=5"]),
    "dpdgc": ("csbm", ["unit=edge", "epochs_encoder=2", "epochs_classifier=1"]),
    "gap": ("csbm", ["encoder_epochs=1", "epochs=1"]),
    "gcon": ("csbm:n=200", []),
    "heterpoisson": ("csbm", ["hidden=16", "steps=2", "sampling_rate=0.5", "noise=gaussian"]),
    "dpsgd-gcn": ("csbm", []),
    "edgerand": ("csbm", []),
    "lapgraph": ("csbm", []),
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", action="append", help="a target (repeatable; default: every built-in one)")
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--every-canary", action="store_true", help="every (level, attack, canary), not the first canary")
    args = p.parse_args()
    failures = 0
    for name in args.target or list(FAST):
        dataset, assignments = FAST.get(name, ("csbm", []))
        spec = game.AuditSpec(target=name, dataset=dataset, params=parse_assignments(assignments), seed=0)
        graph, target, _ = game.setup_run(spec)
        pool, skipped = portfolio.candidates(target, graph)
        seen = set()
        for cand in pool:
            keys = {(cand.level, cand.attack, cand.canary if args.every_canary else "")}
            if not args.every_canary:
                keys.add(("", "", cand.canary))  # each canary once too, with the first candidate playing it
            if keys <= seen:
                continue
            seen |= keys
            start = time.time()
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    game.run_audit(replace(spec, attack=cand.attack, canary=cand.canary, level=cand.level,
                                           trials=args.trials, estimator="cp"), out=tmp, progress=False)
                    status = "ok"
                except Exception as err:  # noqa: BLE001 - each failure is reported, then the next
                    status, failures = f"FAILED: {type(err).__name__}: {err}"[:200], failures + 1
            print(f"{name:14s} {cand.level:9s} {cand.attack:22s} {cand.canary:20s} {time.time() - start:6.1f}s {status}",
                  flush=True)
        for s in skipped:
            print(f"{name:14s} {str(s['level']):9s} {s['attack']:22s} {'-':20s} {'':7s} skipped: {s['why']}", flush=True)
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
