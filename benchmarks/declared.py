"""The declared-model check (audit.declared_model.declared): false-alarm rate, power on the deviants, run time.

    python benchmarks/declared.py [--seeds 200] [--n 8] [--power-seeds 20]
    python benchmarks/declared.py --config caribou hops=1 --config gap [--config ...] [--seeds 100]

* false alarms: the correct ``gaussian`` target on csbm over ``--seeds`` seeds, at the default
  alpha (1e-3) and at 0.05 (the Bonferroni-combined test should stay at or under alpha), plus the
  fraction of each single test's p-values under 0.05 (≈ 0.05 when calibrated);
* power: each deviant of ``tests/deviants.py`` over ``--power-seeds`` seeds: how often caught, and
  the reasons given;
* time: one check (n per world) on csbm for gaussian, caribou (edge, hops=2), gap (edge, hops=1).

With ``--config NAME [KEY=VALUE ...]`` (repeatable) it measures instead, per configuration, the
check's false-alarm share as ``run`` plays it: per seed the default run's setup (dataset, pinned
target, auto attack and canary, canary pair from the seed), then ``check_declared`` at the game's
``DECLARED_CHECK_N`` and default alpha; a false alarm is ``ok == False`` on a correct target.
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.declared_model import declared  # noqa: E402
from audit.play.data import load  # noqa: E402
from canaries.base import make as make_canary  # noqa: E402
from canaries.edge import ExplicitEdge  # noqa: E402
from graphs.ops import degrees  # noqa: E402
from targets.base import build, replace_config  # noqa: E402

DEVIANTS = ["SmallNoise", "LaplaceNoise", "UniformNoise", "ReusedNoise", "SelfLoopMean", "SymNormMean",
            "RowBroadcastNoise", "ColumnBroadcastNoise", "WorldDependentStd", "PrivateCalibration",
            "PartlyReusedNoise", "LeakyView"]


def pinned(name, graph, **params):
    t = build(name, **params)
    pins = t.public_params(graph)
    return type(t)(replace_config(t.config, **pins)) if pins else t


def config_false_alarms(name: str, params: dict[str, str], seeds: int, first: int = 0) -> str:
    """One table row: the declared-model check's false alarms on `name` over `seeds` default-run setups."""
    from attacks.base import auto_attack
    from attacks.base import make as make_attack
    from audit.play.game import DECLARED_CHECK_N, AuditSpec, setup_run
    from canaries.base import auto_canary

    alarms, statuses, tests, reasons = 0, collections.Counter(), [], collections.Counter()
    t0 = time.time()
    for s in range(first, first + seeds):
        graph, t, _ = setup_run(AuditSpec(target=name, params=params, seed=s))
        attack = make_attack(auto_attack(t, graph))
        pair = make_canary(auto_canary(t, graph, attack.name)).worlds(graph, np.random.default_rng([s, 0xCA4A]), t)
        check = declared.check_declared(t, pair, seed=s, attack=attack, graph=graph, n=DECLARED_CHECK_N)
        alarms += not check.ok
        if not check.ok:
            reasons[check.reason[:120]] += 1
        statuses[",".join(st.status for st in check.steps)] += 1
        tests.append(check.tests)
    label = name + "".join(f" {k}={v}" for k, v in params.items())
    return (f"| {label} | {seeds} | {alarms} ({alarms / seeds:.3f}) | {dict(statuses)} | {int(np.median(tests))} | "
            f"{(time.time() - t0) / seeds:.1f}s |" + (f" {dict(reasons)}" if reasons else ""))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--power-seeds", type=int, default=20)
    ap.add_argument("--config", nargs="+", action="append", default=[], metavar="NAME [KEY=VALUE]",
                    help="measure the check's false alarms on this correct configuration (repeatable)")
    args = ap.parse_args()
    if args.config:
        print("| configuration | seeds | false alarms (ok = False) | step statuses | tests per check | time per seed |")
        print("|---|---|---|---|---|---|")
        for name, *kv in args.config:
            print(config_false_alarms(name, dict(x.split("=", 1) for x in kv), args.seeds), flush=True)
        return
    g = load("csbm")

    target = pinned("gaussian", g)
    pair = make_canary("random-edge").worlds(g, np.random.default_rng(0), target)
    fails = {1e-3: 0, 0.05: 0}
    single = collections.defaultdict(list)
    t0 = time.time()
    for s in range(args.seeds):
        check = declared.check_declared(target, pair, seed=10_000 + s, n=args.n)
        ps = [t.p for st in check.steps for t in st.tests if t.p is not None]
        for a in fails:
            fails[a] += min(ps) * len(ps) < a
        for st in check.steps:
            for t in st.tests:
                if t.p is not None:
                    single[t.name].append(t.p)
    print(f"false alarms, gaussian on csbm, n={args.n} per world, {args.seeds} seeds "
          f"({time.time() - t0:.1f}s): " + ", ".join(f"{k}/{args.seeds} at alpha={a:g}" for a, k in fails.items()))
    for name, ps in single.items():
        ps = np.asarray(ps)
        print(f"  {name:15s} single-test p < 0.05: {np.mean(ps < 0.05):.3f} of {ps.size}")

    top = int(degrees(g).argmax())
    nbrs = set(g.edge_index[1][g.edge_index[0] == top].tolist())
    v = next(i for i in range(g.num_nodes) if i != top and i not in nbrs)
    dpair = ExplicitEdge(top, v).worlds(g, np.random.default_rng(0))
    print(f"\npower, n={args.n} per world, {args.power_seeds} seeds")
    for name in DEVIANTS:
        t = pinned(f"tests.deviants:{name}", g)
        reasons = collections.Counter()
        caught = 0
        for s in range(args.power_seeds):
            check = declared.check_declared(t, dpair, seed=20_000 + s, n=args.n, attack="mechanism-lrt")
            caught += not check.ok
            reasons[check.reason.split(": ", 1)[-1].split(" (")[0] if not check.ok else
                    ("reported: " + ", ".join(check.unread_views) + (" + leak" if check.leaks else ""))] += 1
        print(f"  {name:22s} caught {caught}/{args.power_seeds}  {dict(reasons)}")

    print(f"\ntime of one check (n={args.n} per world, 2·n fits, after a first warm-up check)")
    for name, kw in (("gaussian", {}), ("caribou", {"hops": 2}), ("gap", {"hops": 1})):
        t = pinned(name, g, **kw)
        p = make_canary("random-edge").worlds(g, np.random.default_rng(0), t)
        t0 = time.time()
        declared.check_declared(t, p, seed=0, n=args.n, graph=g)
        first = time.time() - t0
        t0 = time.time()
        check = declared.check_declared(t, p, seed=1, n=args.n, graph=g)
        print(f"  {name:9s} {kw!s:14s} first {first:.2f}s, then {time.time() - t0:.2f}s  ok={check.ok} "
              f"allows={check.allows_declared_model} steps={[s.status for s in check.steps]}")


if __name__ == "__main__":
    main()
