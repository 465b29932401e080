"""Measure each built-in target's seconds per trial, by view, at its default configuration on csbm:
the numbers behind the targets' ``trial_cost`` tables (run alone on an idle machine, ``--jobs 1``).

    python benchmarks/calibrate_costs.py [target[,key=value...] ...] > costs.json
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import replace

from audit.play import game
from audit.plan import portfolio
from audit.play.run_spec import AuditSpec
from targets import base as targets

TRIALS = {"mechanism": 100, "trace": 40, "weights": 16, "api": 16}


def measure(arg: str) -> dict[str, dict[str, float]]:
    name, *pairs = arg.split(",")
    spec = AuditSpec(target=name, trial_stream=7, params=dict(p.split("=", 1) for p in pairs))
    setup = game.setup_run(spec)
    pool, _ = portfolio.candidates(setup.target, setup.graph)
    out: dict[str, dict[str, float]] = {}
    for level in setup.target.levels:
        cand = next((c for c in pool if c.level == level and not c.attack.startswith("learned")), None)
        if cand is None:
            continue
        run = replace(spec, attack=cand.attack, canary=cand.canary, level=level, trials=TRIALS[level])
        t0 = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            result = game.run_audit(run, out=tmp, progress=False, fresh=True)
        wall = time.time() - t0
        per_trial = (result.trials_wall_s or wall) / max(1, result.trials_played or run.trials)
        out[level] = {"per_trial_s": round(per_trial, 5), "setup_s": round(wall - (result.trials_wall_s or 0.0), 3),
                      "attack": cand.attack, "canary": cand.canary}
        print(name, level, out[level], file=sys.stderr)
    return out


if __name__ == "__main__":
    names = sys.argv[1:] or targets.available()
    print(json.dumps({n: measure(n) for n in names}, indent=1))  # noqa: T201
